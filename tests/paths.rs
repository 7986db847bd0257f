//! Paths a pull request controls (issue 36), through the real binary:
//! nothing is written through a symbolic link we did not make; a spec
//! reached through a link out of its repository is refused; an error
//! about a spec quotes a short, escaped excerpt and no raw control; and
//! each mistake with a path or a git revision exits 2, while what the
//! system could not do exits 3.

use std::path::Path;
use std::process::Command;

use infer_bench_testkit::git::git;

/// One point on the built-in simulator, short runs.
const SPEC: &str = r#"name = "paths"
seed = 7

[targets.sim]
kind = "sim"
gpu = "h100-sxm"
gpus = 1

# Virtual time: what these tests bless must be valid on a busy machine too.
[targets.sim.sim]
clock = "virtual"

[models.llama-8b]
preset = "llama-3.1-8b"

[workloads.chat]
input_tokens = 64
output_tokens = 16

[load]
concurrency = 2
warmup = "0s"
duration = "300ms"
runs = 3

[regression]
baseline = "baselines/paths.json"
"#;

struct Out {
    code: i32,
    /// stdout, then stderr.
    text: String,
}

fn ib(dir: &Path, args: &[&str]) -> Out {
    ib_with(dir, args, &[])
}

fn ib_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut c = Command::new(env!("CARGO_BIN_EXE_infer-bench"));
    c.args(args).current_dir(dir);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("the binary runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        text: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

fn link(to: &Path, at: &Path) {
    std::os::unix::fs::symlink(to, at).unwrap();
}

/// `outside` holds only `victim`, as it was.
fn untouched(outside: &Path) {
    let names: Vec<String> = std::fs::read_dir(outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["victim"], "something was written outside");
    assert_eq!(
        std::fs::read_to_string(outside.join("victim")).unwrap(),
        "keep\n"
    );
}

/// A work tree with the spec, a finished run in `good` and its baseline
/// committed; `outside` (not in it) holds `victim`.
fn scene() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("repo");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim"), "keep\n").unwrap();
    std::fs::write(dir.join("spec.toml"), SPEC).unwrap();
    let run = ib(&dir, &["run", "spec.toml", "--out", "good", "--quiet"]);
    assert_eq!(run.code, 0, "{}", run.text);
    let bless = ib(&dir, &["bless", "good"]);
    assert_eq!(bless.code, 0, "{}", bless.text);
    git(&dir, &["init", "-q"]);
    git(&dir, &["add", "spec.toml", "baselines"]);
    git(&dir, &["commit", "-qm", "spec and baseline"]);
    (root, dir, outside)
}

/// Every output a command writes, pre-set as a link to a file or a folder
/// outside: each is refused with exit 2 and a sentence naming the link,
/// and nothing outside is written or changed.
#[test]
fn no_output_is_written_through_a_link() {
    let (_root, dir, outside) = scene();
    let victim = outside.join("victim");
    link(&outside, &dir.join("out-link"));
    link(&victim, &dir.join("file-link"));
    std::fs::create_dir_all(dir.join("linked-in/servers")).unwrap();
    link(&victim, &dir.join("linked-in/requests.jsonl"));
    std::fs::create_dir_all(dir.join("linked-results")).unwrap();
    link(&victim, &dir.join("linked-results/results.json"));
    let cases: &[&[&str]] = &[
        &["run", "spec.toml", "--out", "out-link"],
        &["run", "spec.toml", "--out", "out-link/sub"],
        &["run", "spec.toml", "--out", "linked-in", "--requests"],
        &["run", "spec.toml", "--out", "linked-results"],
        &["diff", "good", "--markdown", "file-link"],
        &["diff", "good", "--junit", "file-link"],
        &["diff", "good", "--markdown", "out-link/verdict.md"],
        &["report", "good", "--format", "md", "--output", "file-link"],
        &["merge", "good", "--out", "out-link"],
        &["bless", "good", "--baseline", "file-link"],
    ];
    for args in cases {
        let out = ib(&dir, args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.text);
        assert!(
            out.text
                .contains("refusing to write through the symbolic link"),
            "{args:?}: {}",
            out.text
        );
        untouched(&outside);
    }
    // The files of the run with a link in it were never started.
    assert!(!dir.join("linked-results/requests.jsonl").exists());
}

