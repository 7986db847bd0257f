//! `api = "kserve"` against a real NVIDIA Triton Inference Server (2.51,
//! CPU only, from the PyPI package nvidia-pytriton; `scripts/setup-triton`
//! installs it under `target/triton`) serving the models of
//! `tests/triton/serve.py`, whose cost is known: `classifier` sleeps 2 ms +
//! 0.1 ms per item, `batched` is the same behind Triton's dynamic batcher,
//! `flaky` fails its 10th, 20th... call, `wrong_shape` answers [batch, 7]
//! where its metadata says [batch, 10].
//!
//! One Triton serves the whole file (it takes 10-15 s to start), from one
//! test, which runs one spec of many points through the ordinary `run`
//! path: what each point must show is checked point by point, and that a
//! point that cannot run does not stop the others.
//!
//! Then Triton's generate extension (`api = "generate"`) against the same
//! server: `generate` is a decoupled model whose answer's timing is known
//! (its first word 20 ms after the request reaches it, then one every
//! 5 ms), `generate_once` the same words as one response.
//!
//! The venv comes from `$INFER_BENCH_TRITON_DIR` (default `target/triton`);
//! without it the test fails, unless `INFER_BENCH_SKIP_TRITON=1` says to
//! skip it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use infer_bench::plan::Plan;
use infer_bench::run::Interrupt;
use infer_bench::run::{RunOptions, run_plan};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn triton_python() -> Option<PathBuf> {
    let dir = std::env::var_os("INFER_BENCH_TRITON_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/triton"));
    let python = dir.join("venv/bin/python");
    if python.is_file() {
        return Some(python);
    }
    if std::env::var("INFER_BENCH_SKIP_TRITON").as_deref() == Ok("1") {
        eprintln!(
            "skipped: no Triton venv in {} (INFER_BENCH_SKIP_TRITON=1)",
            dir.display()
        );
        return None;
    }
    panic!(
        "no Triton venv at {}: run scripts/setup-triton, set INFER_BENCH_TRITON_DIR to the directory it made, or set INFER_BENCH_SKIP_TRITON=1 to skip",
        python.display()
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running Triton; stopped (SIGTERM, then waited for) when dropped.
struct Triton {
    child: Child,
    port: u16,
    metrics_port: u16,
    log: PathBuf,
}

impl Drop for Triton {
    fn drop(&mut self) {
        // serve.py unloads its models and stops tritonserver on SIGTERM.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(python: &Path, log: PathBuf) -> Triton {
    let port = free_port();
    let metrics_port = free_port();
    let mut child = Command::new(python)
        .arg(root().join("tests/triton/serve.py"))
        .args(["--http-port", &port.to_string()])
        .args(["--grpc-port", &free_port().to_string()])
        .args(["--metrics-port", &metrics_port.to_string()])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let triton = Triton {
        child,
        port,
        metrics_port,
        log,
    };
    match rx.recv_timeout(Duration::from_secs(180)) {
        Ok(line) if line.trim() == "READY" => triton,
        other => panic!(
            "Triton did not start ({other:?}); its log:\n{}",
            std::fs::read_to_string(&triton.log).unwrap_or_default()
        ),
    }
}

#[test]
fn kserve_points_against_a_real_triton() {
    let Some(python) = triton_python() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let triton = start(&python, tmp.path().join("triton.log"));
    let (port, mport) = (triton.port, triton.metrics_port);
    let dead = free_port();
    let images = r#"inputs = [{ name = "images", datatype = "FP32", shape = [3, 224, 224] }]"#;
    let spec_text = format!(
        r#"name = "triton"
seed = 3
[targets.triton]
kind = "openai"
base_url = "http://127.0.0.1:{port}"
metrics_url = "http://127.0.0.1:{mport}/metrics"
[targets.nobody]
kind = "openai"
base_url = "http://127.0.0.1:{dead}"
[models.classifier]
served_name = "classifier"
[models.batched]
served_name = "batched"
[models.flaky]
served_name = "flaky"
[models.wrong_shape]
served_name = "wrong_shape"
[models.nope]
served_name = "nope"
[workloads.b1]
api = "kserve"
{images}
[workloads.b8]
api = "kserve"
batch = 8
{images}
[workloads.json]
api = "kserve"
binary = false
[workloads.photos]
api = "kserve"
batch = 2
inputs = [{{ name = "images", datatype = "FP32", shape = [3, 224, 224], file = "photos.npy" }}]
[workloads.crooked]
api = "kserve"
inputs = [{{ name = "images", datatype = "FP32", shape = [3, 224, 225] }}]
[load]
concurrency = 1
requests = 40
warmup_requests = 4
timeouts = {{ first_token = "60s", total = "60s" }}
[matrix]
include = [
  {{ target = "triton", model = "classifier", workload = "b1" }},
  {{ target = "triton", model = "classifier", workload = "b8" }},
  {{ target = "triton", model = "classifier", workload = "json" }},
  {{ target = "triton", model = "classifier", workload = "photos" }},
  {{ target = "triton", model = "batched", workload = "b1", concurrency = 8 }},
  {{ target = "triton", model = "flaky", workload = "b1" }},
  {{ target = "triton", model = "wrong_shape", workload = "b1" }},
  {{ target = "triton", model = "nope", workload = "b1" }},
  {{ target = "triton", model = "classifier", workload = "crooked" }},
  {{ target = "nobody", model = "classifier", workload = "b1" }},
]
"#
    );
    // Three "photos" as a NumPy array [3, 3, 224, 224] of FP32.
    let mut header =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 3, 224, 224), }".to_string();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    for k in 0..3 * 3 * 224 * 224u32 {
        npy.extend_from_slice(&((k % 255) as f32 / 255.0).to_le_bytes());
    }
    std::fs::write(tmp.path().join("photos.npy"), npy).unwrap();
    let spec_path = tmp.path().join("spec.toml");
    std::fs::write(&spec_path, spec_text).unwrap();
    let spec = infer_bench::spec::load(&spec_path).unwrap_or_else(|e| panic!("{e}"));
    let plan = Plan::build(&spec).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = RunOptions::new(tmp.path().join("out"));
    let results = run_plan(&spec, &plan, &opts, &rt, Arc::new(Interrupt::default())).unwrap();
    let log = || std::fs::read_to_string(&triton.log).unwrap_or_default();
    let point = |model: &str, workload: &str, target: &str| {
        results
            .points
            .iter()
            .find(|p| {
                p.axes.get("model").map(String::as_str) == Some(model)
                    && p.config.workload.name == workload
                    && p.config.target.name == target
            })
            .unwrap_or_else(|| panic!("no point {model}/{workload}/{target}"))
    };
    assert_eq!(results.points.len(), 10);

    // The classifier at batch 1 and 8: every answer checked and counted,
    // items per second batch times inferences per second, and the
    // server's own account of the latency beside the client's.
    for (workload, batch) in [("b1", 1.0), ("b8", 8.0), ("json", 1.0)] {
        let p = point("classifier", workload, "triton");
        let s = &p.merged;
        assert_eq!(p.failure, None, "{workload}: {}", log());
        assert_eq!(
            (s.requests.succeeded, s.requests.failed),
            (40, 0),
            "{workload}: {:?}",
            s.errors
        );
        let items = s.inputs_per_s.unwrap();
        assert!(
            (items / s.request_throughput - batch).abs() < 1e-6,
            "{workload}: {items} items/s at {} req/s",
            s.request_throughput
        );
        // The payload each way: binary, the images behind a JSON header
        // of under 1 KiB and 10 FP32 probabilities an item back; as JSON
        // numbers, more than the raw bytes each way.
        let payload = s.payload.expect("payload");
        let (image, probs) = (3.0 * 224.0 * 224.0 * 4.0 * batch, 40.0 * batch);
        if workload == "json" {
            assert!(payload.request_bytes_mean > image, "{payload:?}");
            assert!(payload.response_bytes_mean > probs, "{payload:?}");
        } else {
            assert!(
                (image..image + 1024.0).contains(&payload.request_bytes_mean),
                "{workload}: {payload:?}"
            );
            assert!(
                (probs..probs + 1024.0).contains(&payload.response_bytes_mean),
                "{workload}: {payload:?}"
            );
        }
        let e2e = &s.latency_ms["e2e"];
        // classifier sleeps 2 ms + 0.1 ms per item: no answer comes sooner.
        assert!(e2e.min >= 2.0 + 0.1 * batch, "{workload}: {e2e:?}");
        let st = p.stages.as_ref().expect("Triton's statistics");
        // The warm-up requests are the server's too.
        assert_eq!(st.requests, 44, "{workload}: {st:?}");
        assert_eq!(st.inferences, 44 * batch as u64, "{workload}: {st:?}");
        assert!(
            st.compute_infer_ms >= 2.0 + 0.1 * batch,
            "{workload}: {st:?}"
        );
        assert!(
            st.queue_ms + st.compute_ms() <= st.request_ms + 0.05,
            "{st:?}"
        );
        let outside = st.outside_ms.expect("counts agree");
        eprintln!(
            "{workload}: client e2e p50 {:.3} ms mean {:.3} ms; Triton request {:.3} ms (queue {:.3}, compute {:.3}); outside {outside:.3} ms",
            e2e.p50,
            e2e.mean,
            st.request_ms,
            st.queue_ms,
            st.compute_ms()
        );
        // What the client measured holds what the server measured.
        assert!(outside > -0.05, "{workload}: {st:?} {e2e:?}");
        if workload == "b1" {
            // A 600 KB request on loopback: the client's median is the
            // server's own account within 1 ms. The server gives a mean
            // (warm-ups included), so the bound widens by how far this
            // run's mean stood from its median (0.1 ms on an idle machine).
            let skew = (e2e.mean - e2e.p50).abs();
            assert!(
                (e2e.p50 - st.request_ms).abs() <= 1.0 + skew,
                "client p50 {:.3} ms, Triton {:.3} ms, skew {skew:.3} ms",
                e2e.p50,
                st.request_ms
            );
        }
    }

    // Items read from a file go as they are, two per request.
    let p = point("classifier", "photos", "triton");
    assert_eq!(p.failure, None);
    assert_eq!(
        (p.merged.requests.succeeded, p.merged.requests.failed),
        (40, 0),
        "{:?}",
        p.merged.errors
    );
    let items = p.merged.inputs_per_s.unwrap();
    assert!(
        (items / p.merged.request_throughput - 2.0).abs() < 1e-9,
        "{items} items/s at {} req/s",
        p.merged.request_throughput
    );

    // Triton's Prometheus metrics, recognized as Triton's: the counters
    // of the point's model rose by at least the point's requests.
    let p = point("classifier", "b1", "triton");
    let m = p
        .telemetry
        .as_ref()
        .and_then(|t| t.server_metrics.as_ref())
        .expect("server metrics");
    assert_eq!(m.family.map(|f| f.name()), Some("triton"), "{m:?}");
    let success = m.counters["nv_inference_request_success"].delta.unwrap();
    assert!(success >= 30.0, "{success}: {m:?}");

    // Triton's dynamic batcher merges concurrent requests: fewer
    // executions than requests.
    let p = point("batched", "b1", "triton");
    assert_eq!(p.merged.requests.failed, 0, "{:?}", p.merged.errors);
    let st = p.stages.as_ref().unwrap();
    assert!(st.executions < st.requests, "{st:?}");

    // One call in ten fails at the server: counted by class, the run goes on.
    let p = point("flaky", "b1", "triton");
    assert_eq!(p.failure, None);
    let failed = p.merged.requests.failed;
    assert!((3..=5).contains(&failed), "{failed}: {:?}", p.merged.errors);
    assert_eq!(p.merged.errors.values().sum::<u64>(), failed);

    // An answer that does not match the metadata fails as malformed, with
    // the shapes named.
    let p = point("wrong_shape", "b1", "triton");
    let s = &p.merged;
    assert_eq!(s.requests.succeeded, 0);
    assert_eq!(s.errors.get("malformed"), Some(&40), "{:?}", s.errors);
    let example = s.error_examples["malformed"].unencoded().to_string();
    assert!(
        example.contains("[1, 7]") && example.contains("[1, 10]"),
        "{example}"
    );

    // What cannot run says why before any request, and the others ran.
    let said = |model: &str, workload: &str, target: &str| {
        let p = point(model, workload, target);
        assert_eq!(p.merged.requests.succeeded + p.merged.requests.failed, 0);
        p.failure.clone().unwrap_or_default()
    };
    let nope = said("nope", "b1", "triton");
    assert!(nope.contains("model \"nope\" is not ready"), "{nope}");
    let crooked = said("classifier", "crooked", "triton");
    assert!(
        crooked.contains("shape [3, 224, 224] per item (after the batch), and the workload declares [3, 224, 225]"),
        "{crooked}"
    );
    let nobody = said("classifier", "b1", "nobody");
    assert!(nobody.contains("is not ready"), "{nobody}");

    readme_vision_spec_runs_against_this_triton(&triton, tmp.path());
    generate_points(&triton, tmp.path());
    init_url_against_this_triton(&triton, tmp.path());
    pictures_against_this_triton(&triton, tmp.path());
}

