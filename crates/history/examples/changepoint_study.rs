//! The change-point study of `docs/changepoint-study.md`: how often
//! `history::changepoint::detect` finds known steps and drifts in synthetic
//! histories, and how often it reports a change that is not there.
//!
//! `cargo run --release -p infer-bench-history --example changepoint_study`
//!
//! Prints Markdown. Deterministic: fixed seeds, pure arithmetic.

use infer_bench_history::changepoint::Settings;
use infer_bench_history::changepoint::study::{self, History, Summary, TOLERANCE};

/// The issue's bar is over 20 seeds; 1,000 resolve a rate to about +-1.5%.
const FEW: u64 = 20;
const MANY: u64 = 1_000;

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn main() {
    let settings = Settings::default();
    println!(
        "Settings: `max_pvalue` {}, `min_segment` {}, `min_relative` {}; a step \
         is found by a point within {TOLERANCE} commits of it.\n",
        settings.max_pvalue, settings.min_segment, settings.min_relative
    );
    issue_history(&settings);
    single_steps(&settings);
    noise_levels(&settings);
    long_histories(&settings);
    noise_bands();
    defaults();
}

fn issue_history(settings: &Settings) {
    let history = History::issue_39();
    let few = study::run(&history, settings, 0..FEW);
    let many = study::run(&history, settings, 0..MANY);
    println!(
        "## The history of issue 39\n\n{} commits, level {}, {}% noise. Found: seeds \
         0-{} (the issue's bar), then seeds 0-{}.\n",
        history.commits,
        history.level,
        100.0 * history.noise,
        FEW - 1,
        MANY - 1
    );
    println!(
        "| change | found, {FEW} seeds | found, {MANY} seeds | at its commit | points per find |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (i, change) in history.changes.iter().enumerate() {
        let exact = match change {
            study::Injected::Step { .. } => pct(many.exact_share(i)),
            study::Injected::Drift { .. } => "-".to_owned(),
        };
        println!(
            "| {} | {}/{FEW} | {} | {exact} | {:.2} |",
            change.label(),
            few.found[i],
            pct(many.found_share(i)),
            many.points_per_find(i)
        );
    }
    println!(
        "| false alarms per 200 commits | {:.2} ({} in all) | {:.2} ({} in all) | | |",
        few.false_alarms_per_200(),
        few.false_alarms,
        many.false_alarms_per_200(),
        many.false_alarms
    );
    println!(
        "| of which within {} commits of a change | {} | {} | | |\n",
        TOLERANCE + study::NEAR,
        few.near,
        many.near
    );
}

fn single_steps(settings: &Settings) {
    println!(
        "## One step at commit 100 of 200, 2% noise\n\nSeeds 0-{}; the last row has \
         no step at all.\n",
        MANY - 1
    );
    println!("| step | found | at its commit | false alarms per 200 commits |");
    println!("|---|---:|---:|---:|");
    for relative in [0.02, 0.03, 0.04, 0.05, -0.05, 0.08] {
        let history = History::single_step(relative);
        let s = study::run(&history, settings, 0..MANY);
        println!(
            "| {} | {} | {} | {:.2} |",
            history.changes[0].label(),
            pct(s.found_share(0)),
            pct(s.exact_share(0)),
            s.false_alarms_per_200()
        );
    }
    let flat = study::run(&History::flat(), settings, 0..MANY);
    println!("| none | - | - | {:.2} |\n", flat.false_alarms_per_200());
}

fn noise_levels(settings: &Settings) {
    println!(
        "## A 5% step at commit 100 of 200 under more or less noise\n\nSeeds 0-{}.\n",
        MANY - 1
    );
    println!("| noise | found | at its commit | false alarms per 200 commits |");
    println!("|---:|---:|---:|---:|");
    for noise in [0.01, 0.02, 0.03, 0.05] {
        let history = History {
            noise,
            ..History::single_step(0.05)
        };
        let s = study::run(&history, settings, 0..MANY);
        println!(
            "| {} | {} | {} | {:.2} |",
            pct(noise),
            pct(s.found_share(0)),
            pct(s.exact_share(0)),
            s.false_alarms_per_200()
        );
    }
    println!();
}

