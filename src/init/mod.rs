//! `infer-bench init`: the first step, as `cargo init` is one. This module
//! owns the starter files (a spec, an empty `baselines/` folder, with
//! `--ci github` a workflow that gates pull requests with the project's
//! composite action), what `--url` asks an OpenAI-compatible server
//! (`GET {URL}/models`, bounded and with a short timeout; a KServe v2
//! server is asked in [`kserve`]), and the rule that `init` never
//! overwrites: every path it would write is looked at before any is
//! written, and files are created with `O_EXCL`, never through a link.
//!
//! What the server says (its model id, its `owned_by`, a model's tensor
//! names) is outside text: it reaches the spec only as TOML strings the
//! `toml` crate wrote, never in a comment; one with a control character is
//! refused; `owned_by` only picks one of the dialects the spec language
//! names. The spec is compiled and planned here before it is written, so
//! what `init` writes is what `validate` accepts.

mod kserve;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{EXIT_OK, Error, Outcome, Result};
use crate::spec::Dialect;
use crate::spec::tensor::DataType;

/// The spec `init` writes, in DIR.
pub const SPEC_FILE: &str = "bench.toml";
/// The folder of baselines, in DIR (kept in git by a `.gitkeep`).
pub const BASELINES_DIR: &str = "baselines";
/// The workflow `--ci github` writes, in DIR.
pub const WORKFLOW_FILE: &str = ".github/workflows/infer-bench.yml";
/// Where the spec schema is published (the schema's `$id`): the first
/// line of a spec outside infer-bench's own repository points there.
pub const SCHEMA_URL: &str = "https://infer-bench.dev/schemas/spec.schema.json";
/// The longest model id written into a spec.
pub const MAX_MODEL_ID_BYTES: usize = 512;
/// How long `GET {URL}/models` may take, connection and body together.
const MODELS_TIMEOUT: Duration = Duration::from_secs(5);

/// Which CI a workflow is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Ci {
    /// GitHub Actions: `.github/workflows/infer-bench.yml`.
    Github,
}

/// What `init` was asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    pub url: Option<String>,
    /// The model to write the spec for (`--model`): one the server lists;
    /// by default its first (on KServe, its first that `init` can send).
    pub model: Option<String>,
    pub ci: Option<Ci>,
    pub name: String,
}

/// Why `init` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A file `init` would write is already there.
    #[error(
        "init: {} already exists, and init never overwrites a file; nothing was written\n  hint: give another folder (`infer-bench init DIR`), or move the file away",
        path.display()
    )]
    Exists { path: PathBuf },
    /// `--name` is not a spec name.
    #[error(
        "init: --name: a spec's name is letters, digits, '-', '_' and '.' (at most 64), found {found:?}"
    )]
    BadName { found: String },
    /// `--url` is not a base URL init can ask.
    #[error(
        "init: --url {url:?}: {why}\n  hint: give the server's OpenAI base URL, e.g. --url http://127.0.0.1:8000/v1, or a KServe v2 (Triton) server's root, e.g. --url http://127.0.0.1:8000"
    )]
    BadUrl { url: String, why: &'static str },
    /// The server did not answer `GET {URL}/models` (nor, as KServe v2,
    /// `GET {URL}/v2`).
    #[error(
        "init: cannot read {url}: {why}; nothing was written\n  hint: is the server up, and is --url its OpenAI base URL (e.g. http://127.0.0.1:8000/v1) or a KServe v2 (Triton) server's root (e.g. http://127.0.0.1:8000)?"
    )]
    Unreachable { url: String, why: String },
    /// The server answered, without a model id.
    #[error("init: {url} names no model: {why}; nothing was written")]
    NoModel { url: String, why: String },
    /// `--model` names a model the server does not list.
    #[error(
        "init: {url} does not list the model {shown} (--model); it lists {listed}; nothing was written"
    )]
    NotListed {
        url: String,
        shown: String,
        listed: String,
    },
    /// The model a KServe v2 server serves takes what no workload sends.
    #[error(
        "init: model {shown} on {url} takes what init cannot write a workload for: {why}; nothing was written\n  hint: write the spec by hand (docs/spec.md, Tensor workloads), or name another of its models with --model"
    )]
    Unsendable {
        url: String,
        shown: String,
        why: String,
    },
    /// The server's model id cannot be written into a spec.
    #[error(
        "init: the server's model id {shown} {why}, so init will not write it into a spec; nothing was written\n  hint: serve the model under a plain name (vLLM --served-model-name, llama-server --alias)"
    )]
    UnusableModelId { shown: String, why: &'static str },
    /// The spec init made does not compile: a bug, or a server's text the
    /// spec language refuses.
    #[error("init: the spec init made does not validate, so nothing was written:\n{0}")]
    Invalid(#[source] crate::spec::SpecErrors),
    /// `--model` without `--url`.
    #[error("init: --model picks one of the models a server lists, so it needs --url")]
    ModelWithoutUrl,
    /// The HTTP client could not be built.
    #[error("init: {0}")]
    Client(#[source] crate::protocol::Error),
}

/// What the server at `--url` serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The base URL that answered: for OpenAI, the one given or it with
    /// `/v1` when only that answered `/models`; for KServe v2, the root.
    pub base_url: String,
    /// The model: `--model`, else the first of its `/models` (KServe: the
    /// first ready model it lists, in its repository index or statistics,
    /// that init can send).
    pub model: String,
    /// Which requests the spec sends it.
    pub api: ServedApi,
}

/// Which requests a served model takes, as init read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServedApi {
    /// OpenAI chat completions, with the dialect its `owned_by` names.
    OpenAi { dialect: Option<Dialect> },
    /// KServe v2 tensors: each input per item, as its metadata declares it.
    Tensors {
        inputs: Vec<Tensor>,
        /// The largest batch it takes: `None` when its inputs have no batch
        /// dimension, `Some(None)` when it batches and does not say how far
        /// (a server without Triton's model configuration).
        max_batch: Option<Option<u64>>,
    },
    /// Triton's generate extension (a model with a `text_input`):
    /// streamed when the model is decoupled.
    Generate { stream: bool },
}

