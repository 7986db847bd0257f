//! The comparison of results with a baseline: which points match, whether
//! they may be compared, and the decision per point, metric and statistic.
//! Pure: plain data in (a [`Baseline`], [`Results`], the spec's regression
//! [`Settings`]), a [`Report`] out, which the exporters render and whose
//! [`Report::exit_code`] the command returns.
//!
//! Matching is by slug. Same hash: compared. Same slug, another hash: spec
//! drift (a text diff of the configurations, no comparison). A slug on one
//! side only: a new or dropped point, listed, never a failure.
//!
//! For a compared point, in this order:
//! 1. the new point failed or is INVALID: every gate is INSUFFICIENT;
//! 2. an identity key of the fingerprints differs (or the metric
//!    definitions' version): INCOMPARABLE, and `on_env_mismatch` decides
//!    whether that fails the check (`fail`), is advisory (`advisory`) or is
//!    left out of the verdict (`skip`);
//! 3. replicates: each run's value of the gate's statistic, or, when either
//!    side has a single run, each window's ("within-run evidence": windows
//!    share their run's fate, so the interval is optimistic);
//! 4. fewer than `min_runs` replicates on a side: INSUFFICIENT;
//! 5. otherwise [`stats::judge`] (relative change, for latencies, rates and
//!    counts) or [`stats::judge_absolute`] (difference, for fractions such
//!    as the error rate, which are often zero) at the spec's confidence;
//!    the confidence the samples achieved is reported with the verdict
//!    (three runs a side reach 90%, not 95%).
//!
//! A point's decision is the worst of its gates'. SLOs are not compared:
//! they are absolute gates on the new results, carried along as they were
//! judged during the run.

use serde::Serialize;

use super::baseline::{Baseline, BaselinePoint};
use super::fingerprint::{Mismatch, mismatches, point_environment, with_implied_keys};
use super::rules::{Rules, RulesSource, gate_label};
use super::stats::{self, Judgement, Verdict};
use infer_bench_results::exit::{EXIT_FAILED, EXIT_INFRA, EXIT_OK, EXIT_UNJUDGED};
use infer_bench_results::metric::{Kind, Metric};
use infer_bench_results::{
    Environment, PointStatus, Reason, ReasonKind, SloResult, Stats, WindowStats,
};
use infer_bench_spec::raw::{Against, OnEnvMismatch};
use infer_bench_spec::results::{PointResult, Results};
use infer_bench_spec::{Gate, Regression, Stat};

/// The `format` of a JSON verdict report.
pub const FORMAT: &str = "infer-bench-verdicts";
/// Version of the JSON verdict report.
pub const VERSION: u32 = 1;

/// How to judge: the spec's `[regression]` table, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub gates: Vec<Gate>,
    /// Requested confidence of the intervals, as a fraction (0.95).
    pub confidence: f64,
    /// Fewest replicates per side for a verdict.
    pub min_runs: u32,
    pub on_env_mismatch: OnEnvMismatch,
    /// Confirmation re-runs of a REGRESSED point (`run --baseline` only).
    pub confirm: u32,
    /// Points that could not be judged pass instead of failing (exit 4).
    pub allow_unjudged: bool,
    /// Where these rules came from.
    pub source: RulesSource,
    /// Settings the new results' spec changes against the pinned rules.
    pub changes: Vec<Mismatch>,
    /// What the rules say to judge against.
    pub against: Against,
    /// `against = "history"`: main's recent levels, by slug and gate
    /// label, filled in by the caller that read the history; `None`
    /// judges against the baseline's runs.
    pub references: Option<References>,
}

/// Main's recent level of one point's gate, from the history: each commit
/// of the window (since the series' newest change point) is a replicate.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// One value per commit, oldest first.
    pub values: Vec<f64>,
    /// The window's first commit.
    pub since: String,
    /// Main's newest shift in this series, when it was for the worse.
    pub drift: Option<Drift>,
}

/// A shift for the worse on main, before the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drift {
    /// (after - before) / |before|.
    pub relative: f64,
    /// Commits on main since it (the window's length).
    pub commits: usize,
    /// The first commit at the new level.
    pub since: String,
}

/// References by slug, then gate label.
pub type References =
    std::collections::BTreeMap<String, std::collections::BTreeMap<String, Reference>>;

impl Settings {
    /// The rules of a spec, taken as they are (no baseline pins any).
    pub fn from_regression(r: &Regression) -> Settings {
        Settings {
            gates: r.gates.clone(),
            confidence: r.confidence.fraction(),
            min_runs: r.min_runs.max(1),
            on_env_mismatch: r.on_env_mismatch,
            confirm: r.confirm,
            allow_unjudged: r.allow_unjudged,
            source: RulesSource::Spec,
            changes: Vec::new(),
            against: r.against,
            references: None,
        }
    }

    /// The rules resolved against a baseline (see [`crate::rules`]).
    pub fn from_rules(r: &Rules) -> Settings {
        Settings {
            source: r.source,
            changes: r.changes.clone(),
            ..Settings::from_regression(&r.regression)
        }
    }
}

/// The decision on one gate (or, the worst of its gates, on a point).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Decision {
    /// The whole interval is worse than the noise band.
    Regressed,
    /// The whole interval is better than the noise band.
    Improved,
    /// The whole interval lies inside the noise band.
    Unchanged,
    /// The interval straddles an edge of the band: add runs.
    Inconclusive,
    /// The environments' identity keys differ.
    Incomparable,
    /// Too few replicates, or the new point failed or is INVALID.
    Insufficient,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Regressed => "REGRESSED",
            Decision::Improved => "IMPROVED",
            Decision::Unchanged => "UNCHANGED",
            Decision::Inconclusive => "INCONCLUSIVE",
            Decision::Incomparable => "INCOMPARABLE",
            Decision::Insufficient => "INSUFFICIENT",
        }
    }

    /// Severity, most severe first: what the report lists first and what a
    /// point's decision is when its gates disagree.
    pub fn severity(self) -> u8 {
        match self {
            Decision::Regressed => 0,
            Decision::Incomparable => 1,
            Decision::Insufficient => 2,
            Decision::Inconclusive => 3,
            Decision::Improved => 4,
            Decision::Unchanged => 5,
        }
    }
}

impl From<Verdict> for Decision {
    fn from(v: Verdict) -> Decision {
        match v {
            Verdict::Regressed => Decision::Regressed,
            Verdict::Improved => Decision::Improved,
            Verdict::Unchanged => Decision::Unchanged,
            Verdict::Inconclusive => Decision::Inconclusive,
        }
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a point of the results relates to the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// Same slug and hash: compared.
    Compared,
    /// Same slug, another configuration: not compared; see `drift`.
    Drift,
    /// Only in the results.
    New,
    /// Only in the baseline.
    Dropped,
}

/// How a gate's change is expressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// Changes and the band are relative (0.1 = +10%).
    Relative,
    /// Changes and the band are differences in the metric's unit (for
    /// fractions, 0.01 = one percentage point).
    Absolute,
}

/// What a gate judged against the history stood on (`against = "history"`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgainstHistory {
    /// Commits of main in the window (the baseline's replicates).
    pub commits: usize,
    /// The window's first commit.
    pub since: String,
    /// Main's newest shift for the worse, before the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
    /// The new results move the same way as that drift.
    pub extends_drift: bool,
}

/// The decision on one gate of one point, with the figures behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateReport {
    pub metric: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stat: Option<String>,
    /// "ttft p99", "output_tokens_per_s".
    pub label: String,
    /// The unit of `baseline` and `new`.
    pub unit: String,
    pub decision: Decision,
    pub scale: Scale,
    /// Median of the baseline's replicates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<f64>,
    /// Median of the new replicates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<f64>,
    /// Hodges-Lehmann estimate of the change (see `scale`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_high: Option<f64>,
    /// The noise band: the gate's `noise`, widened to twice the spread
    /// between the baseline's runs for within-run evidence (see `scale`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_band: Option<f64>,
    /// Coverage of the interval the samples achieved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved_confidence: Option<f64>,
    /// Replicates: baseline, new.
    pub m: usize,
    pub n: usize,
    /// Replicates are windows of single runs, not runs.
    pub within_run: bool,
    /// A quality gate: `m` and `n` count prompts, not runs.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub over_prompts: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Decisions of the confirmation re-runs of a REGRESSED gate.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub confirmations: Vec<Decision>,
    /// Why an INSUFFICIENT gate lacked data.
    #[serde(skip)]
    pub shortfall: Option<Shortfall>,
    /// Judged against main's history rather than the baseline's runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<AgainstHistory>,
}

/// Why a gate had too little to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shortfall {
    /// Fewer replicates than `min_runs` on a side.
    FewReplicates,
    /// A side has no value of the statistic (no run, or no window).
    NoValue,
    /// Values of zero or below, which have no ratio.
    NotPositive,
}

/// Why a point could not be judged, and the one setting that fixes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unjudged {
    /// The kind of reason, the same words for every point it applies to
    /// (what the Markdown verdict groups by).
    pub reason: String,
    /// This point's particulars.
    pub detail: String,
    /// What to change so it can be judged.
    pub fix: String,
    /// Whether it fails the check (exit 4) without `--strict`: false for
    /// INCONCLUSIVE and for INCOMPARABLE under `on_env_mismatch =
    /// "advisory"`, and for everything when the rules allow the unjudged.
    pub blocking: bool,
}

