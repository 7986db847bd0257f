//! The regression gate's commands: `bless` (results -> baseline file),
//! `diff` (results against a baseline) and the judging half of
//! `run --baseline` (judge what was just run, re-running REGRESSED points
//! when the spec asks for confirmation). `app` dispatches here; the
//! decisions themselves are `judge::compare`, the outputs `export::verdict`.
//!
//! The rules judge by are the baseline's (`judge::rules`): `bless` pins the
//! spec's `[regression]` table into the baseline, and a comparison uses
//! that, listing what the new spec changes. With `--baseline-ref REF` the
//! baseline (and the spec that names it) are read from git at REF, so a
//! pull request can change neither what it is judged against nor how.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cli::DiffFormat;
use crate::error::{EXIT_OK, Error, Outcome, Result, Usage};
use crate::export;
use crate::judge::baseline::{Baseline, Bless};
use crate::judge::compare::{Decision, Report, Settings, compare};
use crate::judge::rules::{self, RulesSource};
use crate::plan::Plan;
use crate::results::Results;
use crate::run::Interrupt;
use crate::run::{RunOptions, run_plan};
use crate::spec::{self, Regression, Spec};
use infer_bench_results::now_rfc3339;

/// `bless RESULTS [--points ...] [--baseline FILE]`.
pub fn bless(results: &Path, points: &[String], baseline: Option<&Path>) -> Result<Outcome> {
    let (results, file) = crate::inputs::read_results(results)?;
    let regression = regression_of(&results)?;
    let path = baseline_path(baseline, &regression);
    if baseline.is_none_or(|b| b.as_os_str().is_empty()) {
        crate::paths::inside_cwd(&path).map_err(Error::BaselineOutside)?;
    }
    // Refused before it is read: the baseline is rewritten in place.
    infer_bench_results::files::check(&path)?;
    let mut base = if path.exists() {
        Baseline::read(&path)?
    } else {
        Baseline::new(&results.spec.name)
    };
    let blessed = base
        .bless(&results, points, &now_rfc3339())
        .map_err(|source| Error::Bless {
            file: file.clone(),
            source,
        })?;
    rules::pin(&mut base, &regression, &results.spec.sha256);
    base.write(&path)?;
    say!(
        "blessed {} point(s) into {} ({} kept{})",
        blessed.written.len(),
        path.display(),
        blessed.kept,
        if blessed.superseded.is_empty() {
            String::new()
        } else {
            format!(
                "; replaced the old configuration of {}",
                blessed.superseded.join(", ")
            )
        }
    );
    Ok(Outcome(EXIT_OK))
}

/// Where the verdicts go besides stdout.
pub struct Outputs<'a> {
    pub markdown: Option<&'a Path>,
    pub junit: Option<&'a Path>,
}

/// `diff RESULTS [--baseline FILE] [--baseline-ref REF]`.
pub fn diff(args: &crate::cli::DiffArgs) -> Result<Outcome> {
    let (results, file) = crate::inputs::read_results(&args.results)?;
    let regression = regression_of(&results)?;
    let (path, baseline) = load_baseline(
        Path::new(&results.spec.path),
        &regression,
        args.baseline.as_deref(),
        args.baseline_ref.as_deref(),
    )?;
    warn_if_other_spec(&baseline, &path, &results.spec.name);
    let mut settings = settings_for(&baseline, &regression, args.allow_unjudged)?;
    if let Some(records) = history_of(
        &settings,
        &results.spec.name,
        Path::new(&results.spec.path),
        &regression,
        args.baseline_ref.as_deref(),
    )? {
        settings.references = Some(crate::history::references(&records, &results));
    }
    let mut report = compare(&baseline, &results, &settings);
    report.baseline.path = path;
    report.results.path = file.display().to_string();
    for p in report.points.iter_mut() {
        if p.decision == Some(Decision::Regressed)
            && (settings.confirm > 0 || p.within_run)
            && p.regressed_in_speed()
        {
            p.notes.push(
                "unconfirmed: `diff` cannot re-run a point (`run --baseline` re-runs a regression to confirm it)"
                    .into(),
            );
        }
    }
    report.finish(args.strict);
    write_files(
        &report,
        &Outputs {
            markdown: args.markdown.as_deref(),
            junit: args.junit.as_deref(),
        },
    )?;
    let text = match args.format {
        DiffFormat::Table => export::verdict::table::table(&report),
        DiffFormat::Markdown => {
            export::verdict::markdown::markdown(&report, export::verdict::markdown::MAX_BYTES)
        }
        DiffFormat::Json => export::verdict::json(&report),
        DiffFormat::Junit => export::verdict::junit::junit(&report),
    };
    export::stdout(&text).map_err(|e| Error::io("<stdout>", e))?;
    Ok(Outcome(report.exit_code))
}

