//! A real server in the suite: llama.cpp's llama-server, built from source
//! by `scripts/setup-llama` (CPU only) with tiny random-weight GGUF models.
//! infer-bench launches one server per precision, measures it, stops it,
//! and copes with servers that are missing, never ready, or die mid-point.
//!
//! The build is found through INFER_BENCH_LLAMA_DIR (set by scripts/test)
//! or at target/llama; without it these tests fail and say how to build it,
//! unless INFER_BENCH_SKIP_LLAMA=1 opts out explicitly.

use std::path::{Path, PathBuf};
use std::process::Command;

fn llama_dir() -> Option<PathBuf> {
    if std::env::var_os("INFER_BENCH_SKIP_LLAMA").is_some() {
        eprintln!("INFER_BENCH_SKIP_LLAMA is set: skipping the llama.cpp tests");
        return None;
    }
    let dir = std::env::var_os("INFER_BENCH_LLAMA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/llama"));
    assert!(
        dir.join("bin/llama-server").is_file() && dir.join("models/tiny-f16.gguf").is_file(),
        "llama-server is not built at {}: run scripts/setup-llama (or scripts/test, which does), \
         or set INFER_BENCH_SKIP_LLAMA=1 to skip these tests",
        dir.display()
    );
    Some(std::path::absolute(dir).unwrap())
}

