//! `merge`: the results of sharded runs combined into one results file, as
//! if one process had run them.
//!
//! Point shards (`run --partition K/N` on N machines) hold disjoint sets of
//! points: their points are kept as they are and put in plan order. Agent
//! shards (`run --agent K/N`) hold the same points, each agent a share of
//! every run's arrivals: per run, the agents' tallies (histograms,
//! counters, sums and extreme instants on the agreed clock) are added,
//! and every statistic is recomputed from the sum by the same code a
//! single process uses, so counts are exact, percentiles are those of the
//! union, and throughput is over the union's window. Validity, SLOs and
//! cost are then judged again on the merged point, from the spec the
//! results carry. Both kinds combine: agents of several partitions.
//!
//! Files of different specs, seeds or agent counts are refused, naming
//! what differs; so are point shards of different splits (`slice:1/4` with
//! `slice:2/8`). Every point shard records its partition, so a set that
//! misses one (2 of 4 shards) is merged as incomplete: the missing
//! partitions' points are listed as pending and `complete` is false.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Difference, MergeError, Result};
use crate::run::recorder::{Recorder, Tally};
use infer_bench_results::{
    AgentShare, Environment, FORMAT, METRICS_VERSION, MergedInput, PhaseTimeline, PointStatus,
    RunResult, ToolInfo, VERSION,
};
use infer_bench_spec::plan::{Plan, Point};
use infer_bench_spec::results::{PointResult, Results};
use infer_bench_spec::{Level, Spec};

/// Merges shards' results (each with the file it came from).
pub fn merge(inputs: Vec<(PathBuf, Results)>) -> Result<Results> {
    let Some((first_path, first)) = inputs.first() else {
        return Err(MergeError::NoInputs.into());
    };
    for (path, r) in &inputs[1..] {
        same_run(first_path, first, path, r)?;
    }
    let spec = spec_of(first_path, first)?;
    let plan = Plan::build(&spec).map_err(|source| MergeError::NoLongerExpands {
        path: first_path.clone(),
        source,
    })?;
    let position: BTreeMap<&str, usize> = plan
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.as_str(), i))
        .collect();

    // Every point's shares, with the file each came from.
    let mut shares: BTreeMap<String, Vec<(usize, &PointResult)>> = BTreeMap::new();
    for (i, (_, r)) in inputs.iter().enumerate() {
        for p in &r.points {
            if !position.contains_key(p.id.as_str()) {
                return Err(MergeError::UnknownPoint {
                    path: inputs[i].0.clone(),
                    id: p.id.clone(),
                }
                .into());
            }
            shares.entry(p.id.clone()).or_default().push((i, p));
        }
    }
    let agents = first.agent.as_ref().map(|a| a.n);
    let mut points = Vec::with_capacity(shares.len());
    for (id, list) in &shares {
        let point = match agents {
            None => {
                if list.len() > 1 {
                    return Err(MergeError::Overlap {
                        id: id.clone(),
                        first: inputs[list[0].0].0.clone(),
                        second: inputs[list[1].0].0.clone(),
                    }
                    .into());
                }
                list[0].1.clone()
            }
            Some(n) => {
                let plan_point = &plan.points[position[id.as_str()]];
                merge_agents(&spec, plan_point, list, n, &inputs)?
            }
        };
        points.push(point);
    }
    points.sort_by_key(|p| position[p.id.as_str()]);

    let present: std::collections::BTreeSet<&str> = points.iter().map(|p| p.id.as_str()).collect();
    let mut pending: Vec<String> = missing_partitions(&inputs, &plan)?;
    for (_, r) in &inputs {
        for id in &r.pending {
            if !present.contains(id.as_str()) && !pending.contains(id) {
                pending.push(id.clone());
            }
        }
    }
    pending.sort_by_key(|id| position.get(id.as_str()).copied().unwrap_or(usize::MAX));
    let interrupted = inputs.iter().any(|(_, r)| r.interrupted);
    Ok(Results {
        format: FORMAT.into(),
        version: VERSION,
        metrics_version: METRICS_VERSION,
        tool: ToolInfo::current(),
        spec: first.spec.clone(),
        started_at: inputs
            .iter()
            .map(|(_, r)| r.started_at.clone())
            .min()
            .unwrap_or_default(),
        finished_at: inputs
            .iter()
            .map(|(_, r)| r.finished_at.clone())
            .collect::<Option<Vec<_>>>()
            .and_then(|v| v.into_iter().max()),
        complete: pending.is_empty() && !interrupted,
        interrupted,
        partition: None,
        agent: None,
        environment: environment(&inputs)?,
        points,
        pending,
        searches: inputs
            .iter()
            .flat_map(|(_, r)| r.searches.iter().cloned())
            .collect(),
        merged_from: inputs
            .iter()
            .map(|(path, r)| MergedInput {
                file: path.display().to_string(),
                host: r.environment.facts.get("host").cloned(),
                partition: r.partition.clone(),
                agent: r.agent.clone(),
                points: r.points.len() as u64,
                started_at: r.started_at.clone(),
            })
            .collect(),
    })
}