/// The README's command for `specs/vision-triton.toml` against a Triton,
/// as written, on a copy of the spec whose Triton is this one (its ports
/// are not 8000 and 8002): every point complete, with Triton's split.
fn readme_vision_spec_runs_against_this_triton(triton: &Triton, dir: &Path) {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let line = readme
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .flat_map(str::lines)
        .find(|l| l.contains("specs/vision-triton.toml") && l.contains("triton.*"))
        .expect("the README runs specs/vision-triton.toml against a Triton");
    let spec = std::fs::read_to_string(root().join("specs/vision-triton.toml"))
        .unwrap()
        .replace("127.0.0.1:8000", &format!("127.0.0.1:{}", triton.port))
        .replace(
            "127.0.0.1:8002",
            &format!("127.0.0.1:{}", triton.metrics_port),
        )
        .replace("#:schema ../schemas/", "#:schema ");
    let copy = dir.join("specs/vision-triton.toml");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::write(&copy, spec).unwrap();
    let words: Vec<String> = line
        .split('#')
        .next()
        .unwrap()
        .split_whitespace()
        .map(|w| w.trim_matches('\'').to_string())
        .collect();
    assert_eq!(words[0], "infer-bench", "{line}");
    let points = run_points(dir, &words[1..], "vision-out");
    assert_eq!(points.len(), 6, "{line}");
    for p in &points {
        assert_eq!(p["status"], "complete", "{}: {}", p["slug"], p["failure"]);
        assert_eq!(p["merged"]["requests"]["failed"], 0, "{}", p["slug"]);
        assert!(p["stages"]["queue_ms"].is_number(), "{}", p["slug"]);
    }
}

