//! The `[quality]` table: whose answers are the reference (a precision or
//! a target on the matrix), and what each server's quality phase asks.

use std::collections::BTreeMap;

use super::Cx;
use crate::diag::suggestion;
use crate::model::*;
use crate::raw::*;

/// Defaults: a few hundred prompts is enough to tell a 5-point drop in
/// exact-match agreement (docs/metrics.md, "Quality"), and short answers
/// keep the phase to seconds.
pub const DEFAULT_PROMPTS: u32 = 200;
pub const DEFAULT_MAX_TOKENS: u32 = 64;
pub const DEFAULT_LOGPROBS: u32 = 5;
pub const DEFAULT_CONCURRENCY: u32 = 8;

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
        let reference = match (q.reference, q.reference_target) {
            (Some(_), Some(_)) => {
                self.key_err(
                    "quality.reference_target",
                    "give `reference` (a precision) or `reference_target` (a target), not both",
                    Some("keep the one whose answers the others are compared with".into()),
                );
                QualityReference::Precision(String::new())
            }
            (None, None) => {
                self.err(
                    "quality",
                    "expected a reference: `reference` (a precision on the matrix) or `reference_target` (a target on the matrix)",
                    Some("e.g. reference = \"bf16\"".into()),
                );
                QualityReference::Precision(String::new())
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
                QualityReference::Precision(p)
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
                QualityReference::Target(t)
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
        Quality {
            reference,
            prompts: q.prompts.unwrap_or(DEFAULT_PROMPTS),
            max_tokens: q.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            logprobs: q.logprobs.unwrap_or(DEFAULT_LOGPROBS),
            api: q.api.unwrap_or_default(),
            concurrency: q.concurrency.unwrap_or(DEFAULT_CONCURRENCY),
        }
    }
}
