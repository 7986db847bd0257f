//! Datasets whose rows name images (LLaVA / ShareGPT-4V style), end to
//! end: the real binary against the scripted server, which decodes every
//! image part it receives. The files the rows name must arrive exactly
//! (format, size in pixels, bytes), before the text, with the `<image>`
//! placeholders gone from it; URLs as given; and the request log must say
//! what was sent. Rows naming what cannot be sent (a missing file, a link
//! out of the repository, a file that is not an image, a `file:` URL) are
//! refused with the dataset's file and line, before anything is sent, and
//! never with the offending file's content.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use infer_bench_testkit::runtime;
use infer_bench_testkit::scripted::{Script, ScriptedServer, fnv};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
}

fn png_file(w: u32, h: u32, shade: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let mut e = png::Encoder::new(&mut out, w, h);
    e.set_color(png::ColorType::Rgb);
    let mut writer = e.write_header().unwrap();
    let pixels: Vec<u8> = (0..w * h * 3).map(|i| (i as u8) ^ shade).collect();
    writer.write_image_data(&pixels).unwrap();
    writer.finish().unwrap();
    out
}

fn jpeg_file(w: u16, h: u16) -> Vec<u8> {
    let mut out = Vec::new();
    let pixels: Vec<u8> = (0..w as usize * h as usize * 3)
        .map(|i| (i * 7) as u8)
        .collect();
    jpeg_encoder::Encoder::new(&mut out, 80)
        .encode(&pixels, w, h, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    out
}

fn spec(url: &str, dataset: &str, format: &str, extra: &str) -> String {
    format!(
        "name = \"dataset-images\"\nseed = 11\n\n[targets.s]\nkind = \"openai\"\nbase_url = \"{url}\"\n\n[models.m]\nserved_name = \"scripted-model\"\n\n[workloads.w]\napi = \"chat\"\noutput_tokens = 4\ndataset = {{ path = \"{dataset}\", format = \"{format}\" }}\n{extra}\n\n[load]\nconcurrency = 2\nrequests = 32\n"
    )
}

/// An image as the test expects the server to see it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Seen {
    File {
        format: &'static str,
        width: u32,
        height: u32,
        bytes: usize,
        hash: u64,
    },
    Url(String),
}

fn file(format: &'static str, width: u32, height: u32, data: &[u8]) -> Seen {
    Seen::File {
        format,
        width,
        height,
        bytes: data.len(),
        hash: fnv(data),
    }
}

#[test]
fn a_llava_dataset_sends_its_files_and_urls_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("coco/train2017")).unwrap();
    let a = png_file(40, 30, 0);
    let b = png_file(17, 23, 0x5a);
    let c = jpeg_file(64, 48);
    std::fs::write(data.join("coco/train2017/000000033471.png"), &a).unwrap();
    std::fs::write(data.join("coco/b.png"), &b).unwrap();
    std::fs::write(data.join("c.jpg"), &c).unwrap();
    // LLaVA-Instruct's shape: a JSON array, the image next to the
    // conversation, `<image>` in the human turn. The last row names the
    // first row's file by another path: it is read once, sent the same.
    let rows = r#"[
  {"id": "000000033471", "image": "coco/train2017/000000033471.png",
   "conversations": [{"from": "human", "value": "<image>\nWhat colour is the bus?"},
                     {"from": "gpt", "value": "The bus is white and red."}]},
  {"id": "two", "images": ["coco/b.png", "c.jpg"],
   "conversations": [{"from": "human", "value": "Compare <image> with <image> please."},
                     {"from": "gpt", "value": "They differ."}]},
  {"id": "url", "image": "https://example.com/cat.jpg",
   "conversations": [{"from": "human", "value": "Describe this <image>"},
                     {"from": "gpt", "value": "A cat."}]},
  {"id": "again", "image": "./coco/../coco/train2017/000000033471.png",
   "conversations": [{"from": "human", "value": "<image>\nAnd the sky?"},
                     {"from": "gpt", "value": "Blue."}]}
]"#;
    std::fs::write(data.join("llava.json"), rows).unwrap();
    let expected: BTreeMap<&str, Vec<Seen>> = [
        ("What colour is the bus?", vec![file("png", 40, 30, &a)]),
        (
            "Compare  with  please.",
            vec![file("png", 17, 23, &b), file("jpeg", 64, 48, &c)],
        ),
        (
            "Describe this",
            vec![Seen::Url("https://example.com/cat.jpg".into())],
        ),
        ("And the sky?", vec![file("png", 40, 30, &a)]),
    ]
    .into_iter()
    .collect();

    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script {
            keep_prompts: true,
            ..Script::fast()
        }))
        .unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(
        &path,
        spec(&server.base_url(), "data/llava.json", "sharegpt", ""),
    )
    .unwrap();
    let out = bin()
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--requests")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let log = std::fs::read_to_string(dir.path().join("out/requests.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let records: BTreeMap<String, _> = server
        .take_records()
        .into_iter()
        .map(|r| (format!("chatcmpl-scripted-{}", r.seq), r))
        .collect();
    assert_eq!((lines.len(), records.len()), (32, 32));
    let mut rows_seen = BTreeSet::new();
    for line in &lines {
        let rec = &records[line["response_id"].as_str().unwrap()];
        assert!(!rec.prompt.contains("<image>"), "{:?}", rec.prompt);
        let want = expected
            .get(rec.prompt.as_str())
            .unwrap_or_else(|| panic!("unexpected prompt {:?}", rec.prompt));
        rows_seen.insert(rec.prompt.clone());
        let got: Vec<Seen> = rec
            .media
            .iter()
            .map(|m| {
                assert!(m.before_text, "images go before the text");
                match &m.url {
                    Some(u) => Seen::Url(u.clone()),
                    None => Seen::File {
                        format: if m.format == "png" { "png" } else { "jpeg" },
                        width: m.width,
                        height: m.height,
                        bytes: m.bytes,
                        hash: m.file_hash,
                    },
                }
            })
            .collect();
        assert_eq!(&got, want, "{}", rec.prompt);
        // What the client says it sent is what arrived.
        let (mut pixels, mut bytes) = (0u64, 0u64);
        for s in want {
            if let Seen::File {
                width,
                height,
                bytes: n,
                ..
            } = s
            {
                pixels += *width as u64 * *height as u64;
                bytes += *n as u64;
            }
        }
        assert_eq!(line["images"], want.len(), "{line}");
        assert_eq!(line["image_pixels"], pixels, "{line}");
        assert_eq!(line["image_bytes"], bytes, "{line}");
    }
    assert_eq!(rows_seen.len(), 4, "every row was drawn: {rows_seen:?}");
    assert!(!log.contains("base64,") && !stderr.contains("base64,"));
}

