//! `infer-bench report` end to end: snapshots of the Markdown, CSV and
//! JSON reports of committed simulator results; capacity at SLO on a fresh
//! simulator sweep whose answer the performance model predicts; the HTML
//! report rendered in headless Chromium (skipped, saying so, where no
//! Chromium is installed); the command line's errors; and an `#[ignore]`d
//! measurement of rendering 200 points. Commands run in-process through
//! the CLI parser and `app::execute`, as `main` runs them.

use std::path::{Path, PathBuf};

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use clap::Parser as _;
use infer_bench::analysis::{Analysis, Capacity, Knee, LoadKind, Source, label_sources};
use infer_bench::error::{Error, Outcome};
use infer_bench::export::report;
use infer_bench::results::Results;

fn fixture(name: &str) -> PathBuf {
    Path::new("tests/fixtures/reports").join(name)
}

fn read(paths: &[PathBuf]) -> Vec<Source> {
    label_sources(
        paths
            .iter()
            .map(|p| {
                let (r, file) = Results::read(p).unwrap();
                (file, r)
            })
            .collect(),
    )
}

fn fixtures() -> Vec<Source> {
    read(&[fixture("quickstart.json"), fixture("rate-sweep.json")])
}

/// A fresh, empty directory under Cargo's scratch space for tests.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `infer-bench ARGS...` in-process: the CLI parser, then the command.
fn cli(args: &[&str]) -> Result<Outcome, Error> {
    let cli = infer_bench::cli::Cli::try_parse_from(
        std::iter::once("infer-bench").chain(args.iter().copied()),
    )
    .unwrap();
    infer_bench::app::execute(cli.command)
}

// ---------------------------------------------------------------- snapshots

#[test]
fn markdown_report_snapshot() {
    insta::assert_snapshot!(report::markdown::render(&fixtures()));
}

#[test]
fn csv_report_snapshot() {
    insta::assert_snapshot!(report::csv::render(&fixtures()));
}

#[test]
fn json_analysis_snapshot() {
    insta::assert_snapshot!(report::json(&fixtures()));
}

#[test]
fn csv_has_one_row_per_point_and_run_under_the_documented_header() {
    let s = fixtures();
    let csv = report::csv::render(&s);
    let mut lines = csv.lines();
    assert_eq!(lines.next().unwrap(), report::csv::COLUMNS.join(","));
    let runs: usize = s
        .iter()
        .flat_map(|s| &s.results.points)
        .map(|p| p.runs.len().max(1))
        .sum();
    assert_eq!(lines.clone().count(), runs);
    // Every row has every column (no field here holds a comma).
    for l in lines {
        assert_eq!(l.split(',').count(), report::csv::COLUMNS.len(), "{l}");
    }
}

#[test]
fn fixture_sweeps_are_read_as_the_numbers_say() {
    let s = fixtures();
    let a = Analysis::of(&s);
    let names: Vec<&str> = a.sweeps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "quickstart: precision=bf16",
            "quickstart: precision=fp8",
            "rate-sweep"
        ]
    );
    // The rate sweep saturates at 128/s: it fails its SLOs there and the
    // throughput gained from 64/s to 128/s is a fraction of the initial slope.
    let rate = &a.sweeps[2];
    assert_eq!(rate.load_kind, LoadKind::Rate);
    let Capacity::Between {
        capacity,
        last_pass,
        first_fail,
        ..
    } = &rate.capacity
    else {
        panic!("{:?}", rate.capacity)
    };
    assert_eq!((last_pass.load, first_fail.load), (64.0, 128.0));
    assert!(64.0 < *capacity && *capacity < 128.0);
    assert!(
        matches!(&rate.knee, Knee::At { load, .. } if *load == 64.0),
        "{:?}",
        rate.knee
    );
    // Every frontier point is measured and undominated.
    for f in a.points.iter().filter(|p| p.pareto) {
        let (x, y) = (
            f.output_tokens_per_s_per_user.unwrap(),
            f.output_tokens_per_s_per_gpu,
        );
        assert!(!a.points.iter().any(|o| {
            o.output_tokens_per_s_per_user.is_some_and(|ox| ox > x)
                && o.output_tokens_per_s_per_gpu > y
        }));
    }
    let best = a.best.as_ref().unwrap();
    let row = a.points.iter().find(|p| p.id == best.point).unwrap();
    assert_eq!(row.slo_pass, Some(true));
}

