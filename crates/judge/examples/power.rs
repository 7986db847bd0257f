//! The power study of the regression gate (docs/regression.md, "Power,
//! measured"): how often a real TPOT slowdown is REGRESSED, and an unchanged
//! server too, by simulator noise, runs and rule; and the same on the
//! recorded simulator runs of `tests/fixtures/judge/noisy-runs.json`.
//!
//! `cargo run --release -p infer-bench-judge --example power`
//! (`-- --search` adds the grid of candidate rules the defaults were chosen
//! from.) Deterministic: fixed seeds, pure arithmetic.

use infer_bench_judge::power::{self, Cell, Rule, Stop};

/// Trials per cell: a 1% false-alarm rate is resolved to about +-0.2%.
const TRIALS: usize = 10_000;
const SEED: u64 = 20_260_515;

/// The recommended TPOT p50 gate.
const CHOSEN: Rule = Rule {
    noise: 0.01,
    confidence: 0.95,
    spread: false,
};
/// The rule before the study: 5% band widened to twice the baseline's CV.
const BEFORE: Rule = Rule {
    noise: 0.05,
    confidence: 0.95,
    spread: true,
};

const SIGMAS: [f64; 3] = [0.01, 0.02, 0.05];
const RUNS: [usize; 4] = [3, 5, 8, 10];
const SLOWDOWNS: [f64; 4] = [0.0, 0.03, 0.05, 0.10];

fn pct(x: f64) -> String {
    format!("{:.1}", 100.0 * x)
}

fn seed_of(parts: &[u64]) -> u64 {
    parts
        .iter()
        .fold(SEED, |h, p| h.wrapping_mul(0x100_0000_01b3) ^ p)
}

fn cell(sigma: f64, residual: f64, runs: usize, slowdown: f64) -> Cell {
    Cell {
        sigma,
        residual,
        base_runs: runs,
        new_runs: runs,
        slowdown,
    }
}

fn describe(rule: Rule) -> String {
    format!(
        "band {}%{}, confidence {}%",
        100.0 * rule.noise,
        if rule.spread {
            " widened to 2 CV(base)"
        } else {
            ""
        },
        100.0 * rule.confidence
    )
}

/// REGRESSED % by noise, runs and slowdown under `rule`.
fn table(rule: Rule, residual: f64) {
    println!(
        "\n### REGRESSED % ({}; residual {}%; {TRIALS} trials a cell)\n",
        describe(rule),
        100.0 * residual
    );
    println!("| noise | runs a side | s = 0 | s = 3% | s = 5% | s = 10% |");
    println!("|---|---|---|---|---|---|");
    for (a, &sigma) in SIGMAS.iter().enumerate() {
        for (b, &runs) in RUNS.iter().enumerate() {
            let cells: Vec<String> = SLOWDOWNS
                .iter()
                .enumerate()
                .map(|(c, &s)| {
                    let t = power::simulate(
                        seed_of(&[a as u64, b as u64, c as u64]),
                        TRIALS,
                        &cell(sigma, residual, runs, s),
                        rule,
                    );
                    pct(t.regressed_share())
                })
                .collect();
            println!("| {}% | {runs} | {} |", 100.0 * sigma, cells.join(" | "));
        }
    }
}

/// All four verdicts for the headline cells.
fn breakdown(rule: Rule, residual: f64) {
    println!(
        "\n### All verdicts at 2% noise ({}; residual {}%)\n",
        describe(rule),
        100.0 * residual
    );
    println!("| runs | slowdown | REGRESSED | IMPROVED | UNCHANGED | INCONCLUSIVE |");
    println!("|---|---|---|---|---|---|");
    for (b, &runs) in RUNS.iter().enumerate() {
        for (c, &s) in SLOWDOWNS.iter().enumerate() {
            let t = power::simulate(
                seed_of(&[9, b as u64, c as u64]),
                TRIALS,
                &cell(0.02, residual, runs, s),
                rule,
            );
            let n = t.trials() as f64;
            println!(
                "| {runs} | {}% | {} | {} | {} | {} |",
                100.0 * s,
                pct(t.regressed as f64 / n),
                pct(t.improved as f64 / n),
                pct(t.unchanged as f64 / n),
                pct(t.inconclusive as f64 / n)
            );
        }
    }
}

