//! Wires each command to the stages: spec -> plan -> run -> results ->
//! judge / export. Tests call `execute` in-process.

use crate::cli::{Command, PlanFormat, SchemaKind};
use crate::error::{EXIT_OK, Error, Outcome, Result, Usage};
use crate::export;
use crate::inputs::read_results;
use crate::plan::Plan;
use crate::spec;

/// Draws the terminal as the command line says (`--color`, `--wide`):
/// colour only for a terminal on stdout, unless told otherwise.
pub fn set_look(cli: &crate::cli::Cli) {
    use crate::export::term::{ColorChoice, Look, install, use_color};
    use std::io::IsTerminal;
    let choice = match cli.color {
        crate::cli::ColorWhen::Auto => ColorChoice::Auto,
        crate::cli::ColorWhen::Always => ColorChoice::Always,
        crate::cli::ColorWhen::Never => ColorChoice::Never,
    };
    let no_color = std::env::var("NO_COLOR").ok();
    install(Look {
        color: use_color(choice, std::io::stdout().is_terminal(), no_color.as_deref()),
        wide: cli.wide,
    });
}

/// Runs one command.
pub fn execute(command: Command) -> Result<Outcome> {
    match command {
        Command::Init {
            dir,
            url,
            model,
            ci,
            name,
        } => crate::init::execute(&crate::init::Options {
            dir,
            url,
            model,
            ci,
            name,
        }),
        Command::Validate { specs } => validate(&specs),
        Command::Plan {
            spec,
            format,
            count,
            select,
        } => {
            let spec = spec::load(&spec)?;
            let plan = selected(checked_plan(&spec)?, &select)?;
            let text = match format {
                _ if count => format!("{}\n", plan.points.len()),
                PlanFormat::Table => export::plan::table(&spec, &plan),
                PlanFormat::Json => export::plan::json(&spec, &plan),
            };
            write_stdout(&text)?;
            Ok(Outcome(EXIT_OK))
        }
        Command::Schema { kind } => {
            let text = match kind {
                SchemaKind::Spec => spec::schema::spec_schema_text(),
                SchemaKind::Results => crate::results::schema_text(),
                SchemaKind::Baseline => crate::judge::baseline::schema_text(),
            };
            write_stdout(&text)?;
            Ok(Outcome(EXIT_OK))
        }
        Command::SimServer { spec, select, port } => sim_server(&spec, &select, port),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(
                shell,
                &mut <crate::cli::Cli as clap::CommandFactory>::command(),
                "infer-bench",
                &mut out,
            );
            write_stdout(&String::from_utf8_lossy(&out))?;
            Ok(Outcome(EXIT_OK))
        }
        Command::Man => {
            let mut out = Vec::new();
            clap_mangen::Man::new(<crate::cli::Cli as clap::CommandFactory>::command())
                .render(&mut out)
                .map_err(Error::Manual)?;
            write_stdout(&String::from_utf8_lossy(&out))?;
            Ok(Outcome(EXIT_OK))
        }
        Command::Catalog => {
            write_stdout(&export::catalog())?;
            Ok(Outcome(EXIT_OK))
        }
        Command::Run(args) => run(args),
        Command::SelfBench { quick, only } => {
            let report = crate::selfbench::run(quick, &only)?;
            write_stdout(&report.text)?;
            Ok(Outcome(if report.failed {
                crate::error::EXIT_FAILED
            } else {
                EXIT_OK
            }))
        }
        Command::SelfBenchFloor {
            url,
            streams,
            warmup,
            requests,
            output_tokens,
        } => crate::selfbench::serve_floor(&crate::selfbench::FloorLoad {
            base_url: url,
            streams,
            warmup,
            requests,
            output_tokens,
        })
        .map(|_| Outcome(EXIT_OK)),
        Command::ScriptedServer { ttft_ms, itl_ms } => {
            crate::selfbench::serve_scripted(ttft_ms, itl_ms).map(|_| Outcome(EXIT_OK))
        }
        Command::Diff(args) => crate::gate::diff(&args),
        Command::History { command } => crate::history::execute(command),
        Command::Bless {
            results,
            points,
            baseline,
        } => crate::gate::bless(&results, &points, baseline.as_deref()),
        Command::Report {
            results,
            format,
            output,
        } => report(&results, format, output.as_deref()),
        Command::Merge {
            results,
            out,
            format,
            allow_partial,
        } => merge(&results, &out, format, allow_partial),
        Command::TelemetryProbe(args) => telemetry_probe(args),
    }
}

