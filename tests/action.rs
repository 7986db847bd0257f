//! The composite action's script (`scripts/gate-action`), run the way
//! action.yml runs it: inputs and the runner's files in environment
//! variables, in a git checkout. main blesses a one-point simulator spec
//! (in virtual time, so a busy machine cannot move a verdict)
//! and commits it with its baseline; an unchanged tree judged against
//! `HEAD` passes (exit 0); a pull request, checked out shallow without the
//! base branch as actions/checkout leaves it, makes the server 2x slower
//! (`slowdown` is not part of a point's identity: the same point, judged)
//! and fails (exit 1) against the baseline the script fetches from
//! `origin/main`. A usage error writes no verdict and says so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const SPEC: &str = r#"# One point of the quickstart's shape, short runs.
name = "action"
seed = 42

[targets.sim]
kind = "sim"
gpu = "h100-sxm"
gpus = 1

# In virtual time: the verdicts depend on the model, never on how busy the
# test machine is (a real-time simulator that a loaded machine delays is
# INVALID, and cannot be blessed).
[targets.sim.sim]
clock = "virtual"

[models.llama-8b]
preset = "llama-3.1-8b"

[workloads.chat]
api = "chat"
input_tokens = 256
output_tokens = "uniform(32, 96)"
ignore_eos = true

[load]
concurrency = 8
warmup = "0.5s"
duration = "1s"
runs = 3

# A busy test machine is late by milliseconds now and then.
[validity]
max_dispatch_lag_p99 = "50ms"

[regression]
metrics = [
  { metric = "ttft", stat = "p50", noise = "10%" },
  { metric = "tpot", stat = "p50", noise = "5%" },
  { metric = "error_rate", noise = "1%" },
]
"#;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_infer-bench")
}

use infer_bench_testkit::git::git;

struct Step {
    code: i32,
    log: String,
    outputs: BTreeMap<String, String>,
    summary: String,
}

/// `bash scripts/gate-action` in `dir`, as the action's gate step runs it:
/// `inputs` are its environment, with fresh GITHUB_OUTPUT and
/// GITHUB_STEP_SUMMARY files (and none of the runner's variables this test
/// may itself run under).
fn gate(dir: &Path, inputs: &[(&str, &str)]) -> Step {
    let files = tempfile::tempdir().unwrap();
    let output = files.path().join("output");
    let summary = files.path().join("summary");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/gate-action");
    let mut c = Command::new("bash");
    c.arg(&script).current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("GITHUB_") || k.starts_with("INPUT_") || k == "INFER_BENCH" {
            c.env_remove(k);
        }
    }
    c.env("INFER_BENCH", bin())
        .env("GITHUB_OUTPUT", &output)
        .env("GITHUB_STEP_SUMMARY", &summary);
    for (k, v) in inputs {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let outputs = parse_outputs(&std::fs::read_to_string(&output).unwrap_or_default());
    Step {
        code: out.status.code().unwrap_or(-1),
        log: format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        outputs,
        summary: std::fs::read_to_string(&summary).unwrap_or_default(),
    }
}

/// GITHUB_OUTPUT as the runner reads it: `key=value` lines and
/// `key<<DELIMITER` heredocs. A value that ended its heredoc early would
/// show here as a key of its own.
fn parse_outputs(text: &str) -> BTreeMap<String, String> {
    let mut outputs = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some((key, delim)) = line.split_once("<<") {
            let mut value = Vec::new();
            for l in lines.by_ref() {
                if l == delim {
                    break;
                }
                value.push(l);
            }
            outputs.insert(key.to_string(), value.join("\n"));
        } else if let Some((k, v)) = line.split_once('=') {
            outputs.insert(k.to_string(), v.to_string());
        }
    }
    outputs
}