/// Candidate rules at 2% noise: power at 5% and false alarms at 0.
fn search(residual: f64) {
    println!(
        "\n### Candidates at 2% noise (residual {}%): REGRESSED % at s = 5% / s = 0\n",
        100.0 * residual
    );
    let bands = [0.0, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05];
    print!("| confidence | runs |");
    for band in bands {
        print!(" band {}% |", 100.0 * band);
    }
    println!();
    println!("|---|---|{}", "---|".repeat(bands.len()));
    for (a, confidence) in [0.90, 0.95, 0.99].into_iter().enumerate() {
        for runs in [3, 4, 5, 6, 7, 8, 10] {
            print!("| {}% | {runs} |", 100.0 * confidence);
            for (c, noise) in bands.into_iter().enumerate() {
                let rule = Rule {
                    noise,
                    confidence,
                    spread: false,
                };
                let seed = seed_of(&[7, a as u64, runs as u64, c as u64]);
                let hit = power::simulate(seed, 4000, &cell(0.02, residual, runs, 0.05), rule);
                let fa = power::simulate(seed ^ 1, 4000, &cell(0.02, residual, runs, 0.0), rule);
                print!(
                    " {} / {} |",
                    pct(hit.regressed_share()),
                    pct(fa.regressed_share())
                );
            }
            println!();
        }
    }
}

/// Sequential checks against a baseline of `base_runs` runs.
fn sequential(rule: Rule, residual: f64) {
    println!(
        "\n### Sequential checks at 2% noise ({}; residual {}%): REGRESSED % and mean new runs\n",
        describe(rule),
        100.0 * residual
    );
    println!("| baseline runs | looks at | stop when | s = 0 | s = 3% | s = 5% | s = 10% |");
    println!("|---|---|---|---|---|---|---|");
    let designs: [(usize, &[usize], Stop); 7] = [
        (8, &[8], Stop::Decided),
        (8, &[3, 5, 8], Stop::Decided),
        (8, &[3, 5, 8], Stop::Margin),
        (8, &[3, 4, 5, 6, 7, 8], Stop::Margin),
        (10, &[3, 4, 5, 6, 7, 8, 9, 10], Stop::Margin),
        (10, &[3, 4, 5, 6, 7, 8], Stop::Margin),
        (5, &[3, 4, 5], Stop::Margin),
    ];
    for (d, (base_runs, looks, stop)) in designs.into_iter().enumerate() {
        let cells: Vec<String> = SLOWDOWNS
            .iter()
            .enumerate()
            .map(|(c, &s)| {
                let cell = Cell {
                    sigma: 0.02,
                    residual,
                    base_runs,
                    new_runs: *looks.last().unwrap(),
                    slowdown: s,
                };
                let r = power::sequential(
                    seed_of(&[11, d as u64, c as u64]),
                    TRIALS,
                    &cell,
                    rule,
                    looks,
                    stop,
                    0.05,
                );
                format!(
                    "{} ({:.1} runs)",
                    pct(r.tally.regressed_share()),
                    r.mean_new_runs
                )
            })
            .collect();
        let looks: Vec<String> = looks.iter().map(|l| l.to_string()).collect();
        let stop = match stop {
            Stop::Decided => "decided",
            Stop::Margin => "decided, or +5% ruled out",
        };
        println!(
            "| {base_runs} | {} | {stop} | {} |",
            looks.join(", "),
            cells.join(" | ")
        );
    }
}

/// Per-run values of the recorded simulator runs, by statistic.
fn recorded() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/judge/noisy-runs.json"
    );
    let text = std::fs::read_to_string(path).expect("the recorded runs");
    serde_json::from_str(&text).expect("JSON")
}