/// An input tensor as a workload declares it: its shape per item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    pub name: String,
    pub datatype: DataType,
    pub shape: Vec<u64>,
}

impl Served {
    /// The dialect an OpenAI server named.
    pub fn dialect(&self) -> Option<Dialect> {
        match self.api {
            ServedApi::OpenAi { dialect } => dialect,
            _ => None,
        }
    }
}

/// `init`: checks every path, asks the server (with `--url`), compiles the
/// spec, then writes; says on stderr what it wrote.
pub fn execute(o: &Options) -> Result<Outcome> {
    check_name(&o.name)?;
    if let Some(url) = &o.url {
        check_url(url)?;
    }
    let spec_path = o.dir.join(SPEC_FILE);
    let baselines = o.dir.join(BASELINES_DIR);
    let keep = baselines.join(".gitkeep");
    let workflow = o.ci.map(|Ci::Github| o.dir.join(WORKFLOW_FILE));
    // Every file first: a refusal leaves the folder as it was.
    for path in std::iter::once(&spec_path).chain(workflow.as_ref()) {
        if exists(path) {
            return Err(InitError::Exists { path: path.clone() }.into());
        }
    }
    // A baselines folder that is already there is the user's: kept as it is.
    let make_baselines = !exists(&baselines);
    let served = match &o.url {
        Some(url) => Some(ask_server(url, o.model.as_deref())?),
        None if o.model.is_some() => return Err(InitError::ModelWithoutUrl.into()),
        None => None,
    };
    let text = spec_text(&o.name, served.as_ref());
    check_spec(&text)?;
    infer_bench_results::files::create_dir_all(&o.dir)?;
    if make_baselines {
        infer_bench_results::files::create_dir_all(&baselines)?;
        create_new(&keep, b"")?;
    }
    if let Some(path) = &workflow {
        let folder = path.parent().unwrap_or(Path::new("."));
        infer_bench_results::files::create_dir_all(folder)?;
        create_new(path, workflow_text(served.is_some()).as_bytes())?;
    }
    create_new(&spec_path, text.as_bytes())?;
    if let Some(s) = &served {
        say!(
            "{} serves {:?}{}",
            s.base_url,
            s.model,
            match &s.api {
                ServedApi::OpenAi { dialect: Some(d) } =>
                    format!(" (dialect {d}, from its /models)"),
                ServedApi::OpenAi { dialect: None } => " (it names no dialect in /models)".into(),
                ServedApi::Tensors { inputs, .. } => format!(
                    " over KServe v2 ({} input tensor{}, from its metadata)",
                    inputs.len(),
                    if inputs.len() == 1 { "" } else { "s" }
                ),
                ServedApi::Generate { stream } => format!(
                    " through Triton's generate extension ({})",
                    if *stream {
                        "streamed: the model is decoupled"
                    } else {
                        "one answer a request"
                    }
                ),
            }
        );
    }
    say!("wrote {}", spec_path.display());
    if make_baselines {
        say!(
            "wrote {}/ (empty: `infer-bench bless` fills it)",
            baselines.display()
        );
    } else {
        say!("kept {}/ as it is", baselines.display());
    }
    if let Some(path) = &workflow {
        say!("wrote {}", path.display());
    }
    say!(
        "next: infer-bench run {} (from the folder the spec's baselines/ is in)",
        spec_path.display()
    );
    Ok(Outcome(EXIT_OK))
}

/// Whether anything is at `path`, a link (even a dangling one) included.
fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Creates `path` with `bytes`: never over a file that is there (one put
/// there since the look is refused too), never through a link.
fn create_new(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    infer_bench_results::files::check(path)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => InitError::Exists {
                path: path.to_path_buf(),
            }
            .into(),
            _ => Error::io(path, e),
        })?;
    file.write_all(bytes).map_err(|e| Error::io(path, e))
}

/// A spec's name, as the spec language takes it.
fn check_name(name: &str) -> Result<(), InitError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(InitError::BadName {
            found: name.to_string(),
        })
    }
}

