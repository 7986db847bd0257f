//! Results files read back are data from outside. A real results file is
//! made once, in-process: a small simulated spec run as load-sharding
//! agent 1 of 1, so that it carries everything `merge` reads (each run's
//! shard: tallies, windows, the phase timeline). Then arbitrary mutations
//! of its JSON (values replaced by nulls, strings, negative and huge
//! numbers, empty arrays and objects; keys removed; arrays cut) must never
//! panic `Results::read`, `merge`, the judge's `compare` or the summary
//! table; and whatever reads, writes back as a file that reads again.
//! Seeded with the cases found by hand: a non-finite value, timeline
//! columns of unequal length, a non-ASCII sha256, counts at `u64::MAX`, a
//! file cut short.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use infer_bench_engine::run::Interrupt;
use infer_bench_engine::run::RunOptions;
use infer_bench_judge::baseline::{Baseline, entry};
use infer_bench_judge::compare::{Settings, compare};
use infer_bench_spec::results::Results;
use proptest::prelude::*;
use serde_json::{Value, json};

const SPEC: &str = r#"name = "fuzz"
seed = 7

[targets.sim]
kind = "sim"
gpu = "h100-sxm"

[models.m]
preset = "llama-3.1-8b"

[workloads.w]
input_tokens = 64
output_tokens = 16

[load]
concurrency = 4
warmup = "0.2s"
duration = "0.6s"
window = "0.2s"
runs = 1
"#;

struct Made {
    dir: PathBuf,
    text: String,
    baseline: Baseline,
    settings: Settings,
}

/// The results file of one agent of a small simulated run, made once.
fn made() -> &'static Made {
    static MADE: OnceLock<Made> = OnceLock::new();
    MADE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("results-fuzz");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let spec_path = dir.join("fuzz.toml");
        std::fs::write(&spec_path, SPEC).unwrap();
        let spec = infer_bench_spec::compile(spec_path.to_str().unwrap(), SPEC, &dir).unwrap();
        let plan = infer_bench_spec::plan::Plan::build(&spec).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let opts = RunOptions {
            agent: Some((1, 1)),
            start_at: Some(std::time::SystemTime::now() + std::time::Duration::from_millis(300)),
            ..RunOptions::new(dir.join("run"))
        };
        let r = infer_bench_engine::run::run_plan(
            &spec,
            &plan,
            &opts,
            &rt,
            Arc::new(Interrupt::default()),
        )
        .unwrap();
        let p = &r.points[0];
        assert!(p.merged.requests.succeeded > 0, "the run measured nothing");
        let shard = p.runs[0]
            .shard
            .as_ref()
            .expect("an agent's run has a shard");
        assert!(shard.windows.len() >= 2 && shard.phases.is_some());
        let mut baseline = Baseline::new(&r.spec.name);
        for p in &r.points {
            baseline
                .points
                .insert(p.id.clone(), entry(p, &r.environment));
        }
        Made {
            dir,
            text: r.to_json(),
            baseline,
            settings: Settings::from_regression(&spec.regression),
        }
    })
}

/// Everything that reads a results file, on `text`: never a panic, and
/// what reads writes back readable. Whether it read.
fn exercise(text: &str) -> bool {
    let m = made();
    // Tests run side by side: each call has files of its own.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = m.dir.join(format!("case-{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mutated.json");
    std::fs::write(&path, text).unwrap();
    let Ok((r, file)) = Results::read(&path) else {
        let _ = std::fs::remove_dir_all(&dir);
        return false;
    };
    let _ = compare(&m.baseline, &r, &m.settings);
    let _ = infer_bench_export::summary::table(&r);
    if let Ok(merged) = infer_bench_engine::merge::merge(vec![(file, r.clone())]) {
        let _ = compare(&m.baseline, &merged, &m.settings);
        let _ = infer_bench_export::summary::table(&merged);
        let again = dir.join("merged.json");
        merged.write(&again).unwrap();
        Results::read(&again).expect("a merged file reads back");
    }
    let again = dir.join("again.json");
    r.write(&again).unwrap();
    Results::read(&again).expect("what was read writes back readable");
    let _ = std::fs::remove_dir_all(&dir);
    true
}

