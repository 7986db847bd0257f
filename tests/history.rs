//! The history of main, end to end through the real binary: runs of the
//! simulator at many commits (its speed stepped as a real regression would
//! step it, with 2% noise from commit to commit) recorded one file per
//! commit, `history check` finding the steps at their commits and exiting
//! 1 on a regression, `history import` rebuilding a history from the git
//! log of a re-blessed baseline, the exports parsed as their trackers read
//! them, the HTML page drawn in headless Chromium, and a hostile record
//! unable to put an escape or a workflow command into what we print.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use infer_bench_testkit::git::git;
use serde_json::Value;

/// A small simulated point: three runs of 48 requests in virtual time.
/// A spec named `gate*` judges pull requests against the history in `hist`.
fn spec(name: &str, slowdown: f64) -> String {
    let against = if name.starts_with("gate") {
        "against = \"history\"\nhistory = \"hist\"\n"
    } else {
        ""
    };
    format!(
        r#"name = "{name}"
seed = 7

[targets.sim]
kind = "sim"
gpu = "l40s"

[targets.sim.sim]
noise = 0.0
slowdown = {slowdown}
clock = "virtual"

[models.llama-8b]
preset = "llama-3.1-8b"

[workloads.chat]
api = "chat"
input_tokens = 128
output_tokens = 16
ignore_eos = true

[load]
concurrency = 8
requests = 48
runs = 3

[regression]
{against}metrics = [
  {{ metric = "tpot", stat = "p50", noise = "3%" }},
  {{ metric = "output_tokens_per_s", noise = "3%" }},
]
"#
    )
}

