//! Images and audio in chat, end to end: the real binary against the
//! scripted server, which decodes every part it receives (base64, a PNG
//! whole, JPEG and WAV headers) and records count, size, format and bytes;
//! those must be exactly what the spec declared and what the client says
//! it sent. Also the URL list form, `validate`'s errors with position, and
//! that no data URL reaches a log or a report.

use std::collections::{BTreeMap, HashSet};
use std::process::Command;

use infer_bench_testkit::runtime;
use infer_bench_testkit::scripted::{Script, ScriptedServer, ServedRequest};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
}

fn spec(url: &str, workload: &str, load: &str) -> String {
    format!(
        "name = \"media-test\"\nseed = 5\n\n[targets.s]\nkind = \"openai\"\nbase_url = \"{url}\"\n\n[models.m]\nserved_name = \"scripted-model\"\n\n[workloads.w]\napi = \"chat\"\ninput_tokens = 8\noutput_tokens = 4\n{workload}\n\n[load]\n{load}\n"
    )
}

struct Run {
    results: serde_json::Value,
    lines: Vec<serde_json::Value>,
    log: String,
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

fn run(text: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, text).unwrap();
    let out = bin()
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--requests")
        .output()
        .unwrap();
    let results = std::fs::read_to_string(dir.path().join("out/results.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(serde_json::Value::Null);
    let log = std::fs::read_to_string(dir.path().join("out/requests.jsonl")).unwrap_or_default();
    Run {
        results,
        lines: log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        log,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    }
}

/// The server's records by the response id the client logged.
fn by_response_id(records: Vec<ServedRequest>) -> BTreeMap<String, ServedRequest> {
    records
        .into_iter()
        .map(|r| (format!("chatcmpl-scripted-{}", r.seq), r))
        .collect()
}

#[test]
fn synthetic_png_images_and_wav_audio_arrive_exactly_as_declared() {
    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script {
            image_patch: 28,
            ..Script::fast()
        }))
        .unwrap();
    let text = spec(
        &server.base_url(),
        "images = { count = 2, width = 300, height = 200, format = \"png\", detail = \"high\" }\naudio = { seconds = 0.5 }",
        "concurrency = 4\nrequests = 24",
    );
    let r = run(&text);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let records = by_response_id(server.take_records());
    assert_eq!(records.len(), 24);
    assert_eq!(r.lines.len(), 24);
    let mut seen = HashSet::new();
    for line in &r.lines {
        let rec = &records[line["response_id"].as_str().unwrap()];
        let images: Vec<_> = rec.media.iter().filter(|m| m.is_image()).collect();
        let audio: Vec<_> = rec.media.iter().filter(|m| !m.is_image()).collect();
        assert_eq!(images.len(), 2);
        for m in &images {
            assert_eq!(
                (m.format.as_str(), m.width, m.height, m.detail.as_deref()),
                ("png", 300, 200, Some("high"))
            );
            assert!(seen.insert(m.content_hash), "every image's pixels differ");
        }
        assert_eq!(audio.len(), 1);
        assert_eq!((audio[0].sample_rate, audio[0].seconds), (16_000, 0.5));
        assert_eq!(audio[0].bytes, 44 + 16_000);
        // What the client says it sent is what arrived, to the byte.
        assert_eq!(line["images"], 2);
        assert_eq!(line["image_pixels"], 2 * 300 * 200);
        assert_eq!(
            line["image_bytes"].as_u64().unwrap(),
            images.iter().map(|m| m.bytes as u64).sum::<u64>()
        );
        assert_eq!(line["audio_bytes"].as_u64().unwrap(), audio[0].bytes as u64);
        assert_eq!(line["audio_seconds"], 0.5);
        // 8 words of text, and 11 x 8 patches of 28 pixels per image.
        assert_eq!(line["input_tokens"], 8 + 2 * 88);
        assert_eq!(line["input_tokens_requested"], 8);
    }
    let media = &r.results["points"][0]["merged"]["media"];
    assert_eq!(media["requests"], 24);
    assert_eq!(media["images_per_request"], 2.0);
    assert_eq!(media["image_pixels_per_request"], 120_000.0);
    assert_eq!(media["audio_seconds_per_request"], 0.5);
    assert_eq!(media["prompt_tokens_per_image"], 88.0);
    let total: u64 = records
        .values()
        .flat_map(|r| &r.media)
        .filter(|m| m.is_image())
        .map(|m| m.bytes as u64)
        .sum();
    assert_eq!(media["image_bytes_total"].as_u64().unwrap(), total);
    // The hint says what an image cost; the report shows it.
    let hints = r.results["points"][0]["hints"].to_string();
    assert!(
        hints.contains("each 300x200 image cost about 88 prompt tokens"),
        "{hints}"
    );
    // No data URL in the log, on the terminal or in the results.
    for (what, text) in [
        ("requests.jsonl", &r.log),
        ("stdout", &r.stdout),
        ("stderr", &r.stderr),
        ("results.json", &r.results.to_string()),
    ] {
        assert!(!text.contains("base64,"), "{what} holds a data URL");
        assert!(!text.contains("iVBORw0KGgo"), "{what} holds a PNG");
    }
}

