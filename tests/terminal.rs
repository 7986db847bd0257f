//! What a person reads in the terminal: snapshots of the run summary
//! (narrow to 120 columns and `--wide`, plain and coloured) on committed
//! quickstart results with a pre-flight finding at every point, said once;
//! `--color` and `NO_COLOR` through the real binary with stdout piped;
//! and the README's example table against what the quickstart prints.

use std::path::{Path, PathBuf};
use std::process::Command;

use infer_bench::export::summary;
use infer_bench::export::term::{Look, WIDTH};
use infer_bench::results::Results;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
}

/// A fresh, empty directory under Cargo's scratch space for tests.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The committed quickstart results (one point INVALID, two failing an
/// SLO) with what a loaded machine adds: the client-CPU pre-flight finding
/// at every point, its figure differing point to point, and one hint that
/// two points share. Written to a file and read back as `run` reads it.
fn results(name: &str) -> (Results, PathBuf) {
    let text = std::fs::read_to_string("tests/fixtures/reports/quickstart.json").unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (i, p) in v["points"].as_array_mut().unwrap().iter_mut().enumerate() {
        p["preflight"] = serde_json::json!([{
            "check": "client_cpu",
            "message": format!("the load generator's machine was {}% busy just before the point (2 cores): other work may slow the client and inflate its latencies", 90 + i),
        }]);
        if i < 2 {
            p["hints"] = serde_json::json!([{
                "kind": "tpot_spread",
                "message": "TPOT p90 is 31% above its median: bandwidth or batching contention between requests",
                "evidence": {},
            }]);
        }
    }
    let dir = scratch(name);
    let path = dir.join("results.json");
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    (Results::read(&path).unwrap().0, path)
}

/// The table's lines: from its header to the first empty line.
fn table_lines(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| !l.starts_with("point "))
        .take_while(|l| !l.is_empty())
        .collect()
}

const PLAIN: Look = Look {
    color: false,
    wide: false,
};

#[test]
fn narrow_summary_fits_120_columns_and_says_each_finding_once() {
    let (r, _) = results("narrow");
    let text = summary::render(&r, PLAIN);
    insta::assert_snapshot!(text);
    for line in table_lines(&text) {
        assert!(
            line.chars().count() <= WIDTH,
            "{} columns: {line}",
            line.len()
        );
    }
    assert!(!table_lines(&text)[0].contains("ITL p99"), "{text}");
    assert!(
        text.contains("not shown: ITL p99, E2E p50; --wide shows every column"),
        "{text}"
    );
    // Six points, one pre-flight line, naming them all and whose figures it quotes.
    assert_eq!(text.matches("pre-flight").count(), 1, "{text}");
    assert!(
        text.contains("all 6 points: pre-flight: the load generator's machine was 90% busy"),
        "{text}"
    );
    assert!(
        text.contains("(figures of sim.llama-8b.bf16.chat.c8; each point's are in results.json)"),
        "{text}"
    );
    assert_eq!(text.matches("TPOT p90 is 31%").count(), 1, "{text}");
    assert!(
        text.contains(
            "2 points (sim.llama-8b.bf16.chat.c8, sim.llama-8b.bf16.chat.c32): hint: TPOT p90"
        ),
        "{text}"
    );
    // A failed SLO: FAIL in the cell, the SLOs in a note.
    assert!(text.contains(": SLO failed: "), "{text}");
    assert!(!text.contains("\x1b["), "no colour unless asked");
}

#[test]
fn wide_summary_shows_every_column() {
    let (r, _) = results("wide");
    let text = summary::render(
        &r,
        Look {
            color: false,
            wide: true,
        },
    );
    insta::assert_snapshot!(text);
    let header = table_lines(&text)[0];
    for col in ["ITL p99", "E2E p50", "$/1M out", "goodput", "TTFT p99"] {
        assert!(header.contains(col), "{header}");
    }
    assert!(!text.contains("not shown"), "{text}");
    assert!(
        !text.contains("SLO failed"),
        "the cell names the SLOs: {text}"
    );
    assert!(
        text.contains("FAIL (tpot p50 < 10ms; tpot p90 < 15ms)"),
        "{text}"
    );
    assert!(table_lines(&text).iter().any(|l| l.len() > WIDTH));
}

#[test]
fn colour_marks_slo_results_and_validity_only() {
    let (r, _) = results("colour");
    let look = Look {
        color: true,
        wide: false,
    };
    let text = summary::render(&r, look);
    insta::assert_snapshot!(text);
    assert!(text.contains("\x1b[32mpass\x1b[0m"), "{text:?}");
    assert!(text.contains("\x1b[1;31mFAIL\x1b[0m"), "{text:?}");
    assert!(text.contains("\x1b[33mINVALID\x1b[0m"), "{text:?}");
    // Colour changes nothing else: without the escapes it is the plain text.
    let stripped = text
        .replace("\x1b[32m", "")
        .replace("\x1b[1;31m", "")
        .replace("\x1b[33m", "")
        .replace("\x1b[0m", "");
    assert_eq!(stripped, summary::render(&r, PLAIN));
}