#[test]
fn files_of_the_same_spec_get_distinct_labels() {
    let s = read(&[fixture("quickstart.json"), fixture("quickstart.json")]);
    let labels: Vec<&str> = s.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(
        labels,
        ["quickstart (reports) #1", "quickstart (reports) #2"]
    );
    let a = Analysis::of(&s);
    assert_eq!(a.sweeps.len(), 4);
    assert!(a.points[0].label.starts_with("quickstart (reports) #1: "));
}

#[test]
fn html_escapes_text_from_results() {
    let mut s = read(&[fixture("quickstart.json")]);
    let r = &mut s[0].results;
    r.spec
        .source
        .push_str("\n# </pre><script>alert('spec')</script>\n");
    r.environment
        .facts
        .insert("cpu".into(), "<img src=x onerror=alert(1)>".into());
    r.points[0].slug = "a<b>&\"c\"".into();
    let s = label_sources(vec![(s[0].path.clone(), s.remove(0).results)]);
    let html = report::html::render(&s);
    assert!(!html.contains("<script"), "no script, escaped or not");
    assert!(html.contains("&lt;/pre&gt;&lt;script&gt;alert(&#39;spec&#39;)&lt;/script&gt;"));
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(html.contains("a&lt;b&gt;&amp;&quot;c&quot;"));
}

#[test]
fn html_is_self_contained() {
    let html = report::html::render(&fixtures());
    for needle in [
        "<script",
        "<link",
        "<img",
        "@import",
        "src=\"http",
        "href=\"http",
    ] {
        assert!(!html.contains(needle), "{needle}");
    }
    // url() only for clip paths within the page.
    assert!(
        html.match_indices("url(")
            .all(|(i, _)| html[i..].starts_with("url(#"))
    );
    assert!(html.contains("@media print"));
    // Both load kinds get their charts; every chart is an inline SVG.
    assert!(html.contains("id=\"load-concurrency\""));
    assert!(html.contains("id=\"load-rate\""));
    assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
    assert!(html.matches("<svg").count() >= 5 * 2 + 1 + 4);
}

#[test]
fn failed_points_and_empty_files_still_make_reports() {
    use infer_bench_results::{PointStatus, Stats};
    let mut s = read(&[fixture("rate-sweep.json"), fixture("quickstart.json")]);
    // The rate sweep's 64/s point could not be measured.
    let p = &mut s[0].results.points[2];
    p.status = PointStatus::Failed;
    p.failure = Some("the server closed the connection <before> answering".into());
    p.valid = false;
    p.runs.clear();
    p.merged = Stats::default();
    p.histograms.clear();
    p.slo.clear();
    p.slo_pass = None;
    p.cost = None;
    // The quickstart's file finished nothing.
    s[1].results.points.clear();
    s[1].results.complete = false;
    let a = Analysis::of(&s);
    assert_eq!(a.sweeps.len(), 1);
    let Capacity::Between {
        capacity,
        first_fail,
        binding,
        note,
        ..
    } = &a.sweeps[0].capacity
    else {
        panic!("{:?}", a.sweeps[0].capacity)
    };
    assert_eq!(
        (*capacity, first_fail.load, binding.is_none()),
        (32.0, 64.0, true)
    );
    assert!(note.as_deref().unwrap().contains("could not be measured"));
    let html = report::html::render(&s);
    assert!(html.contains("the server closed the connection &lt;before&gt; answering"));
    assert!(html.contains("FAILED"));
    assert!(html.ends_with("</html>\n"));
    let md = report::markdown::render(&s);
    assert!(md.contains("| FAILED |"), "{md}");
    let csv = report::csv::render(&s);
    let failed_row = csv.lines().find(|l| l.contains(",failed,")).unwrap();
    assert_eq!(failed_row.split(',').count(), report::csv::COLUMNS.len());
    serde_json::from_str::<serde_json::Value>(&report::json(&s)).unwrap();

    let empty = read(&[fixture("quickstart.json")]);
    let mut empty = empty;
    empty[0].results.points.clear();
    let html = report::html::render(&empty);
    assert!(html.contains("0 points"));
    assert!(report::markdown::render(&empty).contains("0 points"));
    assert_eq!(report::csv::render(&empty).lines().count(), 1);
}

