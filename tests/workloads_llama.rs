//! Exact prompt lengths against a real server: llama.cpp's `llama-server`
//! with the tiny GGUF models `scripts/setup-llama` builds (llama's 32000-token
//! SentencePiece vocabulary). The model's vocabulary is read from the GGUF
//! file and turned into a Hugging Face tokenizer.json (a BPE whose merges are
//! ranked by the merged piece's score, which is how SentencePiece BPE and
//! llama.cpp's SPM tokenizer merge), then a spec whose model points at that
//! file runs completions of exact lengths through the ordinary `run` path.
//! The server's `usage.prompt_tokens` must equal every requested length.
//!
//! BOS: llama-server adds `<s>` to a completions prompt and counts it in
//! `usage.prompt_tokens`; the tokenizer.json's post-processor adds it too,
//! so a prompt of N tokens is BOS plus N - 1 tokens of text, and length 1 is
//! BOS alone (an empty prompt).
//!
//! The server comes from `$INFER_BENCH_LLAMA_DIR` (default `target/llama`
//! in the repository). Without it the test fails, unless
//! `INFER_BENCH_SKIP_LLAMA=1` says to skip it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use infer_bench::plan::Plan;
use infer_bench::run::Interrupt;
use infer_bench::run::{RunOptions, run_plan};
use infer_bench::workload::TokenCounter;

fn llama_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("INFER_BENCH_LLAMA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/llama"));
    let ok = dir.join("bin/llama-server").is_file() && dir.join("models/tiny-f16.gguf").is_file();
    if ok {
        return Some(dir);
    }
    if std::env::var("INFER_BENCH_SKIP_LLAMA").as_deref() == Ok("1") {
        eprintln!(
            "skipped: no llama-server in {} (INFER_BENCH_SKIP_LLAMA=1)",
            dir.display()
        );
        return None;
    }
    panic!(
        "no llama-server at {}/bin/llama-server with models/tiny-f16.gguf: run scripts/setup-llama, \
         set INFER_BENCH_LLAMA_DIR to a directory it built, or set INFER_BENCH_SKIP_LLAMA=1 to skip",
        dir.display()
    );
}

// ---------------------------------------------------------------------------
// The vocabulary of a GGUF file.

struct Vocab {
    tokens: Vec<String>,
    scores: Vec<f32>,
    types: Vec<i32>,
    bos: u32,
}

struct Reader<'a>(&'a [u8], usize);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let s = &self.0[self.1..self.1 + n];
        self.1 += n;
        s
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
    fn string(&mut self) -> String {
        let n = self.u64() as usize;
        String::from_utf8(self.take(n).to_vec()).unwrap()
    }
}

#[derive(Debug)]
enum Value {
    Num(f64),
    Str(String),
    Array(Vec<Value>),
}

fn value(r: &mut Reader, ty: u32) -> Value {
    match ty {
        0 | 1 | 7 => Value::Num(r.take(1)[0] as i8 as f64),
        2 | 3 => Value::Num(i16::from_le_bytes(r.take(2).try_into().unwrap()) as f64),
        4 => Value::Num(r.u32() as f64),
        5 => Value::Num(r.u32() as i32 as f64),
        6 => Value::Num(f32::from_le_bytes(r.take(4).try_into().unwrap()) as f64),
        8 => Value::Str(r.string()),
        9 => {
            let et = r.u32();
            let n = r.u64();
            Value::Array((0..n).map(|_| value(r, et)).collect())
        }
        10 | 11 => Value::Num(r.u64() as f64),
        12 => Value::Num(f64::from_le_bytes(r.take(8).try_into().unwrap())),
        t => panic!("unknown GGUF value type {t}"),
    }
}

