//! The scale-out recipes of docs/scale-out.md run as written.
//!
//! - `plan --count` sizes a split, and a share of it that holds no point
//!   (more shares than points) exits 0 with an empty results file that
//!   `merge` accepts as part of a whole split.
//! - The Kubernetes manifests (docs/examples/k8s-*.yaml) pass the API's
//!   own schema, strictly (`kubernetes-validate`, from PyPI, which carries
//!   the schemas of every Kubernetes release and so validates offline),
//!   ship every object their Jobs name, and their pods' commands run here
//!   the way the Jobs run them: each completion index with its volumes as
//!   local folders, then the merge Job's command over the same volume.
//! - docs/examples/slurm-array.sh runs, as written, on a real Slurm
//!   cluster: the array sized from the spec and the merge after every
//!   task (`scripts/slurm-single-node` starts a one-node cluster).
//!
//! What needs software from outside (a Slurm cluster, kubernetes-validate)
//! fails in CI when it is missing (`.ci/run` sets INFER_BENCH_CI=1 and
//! provides both) and is skipped elsewhere, saying why.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
}

/// PATH with the binary under test first, as a user's install would be.
fn path_with_bin() -> std::ffi::OsString {
    let dir = Path::new(env!("CARGO_BIN_EXE_infer-bench"))
        .parent()
        .unwrap();
    let mut dirs = vec![dir.to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

fn in_ci() -> bool {
    std::env::var_os("INFER_BENCH_CI").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Something a test needs from outside is missing: a failure in CI, which
/// must have it, and a skip, with the reason, elsewhere.
fn missing(what: &str, hint: &str) {
    if in_ci() {
        panic!("{what}; CI must have it ({hint})");
    }
    eprintln!("skipped: {what} ({hint}; in CI, INFER_BENCH_CI=1, this fails)");
}

fn check(o: &Output, code: i32, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(code),
        "{what}\nstdout: {}\nstderr: {stderr}",
        String::from_utf8_lossy(&o.stdout)
    );
    stderr
}

fn read(dir: &Path) -> Json {
    let path = dir.join("results.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn ids(r: &Json) -> Vec<String> {
    r["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect()
}

/// The IDs of a spec's points, in plan order.
fn plan_ids(spec: &Path) -> Vec<String> {
    let o = bin()
        .args(["plan", "--format", "json"])
        .arg(spec)
        .output()
        .unwrap();
    check(&o, 0, "plan --format json");
    let plan: Json = serde_json::from_slice(&o.stdout).unwrap();
    plan["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect()
}

fn count(spec: &Path, extra: &[&str]) -> String {
    let o = bin()
        .args(["plan", "--count"])
        .arg(spec)
        .args(extra)
        .output()
        .unwrap();
    check(&o, 0, "plan --count");
    String::from_utf8(o.stdout).unwrap()
}

fn fleet() -> PathBuf {
    root().join("specs/fleet.toml")
}

#[test]
fn plan_count_sizes_a_split() {
    assert_eq!(count(&fleet(), &[]), "6\n");
    assert_eq!(
        count(&fleet(), &[]).trim().parse::<usize>().unwrap(),
        plan_ids(&fleet()).len()
    );
    assert_eq!(count(&fleet(), &["--only", "h100.*"]), "2\n");
    assert_eq!(count(&fleet(), &["--partition", "slice:2/4"]), "2\n");
    assert_eq!(count(&fleet(), &["--partition", "slice:7/8"]), "0\n");
    // A name that matches nothing is a typo, with --count or --partition too.
    for cmd in [
        &["plan", "--count", "--only", "nope"][..],
        &["run", "--partition", "slice:7/8", "--only", "nope"][..],
    ] {
        let o = bin()
            .arg(cmd[0])
            .arg(fleet())
            .args(&cmd[1..])
            .output()
            .unwrap();
        let err = check(&o, 2, &cmd.join(" "));
        assert!(
            err.contains("no point of the plan matches --only nope"),
            "{err}"
        );
    }
}

#[test]
fn a_share_without_points_exits_0_and_merges_into_a_whole_split() {
    let _one = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("two.toml");
    std::fs::write(
        &spec,
        r#"name = "two"
seed = 3
[targets.sim]
kind = "sim"
gpu = "h100-sxm"
[models.m]
preset = "llama-3.2-1b"
[workloads.w]
api = "completions"
input_tokens = 64
output_tokens = 8
ignore_eos = true
[load]
warmup_requests = 2
requests = 16
[matrix]
concurrency = [2, 4]
[validity]
percentile_sample_check = false
"#,
    )
    .unwrap();
    let whole = plan_ids(&spec);
    assert_eq!(whole.len(), 2);
    let run = |part: &str| -> PathBuf {
        let out = dir.path().join(part.replace([':', '/'], "-"));
        let o = bin()
            .arg("run")
            .arg(&spec)
            .args(["--partition", part, "--out"])
            .arg(&out)
            .output()
            .unwrap();
        let err = check(&o, 0, part);
        let r = read(&out);
        if r["points"].as_array().unwrap().is_empty() {
            assert!(
                err.contains("this share holds no point of the plan"),
                "{err}"
            );
            assert_eq!(r["complete"], true, "{r}");
            assert_eq!(r["partition"], part);
            assert_eq!(r["pending"], serde_json::json!([]));
        }
        out
    };
    let merge = |inputs: &[PathBuf], out: &str| -> (Output, PathBuf) {
        let out = dir.path().join(out);
        let o = bin()
            .arg("merge")
            .args(inputs)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        (o, out)
    };

    // Four shares of two points: slices 3 and 4 hold none.
    let shards: Vec<PathBuf> = (1..=4).map(|k| run(&format!("slice:{k}/4"))).collect();
    assert!(read(&shards[2])["points"].as_array().unwrap().is_empty());
    assert!(read(&shards[3])["points"].as_array().unwrap().is_empty());
    let mut inputs = shards.clone();
    inputs.reverse(); // an empty share first: its file leads the merge
    let (o, out) = merge(&inputs, "slices");
    check(&o, 0, "merge of four slices");
    let m = read(&out);
    assert_eq!(m["complete"], true, "{m}");
    assert_eq!(m["pending"], serde_json::json!([]));
    assert_eq!(ids(&m), whole, "every point, in plan order");
    assert_eq!(m["merged_from"].as_array().unwrap().len(), 4);
    // The split is still checked: without a share that has points, the
    // merge is incomplete and names them.
    let (o, out) = merge(
        &[shards[0].clone(), shards[2].clone(), shards[3].clone()],
        "partial",
    );
    check(&o, 3, "merge without slice 2");
    assert_eq!(read(&out)["pending"], serde_json::json!([whole[1]]));

    // By hash, the empty shares fall anywhere in the split.
    let hashed: Vec<PathBuf> = (1..=6).map(|k| run(&format!("hash:{k}/6"))).collect();
    let empty = hashed
        .iter()
        .filter(|d| read(d)["points"].as_array().unwrap().is_empty())
        .count();
    assert!(empty >= 4, "two points in six shares");
    let (o, out) = merge(&hashed, "hashes");
    check(&o, 0, "merge of six hash shares");
    let m = read(&out);
    assert_eq!(m["complete"], true, "{m}");
    assert_eq!(ids(&m), whole);
}

// ---------------------------------------------------------------- Kubernetes

/// Every YAML document of a file, as JSON.
fn documents(path: &Path) -> Vec<Json> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            let v = serde_yaml::Value::deserialize(d)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            serde_json::to_value(v).unwrap()
        })
        .collect()
}

fn manifests() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("docs/examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("k8s-") && name.ends_with(".yaml")
        })
        .collect();
    v.sort();
    assert_eq!(v.len(), 2, "{v:?}");
    v
}