/// Runs the binary in `dir` with `args`, `--out OUT -q`; it must exit 0.
/// The points of its results.
fn run_points(
    dir: &Path,
    args: &[impl AsRef<std::ffi::OsStr>],
    out: &str,
) -> Vec<serde_json::Value> {
    let out = dir.join(out);
    let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .current_dir(dir)
        .args(args)
        .arg("--out")
        .arg(&out)
        .arg("-q")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{:?}: {}",
        args.iter()
            .map(|a| a.as_ref().to_string_lossy())
            .collect::<Vec<_>>(),
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    r["points"].as_array().unwrap().clone()
}

/// Files as tensor inputs, through the real binary. Pictures: a folder
/// holding a PNG and a JPEG of one colour, of other sizes than the
/// input's, sent to `colors` (FP32 [3, 32, 32], `pixels = "unit"`) and
/// `colors_u8` (UINT8 [32, 32, 3], raw); each model fails any item whose
/// channel means are not that colour as the declared layout and scale put
/// it. BYTES: the lines of a text file, two to an item, to `sentences`,
/// which fails any element that is not a whole line; the same folder's
/// files, each one element, to `blobs`, which fails any element that is
/// not a whole picture file. Every request succeeding says the client
/// sent every input as documented.
fn pictures_against_this_triton(triton: &Triton, dir: &Path) {
    use infer_bench_testkit::pictures::{solid_jpeg, solid_png};
    let pics = dir.join("pics");
    std::fs::create_dir_all(&pics).unwrap();
    let rgb = [255, 0, 128];
    std::fs::write(pics.join("a.png"), solid_png(40, 30, rgb)).unwrap();
    std::fs::write(pics.join("b.jpg"), solid_jpeg(64, 48, rgb)).unwrap();
    let port = triton.port;
    let spec = format!(
        r#"name = "pictures"
[targets.triton]
kind = "openai"
base_url = "http://127.0.0.1:{port}"
[models.colors]
served_name = "colors"
[models.colors_u8]
served_name = "colors_u8"
[workloads.chw]
api = "kserve"
batch = 2
inputs = [{{ name = "images", datatype = "FP32", shape = [3, 32, 32], file = "pics", pixels = "unit" }}]
[workloads.hwc]
api = "kserve"
inputs = [{{ name = "images", datatype = "UINT8", shape = [32, 32, 3], file = "pics" }}]
[models.sentences]
served_name = "sentences"
[models.blobs]
served_name = "blobs"
[workloads.lines]
api = "kserve"
batch = 3
inputs = [{{ name = "text", datatype = "BYTES", shape = [2], file = "sentences.txt" }}]
[workloads.files]
api = "kserve"
batch = 2
inputs = [{{ name = "blob", datatype = "BYTES", shape = [1], file = "pics" }}]
[load]
concurrency = 2
requests = 12
[matrix]
include = [
  {{ model = "colors", workload = "chw" }},
  {{ model = "colors_u8", workload = "hwc" }},
  {{ model = "sentences", workload = "lines" }},
  {{ model = "blobs", workload = "files" }},
]
"#
    );
    std::fs::write(dir.join("pictures.toml"), spec).unwrap();
    // BYTES elements: 7 lines (three items of two; the 7th is left over),
    // the last with Windows' line end.
    let lines: String = (0..6).map(|i| format!("sentence {i}\n")).collect();
    std::fs::write(dir.join("sentences.txt"), lines + "sentence 6\r\n").unwrap();
    let points = run_points(dir, &["run", "pictures.toml"], "pictures-out");
    assert_eq!(points.len(), 4);
    for p in &points {
        let m = &p["merged"];
        assert_eq!(p["status"], "complete", "{}: {}", p["slug"], p["failure"]);
        assert_eq!(
            (&m["requests"]["succeeded"], &m["requests"]["failed"]),
            (&serde_json::json!(12), &serde_json::json!(0)),
            "{}: {}",
            p["slug"],
            m["errors"]
        );
    }
}