/// Each mistake with a path or a revision is the user's (exit 2), with a
/// sentence that says what; git that cannot run is the system's (exit 3).
#[test]
fn path_and_revision_mistakes_exit_2() {
    let (root, dir, _outside) = scene();
    std::fs::create_dir_all(dir.join("a-folder")).unwrap();
    std::fs::write(dir.join("a-folder/f"), "x").unwrap();
    std::fs::write(dir.join("not-a-baseline.json"), "{}").unwrap();
    git(&dir, &["add", "a-folder"]);
    git(&dir, &["commit", "-qm", "a folder"]);
    let elsewhere = root.path().join("elsewhere.json");
    std::fs::copy(dir.join("baselines/paths.json"), &elsewhere).unwrap();
    link(&dir.join("nothing-here"), &dir.join("dangling"));
    let elsewhere = elsewhere.to_str().unwrap();
    let cases: &[(&[&str], i32, &str)] = &[
        (&["diff", "good"], 0, ""),
        (&["diff", "good", "--baseline-ref", "HEAD"], 0, ""),
        (
            &[
                "diff",
                "good",
                "--baseline",
                "baselines/paths.json",
                "--baseline-ref",
                "HEAD",
            ],
            0,
            "",
        ),
        (&["diff", "missing"], 2, "no results at missing"),
        (&["diff", "dangling"], 2, "no results at dangling"),
        (
            &["diff", "good", "--baseline", "missing.json"],
            2,
            "no baseline at missing.json",
        ),
        (
            &["diff", "good", "--baseline", "a-folder"],
            2,
            "a-folder: cannot read it",
        ),
        (
            &["diff", "good", "--baseline", "not-a-baseline.json"],
            2,
            "not an infer-bench baseline",
        ),
        (
            &["diff", "good", "--baseline-ref", "no-such-branch"],
            2,
            "no baseline at no-such-branch:",
        ),
        (
            &[
                "diff",
                "good",
                "--baseline",
                elsewhere,
                "--baseline-ref",
                "HEAD",
            ],
            2,
            "is not in a git repository",
        ),
        (
            &[
                "diff",
                "good",
                "--baseline",
                "no-folder/b.json",
                "--baseline-ref",
                "HEAD",
            ],
            2,
            "there is no such folder",
        ),
        (
            &[
                "diff",
                "good",
                "--baseline",
                "a-folder",
                "--baseline-ref",
                "HEAD",
            ],
            2,
            "a-folder is not a file",
        ),
        (
            &[
                "diff",
                "good",
                "--baseline",
                "missing.json",
                "--baseline-ref",
                "HEAD",
            ],
            2,
            "no baseline at HEAD:missing.json",
        ),
        (
            &[
                "run",
                "spec.toml",
                "--baseline",
                elsewhere,
                "--baseline-ref",
                "HEAD",
            ],
            2,
            "is not in a git repository",
        ),
        (&["bless", "missing"], 2, "no results at missing"),
        (&["report", "dangling"], 2, "no results at dangling"),
        (
            &["merge", "missing", "--out", "m"],
            2,
            "no results at missing",
        ),
    ];
    for (args, code, says) in cases {
        let out = ib(&dir, args);
        assert_eq!(out.code, *code, "{args:?}: {}", out.text);
        assert!(out.text.contains(says), "{args:?}: {}", out.text);
    }
    // No git to run: the system's failure.
    let out = ib_with(
        &dir,
        &["diff", "good", "--baseline-ref", "HEAD"],
        &[("PATH", "")],
    );
    assert_eq!(out.code, 3, "{}", out.text);
    assert!(out.text.contains("cannot run git"), "{}", out.text);
}

/// What a terminal or a CI log must never get from a spec.
fn assert_inert(what: &str, text: &str) {
    assert!(!text.contains('\u{1b}'), "{what}: ESC in {text:?}");
    assert!(!text.contains('\u{7}'), "{what}: BEL in {text:?}");
    assert!(!text.contains('\r'), "{what}: CR in {text:?}");
    for line in text.lines() {
        assert!(
            !line.starts_with("::"),
            "{what}: a workflow command in {text:?}"
        );
    }
}

