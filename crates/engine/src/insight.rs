//! Reading a point like an expert: memory attributed to the phase of the
//! request timeline it was sampled in, bottleneck hints (patterns in the
//! numbers, each with the figures behind it, never a verdict), GPU
//! imbalance, and the ramp step where a latency jumps. Pure functions of
//! results data; `run` calls them as points finish, `merge` again on the
//! merged point. The rules and their thresholds are in docs/expert.md.

use std::collections::BTreeMap;

use infer_bench_results::insight::{GpuMemoryPhases, PhasePeaks};
use infer_bench_results::telemetry::{GpuDataSource, GpuTelemetry, PointTelemetry};
use infer_bench_results::{Hint, MemoryPhases, PhaseTimeline, Stats};
use infer_bench_spec::Validity;
use infer_bench_spec::results::PointResult;

/// Throttle reasons that do not lower clocks under load.
pub const BENIGN_THROTTLE: &[&str] = &[
    "gpu_idle",
    "applications_clocks_setting",
    "sync_boost",
    "display_clock_setting",
];

/// A run's prefill/decode timeline placed on the point's clock: bucket 0
/// starts at `origin_s` (seconds since the point began).
pub struct PlacedTimeline<'a> {
    pub origin_s: f64,
    pub timeline: &'a PhaseTimeline,
}

/// Whether `t_s` falls inside a measurement window.
fn in_windows(tel: &PointTelemetry, t_s: f64) -> bool {
    tel.runs
        .iter()
        .any(|r| t_s >= r.window_start_s && t_s <= r.window_end_s)
}