/// `telemetry-probe`: samples the GPUs as a point would and prints what was seen.
fn telemetry_probe(args: crate::cli::ProbeArgs) -> Result<Outcome> {
    let ids = (!args.gpu_ids.is_empty()).then_some(args.gpu_ids.as_slice());
    let source = crate::telemetry::gpu::NvmlSource::new();
    let t = crate::telemetry::probe::probe(&source, ids, args.seconds, args.interval.as_std())
        .map_err(Error::NoGpuToProbe)?;
    write_stdout(&match args.format {
        crate::cli::OutputFormat::Table => export::resources::probe(&t),
        crate::cli::OutputFormat::Json => {
            serde_json::to_string_pretty(&t).expect("telemetry serializes") + "\n"
        }
    })?;
    Ok(Outcome(EXIT_OK))
}

/// `sim-server`: the simulator of the first selected simulated point,
/// served until SIGINT or SIGTERM.
fn sim_server(path: &std::path::Path, select: &crate::cli::Select, port: u16) -> Result<Outcome> {
    let spec = spec::load(path)?;
    let plan = Plan::build(&spec)?.select(select.partition, &select.only);
    let point = plan
        .points
        .iter()
        .find(|p| p.config.target.kind == crate::spec::raw::TargetKind::Sim)
        .ok_or_else(|| Usage::NoSimulatedPoint {
            spec: path.to_path_buf(),
        })?;
    crate::run::raise_fd_limit();
    let server =
        crate::sim::server::SimServer::start_on(&point.config, port).map_err(Error::Simulator)?;
    server.begin_run(0);
    write_stdout(&format!(
        "{}\n{}\n",
        server.base_url(),
        server.metrics_url()
    ))?;
    say!(
        "sim-server: {} ({}) at {}; Ctrl-C stops it",
        point.slug,
        server.info().model.unwrap_or_default().terminal(),
        server.base_url()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    rt.block_on(async {
        match StopSignals::new() {
            Ok(mut s) => {
                s.next().await;
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    });
    server.stop();
    Ok(Outcome(EXIT_OK))
}

/// `merge`: the shards' results combined, written to `out`, summarized.
fn merge(
    paths: &[std::path::PathBuf],
    out: &std::path::Path,
    format: crate::cli::OutputFormat,
    allow_partial: bool,
) -> Result<Outcome> {
    let mut inputs = Vec::with_capacity(paths.len());
    for path in paths {
        let (results, file) = read_results(path)?;
        inputs.push((file, results));
    }
    let merged = crate::merge::merge(inputs)?;
    let path = crate::run::results_path(out);
    merged.write(&path)?;
    let text = match format {
        crate::cli::OutputFormat::Table => export::summary::table(&merged),
        crate::cli::OutputFormat::Json => merged.to_json(),
    };
    write_stdout(&text)?;
    say!("results: {}", path.display());
    if !merged.complete && !allow_partial {
        let shown: Vec<&str> = merged.pending.iter().take(8).map(String::as_str).collect();
        let more = merged.pending.len().saturating_sub(shown.len());
        say!(
            "error: the merged results are incomplete: {} point(s) pending{}{}{}; merge every shard of the split, or pass --allow-partial to accept what finished",
            merged.pending.len(),
            if shown.is_empty() { "" } else { " (" },
            shown.join(", "),
            match (shown.is_empty(), more) {
                (true, _) => String::new(),
                (false, 0) => ")".into(),
                (false, n) => format!(" and {n} more)"),
            }
        );
        return Ok(Outcome(crate::error::EXIT_INFRA));
    }
    Ok(Outcome(run_exit_code(&merged, false)))
}

fn write_stdout(text: &str) -> Result<()> {
    export::stdout(text).map_err(|e| Error::io("<stdout>", e))
}

/// `report`: reads every results file (or run directory), labels them,
/// renders one report and writes it to `output` or stdout.
fn report(
    paths: &[std::path::PathBuf],
    format: crate::cli::ReportFormat,
    output: Option<&std::path::Path>,
) -> Result<Outcome> {
    use crate::cli::ReportFormat;
    let mut inputs = Vec::with_capacity(paths.len());
    for path in paths {
        let (results, file) = read_results(path)?;
        inputs.push((file, results));
    }
    let sources = crate::analysis::label_sources(inputs);
    let text = match format {
        ReportFormat::Html => export::report::html::render(&sources),
        ReportFormat::Md => export::report::markdown::render(&sources),
        ReportFormat::Csv => export::report::csv::render(&sources),
        ReportFormat::Json => export::report::json(&sources),
    };
    match output {
        Some(out) => {
            infer_bench_results::files::write_atomic(out, text.as_bytes())?;
            say!("report: {}", out.display());
        }
        None => write_stdout(&text)?,
    }
    Ok(Outcome(EXIT_OK))
}

/// The plan of `spec`, with the checks that need more than the spec
/// crate: a simulated model must fit its GPUs (`sim::fit`). What
/// `validate` and `run` both use, so that they refuse the same specs.
fn checked_plan(spec: &spec::Spec) -> std::result::Result<Plan, spec::SpecErrors> {
    let plan = Plan::build(spec)?;
    crate::sim::fit::check(spec, &plan)?;
    Ok(plan)
}

/// Validates every spec, reporting all of them; fails if any failed.
fn validate(paths: &[std::path::PathBuf]) -> Result<Outcome> {
    let mut all = Vec::new();
    let mut ok = Vec::new();
    for path in paths {
        match spec::load(path).and_then(|s| checked_plan(&s).map(|p| (s, p))) {
            Ok((s, p)) => {
                ok.push(format!(
                    "{}: ok ({}, {} point{})",
                    path.display(),
                    s.name,
                    p.points.len(),
                    if p.points.len() == 1 { "" } else { "s" }
                ));
                for w in spec::judgeable::warnings(&s, &p) {
                    ok.push(format!("{}: warning: {w}", path.display()));
                }
            }
            Err(e) => all.extend(e.0),
        }
    }
    for line in &ok {
        say!("{line}");
    }
    if all.is_empty() {
        Ok(Outcome(EXIT_OK))
    } else {
        Err(Error::Spec(spec::SpecErrors(all)))
    }
}

/// The points `--only` and `--partition` select. An `--only` that names no
/// point of the plan is a typo (exit 2); a share of a split that holds no
/// point is not an error (more shards than points: a job array sized
/// generously): `run` runs nothing and writes an empty results file that
/// records its partition, so `merge` still sees the split whole.
fn selected(plan: Plan, select: &crate::cli::Select) -> Result<Plan> {
    let only = &select.only;
    let named =
        |p: &crate::plan::Point| only.iter().any(|o| crate::plan::selects(o, &p.id, &p.slug));
    if !only.is_empty() && !plan.points.iter().any(named) {
        return Err(Usage::NoPointSelected { only: only.clone() }.into());
    }
    Ok(plan.select(select.partition, only))
}

/// `run`: every selected point, results on disk, a summary on stdout.
fn run(args: crate::cli::RunArgs) -> Result<Outcome> {
    use crate::progress::{Progress, Terminal};
    use crate::run::{RunOptions, run_plan};
    use std::io::IsTerminal;
    let spec = spec::load(&args.spec)?;
    let mut plan = selected(checked_plan(&spec)?, &args.select)?;
    let clock = match (args.virtual_time, args.real_time) {
        (true, _) => Some(("--virtual", crate::spec::raw::SimClock::Virtual)),
        (_, true) => Some(("--real-time", crate::spec::raw::SimClock::Real)),
        _ => None,
    };
    if let Some((flag, clock)) = clock {
        if clock == crate::spec::raw::SimClock::Virtual {
            // What validate refuses at `clock = "virtual"`, the flag cannot
            // ask for: the virtual clock does not simulate tensors.
            let not_served = plan.points.iter().find(|p| {
                p.config.target.sim.is_some() && !p.config.workload.api.in_virtual_time()
            });
            if let Some(p) = not_served {
                return Err(Usage::VirtualTensors {
                    point: p.id.clone(),
                    workload: p.config.workload.name.clone(),
                    api: p.config.workload.api.name(),
                }
                .into());
            }
        }
        if plan.set_sim_clock(clock) == 0 && !plan.points.is_empty() {
            return Err(Usage::ClockWithoutSimulator {
                flag,
                spec: args.spec.clone(),
            }
            .into());
        }
    }
    if let Some(part) = args.select.partition.filter(|_| plan.points.is_empty()) {
        if !args.quiet {
            say!(
                "--partition {part}: this share holds no point of the plan, so nothing runs; its results file records the share, for merge"
            );
        }
    }
    crate::consent::check(&spec, &plan, args.allow_launch)?;
    let agent = args.agent.as_deref().map(parse_agent).transpose()?;
    let start_at = match &args.start_at {
        Some(s) => Some(crate::run::parse_start(s)?),
        None => None,
    };
    if agent.is_some() {
        check_agent_run(&args, &plan)?;
        if let Some(start) = start_at {
            crate::run::check_start(
                start,
                args.max_clock_skew.as_std(),
                std::time::Duration::from_secs(24 * 3600),
            )?;
        }
    }
    // Every stream is a socket: allow as many as the system lets us.
    crate::run::raise_fd_limit();
    if args.baseline.is_some() || args.baseline_ref.is_some() {
        for w in spec::judgeable::warnings(&spec, &plan) {
            say!("{}: warning: {w}", args.spec.display());
        }
    }
    let gate = match (&args.baseline, &args.baseline_ref) {
        (Some(_), _) | (None, Some(_)) => Some(crate::gate::RunGate::prepare(
            &spec,
            &args.spec,
            args.baseline.as_ref().and_then(|b| b.as_deref()),
            args.baseline_ref.as_deref(),
            args.allow_unjudged,
        )?),
        (None, None) if args.markdown.is_some() || args.junit.is_some() => {
            return Err(Usage::VerdictFilesWithoutBaseline.into());
        }
        (None, None) => None,
    };
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&spec.name));
    let with_sim = spec
        .targets
        .values()
        .any(|t| t.kind == crate::spec::raw::TargetKind::Sim);
    let rt = crate::run::engine_runtime(with_sim).map_err(Error::Runtime)?;
    let interrupt = std::sync::Arc::new(crate::run::Interrupt::default());
    watch_stop_signals(interrupt.clone()).map_err(Error::Signals)?;
    let progress = if args.quiet {
        Progress::Quiet
    } else if std::io::stderr().is_terminal() {
        Progress::Live
    } else {
        Progress::Lines
    };
    let opts = RunOptions {
        out_dir: out_dir.clone(),
        requests_jsonl: args.requests.is_some(),
        request_events: args.requests == Some(crate::cli::RequestDetail::Events),
        partition: args.select.partition.map(|p| p.to_string()),
        agent,
        start_at,
        slot: args.slot.map(|d| d.as_std()),
        slow_client: args.slow_client.map(|d| d.as_std()),
        observer: std::sync::Arc::new(Terminal::new(progress, args.verbose)),
    };
    let results = run_plan(&spec, &plan, &opts, &rt, interrupt.clone())?;
    if let Some(gate) = gate.filter(|_| !results.interrupted) {
        let mut report = gate.judge(&spec, &plan, &results, &opts, &rt, interrupt)?;
        report.finish(args.strict);
        crate::gate::write_files(
            &report,
            &crate::gate::Outputs {
                markdown: args.markdown.as_deref(),
                junit: args.junit.as_deref(),
            },
        )?;
        let text = match args.format {
            crate::cli::OutputFormat::Table => format!(
                "{}\n{}",
                export::summary::table(&results),
                export::verdict::table::table(&report)
            ),
            crate::cli::OutputFormat::Json => export::verdict::json(&report),
        };
        write_stdout(&text)?;
        if !args.quiet {
            say!("results: {}", crate::run::results_path(&out_dir).display());
        }
        rt.shutdown_timeout(std::time::Duration::from_secs(1));
        if args.strict && results.points.iter().any(|p| !p.preflight.is_empty()) {
            say!("--strict: a pre-flight check found something (see each point's findings)");
            return Ok(Outcome(crate::error::EXIT_INFRA));
        }
        return Ok(Outcome(report.exit_code));
    }
    let text = match args.format {
        crate::cli::OutputFormat::Table => export::summary::table(&results),
        crate::cli::OutputFormat::Json => results.to_json(),
    };
    write_stdout(&text)?;
    if !args.quiet {
        say!("results: {}", crate::run::results_path(&out_dir).display());
    }
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    if results.interrupted {
        return Err(Error::Interrupted {
            pending: results.pending.len(),
        });
    }
    Ok(Outcome(run_exit_code(&results, args.strict)))
}

/// The exit code of a finished run: 3 if a point could not be measured
/// (infrastructure), not one of a point's requests succeeded (whatever the
/// SLOs say), or, with --strict, a pre-flight check found something;
/// 1 if an SLO failed; 4 with --strict if a point was INVALID; else 0.
/// The probes of a capacity search are left out (failing its target is
/// what a probe above the capacity is for); a search whose first probe
/// already failed (below its range) counts as a failed SLO.
pub fn run_exit_code(r: &crate::results::Results, strict: bool) -> u8 {
    use crate::error::*;
    use infer_bench_results::search::SearchOutcome;
    let probes: std::collections::BTreeSet<&str> = r
        .searches
        .iter()
        .flat_map(|s| s.probes.iter().map(|p| p.id.as_str()))
        .collect();
    let points = || r.points.iter().filter(|p| !probes.contains(p.id.as_str()));
    if points().any(|p| p.measured_nothing())
        || (strict && r.points.iter().any(|p| !p.preflight.is_empty()))
    {
        EXIT_INFRA
    } else if points().any(|p| p.slo_pass == Some(false))
        || r.searches
            .iter()
            .any(|s| s.outcome == SearchOutcome::BelowRange)
    {
        EXIT_FAILED
    } else if strict && points().any(|p| !p.valid) {
        EXIT_UNJUDGED
    } else {
        EXIT_OK
    }
}

/// What load sharding cannot do: every agent must drive the same server,
/// and only the merged results can be judged.
fn check_agent_run(args: &crate::cli::RunArgs, plan: &Plan) -> Result<()> {
    use crate::spec::raw::TargetKind;
    if args.baseline.is_some() {
        return Err(Usage::AgentWithBaseline.into());
    }
    for p in &plan.points {
        let t = &p.config.target;
        if t.kind == TargetKind::Sim {
            return Err(Usage::AgentOnSimulator {
                target: t.name.clone(),
            }
            .into());
        }
        if t.launch.is_some() {
            return Err(Usage::AgentLaunches {
                target: t.name.clone(),
            }
            .into());
        }
    }
    Ok(())
}

fn parse_agent(s: &str) -> Result<(u32, u32)> {
    let bad = || Usage::BadAgent {
        found: s.to_string(),
    };
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let k: u32 = k.trim().parse().map_err(|_| bad())?;
    let n: u32 = n.trim().parse().map_err(|_| bad())?;
    if k == 0 || n == 0 || k > n {
        return Err(bad().into());
    }
    Ok((k, n))
}

/// results/<spec name>-<UTC time>, e.g. results/quickstart-20261202T153000Z.
pub fn default_out_dir(name: &str) -> std::path::PathBuf {
    let stamp: String = infer_bench_results::now_rfc3339()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == 'T')
        .collect();
    std::path::PathBuf::from("results").join(format!("{name}-{stamp}"))
}