fn read_vocab(path: &Path) -> Vocab {
    let bytes = std::fs::read(path).unwrap();
    let mut r = Reader(&bytes, 0);
    assert_eq!(r.take(4), b"GGUF");
    let _version = r.u32();
    let _tensors = r.u64();
    let kvs = r.u64();
    let mut kv = BTreeMap::new();
    for _ in 0..kvs {
        let key = r.string();
        let ty = r.u32();
        kv.insert(key, value(&mut r, ty));
    }
    let num = |v: &Value| match v {
        Value::Num(x) => *x,
        other => panic!("{other:?}"),
    };
    assert!(matches!(kv.get("tokenizer.ggml.model"), Some(Value::Str(m)) if m == "llama"));
    let bos = num(&kv["tokenizer.ggml.bos_token_id"]) as u32;
    let mut array = |k: &str| match kv.remove(k) {
        Some(Value::Array(v)) => v,
        other => panic!("{k}: {other:?}"),
    };
    let tokens = array("tokenizer.ggml.tokens")
        .into_iter()
        .map(|v| match v {
            Value::Str(s) => s,
            other => panic!("{other:?}"),
        })
        .collect();
    let scores = array("tokenizer.ggml.scores")
        .iter()
        .map(|v| num(v) as f32)
        .collect();
    let types = array("tokenizer.ggml.token_type")
        .iter()
        .map(|v| num(v) as i32)
        .collect();
    Vocab {
        tokens,
        scores,
        types,
        bos,
    }
}

/// A Llama-style tokenizer.json from a SentencePiece vocabulary: "▁" for
/// spaces and a leading "▁", BPE with byte fallback, merges ranked by the
/// merged piece's score (higher first), BOS added by the post-processor.
fn tokenizer_json(v: &Vocab) -> String {
    use serde_json::json;
    const NORMAL: i32 = 1;
    let index: std::collections::HashMap<&str, usize> = v
        .tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    let mut merges: Vec<(f32, usize, usize, &str, &str)> = Vec::new();
    for (id, t) in v.tokens.iter().enumerate() {
        if v.types[id] != NORMAL {
            continue;
        }
        for (cut, _) in t.char_indices().skip(1) {
            let (l, r) = t.split_at(cut);
            if let (Some(&li), Some(_)) = (index.get(l), index.get(r)) {
                merges.push((v.scores[id], id, li, l, r));
            }
        }
    }
    merges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let vocab: serde_json::Map<String, serde_json::Value> = v
        .tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let added: Vec<serde_json::Value> = (0..v.tokens.len())
        .filter(|i| matches!(v.types[*i], 2 | 3))
        .map(|i| {
            json!({"id": i, "content": v.tokens[i], "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let bos = &v.tokens[v.bos as usize];
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}
        ]},
        "pre_tokenizer": null,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos.as_str(): {"id": bos, "ids": [v.bos], "tokens": [bos]}}
        },
        "decoder": null,
        "model": {
            "type": "BPE", "dropout": null, "unk_token": v.tokens[0], "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
            "vocab": vocab,
            "merges": merges.iter().map(|m| json!([m.3, m.4])).collect::<Vec<_>>()
        }
    })
    .to_string()
}

// ---------------------------------------------------------------------------
// The server.

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts llama-server on a free port and waits for its "listening on"
/// line; the server is stopped when the returned guard drops, panics
/// included.
fn start(dir: &Path) -> Server {
    start_with(dir, &[])
}

/// [`start`], with more arguments for llama-server.
fn start_with(dir: &Path, extra: &[&str]) -> Server {
    start_model(dir, "tiny-f16", extra)
}