#[test]
fn no_telemetry_no_telemetry_section() {
    // Drawing telemetry is tested beside the HTML exporter, on JSON (and on
    // a sim run's modelled GPUs in tests/dcgm.rs): these fixtures have none.
    assert!(!report::html::render(&fixtures()).contains("id=\"telemetry\""));
}

#[test]
fn no_search_no_capacity_search_section_or_link() {
    // The nav links only to sections there are (tests/search.rs checks
    // the link where a search ran).
    let html = report::html::render(&fixtures());
    assert!(html.contains("<nav>"), "the report has a nav");
    assert!(!html.contains("capacity-search"));
}

// ------------------------------------------------- a fresh simulator sweep

/// The capacity sweep, run once per test binary.
struct Fresh {
    run_dir: PathBuf,
    threshold_ms: f64,
}

/// Steady-state TPOT of a closed loop of `c` requests with `n_in`-token
/// prompts and `n_out` output tokens: each step decodes `c` sequences and,
/// since a slot's request ends every `n_out` steps, prefills `c / n_out`
/// prompts on average.
fn predicted_tpot_ms(
    perf: &infer_bench::sim::perf::PerfModel,
    c: u32,
    n_in: u32,
    n_out: u32,
) -> f64 {
    use infer_bench::sim::perf::{PrefillChunk, StepBatch};
    let step = |prefills: usize| {
        perf.step_time(&StepBatch {
            decode_context_tokens: vec![n_in + n_out / 2; c as usize],
            prefill_chunks: vec![
                PrefillChunk {
                    chunk_tokens: n_in,
                    start_context_tokens: 0,
                    encoder_tokens: 0,
                };
                prefills
            ],
            reuses_schedule: false,
        })
    };
    let f = f64::from(c) / f64::from(n_out);
    let lo = f.floor();
    1000.0 * ((1.0 - (f - lo)) * step(lo as usize) + (f - lo) * step(lo as usize + 1))
}

fn fresh() -> &'static Fresh {
    static FRESH: OnceLock<Fresh> = OnceLock::new();
    FRESH.get_or_init(|| {
        let template_path = fixture("tpot-capacity.toml");
        let spec = infer_bench::spec::load(&template_path).unwrap();
        let plan = infer_bench::plan::Plan::build(&spec).unwrap();
        let cfg = &plan.points[0].config;
        let arch = cfg.model.architecture.as_ref().unwrap();
        let engine = infer_bench::sim::profile::resolve(
            cfg.target.sim.as_ref().unwrap(),
            arch,
            infer_bench::spec::DType::Bf16,
            None,
        )
        .unwrap();
        let perf =
            infer_bench::sim::perf::PerfModel::new(&engine, arch, infer_bench::spec::DType::Bf16)
                .unwrap();
        // The spec's prompts are 512 tokens; outputs 16 to 48, 32 on average.
        let (lo, hi) = (
            predicted_tpot_ms(&perf, 8, 512, 32),
            predicted_tpot_ms(&perf, 64, 512, 32),
        );
        assert!(
            hi > 2.0 * lo,
            "the model should separate c=8 and c=64: {lo} vs {hi}"
        );
        let threshold_ms = ((lo * hi).sqrt() * 10.0).round() / 10.0;
        eprintln!(
            "model: TPOT {lo:.2} ms at c=8, {hi:.2} ms at c=64; SLO tpot p50 < {threshold_ms} ms"
        );
        let dir = scratch("report-capacity");
        let text = std::fs::read_to_string(&template_path).unwrap().replace(
            "tpot = \"p50 < 1000ms\"",
            &format!("tpot = \"p50 < {threshold_ms}ms\""),
        );
        assert!(text.contains(&format!("{threshold_ms}ms")));
        let spec_path = dir.join("tpot-capacity.toml");
        std::fs::write(&spec_path, text).unwrap();
        let run_dir = dir.join("run");
        let out = cli(&[
            "run",
            spec_path.to_str().unwrap(),
            "--out",
            run_dir.to_str().unwrap(),
        ]);
        // Exit code 1: an SLO failed, as it should at c=64.
        assert!(matches!(out, Ok(Outcome(0 | 1))), "the run failed: {out:?}");
        Fresh {
            run_dir,
            threshold_ms,
        }
    })
}

