//! Quality beside speed end to end (issue 41), through the real binary:
//! the `[quality]` phase asks every server the same prompts greedily,
//! outside the timed window, and the gate judges its agreement with a
//! reference's answers like speed.
//!
//! The server under test is a simulator started in this process on a
//! fixed port (an external target to the spec), so a "pull request" can
//! swap what answers behind the same URL without changing the spec: first
//! a BF16 simulator, whose answers equal the reference's, then the same
//! weights with an INT4 KV cache: as fast at this load (the KV cache is a
//! sliver of the bytes a step reads), answering differently at the rate
//! the simulator declares for it (2% a token; docs/simulator.md). The
//! reference is the simulator in virtual time. Only quality gates are
//! named, so no timing enters a verdict here.

use std::path::{Path, PathBuf};
use std::process::Command;

use infer_bench::sim::server::SimServer;
use serde_json::Value;

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_infer-bench"))
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn ib(dir: &Path, args: &[&str]) -> Out {
    let out = Command::new(bin())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the binary runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn results(dir: &Path, out: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(out).join("results.json")).unwrap())
        .unwrap()
}

/// The point of `target` in the results.
fn point<'a>(r: &'a Value, target: &str) -> &'a Value {
    r["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["config"]["target"]["name"] == target)
        .unwrap_or_else(|| panic!("no point of {target}"))
}

/// The simulators behind the external target: one spec, two precisions.
const BACKING: &str = r#"
name = "backing"
[targets.sim]
kind = "sim"
gpu = "h100-sxm"
[models.m]
preset = "llama-3.1-8b"
[models.m.precisions.bf16]
[models.m.precisions.kv4]
dtype = "bf16"
kv_dtype = "int4"
[workloads.chat]
input_tokens = 64
output_tokens = 16
[load]
concurrency = 2
requests = 1
[matrix]
precision = ["bf16", "kv4"]
"#;

/// The spec under test: the reference in virtual time, the server under
/// test behind a URL.
fn gate_spec(port: u16) -> String {
    format!(
        r#"
name = "quality-gate"
seed = 5
[targets.ref]
kind = "sim"
gpu = "h100-sxm"
sim = {{ clock = "virtual" }}
[targets.prod]
kind = "openai"
base_url = "http://127.0.0.1:{port}/v1"
[models.m]
preset = "llama-3.1-8b"
[workloads.chat]
input_tokens = 64
output_tokens = 16
[load]
concurrency = 2
requests = 8
[matrix]
target = ["ref", "prod"]
[quality]
reference_target = "ref"
prompts = 100
max_tokens = 24
concurrency = 8
[regression]
metrics = [{{ metric = "agreement", noise = "5%" }}]
"#
    )
}

