//! `infer-bench init`, end to end with the real binary: the starter spec
//! runs as written on the simulator (and is blessed and judged); `--url`
//! asks a real loopback server (the scripted server, llama.cpp's
//! llama-server, and the simulator's KServe v2 ResNet-50; tests/triton.rs
//! asks a real Triton) for its model and the spec then runs against it; a
//! second init refuses and changes nothing; a server's hostile model id
//! cannot add a line to the spec; an unreachable server leaves nothing
//! behind; `--ci github` writes a workflow that uses the composite action
//! as the documented example does.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use infer_bench_testkit::runtime;
use infer_bench_testkit::scripted::{Script, ScriptedServer};

fn bin(cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_infer-bench"));
    c.current_dir(cwd);
    c
}

fn run(c: &mut Command) -> Output {
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every file under `dir`, by path relative to it, with its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, at: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(at).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn spec_table(dir: &Path) -> toml::Table {
    std::fs::read_to_string(dir.join("bench.toml"))
        .unwrap()
        .parse()
        .unwrap()
}

fn results(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
}

/// `validate`, then `run` of one point, of the spec init wrote in
/// `proj`, as written: both exit 0, and the point's requests all
/// succeeded (more than 10). The point's results.
fn validate_and_run_one(proj: &Path, point: &str) -> serde_json::Value {
    let o = run(bin(proj).args(["validate", "bench.toml"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(bin(proj).args(["run", "bench.toml", "-q", "--only", point, "--out", "out"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = results(&proj.join("out"));
    let p = r["points"][0].clone();
    let req = &p["merged"]["requests"];
    assert!(req["succeeded"].as_u64().unwrap() > 10, "{req}");
    assert_eq!(req["failed"], 0, "{req}");
    p
}

/// `init` with no URL, then the first minute a user has: validate, run,
/// bless the first baseline, and judge a second run against it.
#[test]
fn init_writes_a_simulator_spec_that_runs_is_blessed_and_judged() {
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("proj");
    let o = run(bin(tmp.path()).args(["init", "proj"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(o.stdout.is_empty(), "init reports on stderr: {}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("wrote proj/bench.toml"), "{stderr}");
    let files = tree(&proj);
    assert_eq!(
        files.keys().cloned().collect::<Vec<_>>(),
        [PathBuf::from("baselines/.gitkeep"), "bench.toml".into()]
    );
    assert!(files[Path::new("baselines/.gitkeep")].is_empty());
    let spec = String::from_utf8(files[Path::new("bench.toml")].clone()).unwrap();
    assert_eq!(
        spec.lines().next(),
        Some("#:schema https://infer-bench.dev/schemas/spec.schema.json")
    );
    let t = spec_table(&proj);
    assert_eq!(t["name"].as_str(), Some("bench"));
    assert_eq!(t["targets"]["sim"]["kind"].as_str(), Some("sim"));
    assert_eq!(
        t["targets"]["sim"]["sim"]["clock"].as_str(),
        Some("virtual")
    );
    assert_eq!(
        t["regression"]["baseline"].as_str(),
        Some("baselines/bench.json")
    );

    let o = run(bin(&proj).args(["validate", "bench.toml"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("warning"),
        "{}",
        text(&o)
    );
    let o = run(bin(&proj).args(["run", "bench.toml", "-q", "--out", "first"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = results(&proj.join("first"));
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 3, "a sweep of three concurrencies");
    for p in points {
        let req = &p["merged"]["requests"];
        assert!(req["succeeded"].as_u64().unwrap() > 0, "{req}");
        assert_eq!(req["failed"], 0, "{req}");
        assert_eq!(p["slo_pass"], true, "{}", p["slug"]);
    }
    // The regression gate works from the first run: bless, then judge.
    let o = run(bin(&proj).args(["bless", "first"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(proj.join("baselines/bench.json").is_file());
    let o = run(bin(&proj).args(["run", "bench.toml", "-q", "--out", "second", "--baseline"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// `--url` against the scripted server: its model and base URL in the
/// spec, its dialect (owned_by "vllm") too; the spec validates and runs
/// against it, every request answered.
#[test]
fn init_url_names_the_served_model_and_runs_against_it() {
    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script::default()))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("proj");
    let o = run(bin(tmp.path())
        .args(["init", "proj", "--name", "scripted", "--url"])
        .arg(server.base_url()));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = spec_table(&proj);
    let targets = t["targets"].as_table().unwrap();
    assert_eq!(targets.len(), 1);
    let target = &targets["server"];
    assert_eq!(target["kind"].as_str(), Some("openai"));
    assert_eq!(
        target["base_url"].as_str(),
        Some(server.base_url().as_str())
    );
    assert_eq!(target["dialect"].as_str(), Some("vllm"));
    assert_eq!(
        t["models"]["model"]["served_name"].as_str(),
        Some("scripted-model")
    );
    assert_eq!(
        t["regression"]["baseline"].as_str(),
        Some("baselines/scripted.json")
    );
    validate_and_run_one(&proj, "server.model.chat.c4");
    rt.block_on(server.wait_idle());
    let records = server.records();
    assert!(!records.is_empty());
}

/// `--url` at a KServe v2 server's root (the simulator's ResNet-50,
/// served in process as Triton serves it): no OpenAI `/models` there, so
/// init reads the model from Triton's repository index and its metadata,
/// writes a tensor workload with the model's input and batch sizes up to
/// its max_batch_size, and the spec runs as written. A `--model` the
/// server does not serve is refused, and nothing is written.
#[test]
fn init_url_at_a_kserve_root_writes_a_tensor_workload_that_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let backing = tmp.path().join("backing.toml");
    std::fs::write(
        &backing,
        "name = \"backing\"\n[targets.sim]\nkind = \"sim\"\ngpu = \"a100-80gb\"\n\
         [models.resnet]\npreset = \"resnet-50\"\nserved_name = \"classifier\"\n\
         [workloads.classify]\napi = \"kserve\"\n[load]\nrequests = 1\nconcurrency = 1\n",
    )
    .unwrap();
    let spec = infer_bench::spec::load(&backing).unwrap();
    let plan = infer_bench::plan::Plan::build(&spec).unwrap();
    let server = infer_bench::sim::server::SimServer::start(&plan.points[0].config).unwrap();
    let url = server.base_url();
    assert!(!url.ends_with("/v1"), "{url}");
    let o = run(bin(tmp.path()).args(["init", "proj", "--name", "vision", "--url", &url]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("serves \"classifier\" over KServe v2"),
        "{}",
        text(&o)
    );
    let proj = tmp.path().join("proj");
    let t = spec_table(&proj);
    assert_eq!(
        t["targets"]["server"]["base_url"].as_str(),
        Some(url.as_str())
    );
    assert_eq!(
        t["models"]["model"]["served_name"].as_str(),
        Some("classifier")
    );
    let w = &t["workloads"]["tensors"];
    assert_eq!(w["api"].as_str(), Some("kserve"));
    assert_eq!(
        w["inputs"].to_string(),
        r#"[{ datatype = "FP32", name = "images", shape = [3, 224, 224] }]"#
    );
    assert_eq!(t["matrix"]["batch"].to_string(), "[1, 8, 32]");
    let gates: Vec<&str> = t["regression"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["metric"].as_str().unwrap())
        .collect();
    assert_eq!(gates, ["e2e", "inputs_per_s", "error_rate"]);
    let p = validate_and_run_one(&proj, "server.model.tensors.b8.c1");
    // Every request carried 8 images.
    let inputs_per_s = p["merged"]["inputs_per_s"].as_f64().unwrap();
    let per_s = p["merged"]["request_throughput"].as_f64().unwrap();
    assert!((inputs_per_s / per_s - 8.0).abs() < 1e-6, "{p}");

    let o = run(bin(tmp.path()).args(["init", "other", "--url", &url, "--model", "nope"]));
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("model \"nope\""),
        "{}",
        text(&o)
    );
    assert!(!tmp.path().join("other").exists());
}

/// A second init into the same folder refuses (exit 2, naming the file)
/// and leaves every file as it was, byte for byte; one that would add
/// only a workflow refuses too, and writes no workflow.
#[test]
fn a_second_init_refuses_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(bin(tmp.path()).arg("init"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let before = tree(tmp.path());
    for args in [&["init"][..], &["init", ".", "--ci", "github"]] {
        let o = run(bin(tmp.path()).args(args));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("bench.toml already exists") && stderr.contains("another folder"),
            "{stderr}"
        );
        assert!(o.stdout.is_empty());
        assert_eq!(tree(tmp.path()), before, "{args:?}");
        assert!(!tmp.path().join(".github").exists());
    }
    // An existing workflow is refused as well, before the spec is written.
    let other = tmp.path().join("other");
    std::fs::create_dir_all(other.join(".github/workflows")).unwrap();
    std::fs::write(other.join(".github/workflows/infer-bench.yml"), "mine\n").unwrap();
    let o = run(bin(tmp.path()).args(["init", "other", "--ci", "github"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("infer-bench.yml already exists"));
    assert!(!other.join("bench.toml").exists());
    assert!(!other.join("baselines").exists());
    assert_eq!(
        std::fs::read_to_string(other.join(".github/workflows/infer-bench.yml")).unwrap(),
        "mine\n"
    );
}

/// The model id is the server's text. One with quotes, brackets, a `#`,
/// `'''` and a would-be table header stays one TOML string: the spec has
/// one target and the id round-trips. One with a line break or an escape
/// is refused (exit 3, saying why) and nothing is written: no spec line
/// can come from the server.
#[test]
fn a_hostile_model_id_is_one_string_or_refused() {
    let rt = runtime();
    let tmp = tempfile::tempdir().unwrap();
    let odd = r#"evil"] [targets.evil] kind = "sim" # '''\u{7f}x \ é"#;
    let server = rt
        .block_on(ScriptedServer::start(Script {
            model: odd.to_string(),
            ..Script::default()
        }))
        .unwrap();
    let o = run(bin(tmp.path())
        .args(["init", "odd", "--url"])
        .arg(server.base_url()));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = spec_table(&tmp.path().join("odd"));
    assert_eq!(t["targets"].as_table().unwrap().len(), 1, "{t}");
    assert_eq!(t["models"].as_table().unwrap().len(), 1, "{t}");
    assert_eq!(t["models"]["model"]["served_name"].as_str(), Some(odd));
    let o = run(bin(&tmp.path().join("odd")).args(["validate", "bench.toml"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    for id in [
        "x\"]\n[targets.evil]\nkind = \"sim\"\n".to_string(),
        infer_bench_testkit::hostile::INJECTION.to_string(),
        "ok\u{1b}[2Jbad".to_string(),
    ] {
        let server = rt
            .block_on(ScriptedServer::start(Script {
                model: id.clone(),
                ..Script::default()
            }))
            .unwrap();
        let o = run(bin(tmp.path())
            .args(["init", "refused", "--url"])
            .arg(server.base_url()));
        assert_eq!(o.status.code(), Some(3), "{id:?}: {}", text(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains("control character"), "{stderr}");
        assert!(!stderr.contains('\u{1b}'), "the id is shown escaped");
        assert!(!tmp.path().join("refused").exists(), "{id:?}");
    }
}

/// A server that is not there: exit 3, a message naming the URL, and
/// nothing written (not even the folder).
#[test]
fn an_unreachable_server_leaves_nothing_behind() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/v1");
    let o = run(bin(tmp.path()).args(["init", "proj", "--ci", "github", "--url", &url]));
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!("cannot read {url}/models"))
            && stderr.contains("nothing was written"),
        "{stderr}"
    );
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
    // A URL that is not one: a usage error, before any request.
    for bad in ["127.0.0.1:8000", "http://user:key@127.0.0.1/v1"] {
        let o = run(bin(tmp.path()).args(["init", "proj", "--url", bad]));
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
    }
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
}

/// `--ci github`: the workflow is YAML, and its gate step uses the
/// composite action as the documented example does, with inputs the
/// action declares, on the spec init wrote.
#[test]
fn ci_github_writes_a_workflow_that_uses_the_action() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(bin(tmp.path()).args(["init", "--ci", "github"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let yaml = |p: &Path| -> serde_json::Value {
        let v: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        serde_json::to_value(v).unwrap()
    };
    let wf = yaml(&tmp.path().join(".github/workflows/infer-bench.yml"));
    let example = yaml(&root.join("docs/examples/github-actions-pr.yml"));
    let action = yaml(&root.join("action.yml"));
    let gate = |w: &serde_json::Value| -> serde_json::Value {
        w["jobs"]["judge"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "gate")
            .cloned()
            .unwrap()
    };
    let (ours, theirs) = (gate(&wf), gate(&example));
    assert_eq!(ours["uses"], theirs["uses"]);
    assert_eq!(ours["with"], theirs["with"]);
    let inputs = action["inputs"].as_object().unwrap();
    for key in ours["with"].as_object().unwrap().keys() {
        assert!(inputs.contains_key(key), "the action has no input {key}");
    }
    assert_eq!(wf["env"]["SPEC"], "bench.toml");
    assert_eq!(wf["on"], example["on"]);
    assert_eq!(wf["permissions"], example["permissions"]);
    assert_eq!(wf["jobs"]["judge"]["runs-on"], "ubuntu-latest");
    assert!(tmp.path().join("bench.toml").is_file());
    // The spec it names validates where the workflow runs it.
    let o = run(bin(tmp.path()).args(["validate", "bench.toml"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

// ---------------------------------------------------------------------------
// A real server: llama.cpp's llama-server (tests/llama.rs's conventions).

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

/// llama-server, stopped when dropped.
struct Llama {
    child: Child,
    port: u16,
}

impl Drop for Llama {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts llama-server on a free port, serving tiny-f16 as `tiny`, and
/// waits for its "listening on" line.
fn start_llama(dir: &Path) -> Llama {
    let child = Command::new(dir.join("bin/llama-server"))
        .arg("-m")
        .arg(dir.join("models/tiny-f16.gguf"))
        .args(["--alias", "tiny", "--host", "127.0.0.1", "--port", "0"])
        .args(["-np", "4", "-cb", "-c", "4096", "-t", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("llama-server starts");
    let mut server = Llama { child, port: 0 };
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    for pipe in [
        Box::new(server.child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(server.child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
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
            server.port = rest.trim().trim_end_matches('/').parse().unwrap();
            return server;
        }
        log.push(line);
    }
    panic!(
        "llama-server was not ready within 60 s:\n{}",
        log.join("\n")
    );
}

/// `--url` against a real llama-server: it names its model (`--alias`)
/// and itself (`owned_by: llamacpp`) in /v1/models, so the spec targets
/// `tiny` in the llama.cpp dialect; it validates, and a point of it runs
/// against the server with every request answered. Whether the SLOs hold
/// on this CPU is not asserted (exit 0 or 1).
#[test]
fn init_url_against_llama_server() {
    let _serial = infer_bench_testkit::timing::exclusive();
    let Some(llama) = llama_dir() else { return };
    let server = start_llama(&llama);
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}/v1", server.port);
    let o = run(bin(tmp.path()).args(["init", "--url", &url]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = spec_table(tmp.path());
    assert_eq!(
        t["targets"]["server"]["base_url"].as_str(),
        Some(url.as_str())
    );
    assert_eq!(
        t["targets"]["server"]["dialect"].as_str(),
        Some("llama.cpp")
    );
    assert_eq!(t["models"]["model"]["served_name"].as_str(), Some("tiny"));
    let o = run(bin(tmp.path()).args(["validate", "bench.toml"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(bin(tmp.path()).args([
        "run",
        "bench.toml",
        "-q",
        "--only",
        "server.model.chat.c1",
        "--out",
        "out",
    ]));
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    let r = results(&tmp.path().join("out"));
    let req = &r["points"][0]["merged"]["requests"];
    assert!(req["succeeded"].as_u64().unwrap() > 0, "{req}");
    assert_eq!(req["failed"], 0, "{req}");
    assert_eq!(r["points"][0]["server"]["dialect"], "llama.cpp");
}