#[test]
fn capacity_at_slo_is_bracketed_where_the_model_puts_it() {
    let f = fresh();
    let s = read(std::slice::from_ref(&f.run_dir));
    let a = Analysis::of(&s);
    assert_eq!(a.sweeps.len(), 1);
    let sweep = &a.sweeps[0];
    assert_eq!(sweep.load_kind, LoadKind::Concurrency);
    assert_eq!(sweep.loads, vec![2.0, 8.0, 64.0]);
    for (id, load) in sweep.points.iter().zip(&sweep.loads) {
        let p = s[0].results.points.iter().find(|p| &p.id == id).unwrap();
        eprintln!(
            "measured: c={load} TPOT p50 {:.2} ms, SLO {}",
            infer_bench::analysis::latency_ms(p, infer_bench::metric::Metric::Tpot, 50.0).unwrap(),
            if p.slo_pass == Some(true) {
                "pass"
            } else {
                "FAIL"
            }
        );
    }
    let Capacity::Between {
        capacity,
        last_pass,
        first_fail,
        binding,
        note,
    } = &sweep.capacity
    else {
        panic!("expected a bracketed capacity, got {:?}", sweep.capacity)
    };
    eprintln!("capacity at SLO: c={capacity:.1}");
    assert_eq!(last_pass.load, 8.0);
    assert_eq!(first_fail.load, 64.0);
    assert_eq!(&last_pass.point, &sweep.points[1]);
    assert_eq!(&first_fail.point, &sweep.points[2]);
    assert!(
        8.0 < *capacity && *capacity < 64.0,
        "interpolated capacity {capacity} is outside (8, 64)"
    );
    let b = binding.as_ref().expect("the TPOT SLO binds");
    assert_eq!(b.metric, "tpot");
    assert!((b.threshold - f.threshold_ms).abs() < 1e-9);
    assert!(b.value_at_last_pass < b.threshold && b.value_at_first_fail >= b.threshold);
    // Linear interpolation on the binding metric, recomputed.
    let expected = 8.0
        + (b.threshold - b.value_at_last_pass) / (b.value_at_first_fail - b.value_at_last_pass)
            * 56.0;
    assert!((capacity - expected).abs() < 1e-9);
    assert!(note.is_none(), "{note:?}");
}

// --------------------------------------------------------------- chromium

use infer_bench_testkit::chromium::{chromium, find_chromium};

/// Appended to a copy of the report: measures every chart as laid out
/// and writes the figures into the page, for `--dump-dom` to return.
const PROBE: &str = r#"<script>
(function () {
  var out = [];
  document.querySelectorAll('svg.chart').forEach(function (s) {
    var box = s.getBoundingClientRect();
    var lines = 0, marks = 0;
    s.querySelectorAll('polyline').forEach(function (p) { if (p.getTotalLength() > 1) lines++; });
    s.querySelectorAll('circle').forEach(function (c) { if (c.getBBox().width > 0) marks++; });
    s.querySelectorAll('polygon').forEach(function (g) { if (g.getBBox().width > 0 && g.getAttribute('fill') !== 'none') marks++; });
    out.push({ title: s.querySelector('title').textContent, w: box.width, h: box.height, lines: lines, marks: marks });
  });
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"#;

/// Appended after `PROBE`: what each picture and the page say, as laid
/// out: every chart's scales, INVALID markers, label boxes that overlap;
/// the verdict badge, the radar or the key-metrics table, ramp step rows.
const PAGE_PROBE: &str = r#"<script>
(function () {
  var charts = [];
  document.querySelectorAll('svg.chart:not(.radar)').forEach(function (s) {
    var boxes = [];
    s.querySelectorAll('text.lbl').forEach(function (t) { boxes.push([t.getBoundingClientRect(), t.textContent]); });
    var overlaps = [];
    for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
      var a = boxes[i][0], b = boxes[j][0];
      var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1) overlaps.push(boxes[i][1] + ' / ' + boxes[j][1]);
    }
    var invalid = 0, invalidTips = 0;
    s.querySelectorAll('circle.invalid').forEach(function (c) {
      if (c.getBBox().width > 0 && c.getAttribute('fill') === '#ffffff') invalid++;
      var t = c.querySelector('title');
      if (t && t.textContent.indexOf('INVALID: ') >= 0) invalidTips++;
    });
    var ticks = [];
    s.querySelectorAll('text.xtick').forEach(function (t) { ticks.push(t.textContent); });
    charts.push({ title: s.querySelector('title').textContent, yscale: s.getAttribute('data-yscale'),
      labels: boxes.length, overlaps: overlaps, invalid: invalid, invalid_tips: invalidTips,
      invalid_key: s.querySelectorAll('circle.invalid-key').length, xticks: ticks });
  });
  var badge = document.getElementById('verdict-badge');
  var page = { charts: charts, badge: badge ? badge.textContent : null,
    radar: document.querySelectorAll('svg.radar').length,
    key_metrics: document.querySelectorAll('#key-metrics').length,
    step_rows: document.querySelectorAll('tr.step').length,
    best: (document.querySelector('#summary') || document.body).textContent.indexOf('drawn from INVALID points') >= 0 };
  var pre = document.createElement('pre');
  pre.id = 'page-probe';
  pre.textContent = JSON.stringify(page);
  document.body.appendChild(pre);
})();
</script>"#;