fn ib(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stderr: {}\nstdout: {}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs `spec` (at `slowdown`) in `dir` into `dir/out-<tag>`; its path.
fn run(dir: &Path, name: &str, slowdown: f64, tag: &str) -> PathBuf {
    let spec_path = dir.join(format!("{name}.toml"));
    std::fs::write(&spec_path, spec(name, slowdown)).unwrap();
    let out = dir.join(format!("out-{tag}"));
    ok(&ib(
        dir,
        &[
            "run",
            "-q",
            spec_path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    ));
    out
}

/// A deterministic N(0, 1) stream (Box-Muller on a xorshift).
struct Gauss(u64);
impl Gauss {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn next(&mut self) -> f64 {
        let (a, b) = (self.uniform(), self.uniform());
        (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()
    }
}

/// Records `levels.len()` commits of `name` into `dir/hist`, commit `i`
/// run at slowdown `levels[i]` times 2% noise, an hour apart.
fn history(dir: &Path, name: &str, levels: &[f64], seed: u64) {
    more_history(dir, name, levels, seed, 0);
}

/// [`history`], its commits numbered from `first`.
fn more_history(dir: &Path, name: &str, levels: &[f64], seed: u64, first: usize) {
    let mut g = Gauss(seed);
    for (i, level) in (first..).zip(levels) {
        let slowdown = level * (1.0 + 0.02 * g.next());
        let out = run(dir, name, slowdown, &format!("{i:03}"));
        let time = format!("2026-03-{:02}T{:02}:00:00Z", 1 + i / 24, i % 24);
        ok(&ib(
            dir,
            &[
                "history",
                "record",
                out.to_str().unwrap(),
                "--commit",
                &format!("c{i:03}"),
                "--time",
                &time,
                "--dir",
                "hist",
            ],
        ));
        std::fs::remove_dir_all(&out).unwrap();
    }
}

fn series<'a>(check: &'a Value, label: &str) -> &'a Value {
    check["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == label)
        .unwrap_or_else(|| panic!("no series {label} in {check}"))
}

/// The index of commit `cNNN`.
fn index(commit: &Value) -> i64 {
    commit.as_str().unwrap()[1..].parse().unwrap()
}

#[test]
fn a_step_in_main_is_found_at_its_commit_and_a_regression_fails_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 36 commits: a 10% slowdown lands at commit 18.
    let levels: Vec<f64> = (0..36).map(|i| if i < 18 { 1.0 } else { 1.10 }).collect();
    history(d, "steps", &levels, 11);
    let files: Vec<_> = walk(&d.join("hist/steps"));
    assert_eq!(files.len(), 36, "{files:?}");
    let size: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    eprintln!("36 records: {size} bytes");

    let o = ib(
        d,
        &["history", "check", "--dir", "hist", "--format", "json"],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let check: Value = serde_json::from_str(&text).unwrap();
    let tpot = series(&check, "tpot p50");
    assert_eq!(tpot["verdict"], "REGRESSED", "{tpot}");
    assert_eq!(tpot["commits"], 36);
    let shifts = tpot["shifts"].as_array().unwrap();
    assert_eq!(shifts.len(), 1, "{tpot}");
    let s = &shifts[0];
    assert!((index(&s["commit"]) - 18).abs() <= 2, "{s}");
    let rel = s["relative"].as_f64().unwrap();
    assert!((0.06..0.14).contains(&rel), "a 10% step, found {rel}: {s}");
    assert_eq!(s["worse"], true);
    let tput = series(&check, "output_tokens_per_s");
    assert_eq!(tput["verdict"], "REGRESSED", "{tput}");
    assert!(tput["shifts"][0]["relative"].as_f64().unwrap() < -0.05);

    // The table names the shift and its commit.
    let o = ib(
        d,
        &["--color", "never", "history", "check", "--dir", "hist"],
    );
    assert_eq!(o.status.code(), Some(1));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("REGRESSED"), "{table}");
    assert!(table.contains(s["commit"].as_str().unwrap()), "{table}");

    // The same history, then a fix: the newest shift is an improvement.
    more_history(d, "steps", &[1.0; 12], 99, 36);
    let o = ib(
        d,
        &["history", "check", "--dir", "hist", "--format", "json"],
    );
    let check: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0), "{check}");
    let tpot = series(&check, "tpot p50");
    assert_eq!(tpot["verdict"], "IMPROVED", "{tpot}");
    let last = tpot["shifts"].as_array().unwrap().last().unwrap().clone();
    assert!((index(&last["commit"]) - 36).abs() <= 2, "{tpot}");

    // Exports, as their trackers read them.
    let bmf: Value = serde_json::from_str(&ok(&ib(
        d,
        &[
            "history", "export", "steps", "--dir", "hist", "--format", "bmf",
        ],
    )))
    .unwrap();
    let (name, measures) = bmf.as_object().unwrap().iter().next().unwrap();
    assert!(name.starts_with("sim."), "{bmf}");
    let v = &measures["tpot p50"];
    assert!(v["value"].as_f64().unwrap() > 0.0, "{bmf}");
    assert!(v["lower_value"].as_f64().unwrap() <= v["value"].as_f64().unwrap());
    assert!(v["upper_value"].as_f64().unwrap() >= v["value"].as_f64().unwrap());
    let gab: Value = serde_json::from_str(&ok(&ib(
        d,
        &[
            "history",
            "export",
            "steps",
            "--dir",
            "hist",
            "--format",
            "github-smaller-is-better",
        ],
    )))
    .unwrap();
    assert!(gab.to_string().contains("tpot p50"), "{gab}");
    let om = ok(&ib(
        d,
        &[
            "history",
            "export",
            "steps",
            "--dir",
            "hist",
            "--format",
            "openmetrics",
        ],
    ));
    assert!(om.trim_end().ends_with("# EOF"), "{om}");
    assert!(om.lines().any(|l| l.starts_with("# TYPE ")), "{om}");
    let csv = ok(&ib(
        d,
        &[
            "history", "export", "steps", "--dir", "hist", "--format", "csv",
        ],
    ));
    // A header, then one row per commit x point x metric.
    assert_eq!(csv.lines().count(), 1 + 48 * 2, "{csv}");

    // The page, in a browser.
    page(d);
}

