//! Which rules a comparison judges by. A baseline blessed by this version
//! pins the `[regression]` table it was blessed with (`rules` in the file):
//! those rules judge, whatever the new results' spec says, so a pull
//! request cannot widen a noise band, raise `min_runs` or allow what could
//! not be judged and pass. When the pull request's rules differ, the
//! differences are listed (rule drift) and the check fails until the new
//! rules are blessed. A version-1 baseline has no rules: the spec's judge,
//! and the report says so. A gate is named by [`gate_label`] here and in
//! the comparison's reports.

use serde::Serialize;

use super::baseline::Baseline;
use super::fingerprint::Mismatch;
use infer_bench_results::metric::Metric;
use infer_bench_spec::{Gate, Regression, Stat};

/// Where the rules a report judged by came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RulesSource {
    /// Pinned in the baseline when it was blessed.
    Baseline,
    /// The new results' spec (the baseline predates pinned rules).
    Spec,
}

/// The rules to judge by, where they came from, and how the spec's differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    pub regression: Regression,
    pub source: RulesSource,
    /// Settings the spec changes against the pinned rules (empty when they
    /// agree, or when the baseline pins none).
    pub changes: Vec<Mismatch>,
}

/// Pins `rules` (the spec's `[regression]` table) and the spec's SHA-256
/// into the baseline, as `bless` does.
pub fn pin(baseline: &mut Baseline, rules: &Regression, spec_sha256: &str) {
    let mut r = rules.clone();
    // Where the baseline lives is not a rule of judging.
    r.baseline = String::new();
    r.history = String::new();
    baseline.rules = Some(serde_json::to_value(&r).expect("rules serialize"));
    baseline.spec_sha256 = Some(spec_sha256.to_string());
}

/// The rules to judge `spec`'s results by: the baseline's when it pins
/// them, else the spec's. An unreadable `rules` entry is an error (a
/// hand-edited baseline), not a silent fall-back to the spec's.
pub fn resolve(baseline: &Baseline, spec: &Regression) -> crate::Result<Rules> {
    let Some(value) = &baseline.rules else {
        return Ok(Rules {
            regression: spec.clone(),
            source: RulesSource::Spec,
            changes: Vec::new(),
        });
    };
    let mut pinned: Regression =
        serde_json::from_value(value.clone()).map_err(crate::Error::UnreadableRules)?;
    pinned.baseline = spec.baseline.clone();
    pinned.history = spec.history.clone();
    Ok(Rules {
        changes: changes(&pinned, spec),
        regression: pinned,
        source: RulesSource::Baseline,
    })
}

/// The settings `new` changes against `old`, one line each: scalar
/// settings by name, gates by their label ("tpot p50 noise").
pub fn changes(old: &Regression, new: &Regression) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let mut scalar = |key: &str, a: String, b: String| {
        if a != b {
            out.push(Mismatch {
                key: key.into(),
                baseline: a,
                new: b,
            });
        }
    };
    scalar(
        "confidence",
        old.confidence.to_string(),
        new.confidence.to_string(),
    );
    scalar(
        "min_runs",
        old.min_runs.to_string(),
        new.min_runs.to_string(),
    );
    scalar(
        "on_env_mismatch",
        enum_name(&old.on_env_mismatch),
        enum_name(&new.on_env_mismatch),
    );
    scalar("confirm", old.confirm.to_string(), new.confirm.to_string());
    scalar("against", enum_name(&old.against), enum_name(&new.against));
    scalar(
        "allow_unjudged",
        old.allow_unjudged.to_string(),
        new.allow_unjudged.to_string(),
    );
    let label = |g: &Gate| gate_label(g.metric, g.stat.as_ref());
    for g in &old.gates {
        match new.gates.iter().find(|n| label(n) == label(g)) {
            Some(n) if n.noise != g.noise => out.push(Mismatch {
                key: format!("{} noise", label(g)),
                baseline: g.noise.to_string(),
                new: n.noise.to_string(),
            }),
            Some(_) => {}
            None => out.push(Mismatch {
                key: format!("gate {}", label(g)),
                baseline: format!("noise {}", g.noise),
                new: "removed".into(),
            }),
        }
    }
    for n in &new.gates {
        if !old.gates.iter().any(|g| label(g) == label(n)) {
            out.push(Mismatch {
                key: format!("gate {}", label(n)),
                baseline: "absent".into(),
                new: format!("noise {}", n.noise),
            });
        }
    }
    out
}