/// The points of the partitions no input ran: every point shard records
/// its partition (`run --partition`), so the inputs must be shards of one
/// split (one kind, one N); the partitions of it that none of them ran
/// are missing, and so are their points. Inputs without a partition (each
/// ran the whole plan, or its `--only` selection) say nothing of the rest.
fn missing_partitions(inputs: &[(PathBuf, Results)], plan: &Plan) -> Result<Vec<String>> {
    use infer_bench_spec::plan::Partition;
    let mut split: Option<(&Path, Partition)> = None;
    let mut seen = std::collections::BTreeSet::new();
    let mut whole: Option<&Path> = None;
    for (path, r) in inputs {
        let Some(text) = &r.partition else {
            whole.get_or_insert(path);
            continue;
        };
        let part: Partition = text.parse().map_err(|source| MergeError::BadPartition {
            path: path.clone(),
            source,
        })?;
        let (kind, k, n) = part.parts();
        if let Some((first_path, first)) = split {
            let (first_kind, _, first_n) = first.parts();
            if (first_kind, first_n) != (kind, n) {
                return Err(MergeError::OtherSplits {
                    first_path: first_path.to_path_buf(),
                    first,
                    second_path: path.clone(),
                    second: part,
                }
                .into());
            }
        } else {
            split = Some((path, part));
        }
        seen.insert(k);
    }
    let Some((first_path, first)) = split else {
        return Ok(Vec::new());
    };
    if let Some(w) = whole {
        return Err(MergeError::WholeAndSplit {
            whole: w.to_path_buf(),
            split: first_path.to_path_buf(),
            part: first,
        }
        .into());
    }
    let (_, _, n) = first.parts();
    let missing: Vec<Partition> = (1..=n)
        .filter(|k| !seen.contains(k))
        .map(|k| first.sibling(k))
        .collect();
    Ok(plan
        .points
        .iter()
        .enumerate()
        .filter(|(i, p)| missing.iter().any(|m| m.contains(*i, p)))
        .map(|(_, p)| p.id.clone())
        .collect())
}

/// Refuses to merge files that are not shards of one run of one spec.
fn same_run(a_path: &Path, a: &Results, b_path: &Path, b: &Results) -> Result<()> {
    let differ = |differ: Difference| {
        Err(MergeError::NotOneRun {
            a: a_path.to_path_buf(),
            b: b_path.to_path_buf(),
            differ,
        }
        .into())
    };
    if a.spec.sha256 != b.spec.sha256 {
        return differ(Difference::Specs {
            a_name: a.spec.name.clone(),
            a_sha256: a.spec.sha256.clone(),
            b_name: b.spec.name.clone(),
            b_sha256: b.spec.sha256.clone(),
        });
    }
    if a.spec.seed != b.spec.seed {
        return differ(Difference::Seeds(a.spec.seed, b.spec.seed));
    }
    if a.metrics_version != b.metrics_version {
        return differ(Difference::MetricsVersions(
            a.metrics_version,
            b.metrics_version,
        ));
    }
    match (&a.agent, &b.agent) {
        (None, None) => {}
        (Some(x), Some(y)) if x.n == y.n => {
            if x.start_at != y.start_at {
                return differ(Difference::StartTimes(
                    x.start_at.clone(),
                    y.start_at.clone(),
                ));
            }
            if x.slot_s != y.slot_s {
                return differ(Difference::Slots);
            }
        }
        (Some(x), Some(y)) => {
            return differ(Difference::AgentCounts(x.k, x.n, y.k, y.n));
        }
        (Some(x), None) | (None, Some(x)) => {
            return differ(Difference::OneSharded(x.k, x.n));
        }
    }
    Ok(())
}

/// The spec the results carry, compiled again (validity rules, SLOs, cost).
fn spec_of(path: &Path, r: &Results) -> Result<Spec> {
    let spec_path = Path::new(&r.spec.path);
    let base = spec_path.parent().unwrap_or(Path::new("."));
    infer_bench_spec::compile(&r.spec.path, &r.spec.source, base).map_err(|source| {
        MergeError::DoesNotCompile {
            path: path.to_path_buf(),
            source,
        }
        .into()
    })
}

