//! Reasoning tokens counted and timed apart from the answer: the real
//! binary runs a chat workload against the scripted loopback server, whose
//! script says exactly how many tokens are reasoning and when the first
//! reasoning and answer events go out; the results and the request log
//! must say the same.

use std::process::Command;
use std::time::Duration;

use infer_bench_testkit::runtime;
use infer_bench_testkit::scripted::{Script, ScriptedServer};
use serde_json::Value;

/// Requests measured per run (sent one at a time, so the server's delays
/// are the latencies).
const REQUESTS: u64 = 6;
/// Output tokens of every request (the scripted server always sends
/// `max_tokens`).
const OUTPUT: u64 = 16;

/// Runs `infer-bench run --requests` on a chat workload against `script`;
/// returns the point's merged statistics, the request log's measured
/// lines and the terminal summary.
fn run(script: Script) -> (Value, Vec<Value>, String) {
    let ran = run_with(script, "");
    assert_eq!(ran.code, Some(0), "{}", ran.text);
    (ran.point["merged"].clone(), ran.lines, ran.text)
}

/// What [`run_with`] found.
struct Ran {
    /// The point, as results.json has it.
    point: Value,
    /// The request log's measured lines.
    lines: Vec<Value>,
    /// stdout and stderr.
    text: String,
    code: Option<i32>,
    /// The Markdown and HTML reports of the results.
    markdown: String,
    html: String,
}

