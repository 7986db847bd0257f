//! The workload side of running a point: its material (tokenizer, dataset)
//! read once per point before anything starts, so a bad data file stops
//! the run before any server does; and the workload facts a point's result
//! carries (fingerprint, dataset use, per-turn breakdown).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::recorder::Tally;
use infer_bench_results::{DatasetUse, TurnResult, WorkloadInfo};
use infer_bench_spec::Spec;
use infer_bench_spec::plan::Plan;
use infer_bench_workload::{Material, WorkloadError};

/// The material of every point of a plan, read once per distinct
/// (workload, model) pair; indexed like `plan.points`.
pub fn materials(spec: &Spec, plan: &Plan) -> Result<Vec<Arc<Material>>, WorkloadError> {
    let mut cache: HashMap<(String, String), Arc<Material>> = HashMap::new();
    plan.points
        .iter()
        .map(|p| {
            let c = &p.config;
            let key = (c.workload.name.clone(), c.model.name.clone());
            if let Some(m) = cache.get(&key) {
                return Ok(m.clone());
            }
            let m = Arc::new(Material::load(&c.workload, &c.model, spec.base_dir())?);
            cache.insert(key, m.clone());
            Ok(m)
        })
        .collect()
}

/// The workload facts of a point.
pub fn info(material: &Material, sha256: String) -> WorkloadInfo {
    WorkloadInfo {
        sha256,
        fingerprint_requests: super::schedule::FINGERPRINT_REQUESTS,
        lengths: if material.counter.is_some() {
            "tokenizer"
        } else {
            "approximate"
        }
        .into(),
        every_prompt_verified: material.verifies_every_prompt(),
        dataset: material.dataset.as_ref().map(|d| DatasetUse {
            read: d.read as u64,
            used: d.entries.len() as u64,
            filtered: d.filtered as u64,
            unusable: d.unusable as u64,
        }),
    }
}

/// Per-turn statistics from per-turn tallies (all runs merged).
pub fn turn_results(turns: &BTreeMap<u32, Tally>, open: bool) -> Vec<TurnResult> {
    turns
        .iter()
        .map(|(k, t)| {
            let s = t.stats(0.0, open, 0);
            TurnResult {
                turn: k + 1,
                requests: s.requests,
                requested_input_mean: s.tokens.requested_input_mean,
                reported_input_mean: s.tokens.reported_input_mean,
                latency_ms: s
                    .latency_ms
                    .into_iter()
                    .filter(|(m, _)| matches!(m.as_str(), "ttft" | "tpot" | "e2e"))
                    .collect(),
            }
        })
        .collect()
}