fn run(spec: &Path, out: &Path, llama: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("run")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .arg("--allow-launch")
        .args(extra)
        .env("INFER_BENCH_LLAMA_DIR", llama)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn results(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
}

/// Processes whose command line mentions `needle` (from /proc).
fn processes_with(needle: &str) -> Vec<String> {
    infer_bench_testkit::procs::with_cmdline(needle)
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn one_server_per_precision_started_once_and_stopped() {
    let _serial = infer_bench_testkit::timing::exclusive();
    let Some(llama) = llama_dir() else { return };
    let out = tempfile::tempdir().unwrap();
    let (code, stderr) = run(
        &root().join("tests/specs/llama.toml"),
        out.path(),
        &llama,
        &["--requests"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let r = results(out.path());
    assert_eq!(r["complete"], true);
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 6);
    for p in points {
        assert_eq!(p["status"], "complete", "{}", p["slug"]);
        let m = &p["merged"];
        assert_eq!(
            m["requests"]["succeeded"], 10,
            "{}: {}",
            p["slug"], m["errors"]
        );
        // ignore_eos gives exactly the requested output, counted from usage.
        assert_eq!(m["tokens"]["output_total"], 320);
        assert_eq!(m["tokens"]["output_source"]["usage"], 10);
        let server = &p["server"];
        assert_eq!(server["model"], "tiny");
        assert_eq!(server["name"], "llama.cpp");
        // The real llama-server names itself in /v1/models, and so gets
        // ignore_eos (the exact output above says it was honoured).
        assert_eq!(server["dialect"], "llama.cpp");
        assert_eq!(server["dialect_from"], "server");
        let cmd: Vec<&str> = server["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(cmd[0].ends_with("bin/llama-server"));
        assert!(cmd.iter().any(|a| a.ends_with(".gguf")));
    }
    // One log per (target, model, precision) group, each server started once.
    let mut logs: Vec<String> = std::fs::read_dir(out.path().join("servers"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    logs.sort();
    assert_eq!(
        logs,
        vec![
            "llama.tiny.f16.log",
            "llama.tiny.f32.log",
            "llama.tiny.q8_0.log"
        ]
    );
    for l in &logs {
        let text = std::fs::read_to_string(out.path().join("servers").join(l)).unwrap();
        assert_eq!(
            text.matches("listening on http").count(),
            1,
            "{l}: one start"
        );
    }
    // Quality beside speed: each server answered the 40 quality prompts
    // once, before its points (the timed counts above hold only the
    // points' requests), with every token's log-probabilities. Measured
    // once (2-core x86-64, llama.cpp of scripts/setup-llama): f16 answered
    // every prompt as f32 did; q8_0 3 of 40, leaving f32's answer after
    // 18.0 of 24 tokens on average, KL 3.3e-4 nats. Held with room for
    // another CPU's rounding.
    let quality = |precision: &str| -> serde_json::Value {
        points
            .iter()
            .find(|p| p["config"]["precision"]["name"] == precision)
            .unwrap()["quality"]
            .clone()
    };
    let reference = quality("f32");
    assert_eq!(reference["is_reference"], true, "{reference}");
    assert_eq!(reference["answered"], 40, "{reference}");
    let (f16, q8) = (
        quality("f16")["agreement"].clone(),
        quality("q8_0")["agreement"].clone(),
    );
    assert_eq!(f16["unit"], "tokens", "{f16}");
    assert_eq!(f16["compared"], 40, "{f16}");
    let num = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap();
    assert!(
        num(&f16, "exact_match") >= 0.75 && num(&f16, "kl_mean") < 1e-5,
        "{f16}"
    );
    assert!(
        num(&q8, "exact_match") <= 0.5 && num(&q8, "first_diff_mean") < 23.0,
        "{q8}"
    );
    assert!(
        num(&q8, "token_agreement") < num(&f16, "token_agreement"),
        "{q8} {f16}"
    );
    assert!(
        num(&q8, "kl_mean") > 10.0 * num(&f16, "kl_mean"),
        "{q8} {f16}"
    );
    assert!(
        stderr.contains("llama/tiny/q8_0: quality prompts answered: 40 of 40"),
        "{stderr}"
    );
    // The precisions differ for real: each server loaded its own file.
    let f16 = std::fs::read_to_string(out.path().join("servers/llama.tiny.f16.log")).unwrap();
    assert!(f16.contains("tiny-f16.gguf"));
    // No server is left behind.
    assert!(
        processes_with(&llama.join("bin/llama-server").display().to_string()).is_empty(),
        "a llama-server is still running"
    );
}

#[test]
fn client_timings_agree_with_the_servers_own() {
    let _serial = infer_bench_testkit::timing::exclusive();
    let Some(llama) = llama_dir() else { return };
    // The 8-layer model: slow enough per token to compare like with like.
    let spec = std::fs::read_to_string(root().join("tests/specs/llama.toml"))
        .unwrap()
        .replace("models/tiny-f32.gguf", "models/small-f16.gguf")
        .replace(
            "precision = [\"f32\", \"f16\", \"q8_0\"]\nconcurrency = [1, 2]",
            "precision = [\"f32\"]\nconcurrency = [1]",
        )
        .replace("requests = 10", "requests = 12")
        .replace("output_tokens = 32", "output_tokens = 48");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timing.toml");
    std::fs::write(&path, spec).unwrap();
    let out = dir.path().join("out");
    let (code, stderr) = run(&path, &out, &llama, &["--requests"]);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &serde_json::Value| l["warmup"] == false)
        .collect();
    assert_eq!(lines.len(), 12);
    let mut ttft_gap = Vec::new();
    for l in &lines {
        let t = &l["server_timing"];
        let prompt_ms = t["prompt_ms"]
            .as_f64()
            .expect("llama-server reports its timings");
        let predicted_ms = t["predicted_ms"].as_f64().unwrap();
        let n = t["predicted_n"].as_f64().unwrap();
        let ttft = l["ttft_from_send_ms"].as_f64().unwrap();
        let tpot = l["tpot_ms"].as_f64().unwrap();
        // TPOT: the server generates n tokens in predicted_ms after the
        // first; per gap that is predicted_ms / (n - 1). Within 10% or 0.5 ms.
        let server_tpot = predicted_ms / (n - 1.0);
        assert!(
            (tpot - server_tpot).abs() <= (server_tpot * 0.10).max(0.5),
            "TPOT client {tpot:.3} ms vs server {server_tpot:.3} ms"
        );
        // TTFT: the server's prompt processing, plus HTTP and tokenization,
        // which the client sees and the server's timer does not.
        assert!(
            ttft >= prompt_ms * 0.95,
            "TTFT {ttft:.3} ms below the server's prompt time {prompt_ms:.3} ms"
        );
        ttft_gap.push(ttft - prompt_ms);
    }
    ttft_gap.sort_by(f64::total_cmp);
    let median = ttft_gap[ttft_gap.len() / 2];
    // 5 ms on a quiet machine. On a busy one each hand-off between the
    // threads on that path (the server's HTTP thread to its slot, the
    // slot to the response, the client's read) may wait out another
    // task's time slice: three times what this machine measures for one.
    let lag_ms = infer_bench_testkit::timing::wake_lag(200).as_secs_f64() * 1e3;
    let bound = 5.0 + 3.0 * lag_ms;
    assert!(
        median < bound,
        "client TTFT exceeds the server's prompt time by {median:.2} ms at the median (HTTP + tokenization + first sample), over {bound:.2} ms (5 ms + 3 x this machine's wake lag {lag_ms:.2} ms)"
    );
    eprintln!("TTFT minus the server's prompt time: median {median:.2} ms");
}

#[test]
fn missing_never_ready_and_dying_servers_fail_their_points_and_the_run_goes_on() {
    let _serial = infer_bench_testkit::timing::exclusive();
    let Some(llama) = llama_dir() else { return };
    let server = llama.join("bin/llama-server").display().to_string();
    let model = llama.join("models/tiny-f16.gguf").display().to_string();
    let spec = format!(
        r#"name = "failures"
[targets.missing]
kind = "openai"
launch = {{ command = ["/nonexistent/llama-server", "--port", "{{port}}"] }}
[targets.sleepy]
kind = "openai"
launch = {{ command = ["sleep", "30.25"], startup_timeout = "2s", stop_grace = "1s" }}
[targets.dies]
kind = "openai"
launch = {{ command = ["timeout", "--signal=KILL", "1.5", "{server}", "-m", "{model}", "--port", "{{port}}", "-np", "2", "-t", "1"] }}
[targets.good]
kind = "openai"
launch = {{ command = ["{server}", "-m", "{model}", "--port", "{{port}}", "-np", "2", "-t", "1"] }}
[models.tiny]
[workloads.w]
api = "completions"
input_tokens = 8
output_tokens = 16
ignore_eos = true
[load]
duration = "2s"
timeouts = {{ connect = "1s", first_token = "5s", idle = "2s", total = "10s" }}
[matrix]
target = ["missing", "sleepy", "dies", "good"]
concurrency = [1, 2]
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("failures.toml");
    std::fs::write(&path, spec).unwrap();
    let out = dir.path().join("out");
    let started = std::time::Instant::now();
    let (code, stderr) = run(&path, &out, &llama, &[]);
    assert!(started.elapsed().as_secs() < 60, "nothing hangs");
    assert_eq!(
        code,
        Some(3),
        "servers that fail are infrastructure failures: {stderr}"
    );
    let r = results(&out);
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 8, "every point is accounted for");
    let failure = |target: &str, c: u32| -> String {
        let p = points
            .iter()
            .find(|p| {
                p["config"]["target"]["name"] == target
                    && p["axes"]["concurrency"].as_str() == Some(c.to_string().as_str())
            })
            .unwrap();
        p["failure"].as_str().unwrap_or("").to_string()
    };
    assert!(
        failure("missing", 1)
            .contains("cannot start `/nonexistent/llama-server`: No such file or directory"),
        "{}",
        failure("missing", 1)
    );
    assert!(failure("missing", 2).contains("is it installed and on PATH?"));
    let sleepy = failure("sleepy", 1);
    assert!(
        sleepy.contains("did not answer 200 on http://127.0.0.1:")
            && sleepy.contains("/health within 2s"),
        "{sleepy}"
    );
    // The dying server: whichever point it died in fails with its exit and
    // log tail (a server still shutting down can finish the first point),
    // and the group's later points fail without another start.
    let (d1, d2) = (failure("dies", 1), failure("dies", 2));
    let died = if d1.is_empty() { &d2 } else { &d1 };
    assert!(
        died.contains("the server exited") && died.contains("last lines of"),
        "{d1} / {d2}"
    );
    if !d1.is_empty() {
        assert!(
            d2.contains("the server died during an earlier point"),
            "{d2}"
        );
    }
    // The run went on: the last group ran normally.
    for c in [1, 2] {
        let p = points
            .iter()
            .find(|p| {
                p["config"]["target"]["name"] == "good"
                    && p["axes"]["concurrency"].as_str() == Some(c.to_string().as_str())
            })
            .unwrap();
        assert_eq!(p["status"], "complete");
        assert!(p["merged"]["requests"]["succeeded"].as_u64().unwrap() > 0);
    }
    assert!(
        stderr.contains("error: missing/tiny: the server could not be started")
            || stderr.contains("missing/tiny"),
        "{stderr}"
    );
    assert!(
        processes_with(&model).is_empty(),
        "a llama-server is still running"
    );
    assert!(
        // An argument no other process has: `sleep 300` elsewhere on the
        // machine would match "sleep 30".
        processes_with("sleep 30.25").is_empty(),
        "the never-ready server was stopped"
    );
}

/// The cached prompt tokens llama-server counted over a point, from its
/// own `/metrics` as scraped: the increase since the point's first scrape.
fn cached_tokens(point: &serde_json::Value) -> f64 {
    let c =
        &point["telemetry"]["server_metrics"]["counters"]["llamacpp:prompt_tokens_cached_total"];
    c["values"]
        .as_array()
        .unwrap_or_else(|| panic!("no cached-token counter: {}", point["telemetry"]))
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .fold(0.0, f64::max)
}

/// Issue 42: a server-args sweep of a launched llama-server. Two settings
/// of `--parallel` are two points with their own IDs, each on a server of
/// its own started with its setting (the server's own log says how many
/// slots it made); before every run llama.cpp's slots are erased, which
/// its answers confirm (`n_erased`), and which its `/metrics` show: with
/// the reset, a run's first request finds nothing cached; without it, it
/// reads the shared prefix the previous run left.
#[test]
fn a_server_args_sweep_runs_each_setting_on_its_own_server_and_resets_its_cache() {
    let _serial = infer_bench_testkit::timing::exclusive();
    let Some(llama) = llama_dir() else { return };
    let spec = root().join("tests/specs/llama-server-args.toml");
    let out = tempfile::tempdir().unwrap();
    let (code, stderr) = run(&spec, out.path(), &llama, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let r = results(out.path());
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_ne!(points[0]["id"], points[1]["id"]);
    for (p, np) in points.iter().zip([1, 2]) {
        let name = format!("np{np}");
        assert_eq!(p["status"], "complete", "{}", p["slug"]);
        assert!(
            p["slug"].as_str().unwrap().ends_with(&name),
            "{}",
            p["slug"]
        );
        assert_eq!(p["config"]["server_args"]["name"], name.as_str());
        assert_eq!(p["merged"]["requests"]["succeeded"], 8);
        // The setting went into the command where {server_args} stands.
        let cmd: Vec<&str> = p["server"]["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        // Flags in key order, where the spec wrote "{server_args}": after
        // the port's value, before "-c".
        let flags: Vec<String> = match np {
            1 => vec!["--parallel".into(), "1".into()],
            _ => vec!["--cont-batching".into(), "--parallel".into(), "2".into()],
        };
        let at = cmd.iter().position(|a| *a == "--port").unwrap() + 2;
        assert_eq!(cmd[at..at + flags.len()], flags, "{cmd:?}");
        assert_eq!(cmd[at + flags.len()], "-c", "{cmd:?}");
        // The server says it made that many slots, and started once.
        let log = std::fs::read_to_string(
            out.path()
                .join("servers")
                .join(format!("llama.tiny.{name}.log")),
        )
        .unwrap();
        assert!(log.contains(&format!("n_slots = {np},")), "{log}");
        assert_eq!(log.matches("listening on http").count(), 1);
        // Each run's reset was done; before the second run the slots held
        // the first run's prompts.
        let runs = p["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        for run in runs {
            let c = &run["cache_reset"];
            assert_eq!(c["outcome"], "done", "{c}");
            assert_eq!(c["request"], "POST /slots/{id}?action=erase");
        }
        assert!(
            runs[1]["cache_reset"]["erased_tokens"].as_u64().unwrap() > 0,
            "{}",
            runs[1]["cache_reset"]
        );
    }
    // The same sweep without resets: llama-server's own counter of cached
    // prompt tokens is higher, by what each second run's first request
    // read from the first run's last prompt.
    let dir = tempfile::tempdir().unwrap();
    let never = dir.path().join("never.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    assert!(text.contains("reset_cache = \"auto\""));
    std::fs::write(
        &never,
        text.replace("reset_cache = \"auto\"", "reset_cache = \"never\""),
    )
    .unwrap();
    let out2 = dir.path().join("out");
    let (code, stderr) = run(&never, &out2, &llama, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let r2 = results(&out2);
    let points2 = r2["points"].as_array().unwrap();
    for (with, without) in points.iter().zip(points2) {
        // `reset_cache` set to other than `auto` is another point.
        assert_ne!(with["id"], without["id"]);
        for run in without["runs"].as_array().unwrap() {
            assert!(run.get("cache_reset").is_none(), "{run}");
        }
        let (a, b) = (cached_tokens(with), cached_tokens(without));
        eprintln!(
            "{}: cached prompt tokens with reset {a}, without {b}",
            with["slug"]
        );
        // One at a time, every prompt after a run's first reads the shared
        // prefix its slot holds (k tokens): with the reset that is 2 runs
        // x 3 requests; without it, run 2's first request reads it too.
        // The edges of each run are scraped on demand, so this is exact.
        assert!(a > 0.0, "{}: nothing was cached", with["slug"]);
        let k = a / 6.0;
        assert_eq!(k.fract(), 0.0, "{}: with reset {a}", with["slug"]);
        assert_eq!(b, a + k, "{}: with reset {a}, without {b}", with["slug"]);
    }
}
