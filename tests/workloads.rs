//! Workloads end to end: datasets and their errors, conversations against
//! the scripted server (whose records say what really arrived), and the
//! reproducibility of request bodies within and across processes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use infer_bench::plan::Plan;
use infer_bench::protocol::{ClientOptions, HttpBackend, Reading};
use infer_bench::run::Interrupt;
use infer_bench::run::parts::{arrivals, request_bodies, workload_fingerprint};
use infer_bench::run::{RunOptions, run_plan};
use infer_bench::spec::raw::{Api, DatasetFormat};
use infer_bench::workload::dataset::{self, Options};
use infer_bench::workload::{Material, Role, TokenCounter};
use infer_bench_testkit::scripted::{Script, ScriptedServer};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn tokenizer_path() -> PathBuf {
    fixtures().join("tokenizer/tokenizer.json")
}

fn tokenizer() -> TokenCounter {
    TokenCounter::load(&tokenizer_path()).unwrap()
}

fn options(format: DatasetFormat, api: Api, counter: Option<&TokenCounter>) -> Options<'_> {
    Options {
        format,
        api,
        counter,
        min_input_tokens: None,
        max_input_tokens: None,
        need_output: false,
        repo: Path::new(env!("CARGO_MANIFEST_DIR")),
    }
}

fn load_err(file: &str, o: &Options) -> String {
    let path = fixtures().join("datasets").join(file);
    let e = dataset::load(&path, o).unwrap_err();
    e.to_string()
        .replace(&fixtures().join("datasets").display().to_string(), "DATA")
}

#[test]
fn jsonl_datasets_load_with_exact_lengths() {
    let tok = tokenizer();
    let path = fixtures().join("datasets/prompts.jsonl");
    let d = dataset::load(
        &path,
        &options(DatasetFormat::Jsonl, Api::Completions, Some(&tok)),
    )
    .unwrap();
    assert_eq!((d.read, d.entries.len(), d.filtered), (5, 5, 0));
    assert!(d.exact);
    for e in &d.entries {
        assert_eq!(e.input_tokens, tok.count(&e.text, true), "{}", e.text);
    }
    let outputs: Vec<Option<u32>> = d.entries.iter().map(|e| e.output_tokens).collect();
    assert_eq!(outputs, [Some(64), Some(48), Some(96), None, Some(32)]);

    // Filtering by length, on the tokenizer's counts.
    let mut o = options(DatasetFormat::Jsonl, Api::Completions, Some(&tok));
    let lens: Vec<u32> = d.entries.iter().map(|e| e.input_tokens).collect();
    let mid = {
        let mut s = lens.clone();
        s.sort_unstable();
        s[2]
    };
    o.max_input_tokens = Some(mid);
    let f = dataset::load(&path, &o).unwrap();
    assert_eq!(f.entries.len() + f.filtered, 5);
    assert_eq!(f.entries.len(), lens.iter().filter(|l| **l <= mid).count());
    assert!(f.entries.iter().all(|e| e.input_tokens <= mid));

    // Without a tokenizer lengths are approximated: a token per four bytes.
    let a = dataset::load(
        &path,
        &options(DatasetFormat::Jsonl, Api::Completions, None),
    )
    .unwrap();
    assert!(!a.exact);
    assert_eq!(a.entries[1].input_tokens, 42u32.div_ceil(4));

    // Chat datasets keep their earlier messages.
    let c = dataset::load(
        &fixtures().join("datasets/chat.jsonl"),
        &options(DatasetFormat::Jsonl, Api::Chat, Some(&tok)),
    )
    .unwrap();
    assert_eq!(c.entries.len(), 2);
    assert_eq!(c.entries[0].history[0].role, Role::System);
    assert_eq!(c.entries[1].history.len(), 2);
    assert_eq!(c.entries[1].text, "Name a bigger one.");
}