fn kind<'a>(docs: &'a [Json], kind: &str, name: &str) -> Option<&'a Json> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

fn pod_spec(job: &Json) -> &Json {
    &job["spec"]["template"]["spec"]
}

/// kubernetes-validate: on the PATH, or where .ci/run installs it.
fn kubernetes_validate() -> Option<PathBuf> {
    let installed = root().join("target/k8s-validate/bin/kubernetes-validate");
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("kubernetes-validate"))
        .chain([installed])
        .find(|p| p.is_file())
}

#[test]
fn kubernetes_manifests_pass_the_api_schema() {
    let Some(validator) = kubernetes_validate() else {
        return missing(
            "kubernetes-validate is not installed",
            ".ci/run installs it: python3 -m venv target/k8s-validate && target/k8s-validate/bin/pip install kubernetes-validate",
        );
    };
    // --strict: a field the API does not know is an error, not ignored.
    let o = Command::new(&validator)
        .arg("--strict")
        .args(manifests())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    check(&o, 0, "kubernetes-validate --strict");
    // Every object of every file was validated.
    let objects: usize = manifests().iter().map(|m| documents(m).len()).sum();
    assert_eq!(
        stdout.matches(" passed for resource ").count(),
        objects,
        "{stdout}"
    );
    // And a wrong manifest fails, so the pass above means something.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(&manifests()[0]).unwrap().replace(
        "completionMode: Indexed",
        "completionMode: Indexed\n  completionz: 4",
    );
    std::fs::write(&bad, text).unwrap();
    let o = Command::new(&validator)
        .arg("--strict")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn kubernetes_manifests_ship_what_their_jobs_name() {
    let [indexed, merge] = &manifests()[..] else {
        unreachable!()
    };
    let docs = documents(indexed);
    let job = kind(&docs, "Job", "infer-bench-shards").expect("the Indexed Job");
    let merge_docs = documents(merge);
    let merge_job = kind(&merge_docs, "Job", "infer-bench-merge").expect("the merge Job");
    for j in [job, merge_job] {
        for v in pod_spec(j)["volumes"].as_array().unwrap() {
            if let Some(cm) = v["configMap"]["name"].as_str() {
                assert!(kind(&docs, "ConfigMap", cm).is_some(), "ConfigMap {cm}");
            }
            if let Some(claim) = v["persistentVolumeClaim"]["claimName"].as_str() {
                let pvc = kind(&docs, "PersistentVolumeClaim", claim)
                    .unwrap_or_else(|| panic!("PersistentVolumeClaim {claim}"));
                // Pods on several nodes write it, and the API wants a size.
                assert_eq!(
                    pvc["spec"]["accessModes"],
                    serde_json::json!(["ReadWriteMany"])
                );
                assert!(pvc["spec"]["resources"]["requests"]["storage"].is_string());
            }
        }
    }
    // The ConfigMap is the shipped spec, byte for byte.
    let cm = kind(&docs, "ConfigMap", "infer-bench-specs").unwrap();
    assert_eq!(
        cm["data"]["fleet.toml"].as_str().unwrap(),
        std::fs::read_to_string(fleet()).unwrap(),
        "the ConfigMap in {} is specs/fleet.toml as it is",
        indexed.display()
    );
    // The pods know how many shares there are.
    let env = &pod_spec(job)["containers"][0]["env"];
    let shards = env
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "SHARDS")
        .expect("SHARDS")["value"]
        .as_str()
        .unwrap();
    assert_eq!(
        shards,
        job["spec"]["completions"].to_string(),
        "SHARDS = completions"
    );
}