/// Renders `sources` as HTML in `dir`, runs both probes in headless
/// Chromium and screenshots the page full length; returns the page probe.
fn probe_page(exe: &Path, dir: &Path, name: &str, sources: &[Source]) -> serde_json::Value {
    let html = report::html::render(sources);
    let page = dir.join(format!("{name}.html"));
    std::fs::write(&page, &html).unwrap();
    let probe_path = dir.join(format!("{name}-probe.html"));
    std::fs::write(
        &probe_path,
        html.replace("</body>", &format!("{PAGE_PROBE}</body>")),
    )
    .unwrap();
    let dom = chromium(
        exe,
        &dir.join(format!("profile-{name}")),
        &["--dump-dom"],
        &probe_path,
    );
    let json = infer_bench_testkit::chromium::pre_text(&dom, "page-probe");
    // The page's full height, for a full-page screenshot.
    let png = dir.join(format!("{name}.png"));
    chromium(
        exe,
        &dir.join(format!("profile-{name}-shot")),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1400,4000",
        ],
        &page,
    );
    eprintln!("screenshot: {}", png.display());
    serde_json::from_str(&json).unwrap()
}

/// Labels that overlap in any chart of a probed page.
fn overlapping_labels(page: &serde_json::Value) -> Vec<String> {
    page["charts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| {
            c["overlaps"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |o| format!("{}: {}", c["title"], o))
        })
        .collect()
}

fn chart<'a>(page: &'a serde_json::Value, title: &str) -> &'a serde_json::Value {
    page["charts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["title"].as_str().unwrap().starts_with(title))
        .unwrap_or_else(|| panic!("no chart {title}"))
}