#[test]
fn sharegpt_datasets_take_the_first_exchange() {
    let tok = tokenizer();
    let d = dataset::load(
        &fixtures().join("datasets/sharegpt.json"),
        &options(DatasetFormat::Sharegpt, Api::Completions, Some(&tok)),
    )
    .unwrap();
    // c has no reply and d no turns: unusable.
    assert_eq!((d.read, d.entries.len(), d.unusable), (5, 3, 2));
    let b = &d.entries[1];
    assert_eq!(b.text, "Give me a word that rhymes with light.");
    assert_eq!(b.output_tokens, Some(tok.count("Night.", false)));
    assert_eq!(b.input_tokens, tok.count(&b.text, true));
    let a = &d.entries[0];
    assert_eq!(
        a.output_tokens,
        Some(tok.count(
            "Bring water to a boil, lower the egg in gently and cook it for six minutes, then cool it in cold water.",
            false
        ))
    );
}

#[test]
fn malformed_datasets_name_file_and_line() {
    let jsonl = options(DatasetFormat::Jsonl, Api::Completions, None);
    let shape = "\n  hint: each line is a JSON object such as {\"prompt\": \"...\", \"output_tokens\": 128} or {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}";
    assert_eq!(
        load_err("bad-syntax.jsonl", &jsonl),
        format!("DATA/bad-syntax.jsonl:3: invalid JSON: expected `,` or `}}` (column 22){shape}")
    );
    assert_eq!(
        load_err("bad-type.jsonl", &jsonl),
        format!(
            "DATA/bad-type.jsonl:3: unexpected JSON: invalid type: string \"ten\", expected u32 (column 38){shape}"
        )
    );
    assert_eq!(
        load_err("bad-shape.jsonl", &jsonl),
        format!("DATA/bad-shape.jsonl:2: has neither `prompt` nor `messages`{shape}")
    );
    let mut need = options(DatasetFormat::Jsonl, Api::Completions, None);
    need.need_output = true;
    assert_eq!(
        load_err("prompts.jsonl", &need),
        "DATA/prompts.jsonl:5: no `output_tokens`, and the workload sets none\n  hint: add \"output_tokens\" to every line, or set the workload's output_tokens"
    );
    assert_eq!(
        load_err("chat.jsonl", &jsonl),
        "DATA/chat.jsonl:1: `messages` needs a chat workload\n  hint: set api = \"chat\" in the workload, or use `prompt`"
    );
    assert_eq!(
        load_err(
            "bad-sharegpt.json",
            &options(DatasetFormat::Sharegpt, Api::Completions, None)
        ),
        "DATA/bad-sharegpt.json:3:50: invalid type: integer `42`, expected a string\n  hint: a ShareGPT file is a JSON array of {\"conversations\": [{\"from\": \"human\", \"value\": \"...\"}, {\"from\": \"gpt\", \"value\": \"...\"}]}"
    );
    let mut narrow = options(DatasetFormat::Jsonl, Api::Completions, None);
    narrow.min_input_tokens = Some(1000);
    assert_eq!(
        load_err("prompts.jsonl", &narrow),
        "DATA/prompts.jsonl: no usable prompt of at least 1000 input tokens (5 entries read)\n  hint: widen min_input_tokens / max_input_tokens"
    );
}