/// The judging half of `run --baseline`, loaded before the run so that a
/// missing or unreadable baseline stops the command before any load is
/// sent.
pub struct RunGate {
    path: String,
    baseline: Baseline,
    settings: Settings,
    /// `against = "history"`: the records of main judged by.
    history: Option<Vec<infer_bench_history::record::Record>>,
}

impl RunGate {
    /// Resolves and reads the baseline (`arg`, or the spec's
    /// `regression.baseline`; from git at `git_ref` when given) and the
    /// rules to judge by.
    pub fn prepare(
        spec: &Spec,
        spec_path: &Path,
        arg: Option<&Path>,
        git_ref: Option<&str>,
        allow_unjudged: bool,
    ) -> Result<RunGate> {
        let (path, baseline) = load_baseline(spec_path, &spec.regression, arg, git_ref)?;
        warn_if_other_spec(&baseline, &path, &spec.name);
        let settings = settings_for(&baseline, &spec.regression, allow_unjudged)?;
        let history = history_of(&settings, &spec.name, spec_path, &spec.regression, git_ref)?;
        Ok(RunGate {
            path,
            baseline,
            settings,
            history,
        })
    }

    /// Judges `results` (the run of `plan`), re-running REGRESSED points up
    /// to `confirm` times into `<out>/confirm-<k>` (at least once for a
    /// regression seen only within single runs); a point stays REGRESSED
    /// only if every re-run regresses too. The exit code is for a run
    /// without `--strict`: call [`Report::finish`] to change that.
    pub fn judge(
        &self,
        spec: &Spec,
        plan: &Plan,
        results: &Results,
        opts: &RunOptions,
        rt: &tokio::runtime::Runtime,
        interrupt: Arc<Interrupt>,
    ) -> Result<Report> {
        let settings = self.settings_for(results);
        let mut report = compare(&self.baseline, results, &settings);
        report.baseline.path = self.path.clone();
        report.results.path = crate::run::results_path(&opts.out_dir)
            .display()
            .to_string();
        report.finish(false);
        // A regression seen only within single runs is confirmed once even
        // when the spec asks for no confirmation (see docs/regression.md:
        // it cuts false alarms from about 8% to 0.5% at 2% run noise).
        let confirm = self.settings.confirm;
        for round in 1..=confirm.max(1) {
            let ids: Vec<String> = report
                .points
                .iter()
                .filter(|p| p.decision == Some(Decision::Regressed) && !p.skipped)
                .filter(|p| round <= confirm || p.within_run)
                // Quality gates are not re-run: the same server answers
                // the same greedy prompts the same way, and a re-run of a
                // subset would lack the reference's answers.
                .filter(|p| p.regressed_in_speed())
                .map(|p| p.id.clone())
                .collect();
            if ids.is_empty() || interrupt.is_set() {
                break;
            }
            say!(
                "confirming {} regressed point(s): re-run {round} of {}",
                ids.len(),
                confirm.max(1)
            );
            let subset = plan.clone().select(None, &ids);
            let again = RunOptions {
                agent: opts.agent,
                observer: opts.observer.clone(),
                ..RunOptions::new(opts.out_dir.join(format!("confirm-{round}")))
            };
            let rerun = run_plan(spec, &subset, &again, rt, interrupt.clone())?;
            if rerun.interrupted {
                return Err(Error::ConfirmationInterrupted);
            }
            let second = compare(&self.baseline, &rerun, &self.settings_for(&rerun));
            report.confirm_with(round, &second);
            report.finish(false);
        }
        Ok(report)
    }
}

impl RunGate {
    /// The settings with the history's references for `results`.
    fn settings_for(&self, results: &Results) -> Settings {
        let mut s = self.settings.clone();
        s.references = self
            .history
            .as_ref()
            .map(|records| crate::history::references(records, results));
        s
    }
}

/// The history `against = "history"` judges by (`None` otherwise): the
/// folder the spec names, read from git at `git_ref` when given, where the
/// folder is the one the spec names at that revision.
fn history_of(
    settings: &Settings,
    spec_name: &str,
    spec_path: &Path,
    spec: &Regression,
    git_ref: Option<&str>,
) -> Result<Option<Vec<infer_bench_history::record::Record>>> {
    if settings.against != crate::spec::raw::Against::History {
        return Ok(None);
    }
    let dir = match git_ref {
        None => PathBuf::from(&spec.history),
        Some(rev) => match crate::git::show(rev, spec_path) {
            Ok(text) => spec::compile_regression(&format!("{rev}:{}", spec_path.display()), &text)
                .map(|r| PathBuf::from(r.history))
                .map_err(Error::Spec)?,
            Err(crate::git::GitError::Missing(_)) => PathBuf::from(&spec.history),
            Err(e) => return Err(e.into()),
        },
    };
    crate::history::records_for_gate(spec_name, &dir, git_ref).map(Some)
}

