//! The environment fingerprint of one point, and whether two of them may be
//! compared.
//!
//! A run records one global [`Environment`] (client machine class, GPU model
//! and count, driver and CUDA majors; facts such as the CPU and kernel).
//! Each point adds what is specific to it: the server it ran against (name
//! and major version as the server reports them, the exact version as a
//! fact) and, for simulator targets, the simulated GPU and GPU count, which
//! decide the simulated speed but are left out of the point's hash on
//! purpose (see `plan::UNHASHED`): hardware is the fingerprint's business.
//! A simulated point is fingerprinted by its modelled hardware (GPU, its
//! tensor-parallel count, pipeline stages and replicas), the simulator's
//! model version and engine profile, and the runner class (`client_class`:
//! architecture and CPU count) only; the client machine's real GPUs are
//! kept as facts.
//!
//! Identity keys must be equal for a comparison; facts are only shown. A
//! key present on one side only (a baseline written by an older version,
//! a server that stopped reporting its version) is not a mismatch: only
//! keys both sides know are compared. Pure functions, no I/O.

use serde::Serialize;

use infer_bench_spec::results::PointResult;

use infer_bench_results::Environment;

/// The full fingerprint of a point: the run's environment plus the point's
/// server and simulated hardware.
pub fn point_environment(global: &Environment, p: &PointResult) -> Environment {
    let mut env = global.clone();
    // What the server says of itself is outside text; the environment
    // holds it as it came, and every writer of the environment encodes.
    if let Some(server) = &p.server {
        if let Some(name) = server
            .name
            .as_ref()
            .map(|n| n.unencoded())
            .filter(|n| !n.is_empty())
        {
            env.identity.insert("server".into(), name.to_lowercase());
        }
        if let Some(version) = server
            .version
            .as_ref()
            .map(|v| v.unencoded())
            .filter(|v| !v.is_empty())
        {
            env.identity
                .insert("server_version_major".into(), version_major(version));
            env.facts
                .insert("server_version".into(), version.to_string());
        }
        if let Some(model) = &server.model {
            env.facts
                .insert("server_model".into(), model.unencoded().to_string());
        }
    }
    if let Some(sim) = &p.config.target.sim {
        // A simulated target's speed is its modelled hardware's and the
        // runner's, not the GPUs that happen to sit in the client machine:
        // those become facts, so a baseline recorded on a laptop compares
        // with CI on the same runner class.
        for key in REAL_GPU_KEYS {
            if let Some(v) = env.identity.remove(*key) {
                env.facts.insert(format!("host_{key}"), v);
            }
        }
        env.identity.insert("sim_gpu".into(), sim.gpu.clone());
        env.identity.insert("sim_gpus".into(), sim.gpus.to_string());
        env.identity
            .insert("sim_pipeline".into(), sim.pipeline.unwrap_or(1).to_string());
        env.identity
            .insert("sim_replicas".into(), sim.replicas.unwrap_or(1).to_string());
        // The performance model and the engine modelled decide the numbers
        // as much as the GPU: a baseline of another model version or
        // profile does not judge these (a point written before profiles
        // carries no profile and is model version 1).
        let profile = p.server.as_ref().and_then(|s| s.profile.clone());
        let version = if profile.is_some() {
            SIM_MODEL_VERSION
        } else {
            "1"
        };
        env.identity.insert("sim_model".into(), version.into());
        if let Some(profile) = profile {
            env.identity.insert("sim_profile".into(), profile);
        }
        // Virtual time has an ideal client, real time this machine's: a
        // baseline of one does not judge the other (baselines blessed
        // before the key existed compare as before).
        let clock = p.clock.clone().unwrap_or_else(|| "real".into());
        if clock == "virtual" {
            // Nothing of the machine enters a virtual-time point's numbers:
            // the same spec gives the same statistics on every machine.
            if let Some(v) = env.identity.remove("client_class") {
                env.facts.insert("client_class".into(), v);
            }
        }
        env.identity.insert("sim_clock".into(), clock);
    }
    env
}

/// The version of the simulator's performance model: 2 is the calibrated
/// model with engine profiles (docs/simulator.md). Baselines of simulated
/// points blessed under another version are not compared with new points.
pub const SIM_MODEL_VERSION: &str = "2";

/// Keys a stored environment implies without holding them: a simulated
/// point blessed before the model had versions was version 1.
pub fn with_implied_keys(env: &Environment) -> Environment {
    let mut env = env.clone();
    if env.identity.contains_key("sim_gpu") && !env.identity.contains_key("sim_model") {
        env.identity.insert("sim_model".into(), "1".into());
    }
    env
}

/// The identity keys that describe the client machine's real GPUs.
const REAL_GPU_KEYS: &[&str] = &["gpu_model", "gpu_count", "driver_major", "cuda_major"];

