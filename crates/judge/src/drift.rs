//! Spec drift: a point whose slug is in the baseline but whose configuration
//! hash is not. It is not compared (it measures something else now); the
//! report shows what changed instead, as a unified text diff of the two
//! measured configurations (the part of `PointConfig` the hash covers,
//! pretty JSON with sorted keys), so a reviewer sees "output_tokens: 32 ->
//! 48" rather than two hashes.

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