/// Watches for the signals that mean "stop" on a thread of its own, with a
/// runtime of its own, so that they are honoured however busy the engine's
/// workers are: the first triggers `interrupt` (the run finishes up and
/// keeps its finished points), the second exits at once
/// ([`crate::error::EXIT_INTERRUPTED`]). Returns once the signals are
/// registered, so none is missed between start-up and the wait.
fn watch_stop_signals(interrupt: std::sync::Arc<crate::run::Interrupt>) -> std::io::Result<()> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<std::io::Result<()>>();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            rt.block_on(async move {
                let mut signals = match StopSignals::new() {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let name = signals.next().await;
                say!(
                    "\ninterrupted ({name}): finishing up; finished points are kept (a second Ctrl-C or SIGTERM quits at once)"
                );
                interrupt.trigger();
                signals.next().await;
                std::process::exit(crate::error::EXIT_INTERRUPTED.into());
            });
        })?;
    ready_rx.recv().unwrap_or_else(|_| {
        Err(std::io::Error::other(
            "the signal thread ended before it registered",
        ))
    })
}

/// The signals that mean "stop": SIGINT (Ctrl-C), SIGTERM (what CI runners
/// and Kubernetes send) and SIGHUP (a closed terminal). Registered when made
/// (inside a runtime), so none is missed between start-up and the wait.
struct StopSignals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn new() -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(StopSignals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// Waits for the next one; its name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}