/// Every node of a JSON value, by path.
fn paths(v: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(at.clone());
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                at.push(json!(k));
                paths(x, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(json!(i));
                paths(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn node<'a>(v: &'a mut Value, path: &[Value]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, s| match s {
        Value::String(k) => v.get_mut(k.as_str()),
        Value::Number(i) => v.get_mut(i.as_u64()? as usize),
        _ => None,
    })
}

/// Applies mutation `op` at `path`.
fn mutate(v: &mut Value, path: &[Value], op: u8) {
    if op == 7 {
        // Remove the node: a key from its object, an element from its array.
        let Some((last, parent)) = path.split_last() else {
            return;
        };
        match (node(v, parent), last) {
            (Some(Value::Object(o)), Value::String(k)) => {
                o.remove(k);
            }
            (Some(Value::Array(a)), Value::Number(i)) => {
                let i = i.as_u64().unwrap_or(0) as usize;
                if i < a.len() {
                    a.remove(i);
                }
            }
            _ => {}
        }
        return;
    }
    let Some(x) = node(v, path) else { return };
    let new = match op {
        0 => Value::Null,
        1 => json!("x"),
        2 => json!(-1),
        3 => json!(1e300),
        4 => json!(u64::MAX),
        5 => json!([]),
        6 => json!({}),
        8 => json!(true),
        9 => json!(0),
        10 => match &*x {
            // A string cut in half (a histogram's encoding broken).
            Value::String(s) => json!(s.chars().take(s.chars().count() / 2).collect::<String>()),
            other => other.clone(),
        },
        _ => match &*x {
            // An array or map doubled: lengths that no longer agree.
            Value::Array(a) => Value::Array(a.iter().chain(a.iter()).cloned().collect()),
            Value::Object(o) => {
                let mut o = o.clone();
                o.insert("999".into(), json!(1));
                Value::Object(o)
            }
            other => other.clone(),
        },
    };
    *x = new;
}

#[test]
fn the_file_as_written_reads_and_merges() {
    let m = made();
    assert!(exercise(&m.text));
    let v: Value = serde_json::from_str(&m.text).unwrap();
    assert!(v["points"][0]["runs"][0]["shard"].is_object());
    // Merge recomputes the point from its shards, the phase timeline
    // (where memory by phase is read) included.
    let file = m.dir.join("as-written.json");
    std::fs::write(&file, &m.text).unwrap();
    let (r, file) = Results::read(&file).unwrap();
    let merged = infer_bench_engine::merge::merge(vec![(file, r)]).unwrap();
    let p = &merged.points[0];
    assert!(p.memory.is_some() && !p.runs[0].windows.is_empty());
}

/// A change made to a results file's JSON.
type Change = Box<dyn Fn(&mut Value)>;

/// The cases found by hand, each of which once panicked or made a file
/// unreadable.
#[test]
fn the_cases_found_by_hand_do_not_panic() {
    let m = made();
    let original: Value = serde_json::from_str(&m.text).unwrap();
    let shard = |v: &mut Value| -> Value { v["points"][0]["runs"][0]["shard"].take() };
    let cases: Vec<(&str, Change)> = vec![
        (
            "timeline columns of unequal length",
            Box::new(|v| {
                let s = &mut v["points"][0]["runs"][0]["shard"]["phases"];
                s["prefill_s"].as_array_mut().unwrap().truncate(1);
            }),
        ),
        (
            "a timeline with no decode column",
            Box::new(|v| v["points"][0]["runs"][0]["shard"]["phases"]["decode_s"] = json!([])),
        ),
        (
            "a non-ASCII sha256",
            Box::new(|v| v["spec"]["sha256"] = json!("ééééééééééééééé")),
        ),
        (
            "counts at u64::MAX",
            Box::new(|v| {
                let t = &mut v["points"][0]["runs"][0]["shard"]["tally"]["counts"];
                t["sent"] = json!(u64::MAX);
                t["succeeded"] = json!(u64::MAX);
                t["failed"] = json!(u64::MAX);
            }),
        ),
        (
            "an instant past what a clock holds",
            Box::new(|v| {
                v["points"][0]["runs"][0]["shard"]["tally"]["last_done_ns"] = json!(i64::MAX);
                v["points"][0]["runs"][0]["shard"]["window_start_ns"] = json!(i64::MIN);
            }),
        ),
        (
            "a window length of zero",
            Box::new(|v| v["points"][0]["runs"][0]["shard"]["window_len_ns"] = json!(0)),
        ),
        (
            "a histogram that is not one",
            Box::new(|v| {
                v["points"][0]["runs"][0]["shard"]["tally"]["histograms"]["ttft"] =
                    json!("HISTFAAAAB54nJNpmSzMwMDAxMDMwMDIwMDEwMzAwMDAwMDAwMDA");
            }),
        ),
        (
            "a run without its shard",
            Box::new(move |v| {
                shard(v);
            }),
        ),
        (
            "a null for a plain number (what non-finite floats were written as)",
            Box::new(|v| v["points"][0]["merged"]["request_throughput"] = Value::Null),
        ),
    ];
    for (what, change) in cases {
        let mut v = original.clone();
        change(&mut v);
        exercise(&serde_json::to_string_pretty(&v).unwrap());
        eprintln!("ok: {what}");
    }
    // A file cut short, anywhere (short of its closing brace: a cut of
    // only the trailing newline leaves a whole file).
    let whole = m.text.trim_end();
    for cut in (1..whole.len()).step_by(whole.len() / 23) {
        assert!(!exercise(&whole[..cut]), "cut at {cut} reads");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Up to four mutations anywhere, half of them in the first run's
    /// shard (what merge reads most of).
    #[test]
    fn mutated_files_never_panic(
        picks in proptest::collection::vec(
            (any::<bool>(), any::<proptest::sample::Index>(), 0u8..12),
            1..5,
        )
    ) {
        let m = made();
        let mut v: Value = serde_json::from_str(&m.text).unwrap();
        let mut all = Vec::new();
        paths(&v, &mut Vec::new(), &mut all);
        let prefix = [json!("points"), json!(0), json!("runs"), json!(0), json!("shard")];
        let in_shard: Vec<&Vec<Value>> = all.iter().filter(|p| p.starts_with(&prefix)).collect();
        for (shard, at, op) in picks {
            let path = if shard && !in_shard.is_empty() {
                at.get(&in_shard).as_slice()
            } else {
                at.get(&all).as_slice()
            };
            mutate(&mut v, path, op);
        }
        exercise(&serde_json::to_string(&v).unwrap());
    }
}
