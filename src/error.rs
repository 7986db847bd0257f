//! The command line's errors, and the one place an error becomes an exit
//! code ([`exit_code`]; the table of codes is `infer_bench_results::exit`,
//! whose constants are re-exported here). Every error says what it
//! concerns (a file, a target, an option) in one sentence, with a hint
//! where there is one; the stages' errors pass through as they are.

use std::path::PathBuf;
use std::process::ExitCode;

pub use infer_bench_results::exit::{
    EXIT_FAILED, EXIT_INFRA, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNJUDGED, EXIT_USAGE,
};

use infer_bench_engine::error::StartError;

/// Everything that can stop a command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A spec is wrong (every problem, with file:line:col).
    #[error("{0}")]
    Spec(#[from] infer_bench_spec::SpecErrors),
    /// A run or a merge stopped.
    #[error(transparent)]
    Engine(#[from] infer_bench_engine::Error),
    /// A results or baseline file could not be read or written, or is not
    /// what it should be.
    #[error(transparent)]
    Results(#[from] infer_bench_results::Error),
    /// An output (stdout, a report, a verdict file) could not be written.
    #[error("error: {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The command line asks for something impossible.
    #[error("error: {0}")]
    Usage(#[from] Usage),
    /// `--start-at` cannot be read, or this machine's clock cannot keep it.
    #[error("error: {0}")]
    Start(#[from] StartError),
    /// `bless` refused the results (`file`).
    #[error("error: {}: {source}", file.display())]
    Bless {
        file: PathBuf,
        #[source]
        source: infer_bench_judge::baseline::BlessError,
    },
    /// The baseline's pinned rules cannot be read.
    #[error("error: {0}")]
    Judge(#[from] infer_bench_judge::Error),
    /// `bless`: the spec's `[regression] baseline` leads out of the tree.
    #[error("error: bless: [regression] baseline: {0}")]
    BaselineOutside(#[source] PathError),
    /// The history store could not be read or written, or a record made.
    #[error("error: history: {0}")]
    History(#[from] infer_bench_history::store::StoreError),
    /// `init` wrote nothing.
    #[error("error: {0}")]
    Init(#[from] crate::init::InitError),
    /// A file at a git revision (`--baseline-ref`).
    #[error("error: {0}")]
    Git(#[from] GitError),
    #[error("error: cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("error: cannot listen for signals: {0}")]
    Signals(#[source] std::io::Error),
    #[error("error: cannot render the manual page: {0}")]
    Manual(#[source] std::io::Error),
    /// `sim-server`: the simulator could not start.
    #[error("error: cannot start the simulator: {0}")]
    Simulator(#[source] infer_bench_sim::Error),
    /// `telemetry-probe`: no GPU.
    #[error(
        "error: there is no GPU to probe: {0}\n  hint: run this on a machine with an NVIDIA GPU and its driver"
    )]
    NoGpuToProbe(#[source] infer_bench_telemetry::Error),
    /// `self-bench`: its server or floor client could not run.
    #[error("error: {0}")]
    SelfBench(#[from] SelfBenchError),
    /// The run was interrupted (Ctrl-C, SIGTERM, SIGHUP); finished points
    /// were kept.
    #[error("interrupted: {pending} point(s) did not finish")]
    Interrupted { pending: usize },
    /// `run --baseline` was interrupted while it re-ran a regression.
    #[error("interrupted: the confirmation re-run did not finish")]
    ConfirmationInterrupted,
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The exit code for an error that stopped a command: 2 for what the user
/// can fix in the spec, the command line or an input file; 3 for the world
/// outside (a server, a GPU, the clock, the disk); 130 when interrupted.
pub fn exit_code(e: &Error) -> u8 {
    use infer_bench_engine::Error as Engine;
    use infer_bench_results::Error as Results;
    let results = |e: &Results| match e {
        Results::Io { .. } => EXIT_INFRA,
        Results::Read { .. } | Results::Format { .. } | Results::Symlink { .. } => EXIT_USAGE,
    };
    match e {
        Error::Spec(_)
        | Error::Usage(_)
        | Error::Bless { .. }
        | Error::Judge(_)
        | Error::BaselineOutside(_) => EXIT_USAGE,
        Error::Results(e) => results(e),
        Error::Engine(e) => match e {
            Engine::Results(e) => results(e),
            Engine::Workload(_)
            | Engine::Merge(_)
            | Engine::Timetable(_)
            | Engine::SearchWithAgents
            | Engine::Busy { .. } => EXIT_USAGE,
            Engine::Io { .. } | Engine::Telemetry(_) => EXIT_INFRA,
        },
        Error::Start(e) => match e {
            StartError::Unreadable { .. } => EXIT_USAGE,
            StartError::Past { .. } | StartError::TooFarAhead { .. } => EXIT_INFRA,
        },
        Error::History(e) => {
            use infer_bench_history::store::StoreError;
            match e {
                StoreError::Write(e) => results(e),
                StoreError::List { .. } => EXIT_INFRA,
                StoreError::Record(_) => EXIT_USAGE,
            }
        }
        Error::Init(e) => {
            use crate::init::InitError;
            match e {
                InitError::Exists { .. }
                | InitError::BadName { .. }
                | InitError::BadUrl { .. }
                | InitError::ModelWithoutUrl => EXIT_USAGE,
                InitError::Unreachable { .. }
                | InitError::NoModel { .. }
                | InitError::NotListed { .. }
                | InitError::Unsendable { .. }
                | InitError::UnusableModelId { .. }
                | InitError::Invalid(_)
                | InitError::Client(_) => EXIT_INFRA,
            }
        }
        Error::Git(e) => match e {
            GitError::Missing(_) => EXIT_USAGE,
            GitError::Failed(_) => EXIT_INFRA,
        },
        Error::SelfBench(SelfBenchError::NoSuchCheck { .. }) => EXIT_USAGE,
        Error::Io { .. }
        | Error::Runtime(_)
        | Error::Signals(_)
        | Error::Manual(_)
        | Error::Simulator(_)
        | Error::NoGpuToProbe(_)
        | Error::SelfBench(_) => EXIT_INFRA,
        Error::Interrupted { .. } | Error::ConfirmationInterrupted => EXIT_INTERRUPTED,
    }
}

/// The outcome of a command: its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome(pub u8);

impl Outcome {
    /// The outcome of a command that stopped with `e`.
    pub fn of(e: &Error) -> Outcome {
        Outcome(exit_code(e))
    }
}

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> ExitCode {
        ExitCode::from(o.0)
    }
}

/// What the command line asks for that cannot be done.
#[derive(Debug, thiserror::Error)]
pub enum Usage {
    /// A results file given on the command line that is not there.
    #[error(
        "no results at {}: expected a results.json file or a run directory that holds one (`infer-bench run SPEC --out DIR` writes DIR/results.json)",
        path.display()
    )]
    NoResults { path: PathBuf },
    #[error("no point of the plan matches --only {}", only.join(" "))]
    NoPointSelected { only: Vec<String> },
    #[error(
        "{}: no selected point has a simulated target (kind = \"sim\")",
        spec.display()
    )]
    NoSimulatedPoint { spec: PathBuf },
    #[error(
        "{flag} sets the clock of simulator targets, and {} has none (kind = \"sim\")",
        spec.display()
    )]
    ClockWithoutSimulator { flag: &'static str, spec: PathBuf },
    #[error(
        "--virtual: point `{point}` sends workload \"{workload}\" ({api}), and the simulator in virtual time serves generation, embeddings and rerank requests, not tensors; run it in real time, or leave it out with --only"
    )]
    VirtualTensors {
        point: String,
        workload: String,
        api: &'static str,
    },
    #[error("--markdown and --junit write the verdicts of --baseline; add --baseline")]
    VerdictFilesWithoutBaseline,
    #[error("--agent expects K/N with 1 <= K <= N, found \"{found}\"")]
    BadAgent { found: String },
    #[error(
        "--baseline judges a whole run, and an agent sends only its share: merge the agents' results (`infer-bench merge`), then `infer-bench diff` the merged file"
    )]
    AgentWithBaseline,
    #[error(
        "--agent: target `{target}` is the built-in simulator, which each process starts for itself; agents must share one server: use an openai target (`infer-bench sim-server` serves the simulator on its own)"
    )]
    AgentOnSimulator { target: String },
    #[error(
        "--agent: target `{target}` launches its own server, which every agent would start for itself; start the server once and point an openai target without `launch` at it"
    )]
    AgentLaunches { target: String },
    #[error(
        "there is no baseline at {} yet\nhint: record one with `infer-bench bless RESULTS` (on the main branch) and commit it, or name another with --baseline",
        path.display()
    )]
    NoBaseline { path: PathBuf },
    /// No baseline at `path` in git revision `rev` (`--baseline-ref`).
    #[error(
        "there is no baseline at {rev}:{}\nhint: bless one on that branch and commit it (a shallow checkout may lack {rev}: `git fetch origin <branch>` first)",
        path.display()
    )]
    NoBaselineAtRevision { rev: String, path: PathBuf },
    /// `history check` found no spec in the store.
    #[error(
        "there is no history in {} yet\nhint: record a run of main with `infer-bench history record RESULTS`, or start from the committed baselines with `infer-bench history import`",
        dir.display()
    )]
    NoHistory { dir: PathBuf },
    /// `history report --commit-url` must be an https:// address.
    #[error("--commit-url: {0}")]
    CommitUrl(#[source] infer_bench_export::history::page::CommitUrlError),
}

