//! A spec from a stranger's pull request: it cannot run a command or read
//! an environment variable without the workflow's consent, cannot make
//! `bless` write outside the repository, and a run stopped the way CI
//! runners and Kubernetes stop things (SIGTERM, SIGHUP, SIGKILL) keeps its
//! finished points and leaves no server process behind, grandchildren
//! included. Results files from outside (a pull request's artifacts) cannot
//! make `report`, `diff`, `bless` or `merge` allocate what a histogram
//! declares or a multiple of the file, and past the documented maximum
//! are refused (exit 2), never a signal.

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

// Results files from outside: a pull request's artifacts are blessed,
// diffed and reported. A file cannot make a reader allocate what it
// declares (a histogram's payload), nor more than a small multiple of
// what it holds, and one past the documented maximum is refused before
// it is read: each an exit 2 that names the file, never a signal.

/// The address space the readers run in: 1 GiB. Reading a small results
/// file (debug build, its 300+ MiB binary mapped) fits well inside it,
/// which `a_histogram_declaring_gigabytes_is_refused_not_allocated`
/// checks first; the hostile payload below declares 3 GiB.
const READER_AS: u64 = 1 << 30;

struct Exit {
    code: Option<i32>,
    signal: Option<i32>,
    stderr: String,
    /// Peak resident set of the reader, in KiB.
    max_rss_kb: u64,
}

/// The high-water mark of a process's resident set (`VmHWM`, KiB) and
/// whether it has exited (a zombie, not yet reaped), from /proc.
fn high_water(pid: u32) -> (Option<u64>, bool) {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return (None, true);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let hwm = field("VmHWM:").and_then(|v| v.trim_end_matches("kB").trim().parse().ok());
    let exited = field("State:").is_some_and(|s| s.starts_with('Z') || s.starts_with('X'));
    (hwm, exited)
}