/// A base URL init can ask and write: http(s), a host, no credentials
/// (a spec is committed: a key goes in `api_key_env`), no query.
fn check_url(url: &str) -> Result<(), InitError> {
    let bad = |why| {
        Err(InitError::BadUrl {
            url: url.to_string(),
            why,
        })
    };
    if url.chars().any(char::is_control) {
        return bad("it holds a control character");
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return bad("the scheme must be http or https");
    }
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return bad("it is not a URL");
    };
    if parsed.host_str().is_none_or(str::is_empty) {
        return bad("it names no host");
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return bad(
            "it holds credentials, which would be committed with the spec (a key goes in the target's api_key_env)",
        );
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return bad("a base URL has no query or fragment");
    }
    Ok(())
}

/// `GET {url}/models` (and `{url}/v1/models` when that is not found and
/// `url` does not end in /v1): the model (`want`, or the first) and the
/// dialect. When neither is found, a KServe v2 server's `GET {url}/v2`
/// ([`kserve::ask`]).
pub fn ask_server(url: &str, want: Option<&str>) -> Result<Served> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let client =
        crate::protocol::client::control_client(MODELS_TIMEOUT).map_err(InitError::Client)?;
    let base = url.trim_end_matches('/');
    Ok(rt.block_on(ask(&client, base, want))?)
}

async fn ask(
    client: &reqwest::Client,
    base: &str,
    want: Option<&str>,
) -> Result<Served, InitError> {
    match get_models(client, base).await {
        Ok(body) => return read_models(base, &body, want),
        Err(Fetch::Status(404)) => {}
        Err(e) => return Err(fetch_error(base, e)),
    }
    if !base.ends_with("/v1") {
        let v1 = format!("{base}/v1");
        if let Ok(body) = get_models(client, &v1).await {
            return read_models(&v1, &body, want);
        }
    }
    // The URL as given is the one to name when nothing answers.
    kserve::ask(client, base, want)
        .await
        .unwrap_or_else(|| Err(fetch_error(base, Fetch::Status(404))))
}

/// Why `/models` gave no body to read.
enum Fetch {
    /// No answer (`why`: the error's chain).
    Failed(String),
    /// An answer with a failure status.
    Status(u16),
}

fn fetch_error(base: &str, e: Fetch) -> InitError {
    let url = format!("{base}/models");
    let why = match e {
        Fetch::Failed(why) => why,
        Fetch::Status(401 | 403) => "it wants a key (HTTP 401/403): init sends none; write the target by hand with api_key_env".into(),
        Fetch::Status(code) => format!("it answered HTTP {code}"),
    };
    InitError::Unreachable { url, why }
}

/// The body of `GET {base}/models`, read up to the warm-up cap, within
/// [`MODELS_TIMEOUT`].
async fn get_models(client: &reqwest::Client, base: &str) -> Result<Vec<u8>, Fetch> {
    let deadline = Instant::now() + MODELS_TIMEOUT;
    let response = client
        .get(format!("{base}/models"))
        .send()
        .await
        .map_err(|e| Fetch::Failed(crate::protocol::client::error_chain(&e)))?;
    if !response.status().is_success() {
        return Err(Fetch::Status(response.status().as_u16()));
    }
    Ok(crate::protocol::client::read_capped(
        response,
        crate::protocol::http::WARM_BODY_BYTES,
        deadline,
    )
    .await)
}

/// The model of a `/models` body (`want`, else the first), and the first
/// dialect an `owned_by` names (as the run's own identification reads it).
pub fn read_models(base: &str, body: &[u8], want: Option<&str>) -> Result<Served, InitError> {
    let no_model = |why: &str| InitError::NoModel {
        url: format!("{base}/models"),
        why: why.to_string(),
    };
    let v: serde_json::Value = serde_json::from_slice(body)
        .map_err(|_| no_model("its answer is not JSON (or is longer than init reads)"))?;
    let data = v
        .get("data")
        .and_then(|d| d.as_array())
        .ok_or_else(|| no_model("its answer has no `data` list"))?;
    let ids = || data.iter().filter_map(|m| m.get("id")?.as_str());
    let model = match want {
        None => data
            .first()
            .and_then(|m| m.get("id"))
            .and_then(|id| id.as_str())
            .ok_or_else(|| no_model("its `data` list has no model with an `id`"))?,
        Some(w) => ids()
            .find(|id| *id == w)
            .ok_or_else(|| InitError::NotListed {
                url: format!("{base}/models"),
                shown: shown(w),
                listed: listed(ids()),
            })?,
    };
    check_model_id(model)?;
    let dialect = data
        .iter()
        .filter_map(|m| m.get("owned_by")?.as_str())
        .find_map(Dialect::from_owned_by);
    Ok(Served {
        base_url: base.to_string(),
        model: model.to_string(),
        api: ServedApi::OpenAi { dialect },
    })
}

/// Outside text in a message: quoted, escaped, at most 80 characters.
fn shown(s: &str) -> String {
    let full = format!("{s:?}");
    let mut out: String = full.chars().take(80).collect();
    if out.len() < full.len() {
        out.push_str("...");
    }
    out
}

