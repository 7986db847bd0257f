//! Compiles a spec file: TOML syntax, then serde into the raw types (with
//! key paths), then the JSON Schema as a second structural check, then the
//! semantic checks that turn raw types into the domain types of `model`.
//! Every problem becomes a `SpecError` with file:line:col and key path;
//! semantic problems are all collected, not just the first.

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::diag::{Locator, Seg, SpecError, SpecErrors, parse_path, suggestion};
use super::dist::Empirical;
use super::model::*;
use super::raw::*;
use super::{Dist, Duration, Percent, Threshold};
use crate::catalog;
use infer_bench_results::metric::{Kind, Metric};

/// Parses and checks a spec. `file` names it in messages; relative paths in
/// it (tokenizers, datasets, length files) resolve against `base_dir`.
pub fn compile(file: &str, source: &str, base_dir: &Path) -> Result<Spec, SpecErrors> {
    let loc = Locator::new(file, source);
    let raw = parse_raw(&loc, source)?;
    super::schema::validate_structure(&loc, source)?;
    let mut cx = Cx {
        loc: &loc,
        errors: Vec::new(),
        base_dir,
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
    };
    let regression = cx.regression(raw.regression.unwrap_or_default(), &raw.name);
    if cx.errors.is_empty() {
        Ok(regression)
    } else {
        Err(SpecErrors(cx.errors))
    }
}

/// TOML syntax and serde, with positions and key paths.
fn parse_raw(loc: &Locator, source: &str) -> Result<RawSpec, SpecErrors> {
    let de = toml::Deserializer::parse(source).map_err(|e| {
        let msg = e.message().trim_end().to_string();
        loc.error_at_span(e.span(), "", format!("invalid TOML: {msg}"), None)
    })?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        SpecErrors::from(serde_error(loc, &path, inner.message(), inner.span()))
    })
}

/// The backticked names in a serde message (`unknown field `x`, expected ...`).
fn backticked(s: &str) -> Vec<&str> {
    s.split('`').skip(1).step_by(2).collect()
}

/// Rewrites serde's messages into ours: the key path, what was found, what
/// was expected, and a did-you-mean where it helps.
fn serde_error(
    loc: &Locator,
    path: &str,
    message: &str,
    span: Option<std::ops::Range<usize>>,
) -> SpecError {
    let path = if path == "." { "" } else { path };
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let names = backticked(rest);
        if let Some((bad, expected)) = names.split_first() {
            let key = if path.ends_with(bad) {
                path.to_string()
            } else {
                join(bad)
            };
            let list = if expected.is_empty() {
                "no keys here".to_string()
            } else {
                format!("expected one of: {}", expected.join(", "))
            };
            return loc.error_at_span(
                span.or_else(|| loc.key_span(&parse_path(&key))),
                &key,
                format!("unknown key `{bad}`; {list}"),
                suggestion(bad, expected.iter().copied()),
            );
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let names = backticked(rest);
        if let Some((bad, expected)) = names.split_first() {
            return loc.error_at_span(
                span.or_else(|| loc.span(&parse_path(path))),
                path,
                format!(
                    "unknown value \"{bad}\"; expected one of: {}",
                    expected.join(", ")
                ),
                suggestion(bad, expected.iter().copied()),
            );
        }
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        let names = backticked(rest);
        let field = names.first().copied().unwrap_or(rest);
        return loc.error_at_span(
            span.or_else(|| loc.span(&parse_path(path))),
            path,
            format!("missing key `{field}`"),
            Some(format!(
                "add `{field} = ...` to {}",
                if path.is_empty() {
                    "the top of the file".to_string()
                } else {
                    format!("[{path}]")
                }
            )),
        );
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            return loc.error_at_span(
                span.or_else(|| loc.span(&parse_path(path))),
                path,
                format!("expected {}, found {found}", plain_type(expected)),
                None,
            );
        }
    }
    if let Some(rest) = message.strip_prefix("invalid value: ") {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            return loc.error_at_span(
                span.or_else(|| loc.span(&parse_path(path))),
                path,
                format!("expected {expected}, found {found}"),
                None,
            );
        }
    }
    let hint = if message.contains("expected a duration") {
        Some(format!("units are {}", super::duration::DURATION_UNITS))
    } else if message.contains("expected a positive rate") {
        Some("units are /s, /min, /h".to_string())
    } else {
        None
    };
    loc.error_at_span(
        span.or_else(|| loc.span(&parse_path(path))),
        path,
        message.trim_end().to_string(),
        hint,
    )
}

/// serde's Rust type names in words.
fn plain_type(expected: &str) -> String {
    match expected.trim() {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number >= 0".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list".into(),
        "a map" => "a table".into(),
        other => other.to_string(),
    }
}

struct Cx<'a> {
    loc: &'a Locator,
    errors: Vec<SpecError>,
    base_dir: &'a Path,
}

fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

const PLACEHOLDERS: &[&str] = &[
    "port",
    "host",
    "model",
    "model.served_name",
    "model.weights",
    "model.tokenizer",
    "precision",
    "precision.arg",
    "precision.weights",
    "precision.dtype",
    "spec.dir",
];