/// Why a path named by a spec may not be written: it leads out of the
/// current directory's tree, or the tree cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("cannot read the current directory: {0}")]
    Cwd(#[source] std::io::Error),
    #[error(
        "{} is outside the current directory ({}); a path from a spec must stay inside it (give it on the command line to write elsewhere)",
        path.display(),
        cwd.display()
    )]
    Outside { path: PathBuf, cwd: PathBuf },
    /// The part of the path that exists cannot be resolved.
    #[error("{}: {source}", path.display())]
    Resolve {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Why a file could not be read from git.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The revision, or the path at that revision, does not exist.
    #[error(transparent)]
    Missing(GitMissing),
    /// git could not be run, or failed otherwise.
    #[error(transparent)]
    Failed(GitFailed),
}

/// What is not there (a usage error: the revision or path is wrong).
#[derive(Debug, thiserror::Error)]
pub enum GitMissing {
    #[error(
        "\"{rev}\" is not a git revision (expected a branch, tag or commit such as origin/main)"
    )]
    NotARevision { rev: String },
    #[error("{} is not a file", path.display())]
    NotAFile { path: PathBuf },
    /// The folder of the path is not there.
    #[error("{}: there is no such folder", path.display())]
    NoFolder { path: PathBuf },
    /// The path is not in a git work tree.
    #[error(
        "{} is not in a git repository, so it cannot be read at a revision (--baseline-ref reads the baseline from git; give a path inside the repository, or drop --baseline-ref to read the file as it is)",
        path.display()
    )]
    NotInRepository { path: PathBuf },
    /// git says the revision or the path at it does not exist (`said`:
    /// the first line of its message).
    #[error("{} is not in git revision {rev} ({said})", path.display())]
    NotInRevision {
        path: PathBuf,
        rev: String,
        said: String,
    },
}