/// `history report` of the history in `d/hist`, looked at in headless
/// Chromium: a chart per series, its line drawn, the change points marked,
/// nothing fetched from the network; screenshotted.
fn page(d: &Path) {
    let html_path = d.join("history.html");
    ok(&ib(
        d,
        &[
            "history",
            "report",
            "steps",
            "--dir",
            "hist",
            "-o",
            html_path.to_str().unwrap(),
            "--commit-url",
            "https://example.invalid/commit/",
        ],
    ));
    let html = std::fs::read_to_string(&html_path).unwrap();
    for bad in ["http://", "<script", "src=\"http", "@import"] {
        assert!(!html.contains(bad), "{bad} in the page");
    }
    let outside: Vec<&str> = html
        .match_indices("https://")
        .map(|(i, _)| &html[i..(i + 40).min(html.len())])
        .filter(|s| !s.starts_with("https://example.invalid/commit/"))
        .collect();
    assert!(outside.is_empty(), "{outside:?}");
    let Some(exe) = infer_bench_testkit::chromium::find_chromium() else {
        assert!(
            std::env::var_os("INFER_BENCH_CI").is_none(),
            "CI has chromium (Debian's package)"
        );
        eprintln!("SKIPPED the history page in Chromium: no chromium on PATH");
        return;
    };
    let probe = d.join("probe.html");
    std::fs::write(&probe, html.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let dom = infer_bench_testkit::chromium::chromium(
        &exe,
        &d.join("profile-1"),
        &["--dump-dom"],
        &probe,
    );
    let json = infer_bench_testkit::chromium::pre_text(&dom, "probe");
    let seen: Value = serde_json::from_str(&json).unwrap();
    eprintln!("the page as laid out: {seen}");
    let charts = seen["charts"].as_array().unwrap();
    assert_eq!(charts.len(), 2, "{seen}");
    for c in charts {
        assert!(c["w"].as_f64().unwrap() > 200.0, "{c}");
        assert!(c["lines"].as_u64().unwrap() >= 1, "{c}");
        assert!(c["changes"].as_u64().unwrap() >= 2, "a step and a fix: {c}");
    }
    let png = std::env::var_os("INFER_BENCH_SCREENSHOTS")
        .map_or_else(|| d.to_path_buf(), PathBuf::from)
        .join("history.png");
    infer_bench_testkit::chromium::chromium(
        &exe,
        &d.join("profile-2"),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1300,1400",
        ],
        &html_path,
    );
    assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
    eprintln!("screenshot: {}", png.display());
}