/// Runs a committed spec on the simulator in virtual time.
fn run_virtual(spec: &str, dir: &Path) -> PathBuf {
    let out = dir.join(spec.trim_end_matches(".toml"));
    let res = cli(&[
        "run",
        &format!("specs/{spec}"),
        "--virtual",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(matches!(res, Ok(Outcome(0 | 1))), "{spec}: {res:?}");
    out
}

#[test]
fn html_reports_of_each_kind_of_sweep_say_the_truth_in_chromium() {
    let Some(exe) = find_chromium() else {
        eprintln!(
            "SKIPPED html_reports_of_each_kind_of_sweep_say_the_truth_in_chromium: no chromium on PATH"
        );
        return;
    };
    let dir = scratch("report-kinds");

    // A concurrency sweep without SLOs: one configuration.
    let conc = read(&[run_virtual("concurrency-sweep.toml", &dir)]);
    let page = probe_page(&exe, &dir, "concurrency-sweep", &conc);
    assert_eq!(page["badge"], "no SLOs declared", "{page}");
    assert_eq!(page["radar"], 0, "no radar for one configuration");
    assert_eq!(page["key_metrics"], 1);
    assert!(
        overlapping_labels(&page).is_empty(),
        "{:?}",
        overlapping_labels(&page)
    );

    // A rate sweep with SLOs: the committed results, whose points are all
    // INVALID (the client was late), and a fresh run.
    let rate = read(&[fixture("rate-sweep.json")]);
    let page = probe_page(&exe, &dir, "rate-sweep-invalid", &rate);
    let thr = chart(&page, "Output throughput");
    assert_eq!(thr["invalid"], 4, "{thr}");
    assert_eq!(thr["invalid_tips"], 4, "{thr}");
    assert_eq!(thr["invalid_key"], 1, "{thr}");
    assert_eq!(page["best"], true, "the headline says INVALID: {page}");
    assert!(page["badge"].as_str().unwrap().ends_with(" pass"), "{page}");
    let fresh_rate = read(&[run_virtual("rate-sweep.toml", &dir)]);
    let page = probe_page(&exe, &dir, "rate-sweep", &fresh_rate);
    let a = Analysis::of(&fresh_rate);
    let ttft: Vec<f64> = (0..a.points.len())
        .filter_map(|i| {
            infer_bench::analysis::latency_ms(
                a.point(&fresh_rate, i),
                infer_bench::metric::Metric::Ttft,
                99.0,
            )
        })
        .chain([300.0, 2000.0])
        .collect();
    let span = ttft.iter().copied().fold(0.0, f64::max)
        / ttft.iter().copied().fold(f64::INFINITY, f64::min);
    eprintln!("rate sweep: TTFT and its thresholds span a factor of {span:.0}");
    let expected = if span >= 30.0 { "log" } else { "linear" };
    assert_eq!(chart(&page, "Time to first token")["yscale"], expected);
    assert!(
        overlapping_labels(&page).is_empty(),
        "{:?}",
        overlapping_labels(&page)
    );
    let itl = chart(&page, "Inter-token latency distribution");
    let ticks: Vec<&str> = itl["xticks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let mut uniq = ticks.clone();
    uniq.dedup();
    assert_eq!(ticks, uniq, "duplicate percentile ticks");

    // A ramp: a row per step, and its curves.
    let ramp = read(&[run_virtual("ramp.toml", &dir)]);
    let steps = ramp[0].results.points[0].steps.len();
    assert_eq!(steps, 24);
    let page = probe_page(&exe, &dir, "ramp", &ramp);
    assert_eq!(page["step_rows"], steps, "{page}");
    chart(&page, "Output throughput by step");
    chart(&page, "Time to first token by step");
    assert!(
        overlapping_labels(&page).is_empty(),
        "{:?}",
        overlapping_labels(&page)
    );
    let md = report::markdown::render(&ramp);
    assert!(md.contains("## Ramp steps"), "{md}");
    let csv = report::csv::render(&ramp);
    assert_eq!(
        csv.lines().filter(|l| !l.ends_with(',')).count() - 1,
        steps,
        "one CSV row per step, its step set"
    );
    let summary = infer_bench::export::summary::table(&ramp[0].results);
    assert!(summary.contains("ramp steps"), "{summary}");
    let step_lines = summary
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|w| w.starts_with("c="))
        })
        .count();
    assert_eq!(step_lines, steps, "{summary}");
}