/// Flat histories and the issue's history repeated, 200 to 2,000 commits:
/// do false alarms grow with the length?
fn long_histories(settings: &Settings) {
    const LONG_SEEDS: u64 = 100;
    println!(
        "## Longer histories\n\nThe history of issue 39 repeated end to end (its seven \
         changes every 200 commits), and a flat history, seeds 0-{}.\n",
        LONG_SEEDS - 1
    );
    println!(
        "| commits | 3% steps found | 5% steps found | all steps found | drifts found | \
         false alarms per 200 commits | on a flat history |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let one = History::issue_39();
    for times in [1, 5, 10] {
        let history = repeated(&one, times);
        let s = study::run(&history, settings, 0..LONG_SEEDS);
        let flat = History {
            commits: history.commits,
            ..History::flat()
        };
        let f = study::run(&flat, settings, 0..LONG_SEEDS);
        let share = |keep: &dyn Fn(&study::Injected) -> bool| {
            let (found, of) = history
                .changes
                .iter()
                .enumerate()
                .filter(|(_, c)| keep(c))
                .fold((0, 0), |(f, n), (i, _)| (f + s.found[i], n + s.seeds));
            ratio(found, of)
        };
        let step_of = |size: f64| move |c: &study::Injected| matches!(c, study::Injected::Step { relative, .. } if (relative.abs() - size).abs() < 1e-9);
        println!(
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} |",
            history.commits,
            pct(share(&step_of(0.03))),
            pct(share(&step_of(0.05))),
            pct(share(&|c| matches!(c, study::Injected::Step { .. }))),
            pct(share(&|c| matches!(c, study::Injected::Drift { .. }))),
            s.false_alarms_per_200(),
            f.false_alarms_per_200()
        );
    }
    println!();
}

/// `history` end to end `times` times, each copy's changes moved along.
fn repeated(history: &History, times: usize) -> History {
    let changes = (0..times)
        .flat_map(|k| {
            let offset = k * history.commits;
            history.changes.iter().map(move |c| match *c {
                study::Injected::Step { at, relative } => study::Injected::Step {
                    at: at + offset,
                    relative,
                },
                study::Injected::Drift {
                    start,
                    commits,
                    per_commit,
                } => study::Injected::Drift {
                    start: start + offset,
                    commits,
                    per_commit,
                },
            })
        })
        .collect();
    History {
        commits: history.commits * times,
        changes,
        ..history.clone()
    }
}

/// What `min_relative` (the gate's noise band) costs and saves.
fn noise_bands() {
    println!(
        "## With a noise band\n\n`min_relative` drops shifts smaller than the band. The \
         history of issue 39, seeds 0-{}.\n",
        MANY - 1
    );
    println!(
        "| `min_relative` | 3% step found | 5% step found | 8% step found | drifts found | \
         false alarms per 200 commits |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    let history = History::issue_39();
    for min_relative in [0.0, 0.01, 0.02, 0.03, 0.04] {
        let settings = Settings {
            min_relative,
            ..Settings::default()
        };
        let s = study::run(&history, &settings, 0..MANY);
        println!(
            "| {} | {} | {} | {} | {} | {:.2} |",
            pct(min_relative),
            pct(s.found_share(0)),
            pct(s.found_share(1)),
            pct(s.found_share(3)),
            pct(drifts(&history, &s)),
            s.false_alarms_per_200()
        );
    }
    println!();
}

#[allow(clippy::cast_precision_loss)] // counts far below 2^52
fn ratio(count: usize, of: usize) -> f64 {
    if of == 0 {
        0.0
    } else {
        count as f64 / of as f64
    }
}

/// The grid the defaults were chosen from.
fn defaults() {
    println!(
        "## How the defaults were chosen\n\nThe history of issue 39 and a flat history, \
         seeds 0-{} each.\n",
        MANY - 1
    );
    println!(
        "| `max_pvalue` | `min_segment` | 3% step found | 5% step found | drifts found | \
         false alarms per 200 commits | on a flat history |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let history = History::issue_39();
    for max_pvalue in [0.01, 0.001, 0.000_1, 0.000_01] {
        for min_segment in [3, 5, 8] {
            let settings = Settings {
                max_pvalue,
                min_segment,
                min_relative: 0.0,
            };
            let s = study::run(&history, &settings, 0..MANY);
            let flat = study::run(&History::flat(), &settings, 0..MANY);
            println!(
                "| {max_pvalue} | {min_segment} | {} | {} | {} | {:.2} | {:.2} |",
                pct(s.found_share(0)),
                pct(s.found_share(1)),
                pct(drifts(&history, &s)),
                s.false_alarms_per_200(),
                flat.false_alarms_per_200()
            );
        }
    }
}

/// The share of drifts found, both drifts together.
fn drifts(history: &History, s: &Summary) -> f64 {
    let (found, of) = history
        .changes
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c, study::Injected::Drift { .. }))
        .fold((0.0, 0.0), |(f, n), (i, _)| (f + s.found_share(i), n + 1.0));
    found / of
}
