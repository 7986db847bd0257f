//! Compiles a spec file: TOML syntax, then serde into the raw types (with
//! key paths), then the JSON Schema as a second structural check, then the
//! semantic checks that turn raw types into the domain types of `model`.
//! Every problem becomes a `SpecError` with file:line:col and key path;
//! semantic problems are all collected, not just the first.
//!
//! This module owns the entry points (`compile`, `compile_regression`), the
//! shared context `Cx` that collects errors, and the walk over a spec's
//! sections; each section is checked in its own submodule.

mod cost;
mod load;
mod matrix;
pub(crate) mod media;
mod models;
mod parse;
mod quality;
mod regression;
mod retrieval;
mod slo;
mod structured;
mod targets;
mod telemetry;
mod tensors;
mod workloads;

use std::collections::BTreeMap;
use std::path::Path;

use crate::diag::{Locator, SpecError, SpecErrors};
use crate::model::*;
use crate::raw::*;

pub use load::{RampError, ramp_levels};
pub use regression::default_gates;
pub use targets::placeholders;

use parse::parse_raw;

/// Parses and checks a spec. `file` names it in messages; relative paths in
/// it (tokenizers, datasets, length files) resolve against `base_dir`.
pub fn compile(file: &str, source: &str, base_dir: &Path) -> Result<Spec, SpecErrors> {
    let loc = Locator::new(file, source);
    let raw = parse_raw(&loc, source)?;
    let repo = crate::files::repository(base_dir);
    let mut cx = Cx {
        loc: &loc,
        errors: Vec::new(),
        base_dir,
        repo: &repo,
        sizes: crate::budget::Sizes::default(),
    };
    let spec = cx.spec(raw, file, source);
    if cx.errors.is_empty() {
        Ok(spec)
    } else {
        let mut errors = cx.errors;
        errors.sort_by_key(|e| (e.line == 0, e.line, e.col));
        Err(SpecErrors(errors))
    }
}

/// Only the `[regression]` settings of a spec's text, every default
/// applied: what `diff` and `bless` need from the spec embedded in a
/// results file, without touching the files the rest of the spec may name
/// (datasets, tokenizers), which need not exist where results are judged.
pub fn compile_regression(file: &str, source: &str) -> Result<Regression, SpecErrors> {
    let loc = Locator::new(file, source);
    let raw = parse_raw(&loc, source)?;
    let mut cx = Cx {
        loc: &loc,
        errors: Vec::new(),
        base_dir: Path::new("."),
        repo: Path::new("."),
        sizes: crate::budget::Sizes::default(),
    };
    let measures = quality::Measures::of(raw.quality.as_ref());
    let regression = cx.regression(raw.regression.unwrap_or_default(), &raw.name, measures);
    if cx.errors.is_empty() {
        Ok(regression)
    } else {
        Err(SpecErrors(cx.errors))
    }
}

struct Cx<'a> {
    loc: &'a Locator,
    errors: Vec<SpecError>,
    base_dir: &'a Path,
    /// The repository of the spec: the files it names inside it are not
    /// read through a link that leads out (`files::check_link`).
    repo: &'a Path,
    /// The sizes of the files read, for the memory budget.
    sizes: crate::budget::Sizes,
}

/// A name that is safe as a part of a file name: letters, digits, `-`,
/// `_` and `.`, not starting with `.` (no `..`, no hidden files), at most
/// [`MAX_NAME_CHARS`](crate::limits::MAX_NAME_CHARS) characters.
fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && s.len() <= crate::limits::MAX_NAME_CHARS
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A number for messages: as written for everyday sizes, in scientific
/// notation for huge or tiny ones (`1e300`, not 301 digits).
fn num(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-6..1e15).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        crate::fmt_number(x)
    }
}