/// Writes the Markdown and JUnit files asked for, never through a
/// symbolic link (`infer_bench_results::files`). The Markdown file is
/// written in place (it may be `$GITHUB_STEP_SUMMARY`, which the runner
/// owns); the JUnit file atomically.
pub fn write_files(report: &Report, out: &Outputs) -> Result<()> {
    if let Some(path) = out.markdown {
        let text =
            export::verdict::markdown::markdown(report, export::verdict::markdown::MAX_BYTES);
        infer_bench_results::files::write(path, text.as_bytes())?;
    }
    if let Some(path) = out.junit {
        infer_bench_results::files::write_atomic(
            path,
            export::verdict::junit::junit(report).as_bytes(),
        )?;
    }
    Ok(())
}

/// The `[regression]` settings of the spec a results file was run from
/// (its text is embedded in the results).
fn regression_of(results: &Results) -> Result<Regression> {
    spec::compile_regression(&results.spec.path, &results.spec.source).map_err(Error::Spec)
}

/// `arg` when given and not empty, else the spec's `regression.baseline`
/// (relative to the current directory).
fn baseline_path(arg: Option<&Path>, regression: &Regression) -> PathBuf {
    match arg {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from(&regression.baseline),
    }
}

/// The rules to judge by: the baseline's, unless it pins none (a version-1
/// file); `allow_unjudged` from the command line adds to them.
fn settings_for(baseline: &Baseline, spec: &Regression, allow_unjudged: bool) -> Result<Settings> {
    let resolved = rules::resolve(baseline, spec)?;
    match resolved.source {
        RulesSource::Spec => say!(
            "note: the baseline pins no rules (it predates them): judging by the spec's [regression] table; bless it again to pin them"
        ),
        RulesSource::Baseline if !resolved.changes.is_empty() => say!(
            "warning: the spec's [regression] rules differ from the baseline's; judging by the baseline's, and failing until the new rules are blessed:\n{}",
            resolved
                .changes
                .iter()
                .map(|c| format!("  {c}"))
                .collect::<Vec<_>>()
                .join("\n")
        ),
        RulesSource::Baseline => {}
    }
    let mut settings = Settings::from_rules(&resolved);
    settings.allow_unjudged |= allow_unjudged;
    Ok(settings)
}

/// Says so on stderr when the baseline was recorded for another spec (a
/// renamed spec is fine; the wrong file usually is not).
fn warn_if_other_spec(baseline: &Baseline, path: &str, spec: &str) {
    if !baseline.points.is_empty() && baseline.spec != spec {
        say!(
            "warning: {path} was recorded for spec \"{}\", these results come from \"{spec}\"",
            baseline.spec
        );
    }
}

/// Reads the baseline, from the working tree or from git at `git_ref`;
/// returns it with the name to show for it. At a revision, the baseline's
/// path is the one the spec names *at that revision* (unless `arg` names
/// one), so a pull request that points its spec elsewhere is still judged
/// against the baseline of the revision.
fn load_baseline(
    spec_path: &Path,
    spec: &Regression,
    arg: Option<&Path>,
    git_ref: Option<&str>,
) -> Result<(String, Baseline)> {
    let Some(rev) = git_ref else {
        let path = baseline_path(arg, spec);
        if !path.exists() {
            return Err(Usage::NoBaseline { path }.into());
        }
        return Ok((path.display().to_string(), Baseline::read(&path)?));
    };
    let path = match arg.filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.to_path_buf(),
        None => match crate::git::show(rev, spec_path) {
            Ok(text) => {
                let named =
                    spec::compile_regression(&format!("{rev}:{}", spec_path.display()), &text)
                        .map_err(Error::Spec)?;
                // The spec's path names the baseline relative to the
                // working directory, as `baseline` in the spec does.
                PathBuf::from(named.baseline)
            }
            Err(crate::git::GitError::Missing(_)) => {
                say!(
                    "note: {} is not in {rev}: the baseline is the one this spec names",
                    spec_path.display()
                );
                PathBuf::from(&spec.baseline)
            }
            Err(e) => return Err(e.into()),
        },
    };
    let shown = format!("{rev}:{}", path.display());
    let text = crate::git::show(rev, &path).map_err(|e| match e {
        crate::git::GitError::Missing(
            crate::error::GitMissing::NotARevision { .. }
            | crate::error::GitMissing::NotInRevision { .. },
        ) => Error::Usage(Usage::NoBaselineAtRevision {
            rev: rev.to_string(),
            path: path.clone(),
        }),
        other => Error::Git(other),
    })?;
    let baseline =
        Baseline::parse(&text).map_err(|problem| infer_bench_results::Error::Format {
            path: PathBuf::from(&shown),
            problem,
        })?;
    Ok((shown, baseline))
}