/// The environment of the merged file: identity keys must agree (the
/// client's machine class may differ between agents and is then listed);
/// facts are the first file's, with every host named.
fn environment(inputs: &[(PathBuf, Results)]) -> Result<Environment> {
    let first = &inputs[0].1.environment;
    let mut env = first.clone();
    for (path, r) in &inputs[1..] {
        for (key, value) in &r.environment.identity {
            let mine = env.identity.get(key).cloned().unwrap_or_default();
            if mine == *value {
                continue;
            }
            if key == "client_class" {
                let mut all: Vec<&str> = mine.split('+').chain([value.as_str()]).collect();
                all.sort();
                all.dedup();
                env.identity.insert(key.clone(), all.join("+"));
                continue;
            }
            return Err(MergeError::OtherEnvironment {
                first: inputs[0].0.clone(),
                second: path.clone(),
                key: key.clone(),
                first_value: mine,
                second_value: value.clone(),
            }
            .into());
        }
    }
    let hosts: Vec<String> = inputs
        .iter()
        .filter_map(|(_, r)| r.environment.facts.get("host").cloned())
        .collect();
    if !hosts.is_empty() {
        let mut unique = hosts.clone();
        unique.sort();
        unique.dedup();
        env.facts.insert("host".into(), unique.join(", "));
    }
    Ok(env)
}

/// One point from every agent's share of it.
fn merge_agents(
    spec: &Spec,
    p: &Point,
    list: &[(usize, &PointResult)],
    n: u32,
    inputs: &[(PathBuf, Results)],
) -> Result<PointResult> {
    let file = |i: usize| inputs[i].0.clone();
    let parts = shares(p, list, n, inputs)?;
    let lead = parts[0].2;
    // A share that could not be measured fails the point.
    if let Some((k, _, failed)) = parts
        .iter()
        .find(|(_, _, pr)| pr.status == PointStatus::Failed)
    {
        let mut pr: PointResult = (*failed).clone();
        pr.failure = Some(format!(
            "agent {k}/{n}: {}",
            failed.failure.as_deref().unwrap_or("failed")
        ));
        pr.agents = agent_shares(&parts);
        return Ok(pr);
    }
    let sha = |pr: &PointResult| pr.workload.as_ref().map(|w| w.sha256.clone());
    if let Some((k, i, _)) = parts.iter().find(|(_, _, pr)| sha(pr) != sha(lead)) {
        return Err(MergeError::OtherRequests {
            path: file(*i),
            id: p.id.clone(),
            k: *k,
            n,
            lead: parts[0].0,
        }
        .into());
    }
    let cfg = &p.config;
    let open = matches!(cfg.load.level, Level::Rate(_));
    let runs_n = parts
        .iter()
        .map(|(_, _, pr)| pr.runs.len())
        .min()
        .unwrap_or(0);
    let mut runs = Vec::with_capacity(runs_n);
    let mut merged = Tally::default();
    let mut steps: BTreeMap<u32, Tally> = BTreeMap::new();
    let mut turns: BTreeMap<u32, Tally> = BTreeMap::new();
    let mut mix: BTreeMap<u32, Tally> = BTreeMap::new();
    let mut timelines: Vec<(f64, PhaseTimeline)> = Vec::new();
    let mut window_s = 0.0;
    let mut concurrency_max = 0;
    for run in 0..runs_n {
        let mut shards = Vec::with_capacity(parts.len());
        for (k, i, pr) in &parts {
            let shard = pr.runs[run]
                .shard
                .as_ref()
                .ok_or_else(|| MergeError::NoShardData {
                    path: file(*i),
                    id: p.id.clone(),
                    run: run + 1,
                    k: *k,
                    n,
                })?;
            shards.push(shard);
        }
        let rec = Recorder::from_shards(&shards, cfg.workload.stream, cfg.goodput.clone(), open)
            .map_err(|source| MergeError::Shards {
                path: file(parts[0].1),
                id: p.id.clone(),
                run: run + 1,
                source,
            })?;
        let stats = rec.stats();
        window_s += stats.window_s;
        concurrency_max = concurrency_max.max(stats.concurrency_max);
        merged.merge(&rec.run);
        for (k, t) in rec.steps() {
            steps.entry(*k).or_default().merge(t);
        }
        for (k, t) in rec.turns().into_iter().flatten() {
            turns.entry(*k).or_default().merge(t);
        }
        for (k, t) in rec.parts().into_iter().flatten() {
            mix.entry(*k).or_default().merge(t);
        }
        // The agents' timelines added, placed on the first agent's clock.
        if let (Some((_, ph)), Some(origin_s)) = (rec.phases(), shards[0].telemetry_origin_s) {
            timelines.push((origin_s, ph.to_data()));
        }
        runs.push(RunResult {
            run: run as u32,
            started_at: lead.runs[run].started_at.clone(),
            windows: rec.windows(),
            histograms: rec.run.histograms(),
            stats,
            shard: None,
            cache_reset: None,
        });
    }
    let base_url = cfg.target.base_url.clone().unwrap_or_default();
    let mut pr = crate::run::assemble::finish_point(
        p,
        runs,
        &merged,
        window_s,
        concurrency_max,
        &steps,
        lead.server.clone(),
        &base_url,
    );
    // Telemetry: the first agent's (every agent scrapes the same server;
    // its GPUs, if any, are its own host's).
    pr.telemetry = lead.telemetry.clone();
    pr.workload = lead.workload.clone();
    pr.turns = crate::run::workload::turn_results(&turns, open);
    pr.mix = crate::run::assemble::mix_results(cfg, &mix, window_s, open);
    pr.memory = crate::run::assemble::memory(&pr, &timelines, &BTreeMap::new());
    for (k, _, share) in &parts {
        for f in &share.preflight {
            let mut f = f.clone();
            f.message = format!("agent {k}/{n}: {}", f.message);
            pr.preflight.push(f);
        }
    }
    crate::run::assess::assess(spec, &mut pr);
    // Quality: the agent that asked (the first), with the quality SLOs it
    // judged once every server had answered.
    if let Some(asked) = parts.iter().find(|(_, _, s)| s.quality.is_some()) {
        pr.quality = asked.2.quality.clone();
        pr.slo.extend(
            asked
                .2
                .slo
                .iter()
                .filter(|s| {
                    s.metric
                        .parse::<infer_bench_results::metric::Metric>()
                        .is_ok_and(|m| m.is_quality())
                })
                .cloned(),
        );
        pr.slo_pass = (!pr.slo.is_empty()).then(|| pr.slo.iter().all(|s| s.pass));
    }
    for (k, _, share) in &parts {
        for w in &share.warnings {
            pr.warnings
                .push(w.clone().prefixed(&format!("agent {k}/{n}: ")));
        }
    }
    pr.agents = agent_shares(&parts);
    Ok(pr)
}

