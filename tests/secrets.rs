//! No secret in any output. Secrets are planted where a CI runner keeps
//! them: (a) a header value, (b) the password of `base_url`'s userinfo,
//! (c) the API key (`api_key_env`), which the server reflects back in 401
//! bodies, stream error events and malformed events, and (d) an environment
//! variable a launched server's `base_url` reads through `{env.NAME}`. The
//! whole pull-request workflow runs (`run --requests`, `bless`,
//! `run --baseline --markdown --junit --format json`, `diff`, `report` in
//! every format), and every file it wrote and every stream it printed is
//! searched for each secret, in the forms it could take: not one hit.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A loopback OpenAI-style server that reflects every request header it
/// receives in its error replies, as a careless gateway does.
struct Reflector {
    port: u16,
    /// The header blocks of the metrics scrapes it received.
    scrapes: Arc<Mutex<Vec<String>>>,
}

impl Reflector {
    fn start() -> Reflector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let scrapes = Arc::new(Mutex::new(Vec::new()));
        let seen = scrapes.clone();
        let n = Arc::new(AtomicU64::new(0));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (seen, n) = (seen.clone(), n.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, &seen, &n);
                });
            }
        });
        Reflector { port, scrapes }
    }
}

/// Answers one request, then closes the connection.
fn serve(conn: TcpStream, scrapes: &Mutex<Vec<String>>, n: &AtomicU64) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut head = String::new();
    reader.read_line(&mut head)?;
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
            break;
        }
        let line = line.trim_end().to_string();
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        headers.push(line);
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let reflected = headers.join("; ");
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut out = conn;
    let json = |status: &str, body: String| {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let reply = if path.starts_with("/metrics") {
        scrapes.lock().unwrap().push(reflected);
        let text = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n";
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        )
    } else if path.ends_with("/models") {
        json(
            "200 OK",
            r#"{"object":"list","data":[{"id":"scripted-model","owned_by":"reflector"}]}"#.into(),
        )
    } else if path.ends_with("/completions") {
        let quoted = serde_json::to_string(&reflected).unwrap();
        let quoted = &quoted[1..quoted.len() - 1];
        let sse = |events: &[String]| {
            let mut b = String::new();
            for e in events {
                b.push_str(&format!("data: {e}\n\n"));
            }
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{b}"
            )
        };
        match n.fetch_add(1, Ordering::Relaxed) % 4 {
            0 => json(
                "401 Unauthorized",
                format!(
                    r#"{{"error":{{"message":"invalid credentials: {quoted}","type":"auth"}}}}"#
                ),
            ),
            1 => sse(&[format!(
                r#"{{"error":{{"message":"the stream failed for {quoted}"}}}}"#
            )]),
            2 => sse(&[format!("{reflected} is not JSON")]),
            _ => {
                let mut events: Vec<String> = (0..4)
                    .map(|_| r#"{"choices":[{"index":0,"text":"a","finish_reason":null}]}"#.into())
                    .collect();
                events.push(
                    r#"{"choices":[{"index":0,"text":"","finish_reason":"length"}],"usage":{"prompt_tokens":8,"completion_tokens":4,"total_tokens":12}}"#
                        .into(),
                );
                events.push("[DONE]".into());
                sse(&events)
            }
        }
    } else {
        json("200 OK", "{}".into())
    };
    out.write_all(reply.as_bytes())?;
    out.flush()
}

/// A value no run could produce by chance, random from its 7th
/// character on, so that even its head is found if an excerpt cuts it.
fn unique(tag: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    format!("s3cr3t{r:016x}-{tag}")
}

