//! The spec language: typed elements (durations, rates, percentages, SLO
//! expressions, distributions), the raw serde mirror of the TOML file, the
//! compiled domain types, diagnostics with positions, and the JSON Schema.
//!
//! `load` is the entry point: a path in, a checked `Spec` or every problem
//! with its place in the file out.

pub mod budget;
pub mod catalog;
mod compile;
pub mod dataset;
mod de;
pub mod diag;
pub mod dialect;
mod dist;
mod duration;
pub mod files;
pub mod image;
pub mod judgeable;
pub mod limits;
pub mod media;
pub mod model;
mod percent;
pub mod plan;
mod rate;
pub mod raw;
pub mod results;
pub mod retrieval;
pub mod schema;
pub mod seed;
pub mod server_args;
mod slo;
pub mod structured;
pub mod tensor;
pub mod tokenizer;
pub mod trace;

use std::path::Path;

pub use compile::{
    RampError, compile, compile_regression, default_gates, hex, placeholders, ramp_levels,
};
pub use de::fmt_number;
pub use diag::{SpecError, SpecErrors};
pub use dialect::Dialect;
pub use dist::{Dist, Empirical};
pub use duration::Duration;
pub use model::*;
pub use percent::Percent;
pub use rate::Rate;
pub use slo::{Cmp, SloExpr, Stat, Threshold};

/// Reads and compiles the spec at `path`: a regular file of at most
/// [`files::MAX_SPEC_BYTES`], UTF-8 (else an error at the first invalid
/// byte's line and column).
pub fn load(path: &Path) -> Result<Spec, SpecErrors> {
    let file = path.display().to_string();
    let error = |line: usize, col: usize, message: String| {
        SpecErrors::from(SpecError {
            file: file.clone(),
            line,
            col,
            key: String::new(),
            message,
            hint: None,
            snippet: None,
        })
    };
    // The spec itself is not read through a link that leads out of its
    // repository (a pull request's `bench.toml -> ~/.env`).
    let base = path.parent().unwrap_or(Path::new("."));
    let repo = files::repository(base);
    let source = files::read_text_in(path, files::MAX_SPEC_BYTES, &repo).map_err(|e| match e {
        files::TextError::Read(e) => error(0, 0, format!("cannot read the spec: {e}")),
        files::TextError::NotUtf8 { line, col } => error(
            line,
            col,
            "the spec is not UTF-8 text: a TOML file must be UTF-8".into(),
        ),
    })?;
    compile(&file, &source, base)
}

impl Spec {
    /// An error about a place in this spec (used by later stages, e.g. the
    /// plan, for problems only visible once points are resolved).
    pub fn error(&self, key: &str, message: impl Into<String>, hint: Option<String>) -> SpecError {
        self.locator.error(key, message, hint)
    }

    /// The directory relative paths in the spec resolve against.
    pub fn base_dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// The folder `{spec.dir}` names: the base folder, `.` for a spec
    /// named by its bare file name from its own folder (whose base is the
    /// empty path, which `{spec.dir}/x` would turn into `/x`).
    pub fn dir(&self) -> &Path {
        placeholder_dir(self.base_dir())
    }
}

/// `base`, or `.` where it is the empty path.
pub fn placeholder_dir(base: &Path) -> &Path {
    if base.as_os_str().is_empty() {
        Path::new(".")
    } else {
        base
    }
}