/// `infer-bench init --url` at Triton's root, as a user types it: with no
/// `--model` the first model its statistics name that init can send
/// (`batched`: its index is empty, PyTriton loads models through the API),
/// a tensor workload as its metadata declares it, run as written; with
/// `--model generate` a streamed generate workload, run as written; a
/// model with a variable-length input is refused saying which, and nothing
/// is written.
fn init_url_against_this_triton(triton: &Triton, dir: &Path) {
    let url = format!("http://127.0.0.1:{}", triton.port);
    let bin = |cwd: &Path, args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
            .current_dir(cwd)
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.code(), text)
    };
    let results = |out: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
    };
    for (folder, model, point, api) in [
        ("init-tensors", None, "server.model.tensors.b8.c1", "kserve"),
        (
            "init-generate",
            Some("generate"),
            "server.model.generate.c1",
            "generate",
        ),
    ] {
        let mut args = vec!["init", folder, "--url", &url];
        args.extend(model.iter().flat_map(|m| ["--model", *m]));
        let (code, text) = bin(dir, &args);
        assert_eq!(code, Some(0), "{text}");
        let proj = dir.join(folder);
        let spec: toml::Table = std::fs::read_to_string(proj.join("bench.toml"))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            spec["targets"]["server"]["base_url"].as_str(),
            Some(url.as_str())
        );
        let served = spec["models"]["model"]["served_name"].as_str().unwrap();
        assert_eq!(served, model.unwrap_or("batched"));
        let workload = spec["workloads"]
            .as_table()
            .unwrap()
            .values()
            .next()
            .unwrap();
        assert_eq!(workload["api"].as_str(), Some(api));
        if api == "kserve" {
            assert_eq!(
                workload["inputs"].to_string(),
                r#"[{ datatype = "FP32", name = "images", shape = [3, 224, 224] }]"#
            );
            assert_eq!(spec["matrix"]["batch"].to_string(), "[1, 8, 32]");
        } else {
            assert!(workload.get("stream").is_none(), "decoupled: streamed");
        }
        let (code, text) = bin(&proj, &["validate", "bench.toml"]);
        assert_eq!(code, Some(0), "{text}");
        let (code, text) = bin(
            &proj,
            &["run", "bench.toml", "-q", "--only", point, "--out", "out"],
        );
        assert_eq!(code, Some(0), "{folder}: {text}");
        let r = results(&proj.join("out"));
        let p = &r["points"][0];
        assert_eq!(p["status"], "complete", "{}", p["failure"]);
        let req = &p["merged"]["requests"];
        assert!(req["succeeded"].as_u64().unwrap() > 10, "{folder}: {req}");
        assert_eq!(req["failed"], 0, "{folder}: {req}");
    }
    let (code, text) = bin(
        dir,
        &["init", "init-tokens", "--url", &url, "--model", "tokens"],
    );
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.contains(r#"model "tokens""#)
            && text.contains(r#"input "ids" has the shape [-1] per item"#),
        "{text}"
    );
    assert!(
        !dir.join("init-tokens").exists(),
        "a refused init writes nothing"
    );
}