/// The first few of a server's names, for a message.
fn listed<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut names = names.peekable();
    if names.peek().is_none() {
        return "none".into();
    }
    let mut out: Vec<String> = names.by_ref().take(10).map(shown).collect();
    if names.next().is_some() {
        out.push("...".into());
    }
    out.join(", ")
}

/// A model id that can go into a spec as a string: not empty, not too
/// long, no control character (a line break, an escape).
fn check_model_id(id: &str) -> Result<(), InitError> {
    let why = if id.is_empty() {
        "is empty"
    } else if id.len() > MAX_MODEL_ID_BYTES {
        "is longer than 512 bytes"
    } else if id.chars().any(char::is_control) {
        "holds a control character (a line break, an escape...)"
    } else {
        return Ok(());
    };
    Err(InitError::UnusableModelId {
        shown: shown(id),
        why,
    })
}

/// `s` as a TOML string, written by the `toml` crate: quoted and escaped,
/// never able to end its line or open a table.
pub fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Compiles and plans `text` as `validate` does.
fn check_spec(text: &str) -> Result<(), InitError> {
    let spec = crate::spec::compile(SPEC_FILE, text, Path::new(".")).map_err(InitError::Invalid)?;
    let plan = crate::plan::Plan::build(&spec).map_err(InitError::Invalid)?;
    crate::sim::fit::check(&spec, &plan).map_err(InitError::Invalid)?;
    Ok(())
}

/// The starter spec: the simulator without `served`, else a target at
/// its base URL serving its model, with the workload it takes.
pub fn spec_text(name: &str, served: Option<&Served>) -> String {
    let mut s = String::new();
    s.push_str(&format!("#:schema {SCHEMA_URL}\n"));
    s.push_str(match served {
        None => SIM_HEAD,
        Some(_) => SERVER_HEAD,
    });
    s.push_str(&format!(
        "name = {:<30} # names the results folder and the default baseline file\n",
        toml_str(name)
    ));
    s.push_str(&format!(
        "description = \"{}\"   # for people\n",
        match served.map(|s| &s.api) {
            Some(ServedApi::Tensors { .. }) => "A starter spec: a short sweep of tensor inferences",
            _ => "A starter spec: a short concurrency sweep of chat requests",
        }
    ));
    s.push_str(
        "seed = 1                              # the same seed sends the same requests at the same offsets\n\n",
    );
    let Some(sv) = served else {
        s.push_str(SIM_TARGET);
        s.push_str(WORKLOAD);
        s.push_str(IGNORE_EOS);
        push_load(&mut s, name, None);
        return s;
    };
    s.push_str(SERVER_TARGET);
    match &sv.api {
        ServedApi::OpenAi { dialect } => {
            s.push_str(OPENAI_KIND);
            s.push_str(&format!(
                "base_url = {}   # the server's OpenAI base URL\n",
                toml_str(&sv.base_url)
            ));
            match dialect {
                Some(d) => s.push_str(&format!(
                    "dialect = {}   # the request fields beyond OpenAI's it takes: named by its /models\n",
                    toml_str(d.name())
                )),
                None => s.push_str(NO_DIALECT),
            }
            s.push_str(METRICS_HINT);
        }
        ServedApi::Tensors { .. } | ServedApi::Generate { .. } => {
            s.push_str(KSERVE_KIND);
            s.push_str(&format!(
                "base_url = {}   # the server's root: KServe v2 paths (/v2/models/...) go under it\n",
                toml_str(&sv.base_url)
            ));
            s.push_str(TRITON_METRICS_HINT);
        }
    }
    s.push_str("\n[models.model]\n");
    s.push_str(&format!(
        "served_name = {}   # the `model` of each request: {}\n",
        toml_str(&sv.model),
        match sv.api {
            ServedApi::OpenAi { .. } => "the first model of its /models, or --model",
            _ => "the first ready model it lists that init can send, or --model",
        }
    ));
    match &sv.api {
        ServedApi::OpenAi { dialect } => {
            s.push_str(WORKLOAD);
            if dialect.is_some_and(|d| d.wire_name("ignore_eos").is_some()) {
                s.push_str(IGNORE_EOS);
            } else {
                s.push_str(NO_IGNORE_EOS);
            }
        }
        ServedApi::Generate { stream } => {
            s.push_str(GENERATE_WORKLOAD);
            if !stream {
                s.push_str(GENERATE_NOT_STREAMED);
            }
        }
        ServedApi::Tensors { inputs, .. } => {
            s.push_str(TENSOR_WORKLOAD);
            for t in inputs {
                let dims: Vec<String> = t.shape.iter().map(u64::to_string).collect();
                s.push_str(&format!(
                    "  {{ name = {}, datatype = \"{}\", shape = [{}] }},\n",
                    toml_str(&t.name),
                    t.datatype.name(),
                    dims.join(", ")
                ));
            }
            s.push_str(TENSOR_WORKLOAD_TAIL);
        }
    }
    push_load(&mut s, name, Some(&sv.api));
    s
}