fn column(recorded: &serde_json::Value, key: &str) -> Vec<f64> {
    recorded["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["run"][key].as_f64().expect("a number"))
        .collect()
}

/// The cross-check: the Monte Carlo against resampled recorded runs.
fn cross_check(rule: Rule) {
    let recorded = recorded();
    let tpot = column(&recorded, "tpot_p50");
    let logs: Vec<f64> = tpot.iter().map(|v| v.ln()).collect();
    let sd = infer_bench_judge::stats::standard_deviation(&logs).unwrap();
    // The simulator's 2% speed noise accounts for sd 2%; the rest is the
    // residual (short runs of 80 requests on a shared machine).
    let residual = (sd * sd - 0.02 * 0.02).max(0.0).sqrt();
    println!(
        "\n### Recorded runs (tests/fixtures/judge/noisy-runs.json, {} runs at 2% noise): \
         TPOT p50 varies by {:.2}% between runs (log sd), i.e. a residual of about {:.1}% \
         beyond the 2% speed noise\n",
        tpot.len(),
        100.0 * sd,
        100.0 * residual
    );
    println!(
        "REGRESSED % ({}; resampled: {TRIALS} random disjoint draws from the 30 runs, new side \
         multiplied by 1 + s; simulated: 2% noise with a {:.1}% residual)\n",
        describe(rule),
        100.0 * residual
    );
    println!("| runs a side | | s = 0 | s = 3% | s = 5% | s = 10% |");
    println!("|---|---|---|---|---|---|");
    for (b, &runs) in RUNS.iter().enumerate() {
        let mut resampled = Vec::new();
        let mut simulated = Vec::new();
        for (c, &s) in SLOWDOWNS.iter().enumerate() {
            let seed = seed_of(&[13, b as u64, c as u64]);
            let t = power::resample(seed, TRIALS, &tpot, runs, s, rule).unwrap();
            resampled.push(pct(t.regressed_share()));
            let t = power::simulate(seed, TRIALS, &cell(0.02, residual, runs, s), rule);
            simulated.push(pct(t.regressed_share()));
        }
        println!("| {runs} | recorded | {} |", resampled.join(" | "));
        println!("| {runs} | simulated | {} |", simulated.join(" | "));
    }
    point_false_alarms(&recorded, rule.confidence);
}

/// False alarms per point on the recorded runs: the gates of an unchanged
/// point judged together, each with the band it would have; a point alarms
/// when any gate is REGRESSED.
fn point_false_alarms(recorded: &serde_json::Value, confidence: f64) {
    println!(
        "\nPer point on the recorded runs, {}% confidence: the share of comparisons with a \
         REGRESSED gate among TTFT p50, TPOT p50, E2E mean and output throughput (the \
         error rate is zero throughout), unchanged (s = 0) and 5% slower (every time \
         times 1.05, throughput divided by it); then each gate at s = 0\n",
        100.0 * confidence
    );
    println!(
        "| bands (TTFT p50, TPOT p50, E2E, tok/s) | runs a side | any gate, s = 0 | any gate, s = 5% | TTFT p50 | TPOT p50 | E2E mean | output tok/s |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let band_sets: [[f64; 4]; 3] = [
        [0.05, 0.05, 0.05, 0.05],
        [0.01, 0.01, 0.01, 0.01],
        [0.02, 0.01, 0.02, 0.02],
    ];
    for (k, bands) in band_sets.into_iter().enumerate() {
        for &runs in &RUNS {
            let seed = seed_of(&[17, k as u64, runs as u64]);
            let a = point_alarms_with(recorded, bands, confidence, runs, 0.0, seed);
            let hit = point_alarms_with(recorded, bands, confidence, runs, 0.05, seed);
            let names: Vec<String> = bands.iter().map(|b| format!("{}%", 100.0 * b)).collect();
            println!(
                "| {} | {runs} | {} | {} | {} | {} | {} | {} |",
                names.join(", "),
                pct(a[0]),
                pct(hit[0]),
                pct(a[1]),
                pct(a[2]),
                pct(a[3]),
                pct(a[4])
            );
        }
    }
}

/// The share of resampled unchanged comparisons of the recorded point
/// (`runs` against `runs`) with any gate REGRESSED, then per gate (TTFT
/// p50, TPOT p50, E2E mean, output throughput), every gate judged by `rule`.
fn point_alarms(recorded: &serde_json::Value, rule: Rule, runs: usize, seed: u64) -> [f64; 5] {
    point_alarms_with(recorded, [rule.noise; 4], rule.confidence, runs, 0.0, seed)
}

/// Like [`point_alarms`], with each gate's own band, and the new side
/// `1 + slowdown` times slower (latencies multiplied, throughput divided).
fn point_alarms_with(
    recorded: &serde_json::Value,
    bands: [f64; 4],
    confidence: f64,
    runs: usize,
    slowdown: f64,
    seed: u64,
) -> [f64; 5] {
    use infer_bench_judge::stats::{self, Verdict};
    use rand::{RngExt, SeedableRng};
    // (statistic, higher is worse)
    let gates: [(&str, bool); 4] = [
        ("ttft_p50", true),
        ("tpot_p50", true),
        ("e2e_mean", true),
        ("output_tokens_per_s", false),
    ];
    let columns: Vec<Vec<f64>> = gates.iter().map(|g| column(recorded, g.0)).collect();
    let count = columns[0].len();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..count).collect();
    let mut alarms = [0usize; 5];
    for _ in 0..TRIALS {
        for i in 0..2 * runs {
            let j = i + rng.random_range(0..count - i);
            order.swap(i, j);
        }
        let mut alarmed = false;
        for (g, &(_, higher_is_worse)) in gates.iter().enumerate() {
            let base: Vec<f64> = order[..runs].iter().map(|&i| columns[g][i]).collect();
            let factor = if higher_is_worse {
                1.0 + slowdown
            } else {
                1.0 / (1.0 + slowdown)
            };
            let new: Vec<f64> = order[runs..2 * runs]
                .iter()
                .map(|&i| columns[g][i] * factor)
                .collect();
            let j = stats::judge(&base, &new, higher_is_worse, bands[g], confidence).unwrap();
            if j.verdict == Verdict::Regressed {
                alarms[g + 1] += 1;
                alarmed = true;
            }
        }
        alarms[0] += usize::from(alarmed);
    }
    alarms.map(|a| a as f64 / TRIALS as f64)
}