/// Escapes, a forged workflow command and a carriage return in string
/// keys of every section: `validate` and `run` show them as escapes.
#[test]
fn spec_values_reach_the_terminal_escaped() {
    const EVIL: &str = r"\u001b]52;c;QUFBQQ==\u0007\n::error::forged\rY";
    let spec = |target: &str, model: &str, workload: &str| {
        format!(
            "name = \"evil\"\n[targets.api]\nkind = \"openai\"\n{target}\n[models.llama]\n{model}\n\
             [workloads.chat]\ninput_tokens = 16\noutput_tokens = 16\n{workload}\n\
             [load]\nconcurrency = 1\nduration = \"1s\"\n"
        )
    };
    let url = "base_url = \"http://127.0.0.1:9/v1\"";
    let cases = [
        spec(&format!("base_url = \"{EVIL}\""), "", ""),
        spec(
            &format!("{url}\nheaders = {{ \"X-{EVIL}\" = \"v\" }}"),
            "",
            "",
        ),
        spec(
            &format!("{url}\nheaders = {{ \"X-A\" = \"{EVIL}\" }}"),
            "",
            "",
        ),
        spec(&format!("{url}\napi_path = \"{EVIL}\""), "", ""),
        spec(&format!("{url}\ndialect = \"{EVIL}\""), "", ""),
        spec(
            url,
            &format!("served_name = \"{EVIL}\"\npreset = \"{EVIL}\""),
            "",
        ),
        spec(url, &format!("tokenizer = \"{EVIL}\""), ""),
        spec(
            url,
            "",
            &format!("dataset = {{ path = \"{EVIL}\", format = \"jsonl\" }}"),
        ),
        spec(url, "", &format!("input_tokens_typo = \"{EVIL}\"")),
        format!("name = \"{EVIL}\"\n"),
        format!("[targets.\"{EVIL}\"]\nkind = \"sim2\"\n"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (i, text) in cases.iter().enumerate() {
        let name = format!("evil-{i}.toml");
        std::fs::write(dir.path().join(&name), text).unwrap();
        let out = ib(dir.path(), &["validate", &name]);
        assert_eq!(out.code, 2, "{text}\n{}", out.text);
        assert_inert(text, &out.text);
        let out = ib(dir.path(), &["run", &name, "--out", "o"]);
        assert_eq!(out.code, 2, "{text}\n{}", out.text);
        assert_inert(text, &out.text);
    }
}

/// A spec that is a link out of its repository (to an env file) is
/// refused, naming the link and where it leads, and not a word of the
/// file is shown; a link that stays inside, and the real path typed on
/// the command line, read as before. Without the link check, the TOML
/// error still quotes only a short excerpt of the offending line.
#[test]
fn a_spec_linked_out_of_its_repository_is_refused_and_never_quoted() {
    const TOKEN: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyz0123";
    let root = tempfile::tempdir().unwrap();
    let repo = root.path().join("repo");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    git(&repo, &["init", "-q"]);
    let env = outside.join("env");
    std::fs::write(&env, format!("FOO=1\nGH_TOKEN={TOKEN}\n")).unwrap();
    std::fs::write(repo.join("real.toml"), SPEC).unwrap();
    link(&env, &repo.join("bench.toml"));
    link(&outside, &repo.join("specs"));
    link(&repo.join("real.toml"), &repo.join("inside.toml"));
    std::fs::create_dir_all(repo.join("data")).unwrap();
    link(&env, &repo.join("data/prompts.jsonl"));
    std::fs::write(
        repo.join("named.toml"),
        SPEC.replace(
            "output_tokens = 16\n",
            "output_tokens = 16\ndataset = { path = \"data/prompts.jsonl\", format = \"jsonl\" }\n",
        ),
    )
    .unwrap();
    for spec in ["bench.toml", "specs/env", "named.toml"] {
        for cmd in ["validate", "run"] {
            let out = ib(&repo, &[cmd, spec]);
            assert_eq!(out.code, 2, "{cmd} {spec}: {}", out.text);
            assert!(out.text.contains("outside the repository"), "{}", out.text);
            assert!(
                out.text.contains(&*env.display().to_string()),
                "{}",
                out.text
            );
            assert!(!out.text.contains("ghp_"), "{}", out.text);
        }
    }
    let out = ib(&repo, &["validate", "inside.toml"]);
    assert_eq!(out.code, 0, "{}", out.text);
    // Typed as the real path: read, and the TOML error quotes a short,
    // escaped excerpt, never the whole line.
    let out = ib(&repo, &["validate", env.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{}", out.text);
    assert!(out.text.contains("invalid TOML"), "{}", out.text);
    assert!(!out.text.contains(TOKEN), "{}", out.text);
    assert!(!out.text.contains(&TOKEN[..30]), "{}", out.text);
}
