//! The README's commands, run: its first command's spec on the built-in
//! simulator, then what the README shows doing with the results (bless,
//! diff, report), and the read-only commands. The second command,
//! `scripts/test`, is what CI runs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_infer-bench"));
    c.current_dir(root());
    c
}

fn ok(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

#[test]
fn the_two_commands_are_the_ones_ci_and_users_run() {
    let text = readme();
    let blocks: Vec<&str> = text
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap().trim())
        .collect();
    assert_eq!(
        blocks[0], "cargo run --release -- run specs/quickstart.toml",
        "the README's first command"
    );
    assert_eq!(blocks[1], "scripts/test", "the README's second command");
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == "scripts/test"),
        ".ci/run calls the README's test command"
    );
    assert!(Path::new(&root().join("scripts/test")).is_file());
}

/// The README's gate block, line by line as written, in a copy of the
/// repository's specs and baselines: the quickstart run and judged against
/// the committed baseline (an unchanged tool must pass), blessed, diffed
/// and reported. `results/quickstart-<time>` is the directory the run
/// named.
#[test]
fn the_quickstart_is_judged_against_its_committed_baseline_blessed_and_reported() {
    let text = readme();
    let block = text
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains("infer-bench bless") && b.contains("specs/quickstart.toml"))
        .expect("the README shows the gate");
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root().join("specs"), &dir.path().join("specs"));
    copy_dir(&root().join("baselines"), &dir.path().join("baselines"));
    let mut out_dir: Option<String> = None;
    for line in block.lines() {
        let line = line.split('#').next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<String> = line
            .split_whitespace()
            .map(|w| match (&out_dir, w) {
                (Some(d), "results/quickstart-<time>") => d.clone(),
                _ => w.to_string(),
            })
            .collect();
        assert_eq!(words[0], "infer-bench", "{line}");
        let out = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
            .args(&words[1..])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{line}: exit {:?}\n{stdout}\n{stderr}",
            out.status.code()
        );
        if out_dir.is_none() {
            let results = stderr
                .lines()
                .find_map(|l| l.strip_prefix("results: "))
                .expect("the run names its results");
            out_dir = Some(results.trim_end_matches("/results.json").to_string());
            // Judged, not merely run: every point compared and passed.
            for p in ["sim.llama-8b.bf16.chat.c8", "sim.llama-8b.fp8.chat.c128"] {
                assert!(stdout.contains(p), "{stdout}");
            }
            assert!(!stdout.contains("INSUFFICIENT"), "{stdout}");
        }
    }
    let out = dir.path().join(out_dir.unwrap());
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 6);
    // The physics the quickstart shows: FP8 decodes faster than BF16 at
    // every concurrency.
    for c in [8, 32, 128] {
        let tput = |prec: &str| {
            points
                .iter()
                .find(|p| p["slug"] == format!("sim.llama-8b.{prec}.chat.c{c}"))
                .unwrap()["merged"]["output_tokens_per_s"]
                .as_f64()
                .unwrap()
        };
        assert!(tput("fp8") > tput("bf16"), "c={c}");
    }
    let blessed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("baselines/quickstart.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(blessed["points"].as_object().unwrap().len(), 6);
    assert!(blessed["rules"]["gates"].is_array());
    let page = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(page.contains("<svg") && page.contains("quickstart"));
}