/// Everything the report says about one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointReport {
    /// The new point's ID (the baseline's for a dropped point).
    pub id: String,
    pub slug: String,
    #[serde(rename = "match")]
    pub matched: Match,
    /// The baseline entry's ID, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_id: Option<String>,
    /// The worst decision of the gates (compared points only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Replicates are windows of single runs.
    pub within_run: bool,
    /// INCOMPARABLE and left out of the verdict (`on_env_mismatch = "skip"`).
    pub skipped: bool,
    /// The new point could not be measured (infrastructure).
    pub failed: bool,
    /// The new point is VALID (true for dropped points).
    pub valid: bool,
    /// Why the new point is INVALID. The JSON report writes their
    /// messages, as its version 1 always has.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "messages")]
    pub invalid_reasons: Vec<Reason>,
    pub gates: Vec<GateReport>,
    /// Identity keys that differ.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_mismatch: Vec<Mismatch>,
    /// Recorded facts that differ (server version, kernel, ...): context.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fact_changes: Vec<Mismatch>,
    /// Spec drift: unified diff of the measured configurations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<String>,
    /// Spec drift: the settings that changed, one per line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift_changes: Vec<Mismatch>,
    /// A baseline point that was selected but has no result (it did not
    /// finish): it could not be judged.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The new point's SLOs, as judged during the run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<SloResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo_pass: Option<bool>,
    /// The new point's telemetry, as the results hold it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<serde_json::Value>,
    /// Why the point could not be judged (set by [`Report::finish`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unjudged: Option<Unjudged>,
}

impl GateReport {
    /// A gate's report before its judgement: INSUFFICIENT, no figures.
    pub(crate) fn undecided(
        metric: Metric,
        stat: Option<&infer_bench_spec::Stat>,
        scale: Scale,
        within_run: bool,
    ) -> GateReport {
        GateReport {
            metric: metric.name().to_string(),
            stat: stat.map(|s| s.name()),
            label: gate_label(metric, stat),
            unit: metric.unit().to_string(),
            decision: Decision::Insufficient,
            scale,
            baseline: None,
            new: None,
            change: None,
            change_low: None,
            change_high: None,
            noise_band: None,
            achieved_confidence: None,
            m: 0,
            n: 0,
            within_run,
            over_prompts: false,
            note: None,
            confirmations: Vec::new(),
            shortfall: None,
            history: None,
        }
    }
}

impl PointReport {
    /// Whether a gate of speed (not of quality) is REGRESSED: what a
    /// confirmation re-run can confirm.
    pub fn regressed_in_speed(&self) -> bool {
        self.gates
            .iter()
            .any(|g| g.decision == Decision::Regressed && !g.over_prompts)
    }

    /// Where the point goes in the report: regressions first, then SLO
    /// failures, what could not be judged, drift, improvements, new and
    /// dropped points, unchanged last.
    pub fn order(&self) -> u8 {
        if self.decision == Some(Decision::Regressed) && !self.skipped {
            return 0;
        }
        if self.slo_pass == Some(false) || self.failed {
            return 1;
        }
        match (self.matched, self.decision) {
            (Match::Compared, _) if self.skipped => 6,
            (Match::Compared, Some(Decision::Incomparable)) => 2,
            (Match::Compared, Some(Decision::Insufficient)) => 3,
            (Match::Compared, Some(Decision::Inconclusive)) => 4,
            (Match::Drift, _) => 5,
            (Match::Compared, Some(Decision::Improved)) => 7,
            (Match::New, _) => 8,
            (Match::Dropped, _) => 9,
            _ => 10,
        }
    }

    /// Why a point that could not be measured (`failed`) could not: its
    /// gates' note, or its own first note.
    pub fn failure(&self) -> String {
        self.gates
            .first()
            .and_then(|g| g.note.clone())
            .or_else(|| self.notes.first().cloned())
            .unwrap_or_default()
    }

    /// Whether something about this point could not be judged (what
    /// `--strict` fails on): an unjudged decision, drift, a missing point
    /// or an INVALID new point.
    pub fn unjudged(&self) -> bool {
        self.unjudged.is_some()
    }

    /// Why this point could not be judged, if it could not; `None` for a
    /// judged point, a new or dropped one, one left out, and one that could
    /// not be measured (that is an infrastructure failure, exit 3).
    fn why_unjudged(&self, report: &Report) -> Option<Unjudged> {
        if self.skipped || self.failed {
            return None;
        }
        let blocking = !report.allow_unjudged;
        let it = |reason: &str, detail: String, fix: &str, blocking: bool| Unjudged {
            reason: reason.into(),
            detail,
            fix: fix.into(),
            blocking,
        };
        if self.missing {
            return Some(it(
                "selected, but did not finish",
                self.notes.join("; "),
                "run it again",
                blocking,
            ));
        }
        if !self.valid {
            let detail = infer_bench_results::reason::join(&self.invalid_reasons, "; ");
            let (reason, fix) = invalid_fix(self.invalid_reasons.first().map(|r| r.kind));
            return Some(it(reason, detail, fix, blocking));
        }
        if self.matched == Match::Drift {
            let detail = self
                .drift_changes
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join("; ");
            return Some(it(
                "its configuration changed since the baseline",
                detail,
                "bless it on the main branch once the change is meant (`infer-bench bless RESULTS --points SLUG`)",
                blocking,
            ));
        }
        if self.matched != Match::Compared {
            return None;
        }
        match self.decision? {
            Decision::Incomparable if self.env_mismatch.is_empty() => {
                let gate = self
                    .gates
                    .iter()
                    .find(|g| g.decision == Decision::Incomparable)?;
                Some(it(
                    "the quality prompts or reference differ from the baseline's",
                    format!("{}: {}", gate.label, gate.note.as_deref().unwrap_or("")),
                    "bless the baseline again with this [quality] table",
                    blocking,
                ))
            }
            Decision::Incomparable => {
                let keys = self
                    .env_mismatch
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join("; ");
                let advisory = report.on_env_mismatch == OnEnvMismatch::Advisory;
                // A new simulator model or engine profile is not a new
                // machine: the baseline has to be blessed again.
                let simulator = self
                    .env_mismatch
                    .iter()
                    .all(|m| m.key == "sim_model" || m.key == "sim_profile");
                let fix = if simulator {
                    "the simulator's model or engine profile changed: bless the baseline again with this version"
                } else {
                    "run on the machine class the baseline was recorded on, or bless a baseline recorded on this one"
                };
                Some(it(
                    "the environment differs from the baseline's",
                    keys,
                    fix,
                    blocking && !advisory,
                ))
            }
            Decision::Insufficient => {
                let gate = self
                    .gates
                    .iter()
                    .find(|g| g.decision == Decision::Insufficient)?;
                let detail = format!("{}: {}", gate.label, gate.note.as_deref().unwrap_or(""));
                let (reason, fix) = match gate.shortfall {
                    _ if gate.over_prompts => (
                        "no quality figure to compare, or too few prompts",
                        format!(
                            "a [quality] phase on both sides that answers at least {} prompts (`[quality] prompts`), with its reference on the matrix",
                            crate::quality_gate::MIN_PROMPTS
                        ),
                    ),
                    Some(Shortfall::FewReplicates) if gate.within_run => (
                        "too few windows for a verdict (a side has one run)",
                        format!(
                            "`[load] runs = {}` (or more), so runs are compared rather than windows",
                            report.min_runs.max(2)
                        ),
                    ),
                    Some(Shortfall::FewReplicates) => (
                        "fewer runs than min_runs",
                        format!("`[load] runs = {}` (or more)", report.min_runs),
                    ),
                    Some(Shortfall::NotPositive) => (
                        "the metric has no positive value to compare",
                        "leave the gate out of `[regression] metrics`".to_string(),
                    ),
                    Some(Shortfall::NoValue) | None if gate.within_run => (
                        "no window of the run has a value",
                        format!(
                            "`[load] runs = {}` (or more), or a `[load] window` shorter than the measurement",
                            report.min_runs.max(2)
                        ),
                    ),
                    Some(Shortfall::NoValue) | None => (
                        "a run has no value of the statistic",
                        "more requests per run (`[load] duration`)".to_string(),
                    ),
                };
                Some(Unjudged {
                    reason: reason.into(),
                    detail,
                    fix,
                    blocking,
                })
            }
            Decision::Inconclusive => {
                let labels: Vec<&str> = self
                    .gates
                    .iter()
                    .filter(|g| g.decision == Decision::Inconclusive)
                    .map(|g| g.label.as_str())
                    .collect();
                let quality = self
                    .gates
                    .iter()
                    .filter(|g| g.decision == Decision::Inconclusive)
                    .all(|g| g.over_prompts);
                Some(it(
                    "the interval straddles the noise band",
                    labels.join(", "),
                    if quality {
                        "more prompts (`[quality] prompts`)"
                    } else {
                        "more runs (`[load] runs`)"
                    },
                    false,
                ))
            }
            _ => None,
        }
    }

    fn recompute(&mut self) {
        self.decision = self
            .gates
            .iter()
            .map(|g| g.decision)
            .min_by_key(|d| d.severity());
    }
}