/// The prefill share (prefill over prefill plus decode request-seconds)
/// of the bucket at `t_s`, inside a measurement window.
fn share_at(tel: &PointTelemetry, timelines: &[PlacedTimeline<'_>], t_s: f64) -> Option<f64> {
    if !in_windows(tel, t_s) {
        return None;
    }
    for p in timelines {
        let w = p.timeline.bucket_ns as f64 / 1e9;
        if w <= 0.0 || t_s < p.origin_s {
            continue;
        }
        let i = ((t_s - p.origin_s) / w) as usize;
        // A timeline read from a file may have columns of unequal length:
        // a bucket one column lacks holds nothing in that phase.
        let (pre, dec) = (p.timeline.prefill_s.get(i), p.timeline.decode_s.get(i));
        if pre.is_some() || dec.is_some() {
            let (pre, dec) = (pre.copied().unwrap_or(0.0), dec.copied().unwrap_or(0.0));
            return (pre + dec > 0.0).then(|| pre / (pre + dec));
        }
    }
    None
}

fn peaks(samples: impl Iterator<Item = (bool, f64)>) -> PhasePeaks {
    let mut acc = [(0.0f64, 0.0f64, 0u64); 2];
    for (prefill, v) in samples {
        let a = &mut acc[prefill as usize];
        a.0 = if a.2 == 0 { v } else { a.0.max(v) };
        a.1 += v;
        a.2 += 1;
    }
    let get = |i: usize| {
        let (max, sum, n) = acc[i];
        (n > 0).then_some((max, sum / n as f64))
    };
    PhasePeaks {
        prefill_peak: get(1).map(|x| x.0),
        prefill_mean: get(1).map(|x| x.1),
        decode_peak: get(0).map(|x| x.0),
        decode_mean: get(0).map(|x| x.1),
    }
}

/// GPU memory and KV-cache usage by phase. `before_server` holds each
/// GPU's memory used before the point's server started.
pub fn memory_phases(
    tel: &PointTelemetry,
    timelines: &[PlacedTimeline<'_>],
    before_server: &BTreeMap<u32, u64>,
) -> Option<MemoryPhases> {
    if timelines.is_empty() {
        return None;
    }
    let mut out = MemoryPhases::default();
    // An interval is prefill-heavy when its prefill share is above the
    // windows' overall share: more prompt processing than usual.
    let mut buckets: Vec<(f64, f64, f64)> = Vec::new(); // (width, prefill, decode)
    for p in timelines {
        let w = p.timeline.bucket_ns as f64 / 1e9;
        for (i, (pre, dec)) in p
            .timeline
            .prefill_s
            .iter()
            .zip(&p.timeline.decode_s)
            .enumerate()
        {
            let mid = p.origin_s + (i as f64 + 0.5) * w;
            if in_windows(tel, mid) && pre + dec > 0.0 {
                buckets.push((w, *pre, *dec));
            }
        }
    }
    let (pre_all, all): (f64, f64) = buckets
        .iter()
        .fold((0.0, 0.0), |a, (_, p, d)| (a.0 + p, a.1 + p + d));
    let threshold = if all > 0.0 { pre_all / all } else { 0.0 };
    for (w, pre, dec) in &buckets {
        if pre / (pre + dec) > threshold {
            out.prefill_heavy_s += w;
        } else {
            out.decode_heavy_s += w;
        }
    }
    out.prefill_share = threshold;
    let phase_at = |t: f64| share_at(tel, timelines, t).map(|s| s > threshold);
    if tel.gpu.status.has_readings() {
        for d in &tel.gpu.devices {
            let s = &d.series;
            let samples = s
                .t_s
                .iter()
                .zip(&s.memory_used_bytes)
                .filter_map(|(t, m)| Some((phase_at(*t)?, (*m)?)));
            let activity = |col: &[Option<f64>]| {
                let p = peaks(
                    s.t_s
                        .iter()
                        .zip(col)
                        .filter_map(|(t, v)| Some((phase_at(*t)?, (*v)?))),
                );
                (p != PhasePeaks::default()).then_some(p)
            };
            out.gpus.push(GpuMemoryPhases {
                index: d.index,
                total_bytes: d.memory_total_bytes,
                before_server_bytes: before_server.get(&d.index).copied(),
                after_load_bytes: d.memory_idle_bytes,
                used: peaks(samples),
                sm_active: activity(&s.sm_active),
                tensor_active: activity(&s.tensor_active),
                dram_active: activity(&s.dram_active),
            });
        }
    }
    if let Some(sm) = &tel.server_metrics {
        if let Some(g) = infer_bench_telemetry::scrape::kv_cache_gauge(sm) {
            let samples = sm
                .t_s
                .iter()
                .zip(&g.values)
                .filter_map(|(t, v)| Some((phase_at(*t)?, (*v)?)));
            let p = peaks(samples);
            if p != PhasePeaks::default() {
                out.kv_cache = Some(p);
            }
        }
    }
    Some(out)
}

fn hint(kind: &str, message: String, evidence: &[(&str, f64)]) -> Hint {
    Hint {
        kind: kind.into(),
        message,
        evidence: evidence
            .iter()
            .filter(|(_, v)| v.is_finite())
            .map(|(k, v)| (k.to_string(), round(*v)))
            .collect(),
    }
}

fn round(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let digits = 4 - v.abs().log10().floor() as i32;
    let f = 10f64.powi(digits.clamp(0, 9));
    (v * f).round() / f
}

/// A ramp step jumps when a latency's median at least this many times its
/// previous step's (and by at least a millisecond).
pub const JUMP_FACTOR: f64 = 1.5;
/// TPOT spread (p90 over p50, less one) above which it is named.
pub const TPOT_SPREAD: f64 = 0.2;
/// DCGM activity (mean fraction of time over the GPUs) at or above which
/// the SMs count as fully busy (`compute_bound`).
pub const ACTIVE_HIGH: f64 = 0.8;
/// Tensor-pipe activity at or above which the GPU was doing math
/// (`compute_bound`; below it, high DRAM activity is `bandwidth_bound`).
pub const TENSOR_HIGH: f64 = 0.4;
/// DRAM activity at or above which memory bandwidth is the limit.
pub const DRAM_HIGH: f64 = 0.6;
/// SM, tensor and DRAM activity all below this with requests in flight:
/// the GPU is starved (`gpu_starved`).
pub const STARVED: f64 = 0.25;

/// The hints of a finished point (see docs/expert.md for each rule), in
/// the order the rules are tried.
pub fn hints(pr: &PointResult, validity: &Validity) -> Vec<Hint> {
    let c = Context::of(pr);
    let mut out = Vec::new();
    out.extend(client_bound(&c, validity));
    let cpu_blamed = scheduling_bound(&c, &mut out);
    gpu_limit(&c, cpu_blamed, &mut out);
    out.extend(tpot_spread(&c));
    throttling(&c, &mut out);
    out.extend(preemptions(pr));
    out.extend(gpu_imbalance(&c));
    ramp_jumps(pr, &mut out);
    out.extend(image_tokens(pr));
    out
}

/// What an image cost in prompt tokens (`image_tokens`): the server's
/// prompt tokens beyond the text asked for, per image sent (the chat
/// template's few tokens included, hence "about").
fn image_tokens(pr: &PointResult) -> Option<Hint> {
    let m = pr.merged.media.as_ref()?;
    let per = m.prompt_tokens_per_image.filter(|t| t.is_finite())?;
    let size = match pr.config.workload.images.as_ref().map(|i| &i.source) {
        Some(infer_bench_spec::media::ImageSource::Synthetic { width, height, .. }) => {
            format!("{width}x{height} ")
        }
        _ => String::new(),
    };
    Some(hint(
        "image_tokens",
        format!(
            "each {size}image cost about {per:.0} prompt tokens on this server ({:.1} images and {:.0} KB of image files per request)",
            m.images_per_request,
            m.image_bytes_per_request / 1e3
        ),
        &[
            ("prompt_tokens_per_image", per),
            ("images_per_request", m.images_per_request),
            ("image_bytes_per_request", m.image_bytes_per_request),
        ],
    ))
}

/// What several rules read of a point: its merged statistics, the
/// client's and server's CPU, and its sampled GPUs' mean figures.
struct Context<'a> {
    pr: &'a PointResult,
    m: &'a Stats,
    cores: f64,
    proc_cores: f64,
    host_busy: Option<f64>,
    server_cores: Option<f64>,
    gpu: Option<&'a GpuTelemetry>,
    util: Option<f64>,
    bw: Option<f64>,
    /// DCGM's activity fractions (0 to 1), where a dcgm-exporter (or the
    /// simulator's model) gave them: far better evidence than NVML's
    /// utilization ("any kernel ran"), so they decide when present.
    sm: Option<f64>,
    tensor: Option<f64>,
    dram: Option<f64>,
}

impl<'a> Context<'a> {
    fn of(pr: &'a PointResult) -> Context<'a> {
        let client = pr.client.as_ref();
        let gpu = pr
            .telemetry
            .as_ref()
            .map(|t| &t.gpu)
            .filter(|g| g.status.has_readings());
        let mean_of = |f: &dyn Fn(&infer_bench_results::telemetry::GpuStats) -> Option<f64>| {
            gpu?.device_mean(f)
        };
        Context {
            pr,
            m: &pr.merged,
            cores: client.map(|c| c.cores as f64).unwrap_or(0.0),
            proc_cores: client.map(|c| c.process_cores).unwrap_or(0.0),
            host_busy: client.and_then(|c| c.host_busy),
            server_cores: client.and_then(|c| c.server_cores),
            gpu,
            util: mean_of(&|s| s.utilization_pct.map(|x| x.mean)),
            bw: mean_of(&|s| s.memory_bandwidth_utilization_pct.map(|x| x.mean)),
            sm: mean_of(&|s| s.sm_active.map(|x| x.mean)),
            tensor: mean_of(&|s| s.tensor_active.map(|x| x.mean)),
            dram: mean_of(&|s| s.dram_active.map(|x| x.mean)),
        }
    }
}

/// The client itself late (`client_bound`).
fn client_bound(c: &Context<'_>, validity: &Validity) -> Option<Hint> {
    let (m, cores, proc_cores, host_busy) = (c.m, c.cores, c.proc_cores, c.host_busy);
    let lag = m.latency_ms.get("dispatch_lag")?;
    let late = validity.late_client(&m.latency_ms)?;
    let budget = late.budget_ms;
    Some(hint(
        "client_bound",
        format!(
            "the client, not the server, may be limiting: its dispatch lag {} is {:.2} ms against a {:.2} ms budget{}",
            late.stat,
            late.lag_ms,
            budget,
            match host_busy {
                Some(b) => format!(
                    " (this process used {proc_cores:.2} of {cores:.0} cores; the machine was {:.0}% busy)",
                    b * 100.0
                ),
                None => String::new(),
            }
        ),
        &[
            ("dispatch_lag_p99_ms", lag.p99),
            ("budget_ms", budget),
            ("client_process_cores", proc_cores),
            ("host_busy", host_busy.unwrap_or(f64::NAN)),
        ],
    ))
}

/// The GPU waiting on a saturated CPU (`scheduling_bound`); true when
/// the CPU was blamed.
fn scheduling_bound(c: &Context<'_>, out: &mut Vec<Hint>) -> bool {
    let (cores, proc_cores, host_busy, server_cores) =
        (c.cores, c.proc_cores, c.host_busy, c.server_cores);
    let busy = match c.sm {
        Some(a) => Some(("sm_active", a, a * 100.0, "its SMs were active")),
        None => c
            .util
            .map(|u| ("gpu_utilization_pct", u, u, "the GPU was busy")),
    };
    let mut cpu_blamed = false;
    if let Some((field, raw, pct, what)) = busy.filter(|b| b.2 < 50.0) {
        let client_saturated =
            cores > 0.0 && (proc_cores >= 0.9 * cores || host_busy.is_some_and(|b| b > 0.9));
        let server_saturated = server_cores.is_some_and(|s| s >= 0.9);
        if client_saturated || server_saturated {
            cpu_blamed = true;
            let who = if server_saturated {
                "the server's CPU"
            } else {
                "the client machine's CPU"
            };
            out.push(hint(
                "scheduling_bound",
                format!("{what} only {pct:.0}% of the time while {who} was saturated: scheduling or data preparation, not the GPU, may be the limit"),
                &[
                    (field, raw),
                    ("client_process_cores", proc_cores),
                    ("host_busy", host_busy.unwrap_or(f64::NAN)),
                    ("server_cores", server_cores.unwrap_or(f64::NAN)),
                ],
            ));
        }
    }

    cpu_blamed
}

/// What limited the GPU, from DCGM's activity where there is some
/// (`compute_bound`, `bandwidth_bound`, `gpu_starved`), else from NVML's
/// utilization and bandwidth (`bandwidth_bound`).
fn gpu_limit(c: &Context<'_>, cpu_blamed: bool, out: &mut Vec<Hint>) {
    let (pr, m, gpu, util, bw) = (c.pr, c.m, c.gpu, c.util, c.bw);
    let (sm, tensor, dram) = (c.sm, c.tensor, c.dram);
    let activity = sm.is_some() || tensor.is_some() || dram.is_some();
    if activity {
        let pct = |v: Option<f64>| v.map(|v| format!("{:.0}%", v * 100.0));
        let modelled = gpu.is_some_and(|g| g.source == Some(GpuDataSource::Sim));
        let figures = [("SM", sm), ("tensor", tensor), ("DRAM", dram)]
            .iter()
            .filter_map(|(n, v)| Some(format!("{n} {}", pct(*v)?)))
            .collect::<Vec<_>>()
            .join(", ")
            + if modelled {
                " active, as the simulator modelled it"
            } else {
                " active"
            };
        let evidence = |extra: &[(&'static str, f64)]| -> Vec<(&'static str, f64)> {
            let mut e = vec![
                ("sm_active", sm.unwrap_or(f64::NAN)),
                ("tensor_active", tensor.unwrap_or(f64::NAN)),
                ("dram_active", dram.unwrap_or(f64::NAN)),
            ];
            e.extend_from_slice(extra);
            e
        };
        let at_least = |v: Option<f64>, x: f64| v.is_some_and(|v| v >= x);
        let queued = m.concurrency_mean;
        let waiting = pr
            .telemetry
            .as_ref()
            .and_then(|t| t.server_metrics.as_ref())
            .and_then(|s| s.headline.waiting)
            .map(|w| w.mean);
        if at_least(tensor, TENSOR_HIGH) && sm.is_none_or(|s| s >= ACTIVE_HIGH) {
            out.push(hint(
                "compute_bound",
                format!(
                    "the GPU's math units were the limit ({figures}): {}; more concurrency may only add queueing, a faster GPU or lower precision would help",
                    if at_least(dram, DRAM_HIGH) {
                        "it was computing, with its memory busy too"
                    } else {
                        "it was computing, not waiting on memory"
                    }
                ),
                &evidence(&[]),
            ));
        } else if at_least(dram, DRAM_HIGH) && !at_least(tensor, TENSOR_HIGH) {
            out.push(hint(
                "bandwidth_bound",
                format!("device memory was the limit ({figures}): the GPU spent its time moving weights and KV cache, not multiplying; batching more requests per step is what raises throughput"),
                &evidence(&[]),
            ));
        } else if !cpu_blamed
            && (sm.is_some() || (tensor.is_some() && dram.is_some()))
            && queued >= 1.0
            && ![sm, tensor, dram].iter().any(|v| at_least(*v, STARVED))
        {
            out.push(hint(
                "gpu_starved",
                format!(
                    "the GPU was starved ({figures}) while {queued:.1} requests were in flight on average{}: the server is not feeding it (host-side scheduling, tokenization, sampling or the network), not the GPU, is the limit",
                    match waiting.filter(|w| *w > 0.0) {
                        Some(w) => format!(" and {w:.1} waited in its queue"),
                        None => String::new(),
                    }
                ),
                &evidence(&[
                    ("concurrency_mean", queued),
                    ("server_waiting_mean", waiting.unwrap_or(f64::NAN)),
                ]),
            ));
        }
    } else if let (Some(u), Some(b)) = (util, bw) {
        // Memory bandwidth at its ceiling, by NVML's coarser counters.
        if u > 90.0 && b > 80.0 {
            out.push(hint(
                "bandwidth_bound",
                format!("the GPU was busy {u:.0}% of the time with memory bandwidth {b:.0}% used: more concurrency may only add queueing"),
                &[("gpu_utilization_pct", u), ("memory_bandwidth_utilization_pct", b)],
            ));
        }
    }
}

/// TPOT spread (`tpot_spread`): how far the slower tenth of requests is
/// from the median. With one request in flight at a time there is no batch
/// to contend in: the spread is the server's own (or the lengths'), and the
/// hint says so rather than blaming other requests.
fn tpot_spread(c: &Context<'_>) -> Option<Hint> {
    let m = c.m;
    let t = m
        .latency_ms
        .get("tpot")
        .filter(|t| t.count >= 10 && t.p50 > 0.0)?;
    let spread = t.p90 / t.p50 - 1.0;
    (spread > TPOT_SPREAD).then_some(())?;
    let cause = if m.concurrency_max == 1 {
        "with one request in flight at a time no other request shares the batch: the server's own step-to-step variation (scheduling, sampling, memory bandwidth) or the requests' lengths"
    } else {
        "bandwidth or batching contention between requests"
    };
    Some(hint(
        "tpot_spread",
        format!(
            "TPOT p90 is {:.0}% above its median ({:.1} against {:.1} ms): {cause}",
            spread * 100.0,
            t.p90,
            t.p50
        ),
        &[
            ("tpot_spread", spread),
            ("tpot_p50_ms", t.p50),
            ("tpot_p90_ms", t.p90),
            ("concurrency_max", m.concurrency_max as f64),
        ],
    ))
}

/// Throttling (`throttling`): a GPU's clocks lowered by thermal or power
/// limits.
fn throttling(c: &Context<'_>, out: &mut Vec<Hint>) {
    let gpu = c.gpu;
    for d in gpu.map(|g| g.devices.as_slice()).unwrap_or_default() {
        let active: Vec<(&String, &f64)> = d
            .throttle_reasons
            .iter()
            .filter(|(n, f)| !BENIGN_THROTTLE.contains(&n.as_str()) && **f > 0.05)
            .collect();
        if active.is_empty() {
            continue;
        }
        let names: Vec<String> = active
            .iter()
            .map(|(n, f)| format!("{n} {:.0}% of samples", **f * 100.0))
            .collect();
        let clock = match (d.stats.sm_clock_mhz, d.stats.sm_clock_max_mhz) {
            (Some(c), Some(max)) => format!("; SM clock mean {:.0} of {max:.0} MHz", c.mean),
            _ => String::new(),
        };
        let mut ev: Vec<(&str, f64)> = active.iter().map(|(n, f)| (n.as_str(), **f)).collect();
        ev.push(("gpu", d.index as f64));
        out.push(hint(
            "throttling",
            format!(
                "GPU {} was throttled ({}{clock}): thermal or power limits lowered its clocks",
                d.index,
                names.join(", ")
            ),
            &ev,
        ));
    }
}

/// Preemptions (`preemptions`): the server's KV cache too small.
fn preemptions(pr: &PointResult) -> Option<Hint> {
    let h = pr
        .telemetry
        .as_ref()
        .and_then(|t| t.server_metrics.as_ref())
        .map(|s| &s.headline)?;
    let n = h.preemptions.filter(|n| *n > 0.0)?;
    let kv = h.kv_cache_usage_ratio.map(|k| k.max);
    Some(hint(
        "preemptions",
        format!(
            "the server preempted {n:.0} requests{}: the KV cache is too small for this load",
            kv.map(|k| format!(" with KV-cache usage peaking at {:.0}%", k * 100.0))
                .unwrap_or_default()
        ),
        &[
            ("preemptions", n),
            ("kv_cache_usage_max", kv.unwrap_or(f64::NAN)),
        ],
    ))
}

/// Imbalance between GPUs (`gpu_imbalance`): by utilization, else by
/// memory held.
fn gpu_imbalance(c: &Context<'_>) -> Option<Hint> {
    let g = c.gpu.filter(|g| g.devices.len() > 1)?;
    let utils: Vec<(u32, f64)> = g
        .devices
        .iter()
        .filter_map(|d| Some((d.index, d.stats.utilization_pct?.mean)))
        .collect();
    let mems: Vec<(u32, f64)> = g
        .devices
        .iter()
        .filter_map(|d| Some((d.index, d.stats.memory_used_bytes?.mean)))
        .collect();
    let spread = |v: &[(u32, f64)]| {
        let lo = v.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
        let hi = v.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
        Some((*lo, *hi))
    };
    if let Some(((li, lo), (hi_i, hi))) = spread(&utils).filter(|(l, h)| h.1 - l.1 > 20.0) {
        return Some(hint(
            "gpu_imbalance",
            format!(
                "the GPUs were unevenly busy: GPU {hi_i} {hi:.0}% against GPU {li} {lo:.0}%; work may not be split evenly (tensor or data parallel placement, a straggler)"
            ),
            &[("utilization_pct_max", hi), ("utilization_pct_min", lo)],
        ));
    } else if let Some(((li, lo), (hi_i, hi))) =
        spread(&mems).filter(|(l, h)| l.1 > 0.0 && h.1 / l.1 > 1.2)
    {
        return Some(hint(
            "gpu_imbalance",
            format!(
                "the GPUs held uneven memory: GPU {hi_i} {:.1} GB against GPU {li} {:.1} GB",
                hi / 1e9,
                lo / 1e9
            ),
            &[("memory_used_bytes_max", hi), ("memory_used_bytes_min", lo)],
        ));
    }
    None
}

/// The ramp step where a latency jumps (`ramp_jump`), per metric.
fn ramp_jumps(pr: &PointResult, out: &mut Vec<Hint>) {
    for metric in ["tpot", "ttft", "e2e"] {
        let v: Vec<(u32, &str, f64)> = pr
            .steps
            .iter()
            .filter_map(|s| {
                Some((
                    s.step,
                    s.level.as_str(),
                    s.stats.latency_ms.get(metric)?.p50,
                ))
            })
            .filter(|(_, _, v)| *v > 0.0)
            .collect();
        if let Some(w) = v
            .windows(2)
            .find(|w| w[1].2 >= JUMP_FACTOR * w[0].2 && w[1].2 - w[0].2 >= 1.0)
        {
            let (a, b) = (w[0], w[1]);
            let mut h = hint(
                "ramp_jump",
                format!(
                    "{} p50 rises sharply at ramp step {} ({}): {:.1} -> {:.1} ms (+{:.0}%) from the step before ({})",
                    metric.to_uppercase(),
                    b.0 + 1,
                    b.1,
                    a.2,
                    b.2,
                    (b.2 / a.2 - 1.0) * 100.0,
                    a.1
                ),
                &[("step", (b.0 + 1) as f64)],
            );
            h.evidence
                .insert(format!("{metric}_p50_ms_before"), round(a.2));
            h.evidence.insert(format!("{metric}_p50_ms"), round(b.2));
            out.push(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_results::telemetry::{
        GpuDeviceTelemetry, GpuSeries, GpuStats, GpuStatus, GpuTelemetry, RunSpan, SeriesStats,
    };

    fn ss(mean: f64) -> Option<SeriesStats> {
        Some(SeriesStats {
            count: 10,
            mean,
            min: mean,
            p50: mean,
            p95: mean,
            max: mean,
        })
    }

    #[test]
    fn memory_is_attributed_to_the_phase_it_was_sampled_in() {
        // Prefill dominates the first second, decode the second.
        let tl = PhaseTimeline {
            bucket_ns: 100_000_000,
            prefill_s: (0..20).map(|i| if i < 10 { 0.5 } else { 0.01 }).collect(),
            decode_s: (0..20).map(|i| if i < 10 { 0.1 } else { 0.4 }).collect(),
        };
        let t_s: Vec<f64> = (0..20).map(|i| i as f64 * 0.1 + 0.05).collect();
        let mem: Vec<Option<f64>> = (0..20)
            .map(|i| Some(if i < 10 { 50e9 + i as f64 * 1e9 } else { 45e9 }))
            .collect();
        let tel = PointTelemetry {
            runs: vec![RunSpan {
                run: 0,
                start_s: 0.0,
                window_start_s: 0.0,
                window_end_s: 2.0,
            }],
            gpu: GpuTelemetry {
                status: GpuStatus::Sampled,
                devices: vec![GpuDeviceTelemetry {
                    index: 0,
                    memory_idle_bytes: Some(40_000_000_000),
                    series: GpuSeries {
                        t_s,
                        memory_used_bytes: mem,
                        ..Default::default()
                    },
                    ..Default::default()
                }],
                ..Default::default()
            },
            server_metrics: None,
        };
        let before = [(0u32, 1_000_000_000u64)].into();
        let m = memory_phases(
            &tel,
            &[PlacedTimeline {
                origin_s: 0.0,
                timeline: &tl,
            }],
            &before,
        )
        .unwrap();
        assert!((m.prefill_heavy_s - 1.0).abs() < 1e-9 && (m.decode_heavy_s - 1.0).abs() < 1e-9);
        let g = &m.gpus[0];
        assert_eq!(g.before_server_bytes, Some(1_000_000_000));
        assert_eq!(g.after_load_bytes, Some(40_000_000_000));
        assert_eq!(g.used.prefill_peak, Some(59e9));
        assert_eq!(g.used.decode_peak, Some(45e9));
    }

    const SPEC: &str = "name = \"t\"\n[targets.s]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 8\noutput_tokens = 8\n[load]\nconcurrency = 1\nduration = \"1s\"\n";

    fn spec() -> infer_bench_spec::Spec {
        infer_bench_spec::compile("t.toml", SPEC, std::path::Path::new(".")).unwrap()
    }

    fn point() -> PointResult {
        let plan = infer_bench_spec::plan::Plan::build(&spec()).unwrap();
        let mut p = crate::run::assemble::failed_point(&plan.points[0], String::new());
        p.status = infer_bench_results::PointStatus::Complete;
        p
    }

    #[test]
    fn hints_name_their_numbers() {
        let v = spec().validity;
        let mut p = point();
        let lag = infer_bench_results::hist::Summary {
            count: 100,
            p99: 12.5,
            ..Default::default()
        };
        p.merged.latency_ms.insert("dispatch_lag".into(), lag);
        let tpot = infer_bench_results::hist::Summary {
            count: 100,
            mean: 20.0,
            std: 8.0,
            p50: 18.0,
            p90: 31.0,
            ..Default::default()
        };
        p.merged.latency_ms.insert("tpot".into(), tpot);
        p.merged.concurrency_max = 8;
        p.telemetry = Some(PointTelemetry {
            gpu: GpuTelemetry {
                status: GpuStatus::Sampled,
                devices: (0..2)
                    .map(|i| GpuDeviceTelemetry {
                        index: i,
                        stats: GpuStats {
                            utilization_pct: ss(if i == 0 { 95.0 } else { 60.0 }),
                            memory_bandwidth_utilization_pct: ss(85.0),
                            sm_clock_mhz: ss(1400.0),
                            sm_clock_max_mhz: Some(1980.0),
                            ..Default::default()
                        },
                        throttle_reasons: [
                            ("sw_power_cap".to_string(), 0.4),
                            ("gpu_idle".to_string(), 0.5),
                        ]
                        .into(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
            ..Default::default()
        });
        let h = hints(&p, &v);
        let kinds: Vec<&str> = h.iter().map(|h| h.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "client_bound",
                "tpot_spread",
                "throttling",
                "throttling",
                "gpu_imbalance"
            ],
            "{h:#?}"
        );
        assert_eq!(h[0].evidence["dispatch_lag_p99_ms"], 12.5);
        assert_eq!(h[1].evidence["concurrency_max"], 8.0);
        assert!(
            h[1].message
                .contains("72% above its median (31.0 against 18.0 ms)"),
            "{}",
            h[1].message
        );
        assert!(
            h[1].message
                .contains("batching contention between requests")
        );
        assert!(
            h[2].message.contains("sw_power_cap 40% of samples")
                && h[2].message.contains("1400 of 1980 MHz"),
            "{}",
            h[2].message
        );
        assert!(!h[2].message.contains("gpu_idle"));
        assert!(
            h[4].message.contains("GPU 0 95%") && h[4].message.contains("GPU 1 60%"),
            "{}",
            h[4].message
        );
        // GPU 0 alone: busy and at its bandwidth ceiling.
        let tel = p.telemetry.as_mut().unwrap();
        tel.gpu.devices.truncate(1);
        let h = hints(&p, &v);
        assert!(h.iter().any(|h| h.kind == "bandwidth_bound"));
    }

    /// At concurrency 1 there is no batch to share: the TPOT spread hint
    /// names the server's own variation, never contention between requests.
    #[test]
    fn one_request_at_a_time_blames_no_batching() {
        let mut p = point();
        let tpot = infer_bench_results::hist::Summary {
            count: 8,
            p50: 10.0,
            p90: 15.0,
            ..Default::default()
        };
        p.merged.latency_ms.insert("tpot".into(), tpot);
        // Under 10 requests: no hint at all.
        assert!(hints(&p, &spec().validity).is_empty());
        p.merged.latency_ms.get_mut("tpot").unwrap().count = 40;
        for (c, contention) in [(1, false), (2, true), (64, true)] {
            p.merged.concurrency_max = c;
            let h = hints(&p, &spec().validity);
            assert_eq!(h.len(), 1, "{h:#?}");
            assert_eq!(h[0].kind, "tpot_spread");
            assert_eq!(
                h[0].message.contains("contention"),
                contention,
                "concurrency {c}: {}",
                h[0].message
            );
            assert_eq!(h[0].message.contains("one request in flight"), !contention);
            assert_eq!(h[0].evidence["concurrency_max"], c as f64);
        }
    }

    #[test]
    fn a_ramp_names_the_step_where_tpot_jumps() {
        let mut p = point();
        for (i, (level, tpot)) in [
            ("c=8", 10.0),
            ("c=16", 11.0),
            ("c=32", 19.0),
            ("c=64", 40.0),
        ]
        .iter()
        .enumerate()
        {
            let mut s = infer_bench_results::Stats::default();
            let t = infer_bench_results::hist::Summary {
                count: 50,
                p50: *tpot,
                ..Default::default()
            };
            s.latency_ms.insert("tpot".into(), t);
            p.steps.push(infer_bench_results::StepResult {
                step: i as u32,
                level: level.to_string(),
                stats: s,
            });
        }
        let h = hints(&p, &spec().validity);
        assert_eq!(h.len(), 1, "{h:#?}");
        assert_eq!(h[0].kind, "ramp_jump");
        assert!(
            h[0].message
                .contains("step 3 (c=32): 11.0 -> 19.0 ms (+73%)"),
            "{}",
            h[0].message
        );
        assert_eq!(h[0].evidence["step"], 3.0);
    }
}