/// The gate the project's CI runs on the quickstart judges the model, not
/// the machine (virtual time), so it must still catch a slower server: the
/// same spec with the simulator 1.5x slower fails against the committed
/// baseline, exit 1, every point REGRESSED.
#[test]
fn the_quickstart_gate_fails_a_simulator_one_and_a_half_times_slower() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root().join("specs"), &dir.path().join("specs"));
    copy_dir(&root().join("baselines"), &dir.path().join("baselines"));
    let spec = dir.path().join("specs/quickstart.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    assert!(text.contains("noise = 0.02\n"));
    std::fs::write(
        &spec,
        text.replacen("noise = 0.02\n", "noise = 0.02\nslowdown = 1.5\n", 1),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .args(["run", "specs/quickstart.toml", "--baseline", "-q"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("6 points: 6 regressed"), "{stdout}");
}

/// The quickstart simulated in virtual time keeps one real-time smoke run
/// for the HTTP path: `--real-time` serves a point over a socket at
/// wall-clock speed and the real client measures it. Whether this machine
/// keeps up is not asserted (that is the gate's business), only that the
/// path works: requests sent, answered and counted by the server's usage.
#[test]
fn the_quickstart_runs_over_http_with_real_time() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = bin()
        .args([
            "run",
            "specs/quickstart.toml",
            "--real-time",
            "--only",
            "sim.llama-8b.fp8.chat.c8",
            "-q",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.code().is_some_and(|c| c <= 3), "{stderr}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let p = &r["points"][0];
    assert_eq!(p["clock"], serde_json::Value::Null, "{}", p["clock"]);
    let requests = &p["merged"]["requests"];
    assert!(requests["succeeded"].as_u64().unwrap() > 0, "{requests}");
    assert_eq!(requests["failed"], 0, "{requests}");
    assert!(
        p["merged"]["tokens"]["output_source"]["usage"]
            .as_u64()
            .unwrap()
            > 0,
        "{}",
        p["merged"]["tokens"]
    );
    // And --virtual with --real-time is a usage error.
    let both = bin()
        .args(["run", "specs/quickstart.toml", "--real-time", "--virtual"])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            // specs/traces: the sample traces a spec replays.
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn the_read_only_commands_work() {
    let specs: Vec<String> = std::fs::read_dir(root().join("specs"))
        .unwrap()
        .map(|e| format!("specs/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|f| f.ends_with(".toml"))
        .collect();
    let out = bin().arg("validate").args(&specs).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(ok(bin().args(["plan", "specs/quickstart.toml"])).contains("6 points"));
    let json: serde_json::Value = serde_json::from_str(&ok(bin().args([
        "plan",
        "specs/quickstart.toml",
        "--format",
        "json",
    ])))
    .unwrap();
    assert_eq!(json["points"], 6);
    for kind in ["spec", "results", "baseline"] {
        let s: serde_json::Value = serde_json::from_str(&ok(bin().args(["schema", kind]))).unwrap();
        assert_eq!(s["$schema"], "http://json-schema.org/draft-07/schema#");
    }
    assert!(ok(bin().arg("catalog")).contains("h100-sxm"));
    let help = ok(bin().arg("--help"));
    for code in [
        "0  passed: every point judged",
        "3  infrastructure",
        "4  could not judge",
    ] {
        assert!(help.contains(code), "--help documents the exit codes");
    }
}

#[test]
fn self_bench_measures_the_client() {
    // Structural only: whether a check holds depends on the machine.
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    let out = bin().args(["self-bench", "--quick"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let failed = text.lines().any(|l| l.contains(" FAIL "));
    assert_eq!(
        out.status.code(),
        Some(if failed { 1 } else { 0 }),
        "{text}"
    );
    for column in [
        "TTFT p50 / p99 ms",
        "ITL p50 / p99 ms",
        "lag p99 ms",
        "client CPU",
        "verdict",
    ] {
        assert!(text.contains(column), "{column}: {text}");
    }
    for check in ["unpaced", "paced", "floor", "idle", "streams", "rate"] {
        assert!(
            text.lines().any(|l| l.starts_with(check)),
            "{check}: {text}"
        );
    }
    assert!(
        text.contains("us/event") && text.contains("% of a core"),
        "{text}"
    );
}

/// Runs the README's `sh` block that contains `marker`, line by line as
/// written, with `results/` under `dir`. A line whose comment says "exits
/// N" must exit N; every other line must succeed.
fn run_block(marker: &str, dir: &Path) {
    run_block_in(marker, dir, &root());
}

/// [`run_block`] with `cwd` as the working directory.
fn run_block_in(marker: &str, dir: &Path, cwd: &Path) {
    let text = readme();
    let block = text
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains(marker))
        .unwrap_or_else(|| panic!("the README shows {marker}"));
    for written in block.lines() {
        let line = written.split('#').next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        let exits: Option<i32> = written
            .split_once("exits ")
            .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok());
        let words: Vec<String> = line
            .split_whitespace()
            .map(|w| match w.strip_prefix("results/") {
                Some(rest) => dir.join(rest).display().to_string(),
                None => w.to_string(),
            })
            .collect();
        assert_eq!(words[0], "infer-bench", "{line}");
        match exits {
            None => {
                ok(bin().current_dir(cwd).args(&words[1..]));
            }
            Some(code) => {
                let out = bin().current_dir(cwd).args(&words[1..]).output().unwrap();
                assert_eq!(
                    out.status.code(),
                    Some(code),
                    "{line}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// The history block, in a scratch repository holding the quickstart and
/// its baseline (one commit), as a project's main would: the import finds
/// the commit that blessed the baseline, the run is recorded at HEAD, the
/// check (one commit: too short to judge) passes only as allowed, and the
/// page and the export are written.
#[test]
fn the_history_example_runs_as_written() {
    use infer_bench_testkit::git::git;
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    for f in ["specs/quickstart.toml", "baselines/quickstart.json"] {
        std::fs::create_dir_all(r.join(f).parent().unwrap()).unwrap();
        std::fs::copy(root().join(f), r.join(f)).unwrap();
    }
    git(r, &["init", "-q"]);
    git(r, &["add", "."]);
    git(r, &["commit", "-qm", "the quickstart and its baseline"]);
    let dir = tempfile::tempdir().unwrap();
    run_block_in("infer-bench history record", dir.path(), r);
    let files: Vec<_> = std::fs::read_dir(dir.path().join("history/quickstart"))
        .unwrap()
        .flat_map(|y| std::fs::read_dir(y.unwrap().path()).unwrap())
        .collect();
    assert_eq!(files.len(), 1, "the import and the run are one commit");
    let bmf: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("bmf.json")).unwrap())
            .unwrap();
    assert_eq!(bmf.as_object().unwrap().len(), 6, "six points: {bmf}");
    let page = std::fs::read_to_string(dir.path().join("history.html")).unwrap();
    assert!(page.contains("<svg"), "the page draws its series");
}

/// The "Start a spec" block as written, in an empty folder as a fresh
/// repository would be: init, the first run, its bless, and the gate
/// against that baseline, each exiting 0.
#[test]
fn the_init_example_runs_as_written() {
    let repo = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    run_block_in("infer-bench init", dir.path(), repo.path());
    assert!(repo.path().join("bench.toml").is_file());
    assert!(repo.path().join("baselines/.gitkeep").is_file());
    let blessed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo.path().join("baselines/bench.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(blessed["points"].as_object().unwrap().len(), 3);
    assert!(dir.path().join("first/results.json").is_file());
}

#[test]
fn the_sharding_example_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    run_block("infer-bench merge", dir.path());
    let merged: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("quickstart/results.json")).unwrap(),
    )
    .unwrap();
    let plan: serde_json::Value = serde_json::from_str(&ok(bin().args([
        "plan",
        "specs/quickstart.toml",
        "--format",
        "json",
    ])))
    .unwrap();
    let ids: Vec<&str> = merged["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    let planned: Vec<&str> = plan["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, planned, "the two halves make the whole plan, in order");
    assert_eq!(merged["complete"], true);
}

/// The capacity-planning block as written, and what the README says it
/// answers: at 4 requests/s the L40S in FP8 is the cheapest point that
/// passes its SLOs, and at 16/s only the H100 and H200 pass.
#[test]
fn the_capacity_planning_example_runs_as_written_and_says_what_the_readme_says() {
    let dir = tempfile::tempdir().unwrap();
    run_block("specs/capacity-planning.toml", dir.path());
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(name).join("results.json")).unwrap(),
        )
        .unwrap()
    };
    let capacity = read("capacity");
    let points = capacity["points"].as_array().unwrap();
    assert_eq!(points.len(), 32);
    assert!(points.iter().all(|p| p["clock"] == "virtual"));
    assert!(dir.path().join("capacity/report.html").is_file());
    let passing = |rate: &str| -> Vec<(String, f64)> {
        let mut v: Vec<(String, f64)> = points
            .iter()
            .filter(|p| p["axes"]["rate"] == rate && p["slo_pass"] == true)
            .map(|p| {
                (
                    p["slug"].as_str().unwrap().to_string(),
                    p["cost"]["usd_per_1m_output_tokens"].as_f64().unwrap(),
                )
            })
            .collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1));
        v
    };
    let at4 = passing("4/s");
    assert!(at4[0].0.starts_with("l40s.llama-8b.fp8."), "{at4:?}");
    let mut at16: Vec<&str> = passing("16/s")
        .iter()
        .map(|(slug, _)| {
            if slug.starts_with("h100") {
                "h100"
            } else if slug.starts_with("h200") {
                "h200"
            } else {
                "other"
            }
        })
        .collect();
    at16.sort();
    at16.dedup();
    assert_eq!(at16, ["h100", "h200"]);
    let quickstart = read("quickstart-virtual");
    assert!(
        quickstart["points"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["clock"] == "virtual")
    );
}

/// The quality block as written, and the tables the README shows: each
/// of its lines is a line of the run's summary, to the byte (the run is
/// in virtual time and seeded, so it gives the same everywhere), and the
/// report has its quality section.
#[test]
fn the_quality_example_runs_as_written_and_prints_what_the_readme_shows() {
    let dir = tempfile::tempdir().unwrap();
    run_block("specs/precision-comparison.toml", dir.path());
    assert!(dir.path().join("precision/report.html").is_file());
    let page = std::fs::read_to_string(dir.path().join("precision/report.html")).unwrap();
    assert!(page.contains("<section id=\"quality\">") && page.contains("Answers that differ"));
    let text = readme();
    let shown = text
        .split("```text\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains("sim/llama-70b/int4"))
        .expect("the README shows the quality table");
    let out = bin()
        .args([
            "run",
            "specs/precision-comparison.toml",
            "--virtual",
            "--out",
        ])
        .arg(dir.path().join("again"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let printed: Vec<&str> = stdout.lines().map(str::trim_end).collect();
    for line in shown.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            printed.contains(&line.trim_end()),
            "the README shows a line the run did not print:\n{line}\n\nprinted:\n{stdout}"
        );
    }
}

/// The README's install commands are the tested ones: every line of its
/// install blocks (the wheel, the container, cargo), comments aside, is
/// one that `scripts/wheel-check`, `scripts/release-check` or `.ci/run`
/// runs as written (those scripts check the README back: they refuse a
/// line it no longer shows). The pip block leads the install section.
#[test]
fn the_install_commands_are_the_ones_the_scripts_run() {
    let text = readme();
    let section = text
        .split("\n## Install\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the README has an Install section");
    let blocks: Vec<&str> = section
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    assert_eq!(blocks.len(), 3, "pip/uv, the container, cargo");
    assert!(blocks[0].starts_with("pip install infer-bench\n"));
    assert!(blocks[0].contains("uvx infer-bench "));
    assert!(blocks[1].contains("podman build"));
    assert!(blocks[2].starts_with("cargo install"));
    let script = |p: &str| std::fs::read_to_string(root().join(p)).unwrap();
    let (wheel, release, ci) = (
        script("scripts/wheel-check"),
        script("scripts/release-check"),
        script(".ci/run"),
    );
    let runs = |body: &str, line: &str| {
        body.lines().any(|l| {
            let l = l.trim();
            l == line
                || l == format!("readme_cmd \"{line}\"")
                || l == format!("readme_line '{line}'")
                || l == format!("line='{line}'")
                || l == format!("run_line='{line}'")
        })
    };
    for (block, body, by) in [
        (blocks[0], &wheel, "scripts/wheel-check"),
        (blocks[1], &release, "scripts/release-check"),
        (blocks[2], &ci, ".ci/run"),
    ] {
        for written in block.lines() {
            let line = written.split(" #").next().unwrap().trim();
            if line.is_empty() {
                continue;
            }
            assert!(runs(body, line), "{by} does not run the README's `{line}`");
        }
    }
    assert!(ci.lines().any(|l| l.trim() == "scripts/wheel-check"));
}