/// Points by outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub regressed: usize,
    pub improved: usize,
    pub unchanged: usize,
    pub inconclusive: usize,
    pub incomparable: usize,
    pub insufficient: usize,
    /// INCOMPARABLE points left out (`on_env_mismatch = "skip"`).
    pub skipped: usize,
    pub drift: usize,
    pub new: usize,
    pub dropped: usize,
    /// Points with a failed SLO.
    pub slo_failed: usize,
    /// Points that could not be measured.
    pub failed: usize,
    /// Gates judged UNCHANGED, over all compared points.
    pub unchanged_gates: usize,
}

/// Where one side came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Source {
    pub path: String,
    /// The baseline's `recorded_at`, or the results' `started_at`.
    pub recorded_at: String,
}

/// The whole judgement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Always "infer-bench-verdicts".
    pub format: String,
    pub version: u32,
    pub spec: String,
    pub baseline: Source,
    pub results: Source,
    /// Requested confidence (fraction).
    pub confidence: f64,
    pub min_runs: u32,
    pub on_env_mismatch: OnEnvMismatch,
    pub confirm: u32,
    /// Points that could not be judged pass instead of failing.
    pub allow_unjudged: bool,
    /// Where the rules came from: the baseline (pinned when blessed) or,
    /// for a baseline that pins none, the new results' spec.
    pub rules: RulesSource,
    /// Settings the new results' spec changes against the pinned rules:
    /// the check fails (exit 4) until they are blessed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules_changes: Vec<Mismatch>,
    /// Whether the exit code treats INCONCLUSIVE as failure too.
    pub strict: bool,
    /// The exit code of this judgement (see `error.rs`).
    pub exit_code: u8,
    pub counts: Counts,
    /// In report order (see [`PointReport::order`]).
    pub points: Vec<PointReport>,
    /// Targets the new results reached without checking TLS certificates
    /// (`tls_insecure = true`): every report says so.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tls_insecure: Vec<String>,
    /// Capacity searches, each judged by its answer (see `capacity`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capacity: Vec<super::capacity::CapacityReport>,
}

/// Compares `results` with `baseline` under `settings`. Paths in the
/// report's sources are left empty for the caller to fill in.
pub fn compare(baseline: &Baseline, results: &Results, settings: &Settings) -> Report {
    let mut points = Vec::new();
    // A capacity search is judged by its answer (`capacity`), not probe by
    // probe: its failing probes are what a search is for.
    let probes: std::collections::BTreeSet<&str> = results
        .searches
        .iter()
        .flat_map(|s| s.probes.iter().map(|p| p.id.as_str()))
        .collect();
    for p in &results.points {
        if probes.contains(p.id.as_str()) {
            continue;
        }
        let report = match baseline.by_slug(&p.slug) {
            None => unmatched(p, Match::New),
            Some((bid, b)) if b.hash != p.hash => {
                let mut r = unmatched(p, Match::Drift);
                r.baseline_id = Some(bid.clone());
                r.drift = Some(super::drift::config_diff(bid, &b.config, &p.id, &p.config));
                r.drift_changes = super::drift::config_changes(&b.config, &p.config);
                r
            }
            Some((bid, b)) => compared(bid, b, p, baseline, results, settings),
        };
        points.push(report);
    }
    for (id, b) in &baseline.points {
        if results.points.iter().any(|p| p.slug == b.slug) {
            continue;
        }
        let pending = results
            .pending
            .iter()
            .any(|pid| pid.rsplit_once('-').is_some_and(|(slug, _)| slug == b.slug));
        points.push(PointReport {
            id: id.clone(),
            slug: b.slug.clone(),
            matched: Match::Dropped,
            baseline_id: Some(id.clone()),
            decision: None,
            within_run: false,
            skipped: false,
            failed: false,
            valid: true,
            invalid_reasons: Vec::new(),
            gates: Vec::new(),
            env_mismatch: Vec::new(),
            fact_changes: Vec::new(),
            drift: None,
            drift_changes: Vec::new(),
            missing: pending,
            notes: vec![if pending {
                "selected but did not finish in these results".into()
            } else {
                "not in these results (not selected, or no longer in the spec)".into()
            }],
            slo: Vec::new(),
            slo_pass: None,
            telemetry: None,
            unjudged: None,
        });
    }
    let mut report = Report {
        format: FORMAT.into(),
        version: VERSION,
        spec: results.spec.name.clone(),
        baseline: Source {
            path: String::new(),
            recorded_at: baseline.recorded_at.clone(),
        },
        results: Source {
            path: String::new(),
            recorded_at: results.started_at.clone(),
        },
        confidence: settings.confidence,
        min_runs: settings.min_runs,
        on_env_mismatch: settings.on_env_mismatch,
        confirm: settings.confirm,
        allow_unjudged: settings.allow_unjudged,
        rules: settings.source,
        rules_changes: settings.changes.clone(),
        strict: false,
        exit_code: EXIT_OK,
        counts: Counts::default(),
        points,
        tls_insecure: tls_insecure_targets(results),
        capacity: super::capacity::compare(&baseline.searches, &results.searches),
    };
    report.finish(false);
    report
}

/// What kind of INVALID a point is, by the kind of its first reason, and
/// the setting that fixes it (the kind's own, [`ReasonKind::fix`]). Every
/// kind is named: a new one has to be placed here.
fn invalid_fix(kind: Option<ReasonKind>) -> (&'static str, &'static str) {
    let reason = match kind {
        Some(ReasonKind::DispatchLag) => "INVALID: the client fell behind its schedule",
        Some(ReasonKind::SimulatorBehind) => "INVALID: the simulator fell behind its schedule",
        Some(ReasonKind::WindowTooShort) => "INVALID: the measurement window is too short",
        Some(ReasonKind::TooFewRequests) => "INVALID: too few requests",
        Some(ReasonKind::RateNotOffered) => "INVALID: requests were not sent at the offered rate",
        Some(ReasonKind::DidNotFinish) => "INVALID: requests did not finish",
        Some(ReasonKind::TooFewSamples) => "INVALID: too few samples for a percentile SLO",
        Some(
            ReasonKind::ReadDelay
            | ReasonKind::NoSuccess
            | ReasonKind::ClientLimit
            | ReasonKind::NotMeasured
            | ReasonKind::ServerUnreachable
            | ReasonKind::ServerDied
            | ReasonKind::PromptLengths
            | ReasonKind::IgnoreEos
            | ReasonKind::Resent
            | ReasonKind::CountedFromEvents
            | ReasonKind::DialectFieldsNotSent
            | ReasonKind::LateStart
            | ReasonKind::ConnectionsNotOpened
            | ReasonKind::CacheResetFailed
            | ReasonKind::Other,
        )
        | None => "INVALID",
    };
    let fix = kind
        .and_then(ReasonKind::fix)
        .unwrap_or("fix what the reason names (`[validity]` sets the limits)");
    (reason, fix)
}

/// Reasons as the JSON verdict report writes them: their messages.
fn messages<S: serde::Serializer>(reasons: &[Reason], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(reasons.iter().map(|r| r.message.as_str()))
}

impl Report {
    /// Sorts the points, recounts, and sets the exit code for `strict`.
    pub fn finish(&mut self, strict: bool) {
        self.points
            .sort_by(|a, b| (a.order(), &a.slug).cmp(&(b.order(), &b.slug)));
        self.strict = strict;
        for i in 0..self.points.len() {
            let why = self.points[i].why_unjudged(self);
            self.points[i].unjudged = why;
        }
        self.counts = self.count();
        self.exit_code = self.compute_exit_code(strict);
    }

    /// Whether no point was compared with data on both sides (every point
    /// is new, dropped, drifted, left out or INSUFFICIENT): nothing was
    /// judged.
    pub fn nothing_judged(&self) -> bool {
        !self.capacity.iter().any(|c| c.judged())
            && !self.points.iter().any(|p| {
                p.matched == Match::Compared
                    && !p.skipped
                    && !p.failed
                    && p.decision.is_some_and(|d| d != Decision::Insufficient)
            })
    }

    fn count(&self) -> Counts {
        let mut c = Counts::default();
        for p in &self.points {
            c.slo_failed += usize::from(p.slo_pass == Some(false));
            c.failed += usize::from(p.failed);
            match p.matched {
                Match::Drift => c.drift += 1,
                Match::New => c.new += 1,
                Match::Dropped => c.dropped += 1,
                Match::Compared if p.skipped => c.skipped += 1,
                Match::Compared => {
                    c.unchanged_gates += p
                        .gates
                        .iter()
                        .filter(|g| g.decision == Decision::Unchanged)
                        .count();
                    match p.decision {
                        Some(Decision::Regressed) => c.regressed += 1,
                        Some(Decision::Improved) => c.improved += 1,
                        Some(Decision::Unchanged) | None => c.unchanged += 1,
                        Some(Decision::Inconclusive) => c.inconclusive += 1,
                        Some(Decision::Incomparable) => c.incomparable += 1,
                        Some(Decision::Insufficient) => c.insufficient += 1,
                    }
                }
            }
        }
        c
    }

