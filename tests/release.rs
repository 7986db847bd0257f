//! The release's recipes, read (issue 43): the workflow
//! (.github/workflows/release.yml) parses as YAML and builds what the
//! README, the action and `cargo binstall` expect; pyproject.toml builds
//! the binary wheel of this crate for the platforms the workflow builds;
//! the Containerfile makes the image the docs describe. What of them runs
//! offline, scripts/release-check and scripts/wheel-check run (CI runs the
//! latter).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &str) -> String {
    std::fs::read_to_string(root().join(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn yaml(p: &str) -> serde_json::Value {
    let v: serde_yaml::Value =
        serde_yaml::from_str(&read(p)).unwrap_or_else(|e| panic!("{p} is not YAML: {e}"));
    serde_json::to_value(v).unwrap()
}

fn toml(p: &str) -> toml::Table {
    read(p).parse().unwrap_or_else(|e| panic!("{p}: {e}"))
}

const TARGETS: [&str; 4] = [
    "x86_64-unknown-linux-gnu",
    "aarch64-unknown-linux-gnu",
    "x86_64-apple-darwin",
    "aarch64-apple-darwin",
];

#[test]
fn the_release_workflow_builds_every_platform_s_wheel_and_archive_on_a_tag() {
    let wf = yaml(".github/workflows/release.yml");
    // serde_yaml reads the key `on` as the string "on".
    let tags = &wf["on"]["push"]["tags"];
    assert!(
        tags.as_array().unwrap()[0]
            .as_str()
            .unwrap()
            .starts_with('v'),
        "{tags}"
    );
    let jobs = wf["jobs"].as_object().unwrap();
    for job in [
        "version",
        "build",
        "sdist",
        "sbom",
        "image",
        "image-manifest",
        "release",
        "pypi",
    ] {
        assert!(jobs.contains_key(job), "no job {job}");
    }
    let matrix: Vec<&str> = jobs["build"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["target"].as_str().unwrap())
        .collect();
    assert_eq!(matrix, TARGETS);
    let steps = |job: &str| -> String { serde_json::to_string(&jobs[job]["steps"]).unwrap() };
    let build = steps("build");
    assert!(build.contains("--profile dist --locked"), "{build}");
    assert!(build.contains("scripts/archive infer-bench"), "{build}");
    assert!(steps("release").contains("sha256sum"));
    assert!(steps("sbom").contains("cargo cyclonedx"));
    assert!(steps("image").contains("Containerfile"));
    // Every script a step names exists.
    for word in read(".github/workflows/release.yml").split_whitespace() {
        if let Some(s) = word.strip_prefix("scripts/") {
            assert!(root().join("scripts").join(s).is_file(), "scripts/{s}");
        }
    }
    // The archives are named as cargo binstall and the action look for them.
    let cargo = toml("Cargo.toml");
    let binstall = &cargo["package"]["metadata"]["binstall"];
    assert_eq!(
        binstall["pkg-url"].as_str().unwrap(),
        "{ repo }/releases/download/v{ version }/{ name }-v{ version }-{ target }{ archive-suffix }"
    );
    assert_eq!(
        binstall["bin-dir"].as_str().unwrap(),
        "{ name }-v{ version }-{ target }/{ bin }{ binary-ext }"
    );
    let archive = read("scripts/archive");
    assert!(archive.contains(r#"name="infer-bench-v$version-$target""#));
    let install = read("scripts/action-install");
    assert!(install.contains(r#"local name="infer-bench-v$version-$target""#));
    for t in TARGETS {
        assert!(install.contains(&format!(") target={t} ;;")), "{t}");
    }
}

#[test]
fn the_wheel_carries_this_crate_s_binary_for_the_workflow_s_platforms() {
    let py = toml("pyproject.toml");
    assert_eq!(py["project"]["name"].as_str(), Some("infer-bench"));
    assert_eq!(py["project"]["dynamic"][0].as_str(), Some("version"));
    assert_eq!(
        py["build-system"]["build-backend"].as_str(),
        Some("maturin")
    );
    let maturin = &py["tool"]["maturin"];
    assert_eq!(maturin["bindings"].as_str(), Some("bin"));
    assert_eq!(maturin["profile"].as_str(), Some("dist"));
    let cargo = toml("Cargo.toml");
    assert!(cargo["profile"]["dist"].is_table());
    assert_eq!(
        py["project"]["description"].as_str(),
        cargo["package"]["description"].as_str()
    );
    let declared = &py["tool"]["infer-bench"]["wheel-targets"];
    let mut targets: Vec<&str> = ["linux", "macos"]
        .iter()
        .flat_map(|k| declared[*k].as_array().unwrap())
        .map(|v| v.as_str().unwrap())
        .collect();
    targets.sort();
    let mut want = TARGETS.to_vec();
    want.sort();
    assert_eq!(targets, want, "the wheel targets are the workflow's");
    let classifiers = py["project"]["classifiers"].as_array().unwrap();
    assert!(
        classifiers
            .iter()
            .any(|c| c.as_str() == Some("License :: OSI Approved :: MIT License"))
    );
    assert_eq!(
        cargo["workspace"]["package"]["license"].as_str(),
        Some("MIT")
    );
}

/// The Containerfile's promises, line by line (podman builds and runs it
/// in scripts/release-check where it can).
#[test]
fn the_containerfile_builds_the_dist_binary_into_a_small_non_root_image() {
    let text = read("Containerfile");
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let from: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(from.len(), 2, "a build stage and a runtime stage");
    assert!(text.contains("ARG RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim"));
    assert!(text.contains("cargo build --locked --profile dist --bin infer-bench"));
    assert!(text.contains("ca-certificates"));
    let runtime = &lines[lines
        .iter()
        .position(|l| l.starts_with("FROM ${RUNTIME_IMAGE}"))
        .unwrap()..];
    assert!(runtime.contains(&"USER 10001:10001"), "{runtime:?}");
    assert!(runtime.contains(&r#"VOLUME ["/specs", "/results"]"#));
    assert!(runtime.contains(&r#"ENTRYPOINT ["infer-bench"]"#));
    assert!(runtime.contains(&"WORKDIR /results"));
    // The recipes run the image by its name.
    for p in [
        "docs/examples/k8s-indexed-job.yaml",
        "docs/examples/k8s-merge-job.yaml",
        "docs/examples/slurm-array.sh",
        "docs/scale-out.md",
    ] {
        assert!(read(p).contains("ghcr.io/infer-bench/infer-bench:"), "{p}");
    }
    let version = env!("CARGO_PKG_VERSION");
    for p in [
        "docs/examples/k8s-indexed-job.yaml",
        "docs/examples/k8s-merge-job.yaml",
    ] {
        assert!(
            read(p).contains(&format!("image: ghcr.io/infer-bench/infer-bench:{version}")),
            "{p} runs this version's image"
        );
    }
    assert!(Path::new(&root().join("scripts/release-check")).is_file());
}