/// A pod as its Job runs it: argv (command, then args), environment, and
/// each volume mount as a local folder.
struct Pod {
    argv: Vec<String>,
    env: Vec<(String, String)>,
}

/// The pod of `job`, its volumes under `volumes` (a ConfigMap's keys as
/// files; a claim as a folder that every Job mounting it shares).
fn pod(job: &Json, docs: &[Json], volumes: &Path) -> Pod {
    let spec = pod_spec(job);
    let containers = spec["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let mut mounts: Vec<(String, PathBuf)> = Vec::new();
    for m in c["volumeMounts"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let volume = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("volume {name}"));
        let local = if let Some(cm) = volume["configMap"]["name"].as_str() {
            let dir = volumes.join(format!("configmap-{cm}"));
            std::fs::create_dir_all(&dir).unwrap();
            let map = kind(docs, "ConfigMap", cm).unwrap_or_else(|| panic!("ConfigMap {cm}"));
            for (key, text) in map["data"].as_object().unwrap() {
                std::fs::write(dir.join(key), text.as_str().unwrap()).unwrap();
            }
            dir
        } else if let Some(claim) = volume["persistentVolumeClaim"]["claimName"].as_str() {
            let dir = volumes.join(format!("pvc-{claim}"));
            std::fs::create_dir_all(&dir).unwrap();
            dir
        } else {
            panic!("volume {name}: neither a ConfigMap nor a claim")
        };
        mounts.push((m["mountPath"].as_str().unwrap().to_string(), local));
    }
    let local = |s: &str| {
        mounts.iter().fold(s.to_string(), |s, (at, dir)| {
            s.replace(&format!("{at}/"), &format!("{}/", dir.display()))
        })
    };
    let argv = c["command"]
        .as_array()
        .unwrap()
        .iter()
        .chain(c["args"].as_array().into_iter().flatten())
        .map(|a| local(a.as_str().unwrap()))
        .collect();
    let env = c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    Pod { argv, env }
}

