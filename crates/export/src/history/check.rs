//! `history check`'s report ([`infer_bench_history::check::Report`]) for a
//! terminal, for a pull-request comment or a CI job summary, and as JSON.
//! Every format says the same per series: its verdict, the point and the
//! gate, how many comparable commits it has, the newest value, the newest
//! shift ("+6.1% at abc1234 (12.0 -> 12.7 ms, confidence 99.9%)") and why
//! the series restarted, if it did. Rows go most severe first: REGRESSED,
//! INSUFFICIENT, IMPROVED, UNCHANGED.

use std::collections::BTreeMap;

use infer_bench_history::check::{Report, SeriesCheck, Verdict};
use infer_bench_history::series::Series;
use infer_bench_results::exit::{EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED};
use infer_bench_results::outside;

use super::{shift_text, short, sparkline, unit_of_label};
use crate::table::{Align, Table};
use crate::verdict::markdown::Writer;
use crate::verdict::value;

/// The most bytes [`markdown`] writes by default: GitHub's comment limit
/// with room to spare, as the gate's Markdown keeps.
pub const MAX_BYTES: usize = crate::verdict::markdown::MAX_BYTES;

/// Room kept for the truncation note and the footer.
const RESERVE_BYTES: usize = 600;

/// Characters of a restart reason before it is cut.
const REASON_CHARS: usize = 200;

/// The report as pretty JSON with a final newline.
pub fn json(r: &Report) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("a history report serializes");
    s.push('\n');
    s
}

/// The report for a terminal, drawn as the command line said
/// ([`crate::term::current`]).
pub fn table(r: &Report) -> String {
    render(r, crate::term::current())
}

/// The report for a terminal: one line per series (verdict, point, gate,
/// commits, newest value, newest shift, restart reason), coloured by
/// `look`, every column shown (a row is read whole); then one summary
/// line.
pub fn render(r: &Report, look: crate::term::Look) -> String {
    let mut out = String::new();
    let rows = ordered(r);
    if !rows.is_empty() {
        let mut t = Table::new(&[
            ("verdict", Align::Left),
            ("point", Align::Left),
            ("metric", Align::Left),
            ("commits", Align::Right),
            ("newest", Align::Right),
            ("newest shift", Align::Left),
            ("restarted", Align::Left),
        ]);
        // Cells are outside text: `Table::row` keeps each to one line
        // with its control characters shown.
        for s in rows {
            let unit = unit_of_label(&s.label);
            t.row(vec![
                s.verdict.word().to_string(),
                s.slug.clone(),
                s.label.clone(),
                s.commits.to_string(),
                value(Some(s.newest), unit),
                s.shifts
                    .last()
                    .map_or_else(|| "-".to_string(), |x| shift_text(x, unit, "->")),
                if s.restarted.is_empty() {
                    "-".to_string()
                } else {
                    s.restarted.clone()
                },
            ]);
        }
        let wide = crate::term::Look { wide: true, ..look };
        out.push_str(&t.render_look(wide, &[]).0);
        out.push('\n');
    }
    out.push_str(&format!(
        "{}: {}; exit code {} ({})\n",
        outside::terminal(&r.spec),
        counts(r, false),
        r.exit_code,
        headline(r)
    ));
    out
}