#[test]
fn html_report_renders_its_charts_in_headless_chromium() {
    let Some(exe) = find_chromium() else {
        eprintln!(
            "SKIPPED html_report_renders_its_charts_in_headless_chromium: no chromium on PATH \
             (install Debian's `chromium` package, or set CHROMIUM=/path/to/chrome)"
        );
        return;
    };
    let f = fresh();
    let dir = scratch("report-html");
    let html_path = dir.join("report.html");
    // The quickstart's results and the fresh sweep, side by side.
    let out = cli(&[
        "report",
        fixture("quickstart.json").to_str().unwrap(),
        f.run_dir.to_str().unwrap(),
        "-o",
        html_path.to_str().unwrap(),
    ]);
    assert!(matches!(out, Ok(Outcome(0))), "{out:?}");
    let html = std::fs::read_to_string(&html_path).unwrap();
    let probe_path = dir.join("probe.html");
    std::fs::write(
        &probe_path,
        html.replace("</body>", &format!("{PROBE}</body>")),
    )
    .unwrap();

    let dom = chromium(&exe, &dir.join("profile-1"), &["--dump-dom"], &probe_path);
    let json = infer_bench_testkit::chromium::pre_text(&dom, "probe");
    let charts: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let title = |c: &serde_json::Value| c["title"].as_str().unwrap().to_string();
    let titles: Vec<String> = charts.iter().map(title).collect();
    eprintln!("{} charts: {titles:?}", charts.len());
    // 5 per load kind (one kind here), the Pareto chart, 4 percentile plots.
    assert!(charts.len() >= 10, "{titles:?}");
    for c in &charts {
        assert!(
            c["w"].as_f64().unwrap() > 300.0 && c["h"].as_f64().unwrap() > 200.0,
            "{c}"
        );
        assert!(
            c["lines"].as_u64().unwrap() + c["marks"].as_u64().unwrap() > 0,
            "empty chart {c}"
        );
    }
    for t in [
        "Output throughput",
        "Goodput",
        "Time per output token",
        "TPOT distribution",
    ] {
        let c = charts
            .iter()
            .find(|c| title(c) == t)
            .unwrap_or_else(|| panic!("no {t} chart"));
        assert!(c["lines"].as_u64().unwrap() >= 2, "{c}");
    }
    let pareto = charts
        .iter()
        .find(|c| title(c).starts_with("Output tokens/s per GPU"))
        .unwrap();
    // 6 quickstart points and 3 fresh ones, plus legend swatches.
    assert!(pareto["marks"].as_u64().unwrap() >= 9, "{pareto}");
    // The DOM as Chromium holds it: every chart an <svg> with drawn children.
    let svgs: Vec<&str> = dom.split("<svg").skip(1).collect();
    assert!(svgs.len() >= 10);
    assert!(svgs.iter().all(|s| {
        let body = &s[..s.find("</svg>").unwrap()];
        body.contains("<path") && (body.contains("<polyline") || body.contains("<circle"))
            || body.contains("Radar chart") && body.contains("fill-opacity")
    }));
    // The executive summary's radar: one filled polygon per configuration.
    let radar = charts
        .iter()
        .find(|c| {
            dom.contains("Radar chart of the key metrics")
                && c["marks"].as_u64().unwrap() > 0
                && c["lines"].as_u64().unwrap() == 0
        })
        .expect("the radar chart is drawn");
    assert!(radar["marks"].as_u64().unwrap() >= 2, "{radar}");

    let png = dir.join("report.png");
    chromium(
        &exe,
        &dir.join("profile-2"),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1400,3000",
        ],
        &html_path,
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        bytes.len() > 50_000,
        "a screenshot of charts is not tiny: {}",
        bytes.len()
    );
    eprintln!("screenshot: {}", png.display());

    // The two-file comparison: labels apart, the radar compares the two.
    let sources = read(&[fixture("quickstart.json"), f.run_dir.clone()]);
    let page = probe_page(&exe, &dir, "two-files", &sources);
    assert!(
        overlapping_labels(&page).is_empty(),
        "{:?}",
        overlapping_labels(&page)
    );
    assert_eq!(page["radar"], 1);
    assert_eq!(page["key_metrics"], 0);
    let thr = chart(&page, "Output throughput");
    // The quickstart's bf16 c=128 point is INVALID: grey, with its reason.
    assert!(thr["invalid"].as_u64().unwrap() >= 1, "{thr}");
    assert_eq!(thr["invalid_tips"], thr["invalid"], "{thr}");
    let badge = page["badge"].as_str().unwrap();
    let v: Vec<&str> = badge.split(' ').collect();
    assert_eq!((v.len(), v[1], v[3]), (4, "/", "pass"), "{badge}");
}

// ---------------------------------------------------------- command line