#[test]
fn jpeg_images_have_their_declared_size() {
    let rt = runtime();
    let server = rt.block_on(ScriptedServer::start(Script::fast())).unwrap();
    let text = spec(
        &server.base_url(),
        "images = { count = 3, width = 64, height = 48, format = \"jpeg\" }",
        "concurrency = 2\nrequests = 10",
    );
    let r = run(&text);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let records = by_response_id(server.take_records());
    let mut bytes = HashSet::new();
    for line in &r.lines {
        let rec = &records[line["response_id"].as_str().unwrap()];
        assert_eq!(rec.media.len(), 3);
        for m in &rec.media {
            assert_eq!(
                (m.format.as_str(), m.width, m.height, m.detail.as_deref()),
                ("jpeg", 64, 48, None)
            );
            assert!(bytes.insert(m.content_hash), "every JPEG's bytes differ");
        }
        assert_eq!(
            line["image_bytes"].as_u64().unwrap(),
            rec.media.iter().map(|m| m.bytes as u64).sum::<u64>()
        );
    }
}

#[test]
fn a_url_list_is_sent_as_given_in_turn() {
    let rt = runtime();
    let server = rt.block_on(ScriptedServer::start(Script::fast())).unwrap();
    let text = spec(
        &server.base_url(),
        "images = { count = 1, urls = [\"https://example.com/a.png\", \"https://example.com/b.jpg\"], detail = \"low\" }",
        "concurrency = 1\nrequests = 4",
    );
    let r = run(&text);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let mut urls: Vec<String> = server
        .take_records()
        .iter()
        .map(|rec| {
            assert_eq!(rec.media.len(), 1);
            assert_eq!(rec.media[0].detail.as_deref(), Some("low"));
            rec.media[0].url.clone().unwrap()
        })
        .collect();
    urls.sort();
    assert_eq!(
        urls,
        [
            "https://example.com/a.png",
            "https://example.com/a.png",
            "https://example.com/b.jpg",
            "https://example.com/b.jpg"
        ]
    );
    assert_eq!(r.lines[0]["images"], 1);
    assert_eq!(r.lines[0]["image_bytes"], 0);
}

#[test]
fn validate_refuses_media_where_it_cannot_go_with_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "api = \"completions\"\ninput_tokens = 8\noutput_tokens = 4\nimages = { width = 64, height = 64 }",
            "v0.toml:11:1: workloads.w.images:",
            "need api = \"chat\"",
        ),
        (
            "input_tokens = 8\noutput_tokens = 4\nimages = { count = 1 }",
            "workloads.w.images",
            "missing key `width`",
        ),
        (
            "input_tokens = 8\noutput_tokens = 4\nimages = { width = 9000, height = 10 }",
            "workloads.w.images.width",
            "between 1 and 8192",
        ),
        (
            "input_tokens = 8\noutput_tokens = 4\nimages = { urls = [\"ftp://x\"] }",
            "workloads.w.images.urls[0]",
            "http(s) URL",
        ),
        (
            "api = \"completions\"\ninput_tokens = 8\noutput_tokens = 4\naudio = { seconds = 1 }",
            "workloads.w.audio",
            "needs api = \"chat\"",
        ),
        (
            "input_tokens = 8\noutput_tokens = 4\nimages = { width = 8, height = 8, fromat = \"png\" }",
            "fromat",
            "did you mean `format`",
        ),
    ];
    for (i, (workload, place, message)) in cases.iter().enumerate() {
        let text = format!(
            "name = \"v\"\n[targets.s]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n[models.m]\nserved_name = \"m\"\n[workloads.w]\n{workload}\n[load]\nconcurrency = 1\nrequests = 1\n"
        );
        let path = dir.path().join(format!("v{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let out = bin().arg("validate").arg(&path).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "case {i} validated");
        assert!(err.contains(&format!("v{i}.toml:")), "case {i}: {err}");
        assert!(err.contains(place), "case {i}: {err}");
        assert!(err.contains(message), "case {i}: {err}");
    }
}

#[test]
fn the_vlm_example_runs_against_the_scripted_server() {
    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script {
            image_patch: 28,
            ..Script::fast()
        }))
        .unwrap();
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/examples/vlm.toml"),
    )
    .unwrap();
    let text = example.replace("http://127.0.0.1:8000/v1", &server.base_url());
    assert_ne!(
        text, example,
        "the example names the base_url the test replaces"
    );
    let r = run(&text);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let points = r.results["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    // (images per request, prompt tokens per image): 16 x 16 patches of a
    // 448-pixel square, 32 x 24 of 896 x 672.
    for (p, (images, tokens)) in points.iter().zip([(2.0, 256.0), (1.0, 768.0)]) {
        let media = &p["merged"]["media"];
        assert_eq!(media["images_per_request"], images);
        assert_eq!(media["prompt_tokens_per_image"], tokens);
    }
    let records = server.take_records();
    assert_eq!(records.len(), 16);
    let mut sizes: Vec<(String, u32, u32, usize)> = records
        .iter()
        .map(|r| {
            let m = &r.media[0];
            (m.format.clone(), m.width, m.height, r.media.len())
        })
        .collect();
    sizes.sort();
    sizes.dedup();
    assert_eq!(
        sizes,
        [("jpeg".into(), 896, 672, 1), ("png".into(), 448, 448, 2)]
    );
}

#[test]
fn the_simulator_counts_image_tokens() {
    let text = "name = \"sim-media\"\nseed = 1\n[targets.s]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 16\noutput_tokens = 4\nimages = { count = 2, width = 448, height = 448 }\n[load]\nconcurrency = 2\nrequests = 6\n";
    let r = run(text);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let media = &r.results["points"][0]["merged"]["media"];
    assert_eq!(media["images_per_request"], 2.0);
    // 16 x 16 tokens of 28 pixels per image, and the chat template's 10
    // tokens (5 for the message, 5 for the request) shared by two images.
    assert_eq!(media["prompt_tokens_per_image"], 256.0 + 5.0);
    for line in &r.lines {
        assert_eq!(line["input_tokens"], 16 + 2 * 256 + 10);
    }
}