#[test]
fn jsonl_rows_name_images_too() {
    let dir = tempfile::tempdir().unwrap();
    let a = png_file(8, 9, 1);
    std::fs::write(dir.path().join("a.png"), &a).unwrap();
    std::fs::write(
        dir.path().join("rows.jsonl"),
        "{\"prompt\": \"<image>\\nName it.\", \"image\": \"a.png\"}\n{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Both? <image><image>\"}], \"images\": [\"a.png\", \"https://example.com/x.png\"]}\n",
    )
    .unwrap();
    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script {
            keep_prompts: true,
            image_patch: 4,
            ..Script::fast()
        }))
        .unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(
        &path,
        spec(&server.base_url(), "rows.jsonl", "jsonl", "")
            .replace("requests = 32", "requests = 12"),
    )
    .unwrap();
    let out = bin()
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut kinds = BTreeSet::new();
    for rec in server.take_records() {
        let shape: Vec<(String, u32, u32, u64)> = rec
            .media
            .iter()
            .map(|m| (m.format.clone(), m.width, m.height, m.file_hash))
            .collect();
        match rec.prompt.as_str() {
            "Name it." => assert_eq!(shape, [("png".into(), 8, 9, fnv(&a))]),
            "Both?" => assert_eq!(
                shape,
                [("png".into(), 8, 9, fnv(&a)), ("url".into(), 0, 0, 0)]
            ),
            other => panic!("unexpected prompt {other:?}"),
        }
        kinds.insert(rec.prompt);
    }
    assert_eq!(kinds.len(), 2);
    // The point's media block and its hint count the rows' images.
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/results.json")).unwrap(),
    )
    .unwrap();
    let point = &results["points"][0];
    let media = &point["merged"]["media"];
    assert_eq!(media["requests"], 12);
    assert!(
        media["images_per_request"].as_f64().unwrap() >= 1.0,
        "{media}"
    );
    assert!(media["prompt_tokens_per_image"].is_number(), "{media}");
    assert!(
        point["hints"].to_string().contains("image cost about"),
        "{}",
        point["hints"]
    );
}

/// Runs `validate` and `run` on a spec whose dataset `rows.jsonl` holds
/// `row` as its second line, in a folder prepared by `prepare`; both must
/// refuse with exit code 2 naming `rows.jsonl:2` and `expected`, send
/// nothing, and never show `secret`.
fn refused(row: &str, prepare: impl Fn(&Path), expected: &str, secret: &str) {
    let dir = tempfile::tempdir().unwrap();
    prepare(dir.path());
    std::fs::write(
        dir.path().join("rows.jsonl"),
        format!("{{\"prompt\": \"fine\"}}\n{row}\n"),
    )
    .unwrap();
    let rt = runtime();
    let server = rt.block_on(ScriptedServer::start(Script::fast())).unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, spec(&server.base_url(), "rows.jsonl", "jsonl", "")).unwrap();
    for cmd in ["validate", "run"] {
        let mut c = bin();
        c.arg(cmd).arg(&path);
        if cmd == "run" {
            c.arg("--out").arg(dir.path().join("out"));
        }
        let out = c.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd} {row}: {stderr}");
        assert!(stderr.contains("rows.jsonl:2: "), "{cmd} {row}: {stderr}");
        assert!(stderr.contains(expected), "{cmd} {row}: {stderr}");
        assert!(
            !stderr.contains(secret),
            "{cmd} {row} shows the file: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(server.take_records().is_empty(), "nothing is sent");
}

