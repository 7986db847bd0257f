//! The client's connections, end to end: the real binary against the
//! scripted loopback server behind a relay that counts the connections it
//! accepts. A point's connections are opened before each run's clock
//! starts and kept across its runs; `cold_connections` opens one per
//! request.

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use infer_bench::plan::Plan;
use infer_bench::protocol::{Backend, RequestRecord};
use infer_bench::protocol::{ClientOptions, HttpBackend, Reading};
use infer_bench::run::parts::{Connections, run_once};
use infer_bench::run::{Interrupt, Live, RunEnv, Sink};
use infer_bench::workload::Material;
use infer_bench_testkit::proxy::CountingProxy;
use infer_bench_testkit::runtime;
use infer_bench_testkit::scripted::{Script, ScriptedServer};

/// A spec with one openai target at `url`.
fn spec(url: &str, load: &str) -> String {
    spec_with(url, "api = \"completions\"", load)
}

/// [`spec`] with these keys of `[workloads.w]`.
fn spec_with(url: &str, workload: &str, load: &str) -> String {
    format!(
        "name = \"connections-test\"\nseed = 3\n\n[targets.t]\nkind = \"openai\"\nbase_url = \"{url}\"\n\n[models.m]\nserved_name = \"scripted-model\"\n\n[workloads.w]\n{workload}\ninput_tokens = 8\noutput_tokens = 4\nignore_eos = true\n\n[load]\n{load}\n\n[validity]\nmin_requests = 1\nmin_duration = \"1ms\"\n"
    )
}

struct Run {
    results: serde_json::Value,
    code: Option<i32>,
    stderr: String,
}

impl Run {
    fn point(&self) -> &serde_json::Value {
        &self.results["points"][0]
    }
}

