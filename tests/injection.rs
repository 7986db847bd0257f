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

mod every_writer {
    //! The property: whatever text a server or a spec supplies (controls,
    //! ESC and C1, `::` after a line break, Markdown, HTML, links, images,
    //! mentions, formulas, bidirectional overrides, and arbitrary Unicode;
    //! bytes that are not UTF-8 reach results as U+FFFD, since bodies are
    //! decoded lossily), placed in every field of a results file that
    //! carries outside text, comes out of every writer as text: the
    //! summary and verdict tables (with and without colour), the Markdown,
    //! HTML and CSV reports, the Markdown verdict and JUnit.

    use infer_bench::export;
    use infer_bench::judge::analysis::Source;
    use infer_bench::judge::compare::{Settings, compare};
    use infer_bench_results::{Outside, PointStatus, Reason, ReasonKind, ServerInfo};
    use infer_bench_testkit::fixtures;
    use infer_bench_testkit::readers::{
        assert_csv_safe, assert_markdown_safe, assert_markup_safe, assert_terminal_safe,
    };
    use proptest::prelude::*;

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[ -~]{0,12}",
            Just("\u{1b}]52;c;SGFja2Vk\u{7}".to_string()),
            Just("\u{1b}[2J\u{1b}[H".to_string()),
            Just("\u{9b}31m".to_string()),
            Just("\r".to_string()),
            Just("\n::error::forged".to_string()),
            Just("::add-mask::x".to_string()),
            Just("<img src=x onerror=alert(1)>".to_string()),
            Just("<details open>".to_string()),
            Just("[l](javascript:alert(1))".to_string()),
            Just("![p](https://evil.example/p.png)".to_string()),
            Just(" @octocat ".to_string()),
            Just(" www.evil.example ".to_string()),
            Just("=HYPERLINK(\"https://evil.example\")".to_string()),
            Just("|".to_string()),
            Just("`".to_string()),
            Just("\u{202e}".to_string()),
            Just("\u{fffd}".to_string()),
        ]
    }

    fn hostile() -> impl Strategy<Value = String> {
        prop::collection::vec(piece(), 1..6).prop_map(|v| v.concat())
    }

    /// `s` without our colour sequences (ESC [ digits ; m).
    fn without_colours(s: &str) -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(at) = rest.find("\u{1b}[") {
            out.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            let n = after
                .bytes()
                .take_while(|b| b.is_ascii_digit() || *b == b';')
                .count();
            if after.as_bytes().get(n) == Some(&b'm') {
                rest = &after[n + 1..];
            } else {
                out.push_str(&rest[at..at + 2]);
                rest = after;
            }
        }
        out.push_str(rest);
        out
    }

    fn check(s: &str) {
        let (spec, plan) = fixtures::plan(16, "");
        let plain = fixtures::results(vec![fixtures::point(&plan, &[10.0, 10.0, 10.0], &[])]);
        let baseline = fixtures::baseline_of(&plain);

        let mut ok = fixtures::point(&plan, &[10.0, 10.5, 9.5], &[]);
        ok.warnings = vec![Reason::new(ReasonKind::Other, s).with_fix(s)];
        ok.server = Some(ServerInfo {
            name: Some(Outside::new(s)),
            version: Some(Outside::new(s)),
            model: Some(Outside::new(s)),
            ..ServerInfo::default()
        });
        ok.merged.errors.insert("status_5xx".into(), 1);
        ok.merged
            .error_examples
            .insert("status_5xx".into(), Outside::new(s));
        std::sync::Arc::make_mut(&mut ok.config.model).served_name = s.to_string();
        let mut invalid = ok.clone();
        invalid.valid = false;
        invalid.invalid_reasons = vec![Reason::new(ReasonKind::Other, s)];
        let mut failed = ok.clone();
        failed.status = PointStatus::Failed;
        failed.valid = false;
        failed.failure = Some(s.to_string());
        let mut results = fixtures::results(vec![ok, invalid, failed]);
        results.spec.name = s.to_string();

        for color in [false, true] {
            let look = export::term::Look { color, wide: true };
            let summary = export::summary::render(&results, look);
            assert_terminal_safe("summary", &without_colours(&summary));
        }
        let sources = [Source::new(
            s.to_string(),
            "results.json".into(),
            results.clone(),
        )];
        assert_markdown_safe("report.md", &export::report::markdown::render(&sources));
        assert_markup_safe("report.html", &export::report::html::render(&sources));
        assert_csv_safe("report.csv", &export::report::csv::render(&sources));

        let report = compare(
            &baseline,
            &results,
            &Settings::from_regression(&spec.regression),
        );
        for color in [false, true] {
            let look = export::term::Look { color, wide: true };
            let table = export::verdict::table::render(&report, look);
            assert_terminal_safe("verdict table", &without_colours(&table));
        }
        assert_markdown_safe(
            "verdict.md",
            &export::verdict::markdown::markdown(&report, export::verdict::markdown::MAX_BYTES),
        );
        assert_markup_safe("verdict.xml", &export::verdict::junit::junit(&report));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn any_outside_text_reaches_every_writer_as_text(s in hostile()) {
            check(&s);
        }
    }
}