const SECRET: &str = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI";

#[test]
fn rows_naming_what_cannot_be_sent_are_refused_at_their_line() {
    refused(
        r#"{"prompt": "x", "image": "imgs/missing.png"}"#,
        |_| {},
        "cannot read image",
        SECRET,
    );
    refused(
        r#"{"prompt": "x", "image": "notes.png"}"#,
        |d| std::fs::write(d.join("notes.png"), format!("{SECRET}\n")).unwrap(),
        "is not a PNG, JPEG, WebP or GIF file",
        SECRET,
    );
    // A link inside the folder (the repository: it holds no .git) to a
    // file outside it: refused before it is read, image or not.
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("secret.png");
    std::fs::write(&target, format!("{SECRET}\n")).unwrap();
    refused(
        r#"{"prompt": "x", "images": ["ok.png", "imgs/link.png"]}"#,
        |d| {
            std::fs::write(d.join("ok.png"), png_file(2, 2, 0)).unwrap();
            std::fs::create_dir(d.join("imgs")).unwrap();
            std::os::unix::fs::symlink(&target, d.join("imgs/link.png")).unwrap();
        },
        "outside the repository",
        SECRET,
    );
    refused(
        r#"{"prompt": "x", "image": "file:///etc/passwd"}"#,
        |_| {},
        "a `file:` address is neither an http(s) URL nor a file's path",
        "root:",
    );
    refused(
        r#"{"prompt": "x", "image": "big.png"}"#,
        |d| {
            let f = std::fs::File::create(d.join("big.png")).unwrap();
            f.set_len((20 << 20) + 1).unwrap();
        },
        "larger than the limit of 20 MiB",
        SECRET,
    );
}

#[test]
fn a_workload_sends_either_the_rows_images_or_its_own() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.png"), png_file(2, 2, 0)).unwrap();
    std::fs::write(
        dir.path().join("rows.jsonl"),
        "{\"prompt\": \"a\"}\n{\"prompt\": \"b\", \"image\": \"a.png\"}\n",
    )
    .unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(
        &path,
        spec(
            "http://127.0.0.1:1/v1",
            "rows.jsonl",
            "jsonl",
            "images = { count = 1, width = 8, height = 8 }",
        ),
    )
    .unwrap();
    let out = bin().arg("validate").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("spec.toml:15:1: workloads.w.images"),
        "{stderr}"
    );
    assert!(stderr.contains("rows.jsonl:2"), "{stderr}");
    assert!(stderr.contains("remove `images`"), "{stderr}");
}

#[test]
fn the_simulator_counts_webp_and_gif_images_of_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    // Headers are all the client and the simulator read: a WebP (VP8X) of
    // 280 x 56 and a GIF of 56 x 56, followed by no image data.
    let mut webp = b"RIFF\x16\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
    webp.extend([0x17, 0x01, 0x00, 0x37, 0x00, 0x00]);
    let gif = b"GIF89a\x38\x00\x38\x00\x00\x00\x00".to_vec();
    std::fs::write(dir.path().join("a.webp"), &webp).unwrap();
    std::fs::write(dir.path().join("b.gif"), &gif).unwrap();
    std::fs::write(
        dir.path().join("rows.jsonl"),
        "{\"prompt\": \"one two three <image> four\", \"images\": [\"a.webp\", \"b.gif\"]}\n",
    )
    .unwrap();
    let text = "name = \"sim-dataset-images\"\nseed = 1\n[targets.s]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\noutput_tokens = 4\ndataset = { path = \"rows.jsonl\", format = \"jsonl\" }\n[load]\nconcurrency = 2\nrequests = 4\n";
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
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = std::fs::read_to_string(dir.path().join("out/requests.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    for line in &lines {
        assert_eq!(line["images"], 2);
        assert_eq!(line["image_pixels"], 280 * 56 + 56 * 56);
        assert_eq!(line["image_bytes"], webp.len() + gif.len());
        // 4 words, 10 x 2 and 2 x 2 image tokens of 28 pixels, and the
        // chat template's 5 + 5.
        assert_eq!(line["input_tokens"], 4 + 20 + 4 + 10, "{line}");
    }
}