/// Writes a spec into `dir` and compiles it.
fn spec(dir: &Path, text: &str) -> infer_bench::spec::Spec {
    let path = dir.join("spec.toml");
    std::fs::write(&path, text).unwrap();
    infer_bench::spec::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn conversations_carry_their_history_and_wait_their_think_time() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script {
            ttft: Duration::from_millis(5),
            itl: Duration::from_millis(1),
            ..Script::default()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        dir.path(),
        &format!(
            r#"
name = "conversation"
seed = 7
[targets.scripted]
kind = "openai"
base_url = "{}"
[models.m]
served_name = "scripted-model"
[workloads.chat]
api = "chat"
input_tokens = 20
output_tokens = 8
conversation = {{ turns = 3, think_time = "150ms" }}
[load]
concurrency = 1
requests = 6
"#,
            server.base_url()
        ),
    );
    let plan = Plan::build(&s).unwrap();
    let opts = RunOptions {
        ..RunOptions::new(dir.path().join("out"))
    };
    let results = run_plan(&s, &plan, &opts, &rt, Arc::new(Interrupt::default())).unwrap();
    rt.block_on(server.wait_idle());
    let mut recs = server.records();
    recs.sort_by_key(|r| r.received);
    // Two sessions of three turns, one after the other (one user).
    assert_eq!(recs.len(), 6, "{recs:#?}");
    let think = Duration::from_millis(150);
    for session in recs.chunks(3) {
        let lens: Vec<u32> = session.iter().map(|r| r.prompt_tokens).collect();
        assert_eq!(lens[0], 20, "the first turn is the prompt alone");
        assert!(
            lens[0] < lens[1] && lens[1] < lens[2],
            "each turn carries the history: {lens:?}"
        );
        // Turn k+1 = history (turn k's prompt + its 8-token reply) + 20 new words.
        assert!(lens[1] > 20 + 20, "{lens:?}");
        for w in session.windows(2) {
            let gap = w[1].received - w[0].finished.unwrap();
            assert!(
                gap >= think && gap < think + Duration::from_millis(300),
                "think time: {gap:?}"
            );
        }
    }
    // Between sessions a closed loop does not think.
    let between = recs[3].received - recs[2].finished.unwrap();
    assert!(between < Duration::from_millis(100), "{between:?}");

    let p = &results.points[0];
    for t in &p.turns {
        eprintln!(
            "turn {}: prompt {:.0} tokens requested, {:?} reported; TTFT p50 {:.2} ms",
            t.turn, t.requested_input_mean, t.reported_input_mean, t.latency_ms["ttft"].p50
        );
    }
    eprintln!(
        "dispatch lag p99 {:.3} ms",
        p.merged.latency_ms["dispatch_lag"].p99
    );
    assert_eq!(p.merged.requests.succeeded, 6);
    assert_eq!(p.turns.len(), 3);
    for (k, t) in p.turns.iter().enumerate() {
        assert_eq!(t.turn, k as u32 + 1);
        assert_eq!(t.requests.succeeded, 2);
        assert!(t.latency_ms["ttft"].count == 2);
    }
    let reported: Vec<f64> = p
        .turns
        .iter()
        .map(|t| t.reported_input_mean.unwrap())
        .collect();
    assert!(
        reported[0] < reported[1] && reported[1] < reported[2],
        "{reported:?}"
    );
    // The client's own account of the history's length grows the same way.
    assert!(p.turns[1].requested_input_mean > p.turns[0].requested_input_mean);
    assert_eq!(p.turns[0].requested_input_mean, 20.0);
    rt.block_on(server.shutdown());
}

const SIM_SPEC: &str = r#"
name = "repro"
seed = SEED
[targets.sim]
kind = "sim"
gpu = "h100-sxm"
[models.m]
preset = "llama-3.1-8b"
tokenizer = "TOKENIZER"
[workloads.synth]
api = "completions"
input_tokens = { dist = "lognormal", median = 200, sigma = 0.5, min = 16, max = 800 }
output_tokens = "uniform(4, 12)"
shared_prefix = { tokens = 64, count = 2 }
[workloads.data]
api = "completions"
dataset = { path = "DATASET", format = "sharegpt", max_input_tokens = 30 }
[load]
concurrency = 4
requests = 24
runs = 2
[matrix]
workload = ["synth", "data"]
"#;

