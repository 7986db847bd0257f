//! Why the simulator cannot serve a point: a setting the formulas cannot
//! use, a model that does not fit the GPUs it is given, or a thread, runtime
//! or port the server could not get. The engine records it as the point's
//! failure; callers decide by variant, and the words are for the reader.

/// Everything that stops the simulator from starting.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the target has no simulator settings")]
    NoSimSettings,
    #[error("model `{0}` has no architecture for the simulator")]
    NoArchitecture(String),
    #[error("unknown GPU \"{gpu}\"; the simulator knows: {known}")]
    UnknownGpu { gpu: String, known: String },
    /// A setting outside what the formulas accept.
    #[error("expected {name} {expected}, found {found}")]
    Setting {
        name: &'static str,
        expected: String,
        found: String,
    },
    /// The weights alone need more memory than the GPUs allow.
    #[error(
        "{model} does not fit: its weights need {weights_gib:.1} GiB ({params_b} B parameters × {bytes} bytes at {dtype}), but {gpus} × {gpu} ({memory_gb} GiB each) at memory_fraction {fraction} allow {usable_gib:.1} GiB; use more GPUs{}, a smaller number format (fp8, int4) or a GPU with more memory",
        match fits_on { Some(n) => format!(" (gpus = {n} fits)"), None => String::new() }
    )]
    WeightsDoNotFit {
        model: String,
        weights_gib: f64,
        params_b: f64,
        bytes: f64,
        dtype: &'static str,
        gpus: u32,
        gpu: &'static str,
        memory_gb: f64,
        fraction: f64,
        usable_gib: f64,
        /// The fewest GPUs of this kind the weights fit on, if any.
        fits_on: Option<u32>,
    },
    /// The weights fit, but leave no room for one KV block.
    #[error(
        "{model} leaves no room for a KV cache: {weights_gib:.1} GiB of weights and {reserve_gib:.1} GiB of runtime and activation reserve against {usable_gib:.1} GiB usable on {gpus} × {gpu} at memory_fraction {fraction}; use more GPUs, a smaller number format, a higher memory_fraction or a smaller max_batched_tokens"
    )]
    NoKvRoom {
        model: String,
        weights_gib: f64,
        reserve_gib: f64,
        usable_gib: f64,
        gpus: u32,
        gpu: &'static str,
        fraction: f64,
    },
    #[error("kv_cache_tokens = {tokens} is below one KV block; expected at least {min}")]
    KvCacheTooSmall { tokens: u64, min: u64 },
    #[error("cannot start the simulator's engine thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("cannot start the simulator's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot bind the simulator's port: {0}")]
    Bind(#[source] std::io::Error),
}

impl Error {
    /// A setting outside its range: "expected `name` `expected`, found
    /// `found`".
    pub(crate) fn setting(
        name: &'static str,
        expected: impl Into<String>,
        found: impl std::fmt::Display,
    ) -> Error {
        Error::Setting {
            name,
            expected: expected.into(),
            found: found.to_string(),
        }
    }
}