/// Runs infer-bench with `args` in `dir` under `prlimit --as=READER_AS`
/// (without the cap where prlimit is missing), watching its peak RSS.
/// The peak is the process's own `VmHWM`, polled until it exits: not
/// `wait4`'s `ru_maxrss`, which counts the test process's own high water
/// (the mm a child is spawned from is recorded at `exec`), so it would
/// hide the reader's growth behind this process's. (A peak within its
/// last 5 ms could be missed; the readers peak while they read.)
fn read_capped(dir: &Path, args: &[&str]) -> Exit {
    use std::os::unix::process::ExitStatusExt as _;
    let have_prlimit = Command::new("prlimit")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let bin = env!("CARGO_BIN_EXE_infer-bench");
    let mut c = if have_prlimit {
        let mut c = Command::new("prlimit");
        c.arg(format!("--as={READER_AS}")).arg("--").arg(bin);
        c
    } else {
        eprintln!("prlimit is missing: reading without an address-space cap");
        Command::new(bin)
    };
    let stderr_path = dir.join("reader-stderr.txt");
    let mut child = c
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let mut max_rss_kb = 0;
    loop {
        let (hwm, exited) = high_water(child.id());
        max_rss_kb = max_rss_kb.max(hwm.unwrap_or(0));
        if exited {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = child.wait().unwrap();
    Exit {
        code: status.code(),
        signal: status.signal(),
        stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
        max_rss_kb,
    }
}

/// A real results file (the simulator in virtual time) in `dir`.
fn simulated_results(dir: &Path) -> PathBuf {
    let spec = write(dir, "spec.toml", &sim_spec("files", "concurrency = [2]"));
    let out = bin()
        .args(["run", "--virtual", "--out"])
        .arg(dir.join("out"))
        .arg(&spec)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("out/results.json")
}

fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// A histogram's text (hdrhistogram V2+deflate, base64) whose header
/// declares a payload of `payload` bytes for a 3-digit range of 1 to 2048
/// (which needs at most 27,648): 100 bytes that asked a reader for 3 GiB.
fn hostile_histogram(payload: u32) -> String {
    let mut v2 = Vec::new();
    v2.extend(0x1c84_9313u32.to_be_bytes()); // V2 cookie
    v2.extend(payload.to_be_bytes());
    v2.extend(0u32.to_be_bytes()); // normalizing offset
    v2.extend(3u32.to_be_bytes()); // significant digits
    v2.extend(1u64.to_be_bytes()); // lowest trackable value
    v2.extend(2048u64.to_be_bytes()); // highest
    v2.extend(1.0f64.to_be_bytes()); // integer-to-double ratio
    v2.extend([2u8; 16]);
    // zlib: header, one stored block, Adler-32.
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &v2 {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    let len = v2.len() as u16;
    let mut z = vec![0x78, 0x01, 0x01];
    z.extend(len.to_le_bytes());
    z.extend((!len).to_le_bytes());
    z.extend(&v2);
    z.extend((b << 16 | a).to_be_bytes());
    let mut wrapped = Vec::new();
    wrapped.extend(0x1c84_9314u32.to_be_bytes()); // V2+deflate cookie
    wrapped.extend((z.len() as u32).to_be_bytes());
    wrapped.extend(z);
    base64(&wrapped)
}

#[test]
fn a_histogram_declaring_gigabytes_is_refused_not_allocated() {
    let dir = tempfile::tempdir().unwrap();
    let good = simulated_results(dir.path());
    // The cap holds the normal runs: a real file reads, blesses and diffs.
    let ok = read_capped(dir.path(), &["report", good.to_str().unwrap()]);
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    let blessed = read_capped(
        dir.path(),
        &["bless", good.to_str().unwrap(), "--baseline", "base.json"],
    );
    assert_eq!(blessed.code, Some(0), "{}", blessed.stderr);

    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    v["points"][0]["histograms"]["ttft"] = hostile_histogram(0xC000_0000).into();
    write(dir.path(), "bad.json", &v.to_string());
    for args in [
        vec!["report", "bad.json"],
        vec!["report", "--format", "md", "bad.json"],
        vec!["diff", "bad.json", "--baseline", "base.json"],
        vec!["bless", "bad.json", "--baseline", "base2.json"],
    ] {
        let e = read_capped(dir.path(), &args);
        assert_eq!(e.signal, None, "{args:?} was killed: {}", e.stderr);
        assert_eq!(e.code, Some(2), "{args:?}: {}", e.stderr);
        for needle in [
            "bad.json",
            "points[0].histograms.ttft",
            "declares a payload of 3221225472 bytes",
        ] {
            assert!(
                e.stderr.contains(needle),
                "{args:?}: {needle}: {}",
                e.stderr
            );
        }
    }
    assert!(!dir.path().join("base2.json").exists());
}

/// `n` copies of `good`'s first point (each its own ID and slug) in one
/// results file at `path`, written point by point; its size in bytes.
fn many_points(good: &Path, n: usize, path: &Path) -> u64 {
    use std::io::Write as _;
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(good).unwrap()).unwrap();
    let point = v["points"][0].take();
    v["points"] = serde_json::json!(["POINTS"]);
    let text = serde_json::to_string(&v).unwrap();
    let (head, tail) = text.split_once("\"POINTS\"").unwrap();
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    w.write_all(head.as_bytes()).unwrap();
    for i in 0..n {
        let mut p = point.clone();
        p["id"] = format!("{}-{i}", point["id"].as_str().unwrap()).into();
        p["slug"] = format!("{}.n{i}", point["slug"].as_str().unwrap()).into();
        if i > 0 {
            w.write_all(b",").unwrap();
        }
        serde_json::to_writer_pretty(&mut w, &p).unwrap();
    }
    w.write_all(tail.as_bytes()).unwrap();
    w.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn five_thousand_points_read_in_a_small_multiple_of_their_size() {
    let dir = tempfile::tempdir().unwrap();
    let good = simulated_results(dir.path());
    let blessed = read_capped(
        dir.path(),
        &["bless", good.to_str().unwrap(), "--baseline", "base.json"],
    );
    assert_eq!(blessed.code, Some(0), "{}", blessed.stderr);
    // What reading one point costs: the binary and the runtime.
    let small = read_capped(
        dir.path(),
        &["report", "--format", "csv", good.to_str().unwrap()],
    );
    assert_eq!(small.code, Some(0), "{}", small.stderr);
    let bytes = many_points(&good, 5_000, &dir.path().join("big.json"));
    assert!(bytes > 50 << 20, "{bytes} bytes");
    for args in [
        vec!["report", "--format", "csv", "big.json"],
        vec!["report", "--format", "md", "big.json"],
        vec!["diff", "big.json", "--baseline", "base.json"],
    ] {
        let e = read_capped(dir.path(), &args);
        assert_eq!(e.signal, None, "{args:?} was killed: {}", e.stderr);
        // diff: points the baseline lacks are unjudged (exit 4).
        assert!(matches!(e.code, Some(0 | 4)), "{args:?}: {}", e.stderr);
        // Reading needs the file's bytes and what they hold: at most 3
        // times the file above what one point costs (reading it as a
        // JSON tree took 4 to 5 times).
        let grew = e.max_rss_kb.saturating_sub(small.max_rss_kb) * 1024;
        eprintln!(
            "{args:?}: {} KiB at the peak, {} KiB for one point, a file of {bytes} bytes",
            e.max_rss_kb, small.max_rss_kb
        );
        assert!(
            grew <= 3 * bytes,
            "{args:?}: {grew} bytes more than one point for a file of {bytes}"
        );
    }
}

/// A byte-level BPE `tokenizer.json` of about `mb` megabytes: every
/// string of 2 to 5 lowercase letters in turn, each the merge of its
/// prefix and its last letter (the shape of a real vocabulary, larger).
fn big_tokenizer(path: &Path, mb: usize) -> u64 {
    use std::io::Write as _;
    let letters: Vec<String> = (b'a'..=b'z').map(|c| (c as char).to_string()).collect();
    let mut vocab: Vec<String> = letters.clone();
    let mut merges: Vec<(String, String)> = Vec::new();
    let mut level = letters.clone();
    let mut bytes = 0;
    'grow: while bytes < mb << 20 {
        let mut next = Vec::new();
        for prefix in &level {
            for l in &letters {
                let word = format!("{prefix}{l}");
                // `"word": id,` in the vocab and `["prefix", "l"],` in the merges.
                bytes += 2 * word.len() + 20;
                merges.push((prefix.clone(), l.clone()));
                vocab.push(word.clone());
                next.push(word);
                if bytes >= mb << 20 {
                    break 'grow;
                }
            }
        }
        level = next;
    }
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(
        w,
        r#"{{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null, "pre_tokenizer": {{"type": "Whitespace"}}, "post_processor": null, "decoder": null, "model": {{"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": {{"#
    )
    .unwrap();
    for (i, v) in vocab.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        write!(w, "{sep}\"{v}\": {i}").unwrap();
    }
    write!(w, "}}, \"merges\": [").unwrap();
    for (i, (a, b)) in merges.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        write!(w, "{sep}[\"{a}\", \"{b}\"]").unwrap();
    }
    write!(w, "]}}}}").unwrap();
    w.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn a_large_tokenizer_is_read_in_a_small_multiple_of_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let spec = |tokenizer: &str| {
        sim_spec("tok", "concurrency = [1]").replace(
            "preset = \"llama-3.1-8b\"\n",
            &format!("preset = \"llama-3.1-8b\"\ntokenizer = \"{tokenizer}\"\n"),
        )
    };
    let small_bytes = big_tokenizer(&dir.path().join("small.json"), 1);
    let bytes = big_tokenizer(&dir.path().join("big.json"), 40);
    assert!(bytes > 40 << 20, "{bytes} bytes");
    write(dir.path(), "small.toml", &spec("small.json"));
    write(dir.path(), "big.toml", &spec("big.json"));
    let small = read_capped(dir.path(), &["validate", "small.toml"]);
    assert_eq!(small.code, Some(0), "{}", small.stderr);
    let big = read_capped(dir.path(), &["validate", "big.toml"]);
    assert_eq!(big.signal, None, "validate was killed: {}", big.stderr);
    assert_eq!(big.code, Some(0), "{}", big.stderr);
    let grew = big.max_rss_kb.saturating_sub(small.max_rss_kb) * 1024;
    eprintln!(
        "validate: {} KiB at the peak with a tokenizer of {bytes} bytes, {} KiB with one of {small_bytes}",
        big.max_rss_kb, small.max_rss_kb
    );
    // The library's own reader buffered the model twice before building
    // it: 26 times the file. Read directly, the model it builds (vocab,
    // its reverse and the merges, hashed) is what costs, within what the
    // memory budget counts for a tokenizer.
    assert!(
        grew <= infer_bench_spec::budget::TOKENIZER_FACTOR * bytes,
        "{grew} bytes more than a 1 MB tokenizer for one of {bytes}"
    );
}

