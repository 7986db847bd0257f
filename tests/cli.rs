//! Conventions of the command line a newcomer relies on: a missing input
//! path is a usage error (exit 2) that says what was expected, whatever
//! the command; a name given to `--only` that matches nothing is a typo in
//! `plan` as in `run`; both spellings of Markdown work everywhere.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
}

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_missing_results_path_is_a_usage_error_that_says_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-run");
    let missing = missing.to_str().unwrap();
    let out = dir.path().join("merged");
    let cases: Vec<Vec<&str>> = vec![
        vec!["diff", missing, "--baseline", "b.json"],
        vec!["bless", missing, "--baseline", "b.json"],
        vec!["merge", missing, "--out", out.to_str().unwrap()],
        vec!["report", missing],
        // Both spellings of Markdown are accepted (the value is parsed
        // before the path is looked at).
        vec!["report", missing, "--format", "markdown"],
        vec!["diff", missing, "--format", "md"],
    ];
    for args in cases {
        let o = bin().current_dir(dir.path()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("no results at {missing}"))
                && err.contains("expected a results.json file or a run directory"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("os error"), "{args:?}: {err}");
    }
    assert!(!out.exists());
}

#[test]
fn only_that_matches_nothing_is_an_error_in_plan_as_in_run() {
    let spec = root().join("specs/quickstart.toml");
    for cmd in ["plan", "run"] {
        let dir = tempfile::tempdir().unwrap();
        let o = bin()
            .current_dir(dir.path())
            .arg(cmd)
            .arg(&spec)
            .args(["--only", "no-such-point"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("no point of the plan matches --only"),
            "{cmd}: {err}"
        );
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "{cmd} wrote something"
        );
    }
    // A name is exact, a prefix is written with `*`.
    let planned = |only: &str| {
        let o = bin()
            .arg("plan")
            .arg(&spec)
            .args(["--only", only, "--format", "json"])
            .output()
            .unwrap();
        if o.status.code() != Some(0) {
            return Vec::new();
        }
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["plan"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["slug"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        planned("sim.llama-8b.fp8.chat.c8"),
        ["sim.llama-8b.fp8.chat.c8"]
    );
    assert_eq!(planned("sim.llama-8b.fp8.*").len(), 3);
    assert!(
        planned("sim.llama-8b.fp8").is_empty(),
        "a bare prefix is not a name"
    );
}

#[test]
fn written_files_honour_the_umask() {
    let results = root().join("tests/fixtures/reports/quickstart.json");
    for (umask, want) in [("022", 0o644), ("002", 0o664), ("077", 0o600)] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("report.md");
        let o = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "umask {umask}; exec \"$0\" report \"$1\" --format md --output \"$2\""
            ))
            .arg(env!("CARGO_BIN_EXE_infer-bench"))
            .arg(&results)
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, want, "umask {umask}");
    }
}

/// A folder holding `NAME.toml`: one simulated point at concurrency 2,
/// with these `[load]` keys besides.
fn sim_spec(name: &str, load: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(format!("{name}.toml")),
        format!(
            "name = \"{name}\"\n[targets.sim]\nkind = \"sim\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 16\noutput_tokens = 8\n[load]\nconcurrency = 2\n{load}\n"
        ),
    )
    .unwrap();
    dir
}

#[test]
fn quiet_runs_say_nothing_on_stderr_but_the_summary_still_comes() {
    let _t = infer_bench_testkit::timing::exclusive();
    let dir = sim_spec("q", "requests = 4\nruns = 1");
    let o = bin()
        .current_dir(dir.path())
        .args(["run", "q.toml", "--out", "out", "-q"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.trim().is_empty(), "stderr: {err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("sim.m.w.c2"));
    assert!(dir.path().join("out/results.json").is_file());
}

#[test]
fn verbose_runs_say_each_run_as_it_ends_and_quiet_excludes_it() {
    let _t = infer_bench_testkit::timing::exclusive();
    let dir = sim_spec("v", "requests = 6\nruns = 2");
    let o = bin()
        .current_dir(dir.path())
        .args(["run", "v.toml", "--out", "out", "-v"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("sim.m.w.c2: requests in the vllm dialect (the simulator's)"),
        "{err}"
    );
    for run in [1, 2] {
        assert!(
            err.contains(&format!(
                "sim.m.w.c2: run {run}: 2 connections opened before the clock"
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!("sim.m.w.c2: run {run}: window "))
                && err.contains("6 ok, 0 failed"),
            "{err}"
        );
    }
    let o = bin()
        .current_dir(dir.path())
        .args(["run", "v.toml", "--out", "out2", "-v", "-q"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
}

#[test]
fn completions_and_a_manual_page_are_generated_from_the_command_line() {
    for shell in ["bash", "zsh", "fish"] {
        let o = bin().args(["completions", shell]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{shell}");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("infer-bench"), "{shell}");
        assert!(
            text.contains("allow-launch"),
            "{shell}: every flag is there"
        );
    }
    let o = bin().arg("man").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let man = String::from_utf8_lossy(&o.stdout);
    assert!(man.starts_with(".ie") || man.contains(".TH"), "{man}");
    assert!(man.contains("infer\\-bench"), "{man}");
}