/// The report as Markdown, at most `max_bytes` long (use [`MAX_BYTES`]):
/// a heading with the exit code's word ("passed", "failed: regression",
/// "could not judge"), a sentence counting the series, a table of the
/// series that regressed, could not be judged or improved (with a
/// sparkline of each series' newest comparable values, from `series`),
/// the unchanged ones in a collapsed table, and why series restarted.
/// Rows are added while they fit; a closing note counts what did not.
pub fn markdown(r: &Report, series: &[Series], max_bytes: usize) -> String {
    let values: BTreeMap<(&str, &str), Vec<f64>> = series
        .iter()
        .map(|s| {
            let v = s.current().entries.iter().map(|e| e.value).collect();
            ((s.slug.as_str(), s.label.as_str()), v)
        })
        .collect();
    let trend = |s: &SeriesCheck| {
        values
            .get(&(s.slug.as_str(), s.label.as_str()))
            .map(|v| sparkline(v))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "-".into())
    };
    let fails = r.exit_code != EXIT_OK;
    let row = |s: &SeriesCheck| {
        let unit = unit_of_label(&s.label);
        let word = match s.verdict {
            Verdict::Regressed => format!("**{}**", s.verdict.word()),
            Verdict::Insufficient if fails => format!("**{}**", s.verdict.word()),
            _ => s.verdict.word().to_string(),
        };
        let shift = s.shifts.last().map_or_else(
            || "-".to_string(),
            |x| {
                let change = super::relative(x.relative);
                let change = if x.worse && x.beyond_noise {
                    format!("**{change}**")
                } else {
                    change
                };
                format!(
                    "{change} at {} ({}, confidence {})",
                    outside::markdown_cell(&short(&x.commit)),
                    super::from_to(x.before, x.after, unit, "→"),
                    super::confidence(x.confidence)
                )
            },
        );
        format!(
            "| {word} | {} | {} | {} | {} | {shift} | {} |\n",
            outside::markdown_cell(&s.slug),
            cell(&s.label),
            s.commits,
            value(Some(s.newest), unit),
            trend(s)
        )
    };
    const HEADER: &str = "| verdict | point | metric | commits | newest | newest shift | trend |\n|---|---|---|--:|--:|---|---|\n";

    let mut w = Writer::new(max_bytes.saturating_sub(RESERVE_BYTES));
    w.force(&format!(
        "## infer-bench history: {} {}\n\n{}\n\n",
        outside::markdown_code(&r.spec),
        headline(r),
        summary_sentence(r)
    ));
    let rows = ordered(r);
    let (unchanged, judged): (Vec<&SeriesCheck>, Vec<&SeriesCheck>) = rows
        .into_iter()
        .partition(|s| s.verdict == Verdict::Unchanged);
    if !judged.is_empty() {
        w.table_header(HEADER);
        for s in &judged {
            w.row(&row(s));
        }
        w.end_table();
    }
    if !unchanged.is_empty() {
        let mut items = vec![HEADER.to_string()];
        items.extend(unchanged.iter().map(|s| row(s)));
        w.collapsed(
            &format!("{} unchanged", count_series(unchanged.len())),
            &items,
        );
    }
    let restarted: Vec<&SeriesCheck> = r
        .series
        .iter()
        .filter(|s| !s.restarted.is_empty())
        .collect();
    if !restarted.is_empty() {
        w.section("### Restarted series\n\nEach series below is judged from the commit where it became comparable again:\n\n");
        for s in restarted {
            w.push(&format!(
                "- {} {}: {}\n",
                outside::markdown_code(&s.slug),
                cell(&s.label),
                quote(&s.restarted)
            ));
        }
        w.push("\n");
    }
    w.finish_pointing(
        "`infer-bench history check --format json`",
        &format!(
            "<sub>infer-bench {} · {} records · exit code {} ({})</sub>\n",
            env!("CARGO_PKG_VERSION"),
            r.records,
            r.exit_code,
            headline(r)
        ),
    )
}

/// The series, most severe first, then by point and gate.
fn ordered(r: &Report) -> Vec<&SeriesCheck> {
    let mut rows: Vec<&SeriesCheck> = r.series.iter().collect();
    rows.sort_by(|a, b| {
        (severity(a.verdict), &a.slug, &a.label).cmp(&(severity(b.verdict), &b.slug, &b.label))
    });
    rows
}

fn severity(v: Verdict) -> u8 {
    match v {
        Verdict::Regressed => 0,
        Verdict::Insufficient => 1,
        Verdict::Improved => 2,
        Verdict::Unchanged => 3,
    }
}

/// The word of the heading, true to the exit code.
pub(crate) fn headline(r: &Report) -> String {
    match r.exit_code {
        EXIT_OK => "passed".into(),
        EXIT_FAILED => "failed: regression".into(),
        EXIT_UNJUDGED => "could not judge".into(),
        code => format!("failed (exit code {code})"),
    }
}

/// "12 series over 40 records: **1 regressed**, 1 improved, 10 unchanged."
fn summary_sentence(r: &Report) -> String {
    if r.series.is_empty() {
        return format!(
            "No series to judge over {}: nothing recorded for this spec yet.",
            count_records(r.records)
        );
    }
    format!("{}.", counts(r, true))
}