/// As [`run`], with `extra` appended to the spec.
fn run_with(script: Script, extra: &str) -> Ran {
    let rt = runtime();
    let server = rt.block_on(ScriptedServer::start(script)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = format!(
        "name = \"reasoning\"\nseed = 5\n\n[targets.s]\nkind = \"openai\"\nbase_url = \"{}\"\n\n\
         [models.m]\nserved_name = \"scripted-model\"\n\n\
         [workloads.w]\napi = \"chat\"\ninput_tokens = 8\noutput_tokens = {OUTPUT}\n\n\
         [load]\nconcurrency = 1\nrequests = {REQUESTS}\n{extra}",
        server.base_url()
    );
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, spec).unwrap();
    let out = dir.path().join("out");
    let status = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .args(["run", "--requests", "-q"])
        .arg(&path)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    rt.block_on(server.wait_idle());
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["version"], infer_bench_results::VERSION);
    let point = results["points"][0].clone();
    let merged = &point["merged"];
    assert_eq!(merged["requests"]["succeeded"], REQUESTS, "{merged}");
    let lines = std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["warmup"] == false)
        .collect();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&status.stdout),
        String::from_utf8_lossy(&status.stderr)
    );
    let report = |format: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
            .args(["report", "--format", format])
            .arg(out.join("results.json"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    Ran {
        point,
        lines,
        text,
        code: status.status.code(),
        markdown: report("md"),
        html: report("html"),
    }
}

fn reasoning_script(reasoning_usage: bool, tokens_per_event: u32) -> Script {
    Script {
        ttft: Duration::from_millis(50),
        itl: Duration::from_millis(10),
        tokens_per_event,
        reasoning: true,
        reasoning_events: 5,
        reasoning_usage,
        ..Script::default()
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The p50 of a latency, within -1/+5 ms of what the script said (the
/// client cannot see an event before it is sent; a loaded machine is late).
fn near(merged: &Value, metric: &str, scripted_ms: f64) {
    let p50 = f(&merged["latency_ms"][metric]["p50"]);
    assert!(
        p50 >= scripted_ms - 1.0 && p50 <= scripted_ms + 5.0,
        "{metric} p50 {p50} ms, scripted {scripted_ms} ms"
    );
}

/// Both counts and both first-token times, and the request log agreeing,
/// for a run whose reasoning is `reasoning` tokens of every request.
fn check(merged: &Value, lines: &[Value], reasoning: u64, source: &str) {
    let tokens = &merged["tokens"];
    assert_eq!(tokens["output_total"], REQUESTS * OUTPUT, "{tokens}");
    assert_eq!(tokens["reasoning_total"], REQUESTS * reasoning, "{tokens}");
    assert_eq!(
        tokens["answer_total"],
        REQUESTS * (OUTPUT - reasoning),
        "{tokens}"
    );
    assert_eq!(tokens["reasoning_source"][source], REQUESTS, "{tokens}");
    // Reasoning events go out from the TTFT on, answers after the five
    // reasoning events: 50 ms and 100 ms after the request came.
    near(merged, "ttft_reasoning", 50.0);
    near(merged, "ttft", 50.0);
    near(merged, "ttft_answer", 100.0);
    let latency = &merged["latency_ms"];
    assert_eq!(latency["ttft_answer"]["count"], REQUESTS, "{latency}");
    // The two rates split the output rate.
    let (r, a, o) = (
        f(&merged["reasoning_tokens_per_s"]),
        f(&merged["answer_tokens_per_s"]),
        f(&merged["output_tokens_per_s"]),
    );
    assert!(r > 0.0 && a > 0.0, "{r} {a}");
    assert!((r + a - o).abs() < 1e-6 * o, "{r} + {a} != {o}");
    assert_eq!(lines.len() as u64, REQUESTS);
    for l in lines {
        assert_eq!(l["reasoning_tokens"], reasoning, "{l}");
        assert_eq!(l["output_tokens"], OUTPUT, "{l}");
        let answer = f(&l["ttft_answer_ms"]);
        let ttft = f(&l["ttft_ms"]);
        // Five events of 10 ms lie between the first token and the answer.
        assert!(
            (answer - ttft - 50.0).abs() < 10.0,
            "answer {answer} ms, ttft {ttft} ms: {l}"
        );
    }
}

#[test]
fn reasoning_counted_from_usage_and_timed_apart() {
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    // Two tokens an event: five reasoning events are ten tokens, as usage's
    // `completion_tokens_details` says.
    let ran = run_with(reasoning_script(true, 2), "");
    assert_eq!(ran.code, Some(0), "{}", ran.text);
    let (merged, lines, summary) = (&ran.point["merged"], &ran.lines, &ran.text);
    check(merged, lines, 10, "usage");
    // The summary's reasoning table: the point's two totals, side by side.
    let table = summary
        .split("reasoning and answer")
        .nth(1)
        .unwrap_or_else(|| panic!("no reasoning table:\n{summary}"));
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.contains("c1"))
        .unwrap_or_else(|| panic!("no row:\n{summary}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[1..3], ["60", "36"], "{summary}");
    // The reports carry the same table: Markdown's row of the point, and
    // HTML's section, linked from its nav.
    let md_row = ran
        .markdown
        .split("## Reasoning and answer")
        .nth(1)
        .and_then(|t| t.lines().find(|l| l.contains("c1")))
        .unwrap_or_else(|| panic!("no reasoning table:\n{}", ran.markdown));
    let cells: Vec<&str> = md_row.split('|').map(str::trim).collect();
    assert_eq!(cells[2..5], ["60", "36", "usage"], "{md_row}");
    assert!(ran.html.contains("href=\"#reasoning-answer\""));
    let section = ran
        .html
        .split("<section id=\"reasoning-answer\">")
        .nth(1)
        .expect("the HTML section");
    assert!(section.contains("<td>60</td><td>36</td>"), "{section}");
}

#[test]
fn reasoning_counted_from_events_without_usage_details() {
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    // One token an event and no details in usage: the five reasoning
    // events are counted, one token each.
    let (merged, lines, _) = run(reasoning_script(false, 1));
    check(&merged, &lines, 5, "events");
}

#[test]
fn a_server_without_reasoning_leaves_the_fields_out() {
    let (merged, lines, summary) = run(Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..Script::default()
    });
    let tokens = &merged["tokens"];
    assert_eq!(tokens["output_total"], REQUESTS * OUTPUT, "{tokens}");
    for absent in ["reasoning_total", "answer_total", "reasoning_source"] {
        assert!(tokens.get(absent).is_none(), "{absent}: {tokens}");
    }
    for absent in ["reasoning_tokens_per_s", "answer_tokens_per_s"] {
        assert!(merged.get(absent).is_none(), "{absent}: {merged}");
    }
    for absent in ["ttft_reasoning", "ttft_answer"] {
        assert!(merged["latency_ms"].get(absent).is_none(), "{merged}");
    }
    assert!(merged["latency_ms"].get("ttft").is_some(), "{merged}");
    assert!(!summary.contains("reasoning and answer"), "{summary}");
    for l in &lines {
        assert!(l.get("reasoning_tokens").is_none(), "{l}");
        assert!(l.get("ttft_answer_ms").is_none(), "{l}");
    }
}

/// The SLO results of a point, by expression.
fn slo(point: &Value, expr: &str) -> Value {
    point["slo"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["expr"] == expr)
        .unwrap_or_else(|| panic!("no SLO `{expr}`: {point}"))
        .clone()
}

#[test]
fn slos_gate_the_first_answer_token() {
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    // Reasoning from 50 ms, five events 10 ms apart: the answer starts at
    // 100 ms. A user waits for the answer, so that is what is gated.
    let Ran {
        point, text, code, ..
    } = run_with(
        reasoning_script(true, 1),
        "\n[slo]\nttft_reasoning = \"mean < 80ms\"\nttft_answer = [\"mean < 150ms\", \"mean < 90ms\"]\n",
    );
    assert_eq!(code, Some(1), "an SLO failed: {text}");
    let reasoning = slo(&point, "mean < 80ms");
    assert_eq!(reasoning["metric"], "ttft_reasoning");
    assert_eq!(reasoning["pass"], true, "{reasoning}");
    let loose = slo(&point, "mean < 150ms");
    assert_eq!(loose["metric"], "ttft_answer");
    assert_eq!(loose["pass"], true, "{loose}");
    let answer = f(&loose["value"]);
    assert!((100.0..110.0).contains(&answer), "{loose}");
    let tight = slo(&point, "mean < 90ms");
    assert_eq!(tight["pass"], false, "{tight}");
    assert_eq!(point["slo_pass"], false);
}

#[test]
fn an_answer_slo_on_a_server_that_does_not_reason_fails_for_want_of_data() {
    let Ran {
        point,
        text,
        code,
        markdown,
        html,
        ..
    } = run_with(
        Script {
            ttft: Duration::from_millis(5),
            itl: Duration::from_millis(1),
            ..Script::default()
        },
        "\n[slo]\nttft_answer = \"mean < 1s\"\n",
    );
    // Nothing reasoned: the reports have no reasoning section.
    assert!(!markdown.contains("## Reasoning and answer"), "{markdown}");
    assert!(!html.contains("reasoning-answer"));
    assert_eq!(code, Some(1), "{text}");
    let gate = slo(&point, "mean < 1s");
    assert_eq!(gate["pass"], false, "{gate}");
    assert_eq!(gate["note"], "no data", "{gate}");
}
