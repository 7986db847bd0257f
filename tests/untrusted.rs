//! A spec from a stranger's pull request: it cannot run a command or read
//! an environment variable without the workflow's consent, cannot make
//! `bless` write outside the repository, and a run stopped the way CI
//! runners and Kubernetes stop things (SIGTERM, SIGHUP, SIGKILL) keeps its
//! finished points and leaves no server process behind, grandchildren
//! included.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_infer-bench"));
    c.env_remove("INFER_BENCH_ALLOW_LAUNCH");
    c
}

const MODEL_AND_LOAD: &str = r#"
[models.m]
preset = "llama-3.1-8b"

[workloads.w]
api = "completions"
input_tokens = 16
output_tokens = 8
ignore_eos = true

[load]
duration = "1s"
runs = 1
"#;

fn sim_spec(name: &str, matrix: &str) -> String {
    format!(
        "name = \"{name}\"\nseed = 1\n\n[targets.sim]\nkind = \"sim\"\n{MODEL_AND_LOAD}\n[matrix]\n{matrix}\n"
    )
}

/// A spec whose target launches `command` (TOML array items).
fn launch_spec(command: &str, extra_launch: &str, matrix: &str) -> String {
    format!(
        "name = \"launcher\"\nseed = 1\n\n[targets.local]\nkind = \"openai\"\n\n[targets.local.launch]\ncommand = [{command}]\nstartup_timeout = \"60s\"\nstop_grace = \"2s\"\n{extra_launch}\n{MODEL_AND_LOAD}\n[matrix]\n{matrix}\n"
    )
}

