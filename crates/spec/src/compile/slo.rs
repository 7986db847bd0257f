//! The `[slo]` section: each gate's metric matched with a threshold of the
//! right kind, and a statistic where the metric is a distribution.

use super::Cx;
use crate::Threshold;
use crate::model::*;
use crate::raw::*;
use infer_bench_results::metric::{Kind, Metric};

impl Cx<'_> {
    pub(super) fn slo(&mut self, s: RawSlo, quality: super::quality::Measures) -> Vec<SloGate> {
        let fields = [
            (Metric::Ttft, s.ttft),
            (Metric::TtftFromSend, s.ttft_from_send),
            (Metric::TtftReasoning, s.ttft_reasoning),
            (Metric::TtftAnswer, s.ttft_answer),
            (Metric::Tpot, s.tpot),
            (Metric::Itl, s.itl),
            (Metric::ItlToken, s.itl_token),
            (Metric::E2e, s.e2e),
            (Metric::DispatchLag, s.dispatch_lag),
            (Metric::ErrorRate, s.error_rate),
            (Metric::GoodputRatio, s.goodput_ratio),
            (Metric::Goodput, s.goodput),
            (Metric::RequestThroughput, s.request_throughput),
            (Metric::OutputTokensPerS, s.output_tokens_per_s),
            (Metric::Agreement, s.agreement),
            (Metric::TokenAgreement, s.token_agreement),
            (Metric::FirstDiff, s.first_diff),
            (Metric::KlMean, s.kl_mean),
            (Metric::Accuracy, s.accuracy),
        ];
        // `latency`: the whole request's latency (`e2e`), under the name a
        // non-streaming kind (embeddings, rerank) knows it by.
        let fields = fields.into_iter().map(|(m, e)| (m, m.name(), e)).chain([(
            Metric::E2e,
            "latency",
            s.latency,
        )]);
        let mut gates = Vec::new();
        for (metric, name, exprs) in fields {
            let Some(exprs) = exprs else { continue };
            let many = matches!(exprs, OneOrMany::Many(_));
            for (i, expr) in exprs.into_vec().into_iter().enumerate() {
                let key = if many {
                    format!("slo.{name}[{i}]")
                } else {
                    format!("slo.{name}")
                };
                let (want_stat, want) = match metric.kind() {
                    Kind::Latency | Kind::Tokens => (true, "a duration such as 500ms"),
                    Kind::Ratio => (false, "a percentage such as 1%"),
                    Kind::RequestRate => (false, "a rate such as 5/s"),
                    Kind::TokenRate | Kind::Count => (false, "a plain number such as 1000"),
                };
                let fits = matches!(
                    (metric.kind(), expr.threshold),
                    (Kind::Latency, Threshold::Duration(_))
                        | (Kind::Ratio, Threshold::Percent(_))
                        | (Kind::RequestRate, Threshold::Rate(_))
                        | (
                            Kind::TokenRate | Kind::Count | Kind::Tokens,
                            Threshold::Number(_)
                        )
                );
                if let Some((message, fix)) = quality.missing(metric) {
                    self.key_err(&key, message, Some(fix));
                } else if !fits {
                    self.err(
                        &key,
                        format!(
                            "`{metric}` is compared with {want}, found {} ({})",
                            expr.threshold.kind(),
                            expr.threshold
                        ),
                        None,
                    );
                } else if want_stat && expr.stat.is_none() {
                    self.err(
                        &key,
                        format!(
                            "`{metric}` is a distribution: say which statistic, e.g. \"p99 {} {}\"",
                            expr.cmp.symbol(),
                            expr.threshold
                        ),
                        None,
                    );
                } else if let Some(p) = match expr.threshold {
                    Threshold::Percent(p) if p.value() > 100.0 => Some(p),
                    _ => None,
                } {
                    self.err(
                        &key,
                        format!(
                            "expected a percentage in [0%, 100%], found {}%",
                            super::num(p.value())
                        ),
                        None,
                    );
                } else if !want_stat && expr.stat.is_some() {
                    self.err(&key, format!("`{metric}` is one number per point: drop the statistic, e.g. \"{} {}\"", expr.cmp.symbol(), expr.threshold), None);
                } else {
                    gates.push(SloGate { metric, expr });
                }
            }
        }
        gates
    }
}