/// [`start_with`] on `models/{model}.gguf`.
fn start_model(dir: &Path, model: &str, extra: &[&str]) -> Server {
    let child = Command::new(dir.join("bin/llama-server"))
        .arg("-m")
        .arg(dir.join(format!("models/{model}.gguf")))
        .args(["--host", "127.0.0.1", "--port", "0"])
        .args(["-np", "4", "-cb", "-c", "4096"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("llama-server starts");
    let mut server = Server { child, port: 0 };
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    for pipe in [
        Box::new(server.child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(server.child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        // Drains the log to the end so the server never blocks writing it.
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut log = Vec::new();
    while Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("llama-server exited ({status}):\n{}", log.join("\n"));
            }
            continue;
        };
        if let Some(rest) = line.split("listening on http://127.0.0.1:").nth(1) {
            server.port = rest
                .trim()
                .trim_end_matches('/')
                .parse()
                .unwrap_or_else(|_| panic!("no port in {line:?}"));
            return server;
        }
        log.push(line);
    }
    panic!(
        "llama-server was not ready within 60 s:\n{}",
        log.join("\n")
    );
}

#[test]
fn llama_server_counts_exactly_the_requested_prompt_lengths() {
    let Some(dir) = llama_dir() else { return };
    let vocab = read_vocab(&dir.join("models/tiny-f16.gguf"));
    assert_eq!(vocab.tokens.len(), 32000);
    let tmp = tempfile::tempdir().unwrap();
    let tok_path = tmp.path().join("tokenizer.json");
    std::fs::write(&tok_path, tokenizer_json(&vocab)).unwrap();
    let tok = TokenCounter::load(&tok_path).unwrap();
    assert_eq!(tok.specials(), 1, "BOS");
    assert_eq!(
        tok.tokens("Hello world", true),
        ["<s>", "▁Hello", "▁world"],
        "the Llama vocabulary, BOS first"
    );

    let server = start(&dir);
    let lengths = [1u32, 2, 7, 100, 1000];
    let mut workloads = String::new();
    for n in lengths {
        workloads.push_str(&format!(
            "[workloads.n{n}]\napi = \"completions\"\ninput_tokens = {n}\noutput_tokens = 4\n\n"
        ));
    }
    let spec_text = format!(
        r#"
name = "llama-lengths"
seed = 3
[targets.llama]
kind = "openai"
base_url = "http://127.0.0.1:{port}/v1"
# One connection per request: llama-server now and then closes a kept-alive
# connection just as the next request is written (about one run in seven
# here), which is not what this test is about.
headers = {{ Connection = "close" }}
[models.tiny]
served_name = "tiny"
tokenizer = "{tok}"
{workloads}
[load]
concurrency = 2
requests = 4
timeouts = {{ first_token = "60s", total = "120s" }}
[matrix]
workload = [{list}]
"#,
        port = server.port,
        tok = tok_path.display(),
        list = lengths
            .iter()
            .map(|n| format!("\"n{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let spec_path = tmp.path().join("spec.toml");
    std::fs::write(&spec_path, spec_text).unwrap();
    let spec = infer_bench::spec::load(&spec_path).unwrap_or_else(|e| panic!("{e}"));
    let plan = Plan::build(&spec).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = RunOptions {
        requests_jsonl: true,
        ..RunOptions::new(tmp.path().join("out"))
    };
    let results = run_plan(&spec, &plan, &opts, &rt, Arc::new(Interrupt::default())).unwrap();
    let lines = std::fs::read_to_string(tmp.path().join("out/requests.jsonl")).unwrap();
    let mut seen = 0;
    for line in lines.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(
            r["input_tokens"], r["input_tokens_requested"],
            "the server counts what was requested: {r}"
        );
        seen += 1;
    }
    assert_eq!(seen, 4 * lengths.len());
    for (p, n) in results.points.iter().zip(lengths) {
        let t = &p.merged.tokens;
        eprintln!(
            "{}: requested {n}, server counted {:?} (exact share {:?}, every prompt verified: {})",
            p.slug,
            t.reported_input_mean,
            t.reported_input_exact,
            p.workload.as_ref().unwrap().every_prompt_verified
        );
        assert_eq!(p.merged.requests.succeeded, 4, "{}", p.slug);
        assert_eq!(t.requested_input.min, n as f64, "{}", p.slug);
        assert_eq!(t.reported_input_mean, Some(n as f64), "{}", p.slug);
        assert_eq!(t.reported_input_exact, Some(1.0), "{}", p.slug);
        assert_eq!(p.workload.as_ref().unwrap().lengths, "tokenizer");
    }
}

/// Embeddings against llama-server (`--embeddings --pooling mean`): batches
/// of inputs of exact lengths, every answer's vectors checked, and the
/// server's `usage.prompt_tokens` equal to ours plus the one BOS llama.cpp
/// puts before each input.
#[test]
fn llama_server_embeds_batches_and_counts_their_tokens() {
    let Some(dir) = llama_dir() else { return };
    let vocab = read_vocab(&dir.join("models/tiny-f16.gguf"));
    let tmp = tempfile::tempdir().unwrap();
    let tok_path = tmp.path().join("tokenizer.json");
    std::fs::write(&tok_path, tokenizer_json(&vocab)).unwrap();
    let server = start_with(
        &dir,
        &[
            "--embeddings",
            "--pooling",
            "mean",
            "-ub",
            "4096",
            "-b",
            "4096",
        ],
    );
    let spec_text = format!(
        r#"
name = "llama-embeddings"
seed = 3
[targets.llama]
kind = "openai"
base_url = "http://127.0.0.1:{port}/v1"
headers = {{ Connection = "close" }}
[models.tiny]
served_name = "tiny"
tokenizer = "{tok}"
[workloads.f]
api = "embeddings"
input_tokens = "uniform(5, 40)"
batch = 3
[workloads.b]
api = "embeddings"
input_tokens = 17
batch = 2
encoding_format = "base64"
[load]
concurrency = 2
requests = 6
[matrix]
workload = ["f", "b"]
"#,
        port = server.port,
        tok = tok_path.display(),
    );
    let spec_path = tmp.path().join("spec.toml");
    std::fs::write(&spec_path, spec_text).unwrap();
    let spec = infer_bench::spec::load(&spec_path).unwrap_or_else(|e| panic!("{e}"));
    let plan = Plan::build(&spec).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = RunOptions {
        requests_jsonl: true,
        ..RunOptions::new(tmp.path().join("out"))
    };
    let results = run_plan(&spec, &plan, &opts, &rt, Arc::new(Interrupt::default())).unwrap();
    let lines = std::fs::read_to_string(tmp.path().join("out/requests.jsonl")).unwrap();
    let mut seen = 0;
    for line in lines.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(r["error"].is_null(), "{r}");
        let point = r["point"].as_str().unwrap();
        let batch = if point.contains(".f.") { 3 } else { 2 };
        let ours = r["input_tokens_requested"].as_u64().unwrap();
        let server = r["input_tokens"].as_u64().unwrap();
        assert_eq!(server, ours + batch, "one BOS per input: {r}");
        seen += 1;
    }
    assert_eq!(seen, 12);
    for p in &results.points {
        let s = &p.merged;
        assert_eq!(s.requests.succeeded, 6, "{}", p.slug);
        assert_eq!(s.tokens.output_total, 0);
        assert!(s.tokens.reported_input_mean.is_some(), "usage came back");
        assert!(s.inputs_per_s.unwrap() > 0.0);
        assert!(!s.latency_ms.contains_key("ttft"));
    }
}

/// Rerank against llama-server (`--reranking`, the tiny Qwen3 reranker
/// `scripts/setup-llama` writes): one score per document, checked, and the
/// server's `usage.prompt_tokens` exactly what a cross-encoder reads: per
/// document, BOS, the query and the document.
#[test]
fn llama_server_reranks_and_counts_every_query_document_pair() {
    let Some(dir) = llama_dir() else { return };
    assert!(
        dir.join("models/tiny-rerank.gguf").is_file(),
        "no models/tiny-rerank.gguf in {}: run scripts/setup-llama",
        dir.display()
    );
    let vocab = read_vocab(&dir.join("models/tiny-f16.gguf"));
    let tmp = tempfile::tempdir().unwrap();
    let tok_path = tmp.path().join("tokenizer.json");
    std::fs::write(&tok_path, tokenizer_json(&vocab)).unwrap();
    let server = start_model(
        &dir,
        "tiny-rerank",
        &["--reranking", "-ub", "4096", "-b", "4096"],
    );
    let (query, documents) = (9u64, 5u64);
    let spec_text = format!(
        r#"
name = "llama-rerank"
seed = 3
[targets.llama]
kind = "openai"
base_url = "http://127.0.0.1:{port}/v1"
headers = {{ Connection = "close" }}
[models.tiny]
served_name = "tiny"
tokenizer = "{tok}"
[workloads.r]
api = "rerank"
input_tokens = {query}
documents = {documents}
document_tokens = "uniform(4, 30)"
[load]
concurrency = 2
requests = 6
"#,
        port = server.port,
        tok = tok_path.display(),
    );
    let spec_path = tmp.path().join("spec.toml");
    std::fs::write(&spec_path, spec_text).unwrap();
    let spec = infer_bench::spec::load(&spec_path).unwrap_or_else(|e| panic!("{e}"));
    let plan = Plan::build(&spec).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = RunOptions {
        requests_jsonl: true,
        ..RunOptions::new(tmp.path().join("out"))
    };
    let results = run_plan(&spec, &plan, &opts, &rt, Arc::new(Interrupt::default())).unwrap();
    let lines = std::fs::read_to_string(tmp.path().join("out/requests.jsonl")).unwrap();
    let mut seen = 0;
    for line in lines.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(r["error"].is_null(), "{r}");
        // Ours: the query once and every document; the server's: BOS and
        // the query with each document.
        let ours = r["input_tokens_requested"].as_u64().unwrap();
        let server = r["input_tokens"].as_u64().unwrap();
        assert_eq!(server, ours + documents + (documents - 1) * query, "{r}");
        seen += 1;
    }
    assert_eq!(seen, 6);
    let s = &results.points[0].merged;
    assert_eq!(s.requests.succeeded, 6);
    assert!(s.documents_per_s.unwrap() > 0.0);
    assert!(s.document_tokens_per_s.unwrap() > 0.0);
    assert!(!s.latency_ms.contains_key("ttft"));
}

/// The Responses and Messages APIs against llama-server's own
/// `/v1/responses` and `/v1/messages`: prompts of exact lengths sent by
/// chat, responses and messages; llama-server applies the same chat
/// template to each, so its own count of the prompt agrees for all three
/// (Anthropic-style usage splits it into uncached and cached input tokens,
/// which are added back), and every request's output is the eight tokens
/// asked for (`ignore_eos` goes to llama.cpp, which names itself).
#[test]
fn llama_server_counts_the_same_prompt_by_chat_responses_and_messages() {
    let Some(dir) = llama_dir() else { return };
    let vocab = read_vocab(&dir.join("models/tiny-f16.gguf"));
    let tmp = tempfile::tempdir().unwrap();
    let tok_path = tmp.path().join("tokenizer.json");
    std::fs::write(&tok_path, tokenizer_json(&vocab)).unwrap();
    let server = start(&dir);
    let apis = ["chat", "responses", "messages"];
    let mut workloads = String::new();
    for api in apis {
        workloads.push_str(&format!(
            "[workloads.{api}]\napi = \"{api}\"\ninput_tokens = 40\noutput_tokens = 8\nignore_eos = true\n\n"
        ));
    }
    let spec_text = format!(
        r#"
name = "llama-apis"
seed = 3
[targets.llama]
kind = "openai"
base_url = "http://127.0.0.1:{port}/v1"
headers = {{ Connection = "close" }}
[models.tiny]
served_name = "tiny"
tokenizer = "{tok}"
{workloads}
[load]
concurrency = 2
requests = 4
timeouts = {{ first_token = "60s", total = "120s" }}
[matrix]
workload = ["chat", "responses", "messages"]
"#,
        port = server.port,
        tok = tok_path.display(),
    );
    let spec_path = tmp.path().join("spec.toml");
    std::fs::write(&spec_path, spec_text).unwrap();
    let spec = infer_bench::spec::load(&spec_path).unwrap_or_else(|e| panic!("{e}"));
    let plan = Plan::build(&spec).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = RunOptions {
        requests_jsonl: true,
        ..RunOptions::new(tmp.path().join("out"))
    };
    let results = run_plan(&spec, &plan, &opts, &rt, Arc::new(Interrupt::default())).unwrap();
    let lines = std::fs::read_to_string(tmp.path().join("out/requests.jsonl")).unwrap();
    let mut seen = 0;
    for line in lines.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(r["output_tokens"], 8, "{r}");
        assert_eq!(r["token_source"], "usage", "{r}");
        seen += 1;
    }
    assert!(seen >= 12, "{seen} requests logged");
    let mut counted = Vec::new();
    for (p, api) in results.points.iter().zip(apis) {
        let t = &p.merged.tokens;
        eprintln!(
            "{api}: requested 40 tokens of text, llama-server counted {:?} with the chat template",
            t.reported_input_mean
        );
        assert_eq!(p.merged.requests.succeeded, 4, "{api}");
        assert!(
            p.merged.latency_ms.contains_key("ttft"),
            "{api}: streamed, so TTFT"
        );
        counted.push(
            t.reported_input_mean
                .unwrap_or_else(|| panic!("{api}: no usage")),
        );
    }
    // Each point's prompts are its own (seeded by the point), so where the
    // template meets the text a piece may merge differently: within a
    // token of each other on average, and all above the text's 40.
    assert!(
        counted.iter().all(|&c| c > 40.0),
        "the template adds tokens: {counted:?}"
    );
    for (api, c) in apis.iter().zip(&counted).skip(1) {
        assert!(
            (c - counted[0]).abs() <= 1.0,
            "{api} counted as chat does: {counted:?}"
        );
    }
}

/// Quality against a real server: the same prompts answered greedily by
/// the tiny model at f32 (the reference), f16 and q8_0, each its own
/// llama-server, with the top 5 log-probabilities per token. The f32
/// server asked again agrees with itself exactly (KL 0); the precisions
/// differ from it by amounts measured here, and the coarser one (q8_0)
/// diverges more than f16.
#[test]
fn llama_server_answers_agree_with_the_reference_by_precision() {
    use infer_bench::judge::quality::{Unit, agreement};
    use infer_bench::protocol::answer::{self, AnswerApi, AnswerRequest};
    let Some(dir) = llama_dir() else { return };
    let words = [
        "river", "seven", "blue", "market", "winter", "engine", "quiet", "paper", "north",
        "garden", "signal", "copper",
    ];
    let prompts: Vec<String> = (0..16)
        .map(|i| {
            let w = |k: usize| words[(i * 5 + k * 7) % words.len()];
            format!(
                "Tell me about the {} {} near the {} {}.",
                w(0),
                w(1),
                w(2),
                w(3)
            )
        })
        .collect();
    let rt = infer_bench_testkit::runtime();
    let answers = |model: &str, rounds: usize| {
        let server = start_model(&dir, model, &[]);
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], server.port).into();
        (0..rounds)
            .map(|_| {
                prompts
                    .iter()
                    .map(|p| {
                        let body = AnswerRequest {
                            api: AnswerApi::Chat,
                            model: "tiny",
                            prompt: p,
                            max_tokens: 24,
                            top_logprobs: 5,
                            seed: 1,
                        }
                        .body();
                        let w = rt.block_on(infer_bench_testkit::wire::request(
                            addr,
                            "POST",
                            "/v1/chat/completions",
                            std::str::from_utf8(&body).unwrap(),
                        ));
                        assert_eq!(w.status, 200, "{model}: {}", w.body_str());
                        answer::read(&w.body()).unwrap_or_else(|e| panic!("{model}: {}", e.0))
                    })
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    let f32s = answers("tiny-f32", 2);
    let f16 = answers("tiny-f16", 1).remove(0);
    let q8 = answers("tiny-q8_0", 1).remove(0);
    for a in f32s.iter().flatten().chain(&f16).chain(&q8) {
        assert_eq!(a.tokens.len(), 24, "every token with its logprobs: {a:?}");
        assert!(a.tokens.iter().all(|t| t.top.len() == 5), "{a:?}");
    }
    let same = agreement(&f32s[0], &f32s[1]).unwrap();
    let g16 = agreement(&f32s[0], &f16).unwrap();
    let g8 = agreement(&f32s[0], &q8).unwrap();
    eprintln!("f32 again: {same:?}\nf16: {g16:?}\nq8_0: {g8:?}");
    assert_eq!(same.unit, Unit::Tokens);
    assert_eq!(same.exact_match, 1.0);
    assert_eq!(same.token_agreement, 1.0);
    assert_eq!(same.first_diff_mean, 24.0);
    assert_eq!(same.positions, 16 * 24);
    assert!(same.kl_mean.unwrap() < 1e-9, "{same:?}");
    // Measured once on this model (2-core x86-64, llama.cpp of
    // scripts/setup-llama): f16 answered all 16 prompts as f32 did, KL
    // 1.6e-7 nats per token; q8_0 none, leaving f32's answer after 3.4
    // tokens on average, KL 3.1e-4. The random tiny model's next-token
    // distributions are flat, so q8_0's small shifts flip its choices.
    // Held with room for another CPU's rounding.
    let (kl16, kl8) = (g16.kl_mean.unwrap(), g8.kl_mean.unwrap());
    assert!(g16.exact_match >= 0.75 && kl16 < 1e-5, "{g16:?}");
    assert!(
        g8.exact_match <= 0.25 && g8.first_diff_mean < 12.0,
        "{g8:?}"
    );
    assert!(kl8 > 1e-5 && kl8 > 10.0 * kl16, "{g8:?} {g16:?}");
}