/// The `{...}` placeholders in a template string.
pub fn placeholders(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                out.push(&after[..close]);
                rest = &after[close + 1..];
            }
            None => break,
        }
    }
    out
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
                    Some(m) => format!("a number in (0, {m}]"),
                    None => "a number > 0".to_string(),
                };
                self.err(key, format!("expected {range}, found {x}"), None);
                default
            }
        }
    }

    fn spec(&mut self, raw: RawSpec, file: &str, source: &str) -> Spec {
        if !is_slug(&raw.name) {
            self.err(
                "name",
                format!(
                    "expected a name of letters, digits, `-`, `_` or `.`, found \"{}\"",
                    raw.name
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
        let load = self.load(raw.load);
        let matrix = raw
            .matrix
            .map(|m| self.matrix(m, &targets, &models, &workloads))
            .unwrap_or_default();
        let slo = raw.slo.map(|s| self.slo(s)).unwrap_or_default();
        let goodput = raw
            .goodput
            .map(|g| Goodput {
                ttft: g.ttft,
                tpot: g.tpot,
                e2e: g.e2e,
            })
            .unwrap_or_default();
        let cost = raw.cost.map(|c| self.cost(c)).unwrap_or_default();
        let telemetry = self.telemetry(raw.telemetry.unwrap_or_default());
        let validity = self.validity(raw.validity.unwrap_or_default());
        let regression = self.regression(raw.regression.unwrap_or_default(), &raw.name);
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
            locator: self.loc.clone(),
        }
    }

    fn target(&mut self, name: &str, t: RawTarget) -> Option<Target> {
        let k = |f: &str| format!("targets.{name}.{f}");
        if !is_slug(name) {
            self.key_err(
                &format!("targets.{name}"),
                format!(
                    "expected a target name of letters, digits, `-`, `_` or `.`, found \"{name}\""
                ),
                None,
            );
        }
        let before = self.errors.len();
        let mut sim = None;
        match t.kind {
            TargetKind::Sim => {
                let openai_only: [(&str, bool); 7] = [
                    ("base_url", t.base_url.is_some()),
                    ("api_key_env", t.api_key_env.is_some()),
                    ("headers", !t.headers.is_empty()),
                    ("tls_insecure", t.tls_insecure.is_some()),
                    ("ca_cert", t.ca_cert.is_some()),
                    ("launch", t.launch.is_some()),
                    ("metrics_url", t.metrics_url.is_some()),
                ];
                for (key, given) in openai_only {
                    if given {
                        self.key_err(&k(key), format!("`{key}` is not a setting of a simulator target"), Some("kind = \"sim\" runs in-process; remove the key or use kind = \"openai\"".into()));
                    }
                }
                let gpu = t.gpu.clone().unwrap_or_else(|| "h100-sxm".into());
                if catalog::gpu(&gpu).is_none() {
                    let ids: Vec<&str> = catalog::GPUS.iter().map(|g| g.id).collect();
                    self.err(
                        &k("gpu"),
                        format!(
                            "unknown GPU \"{gpu}\"; the simulator knows: {}",
                            ids.join(", ")
                        ),
                        suggestion(&gpu, ids.iter().copied()),
                    );
                }
                let tune = t.sim.clone().unwrap_or_default();
                let sk = |f: &str| format!("targets.{name}.sim.{f}");
                sim = Some(SimTarget {
                    gpu,
                    gpus: t.gpus.unwrap_or(1),
                    max_num_seqs: tune.max_num_seqs.unwrap_or(256),
                    max_batched_tokens: tune.max_batched_tokens.unwrap_or(8192),
                    memory_fraction: self.positive(
                        &sk("memory_fraction"),
                        tune.memory_fraction,
                        0.9,
                        Some(1.0),
                    ),
                    compute_efficiency: self.positive(
                        &sk("compute_efficiency"),
                        tune.compute_efficiency,
                        0.6,
                        Some(1.0),
                    ),
                    bandwidth_efficiency: self.positive(
                        &sk("bandwidth_efficiency"),
                        tune.bandwidth_efficiency,
                        0.75,
                        Some(1.0),
                    ),
                    step_overhead: tune.step_overhead.unwrap_or(Duration::from_millis(1)),
                    slowdown: self.positive(&sk("slowdown"), tune.slowdown, 1.0, None),
                    noise: match tune.noise {
                        Some(n) if !(0.0..0.5).contains(&n) => {
                            self.err(
                                &sk("noise"),
                                format!("expected a number in [0, 0.5), found {n}"),
                                None,
                            );
                            0.0
                        }
                        n => n.unwrap_or(0.0),
                    },
                    kv_cache_tokens: tune.kv_cache_tokens,
                    tokens_per_event: tune.tokens_per_event.unwrap_or(1),
                });
                if t.gpus == Some(0) {
                    self.err(&k("gpus"), "expected at least 1 GPU, found 0", None);
                }
            }
            TargetKind::Openai => {
                for (key, given) in [
                    ("gpu", t.gpu.is_some()),
                    ("gpus", t.gpus.is_some()),
                    ("sim", t.sim.is_some()),
                ] {
                    if given {
                        self.key_err(
                            &k(key),
                            format!("`{key}` is a setting of simulator targets only"),
                            Some("remove it, or set kind = \"sim\"".into()),
                        );
                    }
                }
                match (&t.base_url, &t.launch) {
                    (None, None) => self.key_err(
                        &format!("targets.{name}"),
                        "an openai target needs `base_url`",
                        Some("e.g. base_url = \"http://127.0.0.1:8000/v1\"".into()),
                    ),
                    (Some(url), _)
                        if !(url.starts_with("http://") || url.starts_with("https://")) =>
                    {
                        self.err(
                            &k("base_url"),
                            format!("expected an http:// or https:// URL, found \"{url}\""),
                            None,
                        )
                    }
                    (Some(url), None) if url.contains("{port}") => self.err(
                        &k("base_url"),
                        "`{port}` in base_url needs a [launch] block that starts the server",
                        None,
                    ),
                    _ => {}
                }
                if let Some(url) = &t.metrics_url {
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        self.err(
                            &k("metrics_url"),
                            format!("expected an http:// or https:// URL, found \"{url}\""),
                            None,
                        );
                    }
                }
                if let Some(env) = &t.api_key_env {
                    if env.is_empty() || env.contains(['=', ' ']) {
                        self.err(&k("api_key_env"), format!("expected the name of an environment variable, found \"{env}\""), Some("the key itself never goes in a spec: api_key_env = \"OPENAI_API_KEY\"".into()));
                    }
                }
            }
        }
        let launch = t.launch.map(|l| {
            if l.command.is_empty() {
                self.err(
                    &k("launch.command"),
                    "expected a program and its arguments, found an empty list",
                    None,
                );
            }
            for (i, arg) in l.command.iter().enumerate() {
                for p in placeholders(arg) {
                    if !PLACEHOLDERS.contains(&p) && !p.starts_with("env.") {
                        self.err(
                            &format!("targets.{name}.launch.command[{i}]"),
                            format!(
                                "unknown placeholder `{{{p}}}`; expected one of: {}, {{env.NAME}}",
                                PLACEHOLDERS
                                    .iter()
                                    .map(|p| format!("{{{p}}}"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                            suggestion(p, PLACEHOLDERS.iter().copied())
                                .map(|s| s.replace('`', "`{").replace("{`?", "}`?")),
                        );
                    }
                }
            }
            let ready = l.ready.unwrap_or_else(|| "/health".into());
            if !ready.starts_with('/') {
                self.err(
                    &k("launch.ready"),
                    format!("expected an HTTP path such as \"/health\", found \"{ready}\""),
                    None,
                );
            }
            Launch {
                command: l.command,
                env: l.env,
                cwd: l.cwd,
                ready,
                startup_timeout: l.startup_timeout.unwrap_or(Duration::from_secs(600)),
                stop_grace: l.stop_grace.unwrap_or(Duration::from_secs(10)),
            }
        });
        let base_url = match (&t.kind, t.base_url, &launch) {
            (TargetKind::Openai, None, Some(_)) => Some("http://127.0.0.1:{port}/v1".to_string()),
            (_, url, _) => url.map(|u| u.trim_end_matches('/').to_string()),
        };
        (self.errors.len() == before).then(|| Target {
            name: name.to_string(),
            kind: t.kind,
            base_url,
            api_key_env: t.api_key_env,
            headers: t.headers,
            metrics_url: t.metrics_url,
            tls_insecure: t.tls_insecure.unwrap_or(false),
            ca_cert: t.ca_cert,
            launch,
            gpu_ids: t.gpu_ids,
            sim,
        })
    }

    fn model(&mut self, name: &str, m: RawModel) -> Option<(Model, BTreeMap<String, Precision>)> {
        let before = self.errors.len();
        let k = |f: &str| format!("models.{name}.{f}");
        if !is_slug(name) {
            self.key_err(
                &format!("models.{name}"),
                format!(
                    "expected a model name of letters, digits, `-`, `_` or `.`, found \"{name}\""
                ),
                None,
            );
        }
        if let Some(t) = &m.tokenizer {
            // Read at run time, once per point; a missing file is caught here.
            let path = self.base_dir.join(t);
            if let Err(e) = std::fs::metadata(&path).and_then(|md| {
                md.is_file()
                    .then_some(())
                    .ok_or_else(|| std::io::Error::other("not a file"))
            }) {
                self.err(
                    &k("tokenizer"),
                    format!("cannot read tokenizer {}: {e}", path.display()),
                    Some(
                        "give the path of a Hugging Face tokenizer.json, relative to the spec file"
                            .into(),
                    ),
                );
            }
        }
        let preset = m.preset.as_deref().and_then(|p| {
            let found = catalog::model(p);
            if found.is_none() {
                let ids: Vec<&str> = catalog::MODELS.iter().map(|m| m.id).collect();
                self.err(
                    &k("preset"),
                    format!(
                        "unknown model preset \"{p}\"; known presets: {}",
                        ids.join(", ")
                    ),
                    suggestion(p, ids.iter().copied()),
                );
            }
            found
        });
        if preset.is_some() && m.architecture.is_some() {
            self.key_err(
                &k("architecture"),
                "give either `preset` or `architecture`, not both",
                None,
            );
        }
        let params_b = m.params_b.or(preset.map(|p| p.params_b));
        if let Some(p) = m.params_b {
            if !(p > 0.0 && p.is_finite()) {
                self.err(
                    &k("params_b"),
                    format!("expected a parameter count in billions > 0, found {p}"),
                    None,
                );
            }
        }
        let architecture = match (preset, m.architecture) {
            (Some(p), _) => Some(Architecture {
                preset: Some(p.id.to_string()),
                params_b: params_b.unwrap_or(p.params_b),
                active_params_b: p.active_params_b,
                layers: p.layers,
                hidden: p.hidden,
                heads: p.heads,
                kv_heads: p.kv_heads,
                head_dim: p.head_dim,
            }),
            (None, Some(a)) => {
                if a.heads % a.kv_heads != 0 {
                    self.err(
                        &k("architecture.kv_heads"),
                        format!("kv_heads ({}) must divide heads ({})", a.kv_heads, a.heads),
                        None,
                    );
                }
                match params_b {
                    None => {
                        self.key_err(
                            &k("architecture"),
                            "an architecture needs the model's `params_b`",
                            Some(format!("add params_b = ... to [models.{name}]")),
                        );
                        None
                    }
                    Some(pb) => Some(Architecture {
                        preset: None,
                        params_b: pb,
                        active_params_b: a.active_params_b.unwrap_or(pb),
                        layers: a.layers,
                        hidden: a.hidden,
                        heads: a.heads,
                        kv_heads: a.kv_heads,
                        head_dim: a.head_dim.unwrap_or(a.hidden / a.heads.max(1)),
                    }),
                }
            }
            (None, None) => None,
        };
        let mut precisions = BTreeMap::new();
        for (pname, p) in m.precisions {
            let pk = |f: &str| format!("models.{name}.precisions.{pname}.{f}");
            let dtype = match &p.dtype {
                Some(d) => {
                    let parsed = DType::parse(d);
                    if parsed.is_none() {
                        self.err(
                            &pk("dtype"),
                            format!(
                                "unknown number format \"{d}\"; expected one of: {}",
                                DType::NAMES
                            ),
                            suggestion(d, DType::NAMES.split(", ")),
                        );
                    }
                    parsed
                }
                None => DType::parse(&pname),
            };
            let kv_dtype = p.kv_dtype.as_deref().and_then(|d| {
                let parsed = DType::parse(d);
                if parsed.is_none() {
                    self.err(
                        &pk("kv_dtype"),
                        format!(
                            "unknown number format \"{d}\"; expected one of: {}",
                            DType::NAMES
                        ),
                        suggestion(d, DType::NAMES.split(", ")),
                    );
                }
                parsed
            });
            precisions.insert(
                pname.clone(),
                Precision {
                    name: pname.clone(),
                    served_name: p.served_name,
                    dtype,
                    kv_dtype,
                    arg: p.arg,
                    weights: p.weights,
                },
            );
        }
        (self.errors.len() == before).then(|| {
            (
                Model {
                    name: name.to_string(),
                    served_name: m.served_name.unwrap_or_else(|| name.to_string()),
                    tokenizer: m.tokenizer,
                    weights: m.weights,
                    params_b,
                    architecture,
                },
                precisions,
            )
        })
    }

    fn workload(&mut self, name: &str, w: RawWorkload) -> Option<Workload> {
        let before = self.errors.len();
        let k = |f: &str| format!("workloads.{name}.{f}");
        if !is_slug(name) {
            self.key_err(
                &format!("workloads.{name}"),
                format!(
                    "expected a workload name of letters, digits, `-`, `_` or `.`, found \"{name}\""
                ),
                None,
            );
        }
        let api = w.api.unwrap_or_default();
        if w.dataset.is_none() {
            for (key, v) in [
                ("input_tokens", &w.input_tokens),
                ("output_tokens", &w.output_tokens),
            ] {
                if v.is_none() {
                    self.key_err(
                        &format!("workloads.{name}"),
                        format!("missing key `{key}`"),
                        Some(format!("add e.g. {key} = 256, or a `dataset`")),
                    );
                }
            }
        }
        let input_tokens = w
            .input_tokens
            .map(|d| self.load_dist(&k("input_tokens"), d));
        let output_tokens = w
            .output_tokens
            .map(|d| self.load_dist(&k("output_tokens"), d));
        if let Some(Dist::Fixed(0)) = output_tokens {
            self.err(
                &k("output_tokens"),
                "expected at least 1 output token, found 0",
                None,
            );
        }
        let max_tokens_field = w.max_tokens_field.unwrap_or_else(|| "max_tokens".into());
        if !matches!(
            max_tokens_field.as_str(),
            "max_tokens" | "max_completion_tokens"
        ) {
            self.err(&k("max_tokens_field"), format!("expected \"max_tokens\" or \"max_completion_tokens\", found \"{max_tokens_field}\""), None);
        }
        let shared_prefix = w.shared_prefix.map(|p| {
            if p.tokens == 0 {
                self.err(
                    &k("shared_prefix.tokens"),
                    "expected a prefix of at least 1 token, found 0",
                    None,
                );
            }
            SharedPrefix {
                tokens: p.tokens,
                count: p.count.unwrap_or(1).max(1),
            }
        });
        let dataset = w.dataset.and_then(|d| {
            let path = self.base_dir.join(&d.path);
            match std::fs::read(&path) {
                Ok(bytes) => Some(Dataset {
                    sha256: hex(&Sha256::digest(&bytes)),
                    path: d.path,
                    format: d.format,
                    min_input_tokens: d.min_input_tokens,
                    max_input_tokens: d.max_input_tokens,
                }),
                Err(e) => {
                    self.err(
                        &k("dataset.path"),
                        format!("cannot read dataset {}: {e}", path.display()),
                        Some("paths are relative to the spec file".into()),
                    );
                    None
                }
            }
        });
        let conversation = w.conversation.map(|c| {
            if api != Api::Chat {
                self.key_err(
                    &k("conversation"),
                    "multi-turn conversations need api = \"chat\"",
                    None,
                );
            }
            if c.turns == 0 {
                self.err(
                    &k("conversation.turns"),
                    "expected at least 1 turn, found 0",
                    None,
                );
            }
            Conversation {
                turns: c.turns,
                think_time: c.think_time.unwrap_or_default(),
            }
        });
        let mut extra_body = serde_json::Map::new();
        for (key, v) in w.extra_body.unwrap_or_default() {
            if matches!(
                key.as_str(),
                "model"
                    | "prompt"
                    | "messages"
                    | "stream"
                    | "stream_options"
                    | "max_tokens"
                    | "max_completion_tokens"
                    | "ignore_eos"
            ) {
                self.key_err(&format!("workloads.{name}.extra_body.{key}"), format!("`{key}` is set by infer-bench itself and cannot be overridden in extra_body"), None);
                continue;
            }
            match serde_json::to_value(&v) {
                Ok(j) => {
                    extra_body.insert(key, j);
                }
                Err(e) => self.err(
                    &format!("workloads.{name}.extra_body.{key}"),
                    format!("cannot be sent as JSON: {e}"),
                    None,
                ),
            }
        }
        (self.errors.len() == before).then(|| Workload {
            name: name.to_string(),
            api,
            input_tokens,
            output_tokens,
            shared_prefix,
            dataset,
            conversation,
            ignore_eos: w.ignore_eos.unwrap_or(false),
            stream: w.stream.unwrap_or(true),
            max_tokens_field,
            sampling: w.sampling.unwrap_or_default(),
            extra_body,
            mix: Vec::new(),
        })
    }

    /// A mixed workload from its parts, which are workloads of the spec.
    fn mix(
        &mut self,
        name: &str,
        w: RawWorkload,
        workloads: &BTreeMap<String, Workload>,
        mix_names: &[String],
    ) -> Option<Workload> {
        let before = self.errors.len();
        let key = format!("workloads.{name}.mix");
        let parts = w.mix.clone().unwrap_or_default();
        let others = RawWorkload { mix: None, ..w };
        let set = serde_json::to_value(&others).ok();
        if let Some(obj) = set.as_ref().and_then(|v| v.as_object()) {
            if let Some((k, _)) = obj.iter().find(|(_, v)| !v.is_null()) {
                self.key_err(
                    &format!("workloads.{name}.{k}"),
                    format!(
                        "a mix takes every request setting from its parts, so it cannot set `{k}`"
                    ),
                    Some("set it on the workloads the mix names".into()),
                );
            }
        }
        if parts.len() < 2 {
            self.err(
                &key,
                format!(
                    "expected at least two workloads to mix, found {}",
                    parts.len()
                ),
                Some("e.g. mix = { chat = 0.7, rag = 0.3 }".into()),
            );
        }
        let total: f64 = parts.values().filter(|v| v.is_finite() && **v > 0.0).sum();
        let mut out = Vec::new();
        for (part, weight) in &parts {
            let pk = format!("{key}.{part}");
            if !(weight.is_finite() && *weight > 0.0) {
                self.err(&pk, format!("expected a weight > 0, found {weight}"), None);
                continue;
            }
            if mix_names.contains(part) {
                self.err(
                    &pk,
                    format!("workload \"{part}\" is itself a mix; name its parts here instead"),
                    None,
                );
                continue;
            }
            let Some(found) = workloads.get(part) else {
                self.err(
                    &pk,
                    format!("unknown workload \"{part}\""),
                    suggestion(part, workloads.keys().map(String::as_str)),
                );
                continue;
            };
            if found.conversation.is_some() {
                self.err(
                    &pk,
                    format!("workload \"{part}\" is a conversation; a mix sends single requests"),
                    None,
                );
                continue;
            }
            out.push(MixPart {
                weight: weight / total,
                workload: found.clone(),
            });
        }
        if let Some(first) = out.first() {
            let f = &first.workload;
            for p in &out[1..] {
                let o = &p.workload;
                let differs = [
                    ("api", f.api != o.api),
                    ("stream", f.stream != o.stream),
                    ("max_tokens_field", f.max_tokens_field != o.max_tokens_field),
                    ("sampling", f.sampling != o.sampling),
                    ("extra_body", f.extra_body != o.extra_body),
                    ("ignore_eos", f.ignore_eos != o.ignore_eos),
                ];
                if let Some((what, _)) = differs.iter().find(|(_, d)| *d) {
                    self.err(
                        &key,
                        format!("the mixed workloads \"{}\" and \"{}\" send requests differently (`{what}` differs)", f.name, o.name),
                        Some("a mix varies what is sent (lengths, prefixes, datasets), not how: give its parts the same api, stream, max_tokens_field, sampling, extra_body and ignore_eos".into()),
                    );
                    break;
                }
            }
        }
        if self.errors.len() != before {
            return None;
        }
        let f = &out[0].workload;
        Some(Workload {
            name: name.to_string(),
            api: f.api,
            input_tokens: None,
            output_tokens: None,
            shared_prefix: None,
            dataset: None,
            conversation: None,
            ignore_eos: f.ignore_eos,
            stream: f.stream,
            max_tokens_field: f.max_tokens_field.clone(),
            sampling: f.sampling.clone(),
            extra_body: f.extra_body.clone(),
            mix: out,
        })
    }

    /// Loads an empirical distribution's file: one length per line, or
    /// `length,weight` (a histogram); `#` starts a comment.
    fn load_dist(&mut self, key: &str, d: Dist) -> Dist {
        let Dist::Empirical(Empirical::File(file)) = &d else {
            return d;
        };
        let path = self.base_dir.join(file);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                self.err(
                    key,
                    format!("cannot read length file {}: {e}", path.display()),
                    Some("paths are relative to the spec file".into()),
                );
                return d;
            }
        };
        let mut counts: BTreeMap<u32, f64> = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut parts = line.split([',', ' ', '\t']).filter(|p| !p.is_empty());
            let value = parts.next().and_then(|v| v.parse::<u32>().ok());
            let weight = match parts.next() {
                None => Some(1.0),
                Some(w) => w.parse::<f64>().ok().filter(|w| *w > 0.0 && w.is_finite()),
            };
            match (value, weight, parts.next()) {
                (Some(v), Some(w), None) => *counts.entry(v).or_default() += w,
                _ => {
                    self.err(key, format!("{}:{}: expected a token length, or `length,weight` with weight > 0; found \"{line}\"", path.display(), i + 1), None);
                    return d;
                }
            }
        }
        if counts.is_empty() {
            self.err(key, format!("{} holds no lengths", path.display()), None);
            return d;
        }
        Dist::Empirical(Empirical::Values(counts.into_iter().collect()))
    }

    fn load(&mut self, l: RawLoad) -> LoadDefaults {
        if l.warmup.is_some() && l.warmup_requests.is_some() {
            self.key_err(
                "load.warmup_requests",
                "give either `warmup` (a time) or `warmup_requests` (a count), not both",
                None,
            );
        }
        if l.burstiness.is_some() && !matches!(l.arrival, Some(Arrival::Gamma)) {
            self.key_err(
                "load.burstiness",
                "`burstiness` shapes gamma arrivals only",
                Some("set arrival = \"gamma\", or remove burstiness".into()),
            );
        }
        let burstiness = self.positive("load.burstiness", l.burstiness, 1.0, None);
        if l.duration.is_none() && l.requests.is_none() && l.ramp.is_none() {
            self.errors.push(self.loc.error_at_span(
                self.loc.span(&[Seg::Key("load".into())]),
                "load",
                "a point needs an end: set `duration`, `requests` or both (whichever ends first)",
                Some("e.g. duration = \"60s\"".into()),
            ));
        }
        if l.duration.is_some_and(|d| d.is_zero()) {
            self.err("load.duration", "expected a duration > 0, found 0s", None);
        }
        if l.requests == Some(0) {
            self.err(
                "load.requests",
                "expected at least 1 request, found 0",
                None,
            );
        }
        if l.runs == Some(0) {
            self.err("load.runs", "expected at least 1 run, found 0", None);
        }
        if l.concurrency == Some(0) {
            self.err(
                "load.concurrency",
                "expected a concurrency of at least 1, found 0",
                None,
            );
        }
        if l.max_concurrency == Some(0) {
            self.err("load.max_concurrency", "expected at least 1, found 0", None);
        }
        if let Some(r) = &l.ramp {
            if l.duration.is_some() {
                self.key_err(
                    "load.duration",
                    "a ramp sets the duration itself (steps x every); remove `duration`",
                    None,
                );
            }
            if r.every.is_zero() {
                self.err(
                    "load.ramp.every",
                    "expected a step length > 0, found 0s",
                    None,
                );
            }
            self.ramp_levels(r);
        }
        let t = l.timeouts.unwrap_or_default();
        let timeouts = Timeouts {
            connect: t.connect.unwrap_or(Duration::from_secs(10)),
            first_token: t.first_token.unwrap_or(Duration::from_secs(60)),
            idle: t.idle.unwrap_or(Duration::from_secs(30)),
            total: t.total.unwrap_or(Duration::from_secs(600)),
        };
        for (key, d) in [
            ("connect", timeouts.connect),
            ("first_token", timeouts.first_token),
            ("idle", timeouts.idle),
            ("total", timeouts.total),
        ] {
            if d.is_zero() {
                self.err(
                    &format!("load.timeouts.{key}"),
                    "expected a timeout > 0, found 0s",
                    None,
                );
            }
        }
        let window = l.window.unwrap_or(Duration::from_secs(10));
        if window.is_zero() {
            self.err("load.window", "expected a window > 0, found 0s", None);
        }
        LoadDefaults {
            arrival: l.arrival,
            burstiness,
            concurrency: l.concurrency,
            rate: l.rate,
            max_concurrency: l.max_concurrency,
            ramp: l.ramp,
            warmup: match (l.warmup, l.warmup_requests) {
                (Some(d), _) if !d.is_zero() => Warmup::Time(d),
                (_, Some(n)) if n > 0 => Warmup::Requests(n),
                _ => Warmup::None,
            },
            duration: l.duration,
            requests: l.requests,
            runs: l.runs.unwrap_or(1).max(1),
            window,
            timeouts,
        }
    }

    /// The levels of a ramp, checked; empty on error.
    fn ramp_levels(&mut self, r: &RawRamp) -> Vec<Level> {
        let levels = ramp_levels(r);
        match levels {
            Ok(l) => l,
            Err((key, msg)) => {
                self.err(&format!("load.ramp.{key}"), msg, None);
                Vec::new()
            }
        }
    }

    fn matrix(
        &mut self,
        m: RawMatrix,
        targets: &BTreeMap<String, Target>,
        models: &BTreeMap<String, (Model, BTreeMap<String, Precision>)>,
        workloads: &BTreeMap<String, Workload>,
    ) -> Matrix {
        let names = |m: &dyn Fn() -> Vec<String>| m();
        let known: BTreeMap<Axis, Vec<String>> = [
            (Axis::Target, names(&|| targets.keys().cloned().collect())),
            (Axis::Model, names(&|| models.keys().cloned().collect())),
            (
                Axis::Workload,
                names(&|| workloads.keys().cloned().collect()),
            ),
        ]
        .into_iter()
        .collect();
        let declared_precisions: Vec<String> = models
            .values()
            .flat_map(|(_, p)| p.keys().cloned())
            .collect();
        let mut axes_raw: Vec<(Axis, Vec<AxisValue>)> = Vec::new();
        let to_vals = |v: Option<Vec<String>>| {
            v.map(|v| v.into_iter().map(AxisValue::Name).collect::<Vec<_>>())
        };
        let given: Vec<(Axis, Option<Vec<AxisValue>>)> = vec![
            (Axis::Target, to_vals(m.target)),
            (Axis::Model, to_vals(m.model)),
            (Axis::Precision, to_vals(m.precision)),
            (Axis::Workload, to_vals(m.workload)),
            (
                Axis::Concurrency,
                m.concurrency
                    .map(|v| v.into_iter().map(AxisValue::Count).collect()),
            ),
            (
                Axis::Rate,
                m.rate.map(|v| v.into_iter().map(AxisValue::Rate).collect()),
            ),
            (
                Axis::MaxConcurrency,
                m.max_concurrency
                    .map(|v| v.into_iter().map(AxisValue::Count).collect()),
            ),
        ];
        // The file's order of axes decides the order of points, as in GitHub Actions.
        let order = self.loc.keys(&[Seg::Key("matrix".into())]);
        let mut given: BTreeMap<Axis, Vec<AxisValue>> = given
            .into_iter()
            .filter_map(|(a, v)| v.map(|v| (a, v)))
            .collect();
        for key in order.iter().filter_map(|k| Axis::from_name(k)) {
            if let Some(v) = given.remove(&key) {
                axes_raw.push((key, v));
            }
        }
        axes_raw.extend(given);
        for (axis, values) in &axes_raw {
            let key = format!("matrix.{}", axis.name());
            if values.is_empty() {
                self.err(
                    &key,
                    format!(
                        "the axis `{}` is empty; a matrix axis needs at least one value",
                        axis.name()
                    ),
                    Some("remove the axis to use the spec's single value".into()),
                );
            }
            for (i, v) in values.iter().enumerate() {
                if values[..i].contains(v) {
                    self.err(
                        &format!("{key}[{i}]"),
                        format!("`{v}` appears twice on the axis `{}`", axis.name()),
                        None,
                    );
                }
                self.check_axis_value(
                    &format!("{key}[{i}]"),
                    *axis,
                    v,
                    &known,
                    &declared_precisions,
                );
            }
        }
        let axis_names: Vec<Axis> = axes_raw.iter().map(|a| a.0).collect();
        let entries = |list: Vec<RawMatrixEntry>, what: &str, cx: &mut Self| -> Vec<Combo> {
            let mut out = Vec::new();
            for (i, e) in list.into_iter().enumerate() {
                let key = format!("matrix.{what}[{i}]");
                let combo: Combo = [
                    (Axis::Target, e.target.map(AxisValue::Name)),
                    (Axis::Model, e.model.map(AxisValue::Name)),
                    (Axis::Precision, e.precision.map(AxisValue::Name)),
                    (Axis::Workload, e.workload.map(AxisValue::Name)),
                    (Axis::Concurrency, e.concurrency.map(AxisValue::Count)),
                    (Axis::Rate, e.rate.map(AxisValue::Rate)),
                    (
                        Axis::MaxConcurrency,
                        e.max_concurrency.map(AxisValue::Count),
                    ),
                ]
                .into_iter()
                .filter_map(|(a, v)| v.map(|v| (a, v)))
                .collect();
                if combo.is_empty() {
                    cx.err(
                        &key,
                        format!("an {what} entry needs at least one key"),
                        None,
                    );
                }
                for (axis, v) in &combo {
                    cx.check_axis_value(
                        &format!("{key}.{}", axis.name()),
                        *axis,
                        v,
                        &known,
                        &declared_precisions,
                    );
                    if what == "exclude" && !axis_names.contains(axis) {
                        cx.key_err(
                            &format!("{key}.{}", axis.name()),
                            format!(
                                "exclude names `{}`, which is not an axis of this matrix",
                                axis.name()
                            ),
                            Some(format!(
                                "axes: {}",
                                axis_names
                                    .iter()
                                    .map(|a| a.name())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )),
                        );
                    }
                }
                out.push(combo);
            }
            out
        };
        let exclude = entries(m.exclude, "exclude", self);
        let include = entries(m.include, "include", self);
        Matrix {
            axes: axes_raw,
            exclude,
            include,
        }
    }

    fn check_axis_value(
        &mut self,
        key: &str,
        axis: Axis,
        v: &AxisValue,
        known: &BTreeMap<Axis, Vec<String>>,
        precisions: &[String],
    ) {
        match (axis, v) {
            (Axis::Target | Axis::Model | Axis::Workload, AxisValue::Name(n)) => {
                let names = &known[&axis];
                let what = axis.name();
                let section = format!("{what}s");
                // Defined, but with errors of its own (already reported).
                let broken = self.errors.iter().any(|e| {
                    e.key == format!("{section}.{n}")
                        || e.key.starts_with(&format!("{section}.{n}."))
                });
                if !names.contains(n) && !broken {
                    self.err(
                        key,
                        format!(
                            "unknown {what} \"{n}\"; the spec defines: {}",
                            if names.is_empty() {
                                "none".to_string()
                            } else {
                                names.join(", ")
                            }
                        ),
                        suggestion(n, names.iter().map(String::as_str))
                            .or(Some(format!("define it as [{section}.{n}]"))),
                    );
                }
            }
            (Axis::Precision, AxisValue::Name(n))
                if DType::parse(n).is_none() && !precisions.contains(n) =>
            {
                self.err(
                    key,
                    format!("unknown precision \"{n}\": it is neither a number format ({}) nor declared under any [models.*.precisions]", DType::NAMES),
                    suggestion(n, precisions.iter().map(String::as_str).chain(DType::NAMES.split(", "))),
                );
            }
            (Axis::Concurrency | Axis::MaxConcurrency, AxisValue::Count(0)) => {
                self.err(key, "expected a concurrency of at least 1, found 0", None);
            }
            _ => {}
        }
    }

    fn slo(&mut self, s: RawSlo) -> Vec<SloGate> {
        let fields = [
            (Metric::Ttft, s.ttft),
            (Metric::TtftFromSend, s.ttft_from_send),
            (Metric::Tpot, s.tpot),
            (Metric::Itl, s.itl),
            (Metric::ItlToken, s.itl_token),
            (Metric::E2e, s.e2e),
            (Metric::DispatchLag, s.dispatch_lag),
            (Metric::ErrorRate, s.error_rate),
            (Metric::GoodputRatio, s.goodput_ratio),
            (Metric::Goodput, s.goodput),
            (Metric::RequestThroughput, s.request_throughput),
            (Metric::OutputTokensPerS, s.output_tokens_per_s),
        ];
        let mut gates = Vec::new();
        for (metric, exprs) in fields {
            let Some(exprs) = exprs else { continue };
            let many = matches!(exprs, OneOrMany::Many(_));
            for (i, expr) in exprs.into_vec().into_iter().enumerate() {
                let key = if many {
                    format!("slo.{metric}[{i}]")
                } else {
                    format!("slo.{metric}")
                };
                let (want_stat, want) = match metric.kind() {
                    Kind::Latency | Kind::Tokens => (true, "a duration such as 500ms"),
                    Kind::Ratio => (false, "a percentage such as 1%"),
                    Kind::RequestRate => (false, "a rate such as 5/s"),
                    Kind::TokenRate | Kind::Count => (false, "a plain number such as 1000"),
                };
                let fits = matches!(
                    (metric.kind(), expr.threshold),
                    (Kind::Latency, Threshold::Duration(_))
                        | (Kind::Ratio, Threshold::Percent(_))
                        | (Kind::RequestRate, Threshold::Rate(_))
                        | (
                            Kind::TokenRate | Kind::Count | Kind::Tokens,
                            Threshold::Number(_)
                        )
                );
                if !fits {
                    self.err(
                        &key,
                        format!(
                            "`{metric}` is compared with {want}, found {} ({})",
                            expr.threshold.kind(),
                            expr.threshold
                        ),
                        None,
                    );
                } else if want_stat && expr.stat.is_none() {
                    self.err(
                        &key,
                        format!(
                            "`{metric}` is a distribution: say which statistic, e.g. \"p99 {} {}\"",
                            expr.cmp.symbol(),
                            expr.threshold
                        ),
                        None,
                    );
                } else if !want_stat && expr.stat.is_some() {
                    self.err(&key, format!("`{metric}` is one number per point: drop the statistic, e.g. \"{} {}\"", expr.cmp.symbol(), expr.threshold), None);
                } else {
                    gates.push(SloGate { metric, expr });
                }
            }
        }
        gates
    }

    fn cost(&mut self, c: RawCost) -> Cost {
        for (key, v) in [("gpu_hour_usd", c.gpu_hour_usd), ("kwh_usd", c.kwh_usd)] {
            if let Some(x) = v {
                if !(x >= 0.0 && x.is_finite()) {
                    self.err(
                        &format!("cost.{key}"),
                        format!("expected a price >= 0, found {x}"),
                        None,
                    );
                }
            }
        }
        if c.gpus == Some(0) {
            self.err("cost.gpus", "expected at least 1 GPU, found 0", None);
        }
        Cost {
            gpu_hour_usd: c.gpu_hour_usd,
            gpus: c.gpus,
            kwh_usd: c.kwh_usd,
        }
    }

    fn telemetry(&mut self, t: RawTelemetry) -> Telemetry {
        let interval = t.interval.unwrap_or(Duration::from_millis(100));
        if interval < Duration::from_millis(10) {
            self.err(
                "telemetry.interval",
                format!("expected an interval of at least 10ms, found {interval}"),
                None,
            );
        }
        let scrape_interval = t.scrape_interval.unwrap_or(Duration::from_millis(500));
        if scrape_interval < Duration::from_millis(10) {
            self.err(
                "telemetry.scrape_interval",
                format!("expected an interval of at least 10ms, found {scrape_interval}"),
                None,
            );
        }
        Telemetry {
            gpu: t.gpu.unwrap_or_default(),
            interval,
            server_metrics: t.server_metrics.unwrap_or(true),
            scrape_interval,
        }
    }

    fn validity(&mut self, v: RawValidity) -> Validity {
        Validity {
            min_duration: v.min_duration.unwrap_or_default(),
            min_requests: v.min_requests.unwrap_or(1),
            max_dispatch_lag_p99: v.max_dispatch_lag_p99.unwrap_or(Duration::from_millis(1)),
            max_rate_gap: v.max_rate_gap.unwrap_or(Percent::new(1.0).expect("valid")),
            percentile_sample_check: v.percentile_sample_check.unwrap_or(true),
        }
    }

    fn regression(&mut self, r: RawRegression, spec_name: &str) -> Regression {
        let pct = |x: f64| Percent::new(x).expect("valid");
        let gates = match r.metrics {
            None => default_gates(),
            Some(list) => {
                let mut out = Vec::new();
                for (i, g) in list.into_iter().enumerate() {
                    let key = format!("regression.metrics[{i}]");
                    match g.metric.parse::<Metric>() {
                        Err(_) => self.err(
                            &format!("{key}.metric"),
                            format!(
                                "unknown metric \"{}\"; expected one of: {}",
                                g.metric,
                                Metric::names().collect::<Vec<_>>().join(", ")
                            ),
                            suggestion(&g.metric, Metric::names()),
                        ),
                        Ok(m) => {
                            if !m.is_distribution() && g.stat.is_some() {
                                self.key_err(
                                    &format!("{key}.stat"),
                                    format!("`{m}` is one number per run: it has no statistic"),
                                    Some("remove `stat`".into()),
                                );
                            }
                            let stat = if m.is_distribution() {
                                Some(g.stat.unwrap_or(super::Stat::Percentile(50.0)))
                            } else {
                                None
                            };
                            out.push(Gate {
                                metric: m,
                                stat,
                                noise: g.noise.unwrap_or(pct(5.0)),
                            });
                        }
                    }
                }
                out
            }
        };
        let confidence = r.confidence.unwrap_or(pct(95.0));
        if !(50.0..100.0).contains(&confidence.value()) || confidence.value() <= 50.0 {
            self.err(
                "regression.confidence",
                format!("expected a confidence in (50%, 100%), found {confidence}"),
                None,
            );
        }
        Regression {
            baseline: r
                .baseline
                .unwrap_or_else(|| format!("baselines/{spec_name}.json")),
            gates,
            confidence,
            min_runs: r.min_runs.unwrap_or(3).max(1),
            on_env_mismatch: r.on_env_mismatch.unwrap_or_default(),
            confirm: r.confirm.unwrap_or(0),
        }
    }
}