/// Appended to a copy of the page: each chart's size as laid out, its
/// drawn lines and change-point marks.
const PROBE: &str = r#"<script>
(function () {
  var out = [];
  document.querySelectorAll('svg').forEach(function (s) {
    var box = s.getBoundingClientRect();
    if (box.width < 50) return;
    var lines = 0;
    s.querySelectorAll('polyline, path').forEach(function (p) { if (p.getTotalLength && p.getTotalLength() > 1) lines++; });
    var changes = 0;
    s.querySelectorAll('g.ref title').forEach(function (t) { if (t.textContent.indexOf('change point at') === 0) changes++; });
    out.push({ w: box.width, h: box.height, lines: lines, changes: changes });
  });
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify({ charts: out });
  document.body.appendChild(pre);
})();
</script>"#;

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn import_rebuilds_the_levels_of_the_commits_that_reblessed_the_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    std::fs::create_dir_all(d.join("specs")).unwrap();
    let mut expected = Vec::new();
    for (i, slowdown) in [1.0, 1.3, 0.8].iter().enumerate() {
        let out = run(d, "imported", *slowdown, &format!("{i}"));
        std::fs::rename(d.join("imported.toml"), d.join("specs/imported.toml")).unwrap();
        ok(&ib(d, &["bless", out.to_str().unwrap()]));
        let b: Value = serde_json::from_str(
            &std::fs::read_to_string(d.join("baselines/imported.json")).unwrap(),
        )
        .unwrap();
        let p = b["points"].as_object().unwrap().values().next().unwrap();
        expected.push(p["merged"]["latency_ms"]["tpot"]["p50"].as_f64().unwrap());
        std::fs::remove_dir_all(&out).unwrap();
        git(d, &["add", "specs", "baselines"]);
        git(d, &["commit", "-qm", &format!("bless {i}")]);
        // A commit that does not touch the baseline is not a record.
        std::fs::write(d.join("README"), format!("{i}")).unwrap();
        git(d, &["add", "README"]);
        git(d, &["commit", "-qm", "docs"]);
    }
    let o = ib(d, &["history", "import"]);
    ok(&o);
    let files = walk(&d.join("bench-history/imported"));
    assert_eq!(files.len(), 3, "{files:?}");
    let log = Command::new("git")
        .args([
            "log",
            "--reverse",
            "--format=%H",
            "--",
            "baselines/imported.json",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    let shas: Vec<String> = String::from_utf8_lossy(&log.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(shas.len(), 3);
    let csv = ok(&ib(
        d,
        &["history", "export", "imported", "--format", "csv"],
    ));
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<String>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .filter(|r: &Vec<String>| r[col("metric")] == "tpot")
        .collect();
    assert_eq!(rows.len(), 3, "{csv}");
    for (row, (sha, want)) in rows.iter().zip(shas.iter().zip(&expected)) {
        assert_eq!(&row[col("commit")], sha);
        let got: f64 = row[col("value")].parse().unwrap();
        assert!(
            (got - want).abs() <= 1e-9 * want.abs(),
            "{sha}: {got} recorded, {want} blessed"
        );
    }
    // The slower commit's level is the slower one.
    assert!(expected[1] > expected[0] * 1.2 && expected[2] < expected[0] * 0.9);
    // Importing again changes nothing.
    let o = ib(d, &["history", "import"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already recorded"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_hostile_record_is_skipped_or_encoded_never_obeyed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let year = d.join("hist/evil/2026");
    std::fs::create_dir_all(&year).unwrap();
    for i in 0..12 {
        let rec = serde_json::json!({
            "format": "infer-bench-history", "version": 1, "metrics_version": 1,
            "spec": "evil", "commit": format!("c{i:02}"),
            "time": format!("2026-01-01T{i:02}:00:00Z"), "source": "run",
            "tool": {"name": "infer-bench", "version": "0"},
            "points": {
                "\u{1b}]0;pwned\u{7}\n::error::owned <script>alert(1)</script>": {
                    "hash": "h", "identity": {},
                    "metrics": {"tpot p50\u{1b}[2J": {
                        "metric": "tpot", "stat": "p50", "noise_pct": 1.0,
                        "value": if i < 6 { 10.0 } else { 20.0 } + (i % 3) as f64 * 0.01,
                        "runs": []
                    }}
                }
            }
        });
        std::fs::write(year.join(format!("c{i:02}.json")), rec.to_string()).unwrap();
    }
    // Not records of their place: skipped and named.
    std::fs::write(year.join("zz.json"), "{\"format\": \"infer-bench-history\"").unwrap();
    std::fs::write(year.join("big.json"), vec![b' '; 5 << 20]).unwrap();
    for format in ["table", "markdown", "json"] {
        let o = ib(
            d,
            &["history", "check", "--dir", "hist", "--format", format],
        );
        assert_eq!(o.status.code(), Some(1), "{format}");
        for (what, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text.contains('\u{1b}'),
                "{format} {what}: an escape: {text:?}"
            );
            assert!(!text.contains('\u{7}'), "{format} {what}: a bell");
            assert!(
                !text.lines().any(|l| l.trim_start().starts_with("::")),
                "{format} {what}: a workflow command: {text}"
            );
            // Markup matters where it is rendered (a comment, a summary),
            // and inside a code span it is text.
            if format == "markdown" {
                let outside_code: String = text.split('`').step_by(2).collect();
                assert!(
                    !outside_code.contains("<script"),
                    "{format} {what}: markup: {text}"
                );
            }
        }
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains("zz.json"), "{stderr}");
        assert!(stderr.contains("big.json"), "{stderr}");
    }
    let html = d.join("evil.html");
    ok(&ib(
        d,
        &[
            "history",
            "report",
            "evil",
            "--dir",
            "hist",
            "-o",
            html.to_str().unwrap(),
        ],
    ));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        !page.contains("<script"),
        "markup from a record in the page"
    );
    let o = ib(
        d,
        &[
            "history",
            "report",
            "evil",
            "--dir",
            "hist",
            "-o",
            "x.html",
            "--commit-url",
            "javascript:alert(1)//",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
}

/// A regression hidden by re-blessing: main measured one level for twelve
/// commits, then 10% slower for ten (a step it let through), then a
/// slower run still was blessed as the baseline. Against the baseline the
/// slower pull request is UNCHANGED; against the history (`against =
/// "history"`) it is REGRESSED against main's level since the step, and
/// the verdict says it would extend that drift. A point the history does
/// not hold is judged against the baseline, saying so.
#[test]
fn the_gate_against_history_sees_what_a_reblessed_baseline_hides() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let levels: Vec<f64> = (0..22).map(|i| if i < 12 { 1.0 } else { 1.1 }).collect();
    history(d, "gate", &levels, 5);
    let slow = run(d, "gate", 1.3, "pr");
    ok(&ib(d, &["bless", slow.to_str().unwrap()]));
    let o = ib(d, &["diff", slow.to_str().unwrap(), "--format", "json"]);
    let verdicts: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(1), "{verdicts}");
    let p = &verdicts["points"][0];
    assert_eq!(p["decision"], "REGRESSED", "{p}");
    let tpot = p["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["label"] == "tpot p50")
        .unwrap();
    let h = &tpot["history"];
    let m = tpot["m"].as_u64().unwrap();
    assert!(
        (8..=12).contains(&m),
        "main's commits since the step: {tpot}"
    );
    assert_eq!(h["commits"].as_u64(), Some(m), "{tpot}");
    assert!((index(&h["since"]) - 12).abs() <= 2, "{tpot}");
    let change = tpot["change"].as_f64().unwrap();
    assert!((0.1..0.3).contains(&change), "1.3 against 1.1: {tpot}");
    let drift = h["drift"]["relative"].as_f64().unwrap();
    assert!((0.05..0.15).contains(&drift), "the 10% step: {tpot}");
    assert_eq!(h["extends_drift"], true, "{tpot}");
    let notes = p["notes"].to_string();
    assert!(
        notes.contains("judged against main's level over"),
        "{notes}"
    );
    assert!(
        notes.contains("this change would extend that drift"),
        "{notes}"
    );
    let md = ib(d, &["diff", slow.to_str().unwrap(), "--format", "markdown"]);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("main's level over its last"), "{md}");
    assert!(md.contains("would extend that drift"), "{md}");

    // The same run judged by a spec that judges against the baseline:
    // the re-blessed baseline hides the slowdown.
    let text = std::fs::read_to_string(d.join("gate.toml")).unwrap();
    std::fs::write(
        d.join("plain.toml"),
        text.replace("against = \"history\"\n", ""),
    )
    .unwrap();
    let plain = d.join("out-plain");
    ok(&ib(
        d,
        &["run", "-q", "plain.toml", "--out", plain.to_str().unwrap()],
    ));
    ok(&ib(
        d,
        &[
            "bless",
            plain.to_str().unwrap(),
            "--baseline",
            "baselines/plain.json",
        ],
    ));
    let o = ib(
        d,
        &[
            "diff",
            plain.to_str().unwrap(),
            "--baseline",
            "baselines/plain.json",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    // Without history for the point: judged against the baseline, saying so.
    let empty = tempfile::tempdir().unwrap();
    std::fs::copy(d.join("gate.toml"), empty.path().join("gate.toml")).unwrap();
    std::fs::create_dir_all(empty.path().join("baselines")).unwrap();
    std::fs::copy(
        d.join("baselines/gate.json"),
        empty.path().join("baselines/gate.json"),
    )
    .unwrap();
    let o = ib(
        empty.path(),
        &["diff", slow.to_str().unwrap(), "--format", "json"],
    );
    let verdicts: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0), "{verdicts}");
    let notes = verdicts["points"][0]["notes"].to_string();
    assert!(
        notes.contains("judged against the baseline: the history holds 0 comparable commit(s)"),
        "{notes}"
    );
}