#[test]
fn report_writes_the_chosen_format_to_a_file() {
    let dir = scratch("report-cli");
    let rate = fixture("rate-sweep.json");
    let rate = rate.to_str().unwrap();
    for (format, check) in [
        (
            "html",
            (|t: &str| t.starts_with("<!DOCTYPE html>")) as fn(&str) -> bool,
        ),
        ("md", |t| t.starts_with("# Benchmark report: rate-sweep")),
        ("csv", |t| t.starts_with("source,spec,point_id,")),
        ("json", |t| {
            let v: serde_json::Value = serde_json::from_str(t).unwrap();
            v["format"] == "infer-bench-analysis"
                && v["sweeps"][0]["capacity"]["outcome"] == "between"
        }),
    ] {
        let out = dir.join(format!("r.{format}"));
        let res = cli(&[
            "report",
            rate,
            "--format",
            format,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(matches!(res, Ok(Outcome(0))), "{res:?}");
        assert!(check(&std::fs::read_to_string(&out).unwrap()), "{format}");
    }
    // A run directory reads as its results.json.
    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(fixture("rate-sweep.json"), run.join("results.json")).unwrap();
    let out = dir.join("dir.md");
    let res = cli(&[
        "report",
        run.to_str().unwrap(),
        "--format",
        "md",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(matches!(res, Ok(Outcome(0))), "{res:?}");
}

#[test]
fn report_errors_are_one_sentence_with_a_hint() {
    let err = cli(&["report", "no/such/run"]).unwrap_err();
    assert_eq!(infer_bench::error::exit_code(&err), 2);
    let text = err.to_string();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with("error: no results at no/such/run: "),
        "{text}"
    );
    assert!(text.contains("infer-bench run SPEC --out DIR"), "{text}");

    let err = cli(&["report", "tests/fixtures/reports/rate-sweep.toml"]).unwrap_err();
    assert_eq!(infer_bench::error::exit_code(&err), 2);
    assert!(
        err.to_string().contains("rate-sweep.toml: not JSON"),
        "{err}"
    );
}

// ------------------------------------------------------------ measurement

/// `cargo test --release --test report -- --ignored --nocapture
/// render_200_points`: how long each format takes for 200 points (40
/// sweeps of 5 loads), the quickstart's points reused with new axes.
#[test]
#[ignore]
fn render_200_points() {
    use infer_bench::spec::Level;
    let (mut r, file) = Results::read(&fixture("quickstart.json")).unwrap();
    let base = r.points.clone();
    r.points = (0..200)
        .map(|i| {
            let mut p = base[i % base.len()].clone();
            let c = [4, 8, 16, 32, 64][i % 5];
            p.axes.insert("concurrency".into(), c.to_string());
            p.axes
                .insert("precision".into(), format!("config-{:02}", i / 5));
            p.config.load.level = Level::Concurrency(c);
            p.id = format!("{}-{i}", p.id);
            p
        })
        .collect();
    let dir = scratch("report-200");
    let big = dir.join("results.json");
    r.write(&big).unwrap();
    let s = label_sources(vec![(file, r)]);
    let time = |name: &str, f: &dyn Fn() -> String| {
        let mut best = Duration::MAX;
        let mut len = 0;
        for _ in 0..5 {
            let t = Instant::now();
            len = f().len();
            best = best.min(t.elapsed());
        }
        eprintln!(
            "{name}: {:.1} ms for 200 points ({} KiB)",
            best.as_secs_f64() * 1e3,
            len / 1024
        );
        best
    };
    let html = time("html", &|| report::html::render(&s));
    time("markdown", &|| report::markdown::render(&s));
    time("csv", &|| report::csv::render(&s));
    time("json", &|| report::json(&s));
    assert_eq!(Analysis::of(&s).sweeps.len(), 40);
    // End to end: read the 200-point results file, analyse, render, write.
    let out = dir.join("report.html");
    let t = Instant::now();
    cli(&["report", big.to_str().unwrap(), "-o", out.to_str().unwrap()]).unwrap();
    eprintln!(
        "report command, html, 200 points from a {} KiB results file: {:.1} ms",
        std::fs::metadata(&big).unwrap().len() / 1024,
        t.elapsed().as_secs_f64() * 1e3
    );
    eprintln!("html under a second: {}", html < Duration::from_secs(1));
}

/// The results and baseline files that the results crate keeps from
/// earlier versions load into the tool's own typed configuration.
#[test]
fn files_from_earlier_versions_load_with_their_configuration() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/results/tests/fixtures");
    let (r, _) = infer_bench::results::Results::read(&dir.join("results-v1.json")).unwrap();
    assert_eq!(r.points[0].config.model.name, "llama-8b");
    let b = infer_bench::judge::baseline::Baseline::read(&dir.join("baseline-v1.json")).unwrap();
    assert!(b.points.values().all(|p| p.config.model.name == "llama-8b"));
}