fn run_spec(text: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let results = std::fs::read_to_string(dir.path().join("out/results.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(serde_json::Value::Null);
    Run {
        results,
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Concurrency 8, three runs: the 8 connections are open before the first
/// completion request arrives, and all three runs reuse them. A slot's next
/// request goes out before its last connection is back in the pool (its
/// body's end is read on a task of its own); its connect waits for that
/// connection rather than opening a spare.
#[test]
fn a_closed_loop_opens_its_slots_before_the_clock_and_keeps_them() {
    let _t = infer_bench_testkit::timing::exclusive();
    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script::default()))
        .unwrap();
    let proxy = rt.block_on(CountingProxy::start(server.addr())).unwrap();
    let run = run_spec(&spec(
        &proxy.base_url(),
        "concurrency = 8\nrequests = 80\nruns = 3",
    ));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    rt.block_on(server.wait_idle());
    let records = server.records();
    assert_eq!(records.len(), 3 * 80);
    let accepts = proxy.accept_times();
    let before_first = accepts.iter().filter(|t| **t < records[0].received).count();
    eprintln!(
        "connections: {} accepted, {before_first} before the first completion request",
        accepts.len()
    );
    assert_eq!(before_first, 8, "{accepts:?}");
    // Exactly 8 on a quiet machine; with both cores busy the pool's own
    // task can hand a connection back later than a connect waits for it,
    // and a spare is opened in the background (never waited for).
    assert!((8..=10).contains(&accepts.len()), "{}", accepts.len());
    assert_eq!(run.point()["warnings"], serde_json::json!([]));
}

/// The engine's own records of a point's runs against `url`: each run
/// preceded by opening its connections (`warm`) or not, as `point` does.
fn records(url: &str, load: &str, warm: bool) -> Vec<Vec<RequestRecord>> {
    records_of(&spec(url, load), url, warm)
}

/// [`records`] of the point of `spec`, whose target is at `url`.
fn records_of(spec: &str, url: &str, warm: bool) -> Vec<Vec<RequestRecord>> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, spec).unwrap();
    let s = infer_bench::spec::load(&path).unwrap();
    let plan = Plan::build(&s).unwrap();
    let p = &plan.points[0];
    let cfg = &p.config;
    let conns = Connections::of(&cfg.load, None);
    let rt = runtime();
    let headers = Default::default();
    let options = ClientOptions {
        base_url: url,
        api_key: None,
        headers: &headers,
        tls_insecure: false,
        ca_cert_pem: None,
        pool_size: conns.idle,
        connect_timeout: Duration::from_secs(2),
    };
    let backend = {
        let _guard = rt.enter();
        Arc::new(
            HttpBackend::new(
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
            .unwrap(),
        )
    };
    let material = Arc::new(Material::load(&cfg.workload, &cfg.model, s.base_dir()).unwrap());
    (0..cfg.load.runs)
        .map(|run| {
            if warm {
                rt.block_on(backend.warm(conns.warm)).unwrap();
            }
            let got = Arc::new(Mutex::new(Vec::new()));
            let into = got.clone();
            let sink: Sink =
                Arc::new(move |r: &RequestRecord| into.lock().unwrap().push(r.clone()));
            let env = RunEnv {
                handle: rt.handle().clone(),
                interrupt: Arc::new(Interrupt::default()),
                live: Arc::new(Live::default()),
                sink: Some(sink),
                agent: None,
                start_at: None,
                material: material.clone(),
                slow_client: None,
            };
            let out = run_once(backend.clone(), cfg, run, &env);
            assert!(out.stopped.is_none());
            let mut recs = std::mem::take(&mut *got.lock().unwrap());
            recs.sort_by_key(|r| r.t_send);
            recs
        })
        .collect()
}

/// The first wave of every run goes out on connections already open (no
/// connect time); without them, each of the first wave opens its own.
#[test]
fn the_first_requests_of_every_run_pay_no_connect() {
    let _t = infer_bench_testkit::timing::exclusive();
    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script::default()))
        .unwrap();
    let proxy = rt.block_on(CountingProxy::start(server.addr())).unwrap();
    let runs = records(
        &proxy.base_url(),
        "concurrency = 8\nrequests = 40\nruns = 3",
        true,
    );
    assert_eq!(runs.len(), 3);
    for (run, recs) in runs.iter().enumerate() {
        assert_eq!(recs.len(), 40, "run {run}");
        assert!(recs.iter().all(|r| r.ok()), "run {run}");
        let first: Vec<u64> = recs[..8].iter().map(|r| r.connect_ns).collect();
        assert_eq!(first, vec![0; 8], "run {run}: the first wave's connect_ns");
        let paid = recs.iter().filter(|r| r.connect_ns > 0).count();
        eprintln!("run {run}: {paid} of 40 requests waited for a connect");
    }
    let opened = proxy.accepted();
    assert!((8..=10).contains(&opened), "{opened}");
    // Each record names its response as the server did.
    let mut ids: Vec<String> = runs
        .iter()
        .flatten()
        .map(|r| r.response_id.clone().unwrap())
        .collect();
    ids.sort_by_key(|id| {
        id.trim_start_matches("cmpl-scripted-")
            .parse::<u64>()
            .unwrap()
    });
    let want: Vec<String> = (1..=120).map(|n| format!("cmpl-scripted-{n}")).collect();
    assert_eq!(ids, want);

    // The same without opening them first: the first wave connects.
    let proxy = rt.block_on(CountingProxy::start(server.addr())).unwrap();
    let runs = records(
        &proxy.base_url(),
        "concurrency = 8\nrequests = 40\nruns = 1",
        false,
    );
    let first: Vec<u64> = runs[0][..8].iter().map(|r| r.connect_ns).collect();
    eprintln!("without warming, the first wave's connect_ns: {first:?}");
    assert!(first.iter().all(|&ns| ns > 0), "{first:?}");
    // Loopback: well under the connect timeout.
    assert!(first.iter().all(|&ns| ns < 1_000_000_000), "{first:?}");
}