#[test]
fn the_action_passes_an_unchanged_tree_and_fails_a_slower_pull_request() {
    let root = tempfile::tempdir().unwrap();
    let main = root.path().join("main");
    std::fs::create_dir(&main).unwrap();
    git(&main, &["init", "-q"]);
    std::fs::write(main.join("bench.toml"), SPEC).unwrap();

    // A usage error: no run, no verdict, the summary says why.
    let step = gate(&main, &[("INPUT_BASELINE_REF", "HEAD")]);
    assert_eq!(step.code, 2, "{}", step.log);
    assert_eq!(step.outputs["exit-code"], "2");
    assert_eq!(step.outputs["verdict"], "");
    assert!(step.summary.contains("no verdict"), "{}", step.summary);
    assert!(
        step.log.contains("the spec input is required"),
        "{}",
        step.log
    );

    let run = Command::new(bin())
        .args(["run", "bench.toml", "--out", "main-run"])
        .current_dir(&main)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let bless = Command::new(bin())
        .args(["bless", "main-run"])
        .current_dir(&main)
        .output()
        .unwrap();
    assert!(
        bless.status.success(),
        "{}",
        String::from_utf8_lossy(&bless.stderr)
    );
    git(&main, &["add", "bench.toml", "baselines"]);
    git(&main, &["commit", "-qm", "main: spec and baseline"]);

    // Unchanged, judged against HEAD, extra arguments passed through.
    let step = gate(
        &main,
        &[
            ("INPUT_SPEC", "bench.toml"),
            ("INPUT_BASELINE_REF", "HEAD"),
            ("INPUT_OUT", "pr-results"),
            ("INPUT_ARGS", "--requests"),
            ("INPUT_HISTORY", "record"),
        ],
    );
    assert_eq!(step.code, 0, "{}", step.log);
    // A push records the run in the history of main, at HEAD.
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&main)
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    let years: Vec<PathBuf> = std::fs::read_dir(main.join("bench-history/action"))
        .unwrap_or_else(|e| panic!("no history: {e}\n{}", step.log))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(years.len(), 1, "{years:?}");
    assert!(
        years[0].join(format!("{head}.json")).is_file(),
        "{}",
        step.log
    );
    assert_eq!(step.outputs["exit-code"], "0");
    assert_eq!(step.outputs["verdict"], "pr-results/verdict.md");
    assert_eq!(step.outputs["junit"], "pr-results/verdict.xml");
    assert_eq!(step.outputs["results"], "pr-results");
    for f in [
        "verdict.md",
        "verdict.xml",
        "results.json",
        "requests.jsonl",
    ] {
        assert!(main.join("pr-results").join(f).is_file(), "{f}");
    }
    assert!(
        step.summary.starts_with("## infer-bench: `action` passed"),
        "{}",
        step.summary
    );
    assert!(
        step.summary.contains("HEAD:baselines/action.json"),
        "{}",
        step.summary
    );
    assert!(
        step.log.contains("infer-bench gate: exit code 0: passed"),
        "{}",
        step.log
    );

    // The pull request: a shallow clone of main without origin/main (as
    // actions/checkout leaves a pull request's merge commit), the server 2x
    // slower in its working tree; the base ref comes from the event.
    let url = format!("file://{}", main.display());
    git(root.path(), &["clone", "-q", "--depth", "1", &url, "pr"]);
    let pr = root.path().join("pr");
    git(&pr, &["update-ref", "-d", "refs/remotes/origin/main"]);
    let slower = SPEC.replace(
        "clock = \"virtual\"\n",
        "clock = \"virtual\"\nslowdown = 2.0\n",
    );
    assert_ne!(slower, SPEC);
    std::fs::write(pr.join("bench.toml"), slower).unwrap();
    let step = gate(
        &pr,
        &[
            ("INPUT_SPEC", "bench.toml"),
            ("GITHUB_EVENT_NAME", "pull_request"),
            ("GITHUB_BASE_REF", "main"),
            ("INPUT_HISTORY", "record"),
        ],
    );
    assert_eq!(step.code, 1, "{}", step.log);
    // A pull request's run is judged, never recorded.
    assert!(
        step.log.contains("a pull request's run is not recorded"),
        "{}",
        step.log
    );
    assert!(!pr.join("bench-history").exists());
    assert!(
        step.log.contains("fetching main from origin"),
        "{}",
        step.log
    );
    assert!(
        step.log.contains("--baseline-ref origin/main"),
        "{}",
        step.log
    );
    assert_eq!(step.outputs["exit-code"], "1");
    assert_eq!(step.outputs["verdict"], "infer-bench-results/verdict.md");
    assert!(
        step.summary.starts_with("## infer-bench: `action` failed"),
        "{}",
        step.summary
    );
    assert!(step.summary.contains("### Regressions"), "{}", step.summary);
    assert!(step.log.contains("REGRESSED"), "{}", step.log);
    assert!(
        step.summary.contains("origin/main:baselines/action.json"),
        "{}",
        step.summary
    );
    assert!(step.summary.contains("ttft p50"), "{}", step.summary);
    assert!(step.log.contains("exit code 1: failed"), "{}", step.log);
    // Judged, not drifted: slowdown is not part of what a point measures.
    assert!(!step.summary.contains("Spec drift"), "{}", step.summary);
}