    /// 3 if a point could not be measured (or no request of it
    /// succeeded); 1 for a (confirmed) regression, a failed SLO, or an
    /// environment mismatch under `on_env_mismatch = "fail"`; 4 if the
    /// spec's rules differ from the baseline's, if a point could not be
    /// judged (unless the rules allow it), or if nothing at all was judged;
    /// with `strict`, 4 for anything not judged (INCONCLUSIVE too); else 0.
    fn compute_exit_code(&self, strict: bool) -> u8 {
        let c = &self.counts;
        let blocking = self
            .points
            .iter()
            .any(|p| p.unjudged.as_ref().is_some_and(|u| u.blocking));
        if c.failed > 0 {
            EXIT_INFRA
        } else if c.regressed > 0
            || self
                .capacity
                .iter()
                .any(|x| x.decision == super::capacity::CapacityDecision::Regressed)
            || c.slo_failed > 0
            || (self.on_env_mismatch == OnEnvMismatch::Fail && c.incomparable > 0)
        {
            EXIT_FAILED
        } else if !self.rules_changes.is_empty()
            || blocking
            || (!self.allow_unjudged && self.capacity.iter().any(|x| x.unjudged()))
            || (self.nothing_judged() && !self.allow_unjudged)
            || (strict && self.points.iter().any(PointReport::unjudged))
        {
            EXIT_UNJUDGED
        } else {
            EXIT_OK
        }
    }

    /// IDs of the points judged REGRESSED (and not skipped).
    pub fn regressed_ids(&self) -> Vec<String> {
        self.points
            .iter()
            .filter(|p| p.decision == Some(Decision::Regressed) && !p.skipped)
            .map(|p| p.id.clone())
            .collect()
    }

    /// Applies confirmation round `round` (1-based): each REGRESSED gate
    /// stays REGRESSED only if the re-run's judgement of the same gate is
    /// REGRESSED too; otherwise it becomes INCONCLUSIVE (the evidence
    /// disagrees), with a note. Call [`Report::finish`] afterwards.
    pub fn confirm_with(&mut self, round: u32, rerun: &Report) {
        for point in &mut self.points {
            if point.decision != Some(Decision::Regressed) {
                continue;
            }
            let again = rerun.points.iter().find(|r| r.id == point.id);
            for gate in &mut point.gates {
                // A quality gate's evidence is the prompts, asked once.
                if gate.decision != Decision::Regressed || gate.over_prompts {
                    continue;
                }
                let d = again
                    .and_then(|r| {
                        r.gates
                            .iter()
                            .find(|g| g.metric == gate.metric && g.stat == gate.stat)
                    })
                    .map_or(Decision::Insufficient, |g| g.decision);
                gate.confirmations.push(d);
                if d != Decision::Regressed {
                    gate.decision = Decision::Inconclusive;
                    gate.note = Some(format!(
                        "REGRESSED in the first run but {d} in confirmation re-run {round}: not confirmed"
                    ));
                }
            }
            point.recompute();
        }
    }
}

/// Why a point of the results could not be measured: it failed, or not one
/// of its requests succeeded (a server refusing every request is an
/// infrastructure failure, whatever the spec's SLOs say).
fn unmeasured(p: &PointResult) -> Option<String> {
    if !p.measured_nothing() {
        None
    } else if p.status == PointStatus::Failed {
        Some(format!(
            "the point could not be measured: {}",
            p.failure.as_deref().unwrap_or("see the results")
        ))
    } else {
        Some(format!(
            "no request succeeded ({} failed): see the failure classes in the results",
            p.merged.requests.failed
        ))
    }
}

/// A point of the results with nothing to compare against (new or drift).
fn unmatched(p: &PointResult, matched: Match) -> PointReport {
    PointReport {
        id: p.id.clone(),
        slug: p.slug.clone(),
        matched,
        baseline_id: None,
        decision: None,
        within_run: false,
        skipped: false,
        failed: unmeasured(p).is_some(),
        valid: p.valid,
        invalid_reasons: p.invalid_reasons.clone(),
        gates: Vec::new(),
        env_mismatch: Vec::new(),
        fact_changes: Vec::new(),
        drift: None,
        drift_changes: Vec::new(),
        missing: false,
        notes: unmeasured(p)
            .into_iter()
            .chain(p.invalid_reasons.iter().map(|r| r.message.clone()))
            .collect(),
        slo: p.slo.clone(),
        slo_pass: p.slo_pass,
        telemetry: p
            .telemetry
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok()),
        unjudged: None,
    }
}

fn compared(
    bid: &str,
    b: &BaselinePoint,
    p: &PointResult,
    baseline: &Baseline,
    results: &Results,
    settings: &Settings,
) -> PointReport {
    let new_env = point_environment(&results.environment, p);
    let mut env_mismatch = mismatches(&with_implied_keys(&b.environment), &new_env);
    if baseline.metrics_version != results.metrics_version {
        env_mismatch.push(Mismatch {
            key: "metrics_version".into(),
            baseline: baseline.metrics_version.to_string(),
            new: results.metrics_version.to_string(),
        });
    }
    let fact_changes = changed_facts(&b.environment, &new_env);
    let failed = unmeasured(p);
    let problem = if let Some(why) = &failed {
        Some(why.clone())
    } else if !p.valid {
        Some(format!(
            "the new point is INVALID: {}",
            infer_bench_results::reason::join(&p.invalid_reasons, "; ")
        ))
    } else {
        None
    };
    let within_run = b.runs.len() < 2 || p.runs.len() < 2;
    let sides = Sides {
        base: b
            .runs
            .iter()
            .map(|r| (&r.stats, r.windows.as_slice()))
            .collect(),
        new: p
            .runs
            .iter()
            .map(|r| (&r.stats, r.windows.as_slice()))
            .collect(),
        within_run,
    };
    let mut notes = Vec::new();
    let references = settings.references.as_ref().map(|r| r.get(&p.slug));
    let gates: Vec<GateReport> = settings
        .gates
        .iter()
        .map(|g| {
            if g.metric.is_quality() {
                return crate::quality_gate::judge(
                    g,
                    b.quality.as_ref(),
                    p.quality.as_ref(),
                    settings,
                    problem.as_deref(),
                    !env_mismatch.is_empty(),
                );
            }
            let label = gate_label(g.metric, g.stat.as_ref());
            let reference = match references {
                None => None,
                Some(refs) => {
                    let r = refs.and_then(|r| r.get(&label));
                    match r {
                        Some(r) if r.values.len() >= settings.min_runs as usize => Some(r),
                        _ => {
                            notes.push(format!(
                                "{label}: judged against the baseline: the history holds {} comparable commit(s) of this point (min_runs is {})",
                                r.map_or(0, |r| r.values.len()),
                                settings.min_runs
                            ));
                            None
                        }
                    }
                }
            };
            let report = judge_gate(
                g,
                &sides,
                settings,
                problem.as_deref(),
                !env_mismatch.is_empty(),
                reference,
            );
            let mut report = report;
            if let Some(r) = reference {
                notes.push(history_note(&label, r, &report, g.metric.higher_is_worse()));
                report.history = Some(AgainstHistory {
                    commits: r.values.len(),
                    since: r.since.clone(),
                    drift: r.drift.clone(),
                    extends_drift: r.drift.is_some()
                        && extends(&report, g.metric.higher_is_worse()),
                });
            }
            report
        })
        .collect();
    let incomparable = !env_mismatch.is_empty() && problem.is_none();
    let speed_gates = settings.gates.iter().any(|g| !g.metric.is_quality());
    if within_run && problem.is_none() && speed_gates {
        notes.push(format!(
            "within-run evidence: {} a single run, so the windows of each run stand in for runs",
            match (b.runs.len() < 2, p.runs.len() < 2) {
                (true, true) => "both sides have",
                (true, false) => "the baseline has",
                _ => "the new results have",
            }
        ));
    }
    let mut report = PointReport {
        id: p.id.clone(),
        slug: p.slug.clone(),
        matched: Match::Compared,
        baseline_id: Some(bid.to_string()),
        decision: None,
        within_run,
        skipped: incomparable && settings.on_env_mismatch == OnEnvMismatch::Skip,
        failed: failed.is_some(),
        valid: p.valid,
        invalid_reasons: p.invalid_reasons.clone(),
        gates,
        env_mismatch,
        fact_changes,
        drift: None,
        drift_changes: Vec::new(),
        missing: false,
        notes,
        slo: p.slo.clone(),
        slo_pass: p.slo_pass,
        telemetry: p
            .telemetry
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok()),
        unjudged: None,
    };
    report.recompute();
    report
}

/// Per-run statistics and windows of both sides.
struct Sides<'a> {
    base: Vec<(&'a Stats, &'a [WindowStats])>,
    new: Vec<(&'a Stats, &'a [WindowStats])>,
    within_run: bool,
}

/// What a gate judged against the history says: the window, and when
/// main drifted for the worse and the pull request would add to it.
fn history_note(label: &str, r: &Reference, g: &GateReport, higher_is_worse: bool) -> String {
    let short = |c: &str| c.chars().take(12).collect::<String>();
    let mut note = format!(
        "{label}: judged against main's level over {} commit(s) since {}",
        r.values.len(),
        short(&r.since)
    );
    if let Some(d) = &r.drift {
        note.push_str(&format!(
            "; main moved {:+.1}% over the last {} commit(s), since {}",
            d.relative * 100.0,
            d.commits,
            short(&d.since)
        ));
        if extends(g, higher_is_worse) {
            note.push_str(&format!(
                ", and this change would extend that drift ({:+.1}%)",
                g.change.unwrap_or(0.0) * 100.0
            ));
        }
    }
    note
}