/// The label of a gate: "ttft p99", "output_tokens_per_s".
pub fn gate_label(metric: Metric, stat: Option<&Stat>) -> String {
    match stat {
        Some(s) => format!("{metric} {}", s.name()),
        None => metric.to_string(),
    }
}

fn enum_name<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_spec::Percent;

    fn spec_rules(src: &str) -> Regression {
        infer_bench_spec::compile_regression("t.toml", &format!("name = \"t\"\n{src}"))
            .expect("valid")
    }

    #[test]
    fn a_baseline_without_rules_judges_by_the_spec() {
        let spec = spec_rules("");
        let r = resolve(&Baseline::new("t"), &spec).unwrap();
        assert_eq!(r.source, RulesSource::Spec);
        assert_eq!(r.regression, spec);
        assert!(r.changes.is_empty());
    }

    #[test]
    fn unreadable_pinned_rules_are_an_error_not_the_spec_s() {
        let mut b = Baseline::new("t");
        b.rules = Some(serde_json::json!({"confidence": "very"}));
        let e = resolve(&b, &spec_rules("")).unwrap_err();
        assert!(matches!(e, crate::Error::UnreadableRules(_)), "{e}");
        assert!(
            e.to_string()
                .starts_with("the baseline's `rules` cannot be read: "),
            "{e}"
        );
    }

    /// Blessed with the defaults; the pull request widens the TPOT band to
    /// 1000%, raises min_runs and allows the unjudged: the pinned rules
    /// judge, and each change is listed.
    #[test]
    fn pinned_rules_judge_and_the_spec_s_changes_are_listed() {
        let mut b = Baseline::new("t");
        pin(&mut b, &spec_rules(""), "abc");
        assert_eq!(b.spec_sha256.as_deref(), Some("abc"));
        let pr = spec_rules(
            "[regression]\nmin_runs = 9\nallow_unjudged = true\nmetrics = [{ metric = \"tpot\", stat = \"p50\", noise = \"1000%\" }]\n",
        );
        let r = resolve(&b, &pr).unwrap();
        assert_eq!(r.source, RulesSource::Baseline);
        assert_eq!(r.regression.min_runs, spec_rules("").min_runs);
        assert!(!r.regression.allow_unjudged);
        assert_eq!(r.regression.gates, spec_rules("").gates);
        let lines: Vec<String> = r.changes.iter().map(|c| c.to_string()).collect();
        assert!(lines.contains(&"min_runs: 3 -> 9".to_string()), "{lines:?}");
        assert!(lines.contains(&"allow_unjudged: false -> true".to_string()));
        let tpot = spec_rules("")
            .gates
            .iter()
            .find(|g| g.metric.name() == "tpot")
            .unwrap()
            .noise;
        assert!(
            lines.contains(&format!("tpot p50 noise: {tpot} -> 1000%")),
            "{lines:?}"
        );
        assert!(
            lines.contains(&format!(
                "gate ttft p99: noise {} -> removed",
                Percent::new(10.0).unwrap()
            )) || lines.iter().any(|l| l.starts_with("gate ttft p99"))
        );
    }

    #[test]
    fn the_same_rules_have_no_changes_and_the_baseline_path_is_not_a_rule() {
        let mut b = Baseline::new("t");
        pin(&mut b, &spec_rules(""), "abc");
        let moved = spec_rules("[regression]\nbaseline = \"elsewhere.json\"\n");
        let r = resolve(&b, &moved).unwrap();
        assert!(r.changes.is_empty(), "{:?}", r.changes);
        assert_eq!(r.regression.baseline, "elsewhere.json");
    }
}