/// Issue 36, end to end through the action: a server whose every answer
/// carries terminal escapes, workflow commands and markup, and a pull
/// request whose spec does the same (its served name drifts). The step's
/// log forges no workflow command (the only `::` lines are the script's
/// own stop and resume), shows no escape, its outputs are the four it
/// declares, and the summary builds no HTML, link, image or mention.
#[test]
fn a_hostile_server_and_spec_forge_nothing_in_the_step() {
    use infer_bench_testkit::hostile::{HostileServer, Hostility, INJECTION};
    use infer_bench_testkit::readers::{assert_markdown_safe, assert_terminal_safe};

    let rt = infer_bench_testkit::runtime();
    let server = rt
        .block_on(HostileServer::start(Hostility::Injection))
        .unwrap();
    let spec = |served: &str| {
        format!(
            "name = \"hostile\"\nseed = 5\n\n[targets.t]\nkind = \"openai\"\nbase_url = \"{}\"\n\n[models.m]\nserved_name = {served}\n\n[workloads.w]\napi = \"completions\"\ninput_tokens = 8\noutput_tokens = 4\n\n[load]\nconcurrency = 2\nrequests = 12\nruns = 3\n\n[validity]\nmin_requests = 1\nmin_duration = \"0s\"\n",
            server.base_url()
        )
    };
    let root = tempfile::tempdir().unwrap();
    let main = root.path().join("main");
    std::fs::create_dir(&main).unwrap();
    git(&main, &["init", "-q"]);
    std::fs::write(main.join("bench.toml"), spec("\"plain\"")).unwrap();
    for args in [
        &["run", "bench.toml", "--out", "main-run"][..],
        &["bless", "main-run"][..],
    ] {
        let r = Command::new(bin())
            .args(args)
            .current_dir(&main)
            .output()
            .unwrap();
        assert!(
            r.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    git(&main, &["add", "bench.toml", "baselines"]);
    git(&main, &["commit", "-qm", "main: spec and baseline"]);

    let attack = toml::Value::String(format!("x\n::error::drift {INJECTION}")).to_string();
    std::fs::write(main.join("bench.toml"), spec(&attack)).unwrap();
    let step = gate(
        &main,
        &[
            ("INPUT_SPEC", "bench.toml"),
            ("INPUT_BASELINE_REF", "HEAD"),
            ("GITHUB_ACTIONS", "true"),
        ],
    );
    assert_eq!(step.code, 4, "drift cannot pass: {}", step.log);
    let keys: Vec<&str> = step.outputs.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["exit-code", "junit", "results", "verdict"],
        "{:?}",
        step.outputs
    );
    assert_eq!(step.outputs["exit-code"], "4");
    // The script's own workflow commands: stop before infer-bench's output,
    // resume after it, and its ::error line at the end.
    let commands: Vec<&str> = step
        .log
        .lines()
        .filter(|l| l.trim_start().starts_with("::"))
        .collect();
    assert_eq!(commands.len(), 3, "{commands:?}\n{}", step.log);
    assert!(commands[0].starts_with("::stop-commands::"), "{commands:?}");
    let token = commands[0].trim_start_matches("::stop-commands::");
    assert_eq!(commands[1], format!("::{token}::"), "{commands:?}");
    assert!(
        commands[2].starts_with("::error title=infer-bench::exit code 4"),
        "{commands:?}"
    );
    let inner: String = step
        .log
        .lines()
        .filter(|l| !l.starts_with("::"))
        .collect::<Vec<_>>()
        .join("\n");
    assert_terminal_safe("the step's log", &inner);
    assert!(step.summary.contains("served_name"), "{}", step.summary);
    assert_markdown_safe("the step summary", &step.summary);
}

/// A pull request that commits the action's outputs as symbolic links
/// (issue 36): the default `out` (`infer-bench-results`) as a link to a
/// folder outside the workspace; or `out` as a real folder whose
/// `requests.jsonl` and `results.json` are links to a file outside. The
/// step fails with a sentence naming the link, and nothing outside the
/// workspace is written or changed.
#[test]
fn the_action_writes_nothing_through_a_pull_request_s_links() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim"), "keep\n").unwrap();
    let untouched = || {
        let names: Vec<String> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["victim"], "written outside the workspace");
        assert_eq!(
            std::fs::read_to_string(outside.join("victim")).unwrap(),
            "keep\n"
        );
    };
    git(&ws, &["init", "-q"]);
    std::fs::write(ws.join("bench.toml"), SPEC).unwrap();
    for args in [
        &["run", "bench.toml", "--out", "main-run"][..],
        &["bless", "main-run"],
    ] {
        let out = Command::new(bin())
            .args(args)
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::remove_dir_all(ws.join("main-run")).unwrap();
    let link = |to: &Path, at: &str| std::os::unix::fs::symlink(to, ws.join(at)).unwrap();
    link(&outside, "infer-bench-results");
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-qm", "a pull request with links"]);
    let env = |out: &'static str, args: &'static str| {
        vec![
            ("INPUT_SPEC", "bench.toml"),
            ("INPUT_BASELINE_REF", ""),
            ("INPUT_OUT", out),
            ("INPUT_ARGS", args),
        ]
    };

    // The default out, a link: refused by the script before a run.
    let step = gate(&ws, &env("", ""));
    assert_eq!(step.code, 2, "{}", step.log);
    assert!(step.log.contains("is a symlink"), "{}", step.log);
    assert_eq!(step.outputs["results"], "");
    untouched();

    // A real out whose files are links: refused by infer-bench before a
    // server starts (the script removes old verdict files, links too).
    std::fs::create_dir_all(ws.join("pr-out")).unwrap();
    link(&outside.join("victim"), "pr-out/requests.jsonl");
    link(&outside.join("victim"), "pr-out/verdict.md");
    let step = gate(&ws, &env("pr-out", "--requests"));
    assert_eq!(step.code, 2, "{}", step.log);
    assert!(
        step.log
            .contains("refusing to write through the symbolic link pr-out/requests.jsonl"),
        "{}",
        step.log
    );
    untouched();
    std::fs::remove_file(ws.join("pr-out/requests.jsonl")).unwrap();
    link(&outside.join("victim"), "pr-out/results.json");
    let step = gate(&ws, &env("pr-out", ""));
    assert_eq!(step.code, 2, "{}", step.log);
    assert!(step.log.contains("pr-out/results.json"), "{}", step.log);
    untouched();

    // Without the links in it, the same out is judged (the old verdict's
    // link was removed by the script, not followed).
    std::fs::remove_file(ws.join("pr-out/results.json")).unwrap();
    link(&outside.join("victim"), "pr-out/verdict.md");
    let step = gate(&ws, &env("pr-out", "--requests"));
    assert_eq!(step.code, 0, "{}", step.log);
    assert_eq!(step.outputs["verdict"], "pr-out/verdict.md");
    assert!(ws.join("pr-out/requests.jsonl").is_file());
    untouched();
}