fn start(pod: &Pod, extra: &[(&str, String)], cwd: &Path) -> std::process::Child {
    Command::new(&pod.argv[0])
        .args(&pod.argv[1..])
        .envs(pod.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .env("PATH", path_with_bin())
        .current_dir(cwd)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn kubernetes_pods_run_here_as_the_jobs_run_them() {
    let _one = infer_bench_testkit::timing::exclusive();
    let [indexed, merge] = &manifests()[..] else {
        unreachable!()
    };
    let docs = documents(indexed);
    let job = kind(&docs, "Job", "infer-bench-shards").unwrap();
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let completions = job["spec"]["completions"].as_u64().unwrap();
    let parallelism = job["spec"]["parallelism"].as_u64().unwrap_or(1).max(1);
    let dir = tempfile::tempdir().unwrap();
    let volumes = dir.path().join("volumes");
    let shard = pod(job, &docs, &volumes);
    // The Job's pods, `parallelism` at a time, each with its index.
    let indices: Vec<u64> = (0..completions).collect();
    for wave in indices.chunks(parallelism as usize) {
        let children: Vec<_> = wave
            .iter()
            .map(|i| {
                let env = [("JOB_COMPLETION_INDEX", i.to_string())];
                (i, start(&shard, &env, dir.path()))
            })
            .collect();
        for (i, child) in children {
            let o = child.wait_with_output().unwrap();
            check(&o, 0, &format!("pod of completion index {i}"));
        }
    }
    // Then the merge Job, over the same volume.
    let merge_docs = documents(merge);
    let merge_job = kind(&merge_docs, "Job", "infer-bench-merge").unwrap();
    let all: Vec<Json> = docs.iter().chain(&merge_docs).cloned().collect();
    let o = start(&pod(merge_job, &all, &volumes), &[], dir.path())
        .wait_with_output()
        .unwrap();
    check(&o, 0, "the merge Job's pod");

    let results = volumes.join("pvc-infer-bench-results");
    let m = read(&results.join("merged"));
    assert_eq!(m["complete"], true, "{m}");
    assert_eq!(m["pending"], serde_json::json!([]));
    assert_eq!(
        ids(&m),
        plan_ids(&fleet()),
        "every point of the spec, in plan order"
    );
    let parts: Vec<&str> = m["merged_from"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["partition"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (1..=completions)
        .map(|k| format!("slice:{k}/{completions}"))
        .collect();
    assert_eq!(parts, expected);
    let page = std::fs::read_to_string(results.join("merged/report.html")).unwrap();
    assert!(page.contains("<svg") && page.contains("fleet"));
}

// --------------------------------------------------------------------- Slurm

/// The state of every node, when a Slurm cluster answers.
fn slurm_nodes() -> Result<String, String> {
    let o = Command::new("sinfo")
        .args(["-h", "-N", "-o", "%N %T"])
        .output()
        .map_err(|e| format!("sinfo: {e}"))?;
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    if !o.status.success() {
        return Err(format!(
            "sinfo exited {:?}: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    let up = text.lines().any(|l| {
        ["idle", "mixed", "allocated", "completing"]
            .iter()
            .any(|s| l.ends_with(s))
    });
    if up {
        Ok(text)
    } else {
        Err(format!("no node is up: {text}"))
    }
}

/// `scontrol show job -o ID`: one line per job (per task of an array).
fn jobs(id: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let o = Command::new("scontrol")
        .args(["show", "job", "-o", id])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn finished(state: &str) -> bool {
    !matches!(
        state,
        "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING" | "SUSPENDED" | "REQUEUED"
    )
}

#[test]
fn the_slurm_recipe_runs_as_written_on_a_cluster() {
    let nodes = match slurm_nodes() {
        Ok(n) => n,
        Err(why) => {
            return missing(
                &format!("no Slurm cluster answers ({why})"),
                "scripts/slurm-single-node starts one on this machine, as root",
            );
        }
    };
    eprintln!("sinfo: {}", nodes.trim());
    let _one = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("specs")).unwrap();
    std::fs::copy(fleet(), dir.path().join("specs/fleet.toml")).unwrap();
    let started = Instant::now();
    let o = Command::new(root().join("docs/examples/slurm-array.sh"))
        .env("PATH", path_with_bin())
        .env_remove("SHARDS")
        .current_dir(dir.path())
        .output()
        .unwrap();
    check(&o, 0, "docs/examples/slurm-array.sh");
    let said = String::from_utf8(o.stdout).unwrap();
    eprintln!("{said}");
    let job = |prefix: &str| -> String {
        said.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|l| l.split(':').next())
            .unwrap_or_else(|| panic!("the script names its {prefix}: {said}"))
            .to_string()
    };
    let (array, merge) = (job("array job "), job("merge job "));
    let deadline = Instant::now() + Duration::from_secs(240);
    let merge_state = loop {
        let state = jobs(&merge)
            .first()
            .and_then(|j| j.get("JobState").cloned())
            .unwrap_or_default();
        if finished(&state) {
            break state;
        }
        if Instant::now() > deadline {
            let _ = Command::new("scancel").args([&array, &merge]).status();
            panic!(
                "the recipe did not finish in 240 s: array {:?}, merge {state}",
                jobs(&array)
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let tasks = jobs(&array);
    let mut table = String::new();
    for t in &tasks {
        table += &format!(
            "  task {} of {array}: {} exit {}\n",
            t["ArrayTaskId"], t["JobState"], t["ExitCode"]
        );
    }
    eprintln!(
        "{table}  merge {merge}: {merge_state} exit {} ({:.1} s from submission)",
        jobs(&merge)[0]["ExitCode"],
        started.elapsed().as_secs_f64()
    );
    let log = |name: &str| std::fs::read_to_string(dir.path().join("logs").join(name));
    // One task per point of the spec, each finished well and logged.
    let points = plan_ids(&fleet());
    assert_eq!(tasks.len(), points.len(), "{table}");
    for t in &tasks {
        assert_eq!(
            (t["JobState"].as_str(), t["ExitCode"].as_str()),
            ("COMPLETED", "0:0"),
            "{table}"
        );
        let name = format!("infer-bench-{array}_{}.out", t["ArrayTaskId"]);
        let text = log(&name).unwrap_or_else(|e| panic!("logs/{name}: {e}"));
        assert!(text.contains("results: "), "logs/{name}: {text}");
    }
    let merge_log = log(&format!("infer-bench-merge-{merge}.out")).unwrap_or_default();
    assert_eq!(merge_state, "COMPLETED", "{merge_log}");
    assert_eq!(jobs(&merge)[0]["ExitCode"], "0:0", "{merge_log}");
    // The merged results: every point, none pending, from every share.
    let m = read(&dir.path().join(format!("results/fleet-{array}/merged")));
    assert_eq!(m["complete"], true, "{merge_log}");
    assert_eq!(m["pending"], serde_json::json!([]));
    assert_eq!(ids(&m), points);
    let n = points.len();
    let parts: Vec<&str> = m["merged_from"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["partition"].as_str().unwrap())
        .collect();
    assert_eq!(
        parts,
        (1..=n)
            .map(|k| format!("slice:{k}/{n}"))
            .collect::<Vec<_>>()
    );
    eprintln!(
        "merged: {} points, complete, from {} shares",
        ids(&m).len(),
        parts.len()
    );
}