#[test]
fn files_past_the_documented_maximum_are_refused_before_they_are_read() {
    let dir = tempfile::tempdir().unwrap();
    // More points than a results file may hold: empty ones, counted
    // before anything of them is kept.
    let points = vec!["{}"; 100_001].join(",");
    write(
        dir.path(),
        "many.json",
        &format!("{{\"format\": \"infer-bench-results\", \"version\": 5, \"points\": [{points}]}}"),
    );
    // Larger than a results file may be: a sparse file, never read.
    let huge = std::fs::File::create(dir.path().join("huge.json")).unwrap();
    huge.set_len((2 << 30) + 1).unwrap();
    drop(huge);
    for (file, needles) in [
        (
            "many.json",
            &["many.json", "100001 points", "more than the 100000"][..],
        ),
        (
            "huge.json",
            &[
                "huge.json",
                "2147483649 bytes",
                "more than the 2147483648 bytes",
            ][..],
        ),
    ] {
        for args in [
            vec!["report", file],
            vec!["diff", file, "--baseline", "base.json"],
            vec!["bless", file, "--baseline", "base.json"],
            vec!["merge", file, "--out", "merged"],
        ] {
            let e = read_capped(dir.path(), &args);
            assert_eq!(e.signal, None, "{args:?} was killed: {}", e.stderr);
            assert_eq!(e.code, Some(2), "{args:?}: {}", e.stderr);
            for needle in needles {
                assert!(
                    e.stderr.contains(needle),
                    "{args:?}: {needle}: {}",
                    e.stderr
                );
            }
        }
    }
}
