//! Spec drift: a point whose slug is in the baseline but whose configuration
//! hash is not. It is not compared (it measures something else now); the
//! report shows what changed instead, as a unified text diff of the two
//! measured configurations (the part of `PointConfig` the hash covers,
//! pretty JSON with sorted keys), so a reviewer sees "output_tokens: 32 ->
//! 48" rather than two hashes.

use std::collections::BTreeMap;

use super::fingerprint::Mismatch;
use infer_bench_spec::plan::PointConfig;

/// Lines of context around each change.
const CONTEXT_LINES: usize = 3;

/// The unified diff from the baseline's configuration to the new one, with
/// `---`/`+++` headers naming the two IDs. Empty when the measured
/// configurations are equal.
pub fn config_diff(
    baseline_id: &str,
    base: &PointConfig,
    new_id: &str,
    new: &PointConfig,
) -> String {
    let old_text = measured_text(base);
    let new_text = measured_text(new);
    if old_text == new_text {
        return String::new();
    }
    similar::TextDiff::from_lines(&old_text, &new_text)
        .unified_diff()
        .context_radius(CONTEXT_LINES)
        .header(&format!("baseline {baseline_id}"), &format!("new {new_id}"))
        .to_string()
}

/// The settings that differ between the two measured configurations, one
/// per leaf, keyed by their path (`workload.output_tokens.max`), in path
/// order: the short form of [`config_diff`] for a pull-request comment.
pub fn config_changes(base: &PointConfig, new: &PointConfig) -> Vec<Mismatch> {
    let mut a = BTreeMap::new();
    let mut b = BTreeMap::new();
    leaves("", &base.measured_json(), &mut a);
    leaves("", &new.measured_json(), &mut b);
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (x, y) = (a.get(k), b.get(k));
            (x != y).then(|| Mismatch {
                key: k.clone(),
                baseline: x.cloned().unwrap_or_else(|| "absent".into()),
                new: y.cloned().unwrap_or_else(|| "absent".into()),
            })
        })
        .collect()
}

/// Every leaf of `v` as `path -> compact JSON text`.
fn leaves(path: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        serde_json::Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(&join(k), x, out);
            }
        }
        serde_json::Value::Array(xs) if !xs.is_empty() => {
            for (i, x) in xs.iter().enumerate() {
                leaves(&format!("{path}[{i}]"), x, out);
            }
        }
        serde_json::Value::String(s) => {
            out.insert(path.to_string(), s.clone());
        }
        other => {
            out.insert(path.to_string(), other.to_string());
        }
    }
}

/// The measured configuration as pretty JSON with sorted keys and a final
/// newline.
fn measured_text(cfg: &PointConfig) -> String {
    // serde_json's default map is ordered by key; re-serializing through a
    // BTreeMap-backed Value keeps that true whatever features are enabled.
    let v = super::sorted_keys(cfg.measured_json());
    let mut s = serde_json::to_string_pretty(&v).expect("values serialize");
    s.push('\n');
    s
}