/// Starts `cfg`'s simulator on `port`, waiting out a port the previous
/// one has just let go of.
fn serve_on(cfg: &infer_bench::plan::PointConfig, port: u16) -> SimServer {
    let mut last = None;
    for _ in 0..50 {
        match SimServer::start_on(cfg, port) {
            Ok(s) => return s,
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("cannot serve on port {port}: {last:?}");
}

#[test]
fn a_server_as_fast_that_answers_differently_fails_the_gate_naming_agreement() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("backing.toml"), BACKING).unwrap();
    let backing =
        infer_bench::spec::load(&d.join("backing.toml")).unwrap_or_else(|e| panic!("{e}"));
    let plan = infer_bench::plan::Plan::build(&backing).unwrap();
    let (bf16, kv4) = (&plan.points[0].config, &plan.points[1].config);
    assert_eq!(bf16.precision.as_ref().unwrap().name, "bf16");

    let server = serve_on(bf16, 0);
    let port: u16 = server
        .base_url()
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/v1")
        .parse()
        .unwrap();
    std::fs::write(d.join("gate.toml"), gate_spec(port)).unwrap();

    // The baseline: the server answers as the reference does.
    let run = ib(d, &["run", "gate.toml", "--out", "base"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("prod/m: quality prompts answered: 100 of 100"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains("quality beside speed"),
        "{}",
        run.stdout
    );
    let r = results(d, "base");
    assert_eq!(r["version"], 6);
    let reference = &point(&r, "ref")["quality"];
    assert_eq!(reference["is_reference"], true);
    let prod = &point(&r, "prod")["quality"];
    assert_eq!(prod["reference"], "ref/m");
    assert_eq!(prod["answered"], 100);
    assert_eq!(prod["agreement"]["compared"], 100);
    assert_eq!(prod["agreement"]["exact_match"], 1.0);
    assert_eq!(prod["agreement"]["unit"], "tokens");
    assert_eq!(prod["agreement"]["kl_mean"], 0.0);
    // The phase is not in the timed figures: the point sent its 8.
    assert_eq!(point(&r, "prod")["merged"]["requests"]["succeeded"], 8);
    let bless = ib(d, &["bless", "base"]);
    assert_eq!(bless.code, 0, "{}", bless.stderr);
    let baseline: Value = serde_json::from_str(
        &std::fs::read_to_string(d.join("baselines/quality-gate.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(baseline["version"], 4, "a baseline with quality figures");

    // Unchanged answers pass.
    let same = ib(
        d,
        &[
            "run",
            "gate.toml",
            "--out",
            "same",
            "--baseline",
            "baselines/quality-gate.json",
        ],
    );
    assert_eq!(same.code, 0, "{}\n{}", same.stdout, same.stderr);
    assert!(same.stdout.contains("UNCHANGED"), "{}", same.stdout);

    // The pull request: the same weights with an INT4 KV cache behind the
    // same URL, whose answers part from the reference's.
    server.stop();
    let server = serve_on(kv4, port);
    let pr = ib(
        d,
        &[
            "run",
            "gate.toml",
            "--out",
            "pr",
            "--baseline",
            "baselines/quality-gate.json",
        ],
    );
    server.stop();
    assert_eq!(pr.code, 1, "{}\n{}", pr.stdout, pr.stderr);
    let line = pr
        .stdout
        .lines()
        .find(|l| l.starts_with("REGRESSED"))
        .unwrap_or_else(|| panic!("no REGRESSED line:\n{}", pr.stdout));
    assert!(
        line.contains("prod.m.chat.c2") && line.contains("agreement"),
        "{line}"
    );
    // Quality is not re-run to confirm: the same prompts get the same
    // greedy answers.
    assert!(!pr.stderr.contains("confirming"), "{}", pr.stderr);
    let r = results(d, "pr");
    let a = &point(&r, "prod")["quality"]["agreement"];
    // An INT4 KV cache parts at 2% a token: (0.98)^24 = 62% of 24-token
    // answers are equal; 100 prompts put the figure well under 80%.
    let exact = a["exact_match"].as_f64().unwrap();
    assert!(exact < 0.8, "{a}");
    assert!(a["kl_mean"].as_f64().unwrap() > 0.0, "{a}");
    assert!(a["first_diff_mean"].as_f64().unwrap() < 24.0, "{a}");
    let examples = point(&r, "prod")["quality"]["examples"].as_array().unwrap();
    assert!(!examples.is_empty() && examples.len() <= 3);
    assert_ne!(examples[0]["reference"], examples[0]["answer"]);

    // The Markdown verdict names the metric too.
    let md = ib(
        d,
        &[
            "diff",
            "pr",
            "--baseline",
            "baselines/quality-gate.json",
            "--format",
            "markdown",
        ],
    );
    assert_eq!(md.code, 1, "{}", md.stderr);
    assert!(md.stdout.contains("agreement"), "{}", md.stdout);
}

#[test]
fn quality_slos_are_judged_on_the_agreement_with_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("slo.toml"),
        r#"
name = "quality-slo"
seed = 9
[targets.sim]
kind = "sim"
gpu = "h100-sxm"
sim = { clock = "virtual" }
[models.m]
preset = "llama-3.1-8b"
[models.m.precisions.bf16]
[models.m.precisions.fp8]
[models.m.precisions.int4]
dtype = "int4"
[workloads.chat]
input_tokens = 64
output_tokens = 16
[load]
concurrency = 2
requests = 8
[matrix]
precision = ["bf16", "fp8", "int4"]
[quality]
reference = "bf16"
prompts = 300
max_tokens = 16
[slo]
agreement = ">= 70%"
kl_mean = "< 1"
"#,
    )
    .unwrap();
    let run = ib(d, &["run", "slo.toml", "--out", "out"]);
    assert_eq!(
        run.code, 1,
        "an SLO failed:\n{}\n{}",
        run.stdout, run.stderr
    );
    let r = results(d, "out");
    let by = |precision: &str| -> &Value {
        r["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["config"]["precision"]["name"] == precision)
            .unwrap()
    };
    let agreement = |p: &Value| p["quality"]["agreement"]["exact_match"].as_f64().unwrap();
    // The simulator's declared rates: FP8 1% a token, INT4 5%:
    // (0.99)^16 = 85%, (0.95)^16 = 44% of 16-token answers equal. Each
    // figure lies inside its Wilson interval of 300 prompts.
    for (precision, truth) in [("fp8", 0.99f64.powi(16)), ("int4", 0.95f64.powi(16))] {
        let a = &by(precision)["quality"]["agreement"];
        let (lo, hi) = (
            a["exact_low"].as_f64().unwrap(),
            a["exact_high"].as_f64().unwrap(),
        );
        assert!(
            lo <= truth && truth <= hi,
            "{precision}: {truth} not in [{lo}, {hi}]"
        );
    }
    assert_eq!(agreement(by("bf16")), 1.0);
    assert!(agreement(by("fp8")) > agreement(by("int4")));
    let slo = |p: &Value, metric: &str| -> bool {
        p["slo"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["metric"] == metric)
            .unwrap_or_else(|| panic!("no {metric} SLO in {}", p["slo"]))["pass"]
            .as_bool()
            .unwrap()
    };
    assert!(slo(by("bf16"), "agreement") && slo(by("fp8"), "agreement"));
    assert!(!slo(by("int4"), "agreement"));
    assert!(slo(by("int4"), "kl_mean"));
    assert_eq!(by("int4")["slo_pass"], false);
    assert!(run.stdout.contains("agree"), "{}", run.stdout);
}

/// Task accuracy against a truth the test knows: a dataset of 40 prompts
/// whose expected answer is BF16's first word for the even ones and a
/// word the simulator never says for the odd ones, scored by the first
/// word (`regex`). BF16 is right on exactly half; the answers are asked
/// of the simulator here first, with the request the phase sends.
#[test]
fn task_accuracy_scores_each_precision_against_the_datasets_answers() {
    use infer_bench::protocol::answer::{self, AnswerApi, AnswerRequest};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prompts: Vec<String> = (0..40)
        .map(|i| format!("Question {i}: name the thing that comes next."))
        .collect();
    std::fs::write(d.join("backing.toml"), BACKING).unwrap();
    let backing =
        infer_bench::spec::load(&d.join("backing.toml")).unwrap_or_else(|e| panic!("{e}"));
    let plan = infer_bench::plan::Plan::build(&backing).unwrap();
    let setup = infer_bench::sim::request::Setup::of(&plan.points[0].config).unwrap();
    let first_word = |prompt: &str| -> String {
        let body = AnswerRequest {
            api: AnswerApi::Chat,
            model: plan.points[0].config.served_name(),
            prompt,
            max_tokens: 8,
            top_logprobs: 0,
            seed: 0,
        }
        .body();
        let bytes = infer_bench::sim::server::answer_at_once(
            &setup,
            &body,
            infer_bench::sim::request::Wire::Chat,
        )
        .unwrap();
        let a = answer::read(&bytes).unwrap();
        a.text
            .unencoded()
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let lines: Vec<String> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let expected = if i % 2 == 0 {
                first_word(p)
            } else {
                "xylophone".into()
            };
            serde_json::json!({"prompt": p, "answer": expected}).to_string()
        })
        .collect();
    std::fs::write(d.join("task.jsonl"), lines.join("\n") + "\n").unwrap();
    std::fs::write(
        d.join("task.toml"),
        r#"
name = "task"
seed = 2
[targets.sim]
kind = "sim"
gpu = "h100-sxm"
sim = { clock = "virtual" }
[models.m]
preset = "llama-3.1-8b"
[models.m.precisions.bf16]
[models.m.precisions.int4]
dtype = "int4"
[workloads.chat]
input_tokens = 64
output_tokens = 16
[load]
concurrency = 2
requests = 4
[matrix]
precision = ["bf16", "int4"]
[quality]
dataset = "task.jsonl"
scorer = "regex"
pattern = '^\s*(\S+)'
max_tokens = 8
logprobs = 0
[slo]
accuracy = ">= 45%"
"#,
    )
    .unwrap();
    let run = ib(d, &["run", "task.toml", "--out", "out"]);
    let r = results(d, "out");
    let by = |precision: &str| -> Value {
        r["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["config"]["precision"]["name"] == precision)
            .unwrap()["quality"]
            .clone()
    };
    let bf16 = by("bf16");
    assert_eq!(bf16["accuracy"]["scored"], 40, "{bf16}");
    assert_eq!(bf16["accuracy"]["correct"], 20, "{bf16}");
    assert_eq!(bf16["accuracy"]["scorer"], "regex");
    assert!(
        bf16.get("agreement").is_none(),
        "no reference, no agreement"
    );
    // INT4 keeps BF16's first word with probability 0.95 a prompt: at most
    // the 20 even prompts are right.
    let int4 = by("int4");
    let correct = int4["accuracy"]["correct"].as_u64().unwrap();
    assert!((12..=20).contains(&correct), "{int4}");
    assert!(run.stdout.contains("accuracy"), "{}", run.stdout);
    assert_eq!(
        run.code,
        if correct as f64 / 40.0 >= 0.45 { 0 } else { 1 },
        "{}\n{}",
        run.stdout,
        run.stderr
    );
}
