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

use crate::error::{Error, Result};
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
        return Err(Error::Usage("merge needs at least one results file".into()));
    };
    for (path, r) in &inputs[1..] {
        same_run(first_path, first, path, r)?;
    }
    let spec = spec_of(first_path, first)?;
    let plan = Plan::build(&spec).map_err(|e| {
        Error::Usage(format!(
            "{}: the spec these results carry no longer expands: {e}",
            first_path.display()
        ))
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
                return Err(Error::Format {
                    path: inputs[i].0.clone(),
                    message: format!("point {} is not a point of the spec it carries", p.id),
                });
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
                    return Err(Error::Usage(format!(
                        "point {id} is in both {} and {}: point shards must not overlap (each --partition K/N once)",
                        inputs[list[0].0].0.display(),
                        inputs[list[1].0].0.display()
                    )));
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
        let part: Partition = text.parse().map_err(|e| Error::Format {
            path: path.clone(),
            message: format!("partition: {e}"),
        })?;
        let (kind, k, n) = part.parts();
        if let Some((first_path, first)) = split {
            let (first_kind, _, first_n) = first.parts();
            if (first_kind, first_n) != (kind, n) {
                return Err(Error::Usage(format!(
                    "{} ran {first} and {} ran {part}: shards of different splits do not add up to the plan (run every shard of one split, --partition {first_kind}:K/{first_n} for K = 1..{first_n})",
                    first_path.display(),
                    path.display()
                )));
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
        return Err(Error::Usage(format!(
            "{} ran without --partition and {} ran {first}: merge point shards of one split, or whole runs (--only) that do not overlap",
            w.display(),
            first_path.display()
        )));
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
    let (ap, bp) = (a_path.display(), b_path.display());
    let differ = |what: String| {
        Err(Error::Usage(format!(
            "{ap} and {bp} are not shards of one run: {what}\n  hint: merge combines the results of one spec run with --partition or --agent on several machines"
        )))
    };
    if a.spec.sha256 != b.spec.sha256 {
        // The first 12 characters (a file may hold anything here).
        let short = |s: &str| s.chars().take(12).collect::<String>();
        return differ(format!(
            "they come from different specs (\"{}\" sha256 {} vs \"{}\" sha256 {})",
            a.spec.name,
            short(&a.spec.sha256),
            b.spec.name,
            short(&b.spec.sha256)
        ));
    }
    if a.spec.seed != b.spec.seed {
        return differ(format!(
            "their seeds differ ({} vs {})",
            a.spec.seed, b.spec.seed
        ));
    }
    if a.metrics_version != b.metrics_version {
        return differ(format!(
            "their metric definitions differ (metrics version {} vs {})",
            a.metrics_version, b.metrics_version
        ));
    }
    match (&a.agent, &b.agent) {
        (None, None) => {}
        (Some(x), Some(y)) if x.n == y.n => {
            if x.start_at != y.start_at {
                return differ(format!(
                    "their agents were given different start times ({} vs {})",
                    x.start_at.as_deref().unwrap_or("none"),
                    y.start_at.as_deref().unwrap_or("none")
                ));
            }
            if x.slot_s != y.slot_s {
                return differ("their agents were given different --slot values".into());
            }
        }
        (Some(x), Some(y)) => {
            return differ(format!(
                "one is agent {}/{} and the other agent {}/{}",
                x.k, x.n, y.k, y.n
            ));
        }
        (Some(x), None) | (None, Some(x)) => {
            return differ(format!(
                "one is agent {}/{} of a load-sharded run and the other is not load-sharded",
                x.k, x.n
            ));
        }
    }
    Ok(())
}

/// The spec the results carry, compiled again (validity rules, SLOs, cost).
fn spec_of(path: &Path, r: &Results) -> Result<Spec> {
    let spec_path = Path::new(&r.spec.path);
    let base = spec_path.parent().unwrap_or(Path::new("."));
    infer_bench_spec::compile(&r.spec.path, &r.spec.source, base).map_err(|e| {
        Error::Usage(format!(
            "{}: the spec these results carry does not compile here: {e}",
            path.display()
        ))
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
            return Err(Error::Usage(format!(
                "{} and {} ran on different environments: {key} is \"{mine}\" and \"{value}\"\n  hint: shards of one run must measure the same hardware and server; run them on identical machines",
                inputs[0].0.display(),
                path.display()
            )));
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
    let file = |i: usize| inputs[i].0.display().to_string();
    let mut by_agent: BTreeMap<u32, (usize, &PointResult)> = BTreeMap::new();
    for &(i, pr) in list {
        let k = inputs[i].1.agent.as_ref().map(|a| a.k).unwrap_or(0);
        if let Some((j, _)) = by_agent.insert(k, (i, pr)) {
            return Err(Error::Usage(format!(
                "point {} has two shares from agent {k}/{n}: {} and {}",
                p.id,
                file(j),
                file(i)
            )));
        }
    }
    let missing: Vec<String> = (1..=n)
        .filter(|k| !by_agent.contains_key(k))
        .map(|k| format!("{k}/{n}"))
        .collect();
    if !missing.is_empty() {
        return Err(Error::Usage(format!(
            "point {} is missing the shares of agent{} {}: every agent's results are needed for an exact merge",
            p.id,
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        )));
    }
    let parts: Vec<(u32, usize, &PointResult)> =
        by_agent.iter().map(|(k, (i, pr))| (*k, *i, *pr)).collect();
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
        return Err(Error::Format {
            path: PathBuf::from(file(*i)),
            message: format!(
                "agent {k}/{n} built different requests for point {} (workload sha256 differs from agent {}'s): were the agents' tokenizers or datasets different files?",
                p.id, parts[0].0
            ),
        });
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
            let shard = pr.runs[run].shard.as_ref().ok_or_else(|| Error::Format {
                path: PathBuf::from(file(*i)),
                message: format!(
                    "point {} run {} of agent {k}/{n} carries no shard data (written by an infer-bench older than merge?)",
                    p.id,
                    run + 1
                ),
            })?;
            shards.push(shard);
        }
        let rec = Recorder::from_shards(&shards, cfg.workload.stream, cfg.goodput.clone(), open)
            .map_err(|why| Error::Format {
                path: PathBuf::from(file(parts[0].1)),
                message: format!("point {} run {}: {why}", p.id, run + 1),
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
    for (k, _, share) in &parts {
        for w in &share.warnings {
            pr.warnings
                .push(w.clone().prefixed(&format!("agent {k}/{n}: ")));
        }
    }
    pr.agents = agent_shares(&parts);
    Ok(pr)
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
