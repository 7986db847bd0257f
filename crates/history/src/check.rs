//! `history check`: change points in every series' newest comparable
//! stretch, and a verdict per series on typed data. A series is REGRESSED
//! when its newest shift is a change for the worse larger than the gate's
//! noise band (main sits at the worse level now), IMPROVED when that shift
//! is for the better, UNCHANGED when it has none beyond the band, and
//! INSUFFICIENT when it is too short to look for one. What could not be
//! judged does not pass: INSUFFICIENT exits 4 unless allowed.

use serde::Serialize;

use crate::changepoint::{self, ChangePoint};
use crate::series::{Segment, Series};
use infer_bench_results::exit::{EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED};

/// How a check judges.
#[derive(Debug, Clone)]
pub struct Settings {
    pub changepoint: changepoint::Settings,
    /// Series shorter than this are INSUFFICIENT.
    pub min_commits: usize,
    /// INSUFFICIENT series do not fail the check.
    pub allow_unjudged: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        let changepoint = changepoint::Settings::default();
        Settings {
            min_commits: 2 * changepoint.min_segment,
            changepoint,
            allow_unjudged: false,
        }
    }
}

/// The verdict on one series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    Regressed,
    Improved,
    Unchanged,
    Insufficient,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Regressed => "REGRESSED",
            Verdict::Improved => "IMPROVED",
            Verdict::Unchanged => "UNCHANGED",
            Verdict::Insufficient => "INSUFFICIENT",
        }
    }
}

/// A shift in level found in a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shift {
    /// The first commit at the new level.
    pub commit: String,
    pub time: String,
    /// The last commit at the old level.
    pub previous_commit: String,
    pub before: f64,
    pub after: f64,
    /// (after - before) / |before|.
    pub relative: f64,
    /// 1 - the split's p-value.
    pub confidence: f64,
    /// For the worse (slower, fewer tokens/s, more errors).
    pub worse: bool,
    /// Larger than the gate's noise band.
    pub beyond_noise: bool,
}

/// The check of one series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesCheck {
    pub slug: String,
    pub label: String,
    pub noise_pct: f64,
    /// Commits in the newest comparable stretch.
    pub commits: usize,
    /// Its first commit.
    pub since: String,
    /// The newest commit's value.
    pub newest: f64,
    /// Why the stretch began where it did, when an earlier one was cut off.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub restarted: String,
    pub shifts: Vec<Shift>,
    pub verdict: Verdict,
}

/// Every series' check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub spec: String,
    pub records: usize,
    pub series: Vec<SeriesCheck>,
    pub exit_code: u8,
}

/// Checks every series of `spec`.
pub fn check(spec: &str, records: usize, all: &[Series], settings: &Settings) -> Report {
    let series: Vec<SeriesCheck> = all.iter().map(|s| one(s, settings)).collect();
    let regressed = series.iter().any(|s| s.verdict == Verdict::Regressed);
    let unjudged = series.is_empty() || series.iter().any(|s| s.verdict == Verdict::Insufficient);
    let exit_code = if regressed {
        EXIT_FAILED
    } else if unjudged && !settings.allow_unjudged {
        EXIT_UNJUDGED
    } else {
        EXIT_OK
    };
    Report {
        spec: spec.to_string(),
        records,
        series,
        exit_code,
    }
}

/// The shifts of a segment, as found by change-point detection.
pub fn shifts(
    seg: &Segment,
    higher_is_worse: bool,
    noise_pct: f64,
    settings: &changepoint::Settings,
) -> Vec<Shift> {
    let values: Vec<f64> = seg.entries.iter().map(|e| e.value).collect();
    changepoint::detect(&values, settings)
        .into_iter()
        .filter(|c| c.index > 0 && c.index < seg.entries.len())
        .map(|c: ChangePoint| {
            let at = &seg.entries[c.index];
            Shift {
                commit: at.commit.clone(),
                time: at.time.clone(),
                previous_commit: seg.entries[c.index - 1].commit.clone(),
                before: c.before,
                after: c.after,
                relative: c.relative,
                confidence: (1.0 - c.pvalue).clamp(0.0, 1.0),
                worse: (c.after > c.before) == higher_is_worse,
                beyond_noise: c.relative.abs() * 100.0 > noise_pct,
            }
        })
        .collect()
}

fn one(s: &Series, settings: &Settings) -> SeriesCheck {
    let seg = s.current();
    let commits = seg.entries.len();
    let shifts = if commits >= settings.min_commits {
        shifts(seg, s.higher_is_worse, s.noise_pct, &settings.changepoint)
    } else {
        Vec::new()
    };
    let verdict = if commits < settings.min_commits {
        Verdict::Insufficient
    } else {
        match shifts.iter().rev().find(|x| x.beyond_noise) {
            Some(x) if x.worse => Verdict::Regressed,
            Some(_) => Verdict::Improved,
            None => Verdict::Unchanged,
        }
    };
    SeriesCheck {
        slug: s.slug.clone(),
        label: s.label.clone(),
        noise_pct: s.noise_pct,
        commits,
        since: seg
            .entries
            .first()
            .map(|e| e.commit.clone())
            .unwrap_or_default(),
        newest: seg.entries.last().map_or(f64::NAN, |e| e.value),
        restarted: seg.started_because.clone(),
        shifts,
        verdict,
    }
}
