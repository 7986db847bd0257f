//! Cost figures of a point, from the spec's `[cost]` prices, the point's
//! merged statistics and, where GPUs were sampled, their measured energy.
//! Units are in the names; the formulas (METRICS.md, docs/telemetry.md):
//!
//! - `usd_per_1m_output_tokens = gpu_hour_usd * gpus * window_h / (output_tokens / 1e6)`
//! - `usd_per_1m_tokens_at_slo`: the same over the output tokens of good
//!   requests (those within every `[goodput]` bound)
//! - `output_tokens_per_joule = output_tokens / energy_j`
//! - `electricity_usd_per_1m_output_tokens = energy_j / 3.6e6 * kwh_usd / (output_tokens / 1e6)`
//! - `good_requests_per_gpu_usd = goodput_per_s * 3600 / (gpu_hour_usd * gpus)`
//! - embeddings and rerank (points with `inputs_per_s` or
//!   `documents_per_s`): `usd_per_1m_inputs` (`usd_per_1m_documents`) =
//!   `gpu_hour_usd * gpus * window_h / (inputs_per_s * window_s / 1e6)`,
//!   and `usd_per_1k_requests` the same over `request_throughput * window_s / 1e3`
//!
//! `window_h` is the measurement windows' total length (all runs) in hours,
//! and the token counts are those of the same windows; energy is measured
//! over the same windows.

use infer_bench_results::{CostResult, Stats};
use infer_bench_spec::Cost;
use infer_bench_spec::plan::PointConfig;

/// Joules in a kilowatt-hour.
pub const J_PER_KWH: f64 = 3.6e6;

/// GPUs the price applies to: `cost.gpus`, else the simulated target's
/// GPU count, else the number of GPUs the target names in `gpu_ids`, else 1.
pub fn gpus(cost: &Cost, cfg: &PointConfig) -> u32 {
    cost.gpus
        .or(cfg.target.sim.as_ref().map(|s| s.total_gpus()))
        .or(cfg
            .target
            .gpu_ids
            .as_ref()
            .map(|ids| ids.len() as u32)
            .filter(|n| *n > 0))
        .unwrap_or(1)
}

/// The prices of a point: `[cost]`'s, with the target's own
/// `gpu_hour_usd` where it sets one.
pub fn for_target(cost: &Cost, cfg: &PointConfig) -> Cost {
    Cost {
        gpu_hour_usd: cfg.target.gpu_hour_usd.or(cost.gpu_hour_usd),
        ..cost.clone()
    }
}