/// The series counted by verdict; what fails the check is bold when
/// `bold` (Markdown).
pub(crate) fn counts(r: &Report, bold: bool) -> String {
    let fails = r.exit_code != EXIT_OK;
    let parts: Vec<String> = [
        (Verdict::Regressed, "regressed", true),
        (
            Verdict::Insufficient,
            "could not be judged (too few comparable commits)",
            fails,
        ),
        (Verdict::Improved, "improved", false),
        (Verdict::Unchanged, "unchanged", false),
    ]
    .into_iter()
    .filter_map(|(v, words, failing)| {
        let n = r.series.iter().filter(|s| s.verdict == v).count();
        (n > 0).then(|| {
            if failing && bold {
                format!("**{n} {words}**")
            } else {
                format!("{n} {words}")
            }
        })
    })
    .collect();
    let head = format!(
        "{} over {}",
        count_series(r.series.len()),
        count_records(r.records)
    );
    if parts.is_empty() {
        head
    } else {
        format!("{head}: {}", parts.join(", "))
    }
}

fn count_series(n: usize) -> String {
    format!("{n} series")
}

fn count_records(n: usize) -> String {
    if n == 1 {
        "1 record".into()
    } else {
        format!("{n} records")
    }
}

/// Outside text in a table cell: one line, read as the characters it
/// holds.
fn cell(s: &str) -> String {
    outside::markdown_text(&s.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Outside text in prose: [`cell`], at most [`REASON_CHARS`] characters.
fn quote(s: &str) -> String {
    let one = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut = if one.chars().count() > REASON_CHARS {
        one.chars().take(REASON_CHARS - 3).collect::<String>() + "..."
    } else {
        one
    };
    outside::markdown_text(&cut)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{HOSTILE, history, report, series_check, shift};
    use super::*;

    fn sample() -> Report {
        let mut restarted = series_check("sim.b", "ttft p99", Verdict::Insufficient, vec![]);
        restarted.restarted =
            "the environment changed at c9 (sim_gpu: h100 -> b200; last comparable c8)".into();
        restarted.commits = 2;
        report(
            vec![
                series_check("sim.a", "output_tokens_per_s", Verdict::Unchanged, vec![]),
                series_check(
                    "sim.a",
                    "tpot p50",
                    Verdict::Regressed,
                    vec![shift("abc1234def", 12.0, 12.732, true)],
                ),
                restarted,
            ],
            EXIT_FAILED,
        )
    }

    #[test]
    fn history_check_table_has_a_line_per_series_most_severe_first() {
        let text = render(&sample(), crate::term::Look::default());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 3 + 2, "{text}");
        assert!(lines[0].starts_with("verdict"), "{text}");
        assert!(lines[1].starts_with("REGRESSED"), "{text}");
        assert!(
            lines[1].contains("+6.1% at abc1234 (12.0 -> 12.7 ms, confidence 99.9%)"),
            "{text}"
        );
        assert!(lines[1].contains("12.7 ms"), "{text}");
        assert!(lines[2].starts_with("INSUFFICIENT"), "{text}");
        assert!(lines[2].contains("sim_gpu: h100 -> b200"), "{text}");
        assert!(lines[3].starts_with("UNCHANGED"), "{text}");
        assert_eq!(
            lines[5],
            "q: 3 series over 12 records: 1 regressed, 1 could not be judged (too few comparable commits), 1 unchanged; exit code 1 (failed: regression)"
        );
        // Colour only when asked.
        assert!(!text.contains('\u{1b}'));
        let coloured = render(
            &sample(),
            crate::term::Look {
                color: true,
                wide: false,
            },
        );
        assert!(coloured.contains("\u{1b}[1;31mREGRESSED"), "{coloured}");
    }

    #[test]
    fn history_check_table_shows_hostile_text_inert() {
        let mut r = sample();
        r.spec = "::error::spec".into();
        r.series[1].slug = HOSTILE.into();
        r.series[1].shifts[0].commit = "\u{1b}]52;c;QQ==\u{7}".into();
        let text = render(&r, crate::term::Look::default());
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
        assert!(text.contains("\\x1b[31m"), "{text}");
        for line in text.lines() {
            assert!(!line.starts_with("::"), "{line}");
        }
        // The slug's line break stays inside its row.
        assert_eq!(text.lines().count(), 6, "{text}");
    }

    #[test]
    fn history_check_markdown_has_a_table_with_sparklines() {
        let records = history(&[10.0, 10.1, 9.9, 10.0, 12.0, 12.1, 11.9, 12.0]);
        let series = infer_bench_history::series::series(&records);
        let md = markdown(&sample(), &series, MAX_BYTES);
        assert!(
            md.starts_with(
                "## infer-bench history: `q` failed: regression\n\n3 series over 12 records: **1 regressed**, **1 could not be judged (too few comparable commits)**, 1 unchanged.\n\n"
            ),
            "{md}"
        );
        assert!(md.contains(HEADER_LINE), "{md}");
        assert!(
            md.contains(
                "| **REGRESSED** | `sim.a` | tpot p50 | 12 | 12.7 ms | **+6.1%** at `abc1234` (12.0 → 12.7 ms, confidence 99.9%) | ▁▂▁▁██▇█ |\n"
            ),
            "{md}"
        );
        // A series without values has no trend.
        assert!(
            md.contains("| **INSUFFICIENT** | `sim.b` | ttft p99 | 2 |"),
            "{md}"
        );
        assert!(
            md.contains("<details><summary>1 series unchanged</summary>"),
            "{md}"
        );
        assert!(
            md.contains("- `sim.b` ttft p99: the environment changed at c9 (sim\\_gpu: h100 -\\> b200; last comparable c8)\n"),
            "{md}"
        );
        assert!(
            md.trim_end()
                .ends_with("exit code 1 (failed: regression)</sub>"),
            "{md}"
        );
        assert!(!md.contains("cut to stay under"), "{md}");
    }

    const HEADER_LINE: &str = "| verdict | point | metric | commits | newest | newest shift | trend |\n|---|---|---|--:|--:|---|---|\n";

    #[test]
    fn history_check_markdown_builds_nothing_from_hostile_text() {
        let mut r = sample();
        r.spec = "::error::spec\n::warning::x".into();
        r.series[1].slug = HOSTILE.into();
        r.series[1].label = "tpot | p50 <b>@here</b>".into();
        r.series[2].restarted = "[click](javascript:alert(1)) <script>\n::error::x".into();
        let md = markdown(&r, &[], MAX_BYTES);
        // Inside a code span Markdown builds nothing: look outside them.
        let prose: String = md.split('`').step_by(2).collect();
        for bad in ["<script>", "<b>", "\n::", "\u{1b}", "click](", "@here"] {
            assert!(!prose.contains(bad), "{bad:?} in {md}");
        }
        assert!(!md.contains("\n::") && !md.contains('\u{1b}'), "{md}");
        // Every table row still has its seven columns.
        for line in md.lines().filter(|l| l.starts_with("| ")) {
            let cells = line.replace("\\|", "").matches('|').count();
            assert_eq!(cells, 8, "{line}");
        }
    }

    #[test]
    fn history_check_markdown_stays_under_its_budget() {
        let many: Vec<SeriesCheck> = (0..2000)
            .map(|i| {
                series_check(
                    &format!("sim.p{i:04}"),
                    "tpot p50",
                    Verdict::Improved,
                    vec![],
                )
            })
            .collect();
        let md = markdown(&report(many, EXIT_OK), &[], 8_000);
        assert!(md.len() <= 8_000, "{}", md.len());
        assert!(md.contains("cut to stay under"), "{md}");
        assert!(
            md.contains("`infer-bench history check --format json`"),
            "{md}"
        );
    }

    #[test]
    fn history_check_empty_reports_render() {
        let r = report(vec![], EXIT_UNJUDGED);
        let md = markdown(&r, &[], MAX_BYTES);
        assert!(md.contains("could not judge"), "{md}");
        assert!(md.contains("No series to judge over 12 records"), "{md}");
        let text = render(&r, crate::term::Look::default());
        assert_eq!(
            text,
            "q: 0 series over 12 records; exit code 4 (could not judge)\n"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
        assert_eq!(v["series"].as_array().unwrap().len(), 0);
    }

    #[test]
    fn history_check_json_reads_back() {
        let mut r = sample();
        r.series[1].slug = HOSTILE.into();
        let text = json(&r);
        assert!(text.ends_with('\n'));
        assert!(!text.contains('\u{1b}'), "serde escapes controls");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["exit_code"], 1);
        assert_eq!(v["series"][1]["slug"], HOSTILE);
        assert_eq!(v["series"][1]["verdict"], "REGRESSED");
        assert_eq!(v["series"][1]["shifts"][0]["commit"], "abc1234def");
    }
}