/// `--color` through the binary, stdout piped (as in CI, or `> file`):
/// auto draws no colour, `always` does (even with NO_COLOR: the command
/// line wins), `never` never; `--wide` is a global flag. One quickstart
/// point in virtual time (a fraction of a second).
#[test]
fn color_and_wide_flags_on_piped_output() {
    let dir = scratch("flags");
    let run = |extra: &[&str], no_color: bool| {
        let mut c = bin();
        c.args(["run", "specs/quickstart.toml", "--virtual", "-q"])
            .args(["--only", "sim.llama-8b.fp8.chat.c8", "--out"])
            .arg(&dir)
            .args(extra)
            .env_remove("NO_COLOR");
        if no_color {
            c.env("NO_COLOR", "1");
        }
        let out = c.output().unwrap();
        assert!(out.status.code().is_some_and(|c| c <= 1), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let auto = run(&[], false);
    assert!(!auto.contains('\x1b'), "{auto}");
    assert!(auto.contains("pass") || auto.contains("FAIL"), "{auto}");
    let always = run(&["--color", "always"], true);
    assert!(
        always.contains("\x1b[32mpass\x1b[0m") || always.contains("\x1b[1;31mFAIL\x1b[0m"),
        "{always:?}"
    );
    let never = run(&["--color=never"], false);
    assert!(!never.contains('\x1b'), "{never}");
    let wide = run(&["--wide"], false);
    assert!(table_lines(&wide)[0].contains("ITL p99"), "{wide}");
    assert!(!table_lines(&auto)[0].contains("ITL p99"), "{auto}");
    let bad = bin()
        .args(["--color", "sometimes", "catalog"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// The README's example table is what the quickstart prints: the same
/// columns, the same note about those left out, 120 columns at most.
#[test]
fn the_readme_table_is_the_quickstart_table() {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let block = readme
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the README shows the quickstart's table");
    let out_dir = scratch("readme-quickstart");
    let out = bin()
        .args(["run", "specs/quickstart.toml", "--virtual", "-q", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let printed = table_lines(&stdout);
    let shown = table_lines(block);
    assert_eq!(shown[0], printed[0], "the header\n{block}\n{stdout}");
    assert_eq!(shown.len(), printed.len(), "\n{block}\n{stdout}");
    for line in &shown {
        assert!(line.chars().count() <= WIDTH, "{line}");
    }
    for (s, p) in shown.iter().zip(&printed) {
        assert_eq!(
            s.split_whitespace().next(),
            p.split_whitespace().next(),
            "the points, in order"
        );
    }
    let note = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("(to fit"))
            .map(str::to_owned)
    };
    assert_eq!(note(block), note(&stdout), "\n{block}\n{stdout}");
}

/// A pipe whose reader is already gone: what a child writes to it fails
/// with EPIPE (`2>&1 | head -1` once `head` has quit, a dropped ssh
/// session, a closed CI log).
fn closed_pipe() -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: `pipe` fills two descriptors this test then owns.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both were just opened and are owned here alone.
    let (read, write) = unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(read);
    write
}

/// With stdout and stderr closed under it, a command says nothing and
/// still does its work: no panic (exit 101), the run's results kept.
#[test]
fn closed_stdout_and_stderr_never_stop_a_command() {
    let dir = scratch("closed-pipes");
    let spec = dir.join("s.toml");
    std::fs::write(
        &spec,
        "name = \"pipes\"\nseed = 1\n\n[targets.sim]\nkind = \"sim\"\n\n[models.m]\npreset = \"llama-3.1-8b\"\n\n\
         [workloads.w]\napi = \"completions\"\ninput_tokens = 16\noutput_tokens = 8\nignore_eos = true\n\n\
         [load]\nduration = \"500ms\"\nruns = 1\n\n[matrix]\nconcurrency = [1, 2]\n",
    )
    .unwrap();
    let closed = |args: &[&str]| {
        let err = closed_pipe();
        bin()
            .args(args)
            .stdout(std::process::Stdio::from(err.try_clone().unwrap()))
            .stderr(std::process::Stdio::from(err))
            .status()
            .unwrap()
    };
    let s = spec.to_str().unwrap();
    assert_eq!(closed(&["validate", s]).code(), Some(0));
    assert_eq!(closed(&["plan", s]).code(), Some(0));
    let out = dir.join("out");
    let status = closed(&["run", s, "--out", out.to_str().unwrap()]);
    assert_eq!(status.code(), Some(0));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(r["interrupted"], false);
    assert_eq!(r["points"].as_array().map(Vec::len), Some(2));
    // And a spec with a mistake still exits 2, not 101.
    std::fs::write(dir.join("bad.toml"), "name = 3\n").unwrap();
    let bad = dir.join("bad.toml");
    assert_eq!(closed(&["validate", bad.to_str().unwrap()]).code(), Some(2));
}
