//! The answer of a capacity search (`[load] search`): the highest load
//! level that met the search's target, with its uncertainty: the last
//! passing probe and the first failing one bracket the capacity, and the
//! interval between them is what the search could not resolve. Each probe
//! is also a point of its own in `points` (by its ID).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One capacity search of a results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchResult {
    /// The plan's point that stood for the search (`...search-r1-r32-<hash>`).
    pub id: String,
    pub slug: String,
    /// "rate" (requests/s, open loop) or "concurrency" (closed loop).
    pub over: String,
    /// What a probe had to meet: "slo" or "goodput >= 95%".
    pub target: String,
    /// The precision asked, in percent: the search ends when the first
    /// failing level is at most this far above the last passing one.
    pub precision_pct: f64,
    /// The range searched.
    pub from: f64,
    pub to: f64,
    /// How the search ended.
    pub outcome: SearchOutcome,
    /// The highest level that passed: the capacity is at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pass: Option<SearchProbe>,
    /// The lowest level that did not pass (above `last_pass`): the
    /// capacity is below this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_fail: Option<SearchProbe>,
    /// Every probe, in the order run.
    pub probes: Vec<SearchProbe>,
}

/// How a capacity search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SearchOutcome {
    /// The last pass and the first failure are within the precision.
    Found,
    /// The first probe (`from`) did not pass: the capacity is below the range.
    BelowRange,
    /// Every probe passed up to `to`: the capacity is at least `to`.
    AboveRange,
    /// Two probes could not be told apart any more (adjacent
    /// concurrencies, or rates equal once rounded) before the precision was
    /// reached: the interval is as narrow as the levels allow.
    Resolution,
    /// The run was interrupted, or the server died, before the search ended.
    Unfinished,
}

impl SearchOutcome {
    pub fn name(self) -> &'static str {
        match self {
            SearchOutcome::Found => "found",
            SearchOutcome::BelowRange => "below range",
            SearchOutcome::AboveRange => "above range",
            SearchOutcome::Resolution => "at resolution",
            SearchOutcome::Unfinished => "unfinished",
        }
    }
}

/// One probe of a search: a point at one level, and what it showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchProbe {
    /// The probe's point ID in `points`.
    pub id: String,
    /// Its level: requests/s or a concurrency.
    pub level: f64,
    pub verdict: ProbeVerdict,
}

/// What one probe showed. Only `pass` passes: an INVALID probe proves
/// nothing about the server, so the search treats it as not passing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProbeVerdict {
    /// Valid, and met the target.
    Pass,
    /// Valid, and missed the target.
    Fail,
    /// Measured but INVALID (see the point's `invalid_reasons`).
    Invalid,
    /// Could not be measured (see the point's `failure`).
    Failed,
}

impl ProbeVerdict {
    pub fn passed(self) -> bool {
        self == ProbeVerdict::Pass
    }
    pub fn name(self) -> &'static str {
        match self {
            ProbeVerdict::Pass => "pass",
            ProbeVerdict::Fail => "fail",
            ProbeVerdict::Invalid => "INVALID",
            ProbeVerdict::Failed => "failed",
        }
    }
}

impl SearchResult {
    /// The unit of its levels: "req/s" or "concurrent".
    pub fn unit(&self) -> &'static str {
        if self.over == "rate" {
            "req/s"
        } else {
            "concurrent"
        }
    }

    /// The capacity found, in one phrase with its uncertainty:
    /// `6.25 req/s (passes at 6.25, fails at 6.5: +4.0%)`.
    pub fn answer(&self) -> String {
        let n = |x: f64| crate::metric::fmt_number(x);
        let unit = self.unit();
        match (&self.last_pass, &self.first_fail) {
            (Some(p), Some(f)) => format!(
                "{} {unit} (passes at {}, fails at {}: +{:.1}%)",
                n(p.level),
                n(p.level),
                n(f.level),
                (f.level / p.level - 1.0) * 100.0
            ),
            (Some(p), None) => format!("at least {} {unit} (every probe passed)", n(p.level)),
            (None, Some(f)) => format!("below {} {unit} (the first probe failed)", n(f.level)),
            (None, None) => "no answer (no probe finished)".to_string(),
        }
    }
}