/// The 1-based line of the first line of `text` that starts with `start`.
fn line_of(text: &str, start: &str) -> usize {
    text.lines().position(|l| l.starts_with(start)).unwrap() + 1
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Processes whose command line mentions `needle` (from /proc).
fn processes_with(needle: &str) -> Vec<String> {
    infer_bench_testkit::procs::with_cmdline(needle)
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn finished_points(out: &Path) -> usize {
    std::fs::read_to_string(out.join("results.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["points"].as_array().map(Vec::len))
        .unwrap_or(0)
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: signalling a child this test started.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

#[test]
fn a_spec_that_launches_exits_2_and_creates_nothing_without_consent() {
    let dir = tempfile::tempdir().unwrap();
    let pwned = dir.path().join("pwned");
    let launch_text = launch_spec(
        &format!("\"touch\", \"{}\"", pwned.display()),
        "",
        "concurrency = [1]",
    );
    let spec = write(dir.path(), "pr.toml", &launch_text);
    for extra in [&[][..], &["--baseline"][..], &["--baseline", "b.json"][..]] {
        let o = bin()
            .current_dir(dir.path())
            .arg("run")
            .arg(&spec)
            .args(["--out", "out"])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        let at = format!(
            "pr.toml:{}:",
            line_of(&launch_text, "[targets.local.launch]")
        );
        assert!(err.contains(&at), "the launch block's place: {err}");
        assert!(err.contains("targets.local.launch"), "{err}");
        assert!(err.contains("--allow-launch"), "{err}");
        assert!(!pwned.exists(), "the command ran");
        assert!(
            !dir.path().join("out").exists(),
            "an output folder was made"
        );
    }
    // The workflow's variable is consent too; then the command does run
    // (and, being no server, fails to get ready: exit 3).
    let o = bin()
        .current_dir(dir.path())
        .arg("run")
        .arg(&spec)
        .args(["--out", "out"])
        .env("INFER_BENCH_ALLOW_LAUNCH", "1")
        .output()
        .unwrap();
    assert!(pwned.exists(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn env_placeholders_read_only_what_allow_env_lists() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "s3cr3t-env-value-7781";
    let text = launch_spec(
        "\"server\", \"--token\", \"{env.RUNNER_SECRET}\", \"--port\", \"{port}\"",
        "",
        "concurrency = [1]",
    );
    let spec = write(dir.path(), "pr.toml", &text);
    let at = format!("pr.toml:{}:", line_of(&text, "command ="));
    for cmd in [&["validate"][..], &["plan"], &["run", "--allow-launch"]] {
        let o = bin()
            .current_dir(dir.path())
            .arg(cmd[0])
            .arg(&spec)
            .args(&cmd[1..])
            .env("RUNNER_SECRET", secret)
            .output()
            .unwrap();
        let mut text = String::from_utf8_lossy(&o.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&o.stdout));
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {text}");
        assert!(
            text.contains("`{env.RUNNER_SECRET}` reads the environment variable RUNNER_SECRET, which `allow_env` does not list"),
            "{text}"
        );
        assert!(text.contains(&at), "{text}");
        assert!(!text.contains(secret), "{text}");
    }
    let o = bin()
        .arg("validate")
        .arg(write(
            dir.path(),
            "external.toml",
            "name = \"x\"\n[targets.t]\nkind = \"openai\"\nbase_url = \"http://{env.HOST}/v1\"\n[models.m]\n[workloads.w]\ninput_tokens = 8\noutput_tokens = 8\n[load]\nconcurrency = 1\nrequests = 1\n",
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("filled in only for targets with a [launch] block"),
        "{err}"
    );
}

#[test]
fn bless_refuses_a_baseline_path_outside_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("baselines")).unwrap();
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, repo.join("baselines/link")).unwrap();
    // `..` and absolute paths are refused by the compiler, with a place.
    for bad in ["../outside/new-file.json", "/tmp/new-file.json"] {
        let text =
            sim_spec("p", "concurrency = [1]") + &format!("\n[regression]\nbaseline = \"{bad}\"\n");
        let line = line_of(&text, "baseline =");
        let spec = write(&repo, "bad.toml", &text);
        let o = bin().arg("validate").arg(&spec).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("bad.toml:{line}:")), "{err}");
        assert!(err.contains("regression.baseline"), "{err}");
    }
    // A symbolic link inside the tree that leads out is refused by bless.
    let text = sim_spec("p", "concurrency = [1]")
        + "\n[regression]\nbaseline = \"baselines/link/new-file.json\"\n";
    write(&repo, "p.toml", &text);
    // In virtual time: what is blessed must be valid, and a busy machine
    // would make a real-time simulator fall behind (INVALID).
    let o = bin()
        .current_dir(&repo)
        .args(["run", "p.toml", "--virtual", "--out", "run"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = bin()
        .current_dir(&repo)
        .args(["bless", "run"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("outside the current directory"), "{err}");
    assert!(!outside.join("new-file.json").exists());
    // Given on the command line, the user's own choice is honoured.
    let mine = outside.join("mine.json");
    let o = bin()
        .current_dir(&repo)
        .args(["bless", "run", "--baseline"])
        .arg(&mine)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(mine.exists());
}

/// Runs a two-point spec, waits for the first point, sends `sig`.
fn interrupted_run(
    dir: &Path,
    spec: &Path,
    sig: libc::c_int,
    marker: Option<&str>,
) -> (Option<i32>, String) {
    let out = dir.join("out");
    let child = bin()
        .arg("run")
        .arg(spec)
        .arg("--out")
        .arg(&out)
        .arg("--allow-launch")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(m) = marker {
        wait_for(
            "the launched server's child",
            Duration::from_secs(60),
            || !processes_with(m).is_empty(),
        );
    }
    wait_for("the first point", Duration::from_secs(60), || {
        finished_points(&out) >= 1
    });
    signal(&child, sig);
    let o = child.wait_with_output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn sighup_is_an_interrupt_that_keeps_finished_points() {
    let _t = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let spec = write(
        dir.path(),
        "s.toml",
        &sim_spec("hup", "concurrency = [1, 2, 3, 4]"),
    );
    let (code, err) = interrupted_run(dir.path(), &spec, libc::SIGHUP, None);
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("interrupted (SIGHUP)"), "{err}");
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/results.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(r["interrupted"], true);
    assert!(!r["points"].as_array().unwrap().is_empty());
}

/// The launched server is this binary's `sim-server`, started through a
/// shell that first forks a grandchild carrying `marker`.
fn forking_server_spec(dir: &Path, marker: &str) -> PathBuf {
    let served = write(dir, "served.toml", &sim_spec("served", "concurrency = [1]"));
    let script =
        format!("sleep {marker} & exec \\\"$0\\\" sim-server \\\"$1\\\" --port \\\"$2\\\"");
    let command = format!(
        "\"/bin/sh\", \"-c\", \"{script}\", \"{}\", \"{}\", \"{{port}}\"",
        env!("CARGO_BIN_EXE_infer-bench"),
        served.display()
    );
    write(
        dir,
        "launcher.toml",
        &launch_spec(&command, "", "concurrency = [1, 2, 3, 4]"),
    )
}

#[test]
fn sigterm_keeps_finished_points_and_stops_the_whole_server_group() {
    let _t = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("{}.{}", 31000 + std::process::id() % 1000, 17);
    let spec = forking_server_spec(dir.path(), &marker);
    let (code, err) = interrupted_run(dir.path(), &spec, libc::SIGTERM, Some(&marker));
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("interrupted (SIGTERM)"), "{err}");
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/results.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(r["interrupted"], true);
    assert!(!r["points"].as_array().unwrap().is_empty());
    assert!(
        processes_with(&marker).is_empty(),
        "{:?}",
        processes_with(&marker)
    );
    assert!(processes_with("served.toml").is_empty());
}

#[test]
fn sigkill_leaves_no_server_behind() {
    let _t = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("{}.{}", 32000 + std::process::id() % 1000, 29);
    let spec = forking_server_spec(dir.path(), &marker);
    let (code, _) = interrupted_run(dir.path(), &spec, libc::SIGKILL, Some(&marker));
    assert_eq!(code, None, "killed by a signal");
    // The watchdog stops the group: SIGTERM, then SIGKILL after the grace (2 s).
    wait_for(
        "the server group to be gone",
        Duration::from_secs(10),
        || processes_with(&marker).is_empty() && processes_with("served.toml").is_empty(),
    );
    // Finished points are on disk, in a readable file.
    assert!(finished_points(&dir.path().join("out")) >= 1);
}

/// A spec named by its bare file name from its own folder (`cd specs &&
/// infer-bench run llama-cpp.toml`) fills `{spec.dir}` with that folder,
/// not with the empty path that `{spec.dir}/x` turned into `/x`.
#[test]
fn spec_dir_is_the_spec_folder_when_the_spec_is_named_without_one() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "backend.toml",
        &sim_spec("backend", "concurrency = [1]"),
    );
    let command = format!(
        "\"{}\", \"sim-server\", \"{{spec.dir}}/backend.toml\", \"--port\", \"{{port}}\"",
        env!("CARGO_BIN_EXE_infer-bench")
    );
    write(
        dir.path(),
        "launcher.toml",
        &launch_spec(&command, "", "concurrency = [1]"),
    );
    let o = bin()
        .current_dir(dir.path())
        .args(["run", "launcher.toml", "--out", "out", "--allow-launch"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/results.json")).unwrap(),
    )
    .unwrap();
    let point = &r["points"][0];
    assert!(
        point["merged"]["requests"]["succeeded"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{}",
        point["merged"]["requests"]
    );
}

/// Two runs given one `--out` (a retried CI job, two jobs sharing a
/// folder): the second is refused with exit 2 naming the first's PID, and
/// the first's results and request log are whole.
#[test]
fn a_second_run_into_a_folder_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(
        dir.path(),
        "s.toml",
        &sim_spec("busy", "concurrency = [1, 2]"),
    );
    let out = dir.path().join("out");
    let first = bin()
        .arg("run")
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .arg("--requests")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first holds the folder from before it writes its results file.
    wait_for(
        "the first run's results file",
        Duration::from_secs(60),
        || out.join("results.json").exists(),
    );
    let second = bin()
        .arg("run")
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(
        err.contains("another run is writing this folder")
            && err.contains(&format!("PID {}", first.id())),
        "{err}"
    );
    let o = first.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(finished_points(&out), 2);
    let log = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    assert!(!log.is_empty());
    for line in log.lines() {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("a spliced line in requests.jsonl ({e}): {line}"));
    }
    // Once the first has ended, the folder is free again.
    let again = bin()
        .arg("run")
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}