/// `cold_connections`: nothing opened ahead, nothing kept: one connection
/// per request, and every request's connect time recorded.
#[test]
fn cold_connections_open_one_connection_per_request() {
    let _t = infer_bench_testkit::timing::exclusive();
    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script::default()))
        .unwrap();
    let proxy = rt.block_on(CountingProxy::start(server.addr())).unwrap();
    let load = "concurrency = 4\nrequests = 20\nruns = 2\ncold_connections = true";
    let run = run_spec(&spec(&proxy.base_url(), load));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    rt.block_on(server.wait_idle());
    assert_eq!(server.records().len(), 40);
    // One per request, and the one that asked the server its dialect
    // before the point began.
    assert_eq!(proxy.accepted(), 40 + 1, "one connection per request");
    assert_eq!(run.point()["config"]["load"]["cold_connections"], true);

    let proxy = rt.block_on(CountingProxy::start(server.addr())).unwrap();
    let runs = records(&proxy.base_url(), load, true);
    let ns: Vec<u64> = runs.iter().flatten().map(|r| r.connect_ns).collect();
    assert_eq!(ns.len(), 40);
    assert!(ns.iter().all(|&ns| ns > 0), "{ns:?}");
    assert_eq!(proxy.accepted(), 40);
}

/// Without the key, a point's config does not mention it (baselines
/// written before it compare unchanged).
#[test]
fn warm_connections_are_the_default_and_not_written() {
    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script::default()))
        .unwrap();
    let run = run_spec(&spec(&server.base_url(), "concurrency = 1\nrequests = 2"));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let load = run.point()["config"]["load"].as_object().unwrap();
    assert!(!load.contains_key("cold_connections"), "{load:?}");
}

/// The client's own descriptor limit reached: the binary, run with an
/// open-file limit of 40 it cannot raise (hard limit lowered, and a root
/// child loses CAP_SYS_RESOURCE), against a server that holds every
/// connection for 300 ms, at concurrency 64. The connects it cannot open
/// fail as `client_limit`, never as `connect`, and the point is INVALID.
#[test]
fn a_client_out_of_descriptors_fails_as_client_limit_not_connect() {
    use std::os::unix::process::CommandExt;
    let rt = runtime();
    let script = Script {
        ttft: Duration::from_millis(300),
        ..Script::default()
    };
    let server = rt.block_on(ScriptedServer::start(script)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(
        &path,
        spec(&server.base_url(), "concurrency = 64\nrequests = 128"),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_infer-bench"));
    cmd.arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("out"));
    // SAFETY: setrlimit and prctl are async-signal-safe system calls on
    // the child's own process, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 40,
                rlim_max: 40,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Without CAP_SYS_RESOURCE (not root, or dropped here) the
            // hard limit cannot be raised again; failing is fine.
            libc::prctl(
                libc::PR_CAPBSET_DROP,
                24, /* CAP_SYS_RESOURCE */
                0,
                0,
                0,
            );
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/results.json")).expect(&stderr),
    )
    .unwrap();
    let point = &results["points"][0];
    let errors = point["merged"]["errors"].as_object().unwrap();
    eprintln!(
        "exit {:?}; errors {errors:?}; succeeded {}; warnings {}; invalid {}",
        out.status.code(),
        point["merged"]["requests"]["succeeded"],
        point["warnings"],
        point["invalid_reasons"]
    );
    let limited = errors["client_limit"].as_u64().unwrap();
    assert!(limited > 0);
    assert_eq!(errors.keys().collect::<Vec<_>>(), vec!["client_limit"]);
    let example = point["merged"]["error_examples"]["client_limit"]
        .as_str()
        .unwrap();
    assert!(example.contains("os error 24"), "{example}");
    assert!(point["merged"]["requests"]["succeeded"].as_u64().unwrap() > 0);
    assert_eq!(point["valid"], false);
    let reasons = point["invalid_reasons"].as_array().unwrap();
    assert!(
        reasons.iter().any(|r| r["kind"] == "client_limit"
            && r["message"].as_str().unwrap().starts_with(&format!(
                "{limited} request(s) failed because the client ran out of file descriptors (client_limit)"
            ))),
        "{reasons:?}"
    );
    // The 64 connections were not opened before the run: the limit left
    // no room for them (one line).
    let warnings = point["warnings"].as_array().unwrap();
    let warm: Vec<_> = warnings
        .iter()
        .filter(|w| w["kind"] == "connections_not_opened")
        .collect();
    assert_eq!(warm.len(), 1, "{warnings:?}");
    assert!(
        warm[0]["message"].as_str().unwrap().starts_with(
            "run 1: 0 of 64 connections were opened before the run: the open-file limit (40) leaves room for no more;"
        ),
        "{warm:?}"
    );
}

