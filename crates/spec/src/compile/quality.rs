//! The `[quality]` table: whose answers are the reference (a precision or
//! a target on the matrix), and what each server's quality phase asks.

use std::collections::BTreeMap;

use super::Cx;
use crate::diag::suggestion;
use crate::model::*;
use crate::raw::*;
use infer_bench_results::accuracy::Scorer;
use infer_bench_results::metric::Metric;

/// Defaults: a few hundred prompts is enough to tell a 5-point drop in
/// exact-match agreement (docs/metrics.md, "Quality"), and short answers
/// keep the phase to seconds.
pub const DEFAULT_PROMPTS: u32 = 200;
pub const DEFAULT_MAX_TOKENS: u32 = 64;
pub const DEFAULT_LOGPROBS: u32 = 5;
pub const DEFAULT_CONCURRENCY: u32 = 8;

/// What a spec's `[quality]` measures, from its raw table: what its SLOs
/// and gates may name.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Measures {
    /// There is a `[quality]` table.
    pub any: bool,
    /// It names a reference: agreement, first difference, KL.
    pub agreement: bool,
    /// It scores a dataset: accuracy.
    pub accuracy: bool,
}

impl Measures {
    pub fn of(q: Option<&RawQuality>) -> Measures {
        Measures {
            any: q.is_some(),
            agreement: q.is_some_and(|q| q.reference.is_some() || q.reference_target.is_some()),
            accuracy: q.is_some_and(|q| q.scorer.is_some()),
        }
    }

    /// Why `metric` cannot be gated in this spec, with the fix; `None`
    /// when it can (or is no quality metric).
    pub fn missing(&self, metric: Metric) -> Option<(String, String)> {
        if !metric.is_quality() {
            None
        } else if !self.any {
            Some((
                format!(
                    "`{metric}` is measured by the quality phase, and the spec has no [quality] table"
                ),
                "add a [quality] table that names the reference, e.g. reference = \"bf16\"".into(),
            ))
        } else if metric == Metric::Accuracy && !self.accuracy {
            Some((
                "`accuracy` scores a dataset's answers, and [quality] names no `scorer`".into(),
                "give [quality] a `dataset` with expected answers and a `scorer`, e.g. scorer = \"exact\"".into(),
            ))
        } else if metric != Metric::Accuracy && !self.agreement {
            Some((
                format!("`{metric}` compares answers with a reference's, and [quality] names none"),
                "add reference = \"<precision>\" or reference_target = \"<target>\" to [quality]"
                    .into(),
            ))
        } else {
            None
        }
    }
}