/// The action's install step (`scripts/action-install`), against a release
/// laid out in a folder as the release workflow lays it out on GitHub
/// (`scripts/archive`, then `SHA256SUMS`): pinned to the release's tag, it
/// installs the archive's binary (the very bytes), checksum verified; a
/// tampered archive is refused and nothing is installed; `install: binary`
/// with no archive fails saying so; pinned to a branch, `auto` builds from
/// source, which without cargo fails saying why (the fallback chosen, not
/// run: a source build takes minutes).
#[test]
fn the_action_installs_the_release_archive_of_its_tag_checksum_verified() {
    let target = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => "x86_64-unknown-linux-gnu",
        ("linux", "aarch64") => "aarch64-unknown-linux-gnu",
        ("macos", "x86_64") => "x86_64-apple-darwin",
        ("macos", "aarch64") => "aarch64-apple-darwin",
        (os, arch) => {
            eprintln!("skipped: no release archive is built for {os}/{arch}");
            return;
        }
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let version = env!("CARGO_PKG_VERSION");
    let tmp = tempfile::tempdir().unwrap();
    let release = tmp.path().join("releases");
    let dir = release.join(format!("v{version}"));
    let o = Command::new("bash")
        .arg(root.join("scripts/archive"))
        .args([Path::new(bin()), Path::new(target), &dir])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let archive = format!("infer-bench-v{version}-{target}.tar.gz");
    assert!(dir.join(&archive).is_file());
    let sums = |d: &Path| {
        let o = Command::new("sha256sum")
            .arg(&archive)
            .current_dir(d)
            .output()
            .unwrap();
        assert!(o.status.success());
        std::fs::write(d.join("SHA256SUMS"), &o.stdout).unwrap();
    };
    sums(&dir);
    let install = |mode: &str, action_ref: &str, into: &Path, path: Option<&str>| {
        let output = tmp.path().join("github-output");
        let _ = std::fs::remove_file(&output);
        let mut c = Command::new("bash");
        c.arg(root.join("scripts/action-install"))
            .env("INPUT_INSTALL", mode)
            .env("ACTION_PATH", &root)
            .env("ACTION_REF", action_ref)
            .env("INSTALL_DIR", into)
            .env("RELEASE_URL", format!("file://{}", release.display()))
            .env("GITHUB_OUTPUT", &output);
        if let Some(p) = path {
            c.env("PATH", p);
        }
        let o = c.output().unwrap();
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let outputs = parse_outputs(&std::fs::read_to_string(&output).unwrap_or_default());
        (o.status.code(), log, outputs)
    };

    // Pinned to the release's tag: its archive, in place of a build.
    let into = tmp.path().join("installed");
    let (code, log, outputs) = install("auto", &format!("v{version}"), &into, None);
    assert_eq!(code, Some(0), "{log}");
    let installed = into.join("bin/infer-bench");
    assert_eq!(outputs["bin"], installed.display().to_string());
    assert!(
        log.contains(&format!("installed the release archive {archive}")),
        "{log}"
    );
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(bin()).unwrap(),
        "the installed binary is the archive's"
    );
    let o = Command::new(&installed).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("infer-bench {version}")
    );

    // A tampered archive (a byte appended): refused, nothing installed.
    let mut bytes = std::fs::read(dir.join(&archive)).unwrap();
    bytes.push(0);
    std::fs::write(dir.join(&archive), bytes).unwrap();
    let refused = tmp.path().join("refused");
    let (code, log, outputs) = install("auto", &format!("v{version}"), &refused, None);
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains(&format!(
            "{archive} does not match its checksum in SHA256SUMS"
        )),
        "{log}"
    );
    assert!(!refused.exists() && !outputs.contains_key("bin"), "{log}");

    // `binary` with no release of this version: a clear failure.
    std::fs::remove_dir_all(&dir).unwrap();
    let (code, log, _) = install("binary", &format!("v{version}"), &refused, None);
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains(&format!("no release archive of v{version}")),
        "{log}"
    );

    // Pinned to a branch: the source build, which needs cargo.
    let (code, log, _) = install("auto", "main", &refused, Some("/usr/bin:/bin"));
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains("pinned to 'main', not a release tag") && log.contains("cargo not found"),
        "{log}"
    );
    assert!(!refused.exists());
}
