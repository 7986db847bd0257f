//! Capacity search end to end, on the simulator in virtual time: a search
//! finds the rate at which TTFT p99 crosses its SLO within the stated
//! precision of what a fine-grained sweep of the same spec shows, in fewer
//! probes than the sweep has points; every probe is a point of its own
//! (the same ID as the sweep's point at that rate, with the same verdict);
//! the answer is in the results, the summary and the reports; and the
//! judge compares capacities, flagging a lower one.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn infer_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = infer_bench(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The spec: one simulated server, TTFT p99 as the SLO; `load` ends the
/// `[load]` table (a search or nothing), `matrix` follows.
fn spec(ttft: &str, load: &str, matrix: &str) -> String {
    spec_on("", ttft, load, matrix)
}

/// `spec` on a simulator with `sim` further keys of `[targets.sim.sim]`
/// (`slowdown = 1.3`: a slower server, the same point IDs).
fn spec_on(sim: &str, ttft: &str, load: &str, matrix: &str) -> String {
    format!(
        r#"
name = "search"
seed = 7
[targets.sim]
kind = "sim"
gpu = "a100-80gb"
sim = {{ clock = "virtual"{sim} }}
[models.m]
preset = "llama-3.1-8b"
[workloads.w]
input_tokens = {{ dist = "lognormal", median = 1024, sigma = 0.5, min = 64, max = 8192 }}
output_tokens = {{ dist = "uniform", min = 128, max = 384 }}
ignore_eos = true
[load]
arrival = "poisson"
warmup_requests = 50
requests = 600
timeouts = {{ first_token = "5m", idle = "5m", total = "60m" }}
{load}
{matrix}
[slo]
ttft = "p99 < {ttft}"
"#
    )
}