fn bin(cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_infer-bench"));
    c.current_dir(cwd);
    c
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn no_planted_secret_reaches_any_file_or_stream() {
    let header = unique("header");
    let password = unique("password");
    let key = unique("apikey");
    let env_value = unique("envvar");
    let key_var = format!("IB_TEST_API_KEY_{}", std::process::id());
    let env_var = format!("IB_TEST_URL_SECRET_{}", std::process::id());
    let basic = {
        // base64("user:<password>"), as a Basic auth header carries it.
        let user_pass = format!("user:{password}");
        base64(user_pass.as_bytes())
    };
    let server = Reflector::start();
    let input = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let sim_spec = input.path().join("sim.toml");
    std::fs::write(
        &sim_spec,
        r#"name = "sim-for-secrets"
[targets.sim]
kind = "sim"
gpu = "h100-sxm"
[models.m]
preset = "llama-3.1-8b"
served_name = "scripted-model"
[workloads.w]
api = "completions"
input_tokens = 8
output_tokens = 4
[load]
concurrency = 1
requests = 1
"#,
    )
    .unwrap();
    let spec = input.path().join("spec.toml");
    std::fs::write(
        &spec,
        format!(
            r#"name = "secrets"
seed = 7

[targets.t]
kind = "openai"
base_url = "http://user:{password}@127.0.0.1:{port}/v1"
api_key_env = "{key_var}"
headers = {{ X-Bench-Token = "{header}" }}
tls_insecure = true
metrics_url = "http://127.0.0.1:{port}/metrics"

[targets.d]
kind = "openai"
base_url = "http://bench:{{env.{env_var}}}@127.0.0.1:{{port}}/v1"
launch = {{ command = ["/bin/sh", "-c", 'echo "starting with BENCH_TOKEN=$BENCH_TOKEN" >&2; exec "$0" sim-server "$1" --port "$2"', "{bin}", "{sim}", "{{port}}"], env = {{ BENCH_TOKEN = "{{env.{env_var}}}" }}, allow_env = ["{env_var}"], startup_timeout = "30s" }}

[models.m]
served_name = "scripted-model"

[workloads.w]
api = "completions"
input_tokens = 8
output_tokens = 4

[load]
concurrency = 2
requests = 24
runs = 2

# This test is about secrets, not timing: on a busy machine the client's
# own read delay would make a point INVALID and bless refuse it.
[validity]
max_dispatch_lag_p99 = "1s"

[matrix]
target = ["t", "d"]

[regression]
baseline = "baseline.json"
"#,
            port = server.port,
            bin = env!("CARGO_BIN_EXE_infer-bench"),
            sim = sim_spec.display(),
        ),
    )
    .unwrap();
    let w = work.path();
    let mut streams: Vec<(String, Output)> = Vec::new();
    let mut step = |name: &str, args: &[&str]| {
        let out = bin(w)
            .args(args)
            .env(&key_var, &key)
            .env(&env_var, &env_value)
            .env("INFER_BENCH_ALLOW_LAUNCH", "1")
            .output()
            .unwrap();
        streams.push((name.to_string(), out));
        let out = &streams.last().unwrap().1;
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let spec_arg = spec.to_str().unwrap();
    let (code, stderr) = step("run", &["run", spec_arg, "--out", "first", "--requests"]);
    assert!(matches!(code, Some(0) | Some(1)), "run: {code:?}\n{stderr}");
    // tls_insecure is said once when the run starts.
    assert_eq!(
        stderr
            .matches("TLS certificate verification is off for target t ")
            .count(),
        1,
        "{stderr}"
    );
    let (code, stderr) = step("bless", &["bless", "first", "--baseline", "baseline.json"]);
    assert_eq!(code, Some(0), "bless: {stderr}");
    let (code, stderr) = step(
        "run --baseline",
        &[
            "run",
            spec_arg,
            "--out",
            "second",
            "--requests",
            "--baseline",
            "baseline.json",
            "--markdown",
            "verdict.md",
            "--junit",
            "junit.xml",
            "--format",
            "json",
        ],
    );
    assert!(
        code.is_some_and(|c| c != 2 && c < 100),
        "run --baseline: {code:?}\n{stderr}"
    );
    step(
        "diff",
        &[
            "diff",
            "second",
            "--baseline",
            "baseline.json",
            "--markdown",
            "diff.md",
            "--junit",
            "diff.xml",
            "--format",
            "json",
        ],
    );
    step(
        "diff table",
        &["diff", "second", "--baseline", "baseline.json"],
    );
    let (code, stderr) = step(
        "report html",
        &["report", "first", "second", "--output", "report.html"],
    );
    assert_eq!(code, Some(0), "report: {stderr}");
    step("plan", &["plan", spec_arg, "--format", "json"]);
    for format in ["markdown", "csv", "json"] {
        step(
            &format!("report {format}"),
            &["report", "second", "--format", format],
        );
    }

    // The outputs hold what the secrets were planted in.
    let results = std::fs::read_to_string(w.join("first/results.json")).unwrap();
    assert!(
        results.contains("X-Bench-Token"),
        "the header's name is kept"
    );
    assert!(results.contains("HTTP 401"), "the 401 was recorded");
    let requests = std::fs::read_to_string(w.join("first/requests.jsonl")).unwrap();
    assert!(
        requests.contains("<redacted>"),
        "the reflected key was masked"
    );
    assert!(w.join("report.html").exists());
    let verdict = std::fs::read_to_string(w.join("verdict.md")).unwrap();
    assert!(
        verdict.contains("TLS verification was off for target `t`"),
        "{verdict}"
    );
    let summary = String::from_utf8_lossy(&streams[0].1.stdout).into_owned();
    assert!(
        summary.contains("TLS verification was off for target t"),
        "{summary}"
    );
    // The scraper sends the target's credentials to a metrics URL on the
    // same host and port.
    let scrapes = server.scrapes.lock().unwrap().join("\n");
    assert!(
        scrapes.contains(&header) && scrapes.contains(&format!("Bearer {key}")),
        "the scrapes carried the target's headers: {scrapes}"
    );

    let secrets: Vec<(&str, String)> = [
        ("header", header.clone()),
        ("password", password.clone()),
        ("basic auth", basic.clone()),
        ("api key", key.clone()),
        ("env var", env_value.clone()),
    ]
    .into();
    let mut files = Vec::new();
    files_under(w, &mut files);
    assert!(files.len() >= 10, "{files:?}");
    // The launched server printed the secret at start-up: its log has the
    // line, masked.
    assert!(
        files
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "log")
                && std::fs::read_to_string(f)
                    .unwrap()
                    .contains("starting with BENCH_TOKEN=<redacted>")),
        "no server log holds the masked start-up line"
    );
    // A secret, or its first 14 characters (8 of them random): an excerpt
    // cut off inside a secret gives away its head.
    let secrets: Vec<(&str, String)> = secrets
        .into_iter()
        .flat_map(|(what, s)| [(what, s[..14].to_string()), (what, s)])
        .collect();
    let mut leaks = Vec::new();
    for f in &files {
        let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
        for (what, s) in &secrets {
            if text.contains(s.as_str()) {
                leaks.push(format!("{what} in {}", f.display()));
            }
        }
    }
    for (name, out) in &streams {
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            for (what, s) in &secrets {
                if text.contains(s.as_str()) {
                    leaks.push(format!("{what} on the {stream} of `{name}`"));
                }
            }
        }
    }
    if let Some(keep) = std::env::var_os("SECRETS_TEST_KEEP") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        for f in &files {
            let to = keep.join(f.strip_prefix(w).unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(f, to).unwrap();
        }
        for (i, (_, out)) in streams.iter().enumerate() {
            std::fs::write(keep.join(format!("stream-{i}.out")), &out.stdout).unwrap();
            std::fs::write(keep.join(format!("stream-{i}.err")), &out.stderr).unwrap();
        }
        std::fs::write(keep.join("secrets"), format!("{secrets:?}")).unwrap();
    }
    assert!(leaks.is_empty(), "secrets leaked:\n{}", leaks.join("\n"));
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16
            | (c.get(1).copied().unwrap_or(0) as u32) << 8
            | c.get(2).copied().unwrap_or(0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