fn sim_spec(dir: &Path, seed: u64) -> PathBuf {
    let text = SIM_SPEC
        .replace("SEED", &seed.to_string())
        .replace("TOKENIZER", &tokenizer_path().display().to_string())
        .replace(
            "DATASET",
            &fixtures()
                .join("datasets/sharegpt.json")
                .display()
                .to_string(),
        );
    let path = dir.join(format!("repro-{seed}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_same_spec_and_seed_build_the_same_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let s = infer_bench::spec::load(&sim_spec(dir.path(), 42)).unwrap();
    let plan = Plan::build(&s).unwrap();
    let p = &plan.points[0];
    let cfg = &p.config;
    let headers = Default::default();
    let options = ClientOptions {
        base_url: "http://127.0.0.1:9/v1",
        api_key: None,
        headers: &headers,
        tls_insecure: false,
        ca_cert_pem: None,
        pool_size: 1,
        connect_timeout: Duration::from_secs(1),
    };
    let backend = HttpBackend::new(
        &options,
        infer_bench::protocol::for_workload(
            &cfg.workload,
            cfg.served_name(),
            infer_bench::spec::Dialect::Vllm,
        ),
        Reading {
            timeouts: cfg.load.timeouts,
            limits: cfg.load.limits,
            keep_reply: cfg.workload.conversation.is_some(),
        },
    )
    .unwrap();
    // Two independent loads of the material, two generations of the bodies.
    let load = || Arc::new(Material::load(&cfg.workload, &cfg.model, s.base_dir()).unwrap());
    let (m1, m2) = (load(), load());
    let a = request_bodies(&backend, cfg, 0, &m1, 200);
    let b = request_bodies(&backend, cfg, 0, &m2, 200);
    assert_eq!(a, b);
    assert_ne!(a, request_bodies(&backend, cfg, 1, &m1, 200), "runs differ");
    // Every body's prompt has exactly its requested length.
    let tok = tokenizer();
    for body in &a {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap();
        let prompt = v["prompt"].as_str().unwrap();
        let n = tok.count(prompt, true);
        assert!((16..=800).contains(&n), "{n}");
    }
    assert_eq!(
        workload_fingerprint(&backend, cfg, &m1),
        workload_fingerprint(&backend, cfg, &m2)
    );
}

/// Issue 40's spec: every table a spec may have, an OpenAI target that
/// is never reached, a synthetic workload with a shared prefix, a
/// ShareGPT dataset and a mix of the two, on an open loop (so arrivals
/// have times).
const EVERY_KEY: &str = r#"
name = "issue-40"
description = "what a point sends"
seed = 7
[targets.a]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "ISSUE_40_KEY"
headers = { x-team = "bench" }
metrics_url = "http://127.0.0.1:9/metrics"
dialect = "vllm"
[models.m]
served_name = "org/model"
tokenizer = "TOKENIZER"
[workloads.synth]
api = "completions"
input_tokens = { dist = "lognormal", median = 200, sigma = 0.5, min = 16, max = 800 }
output_tokens = "uniform(4, 12)"
shared_prefix = { tokens = 64, count = 2 }
[workloads.data]
api = "completions"
dataset = { path = "DATASET", format = "sharegpt", max_input_tokens = 30 }
[workloads.mixed]
mix = { synth = 0.6, data = 0.4 }
[load]
rate = "20/s"
warmup = "1s"
duration = "10s"
runs = 2
window = "1s"
timeouts = { connect = "5s", first_token = "1h", idle = "1m", total = "2h" }
limits = { max_events = 100000 }
[matrix]
workload = ["synth", "data", "mixed"]
[slo]
ttft = "p90 < 300ms"
[goodput]
ttft = "500ms"
[cost]
gpu_hour_usd = 2.5
[telemetry]
gpu = "off"
interval = "100ms"
[validity]
min_requests = 10
[regression]
metrics = [{ metric = "ttft", stat = "p50", noise = "10%" }]
"#;

/// What a plan sends, point by point and run by run: the first bodies as
/// the client builds them, and the first arrivals' times.
type Sent = Vec<Vec<(Vec<bytes::Bytes>, Vec<Option<u64>>)>>;

/// Compiles `text` (with the fixtures' paths) and builds what each point
/// would send in its first `runs` runs, through the client's own body
/// builder. Also returns the compiled spec, less its file's path and text.
fn sent(dir: &Path, text: &str, runs: u32) -> (Sent, String) {
    const N: u64 = 32;
    let text = text
        .replace("TOKENIZER", &tokenizer_path().display().to_string())
        .replace(
            "DATASET",
            &fixtures()
                .join("datasets/sharegpt.json")
                .display()
                .to_string(),
        );
    let s = spec(dir, &text);
    let compiled = format!(
        "{:?}",
        (
            (&s.name, &s.description, s.seed, &s.targets, &s.models),
            (&s.workloads, &s.load, &s.matrix, &s.slo, &s.goodput),
            (&s.cost, &s.telemetry, &s.validity, &s.regression),
        )
    );
    let plan = Plan::build(&s).unwrap();
    let sent = plan
        .points
        .iter()
        .map(|p| {
            let cfg = &p.config;
            let options = ClientOptions {
                base_url: cfg.target.base_url.as_deref().unwrap(),
                api_key: None,
                headers: &cfg.target.headers,
                tls_insecure: cfg.target.tls_insecure,
                ca_cert_pem: None,
                pool_size: 1,
                connect_timeout: cfg.load.timeouts.connect.as_std(),
            };
            let backend = HttpBackend::new(
                &options,
                infer_bench::protocol::for_workload(
                    &cfg.workload,
                    cfg.served_name(),
                    cfg.target.dialect.unwrap(),
                ),
                Reading {
                    timeouts: cfg.load.timeouts,
                    limits: cfg.load.limits,
                    keep_reply: false,
                },
            )
            .unwrap();
            let material =
                Arc::new(Material::load(&cfg.workload, &cfg.model, s.base_dir()).unwrap());
            (0..runs)
                .map(|run| {
                    let bodies = request_bodies(&backend, cfg, run, &material, N);
                    let times = arrivals(cfg, run, &material)
                        .take(N as usize)
                        .map(|d| d.at_ns)
                        .collect();
                    (bodies, times)
                })
                .collect()
        })
        .collect();
    (sent, compiled)
}

/// Issue 40: the requests a point sends depend only on what defines them
/// (the workload, the model name as sent, the seed, the load's shape).
/// Changing every other key of a spec, one at a time, leaves the bytes of
/// every body and every arrival time as they were; changing the workload,
/// the seed, the served name or the rate does not.
#[test]
fn only_what_defines_the_requests_changes_them() {
    let dir = tempfile::tempdir().unwrap();
    let (base, base_compiled) = sent(dir.path(), EVERY_KEY, 2);
    assert_eq!(base.len(), 3);
    assert!(
        base.iter()
            .flatten()
            .all(|(b, t)| b.len() == 32 && t.len() == 32 && t.iter().all(Option::is_some))
    );
    // (what, the text replaced, its replacement)
    let client_side: &[(&str, &str, &str)] = &[
        (
            "the issue's first-token timeout, 1h -> 48h",
            r#"first_token = "1h""#,
            r#"first_token = "48h""#,
        ),
        (
            "every timeout",
            r#"timeouts = { connect = "5s", first_token = "1h", idle = "1m", total = "2h" }"#,
            r#"timeouts = { connect = "1s", first_token = "2s", idle = "3s", total = "4s" }"#,
        ),
        (
            "limits",
            "limits = { max_events = 100000 }",
            "limits = { max_events = 5, max_line_bytes = 4096, max_response_bytes = 65536, max_error_body_bytes = 64 }",
        ),
        (
            "cold connections",
            "runs = 2\n",
            "runs = 2\ncold_connections = true\n",
        ),
        (
            "more runs (the first two compared)",
            "runs = 2\n",
            "runs = 3\n",
        ),
        ("window", r#"window = "1s""#, r#"window = "5s""#),
        (
            "target base_url",
            "http://127.0.0.1:9/v1",
            "http://10.1.2.3:8000/v1",
        ),
        ("target api_key_env", "ISSUE_40_KEY", "OTHER_KEY"),
        (
            "target headers",
            r#"headers = { x-team = "bench" }"#,
            r#"headers = { x-team = "other", x-more = "1" }"#,
        ),
        (
            "target metrics_url",
            "http://127.0.0.1:9/metrics",
            "http://127.0.0.1:10/metrics",
        ),
        (
            "target tls_insecure",
            "dialect = \"vllm\"\n",
            "dialect = \"vllm\"\ntls_insecure = true\n",
        ),
        (
            "target gpu_ids",
            "dialect = \"vllm\"\n",
            "dialect = \"vllm\"\ngpu_ids = [\"0\", \"1\"]\n",
        ),
        ("target name", "[targets.a]", "[targets.b]"),
        (
            "model name (served name kept)",
            "[models.m]",
            "[models.other]",
        ),
        (
            "model weights and size",
            "[models.m]\n",
            "[models.m]\nweights = \"/models/x\"\nparams_b = 8.0\n",
        ),
        (
            "slo",
            r#"ttft = "p90 < 300ms""#,
            "ttft = \"p99 < 1s\"\ne2e = \"p50 < 2s\"\nerror_rate = \"< 5%\"",
        ),
        (
            "goodput",
            r#"ttft = "500ms""#,
            "ttft = \"2s\"\ntpot = \"50ms\"\ne2e = \"9s\"",
        ),
        (
            "cost",
            "gpu_hour_usd = 2.5",
            "gpu_hour_usd = 9.0\ngpus = 8\nkwh_usd = 0.3",
        ),
        (
            "telemetry",
            "gpu = \"off\"\ninterval = \"100ms\"",
            "gpu = \"auto\"\ninterval = \"1s\"\nserver_metrics = false\nscrape_interval = \"2s\"",
        ),
        (
            "validity",
            "min_requests = 10",
            "min_requests = 99\nmin_duration = \"1s\"\nmax_rate_gap = \"5%\"\npercentile_sample_check = false",
        ),
        (
            "regression",
            r#"noise = "10%" }]"#,
            "noise = \"3%\" }]\nconfidence = \"99%\"\nmin_runs = 5\nbaseline = \"elsewhere.json\"",
        ),
        (
            "spec name and description",
            "name = \"issue-40\"\ndescription = \"what a point sends\"",
            "name = \"renamed\"\ndescription = \"other words\"",
        ),
    ];
    for (what, from, to) in client_side {
        assert!(EVERY_KEY.contains(from), "{what}: {from:?} is in the spec");
        let (got, compiled) = sent(dir.path(), &EVERY_KEY.replacen(from, to, 1), 2);
        assert_ne!(compiled, base_compiled, "{what}: the edit changes the spec");
        assert_eq!(got.len(), base.len(), "{what}: the same points");
        for (p, (b, g)) in base.iter().zip(&got).enumerate() {
            assert_eq!(g.len(), 2, "{what}");
            for (run, (b, g)) in b.iter().zip(g).enumerate() {
                assert!(b.0 == g.0, "{what}: point {p} run {run}: other bodies");
                assert_eq!(b.1, g.1, "{what}: point {p} run {run}: other arrivals");
            }
        }
    }
    // The control: what defines the requests changes them.
    let other_seed = sent(dir.path(), &EVERY_KEY.replace("seed = 7", "seed = 8"), 2).0;
    for (p, (b, g)) in base.iter().zip(&other_seed).enumerate() {
        assert!(b[0].0 != g[0].0, "seed: point {p} sends other bodies");
        assert_ne!(b[0].1, g[0].1, "seed: point {p} has other arrivals");
    }
    let lengths = sent(
        dir.path(),
        &EVERY_KEY.replace("median = 200", "median = 300"),
        2,
    )
    .0;
    assert!(base[0][0].0 != lengths[0][0].0, "the workload's lengths");
    let served = sent(dir.path(), &EVERY_KEY.replace("org/model", "org/other"), 2).0;
    assert!(base[1][0].0 != served[1][0].0, "the served name");
    let rate = sent(dir.path(), &EVERY_KEY.replace("20/s", "30/s"), 2).0;
    assert_ne!(base[1][0].1, rate[1][0].1, "the rate");
}

fn run_binary(spec: &Path, out: &Path) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("run")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        o.status.success() || o.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap()
}

#[test]
fn two_processes_send_the_same_workload_and_record_its_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let spec42 = sim_spec(dir.path(), 42);
    let a = run_binary(&spec42, &dir.path().join("a"));
    let b = run_binary(&spec42, &dir.path().join("b"));
    let c = run_binary(&sim_spec(dir.path(), 43), &dir.path().join("c"));
    let sha = |r: &serde_json::Value, i: usize| {
        r["points"][i]["workload"]["sha256"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for i in 0..2 {
        assert_eq!(sha(&a, i), sha(&b, i), "point {i}: same spec and seed");
        assert_ne!(sha(&a, i), sha(&c, i), "point {i}: another seed");
        assert_eq!(a["points"][i]["workload"]["lengths"], "tokenizer");
    }
    assert_ne!(sha(&a, 0), sha(&a, 1));
    // Which point is which: the matrix keeps the spec's order.
    let synth = &a["points"][0];
    assert_eq!(synth["axes"]["workload"], "synth");
    let t = &synth["merged"]["tokens"];
    assert_eq!(t["requested_input"]["count"], 48);
    assert!(
        t["requested_input"]["min"].as_f64().unwrap() >= 65.0,
        "BOS + prefix"
    );
    assert!(t["requested_input"]["max"].as_f64().unwrap() <= 800.0);
    let out = &t["requested_output"];
    assert!(out["min"].as_f64().unwrap() >= 4.0 && out["max"].as_f64().unwrap() <= 12.0);
    let data = &a["points"][1];
    assert_eq!(data["axes"]["workload"], "data");
    assert_eq!(
        data["workload"]["dataset"],
        serde_json::json!({"read": 5, "used": 2, "filtered": 1, "unusable": 2})
    );
    assert!(
        data["merged"]["tokens"]["requested_input"]["max"]
            .as_f64()
            .unwrap()
            <= 30.0
    );
}

#[test]
fn a_malformed_dataset_stops_the_run_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let text = SIM_SPEC
        .replace("SEED", "1")
        .replace("TOKENIZER", &tokenizer_path().display().to_string())
        .replace("format = \"sharegpt\"", "format = \"jsonl\"")
        .replace(
            "DATASET",
            &fixtures()
                .join("datasets/bad-type.jsonl")
                .display()
                .to_string(),
        );
    let spec = dir.path().join("bad.toml");
    std::fs::write(&spec, text).unwrap();
    let out = dir.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("run")
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad-type.jsonl:3: unexpected JSON: invalid type: string \"ten\", expected u32 (column 38)"),
        "{stderr}"
    );
    assert!(!out.join("results.json").exists(), "no point ran");
}

#[test]
fn a_missing_tokenizer_is_a_spec_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(
        &path,
        "name = \"t\"\n[targets.sim]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n[models.m]\npreset = \"llama-3.1-8b\"\ntokenizer = \"nope/tokenizer.json\"\n[workloads.w]\ninput_tokens = 8\noutput_tokens = 8\n[load]\nconcurrency = 1\nrequests = 1\n",
    )
    .unwrap();
    let e = infer_bench::spec::load(&path).unwrap_err().to_string();
    let e = e.replace(&dir.path().display().to_string(), "DIR");
    assert!(
        e.starts_with("error: DIR/spec.toml:7:13: models.m.tokenizer: cannot read tokenizer DIR/nope/tokenizer.json: No such file or directory"),
        "{e}"
    );
    assert!(
        e.ends_with(
            "hint: give the path of a Hugging Face tokenizer.json, relative to the spec file"
        ),
        "{e}"
    );
}
