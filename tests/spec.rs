//! The spec language end to end through the real binary: every example spec
//! validates (also against the committed JSON Schema), every invalid spec
//! under tests/invalid-specs fails with exit code 2 and exactly the message
//! in its `.expected` file, and the committed schemas are not stale.
//!
//! To update the expected messages after a deliberate change:
//! `UPDATE_EXPECTED=1 cargo test --test spec`, then review the diff.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    v
}

#[test]
fn example_specs_validate() {
    let specs = toml_files(&root().join("specs"));
    assert!(specs.len() >= 5, "specs/ should show each feature");
    let out = bin().arg("validate").args(&specs).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for s in &specs {
        let first = std::fs::read_to_string(s).unwrap();
        assert!(
            first.starts_with("#:schema ../schemas/spec.schema.json"),
            "{} must start with the #:schema line",
            s.display()
        );
    }
}

#[test]
fn example_specs_match_the_committed_schema() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("schemas/spec.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft7::new(&schema).unwrap();
    for s in toml_files(&root().join("specs"))
        .into_iter()
        .chain(toml_files(&root().join("tests/specs")))
    {
        let value: toml::Value = toml::from_str(&std::fs::read_to_string(&s).unwrap()).unwrap();
        let json = serde_json::to_value(value).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&json)
            .map(|e| format!("{} at {}", e, e.instance_path().as_str()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", s.display());
    }
}

#[test]
fn invalid_specs_fail_with_their_exact_messages() {
    let dir = root().join("tests/invalid-specs");
    let update = std::env::var_os("UPDATE_EXPECTED").is_some();
    let files = toml_files(&dir);
    assert!(files.len() >= 10);
    let mut failures = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        let out = bin()
            .current_dir(&dir)
            .args(["validate", &name])
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        let expected_path = f.with_extension("expected");
        if update {
            std::fs::write(&expected_path, &stderr).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|_| panic!("missing {}", expected_path.display()));
        if stderr != expected {
            failures.push(format!("--- {name}\nexpected:\n{expected}\ngot:\n{stderr}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn committed_schemas_are_not_stale() {
    for (kind, file) in [
        ("spec", "schemas/spec.schema.json"),
        ("results", "schemas/results.schema.json"),
    ] {
        let out = bin().args(["schema", kind]).output().unwrap();
        assert!(out.status.success());
        let committed = std::fs::read_to_string(root().join(file)).unwrap();
        assert!(
            String::from_utf8(out.stdout).unwrap() == committed,
            "{file} is stale: regenerate it with `cargo run -- schema {kind} > {file}`"
        );
    }
}

#[test]
fn plan_follows_github_include_exclude_rules() {
    // 2 precisions x 3 concurrencies = 6; exclude removes fp8/c1 (1) and
    // every c32 point of bf16 (1); include adds max_concurrency to no axis
    // value it would overwrite... see the spec's comments.
    let out = bin()
        .args(["plan", "--format", "json"])
        .arg(root().join("tests/specs/matrix-rules.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let slugs: Vec<&str> = plan["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["slug"].as_str().unwrap())
        .collect();
    assert_eq!(
        slugs,
        vec![
            "sim.llama.bf16.chat.c1",
            "sim.llama.bf16.chat.c8",
            "sim.llama.bf16.long.c1",
            "sim.llama.bf16.long.c8",
            "sim.llama.fp8.chat.c8",
            "sim.llama.fp8.chat.c32",
            "sim.llama.fp8.long.c8",
            "sim.llama.fp8.long.c32",
            "sim.llama.int8.chat.c4",
        ]
    );
}

#[test]
fn point_ids_are_stable_and_change_only_with_the_configuration() {
    let spec = root().join("tests/specs/matrix-rules.toml");
    let ids = |path: &Path| -> Vec<String> {
        let out = bin()
            .args(["plan", "--format", "json"])
            .arg(path)
            .output()
            .unwrap();
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        plan["plan"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_string())
            .collect()
    };
    let a = ids(&spec);
    assert_eq!(a, ids(&spec), "same spec, same IDs");
    // Change only the "long" workload: its points get new hashes, the others keep theirs.
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("input_tokens = 2048", "input_tokens = 3000");
    let dir = tempfile::tempdir().unwrap();
    let changed = dir.path().join("matrix-rules.toml");
    std::fs::write(&changed, text).unwrap();
    let b = ids(&changed);
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        if x.contains(".long.") {
            assert_ne!(x, y, "a changed point gets a new ID");
        } else {
            assert_eq!(x, y, "an unchanged point keeps its ID");
        }
    }
    // Runs and the server's speed are not part of what a point measures.
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("runs = 1", "runs = 5")
        .replace("slowdown = 1.0", "slowdown = 1.3");
    std::fs::write(&changed, text).unwrap();
    assert_eq!(a, ids(&changed));
}

#[test]
fn partitions_split_the_points_without_overlap() {
    let spec = root().join("tests/specs/matrix-rules.toml");
    for kind in ["slice", "hash"] {
        let mut all = Vec::new();
        for k in 1..=3 {
            let out = bin()
                .args([
                    "plan",
                    "--format",
                    "json",
                    "--partition",
                    &format!("{kind}:{k}/3"),
                ])
                .arg(&spec)
                .output()
                .unwrap();
            assert!(out.status.success());
            let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            all.extend(
                plan["plan"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["id"].as_str().unwrap().to_string()),
            );
        }
        all.sort();
        let n = all.len();
        all.dedup();
        assert_eq!(all.len(), n, "{kind}: no point in two partitions");
        assert_eq!(n, 9, "{kind}: every point in one partition");
    }
    let out = bin()
        .args(["plan", "--partition", "slice:4/3"])
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("expected a partition such as \"slice:1/4\"")
    );
}

#[test]
fn commands_not_given_a_spec_explain_themselves() {
    let out = bin()
        .args(["validate", "no/such/spec.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: no/such/spec.toml: cannot read the spec: No such file or directory (os error 2)\n"
    );
}