/// Whether a gate's change is for the worse (any size).
fn extends(g: &GateReport, higher_is_worse: bool) -> bool {
    g.change
        .is_some_and(|c| c != 0.0 && (c > 0.0) == higher_is_worse)
}

fn judge_gate(
    gate: &Gate,
    sides: &Sides,
    settings: &Settings,
    problem: Option<&str>,
    mismatch: bool,
    reference: Option<&Reference>,
) -> GateReport {
    let metric = gate.metric;
    let stat = gate.stat.as_ref();
    let scale = if metric.kind() == Kind::Ratio {
        Scale::Absolute
    } else {
        Scale::Relative
    };
    let mut report = GateReport::undecided(metric, stat, scale, sides.within_run);
    if let Some(problem) = problem {
        report.note = Some(problem.to_string());
        return report;
    }
    let base = match reference {
        Some(r) => Ok(r.values.clone()),
        None => replicates(&sides.base, metric, stat, sides.within_run),
    };
    let new = replicates(&sides.new, metric, stat, sides.within_run);
    let (base, new) = match (base, new) {
        (Ok(b), Ok(n)) => (b, n),
        (Err(e), _) => {
            report.note = Some(format!("baseline: {e}"));
            report.shortfall = Some(Shortfall::NoValue);
            return report;
        }
        (_, Err(e)) => {
            report.note = Some(format!("new results: {e}"));
            report.shortfall = Some(Shortfall::NoValue);
            return report;
        }
    };
    report.m = base.len();
    report.n = new.len();
    report.baseline = median(&base);
    report.new = median(&new);
    // Windows cannot see how much whole runs differ; when the baseline has
    // several runs, their spread joins the band (as the windows' does).
    let mut noise = gate.noise.fraction();
    if sides.within_run && sides.base.len() >= 2 && reference.is_none() {
        if let Ok(runs) = replicates(&sides.base, metric, stat, false) {
            let spread = match scale {
                Scale::Relative => stats::coefficient_of_variation(&runs),
                Scale::Absolute => stats::standard_deviation(&runs),
            };
            noise = noise.max(spread.map_or(0.0, |s| 2.0 * s));
        }
    }
    let j: Option<Judgement> = match scale {
        Scale::Relative => stats::judge(
            &base,
            &new,
            metric.higher_is_worse(),
            noise,
            settings.confidence,
        ),
        Scale::Absolute => stats::judge_absolute(
            &base,
            &new,
            metric.higher_is_worse(),
            noise,
            settings.confidence,
        ),
    };
    if let Some(j) = &j {
        report.change = Some(j.change);
        report.change_low = Some(j.change_low);
        report.change_high = Some(j.change_high);
        report.noise_band = Some(j.tau);
        report.achieved_confidence = Some(j.achieved_confidence);
    }
    let unit = if sides.within_run { "windows" } else { "runs" };
    let min = settings.min_runs as usize;
    if mismatch {
        report.decision = Decision::Incomparable;
        report.note = Some("the environments differ (see the mismatch)".into());
    } else if report.m < min || report.n < min {
        report.note = Some(format!(
            "{} baseline and {} new {unit}; min_runs asks for {min} a side",
            report.m, report.n
        ));
        report.shortfall = Some(Shortfall::FewReplicates);
    } else if let Some(j) = j {
        report.decision = j.verdict.into();
        if report.decision == Decision::Inconclusive {
            report.note = Some(format!(
                "the interval straddles the noise band: add {unit} for a verdict"
            ));
        }
    } else {
        report.note = Some(
            "values that are zero or negative have no ratio to compare (the metric may not apply here)"
                .into(),
        );
        report.shortfall = Some(Shortfall::NotPositive);
    }
    report
}

/// Why one side of a comparison has no values of a gate's statistic (the
/// note of the gate; not an error of the judge).
#[derive(Debug, thiserror::Error)]
enum NoValue {
    #[error("no window has a value of {label}")]
    NoWindow { label: String },
    #[error(
        "{label} is not kept per run (runs keep mean, min, max, std, p50, p90, p95, p99 and p99.9)"
    )]
    NotKeptPerRun { label: String },
    /// Run `run` (1-based) has none.
    #[error("run {run} has no value of {label}")]
    Run { run: usize, label: String },
}

/// The statistic of each run, or of each window of every run. Windows with
/// no successful request, or no value of the statistic, are left out; a run
/// without a value is an error (it says what is missing).
fn replicates(
    runs: &[(&Stats, &[WindowStats])],
    metric: Metric,
    stat: Option<&Stat>,
    windows: bool,
) -> Result<Vec<f64>, NoValue> {
    let label = gate_label(metric, stat);
    if windows {
        let values: Vec<f64> = runs
            .iter()
            .flat_map(|(_, w)| w.iter())
            .filter(|w| w.stats.requests.succeeded > 0)
            .filter_map(|w| w.stats.value(metric, stat))
            .collect();
        if values.is_empty() {
            return Err(NoValue::NoWindow { label });
        }
        return Ok(values);
    }
    runs.iter()
        .enumerate()
        .map(|(i, (s, _))| {
            s.value(metric, stat).ok_or_else(|| {
                if matches!(stat, Some(Stat::Percentile(_)))
                    && s.latency_ms.contains_key(metric.name())
                {
                    NoValue::NotKeptPerRun {
                        label: label.clone(),
                    }
                } else {
                    NoValue::Run {
                        run: i + 1,
                        label: label.clone(),
                    }
                }
            })
        })
        .collect()
}

fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[mid]),
        _ => Some((v[mid - 1] + v[mid]) / 2.0),
    }
}

/// Facts both sides recorded with different values.
fn changed_facts(base: &Environment, new: &Environment) -> Vec<Mismatch> {
    base.facts
        .iter()
        .filter_map(|(key, b)| {
            let n = new.facts.get(key)?;
            (n != b).then(|| Mismatch {
                key: key.clone(),
                baseline: b.clone(),
                new: n.clone(),
            })
        })
        .collect()
}