/// Each agent's share of a point, in agent order: `(k, input, result)`;
/// an agent that gave two shares, or none, refuses the merge.
fn shares<'a>(
    p: &Point,
    list: &[(usize, &'a PointResult)],
    n: u32,
    inputs: &[(PathBuf, Results)],
) -> Result<Vec<(u32, usize, &'a PointResult)>> {
    let file = |i: usize| inputs[i].0.clone();
    let mut by_agent: BTreeMap<u32, (usize, &PointResult)> = BTreeMap::new();
    for &(i, pr) in list {
        let k = inputs[i].1.agent.as_ref().map(|a| a.k).unwrap_or(0);
        if let Some((j, _)) = by_agent.insert(k, (i, pr)) {
            return Err(MergeError::TwoShares {
                id: p.id.clone(),
                k,
                n,
                first: file(j),
                second: file(i),
            }
            .into());
        }
    }
    let missing: Vec<u32> = (1..=n).filter(|k| !by_agent.contains_key(k)).collect();
    if !missing.is_empty() {
        return Err(MergeError::MissingShares {
            id: p.id.clone(),
            n,
            missing,
        }
        .into());
    }
    Ok(by_agent
        .into_iter()
        .map(|(k, (i, pr))| (k, i, pr))
        .collect())
}

/// What each agent did for a point: when it began, how late it sent.
fn agent_shares(parts: &[(u32, usize, &PointResult)]) -> Vec<AgentShare> {
    parts
        .iter()
        .map(|(k, _, pr)| {
            let lag = pr.merged.latency_ms.get("dispatch_lag");
            AgentShare {
                k: *k,
                sent: pr.merged.requests.sent,
                succeeded: pr.merged.requests.succeeded,
                start_late_ms: pr
                    .runs
                    .iter()
                    .filter_map(|r| r.shard.as_ref().map(|s| s.start_late_ms))
                    .fold(0.0, f64::max),
                dispatch_lag_p50_ms: lag.map(|l| l.p50),
                dispatch_lag_p99_ms: lag.map(|l| l.p99),
            }
        })
        .collect()
}