/// A name for messages: the name itself when it is a short printable one,
/// else an escaped excerpt.
fn shown(s: &str) -> String {
    crate::files::excerpt(s)
}
impl Cx<'_> {
    fn err(&mut self, key: &str, message: impl Into<String>, hint: Option<String>) {
        let e = self.loc.error(key, message, hint);
        self.errors.push(e);
    }
    fn key_err(&mut self, key: &str, message: impl Into<String>, hint: Option<String>) {
        let e = self.loc.key_error(key, message, hint);
        self.errors.push(e);
    }

    fn positive(&mut self, key: &str, v: Option<f64>, default: f64, max: Option<f64>) -> f64 {
        match v {
            None => default,
            Some(x) if x > 0.0 && x.is_finite() && max.is_none_or(|m| x <= m) => x,
            Some(x) => {
                let range = match max {
                    Some(m) => format!("a number in (0, {}]", num(m)),
                    None => "a number > 0".to_string(),
                };
                self.err(key, format!("expected {range}, found {}", num(x)), None);
                default
            }
        }
    }

    /// A whole number in `[min, max]`; otherwise an error naming the key.
    fn count_in(&mut self, key: &str, v: Option<u64>, min: u64, max: u64, what: &str) {
        if let Some(x) = v {
            if x < min || x > max {
                self.err(
                    key,
                    format!("expected {what} between {min} and {max}, found {x}"),
                    None,
                );
            }
        }
    }

    /// A finite number in `[min, max]`; otherwise an error naming the key.
    fn float_in(&mut self, key: &str, v: Option<f64>, min: f64, max: f64) -> bool {
        match v {
            Some(x) if !(x.is_finite() && (min..=max).contains(&x)) => {
                self.err(
                    key,
                    format!(
                        "expected a number in [{}, {}], found {}",
                        num(min),
                        num(max),
                        num(x)
                    ),
                    None,
                );
                false
            }
            _ => true,
        }
    }

    fn spec(&mut self, raw: RawSpec, file: &str, source: &str) -> Spec {
        if !is_slug(&raw.name) {
            self.err(
                "name",
                format!(
                    "expected a name of at most 64 letters, digits, `-`, `_` or `.` (not starting with `.`), found \"{}\"",
                    shown(&raw.name)
                ),
                Some("the name becomes a file name: baselines/<name>.json".into()),
            );
        }
        let targets: BTreeMap<_, _> = raw
            .targets
            .into_iter()
            .filter_map(|(n, t)| self.target(&n, t).map(|t| (n, t)))
            .collect();
        let models: BTreeMap<_, _> = raw
            .models
            .into_iter()
            .filter_map(|(n, m)| self.model(&n, m).map(|m| (n, m)))
            .collect();
        // Counted before compiling, so that a bad trace is not also a
        // point without an end.
        let traces = raw.workloads.values().any(|w| w.trace.is_some());
        let (mixes, plain): (Vec<_>, Vec<_>) = raw
            .workloads
            .into_iter()
            .partition(|(_, w)| w.mix.is_some());
        let mut workloads: BTreeMap<_, _> = plain
            .into_iter()
            .filter_map(|(n, w)| self.workload(&n, w).map(|w| (n, w)))
            .collect();
        let mix_names: Vec<String> = mixes.iter().map(|(n, _)| n.clone()).collect();
        for (n, w) in mixes {
            if let Some(m) = self.mix(&n, w, &workloads, &mix_names) {
                workloads.insert(n, m);
            }
        }
        for (what, empty) in [
            ("targets", targets.is_empty()),
            ("models", models.is_empty()),
            ("workloads", workloads.is_empty()),
        ] {
            if empty && !self.errors.iter().any(|e| e.key.starts_with(what)) {
                let example = match what {
                    "targets" => "[targets.sim]\nkind = \"sim\"",
                    "models" => "[models.llama-8b]\npreset = \"llama-3.1-8b\"",
                    _ => "[workloads.chat]\ninput_tokens = 512\noutput_tokens = 128",
                };
                self.errors.push(self.loc.error_at_span(
                    None,
                    what,
                    format!("the spec defines no {what}"),
                    Some(format!("add at least one, e.g.\n{example}")),
                ));
            }
        }
        self.dialects(&targets, &workloads);
        let load = self.load(raw.load, traces);
        let matrix = raw
            .matrix
            .map(|m| self.matrix(m, &targets, &models, &workloads))
            .unwrap_or_default();
        let measures = quality::Measures::of(raw.quality.as_ref());
        let slo = raw.slo.map(|s| self.slo(s, measures)).unwrap_or_default();
        let goodput = raw
            .goodput
            .map(|g| Goodput {
                ttft: g.ttft,
                tpot: g.tpot,
                e2e: g.e2e,
            })
            .unwrap_or_default();
        self.stream_gates(&slo, &goodput, &workloads);
        self.virtual_retrieval(&targets, &workloads);
        self.search_target(&load, !slo.is_empty(), !goodput.is_empty());
        let cost = raw.cost.map(|c| self.cost(c)).unwrap_or_default();
        let telemetry = self.telemetry(raw.telemetry.unwrap_or_default());
        let validity = self.validity(raw.validity.unwrap_or_default());
        let quality = raw
            .quality
            .map(|q| self.quality(q, &targets, &models, &matrix));
        let regression = self.regression(raw.regression.unwrap_or_default(), &raw.name, measures);
        Spec {
            name: raw.name,
            description: raw.description,
            seed: raw.seed.unwrap_or(0),
            path: file.into(),
            source: source.to_string(),
            targets,
            models,
            workloads,
            load,
            matrix,
            slo,
            goodput,
            cost,
            telemetry,
            validity,
            regression,
            quality,
            locator: self.loc.clone(),
            sizes: std::mem::take(&mut self.sizes),
        }
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