/// The compatibility-defining part of a version: its major number, or
/// `0.minor` before 1.0, where minors break things (vLLM 0.6 and 0.7 are
/// different servers). A leading `v` is dropped; a version without dots is
/// kept whole.
pub fn version_major(version: &str) -> String {
    let v = version.trim();
    let v = v.strip_prefix(['v', 'V']).unwrap_or(v);
    let mut parts = v.split(['.', '-', '+', ' ']);
    let major = parts.next().unwrap_or_default();
    match (major, parts.next()) {
        ("0", Some(minor)) if !minor.is_empty() => format!("0.{minor}"),
        _ => major.to_string(),
    }
}

/// An identity key whose value differs between baseline and new results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    pub key: String,
    pub baseline: String,
    pub new: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} -> {}", self.key, self.baseline, self.new)
    }
}

/// The identity keys both sides have and that differ, in key order.
pub fn mismatches(baseline: &Environment, new: &Environment) -> Vec<Mismatch> {
    baseline
        .identity
        .iter()
        .filter_map(|(key, b)| {
            let n = new.identity.get(key)?;
            (n != b).then(|| Mismatch {
                key: key.clone(),
                baseline: b.clone(),
                new: n.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(pairs: &[(&str, &str)]) -> Environment {
        Environment {
            identity: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            facts: BTreeMap::new(),
        }
    }

    #[test]
    fn majors() {
        assert_eq!(version_major("0.6.3"), "0.6");
        assert_eq!(version_major("v0.6.3.post1"), "0.6");
        assert_eq!(version_major("2.4.1"), "2");
        assert_eq!(version_major("3"), "3");
        assert_eq!(version_major("b4120"), "b4120");
        assert_eq!(version_major("1.0.0-rc1"), "1");
        assert_eq!(version_major("0"), "0");
    }

    #[test]
    fn a_virtual_time_point_is_fingerprinted_without_the_machine() {
        let (_, plan) = infer_bench_testkit::fixtures::plan(32, "");
        let mut p = infer_bench_testkit::fixtures::point(&plan, &[10.0], &[]);
        let global = env(&[("client_class", "x86_64-2cpu"), ("gpu_model", "none")]);
        let real = point_environment(&global, &p);
        assert_eq!(real.identity["sim_clock"], "real");
        assert_eq!(real.identity["client_class"], "x86_64-2cpu");
        p.clock = Some("virtual".into());
        let simulated = point_environment(&global, &p);
        assert_eq!(simulated.identity["sim_clock"], "virtual");
        assert!(!simulated.identity.contains_key("client_class"));
        assert_eq!(simulated.facts["client_class"], "x86_64-2cpu");
        // One clock does not judge the other.
        assert_eq!(
            mismatches(&real, &simulated)
                .iter()
                .map(|m| m.to_string())
                .collect::<Vec<_>>(),
            ["sim_clock: real -> virtual"]
        );
        // A virtual baseline blessed on another machine still judges.
        let elsewhere = env(&[("client_class", "aarch64-16cpu"), ("gpu_model", "none")]);
        assert!(mismatches(&simulated, &point_environment(&elsewhere, &p)).is_empty());
    }

    #[test]
    fn a_simulated_point_carries_its_model_version_and_profile() {
        let (_, plan) = infer_bench_testkit::fixtures::plan(32, "");
        let mut p = infer_bench_testkit::fixtures::point(&plan, &[10.0], &[]);
        let global = env(&[("client_class", "x86_64-2cpu")]);
        // Written before profiles: no profile, model version 1.
        let old = point_environment(&global, &p);
        assert_eq!(old.identity["sim_model"], "1");
        assert!(!old.identity.contains_key("sim_profile"));
        p.server.get_or_insert_with(Default::default).profile = Some("trtllm".into());
        let new = point_environment(&global, &p);
        assert_eq!(new.identity["sim_model"], SIM_MODEL_VERSION);
        assert_eq!(new.identity["sim_profile"], "trtllm");
        // A baseline blessed before the key existed is version 1, so it
        // does not judge a point of the new model.
        let mut blessed = old.clone();
        blessed.identity.remove("sim_model");
        assert_eq!(
            mismatches(&with_implied_keys(&blessed), &new)
                .iter()
                .map(|m| m.to_string())
                .collect::<Vec<_>>(),
            ["sim_model: 1 -> 2"]
        );
        // A real server's environment implies nothing.
        let real = env(&[("gpu_model", "H100")]);
        assert_eq!(with_implied_keys(&real), real);
    }

    #[test]
    fn only_shared_keys_that_differ_mismatch() {
        let base = env(&[("gpu_model", "H100"), ("gpu_count", "1"), ("old", "x")]);
        let new = env(&[("gpu_model", "A100"), ("gpu_count", "1"), ("added", "y")]);
        assert_eq!(
            mismatches(&base, &new),
            vec![Mismatch {
                key: "gpu_model".into(),
                baseline: "H100".into(),
                new: "A100".into()
            }]
        );
        assert!(mismatches(&base, &base).is_empty());
        assert_eq!(
            mismatches(&base, &new)[0].to_string(),
            "gpu_model: H100 -> A100"
        );
    }
}