/// A loopback server that ends every stream with `[DONE]` and then holds
/// the response open for `hold` before its end (the chunked terminator),
/// as a server slow to close does; `GET /v1/models` gets a small JSON.
/// Each completion's id is `cmpl-slow-N`.
async fn slow_to_close(hold: Duration) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seq = Arc::new(std::sync::atomic::AtomicU64::new(0));
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let seq = seq.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    // One request: its head, then Content-Length bytes.
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let mut chunk = [0u8; 4096];
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map(|v| v.trim().parse().unwrap())
                        .unwrap_or(0);
                    while buf.len() < head_end + len {
                        let mut chunk = [0u8; 4096];
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..head_end + len);
                    if head.starts_with("get ") {
                        let body = r#"{"object":"list","data":[]}"#;
                        let r = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if sock.write_all(r.as_bytes()).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    let n = seq.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    let chunk = |s: &str| format!("{:x}\r\n{s}\r\n", s.len());
                    let mut r = String::from(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
                    );
                    r += &chunk(&format!(
                        "data: {{\"id\":\"cmpl-slow-{n}\",\"choices\":[{{\"index\":0,\"text\":\"hi\",\"finish_reason\":null}}]}}\n\n"
                    ));
                    r += &chunk(&format!(
                        "data: {{\"id\":\"cmpl-slow-{n}\",\"choices\":[{{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}}],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":1}}}}\n\n"
                    ));
                    r += &chunk("data: [DONE]\n\n");
                    if sock.write_all(r.as_bytes()).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(hold).await;
                    if sock.write_all(b"0\r\n\r\n").await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// After `[DONE]` the request is over: a server that holds the response
/// open for 3 s more costs a closed loop nothing (the slot used to wait up
/// to 1 s per request for the body's end).
#[test]
fn a_server_slow_to_close_does_not_hold_the_slot() {
    let _t = infer_bench_testkit::timing::exclusive();
    let rt = runtime();
    let addr = rt.block_on(slow_to_close(Duration::from_secs(3)));
    let url = format!("http://{addr}/v1");
    let load = "concurrency = 1\nrequests = 6";
    let started = std::time::Instant::now();
    let runs = records(&url, load, true);
    let took = started.elapsed();
    let recs = &runs[0];
    assert_eq!(recs.len(), 6);
    assert!(recs.iter().all(|r| r.ok()), "{:?}", recs[0].failure);
    eprintln!("6 requests in {took:?}");
    let ids: Vec<_> = recs.iter().map(|r| r.response_id.as_deref()).collect();
    let want: Vec<String> = (1..=6).map(|n| format!("cmpl-slow-{n}")).collect();
    assert_eq!(
        ids,
        want.iter().map(|s| Some(s.as_str())).collect::<Vec<_>>()
    );
    // Six requests at one slot: were the slot held 1 s after each, at
    // least 5 s.
    assert!(took < Duration::from_millis(1500), "{took:?}");
}

/// A whole (not streamed) chat completion names its response too.
#[test]
fn a_response_that_is_not_streamed_is_named_as_well() {
    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script::default()))
        .unwrap();
    let url = server.base_url();
    let spec = spec_with(
        &url,
        "api = \"chat\"\nstream = false",
        "concurrency = 2\nrequests = 4",
    );
    let runs = records_of(&spec, &url, true);
    let mut ids: Vec<String> = runs[0]
        .iter()
        .map(|r| {
            assert!(r.ok(), "{:?}", r.failure);
            r.response_id.clone().unwrap()
        })
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        (1..=4)
            .map(|n| format!("chatcmpl-scripted-{n}"))
            .collect::<Vec<_>>()
    );
}