impl Cx<'_> {
    pub(super) fn quality(
        &mut self,
        q: RawQuality,
        targets: &BTreeMap<String, Target>,
        models: &BTreeMap<String, (Model, BTreeMap<String, Precision>)>,
        matrix: &Matrix,
    ) -> Quality {
        let on_axis = |axis: Axis| -> Option<Vec<String>> {
            matrix
                .axes
                .iter()
                .find(|(a, _)| *a == axis)
                .map(|(_, v)| v.iter().map(|v| v.to_string()).collect())
        };
        let scored = q.scorer.is_some();
        let reference = match (q.reference, q.reference_target) {
            (Some(_), Some(_)) => {
                self.key_err(
                    "quality.reference_target",
                    "give `reference` (a precision) or `reference_target` (a target), not both",
                    Some("keep the one whose answers the others are compared with".into()),
                );
                None
            }
            (None, None) if scored => None,
            (None, None) => {
                self.err(
                    "quality",
                    "expected a reference: `reference` (a precision on the matrix) or `reference_target` (a target on the matrix), or a `dataset` with a `scorer`",
                    Some("e.g. reference = \"bf16\"".into()),
                );
                None
            }
            (Some(p), None) => {
                let declared: Vec<&str> = models
                    .values()
                    .flat_map(|(_, ps)| ps.keys().map(String::as_str))
                    .collect();
                match on_axis(Axis::Precision) {
                    Some(axis) if axis.contains(&p) => {}
                    Some(axis) => self.err(
                        "quality.reference",
                        format!(
                            "the reference precision \"{}\" is not on the matrix; expected one of: {}",
                            p.escape_debug(),
                            axis.join(", ")
                        ),
                        suggestion(&p, axis.iter().map(String::as_str)),
                    ),
                    None if declared.contains(&p.as_str()) => self.err(
                        "quality.reference",
                        format!(
                            "the matrix has no precision axis, so nothing is compared with \"{}\"",
                            p.escape_debug()
                        ),
                        Some(format!(
                            "add the precisions to compare, e.g. [matrix] precision = [\"{}\", ...]",
                            p.escape_debug()
                        )),
                    ),
                    None => self.err(
                        "quality.reference",
                        format!(
                            "unknown precision \"{}\"; expected a precision of a model (models.<name>.precisions)",
                            p.escape_debug()
                        ),
                        suggestion(&p, declared.iter().copied()),
                    ),
                }
                Some(QualityReference::Precision(p))
            }
            (None, Some(t)) => {
                match on_axis(Axis::Target) {
                    Some(axis) if axis.contains(&t) => {}
                    Some(axis) => self.err(
                        "quality.reference_target",
                        format!(
                            "the reference target \"{}\" is not on the matrix; expected one of: {}",
                            t.escape_debug(),
                            axis.join(", ")
                        ),
                        suggestion(&t, axis.iter().map(String::as_str)),
                    ),
                    None if targets.contains_key(&t) => self.err(
                        "quality.reference_target",
                        format!(
                            "the matrix has no target axis, so nothing is compared with \"{}\"",
                            t.escape_debug()
                        ),
                        Some(format!(
                            "add the targets to compare, e.g. [matrix] target = [\"{}\", ...]",
                            t.escape_debug()
                        )),
                    ),
                    None => self.err(
                        "quality.reference_target",
                        format!("unknown target \"{}\"", t.escape_debug()),
                        suggestion(&t, targets.keys().map(String::as_str)),
                    ),
                }
                Some(QualityReference::Target(t))
            }
        };
        self.count_in(
            "quality.prompts",
            q.prompts.map(u64::from),
            1,
            10_000,
            "a number of prompts",
        );
        self.count_in(
            "quality.max_tokens",
            q.max_tokens.map(u64::from),
            1,
            infer_bench_results::quality::MAX_TOKENS as u64,
            "a number of tokens",
        );
        self.count_in(
            "quality.logprobs",
            q.logprobs.map(u64::from),
            0,
            infer_bench_results::quality::MAX_TOP as u64,
            "a number of alternatives per token",
        );
        self.count_in(
            "quality.concurrency",
            q.concurrency.map(u64::from),
            1,
            256,
            "a number of prompts in flight",
        );
        let scorer = q.scorer.as_deref().and_then(|name| {
            match Scorer::new(name, q.pattern.as_deref(), q.tolerance) {
                Ok(s) => Some((s, name.to_string())),
                Err(e) => {
                    let key = match e {
                        infer_bench_results::accuracy::ScorerError::UnknownName { .. } => {
                            "quality.scorer"
                        }
                        infer_bench_results::accuracy::ScorerError::UnexpectedTolerance {
                            ..
                        }
                        | infer_bench_results::accuracy::ScorerError::BadTolerance { .. } => {
                            "quality.tolerance"
                        }
                        infer_bench_results::accuracy::ScorerError::MissingPattern => {
                            "quality.scorer"
                        }
                        _ => "quality.pattern",
                    };
                    self.err(key, e.to_string(), None);
                    None
                }
            }
        });
        if q.scorer.is_none() {
            for (key, given) in [
                ("quality.pattern", q.pattern.is_some()),
                ("quality.tolerance", q.tolerance.is_some()),
            ] {
                if given {
                    self.key_err(key, "only a `scorer` uses it, and [quality] names none", Some("e.g. scorer = \"regex\" with a pattern, or scorer = \"numeric\" with a tolerance".into()));
                }
            }
        }
        if scorer.is_some() && q.dataset.is_none() {
            self.key_err(
                "quality.scorer",
                "a scorer compares answers with expected ones, and [quality] names no `dataset` that holds them",
                Some("add dataset = \"<file>.jsonl\", one {\"prompt\": ..., \"answer\": ...} per line".into()),
            );
        }
        let dataset = q
            .dataset
            .and_then(|d| self.quality_dataset(d, scorer.as_ref().map(|(s, _)| s)));
        let prompts = match (&dataset, q.prompts) {
            (Some(d), Some(n)) => n.min(d.items.len() as u32),
            (Some(d), None) => (d.items.len() as u32).min(10_000),
            (None, n) => n.unwrap_or(DEFAULT_PROMPTS),
        };
        Quality {
            reference,
            prompts,
            max_tokens: q.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            logprobs: q.logprobs.unwrap_or(DEFAULT_LOGPROBS),
            api: q.api.unwrap_or_default(),
            concurrency: q.concurrency.unwrap_or(DEFAULT_CONCURRENCY),
            dataset,
            scorer: scorer.map(|(_, name)| QualityScorer {
                name,
                pattern: q.pattern,
                tolerance: q.tolerance,
            }),
        }
    }

    /// A quality dataset: read (a regular file inside the repository,
    /// bounded), and every line checked: an object with a non-empty
    /// `prompt` and, with a scorer, an `answer` the scorer can compare.
    fn quality_dataset(&mut self, path: String, scorer: Option<&Scorer>) -> Option<QualityDataset> {
        let key = "quality.dataset";
        let file = self.base_dir.join(&path);
        let (sha256, text) = self.read_text(
            key,
            &file,
            crate::files::MAX_DATASET_BYTES,
            "quality dataset",
        )?;
        let mut items = Vec::new();
        let fail = |cx: &mut Self, line: usize, what: String| {
            cx.err(
                key,
                format!("{}:{line}: {what}", file.display()),
                Some("one JSON object per line: {\"prompt\": \"...\", \"answer\": \"...\"}".into()),
            );
        };
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = match serde_json::from_str(line) {
                Ok(v) => v,
                Err(e) => {
                    fail(
                        self,
                        n,
                        format!(
                            "not JSON: {}",
                            crate::files::sanitize_message(&e.to_string())
                        ),
                    );
                    return None;
                }
            };
            let prompt = match v.get("prompt") {
                Some(serde_json::Value::String(p)) if !p.trim().is_empty() => p.clone(),
                _ => {
                    fail(self, n, "expected a non-empty string `prompt`".into());
                    return None;
                }
            };
            let answer = match v.get("answer") {
                None | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::String(a)) => Some(a.clone()),
                Some(serde_json::Value::Number(x)) => Some(x.to_string()),
                Some(_) => {
                    fail(
                        self,
                        n,
                        "expected `answer` to be a string or a number".into(),
                    );
                    return None;
                }
            };
            if let Some(s) = scorer {
                match &answer {
                    None => {
                        fail(
                            self,
                            n,
                            format!(
                                "the `{}` scorer needs an expected `answer` on every line",
                                s.name()
                            ),
                        );
                        return None;
                    }
                    Some(a) => {
                        if let Err(e) = s.check_expected(a) {
                            fail(self, n, e.to_string());
                            return None;
                        }
                    }
                }
            }
            items.push(QualityItem { prompt, answer });
        }
        if items.is_empty() {
            self.err(key, format!("{}: no prompt", file.display()), None);
            return None;
        }
        Some(QualityDataset {
            path,
            sha256,
            items,
        })
    }
}
