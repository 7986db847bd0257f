//! Outside text turned against its reader (issue 36), end to end: the real
//! binary against a server whose every answer carries terminal escapes,
//! workflow commands on lines of their own, Markdown, HTML and a formula
//! (`infer_bench_testkit::hostile::INJECTION`), and a spec whose served
//! name does the same. Everything a person or a CI system reads is checked
//! in its own grammar: the terminal (stdout and stderr of `run`, `diff`,
//! `report`) shows no escape and no line that a CI log reads as a workflow
//! command; the Markdown report and verdict, parsed as CommonMark, build no
//! HTML, link or image, and notify no one; the HTML report and JUnit hold
//! no markup of the server's; the CSV report starts no formula.

use std::path::Path;
use std::process::{Command, Output};

use infer_bench_testkit::hostile::{HostileServer, Hostility, INJECTION};
use infer_bench_testkit::readers::{
    assert_csv_safe, assert_markdown_safe, assert_markup_safe, assert_terminal_safe,
};
use infer_bench_testkit::runtime;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
}

fn spec(url: &str, served_name: &str) -> String {
    format!(
        "name = \"injection\"\nseed = 5\n\n[targets.t]\nkind = \"openai\"\nbase_url = \"{url}\"\n\n[models.m]\nserved_name = {served_name}\n\n[workloads.w]\napi = \"completions\"\ninput_tokens = 8\noutput_tokens = 4\n\n[load]\nconcurrency = 2\nrequests = 12\nruns = 3\n\n[validity]\nmin_requests = 1\nmin_duration = \"0s\"\n\n[regression]\nmin_runs = 3\n"
    )
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run(spec_path: &Path, out: &Path, extra: &[&str]) -> Output {
    bin()
        .arg("run")
        .arg(spec_path)
        .arg("--out")
        .arg(out)
        .args(["--requests", "-v"])
        .args(extra)
        .output()
        .unwrap()
}

/// Issue 36, findings 1 to 4, end to end: each of these outputs carried
/// the server's escapes, forged workflow commands or built Markdown and
/// HTML from its text before the change.
#[test]
fn text_a_server_or_spec_controls_reaches_no_reader_as_anything_but_text() {
    let rt = runtime();
    let server = rt
        .block_on(HostileServer::start(Hostility::Injection))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = server.base_url();

    // The baseline: a run under a plain name, blessed.
    let first = dir.path().join("first.toml");
    std::fs::write(&first, spec(&url, "\"hostile-model\"")).unwrap();
    let out1 = dir.path().join("out1");
    let r = run(&first, &out1, &[]);
    let (stdout, stderr) = text(&r);
    assert!(
        stdout.contains("injection"),
        "the run printed its summary: {stdout}\n{stderr}"
    );
    assert_terminal_safe("run: stdout", &stdout);
    assert_terminal_safe("run: stderr", &stderr);
    let results = std::fs::read_to_string(out1.join("results.json")).unwrap();
    assert!(
        results.contains("OVERWRITTEN"),
        "the server's text is recorded as it came (JSON escapes it): {results}"
    );

    let baseline = dir.path().join("baseline.json");
    let b = bin()
        .arg("bless")
        .arg(&out1)
        .arg("--baseline")
        .arg(&baseline)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&b);
    assert!(b.status.success(), "bless: {stdout}\n{stderr}");
    assert_terminal_safe("bless", &(stdout + &stderr));

    // The pull request: a served name that is itself an attack, judged
    // against the baseline (its drift is quoted).
    let second = dir.path().join("second.toml");
    let attack = toml::Value::String(format!("hostile\n::error::drift {INJECTION}")).to_string();
    std::fs::write(&second, spec(&url, &attack)).unwrap();
    let out2 = dir.path().join("out2");
    let verdict_md = dir.path().join("verdict.md");
    let junit = dir.path().join("junit.xml");
    let r = run(
        &second,
        &out2,
        &[
            "--baseline",
            baseline.to_str().unwrap(),
            "--markdown",
            verdict_md.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = text(&r);
    assert_ne!(
        r.status.code(),
        Some(0),
        "drift cannot pass: {stdout}\n{stderr}"
    );
    assert_terminal_safe("run --baseline: stdout", &stdout);
    assert_terminal_safe("run --baseline: stderr", &stderr);
    let md = std::fs::read_to_string(&verdict_md).unwrap();
    assert!(md.contains("served_name"), "the drift is named: {md}");
    assert_markdown_safe("verdict Markdown", &md);
    assert_markup_safe("JUnit", &std::fs::read_to_string(&junit).unwrap());

    for format in ["table", "markdown", "junit", "json"] {
        let d = bin()
            .arg("diff")
            .arg(&out2)
            .arg("--baseline")
            .arg(&baseline)
            .args(["--format", format])
            .output()
            .unwrap();
        let (stdout, stderr) = text(&d);
        assert_terminal_safe(
            &format!("diff --format {format}"),
            &(stdout.clone() + &stderr),
        );
        if format == "markdown" {
            assert_markdown_safe("diff --format markdown", &stdout);
        }
    }

    for format in ["md", "html", "csv", "json"] {
        let rep = bin()
            .arg("report")
            .arg(&out1)
            .arg(&out2)
            .args(["--format", format])
            .output()
            .unwrap();
        let (stdout, stderr) = text(&rep);
        assert!(rep.status.success(), "report {format}: {stderr}");
        assert_terminal_safe(
            &format!("report --format {format}"),
            &(stdout.clone() + &stderr),
        );
        match format {
            "md" => assert_markdown_safe("report --format md", &stdout),
            "html" => assert_markup_safe("report --format html", &stdout),
            "csv" => assert_csv_safe("report --format csv", &stdout),
            _ => {}
        }
        // Written to a file, the report is the same text, unguarded by the
        // terminal: it must be safe on its own.
        let file = dir.path().join(format!("report.{format}"));
        let rep = bin()
            .arg("report")
            .arg(&out1)
            .arg(&out2)
            .args(["--format", format, "--output"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(rep.status.success());
        let written = std::fs::read_to_string(&file).unwrap();
        match format {
            "md" => assert_markdown_safe("report.md", &written),
            "html" => assert_markup_safe("report.html", &written),
            "csv" => assert_csv_safe("report.csv", &written),
            _ => {}
        }
    }
}