/// The shortlisted rules side by side: at 2% noise, power at 5% and false
/// alarms, without and with the recorded runs' residual, and on the recorded
/// runs themselves (TPOT p50, and any of the point's four gates).
fn shortlist(candidates: &[(Rule, usize)]) {
    let recorded = recorded();
    let tpot = column(&recorded, "tpot_p50");
    println!(
        "\n### Shortlist at 2% noise: REGRESSED % at s = 5% / s = 0 ({TRIALS} trials a cell)\n"
    );
    println!(
        "| confidence | band | runs | simulated | with 1.9% residual | recorded TPOT p50 | recorded point, any gate (s = 0) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (k, &(rule, runs)) in candidates.iter().enumerate() {
        let seed = seed_of(&[19, k as u64]);
        let both = |residual: f64| {
            let hit = power::simulate(seed, TRIALS, &cell(0.02, residual, runs, 0.05), rule);
            let fa = power::simulate(seed ^ 1, TRIALS, &cell(0.02, residual, runs, 0.0), rule);
            format!(
                "{} / {}",
                pct(hit.regressed_share()),
                pct(fa.regressed_share())
            )
        };
        let hit = power::resample(seed, TRIALS, &tpot, runs, 0.05, rule).unwrap();
        let fa = power::resample(seed ^ 1, TRIALS, &tpot, runs, 0.0, rule).unwrap();
        let point = point_alarms(&recorded, rule, runs, seed);
        println!(
            "| {}% | {}% | {runs} | {} | {} | {} / {} | {} |",
            100.0 * rule.confidence,
            100.0 * rule.noise,
            both(0.0),
            both(0.019),
            pct(hit.regressed_share()),
            pct(fa.regressed_share()),
            pct(point[0]),
        );
    }
}

fn main() {
    let search_too = std::env::args().any(|a| a == "--search");
    println!("# Power of the regression gate (TPOT p50; seed {SEED})");
    table(BEFORE, 0.0);
    table(CHOSEN, 0.0);
    breakdown(CHOSEN, 0.0);
    sequential(CHOSEN, 0.0);
    cross_check(CHOSEN);
    let r = |noise, confidence| Rule {
        noise,
        confidence,
        spread: false,
    };
    shortlist(&[
        (r(0.01, 0.90), 6),
        (r(0.01, 0.90), 7),
        (r(0.005, 0.95), 7),
        (r(0.01, 0.95), 8),
        (r(0.015, 0.90), 8),
        (r(0.01, 0.95), 10),
        (r(0.02, 0.95), 10),
    ]);
    if search_too {
        search(0.0);
    }
}