/// The targets of `r`'s points reached without checking TLS
/// certificates (`tls_insecure = true`), each once, in order: said by the
/// terminal summary and the Markdown verdict.
pub fn tls_insecure_targets(r: &Results) -> Vec<String> {
    let mut names: Vec<String> = r
        .points
        .iter()
        .filter(|p| p.config.target.tls_insecure)
        .map(|p| p.config.target.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::{Baseline, Bless};
    use infer_bench_testkit::fixtures::*;

    /// A baseline blessed from `r` by the judge under test (the test kit's
    /// `baseline_of` returns its own copy of the judge's `Baseline`).
    fn baseline_of(r: &infer_bench_spec::results::Results) -> Baseline {
        let mut b = Baseline::new("unit");
        b.bless(r, &[], "2026-01-01T00:00:00Z").unwrap();
        b
    }

    fn settings(spec: &infer_bench_spec::Spec) -> Settings {
        Settings::from_regression(&spec.regression)
    }

    fn judge_runs(base: &[f64], new: &[f64]) -> Report {
        let (spec, plan) = plan(16, GATES);
        let b = baseline_of(&results(vec![point(&plan, base, &[])]));
        compare(&b, &results(vec![point(&plan, new, &[])]), &settings(&spec))
    }

    fn gate<'a>(r: &'a Report, label: &str) -> &'a GateReport {
        r.points[0]
            .gates
            .iter()
            .find(|g| g.label == label)
            .unwrap_or_else(|| panic!("no gate {label}"))
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    /// TPOT 100 ms three times against 110, 111, 112: the nine pairwise
    /// ratios are 1.10, 1.11, 1.12 three times each; median 1.11, and m = n
    /// = 3 reaches 90% at most, with the full range [1.10, 1.12] as the
    /// interval. Wholly above +5%: REGRESSED. Throughput is 10 000 / TPOT,
    /// so it drops by the reciprocal: 1/1.11 - 1 = -9.9%, also REGRESSED.
    /// No errors on either side: error_rate UNCHANGED at +0 points.
    #[test]
    fn a_ten_percent_slowdown_regresses_latency_and_throughput() {
        let r = judge_runs(&[100.0; 3], &[110.0, 111.0, 112.0]);
        let t = gate(&r, "tpot p50");
        assert_eq!(t.decision, Decision::Regressed);
        assert!(close(t.change, 0.11), "{t:?}");
        assert!(
            close(t.change_low, 0.10) && close(t.change_high, 0.12),
            "{t:?}"
        );
        assert!(close(t.noise_band, 0.05));
        assert!(close(t.achieved_confidence, 0.9));
        assert!(close(t.baseline, 100.0) && close(t.new, 111.0));
        assert_eq!((t.m, t.n, t.within_run), (3, 3, false));
        let x = gate(&r, "output_tokens_per_s");
        assert_eq!(x.decision, Decision::Regressed);
        assert!(close(x.change, 1.0 / 1.11 - 1.0), "{x:?}");
        let e = gate(&r, "error_rate");
        assert_eq!(e.decision, Decision::Unchanged);
        assert_eq!(e.scale, Scale::Absolute);
        assert!(close(e.change, 0.0));
        assert_eq!(r.points[0].decision, Some(Decision::Regressed));
        assert_eq!(r.counts.regressed, 1);
        assert_eq!(r.exit_code, EXIT_FAILED);
    }

    /// 100 against 90, 91, 92 (latency down 9%, throughput up 9.9%).
    #[test]
    fn a_speedup_improves() {
        let r = judge_runs(&[100.0; 3], &[90.0, 91.0, 92.0]);
        assert_eq!(gate(&r, "tpot p50").decision, Decision::Improved);
        assert_eq!(gate(&r, "output_tokens_per_s").decision, Decision::Improved);
        assert_eq!(r.points[0].decision, Some(Decision::Improved));
        assert_eq!(r.exit_code, EXIT_OK);
    }

    /// 100 against 98, 100, 102: interval [0.98, 1.02] inside [1/1.05,
    /// 1.05]: UNCHANGED everywhere; a tight baseline keeps the band at 5%.
    #[test]
    fn within_the_band_is_unchanged() {
        let r = judge_runs(&[100.0; 3], &[98.0, 100.0, 102.0]);
        for g in &r.points[0].gates {
            assert_eq!(g.decision, Decision::Unchanged, "{g:?}");
        }
        assert_eq!(r.counts.unchanged, 1);
        assert_eq!(r.counts.unchanged_gates, 3);
        assert_eq!(r.exit_code, EXIT_OK);
    }

    /// 100 against 100, 104, 108: interval [1.00, 1.08] straddles 1.05:
    /// INCONCLUSIVE, which passes unless --strict (exit 4).
    #[test]
    fn straddling_is_inconclusive_and_strict_fails_it() {
        let mut r = judge_runs(&[100.0; 3], &[100.0, 104.0, 108.0]);
        assert_eq!(gate(&r, "tpot p50").decision, Decision::Inconclusive);
        assert_eq!(r.exit_code, EXIT_OK);
        r.finish(true);
        assert_eq!(r.exit_code, EXIT_UNJUDGED);
    }

    /// Two new runs with min_runs 3: INSUFFICIENT, with the counts.
    #[test]
    fn fewer_runs_than_min_runs_is_insufficient() {
        let r = judge_runs(&[100.0; 3], &[130.0, 131.0]);
        let t = gate(&r, "tpot p50");
        assert_eq!(t.decision, Decision::Insufficient);
        assert_eq!((t.m, t.n), (3, 2));
        assert!(
            t.note
                .as_deref()
                .unwrap()
                .contains("3 baseline and 2 new runs"),
            "{t:?}"
        );
        assert_eq!(r.exit_code, EXIT_UNJUDGED);
        let u = r.points[0].unjudged.as_ref().unwrap();
        assert_eq!(u.reason, "fewer runs than min_runs");
        assert_eq!(u.fix, "`[load] runs = 3` (or more)");
    }

    /// One run a side: the windows are the replicates. Baseline windows 100
    /// x 4, new 110..113: with m = n = 4, P(U <= 0) = 1/70 <= 2.5% but P(U
    /// <= 1) = 2/70 is not, so k = 1: the full range [1.10, 1.13], coverage
    /// 1 - 2/70 = 97.1%. REGRESSED, marked within-run.
    #[test]
    fn a_single_run_uses_windows_as_within_run_evidence() {
        let (spec, plan) = plan(16, GATES);
        let b = baseline_of(&results(vec![point(&plan, &[100.0], &[&[100.0; 4]])]));
        let new = results(vec![point(
            &plan,
            &[111.0],
            &[&[110.0, 111.0, 112.0, 113.0]],
        )]);
        let r = compare(&b, &new, &settings(&spec));
        let t = gate(&r, "tpot p50");
        assert_eq!(t.decision, Decision::Regressed);
        assert!(t.within_run && r.points[0].within_run);
        assert_eq!((t.m, t.n), (4, 4));
        assert!(
            close(t.change_low, 0.10) && close(t.change_high, 0.13),
            "{t:?}"
        );
        assert!(close(t.achieved_confidence, 1.0 - 2.0 / 70.0));
        assert!(r.points[0].notes[0].starts_with("within-run evidence"));
    }

    /// Windows count against min_runs like runs: two baseline windows are
    /// too few for min_runs 3.
    #[test]
    fn too_few_windows_are_insufficient() {
        let (spec, plan) = plan(16, GATES);
        let b = baseline_of(&results(vec![point(&plan, &[100.0], &[&[100.0, 101.0]])]));
        let new = results(vec![point(&plan, &[100.0], &[&[100.0, 100.0, 100.0]])]);
        let r = compare(&b, &new, &settings(&spec));
        let t = gate(&r, "tpot p50");
        assert_eq!(t.decision, Decision::Insufficient);
        assert!(
            t.note
                .as_deref()
                .unwrap()
                .contains("2 baseline and 3 new windows")
        );
    }

    #[test]
    fn an_invalid_or_failed_new_point_is_insufficient() {
        let (spec, plan) = plan(16, GATES);
        let b = baseline_of(&results(vec![point(&plan, &[100.0; 3], &[])]));
        let mut p = point(&plan, &[150.0; 3], &[]);
        p.valid = false;
        p.invalid_reasons = vec![Reason::new(ReasonKind::NoSuccess, "no request succeeded")];
        let r = compare(&b, &results(vec![p.clone()]), &settings(&spec));
        assert_eq!(r.points[0].decision, Some(Decision::Insufficient));
        assert!(
            gate(&r, "tpot p50")
                .note
                .as_deref()
                .unwrap()
                .contains("INVALID: no request succeeded")
        );
        // What could not be judged fails the check, unless the rules
        // allow it.
        assert_eq!(r.exit_code, EXIT_UNJUDGED);
        let u = r.points[0].unjudged.as_ref().unwrap();
        assert!(u.blocking && u.reason.starts_with("INVALID"), "{u:?}");
        // The reason of a late client names the setting that bounds it.
        let mut late = p.clone();
        late.invalid_reasons = vec![Reason::new(
            ReasonKind::DispatchLag,
            "run 1: the client itself was late: dispatch lag p99 4.4 ms is above the budget of 3.0 ms",
        )];
        let r = compare(&b, &results(vec![late]), &settings(&spec));
        let u = r.points[0].unjudged.as_ref().unwrap();
        assert_eq!(u.reason, "INVALID: the client fell behind its schedule");
        assert!(u.fix.contains("`[validity] max_dispatch_lag_p99`"), "{u:?}");
        assert!(u.detail.contains("dispatch lag p99 4.4 ms"), "{u:?}");
        let mut allow = settings(&spec);
        allow.allow_unjudged = true;
        let r = compare(&b, &results(vec![p.clone()]), &allow);
        assert_eq!(r.exit_code, EXIT_OK);
        p.status = PointStatus::Failed;
        p.failure = Some("the target is unreachable".into());
        let r = compare(&b, &results(vec![p]), &settings(&spec));
        assert!(r.points[0].failed);
        assert_eq!(r.exit_code, EXIT_INFRA);
    }

    /// The simulated GPU is not in the point's hash but is in its
    /// fingerprint: another GPU is INCOMPARABLE, and `on_env_mismatch`
    /// decides what that does to the exit code.
    #[test]
    fn another_gpu_is_incomparable() {
        for (mode, code, strict_code, skipped) in [
            ("unjudged", EXIT_UNJUDGED, EXIT_UNJUDGED, false),
            ("advisory", EXIT_OK, EXIT_UNJUDGED, false),
            ("fail", EXIT_FAILED, EXIT_FAILED, false),
            // Its only point left out, the comparison judged nothing.
            ("skip", EXIT_UNJUDGED, EXIT_UNJUDGED, true),
        ] {
            let (spec, plan) = plan(16, &format!("{GATES}on_env_mismatch = \"{mode}\"\n"));
            let b = baseline_of(&results(vec![point(&plan, &[100.0; 3], &[])]));
            let mut p = point(&plan, &[150.0; 3], &[]);
            std::sync::Arc::make_mut(&mut p.config.target)
                .sim
                .as_mut()
                .unwrap()
                .gpu = "h100-sxm".into();
            assert_eq!(p.config.hash(), p.hash, "the GPU is not hashed");
            let mut r = compare(&b, &results(vec![p]), &settings(&spec));
            let pr = &r.points[0];
            assert_eq!(pr.decision, Some(Decision::Incomparable), "{mode}");
            assert_eq!(pr.skipped, skipped);
            assert_eq!(
                pr.env_mismatch,
                vec![Mismatch {
                    key: "sim_gpu".into(),
                    baseline: "l40s".into(),
                    new: "h100-sxm".into()
                }]
            );
            // The figures are still there for the curious.
            assert!(close(gate(&r, "tpot p50").change, 0.5));
            assert_eq!(r.exit_code, code, "{mode}");
            r.finish(true);
            assert_eq!(r.exit_code, strict_code, "{mode} --strict");
        }
    }

    /// A simulated point compares across client machines of one runner
    /// class whatever real GPUs they hold: those are facts, not identity.
    #[test]
    fn a_simulated_point_ignores_the_host_s_real_gpus() {
        let (spec, plan) = plan(16, GATES);
        let mut base = results(vec![point(&plan, &[100.0; 3], &[])]);
        base.environment
            .identity
            .insert("gpu_model".into(), "none".into());
        let b = baseline_of(&base);
        let mut new = results(vec![point(&plan, &[100.0; 3], &[])]);
        new.environment
            .identity
            .insert("gpu_model".into(), "NVIDIA H200".into());
        let r = compare(&b, &new, &settings(&spec));
        assert!(r.points[0].env_mismatch.is_empty(), "{:?}", r.points[0]);
        assert_eq!(r.points[0].decision, Some(Decision::Unchanged));
        assert!(
            r.points[0]
                .fact_changes
                .iter()
                .any(|m| m.key == "host_gpu_model" && m.new == "NVIDIA H200")
        );
    }

    #[test]
    fn a_changed_configuration_is_drift_with_a_diff() {
        let (spec, plan16) = plan(16, GATES);
        let (_, plan24) = plan(24, GATES);
        let b = baseline_of(&results(vec![point(&plan16, &[100.0; 3], &[])]));
        let new = point(&plan24, &[100.0; 3], &[]);
        assert_eq!(new.slug, plan16.points[0].slug);
        assert_ne!(new.hash, plan16.points[0].hash);
        let r = compare(&b, &results(vec![new]), &settings(&spec));
        let p = &r.points[0];
        assert_eq!(p.matched, Match::Drift);
        assert_eq!(p.decision, None);
        let diff = p.drift.as_deref().unwrap();
        assert!(
            diff.contains("-    \"output_tokens\": \"fixed(16)\""),
            "{diff}"
        );
        assert!(
            diff.contains("+    \"output_tokens\": \"fixed(24)\""),
            "{diff}"
        );
        assert!(diff.starts_with("--- baseline "), "{diff}");
        assert_eq!(r.counts.drift, 1);
        assert_eq!(
            p.drift_changes,
            vec![Mismatch {
                key: "workload.output_tokens".into(),
                baseline: "fixed(16)".into(),
                new: "fixed(24)".into()
            }]
        );
        assert_eq!(r.exit_code, EXIT_UNJUDGED, "drift is not judged");
        assert!(
            r.points[0]
                .unjudged
                .as_ref()
                .is_some_and(|u| u.detail == "workload.output_tokens: fixed(16) -> fixed(24)")
        );
    }

    #[test]
    fn new_and_dropped_points_are_listed_not_failed() {
        let (spec, plan) = plan(16, GATES);
        let kept = point(&plan, &[100.0; 3], &[]);
        let mut old = point(&plan, &[100.0; 3], &[]);
        old.slug = "gone".into();
        old.id = "gone-00000000".into();
        let mut fresh = point(&plan, &[100.0; 3], &[]);
        fresh.slug = "fresh".into();
        fresh.id = "fresh-00000000".into();
        let b = baseline_of(&results(vec![old, kept.clone()]));
        let mut r = compare(&b, &results(vec![kept, fresh]), &settings(&spec));
        let kinds: Vec<Match> = r.points.iter().map(|p| p.matched).collect();
        assert_eq!(kinds, vec![Match::New, Match::Dropped, Match::Compared]);
        assert_eq!((r.counts.new, r.counts.dropped), (1, 1));
        assert_eq!(r.exit_code, EXIT_OK);
        r.finish(true);
        assert_eq!(r.exit_code, EXIT_OK, "new and dropped are never failures");
    }

    /// Results whose points are all new, or all left out, judged nothing:
    /// that is not a pass.
    #[test]
    fn judging_nothing_is_not_a_pass() {
        let (spec, plan) = plan(16, GATES);
        let mut old = point(&plan, &[100.0; 3], &[]);
        old.slug = "gone".into();
        old.id = "gone-00000000".into();
        let b = baseline_of(&results(vec![old]));
        let r = compare(
            &b,
            &results(vec![point(&plan, &[100.0; 3], &[])]),
            &settings(&spec),
        );
        assert!(r.nothing_judged());
        assert_eq!(r.exit_code, EXIT_UNJUDGED);
    }

    /// A selected baseline point that did not finish is missing, and
    /// missing is not passed.
    #[test]
    fn a_selected_point_that_did_not_finish_is_missing() {
        let (spec, plan) = plan(16, GATES);
        let kept = point(&plan, &[100.0; 3], &[]);
        let mut old = point(&plan, &[100.0; 3], &[]);
        old.slug = "late".into();
        old.id = "late-00000000".into();
        let b = baseline_of(&results(vec![old, kept.clone()]));
        let mut res = results(vec![kept]);
        res.pending = vec!["late-00000000".into()];
        let r = compare(&b, &res, &settings(&spec));
        let late = r.points.iter().find(|p| p.slug == "late").unwrap();
        assert!(late.missing);
        assert_eq!(
            late.unjudged.as_ref().unwrap().reason,
            "selected, but did not finish"
        );
        assert_eq!(r.exit_code, EXIT_UNJUDGED);
    }

    /// A point none of whose requests succeeded could not be measured,
    /// whatever its SLOs say: exit 3.
    #[test]
    fn a_point_where_every_request_failed_is_an_infrastructure_failure() {
        let (spec, plan) = plan(16, GATES);
        let b = baseline_of(&results(vec![point(&plan, &[100.0; 3], &[])]));
        let mut p = point(&plan, &[100.0; 3], &[]);
        p.merged.requests.failed = p.merged.requests.succeeded + 32;
        p.merged.requests.succeeded = 0;
        let r = compare(&b, &results(vec![p]), &settings(&spec));
        assert!(r.points[0].failed);
        let note = gate(&r, "tpot p50").note.clone().unwrap_or_default();
        assert!(note.contains("no request succeeded"), "{note}");
        assert_eq!(r.exit_code, EXIT_INFRA);
    }

    /// Rules a baseline pins judge; the spec's differing rules are listed
    /// and fail the check (exit 4) even when nothing regressed.
    #[test]
    fn changed_rules_fail_until_blessed() {
        let (spec, plan) = plan(16, GATES);
        let mut b = baseline_of(&results(vec![point(&plan, &[100.0; 3], &[])]));
        crate::rules::pin(&mut b, &spec.regression, "sha");
        let mut wide = spec.regression.clone();
        for g in &mut wide.gates {
            g.noise = infer_bench_spec::Percent::new(1000.0).unwrap();
        }
        let rules = crate::rules::resolve(&b, &wide).unwrap();
        let settings = Settings::from_rules(&rules);
        assert_eq!(settings.gates, spec.regression.gates);
        let same = compare(
            &b,
            &results(vec![point(&plan, &[100.0; 3], &[])]),
            &settings,
        );
        assert_eq!(same.rules, RulesSource::Baseline);
        assert!(!same.rules_changes.is_empty());
        assert_eq!(same.exit_code, EXIT_UNJUDGED);
        // A 2x slowdown is REGRESSED by the pinned 5% band, not hidden by
        // the pull request's 1000%.
        let slow = compare(
            &b,
            &results(vec![point(&plan, &[200.0; 3], &[])]),
            &settings,
        );
        assert_eq!(gate(&slow, "tpot p50").decision, Decision::Regressed);
        assert_eq!(slow.exit_code, EXIT_FAILED);
    }

    #[test]
    fn a_failed_slo_fails_even_when_nothing_regressed() {
        let (spec, plan) = plan(16, GATES);
        let b = baseline_of(&results(vec![point(&plan, &[100.0; 3], &[])]));
        let mut p = point(&plan, &[100.0; 3], &[]);
        p.slo = vec![SloResult {
            metric: "tpot".into(),
            expr: "p50 < 50ms".parse().unwrap(),
            value: Some(100.0),
            pass: false,
            note: None,
        }];
        p.slo_pass = Some(false);
        let r = compare(&b, &results(vec![p]), &settings(&spec));
        assert_eq!(r.points[0].decision, Some(Decision::Unchanged));
        assert_eq!(r.counts.slo_failed, 1);
        assert_eq!(r.exit_code, EXIT_FAILED);
    }

    /// A REGRESSED gate stays so only if the re-run regresses too.
    #[test]
    fn confirmation_keeps_or_clears_a_regression() {
        let first = judge_runs(&[100.0; 3], &[110.0, 111.0, 112.0]);
        let mut kept = first.clone();
        kept.confirm_with(1, &judge_runs(&[100.0; 3], &[109.0, 110.0, 111.0]));
        kept.finish(false);
        let t = gate(&kept, "tpot p50");
        assert_eq!(t.decision, Decision::Regressed);
        assert_eq!(t.confirmations, vec![Decision::Regressed]);
        assert_eq!(kept.exit_code, EXIT_FAILED);

        let mut cleared = first;
        cleared.confirm_with(1, &judge_runs(&[100.0; 3], &[99.0, 100.0, 101.0]));
        cleared.finish(false);
        let t = gate(&cleared, "tpot p50");
        assert_eq!(t.decision, Decision::Inconclusive);
        assert_eq!(t.confirmations, vec![Decision::Unchanged]);
        assert!(t.note.as_deref().unwrap().contains("not confirmed"));
        assert_eq!(cleared.points[0].decision, Some(Decision::Inconclusive));
        assert_eq!(cleared.exit_code, EXIT_OK);
    }

    #[test]
    fn regressions_come_first() {
        let (spec, plan) = plan(16, GATES);
        let mut a = point(&plan, &[100.0; 3], &[]);
        a.slug = "a".into();
        a.id = "a-1".into();
        let mut z = point(&plan, &[100.0; 3], &[]);
        z.slug = "z".into();
        z.id = "z-1".into();
        let b = baseline_of(&results(vec![a.clone(), z.clone()]));
        let mut z2 = point(&plan, &[120.0; 3], &[]);
        z2.slug = "z".into();
        z2.id = "z-1".into();
        let r = compare(&b, &results(vec![a, z2]), &settings(&spec));
        assert_eq!(r.points[0].slug, "z");
        assert_eq!(r.points[0].decision, Some(Decision::Regressed));
        assert_eq!(r.points[1].decision, Some(Decision::Unchanged));
    }

    /// The words the engine gives each kind of reason today.
    fn message_of(kind: ReasonKind) -> &'static str {
        match kind {
            ReasonKind::WindowTooShort => {
                "run 2: the measurement window was 0.8s, below the minimum 1s"
            }
            ReasonKind::TooFewRequests => "3 requests measured, below the minimum 10",
            ReasonKind::RateNotOffered => {
                "requests were sent at 7.10/s against 8.00/s offered (11.3% apart; the limit is 10%)"
            }
            ReasonKind::DispatchLag => {
                "run 1: the client itself was late: dispatch lag p99 4.400 ms is above the budget of 3.000 ms ([validity] max_dispatch_lag_p99 = \"3ms\")"
            }
            ReasonKind::ReadDelay => {
                "the client itself was late reading: read delay p99 24.000 ms is above the budget of 20.000 ms (10% of TTFT p99 200.0 ms, at least 10ms; [validity] max_dispatch_lag_p99 sets a fixed one)"
            }
            ReasonKind::DidNotFinish => "run 3: 4 requests did not finish",
            ReasonKind::NoSuccess => "no request succeeded",
            ReasonKind::ClientLimit => {
                "2 request(s) failed because the client ran out of file descriptors (client_limit): the load was limited by this machine, not the server; raise the open-file limit (ulimit -n) or lower the load"
            }
            ReasonKind::SimulatorBehind => {
                "the simulator fell behind its own schedule: 16% of the point's time was lost to the machine (the limit is 10%), so the machine, not the modelled GPU, set the pace"
            }
            ReasonKind::TooFewSamples => {
                "p90 of ttft needs at least 44 samples to mean something (MLPerf's early-stopping bound); this point has 27"
            }
            ReasonKind::NotMeasured => "the point could not be measured",
            ReasonKind::ServerUnreachable => {
                "the run stopped early: 20 of its first 20 requests could not connect to the server and none succeeded"
            }
            ReasonKind::ServerDied => "the server died during the point",
            ReasonKind::PromptLengths => {
                "prompts averaged 140 tokens as the server counts them against 128 requested (+9%); the chat template adds tokens"
            }
            ReasonKind::IgnoreEos => {
                "outputs averaged 10 tokens against 16 requested: the server may not honour ignore_eos"
            }
            ReasonKind::Resent => {
                "1 request(s) were re-sent once because the server closed a kept-alive connection as they went out (their TTFT counts the lost attempt)"
            }
            ReasonKind::CountedFromEvents => {
                "some output token counts were counted from events (the server sent no usage): approximate"
            }
            ReasonKind::DialectFieldsNotSent => {
                "ignore_eos, top_k was not sent: the server did not name its dialect (owned_by in its /models), so requests were plain OpenAI; set [targets.local] dialect if it accepts more (without ignore_eos, outputs can end before output_tokens)"
            }
            ReasonKind::LateStart => {
                "run 2 began 40 ms after its agreed start (the previous run overran its slot: give a longer --slot); its first arrivals went out late"
            }
            ReasonKind::ConnectionsNotOpened => {
                "run 1: 0 of 64 connections were opened before the run: the open-file limit (40) leaves room for no more; the run opened the rest as it went, and any it could not open failed as client_limit"
            }
            ReasonKind::CacheResetFailed => {
                "run 2: the server's prefix cache could not be reset (POST /flush_cache answered 500): the run may have read an earlier run's cache"
            }
            ReasonKind::Other => "a reason an older file gave",
        }
    }

    /// What the judge said of an INVALID point before reasons had kinds:
    /// it looked for words in the first reason. Kept as the measure of
    /// what the kinds must say of today's words.
    fn by_words(reason: &str) -> (&'static str, &'static str) {
        let fix = |k: ReasonKind| k.fix().unwrap();
        if reason.contains("dispatch lag") {
            (
                "INVALID: the client fell behind its schedule",
                fix(ReasonKind::DispatchLag),
            )
        } else if reason.contains("simulator fell behind") {
            (
                "INVALID: the simulator fell behind its schedule",
                fix(ReasonKind::SimulatorBehind),
            )
        } else if reason.contains("measurement window") {
            (
                "INVALID: the measurement window is too short",
                fix(ReasonKind::WindowTooShort),
            )
        } else if reason.contains("requests measured") {
            ("INVALID: too few requests", fix(ReasonKind::TooFewRequests))
        } else if reason.contains("offered") {
            (
                "INVALID: requests were not sent at the offered rate",
                fix(ReasonKind::RateNotOffered),
            )
        } else if reason.contains("did not finish") {
            (
                "INVALID: requests did not finish",
                fix(ReasonKind::DidNotFinish),
            )
        } else if reason.contains("samples") {
            (
                "INVALID: too few samples for a percentile SLO",
                fix(ReasonKind::TooFewSamples),
            )
        } else {
            (
                "INVALID",
                "fix what the reason names (`[validity]` sets the limits)",
            )
        }
    }

    /// A point INVALID for a reason of each kind is said to be what the
    /// words of that reason made it before kinds.
    #[test]
    fn every_kind_judges_as_its_words_did() {
        for &kind in ReasonKind::ALL {
            assert_eq!(
                invalid_fix(Some(kind)),
                by_words(message_of(kind)),
                "{kind}"
            );
        }
        assert_eq!(invalid_fix(None), by_words(""));
        // The fixes are the ones the judge always gave.
        assert_eq!(
            invalid_fix(Some(ReasonKind::DispatchLag)).1,
            "a less busy machine, or a larger `[validity] max_dispatch_lag_p99`"
        );
    }

    /// Every string in `v` with each `(from, to)` replaced.
    fn replaced(v: &mut serde_json::Value, pairs: &[(String, String)]) {
        use serde_json::Value;
        match v {
            Value::String(s) => {
                for (from, to) in pairs {
                    *s = s.replace(from.as_str(), to);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| replaced(x, pairs)),
            Value::Object(o) => o.values_mut().for_each(|x| replaced(x, pairs)),
            _ => {}
        }
    }

    /// No verdict depends on the words of a reason: a point INVALID for
    /// each kind first (and every other kind after), with a warning of
    /// every kind, judges the same when every message and fix is put in
    /// other words, words that name other kinds' reasons: the same
    /// decisions, what could not be judged and why, counts and exit codes;
    /// the report differs only where it quotes the messages.
    #[test]
    fn rewording_every_reason_changes_no_verdict() {
        let (spec, plan) = plan(16, GATES);
        let b = baseline_of(&results(vec![point(&plan, &[100.0; 3], &[])]));
        let kinds = ReasonKind::ALL;
        let pairs: Vec<(String, String)> = kinds
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                let m = message_of(k);
                let other = format!(
                    "in other words {i}: {} (dispatch lag, simulator fell behind, measurement window, requests measured, offered, did not finish, samples)",
                    m.chars().rev().collect::<String>()
                );
                (m.to_string(), other)
            })
            .collect();
        let reasons = |first: ReasonKind| -> Vec<Reason> {
            std::iter::once(first)
                .chain(kinds.iter().copied().filter(|&k| k != first))
                .map(|k| Reason::new(k, message_of(k)))
                .collect()
        };
        for &first in kinds {
            let mut p = point(&plan, &[150.0; 3], &[]);
            p.valid = false;
            p.invalid_reasons = reasons(first);
            p.warnings = reasons(first);
            let mut q = p.clone();
            for r in q.invalid_reasons.iter_mut().chain(&mut q.warnings) {
                let i = kinds.iter().position(|&k| k == r.kind).unwrap();
                r.message = pairs[i].1.clone();
                r.fix = Some("in other words: samples, offered".into());
            }
            for strict in [false, true] {
                let judge = |p: &PointResult| {
                    let mut r = compare(&b, &results(vec![p.clone()]), &settings(&spec));
                    r.finish(strict);
                    r
                };
                let (before, after) = (judge(&p), judge(&q));
                assert_eq!(after.exit_code, before.exit_code, "{first}");
                assert_eq!(after.counts, before.counts, "{first}");
                let (u, v) = (
                    before.points[0].unjudged.as_ref().unwrap(),
                    after.points[0].unjudged.as_ref().unwrap(),
                );
                assert_eq!(
                    (&v.reason, &v.fix, v.blocking),
                    (&u.reason, &u.fix, u.blocking),
                    "{first}"
                );
                assert_eq!(
                    (v.reason.as_str(), v.fix.as_str()),
                    invalid_fix(Some(first))
                );
                let mut want = serde_json::to_value(&before).unwrap();
                replaced(&mut want, &pairs);
                assert_eq!(serde_json::to_value(&after).unwrap(), want, "{first}");
            }
        }
    }
}