/// The gates used when a spec names none: the latencies users watch most,
/// and output throughput.
pub fn default_gates() -> Vec<Gate> {
    let pct = |x: f64| Percent::new(x).expect("valid");
    let p = |x: f64| Some(super::Stat::Percentile(x));
    vec![
        Gate {
            metric: Metric::Ttft,
            stat: p(50.0),
            noise: pct(5.0),
        },
        Gate {
            metric: Metric::Ttft,
            stat: p(99.0),
            noise: pct(10.0),
        },
        Gate {
            metric: Metric::Tpot,
            stat: p(50.0),
            noise: pct(5.0),
        },
        Gate {
            metric: Metric::Itl,
            stat: p(99.0),
            noise: pct(10.0),
        },
        Gate {
            metric: Metric::E2e,
            stat: p(50.0),
            noise: pct(5.0),
        },
        Gate {
            metric: Metric::OutputTokensPerS,
            stat: None,
            noise: pct(5.0),
        },
        Gate {
            metric: Metric::ErrorRate,
            stat: None,
            noise: pct(5.0),
        },
    ]
}

/// Expands a ramp into its levels, or names the key that is wrong.
pub fn ramp_levels(r: &RawRamp) -> Result<Vec<Level>, (&'static str, String)> {
    let as_f = |l: &RawLevel| match l {
        RawLevel::Concurrency(c) => *c as f64,
        RawLevel::Rate(r) => r.as_per_second(),
    };
    let same_kind = |a: &RawLevel, b: &RawLevel| {
        matches!(
            (a, b),
            (RawLevel::Concurrency(_), RawLevel::Concurrency(_))
                | (RawLevel::Rate(_), RawLevel::Rate(_))
        )
    };
    if !same_kind(&r.from, &r.to) {
        return Err((
            "to",
            "`from` and `to` must both be concurrencies (numbers) or both rates (\"2/s\")".into(),
        ));
    }
    let (from, to) = (as_f(&r.from), as_f(&r.to));
    if to < from {
        return Err((
            "to",
            format!(
                "the ramp goes down: to ({}) is below from ({})",
                super::de::fmt_number(to),
                super::de::fmt_number(from)
            ),
        ));
    }
    let mut levels = Vec::new();
    let mut x = from;
    let make = |x: f64| match r.from {
        RawLevel::Concurrency(_) => Level::Concurrency(x.round() as u32),
        RawLevel::Rate(_) => Level::Rate(super::Rate::per_second(x).expect("positive")),
    };
    match (r.step, r.factor) {
        (Some(_), Some(_)) => {
            return Err((
                "factor",
                "give either `step` (added) or `factor` (multiplied), not both".into(),
            ));
        }
        (None, None) => {
            return Err((
                "step",
                "a ramp needs `step` (added each step) or `factor` (multiplied each step)".into(),
            ));
        }
        (Some(step), None) => {
            if !same_kind(&step, &r.from) {
                return Err(("step", "`step` must be of the same kind as `from`".into()));
            }
            let s = as_f(&step);
            while x <= to + 1e-9 {
                levels.push(make(x));
                x += s;
                if levels.len() > 10_000 {
                    return Err(("step", "the ramp has more than 10000 steps".into()));
                }
            }
        }
        (None, Some(f)) => {
            if !(f > 1.0 && f.is_finite()) {
                return Err(("factor", format!("expected a factor > 1, found {f}")));
            }
            while x <= to + 1e-9 {
                levels.push(make(x));
                x *= f;
            }
        }
    }
    levels.dedup();
    Ok(levels)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