/// `api = "generate"` against `triton`'s `generate` and `generate_once`.
fn generate_points(triton: &Triton, dir: &Path) {
    let port = triton.port;
    let spec_text = format!(
        r#"name = "triton-generate"
seed = 3
[targets.triton]
kind = "openai"
base_url = "http://127.0.0.1:{port}"
[models.generate]
served_name = "generate"
[models.generate_once]
served_name = "generate_once"
[workloads.stream]
api = "generate"
input_tokens = 16
output_tokens = 8
ignore_eos = true
[workloads.whole]
api = "generate"
input_tokens = 16
output_tokens = 8
ignore_eos = true
stream = false
[load]
concurrency = 2
requests = 20
warmup_requests = 2
timeouts = {{ first_token = "60s", total = "60s" }}
[matrix]
include = [
  {{ model = "generate", workload = "stream" }},
  {{ model = "generate_once", workload = "whole", concurrency = 1 }},
  {{ model = "generate", workload = "whole" }},
]
"#
    );
    let spec_path = dir.join("generate.toml");
    std::fs::write(&spec_path, spec_text).unwrap();
    let spec = infer_bench::spec::load(&spec_path).unwrap_or_else(|e| panic!("{e}"));
    let plan = Plan::build(&spec).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = RunOptions::new(dir.join("out-generate"));
    let results = run_plan(&spec, &plan, &opts, &rt, Arc::new(Interrupt::default())).unwrap();
    let log = || std::fs::read_to_string(&triton.log).unwrap_or_default();
    let point = |model: &str, workload: &str| {
        results
            .points
            .iter()
            .find(|p| {
                p.axes.get("model").map(String::as_str) == Some(model)
                    && p.config.workload.name == workload
            })
            .unwrap_or_else(|| panic!("no point {model}/{workload}"))
    };

    // Streamed: every request's 8 words arrive as 8 events, counted as
    // 8 tokens (no usage, no tokenizer: by events).
    let p = point("generate", "stream");
    let s = &p.merged;
    assert_eq!(p.failure, None, "{}", log());
    assert_eq!(
        (s.requests.succeeded, s.requests.failed),
        (20, 0),
        "{:?} {:?}",
        s.errors,
        s.error_examples
    );
    assert_eq!(s.tokens.output_total, 160);
    assert_eq!(s.tokens.output_source.get("events"), Some(&20));
    let (ttft, itl, lag) = (
        s.latency_ms["ttft"],
        s.latency_ms["itl"],
        s.latency_ms["dispatch_lag"],
    );
    // Whole answers: one response, the same words, at the time the last
    // streamed one would come (20 + 7 x 5 = 55 ms). One at a time: Triton
    // runs a model that is not decoupled one request after another.
    let w = point("generate_once", "whole");
    assert_eq!(
        (w.merged.requests.succeeded, w.merged.requests.failed),
        (20, 0),
        "{:?} {:?}",
        w.merged.errors,
        w.merged.error_examples
    );
    assert_eq!(w.merged.tokens.output_total, 20, "one event each");
    let e2e_once = w.merged.latency_ms["e2e"];
    assert!(e2e_once.min >= 55.0, "{e2e_once:?}");
    // What this machine adds to a request beside the model's own time:
    // pytriton's hand-off (about 3.5 ms on an idle machine), measured
    // here on the whole answers, and how long this client waited for a
    // core (its dispatch lag, p99 less p50). The bounds widen by what
    // was measured, so a loaded machine does not fail them.
    let handoff = (e2e_once.p50 - 55.0).max(0.0);
    let jitter = (lag.p99 - lag.p50).max(0.0);
    let slack = 2.0 * handoff + jitter + 2.0;
    eprintln!(
        "generate: ttft p50 {:.3} ms (model 20), itl p50 {:.3} ms (model 5), whole e2e p50 {:.3} ms (model 55); hand-off {handoff:.3} ms, jitter {jitter:.3} ms, slack {slack:.3} ms",
        ttft.p50, itl.p50, e2e_once.p50
    );
    // The model sleeps 20 ms before its first word: none comes sooner.
    assert!(ttft.min >= 20.0, "{ttft:?}");
    assert!(
        ttft.p50 <= 20.0 + slack,
        "ttft p50 {:.3} ms, bound {:.3}",
        ttft.p50,
        20.0 + slack
    );
    // The model's gaps are at least 5 ms; one gap between arrivals is
    // that plus the difference of two trips through Triton, which is as
    // often negative as positive: the median stays at 5 ms or above.
    assert!(
        itl.p50 >= 5.0 && itl.p50 <= 5.0 + slack,
        "itl p50 {:.3} ms, bounds [5, {:.3}]",
        itl.p50,
        5.0 + slack
    );
    assert_eq!(itl.count, 20 * 7);

    // A decoupled model on /generate: Triton answers 200 with an error
    // object, counted as the stream's error with Triton's sentence.
    let p = point("generate", "whole");
    let s = &p.merged;
    assert_eq!(s.requests.succeeded, 0);
    assert_eq!(s.errors.get("stream_error"), Some(&20), "{:?}", s.errors);
    let example = s.error_examples["stream_error"].unencoded().to_string();
    assert!(
        example.contains("generate expects model to produce exactly 1 response"),
        "{example}"
    );
}