/// `[load]`, `[matrix]`, `[slo]` and `[regression]`: a short sweep, the
/// gates that mean something for what the workload sends.
fn push_load(s: &mut String, name: &str, api: Option<&ServedApi>) {
    s.push_str(LOAD);
    match api {
        Some(ServedApi::Tensors { max_batch, .. }) => {
            s.push_str(TENSOR_CONCURRENCY);
            match max_batch {
                None => s.push_str(
                    "# batch: one item a request: the model's inputs have no batch dimension\n",
                ),
                Some(None) => s.push_str(
                    "batch = [1]                           # items per request; the server does not say how many the model takes: add sizes it does\n",
                ),
                Some(Some(m)) => {
                    // 1, 8 and 32 where the model takes them, and its most.
                    let mut sizes: Vec<u64> = [1, 8, 32].into_iter().filter(|b| b <= m).collect();
                    if *m < 32 && !sizes.contains(m) {
                        sizes.push(*m);
                    }
                    let sizes: Vec<String> = sizes.iter().map(u64::to_string).collect();
                    let line = format!("batch = [{}]", sizes.join(", "));
                    s.push_str(&format!(
                        "{line:<37} # items per request: the model takes up to {m} (its max_batch_size)\n"
                    ));
                }
            }
            s.push_str(TENSOR_SLO);
        }
        Some(ServedApi::Generate { stream: false }) => {
            s.push_str(CONCURRENCY);
            s.push_str(WHOLE_ANSWER_SLO);
        }
        _ => {
            s.push_str(CONCURRENCY);
            s.push_str(STREAM_SLO);
        }
    }
    s.push_str(REGRESSION);
    s.push_str(&format!(
        "baseline = {}   # what `run --baseline` judges against; `infer-bench bless RESULTS` writes it (relative to the folder you run infer-bench in)\n",
        toml_str(&format!("{BASELINES_DIR}/{name}.json"))
    ));
    s.push_str(match api {
        Some(ServedApi::Tensors { .. }) => TENSOR_GATES,
        Some(ServedApi::Generate { stream: false }) => WHOLE_ANSWER_GATES,
        _ => GATES,
    });
}

const SIM_HEAD: &str = "\
# A starter spec, written by `infer-bench init`. It runs as it is, with no
# server and no GPU, in a few seconds:
#
#   infer-bench run bench.toml
#
# The spec language: docs/spec.md in infer-bench's repository. To measure
# your own server, replace [targets.sim] and [targets.sim.sim] below with
#
#   [targets.server]
#   kind = \"openai\"                        # any OpenAI-compatible server
#   base_url = \"http://127.0.0.1:8000/v1\"  # its OpenAI base URL
#
# and set `served_name` under [models.llama-8b] to the model it serves
# (`infer-bench init --url URL` writes that spec for you, asking the server).
";

const SERVER_HEAD: &str = "\
# A starter spec, written by `infer-bench init --url`, for the server that
# answered there. Run it with the server up:
#
#   infer-bench run bench.toml
#
# The spec language: docs/spec.md in infer-bench's repository.
";

const SIM_TARGET: &str = "\
# Where requests go: the built-in simulator, an OpenAI-compatible server
# whose timings come from a performance model of the GPU.
[targets.sim]
kind = \"sim\"                          # the simulator: no server, no GPU needed
gpu = \"h100-sxm\"                      # the simulated GPU (`infer-bench catalog` lists them)

[targets.sim.sim]
clock = \"virtual\"                     # simulated time: the same numbers on every machine, in seconds
noise = 0.02                          # each run's speed drawn from N(1, 2%), as a real server varies

[models.llama-8b]
preset = \"llama-3.1-8b\"               # the architecture the simulator models (`infer-bench catalog`)
served_name = \"meta-llama/Llama-3.1-8B-Instruct\"   # the `model` of each request
";

const SERVER_TARGET: &str = "\
# Where requests go: the server init asked.
[targets.server]
";

const OPENAI_KIND: &str = "\
kind = \"openai\"                       # any OpenAI-compatible server (vLLM, SGLang, llama.cpp, TGI...)
";

const KSERVE_KIND: &str = "\
kind = \"openai\"                       # a server over HTTP: the workload's api says which protocol (here KServe v2)
";

const NO_DIALECT: &str = "\
# dialect: left out: the server named none in its /models, and the run asks
# again when it starts. Set it (\"vllm\", \"sglang\", \"llama.cpp\", \"trtllm\",
# \"tgi\", \"openai\") to send the request fields beyond OpenAI's it takes.
";

const TRITON_METRICS_HINT: &str = "\
# metrics_url = \"http://HOST:8002/metrics\"   # Triton's Prometheus metrics (queue, compute, its GPU gauges), sampled during each point
";

const METRICS_HINT: &str = "\
# metrics_url = \"http://HOST:PORT/metrics\"   # its Prometheus metrics, sampled during each point
";

const WORKLOAD: &str = "
# What each request asks for.
[workloads.chat]
api = \"chat\"                          # OpenAI chat completions, streamed
input_tokens = \"uniform(128, 512)\"    # the prompt's length in tokens, drawn per request
output_tokens = \"uniform(32, 128)\"    # the answer's length in tokens, drawn per request
";