/// Runs a spec, which must exit with `code`; the results and the summary
/// printed.
fn run_expecting(dir: &Path, name: &str, text: &str, code: i32) -> (Value, String) {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    let out = dir.join(name);
    let o = infer_bench(&[
        "run",
        path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(code),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let results = std::fs::read_to_string(out.join("results.json")).unwrap();
    (
        serde_json::from_str(&results).unwrap(),
        String::from_utf8(o.stdout).unwrap(),
    )
}

/// Runs a spec that must pass: a search's failing probes do not fail a run.
fn run(dir: &Path, name: &str, text: &str) -> (Value, String) {
    run_expecting(dir, name, text, 0)
}

fn rate_of(p: &Value) -> f64 {
    p["config"]["load"]["level"]["rate"]
        .as_str()
        .unwrap()
        .trim_end_matches("/s")
        .parse()
        .unwrap()
}

fn passes(p: &Value) -> bool {
    p["valid"] == true && p["slo_pass"] == true
}

#[test]
fn a_search_finds_what_a_fine_sweep_shows_in_fewer_probes() {
    let dir = tempfile::tempdir().unwrap();
    let ttft = "1s";
    let (search, summary) = run(
        dir.path(),
        "search",
        &spec(
            ttft,
            r#"search = { over = "rate", from = "1/s", to = "32/s", precision = "5%" }"#,
            "",
        ),
    );
    let s = &search["searches"][0];
    assert_eq!(s["outcome"], "found", "{s:#}");
    let (lo, hi) = (
        s["last_pass"]["level"].as_f64().unwrap(),
        s["first_fail"]["level"].as_f64().unwrap(),
    );
    assert!(lo < hi && hi / lo - 1.0 <= 0.05 + 1e-9, "[{lo}, {hi})");
    let probes = s["probes"].as_array().unwrap();
    // Every probe is a point of the results, at its own rate, its slug
    // showing it; the search's own point is not pending.
    let points = search["points"].as_array().unwrap();
    assert_eq!(points.len(), probes.len());
    for (probe, point) in probes.iter().zip(points) {
        assert_eq!(probe["id"], point["id"]);
        assert_eq!(probe["level"].as_f64().unwrap(), rate_of(point));
        assert_eq!(probe["verdict"] == "pass", passes(point), "{}", point["id"]);
        let slug = point["slug"].as_str().unwrap();
        assert!(slug.starts_with("sim.m.w.r"), "{slug}");
    }
    assert_eq!(search["pending"].as_array().unwrap().len(), 0);
    assert!(
        summary.contains(&format!(
            "capacity of sim.m.w.search-r1-r32 (slo, within 5%): {lo} req/s (passes at {lo}, fails at {hi}"
        )),
        "{summary}"
    );

    // The sweep: every 2.5% of the answer from 40% below it to 40% above.
    let rates: Vec<f64> = (0..=32)
        .map(|i| ((lo * (0.6 + 0.025 * i as f64)) * 100.0).round() / 100.0)
        .collect();
    let axis = rates
        .iter()
        .map(|r| format!("\"{r}/s\""))
        .collect::<Vec<_>>()
        .join(", ");
    // The sweep's points above the crossing fail their SLO: exit 1.
    let (sweep, _) = run_expecting(
        dir.path(),
        "sweep",
        &spec(ttft, "", &format!("[matrix]\nrate = [{axis}]")),
        1,
    );
    let sweep_points = sweep["points"].as_array().unwrap();
    assert_eq!(sweep_points.len(), rates.len());
    assert!(
        probes.len() < sweep_points.len(),
        "{} probes against {} sweep points",
        probes.len(),
        sweep_points.len()
    );
    // Where the sweep crosses. A p99 of 600 requests is noisy, and each
    // rate draws requests of its own, so near the SLO a sweep may fail at
    // one rate and pass at the next: it crosses over a band, from the last
    // pass before its first failure to the first failure after its last
    // pass (one rate apart when it crosses once).
    let first_fail = sweep_points
        .iter()
        .position(|p| !passes(p))
        .expect("the sweep crosses the SLO");
    let last_pass = sweep_points
        .iter()
        .rposition(passes)
        .expect("the sweep passes somewhere");
    assert!(first_fail > 0, "the sweep passes at its lowest rate");
    assert!(
        last_pass + 1 < sweep_points.len(),
        "the sweep fails at its highest rate"
    );
    let (s_lo, s_hi) = (
        rate_of(&sweep_points[first_fail - 1]),
        rate_of(&sweep_points[last_pass + 1]),
    );
    let band: Vec<String> = sweep_points[first_fail - 1..=last_pass + 1]
        .iter()
        .map(|p| format!("{}:{}", rate_of(p), if passes(p) { "pass" } else { "fail" }))
        .collect();
    eprintln!(
        "search [{lo}, {hi}) in {} probes; sweep crosses over {band:?}",
        probes.len()
    );
    // The search's answer lies in the sweep's band, within the search's
    // precision.
    assert!(
        lo >= s_lo * 0.95 && hi <= s_hi * 1.05,
        "search [{lo}, {hi}) against the sweep's band {band:?}"
    );
    // The band is narrow, a few of the sweep's 2.5% steps: the comparison
    // means something.
    assert!(s_hi / s_lo - 1.0 <= 0.2, "{band:?}");
    // A probe at a rate the sweep has is that point: same ID, same verdict.
    let mut shared = 0;
    for probe in probes {
        if let Some(p) = sweep_points.iter().find(|p| p["id"] == probe["id"]) {
            shared += 1;
            assert_eq!(probe["verdict"] == "pass", passes(p), "{}", p["id"]);
        }
    }
    eprintln!("{shared} probes are sweep points");

    // The reports show the search.
    let results = dir.path().join("search");
    let md = ok(&["report", results.to_str().unwrap(), "--format", "markdown"]);
    assert!(md.contains("## Capacity searches"), "{md}");
    assert!(
        md.contains(&format!("| sim.m.w.search-r1-r32 | slo | {lo} req/s")),
        "{md}"
    );
    let html = ok(&["report", results.to_str().unwrap(), "--format", "html"]);
    assert!(html.contains("<section id=\"capacity-search\">"));
    // The nav leads to it, between the sweeps and the Pareto chart, as
    // the sections come.
    let nav = html
        .split("<nav>")
        .nth(1)
        .and_then(|n| n.split("</nav>").next())
        .expect("the report has a nav");
    let at = |link: &str| {
        nav.find(link)
            .unwrap_or_else(|| panic!("{link} not in {nav}"))
    };
    assert!(at("href=\"#capacity-search\">Capacity searches") < at("href=\"#pareto\""));
}

#[test]
fn the_judge_flags_a_lower_capacity_and_not_an_overlapping_one() {
    let dir = tempfile::tempdir().unwrap();
    let search = r#"search = { over = "rate", from = "1/s", to = "32/s", precision = "10%" }"#;
    let (base, _) = run(dir.path(), "base", &spec("1s", search, ""));
    let baseline = dir.path().join("baseline.json");
    let base_dir = dir.path().join("base");
    let blessed = infer_bench(&[
        "bless",
        base_dir.to_str().unwrap(),
        "--baseline",
        baseline.to_str().unwrap(),
    ]);
    assert_eq!(
        blessed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&blessed.stderr)
    );
    let b: Value = serde_json::from_str(&std::fs::read_to_string(&baseline).unwrap()).unwrap();
    assert_eq!(b["version"], 3);
    assert_eq!(b["searches"]["sim.m.w.search-r1-r32"]["outcome"], "found");
    assert_eq!(
        b["points"].as_object().unwrap().len(),
        0,
        "probes are not baseline points"
    );

    let diff = |name: &str, sim: &str| {
        run(dir.path(), name, &spec_on(sim, "1s", search, ""));
        let out = infer_bench(&[
            "diff",
            dir.path().join(name).to_str().unwrap(),
            "--baseline",
            baseline.to_str().unwrap(),
        ]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    // The same server again: in virtual time, the same answer: unchanged,
    // and none of the failing probes counts as a failed SLO.
    let (code, text) = diff("same", "");
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("capacity UNCHANGED: sim.m.w.search-r1-r32"),
        "{text}"
    );
    // A server 40% slower (the simulator's speed is not part of a point's
    // ID): a lower capacity, flagged.
    let (code, text) = diff("slower", ", slowdown = 1.4");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("capacity REGRESSED: sim.m.w.search-r1-r32"),
        "{text}"
    );
    assert!(text.contains("which the baseline passed"), "{text}");
    let _ = base;
}

#[test]
fn the_example_spec_searches() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let stdout = ok(&[
        "run",
        root.join("specs/capacity-search.toml").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let s = &r["searches"][0];
    assert_eq!(s["outcome"], "found", "{s:#}");
    assert!(
        stdout.contains("capacity of sim.llama-8b.chat.search-r1-r64 (slo, within 5%)"),
        "{stdout}"
    );
    let plan = ok(&[
        "plan",
        root.join("specs/capacity-search.toml").to_str().unwrap(),
    ]);
    assert!(plan.contains("search-r1-r64"), "{plan}");
    // The plan's estimate is for every probe the search may take: from
    // 1/s, six doublings to 64/s, then four geometric halvings of a
    // factor of 2 to within 5% (2^(1/16) < 1.05 < 2^(1/8)): 11 probes of
    // 1,000 requests at 1/s at most, an upper bound the run keeps to.
    assert!(plan.contains("up to 3h03m"), "{plan}");
    assert!(plan.contains("estimated wall time: up to"), "{plan}");
    let json: Value = serde_json::from_str(&ok(&[
        "plan",
        root.join("specs/capacity-search.toml").to_str().unwrap(),
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(json["estimated_seconds"], 11_000.0, "{json:#}");
    let probes = s["probes"].as_array().unwrap().len();
    assert!((2..=11).contains(&probes), "{s:#}");
}