/// How reading from git failed (infrastructure).
#[derive(Debug, thiserror::Error)]
pub enum GitFailed {
    #[error("cannot run git to read {rev}: {source}")]
    Run {
        rev: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{rev}:{} is not UTF-8 text", path.display())]
    NotUtf8 { rev: String, path: PathBuf },
    /// git failed otherwise (`said`: the first line of its message).
    #[error("git could not read {} at {rev}: {said}", path.display())]
    Git {
        path: PathBuf,
        rev: String,
        said: String,
    },
}

/// Why `self-bench` could not measure.
#[derive(Debug, thiserror::Error)]
pub enum SelfBenchError {
    #[error("self-bench --only: no check `{name}`; the checks are {}", checks.join(", "))]
    NoSuchCheck {
        name: String,
        checks: &'static [&'static str],
    },
    #[error("cannot find this executable: {0}")]
    CurrentExe(#[source] std::io::Error),
    #[error("cannot start the scripted server: {0}")]
    ScriptedServer(#[source] std::io::Error),
    #[error("no stdout from the scripted server")]
    NoStdout,
    #[error("cannot read the scripted server's address: {0}")]
    ReadAddress(#[source] std::io::Error),
    /// The server's first line was not its address (`said`).
    #[error("the scripted server did not start: {said}")]
    ServerDidNotStart { said: String },
    #[error("the self-bench point did not run")]
    PointDidNotRun,
    #[error("cannot start the floor client: {0}")]
    FloorStart(#[source] std::io::Error),
    /// The floor client's process printed no report (`said`: its stdout).
    #[error("the floor client did not report ({status}): {said}")]
    FloorSilent {
        status: std::process::ExitStatus,
        said: String,
    },
    /// The floor client (in its own process) could not run its load.
    #[error(transparent)]
    Floor(#[from] FloorError),
}

/// Why the floor client could not run its load.
#[derive(Debug, thiserror::Error)]
pub enum FloorError {
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot build the client: {0}")]
    Client(#[source] reqwest::Error),
}

/// Why one of the floor client's requests failed (the first is reported).
#[derive(Debug, thiserror::Error)]
pub enum FloorFailure {
    #[error("{0}")]
    Encode(serde_json::Error),
    #[error("{0:?}")]
    Send(reqwest::Error),
    #[error("status {0}")]
    Status(reqwest::StatusCode),
    #[error("{0}")]
    Body(reqwest::Error),
    #[error("{0}")]
    Event(serde_json::Error),
    #[error("the stream ended without [DONE]")]
    NoDone,
}

/// A `--output-tokens` of the floor client that is not a length or a range.
#[derive(Debug, thiserror::Error)]
pub enum LengthsError {
    #[error("`{0}` is not a token count (100) or a range (50-150)")]
    NotCount(String),
    #[error("`{0}`: the range's low end is above its high end")]
    Reversed(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_results::exit::TABLE;

    /// The codes of the table under `heading` in a Markdown file.
    fn documented(file: &str, heading: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let section = text
            .split_once(heading)
            .unwrap_or_else(|| panic!("{file} has no {heading}"))
            .1;
        section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| l.split('|').nth(1)?.trim().parse().ok())
            .collect()
    }

    #[test]
    fn the_docs_list_the_exit_codes_of_the_table() {
        let codes: Vec<u8> = TABLE.iter().map(|(c, _)| *c).collect();
        assert_eq!(documented("README.md", "\n## Exit codes\n"), codes);
        assert_eq!(documented("docs/regression.md", "\n## Exit codes\n"), codes);
    }

    /// Each category of error maps to its code, whatever its words.
    #[test]
    fn errors_map_to_their_category_s_code() {
        let io = || std::io::Error::other("x");
        let cases: Vec<(Error, u8)> = vec![
            (Usage::VerdictFilesWithoutBaseline.into(), EXIT_USAGE),
            (
                infer_bench_engine::Error::SearchWithAgents.into(),
                EXIT_USAGE,
            ),
            (
                infer_bench_engine::Error::io("out", io()).into(),
                EXIT_INFRA,
            ),
            (
                infer_bench_results::Error::io("results.json", io()).into(),
                EXIT_INFRA,
            ),
            (
                infer_bench_results::Error::Symlink {
                    path: "out/results.json".into(),
                    link: "out".into(),
                    target: "/elsewhere".into(),
                }
                .into(),
                EXIT_USAGE,
            ),
            (
                infer_bench_engine::Error::from(infer_bench_results::Error::Format {
                    path: "results.json".into(),
                    problem: infer_bench_results::FormatError::NotOurs {
                        kind: infer_bench_results::FileKind::Results,
                        format: "x",
                    },
                })
                .into(),
                EXIT_USAGE,
            ),
            (
                GitError::Missing(GitMissing::NotAFile { path: "x".into() }).into(),
                EXIT_USAGE,
            ),
            (
                GitError::Failed(GitFailed::Run {
                    rev: "main".into(),
                    source: io(),
                })
                .into(),
                EXIT_INFRA,
            ),
            (
                crate::run::parse_start("tomorrow").unwrap_err().into(),
                EXIT_USAGE,
            ),
            (
                crate::run::check_start(
                    std::time::SystemTime::UNIX_EPOCH,
                    std::time::Duration::ZERO,
                    std::time::Duration::ZERO,
                )
                .unwrap_err()
                .into(),
                EXIT_INFRA,
            ),
            (
                SelfBenchError::NoSuchCheck {
                    name: "x".into(),
                    checks: &[],
                }
                .into(),
                EXIT_USAGE,
            ),
            (SelfBenchError::NoStdout.into(), EXIT_INFRA),
            (
                crate::init::InitError::Exists {
                    path: "bench.toml".into(),
                }
                .into(),
                EXIT_USAGE,
            ),
            (
                crate::init::InitError::Unreachable {
                    url: "http://127.0.0.1:1/v1/models".into(),
                    why: "refused".into(),
                }
                .into(),
                EXIT_INFRA,
            ),
            (Error::Interrupted { pending: 2 }, EXIT_INTERRUPTED),
            (Error::ConfirmationInterrupted, EXIT_INTERRUPTED),
        ];
        for (e, code) in cases {
            assert_eq!(exit_code(&e), code, "{e}");
        }
    }

    // ------------------------------------------------------ no string errors

    /// Every `.rs` file of the product code: `src` and each crate's `src`,
    /// but for `crates/sim`, whose errors are converted on their own branch
    /// (remove the exception with it). Files named `tests.rs` are test
    /// modules (`#[cfg(test)] mod tests;`).
    fn product_files() -> Vec<std::path::PathBuf> {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && path.file_name().is_some_and(|n| n != "tests.rs")
                {
                    out.push(path);
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut out = Vec::new();
        walk(&root.join("src"), &mut out);
        for krate in std::fs::read_dir(root.join("crates")).unwrap() {
            let krate = krate.unwrap().path();
            if krate.join("src").is_dir() {
                walk(&krate.join("src"), &mut out);
            }
        }
        out
    }

    /// `text` with comments and the contents of string and character
    /// literals blanked (newlines kept, so lines still count).
    fn code_only(text: &str) -> String {
        let c: Vec<char> = text.chars().collect();
        let mut out = String::with_capacity(text.len());
        let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
        let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
        let mut i = 0;
        while i < c.len() {
            let prev_ident = i > 0 && ident(c[i - 1]);
            if c[i] == '/' && c.get(i + 1) == Some(&'/') {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        blank(&mut out, c[i]);
                        i += 1;
                    }
                }
            } else if !prev_ident
                && (c[i] == 'r' || (c[i] == 'b' && c.get(i + 1) == Some(&'r')))
                && {
                    let mut j = i + if c[i] == 'b' { 2 } else { 1 };
                    while c.get(j) == Some(&'#') {
                        j += 1;
                    }
                    c.get(j) == Some(&'"')
                }
            {
                // A raw string: r#"..."#, as many hashes at the end.
                let mut j = i + if c[i] == 'b' { 2 } else { 1 };
                let mut hashes = 0;
                while c[j] == '#' {
                    hashes += 1;
                    j += 1;
                }
                j += 1;
                while j < c.len()
                    && !(c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')))
                {
                    blank(&mut out, c[j]);
                    j += 1;
                }
                out.push_str("\"\"");
                i = j + 1 + hashes;
            } else if c[i] == '"' {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    if c[i] == '\\' {
                        blank(&mut out, c[i]);
                        i += 1;
                    }
                    if i < c.len() {
                        blank(&mut out, c[i]);
                    }
                    i += 1;
                }
                out.push_str("\"\"");
                i += 1;
            } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
                // An escaped character literal: '\n', '\u{..}'.
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                out.push_str("' '");
                i += 1;
            } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
            } else {
                out.push(c[i]);
                i += 1;
            }
        }
        out
    }

    /// `code` (see [`code_only`]) without the items marked `#[cfg(test)]`.
    fn without_tests(code: &str) -> String {
        const MARK: &str = "#[cfg(test)]";
        let mut out = String::new();
        let mut rest = code;
        while let Some(at) = rest.find(MARK) {
            out.push_str(&rest[..at]);
            let item = &rest[at..];
            // The item ends at its first `;` or the `}` that closes its
            // first `{`, whichever comes first.
            let mut depth = 0i32;
            let mut end = item.len();
            for (k, ch) in item.char_indices().skip(MARK.len()) {
                match ch {
                    ';' if depth == 0 => {
                        end = k + 1;
                        break;
                    }
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            out.extend(item[..end].chars().filter(|&ch| ch == '\n'));
            rest = &item[end..];
        }
        out.push_str(rest);
        out
    }

    /// The lines of `code` where a `Result<...>` has `String` as its error.
    fn string_errors(code: &str) -> Vec<usize> {
        let b = code.as_bytes();
        let mut lines = Vec::new();
        for (at, _) in code.match_indices("Result<") {
            if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
                continue;
            }
            // The generic arguments, split at their top-level commas.
            let mut depth = 1;
            let mut args = vec![String::new()];
            let mut k = at + "Result<".len();
            while k < b.len() && depth > 0 {
                let ch = b[k] as char;
                match ch {
                    '<' | '(' | '[' => depth += 1,
                    '>' if k > 0 && b[k - 1] == b'-' => {}
                    '>' | ')' | ']' => depth -= 1,
                    ',' if depth == 1 => {
                        args.push(String::new());
                        k += 1;
                        continue;
                    }
                    _ => {}
                }
                if depth > 0 {
                    args.last_mut().unwrap().push(ch);
                }
                k += 1;
            }
            let last = args.last().map(|a| a.trim()).unwrap_or_default();
            if args.len() >= 2 && (last == "String" || last == "std::string::String") {
                lines.push(code[..at].matches('\n').count() + 1);
            }
        }
        lines
    }

    #[test]
    fn the_scanner_finds_string_errors_outside_tests_only() {
        let text = r##"
fn a() -> Result<Vec<Option<u8>>, String> {}
fn b() -> Result<(), std::string::String> {}
type C = Result<Box<dyn Fn() -> u8>, String>;
fn d() -> io::Result<String> {}
fn e() -> Result<String, Error> {}
fn f() -> MyResult<u8, String> {}
// fn g() -> Result<u8, String> {}
const H: &str = "Result<u8, String>";
const I: &str = r#"Result<u8, String>"#;
const J: char = '"';
#[cfg(test)]
mod tests {
    fn k() -> Result<u8, String> { let s = "}"; }
}
#[cfg(test)]
fn l() -> Result<u8, String> {}
fn m() -> Result<u8, String> {}
"##;
        assert_eq!(
            string_errors(&without_tests(&code_only(text))),
            [2, 3, 4, 18]
        );
    }

    /// No product function carries its error as a sentence: errors are
    /// typed, so that callers decide by variant, never by wording.
    #[test]
    fn no_product_code_returns_a_string_as_its_error() {
        let mut found = Vec::new();
        for path in product_files() {
            let text = std::fs::read_to_string(&path).unwrap();
            for line in string_errors(&without_tests(&code_only(&text))) {
                found.push(format!("{}:{line}", path.display()));
            }
        }
        assert!(
            found.is_empty(),
            "Result<_, String> in product code (give the error a type):\n{}",
            found.join("\n")
        );
    }
}