const GENERATE_WORKLOAD: &str = "
# What each request asks for: text through Triton's generate extension
# (the model's `text_input`; `max_tokens` caps the answer).
[workloads.generate]
api = \"generate\"                      # POST /v2/models/{model}/generate_stream (TensorRT-LLM, vLLM backends)
input_tokens = \"uniform(128, 512)\"    # the prompt's length in tokens, drawn per request
output_tokens = \"uniform(32, 128)\"    # the answer's cap in tokens (max_tokens), drawn per request
";

const GENERATE_NOT_STREAMED: &str = "\
stream = false                        # the model is not decoupled: one whole answer a request, from /generate
";

const TENSOR_WORKLOAD: &str = "
# What each request sends: KServe v2 tensors, as the model's metadata
# declares its inputs (each shape per item; the batch leads on the wire).
[workloads.tensors]
api = \"kserve\"                        # POST /v2/models/{model}/infer (Triton, KServe, TorchServe, Seldon)
inputs = [                            # from the model's metadata; fill = \"normal(0, 1)\" and others: docs/spec.md
";

const TENSOR_WORKLOAD_TAIL: &str = "\
]
binary = true                         # the binary tensor extension (false: JSON numbers, ~5x the bytes)
";

const IGNORE_EOS: &str = "\
ignore_eos = true                     # every answer runs to its drawn length
";

const NO_IGNORE_EOS: &str = "\
# ignore_eos = true                   # every answer to its drawn length: needs a dialect that takes it
";

const LOAD: &str = "
# How the load runs: a closed loop, each point's concurrency in flight.
[load]
warmup = \"1s\"                         # sent before each run, not measured
duration = \"5s\"                       # each run's measurement window
runs = 3                              # independent runs per point: what the regression gate compares
";

const CONCURRENCY: &str = "
# The points: one per concurrency (requests in flight, each sent when one ends).
[matrix]
concurrency = [1, 4, 16]              # a small sweep; add values to find where latency climbs
";

const TENSOR_CONCURRENCY: &str = "
# The points: one per batch and concurrency (requests in flight, each sent
# when one ends).
[matrix]
concurrency = [1, 4]                  # a small sweep; add values to find where latency climbs
";

const STREAM_SLO: &str = "
# Pass/fail gates on each point (`run` exits 1 when one fails). A
# percentile needs enough requests to mean anything: p90 needs 44 a point,
# p99 459 (lengthen `duration` first); a point with fewer is reported
# INVALID rather than judged on noise.
[slo]
ttft = \"p50 < 500ms\"                  # time to first token: half the requests under 500 ms
tpot = \"p50 < 50ms\"                   # time per output token after the first (median)
error_rate = \"< 1%\"                   # requests that failed
";

const WHOLE_ANSWER_SLO: &str = "
# Pass/fail gates on each point (`run` exits 1 when one fails). A
# percentile needs enough requests to mean anything: p90 needs 44 a point,
# p99 459 (lengthen `duration` first); a point with fewer is reported
# INVALID rather than judged on noise. The answer comes whole, so the
# request's latency is the time to it.
[slo]
e2e = \"p50 < 5s\"                      # the whole request: half of them under 5 s
error_rate = \"< 1%\"                   # requests that failed
";

const TENSOR_SLO: &str = "
# Pass/fail gates on each point (`run` exits 1 when one fails). A
# percentile needs enough requests to mean anything: p90 needs 44 a point,
# p99 459 (lengthen `duration` first); a point with fewer is reported
# INVALID rather than judged on noise.
[slo]
e2e = \"p50 < 500ms\"                   # an inference, sent to answered: half of them under 500 ms
error_rate = \"< 1%\"                   # requests that failed
";

const REGRESSION: &str = "
# The regression gate: `infer-bench run bench.toml --baseline` compares each
# point's runs with the baseline's and exits 1 on a regression.
[regression]
";

const GATES: &str = "\
metrics = [                           # the gates: a metric, its statistic, the change that is still noise
  { metric = \"ttft\", stat = \"p50\", noise = \"10%\" },
  { metric = \"tpot\", stat = \"p50\", noise = \"5%\" },
  { metric = \"output_tokens_per_s\", noise = \"5%\" },
  { metric = \"error_rate\", noise = \"1%\" },
]
";

const WHOLE_ANSWER_GATES: &str = "\
metrics = [                           # the gates: a metric, its statistic, the change that is still noise
  { metric = \"e2e\", stat = \"p50\", noise = \"10%\" },
  { metric = \"output_tokens_per_s\", noise = \"5%\" },
  { metric = \"error_rate\", noise = \"1%\" },
]
";

const TENSOR_GATES: &str = "\
metrics = [                           # the gates: a metric, its statistic, the change that is still noise
  { metric = \"e2e\", stat = \"p50\", noise = \"10%\" },
  { metric = \"inputs_per_s\", noise = \"5%\" },
  { metric = \"error_rate\", noise = \"1%\" },
]
";

/// The workflow of `--ci github`: docs/examples/github-actions-pr.yml,
/// for `bench.toml`, on a GitHub-hosted runner for the simulator or a
/// self-hosted one that reaches the server.
pub fn workflow_text(server: bool) -> String {
    let runner = if server {
        "[self-hosted]   # a runner that reaches the server in bench.toml"
    } else {
        "ubuntu-latest   # the simulator in virtual time needs no GPU"
    };
    WORKFLOW.replace("{RUNNER}", runner)
}

const WORKFLOW: &str = "\
# infer-bench's regression gate for pull requests, written by
# `infer-bench init --ci github` (docs/examples/github-actions-pr.yml in
# infer-bench's repository; docs/regression.md explains it).
#
# Pull requests: the composite action runs the spec, judges it against the
# baseline as it is on the base branch, writes the Markdown verdict to the
# job summary and a pull-request comment, and fails on exit code != 0. A
# pull request fails (exit 2) until a baseline is committed: run this
# workflow by hand on main (\"Run workflow\") to measure main and propose
# the baseline as a pull request.
#
# `infer-bench/infer-bench@main` stands for infer-bench's repository on
# GitHub: write the owner/name you get it from, and pin a release tag or a
# commit SHA so that the gate does not change under you. Both jobs must run
# on the same class of machine: the baseline's fingerprint must match.
name: inference performance

on:
  pull_request:
  workflow_dispatch:        # run by hand on main to record a new baseline

permissions:
  contents: write           # the bless job pushes a branch
  pull-requests: write      # comment the verdict; open the baseline PR

env:
  SPEC: bench.toml          # relative to the repository's root

jobs:
  judge:
    if: github.event_name == 'pull_request'
    runs-on: {RUNNER}
    steps:
      - uses: actions/checkout@v4
      - uses: dtolnay/rust-toolchain@stable   # the action builds infer-bench
      - name: Benchmark and judge against the baseline on the base branch
        id: gate
        uses: infer-bench/infer-bench@main
        with:
          spec: ${{ env.SPEC }}
      - uses: actions/upload-artifact@v4
        if: always() && steps.gate.outputs.results != ''
        with:
          name: infer-bench
          path: ${{ steps.gate.outputs.results }}

  bless:
    if: github.event_name == 'workflow_dispatch' && github.ref == 'refs/heads/main'
    runs-on: {RUNNER}
    steps:
      - uses: actions/checkout@v4
      - uses: dtolnay/rust-toolchain@stable
      # The infer-bench that the judge job's action builds.
      - run: cargo install --locked --git https://github.com/infer-bench/infer-bench --branch main infer-bench
      - name: Measure main and bless it
        run: |
          infer-bench run \"$SPEC\" --out bench
          infer-bench bless bench
      - name: Propose the new baseline
        uses: peter-evans/create-pull-request@v7
        with:
          branch: infer-bench/baseline
          commit-message: \"Bless a new performance baseline for ${{ env.SPEC }}\"
          title: \"New performance baseline\"
          body: \"Recorded on main by the `bless` job of the inference performance workflow.\"
          add-paths: baselines/
";

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> toml::Table {
        text.parse::<toml::Table>().unwrap()
    }

    #[test]
    fn outside_text_stays_one_toml_string() {
        for s in [
            "plain",
            "a\"b",
            "back\\slash",
            "x\"]\n[targets.evil]\nkind = \"sim\"",
            "it's '''",
            "# not a comment",
            "\u{7f}del",
            "\u{202e}bidi",
        ] {
            let line = format!("k = {}\nafter = 1\n", toml_str(s));
            let t = parse(&line);
            assert_eq!(t["k"].as_str(), Some(s), "{line}");
            assert_eq!(t.len(), 2, "{line}");
        }
    }

    fn read_models_(base: &str, body: &[u8]) -> Result<Served, InitError> {
        read_models(base, body, None)
    }

    #[test]
    fn the_models_list_names_the_model_and_the_dialect() {
        let body = br#"{"object":"list","data":[{"id":"m1","owned_by":"someone"},{"id":"m2","owned_by":"llamacpp"}]}"#;
        let s = read_models_("http://h/v1", body).unwrap();
        assert_eq!(s.model, "m1");
        assert_eq!(s.dialect(), Some(Dialect::LlamaCpp));
        // --model picks one the server lists, and only one.
        let s = read_models("http://h/v1", body, Some("m2")).unwrap();
        assert_eq!(s.model, "m2");
        match read_models("http://h/v1", body, Some("m3\u{1b}")) {
            Err(InitError::NotListed { shown, listed, .. }) => {
                assert_eq!(listed, "\"m1\", \"m2\"");
                assert!(!shown.contains('\u{1b}'), "{shown}");
            }
            other => panic!("{other:?}"),
        }
        let s = read_models_("http://h/v1", br#"{"data":[{"id":"m"}]}"#).unwrap();
        assert_eq!(s.dialect(), None);
        for bad in [
            &b"not json"[..],
            br#"{"data":[]}"#,
            br#"{"data":[{"id":3}]}"#,
        ] {
            assert!(matches!(
                read_models_("http://h/v1", bad),
                Err(InitError::NoModel { .. })
            ));
        }
        for id in ["a\nb", "\u{1b}[2J", ""] {
            let body = serde_json::json!({"data":[{"id": id}]}).to_string();
            assert!(
                matches!(
                    read_models_("http://h/v1", body.as_bytes()),
                    Err(InitError::UnusableModelId { .. })
                ),
                "{id:?}"
            );
        }
        let long = serde_json::json!({"data":[{"id": "x".repeat(513)}]}).to_string();
        assert!(read_models_("http://h/v1", long.as_bytes()).is_err());
    }

    #[test]
    fn both_starter_specs_compile_and_every_key_has_a_comment() {
        let served = Served {
            base_url: "http://127.0.0.1:8000/v1".into(),
            model: "org/model \"q\" ]".into(),
            api: ServedApi::OpenAi { dialect: None },
        };
        let triton = |api| Served {
            base_url: "http://127.0.0.1:8000".into(),
            model: "classifier".into(),
            api,
        };
        let images = |max_batch| {
            triton(ServedApi::Tensors {
                inputs: vec![
                    Tensor {
                        name: "images\"] [x]".into(),
                        datatype: DataType::Fp32,
                        shape: vec![3, 224, 224],
                    },
                    Tensor {
                        name: "k".into(),
                        datatype: DataType::Int64,
                        shape: vec![1],
                    },
                ],
                max_batch,
            })
        };
        for (text, target) in [
            (spec_text("bench", None), "sim"),
            (spec_text("my-spec", Some(&served)), "server"),
            (
                spec_text(
                    "bench",
                    Some(&Served {
                        api: ServedApi::OpenAi {
                            dialect: Some(Dialect::Vllm),
                        },
                        ..served.clone()
                    }),
                ),
                "server",
            ),
            (spec_text("t", Some(&images(Some(Some(32))))), "server"),
            (spec_text("t", Some(&images(Some(Some(4))))), "server"),
            (spec_text("t", Some(&images(Some(None)))), "server"),
            (spec_text("t", Some(&images(None))), "server"),
            (
                spec_text("g", Some(&triton(ServedApi::Generate { stream: true }))),
                "server",
            ),
            (
                spec_text("g", Some(&triton(ServedApi::Generate { stream: false }))),
                "server",
            ),
        ] {
            assert!(text.starts_with(&format!("#:schema {SCHEMA_URL}\n")));
            check_spec(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let t = parse(&text);
            let targets = t["targets"].as_table().unwrap();
            assert_eq!(targets.keys().collect::<Vec<_>>(), [target]);
            for line in text.lines() {
                let is_key = line.contains(" = ") && !line.starts_with('#');
                if is_key && !line.starts_with("  {") {
                    assert!(line.contains(" # "), "a key without a comment: {line}");
                }
            }
        }
        let t = parse(&spec_text("my-spec", Some(&served)));
        assert_eq!(
            t["models"]["model"]["served_name"].as_str(),
            Some(served.model.as_str())
        );
        assert_eq!(
            t["regression"]["baseline"].as_str(),
            Some("baselines/my-spec.json")
        );
        // A tensor model's inputs as its metadata declares them, its
        // batch sizes up to its max_batch_size.
        let t = parse(&spec_text("t", Some(&images(Some(Some(32))))));
        let w = &t["workloads"]["tensors"];
        assert_eq!(w["api"].as_str(), Some("kserve"));
        let inputs = w["inputs"].as_array().unwrap();
        assert_eq!(inputs[0]["name"].as_str(), Some("images\"] [x]"));
        assert_eq!(inputs[0]["shape"].as_array().unwrap().len(), 3);
        assert_eq!(inputs[1]["datatype"].as_str(), Some("INT64"));
        let batches = |t: &toml::Table| t["matrix"].get("batch").map(|b| b.to_string());
        assert_eq!(batches(&t).as_deref(), Some("[1, 8, 32]"));
        let t = parse(&spec_text("t", Some(&images(Some(Some(4))))));
        assert_eq!(batches(&t).as_deref(), Some("[1, 4]"));
        assert_eq!(batches(&parse(&spec_text("t", Some(&images(None))))), None);
        let t = parse(&spec_text(
            "g",
            Some(&triton(ServedApi::Generate { stream: false })),
        ));
        assert_eq!(t["workloads"]["generate"]["stream"].as_bool(), Some(false));
    }

    #[test]
    fn names_and_urls_are_checked() {
        for ok in ["bench", "my.spec_2-x"] {
            check_name(ok).unwrap();
        }
        for bad in ["", ".hidden", "a b", "a/b", "x\ny", &"n".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        check_url("http://127.0.0.1:8000/v1").unwrap();
        check_url("https://api.example.com/v1/").unwrap();
        for bad in [
            "127.0.0.1:8000",
            "ftp://h/v1",
            "http://user:key@h/v1",
            "http://h/v1?x=1",
            "http://h/v1\n[x]",
            "http://",
        ] {
            assert!(check_url(bad).is_err(), "{bad:?}");
        }
    }
}