/// The cost figures of merged statistics `s` with `energy_j` measured over
/// the same windows; `None` when there is neither a price nor an energy.
pub fn compute(cost: &Cost, gpus: u32, s: &Stats, energy_j: Option<f64>) -> Option<CostResult> {
    let price = cost.gpu_hour_usd.filter(|p| *p >= 0.0);
    let energy_j = energy_j.filter(|e| *e > 0.0 && e.is_finite());
    if price.is_none() && energy_j.is_none() {
        return None;
    }
    let gpus_f = gpus.max(1) as f64;
    let window_h = s.window_s / 3600.0;
    let out_m = s.tokens.output_total as f64 / 1e6;
    let good_m = s.tokens.good_output_total as f64 / 1e6;
    // Dollars spent on GPUs over the windows.
    let gpu_usd = price
        .filter(|_| s.window_s > 0.0)
        .map(|p| p * gpus_f * window_h);
    let per =
        |usd: Option<f64>, millions: f64| usd.filter(|_| millions > 0.0).map(|u| u / millions);
    Some(CostResult {
        gpus: price.map(|_| gpus),
        usd_per_1m_output_tokens: per(gpu_usd, out_m),
        usd_per_1m_tokens_at_slo: per(gpu_usd, good_m),
        output_tokens_per_joule: energy_j
            .filter(|_| s.tokens.output_total > 0)
            .map(|e| s.tokens.output_total as f64 / e),
        electricity_usd_per_1m_output_tokens: per(
            energy_j.zip(cost.kwh_usd).map(|(e, k)| e / J_PER_KWH * k),
            out_m,
        ),
        good_requests_per_gpu_usd: price
            .filter(|p| *p > 0.0)
            .map(|p| s.goodput * 3600.0 / (p * gpus_f)),
        usd_per_1m_inputs: s
            .inputs_per_s
            .and_then(|r| per(gpu_usd, r * s.window_s / 1e6)),
        usd_per_1m_documents: s
            .documents_per_s
            .and_then(|r| per(gpu_usd, r * s.window_s / 1e6)),
        usd_per_1k_requests: (s.inputs_per_s.is_some() || s.documents_per_s.is_some())
            .then(|| per(gpu_usd, s.request_throughput * s.window_s / 1e3))
            .flatten(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retrieval_points_cost_per_input_document_and_request() {
        let cost = Cost {
            gpu_hour_usd: Some(3.6),
            ..Cost::default()
        };
        // One hour at 10 req/s of 4 inputs: $3.60 for 36,000 requests and
        // 144,000 inputs.
        let mut s = stats(3600.0, 0, 0, 10.0);
        s.request_throughput = 10.0;
        s.inputs_per_s = Some(40.0);
        let c = compute(&cost, 1, &s, None).unwrap();
        assert!((c.usd_per_1m_inputs.unwrap() - 3.6 / 0.144).abs() < 1e-9);
        assert!((c.usd_per_1k_requests.unwrap() - 3.6 / 36.0).abs() < 1e-9);
        assert_eq!(c.usd_per_1m_documents, None);
        assert_eq!(c.usd_per_1m_output_tokens, None, "no output tokens");
        // A chat point gets none of them.
        s.inputs_per_s = None;
        let c = compute(&cost, 1, &s, None).unwrap();
        assert_eq!((c.usd_per_1m_inputs, c.usd_per_1k_requests), (None, None));
    }

    fn stats(window_s: f64, out: u64, good_out: u64, goodput: f64) -> Stats {
        let mut s = Stats {
            window_s,
            goodput,
            ..Default::default()
        };
        s.tokens.output_total = out;
        s.tokens.good_output_total = good_out;
        s
    }

    fn price(usd: f64, kwh: Option<f64>) -> Cost {
        Cost {
            gpu_hour_usd: Some(usd),
            gpus: None,
            kwh_usd: kwh,
        }
    }

    #[test]
    fn a_targets_own_price_overrides_the_specs() {
        let text = "name = \"t\"\n[targets.a]\nkind = \"sim\"\ngpu_hour_usd = 3.2\n[targets.b]\nkind = \"sim\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 8\noutput_tokens = 8\n[load]\nconcurrency = 1\nrequests = 1\n[matrix]\ntarget = [\"a\", \"b\"]\n[cost]\ngpu_hour_usd = 2.0\nkwh_usd = 0.1\n";
        let spec = infer_bench_spec::compile("t.toml", text, std::path::Path::new(".")).unwrap();
        let plan = infer_bench_spec::plan::Plan::build(&spec).unwrap();
        let a = for_target(&spec.cost, &plan.points[0].config);
        let b = for_target(&spec.cost, &plan.points[1].config);
        assert_eq!((a.gpu_hour_usd, a.kwh_usd), (Some(3.2), Some(0.1)));
        assert_eq!(b.gpu_hour_usd, Some(2.0));
        // A price is not what a point measures: the IDs do not move with it.
        assert_eq!(
            plan.points[0].hash,
            infer_bench_spec::plan::Plan::build(
                &infer_bench_spec::compile(
                    "t.toml",
                    &text.replace("gpu_hour_usd = 3.2", "gpu_hour_usd = 9"),
                    std::path::Path::new(".")
                )
                .unwrap()
            )
            .unwrap()
            .points[0]
                .hash
        );
    }

    #[test]
    fn gpu_dollars_per_million_tokens() {
        // 2 GPUs at $2.50/h for 60 s: 2 * 2.5 / 60 = $0.083333.
        // 500,000 output tokens: 0.083333 / 0.5 = $0.166667 per 1M.
        // 250,000 good tokens: $0.333333 per 1M at the SLO.
        // Goodput 10 req/s = 36,000 good req/h over $5/h: 7,200 per GPU-dollar.
        let c = compute(
            &price(2.5, None),
            2,
            &stats(60.0, 500_000, 250_000, 10.0),
            None,
        )
        .unwrap();
        assert!((c.usd_per_1m_output_tokens.unwrap() - 1.0 / 6.0).abs() < 1e-12);
        assert!((c.usd_per_1m_tokens_at_slo.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(c.good_requests_per_gpu_usd, Some(7200.0));
        assert_eq!(c.gpus, Some(2));
        assert_eq!(c.output_tokens_per_joule, None);
        assert_eq!(c.electricity_usd_per_1m_output_tokens, None);
    }

    #[test]
    fn energy_figures() {
        // 500,000 tokens on 360,000 J (0.1 kWh): 1.3889 tokens/J.
        // 0.1 kWh at $0.12 = $0.012 for 0.5M tokens: $0.024 per 1M.
        let c = compute(
            &price(2.5, Some(0.12)),
            1,
            &stats(60.0, 500_000, 0, 0.0),
            Some(360_000.0),
        )
        .unwrap();
        assert!((c.output_tokens_per_joule.unwrap() - 500_000.0 / 360_000.0).abs() < 1e-12);
        assert!((c.electricity_usd_per_1m_output_tokens.unwrap() - 0.024).abs() < 1e-12);
        // No good tokens: no price at the SLO, rather than infinity.
        assert_eq!(c.usd_per_1m_tokens_at_slo, None);
        assert_eq!(c.good_requests_per_gpu_usd, Some(0.0));
    }

    #[test]
    fn energy_without_prices_still_gives_tokens_per_joule() {
        let c = compute(&Cost::default(), 1, &stats(10.0, 1000, 0, 0.0), Some(500.0)).unwrap();
        assert_eq!(c.output_tokens_per_joule, Some(2.0));
        assert_eq!(c.usd_per_1m_output_tokens, None);
        assert_eq!(c.electricity_usd_per_1m_output_tokens, None, "no kwh_usd");
        assert_eq!(c.gpus, None);
    }

    #[test]
    fn nothing_to_say_is_none_and_nothing_divides_by_zero() {
        assert!(compute(&Cost::default(), 1, &stats(10.0, 1000, 0, 0.0), None).is_none());
        let c = compute(&price(2.5, Some(0.1)), 1, &stats(0.0, 0, 0, 0.0), Some(0.0)).unwrap();
        assert_eq!(c.usd_per_1m_output_tokens, None);
        assert_eq!(c.output_tokens_per_joule, None);
        let free = compute(&price(0.0, None), 1, &stats(10.0, 1000, 1000, 1.0), None).unwrap();
        assert_eq!(free.usd_per_1m_output_tokens, Some(0.0));
        assert_eq!(
            free.good_requests_per_gpu_usd, None,
            "no dollars to divide by"
        );
    }
}
