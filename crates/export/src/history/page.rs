//! The history as one offline HTML page: per point and metric an SVG
//! chart of the value over main's commits (oldest to newest), each
//! comparable stretch drawn as its own line with a marked break and the
//! reason it restarted, the gate's noise band shaded around the newest
//! level, change points marked with their relative change and listed
//! with their commits, and the pull request's value (when given) as the
//! last mark, in another colour.
//!
//! Nothing is fetched and nothing runs: charts are inline SVG
//! ([`crate::chart`], without the namespace URL an inline SVG does not
//! need), styles are inline ([`crate::report::html::STYLE`]), fonts are
//! the system's, there is no script. The only URLs on the page are the
//! commit links, and only when an `https://` prefix is given
//! ([`commit_url`]). All text from records is escaped
//! ([`crate::xml::escape`]).

use std::fmt::Write as _;

use infer_bench_history::check::{Report, SeriesCheck, Shift, Verdict};
use infer_bench_history::record::Record;
use infer_bench_history::series::Series;

use super::{confidence, from_to, relative, short, unit_of};
use crate::chart::{self, Axis, Band, Chart, NEUTRAL, Point, RefLine, Stroke};
use crate::verdict::value;
use crate::xml::escape;

/// The palette index of main's line and band.
const MAIN: usize = 0;
/// The palette index of the pull request's mark (vermillion).
const PR: usize = 5;
/// The palette index of an improvement's marker (green).
const BETTER: usize = 2;

/// The longest commit link prefix accepted.
const MAX_URL: usize = 2048;

/// Why a commit link prefix was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitUrlError {
    #[error(
        "the commit link prefix \"{0}\" does not start with https:// and a host (e.g. https://github.com/o/r/commit/)"
    )]
    NotHttps(String),
    #[error(
        "the commit link prefix \"{0}\" holds a space, a quote, '<', '>', '\\', a backtick or a control character, or is longer than {MAX_URL} characters"
    )]
    BadCharacters(String),
}

/// `prefix` if it can begin a commit link: `https://`, a host, and only
/// printable ASCII without spaces, quotes, `<`, `>`, `\` or backticks.
/// The command line calls it to refuse a bad `--commit-url`; [`html`]
/// links nothing with a prefix it refuses.
pub fn commit_url(prefix: &str) -> Result<&str, CommitUrlError> {
    let Some(rest) = prefix.strip_prefix("https://") else {
        return Err(CommitUrlError::NotHttps(prefix.to_string()));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(CommitUrlError::NotHttps(prefix.to_string()));
    }
    let bad = |c: char| !c.is_ascii_graphic() || matches!(c, '"' | '\'' | '<' | '>' | '\\' | '`');
    if prefix.len() > MAX_URL || prefix.chars().any(bad) {
        return Err(CommitUrlError::BadCharacters(prefix.to_string()));
    }
    Ok(prefix)
}

/// A commit as a URL path segment: unreserved characters as they are,
/// every other byte percent-encoded.
fn url_segment(commit: &str) -> String {
    let mut out = String::with_capacity(commit.len());
    for b in commit.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A commit, abbreviated, its full name as the hover title; a link when
/// a prefix is given.
fn commit_html(commit: &str, link: Option<&str>) -> String {
    let text = format!(
        "<code title=\"{}\">{}</code>",
        escape(commit),
        escape(&short(commit))
    );
    match link {
        Some(prefix) => format!(
            "<a href=\"{}{}\">{text}</a>",
            escape(prefix),
            url_segment(commit)
        ),
        None => text,
    }
}

/// Styles of this page beyond the report's.
const EXTRA_STYLE: &str = r"
table.shifts { margin: 6px 0 0; }
figcaption p { margin: 2px 0; }
";

/// The history page of `spec`: `series` (from
/// [`infer_bench_history::series::series`]) with `checks`' verdicts and
/// change points, and the pull request's record `pr` as the last mark of
/// each chart it has a value for. Commits link to `commit_url` + commit
/// when that prefix passes [`commit_url`] (e.g.
/// `https://github.com/o/r/commit/`); otherwise they are text.
pub fn html(
    spec: &str,
    series: &[Series],
    checks: &Report,
    pr: Option<&Record>,
    commit_url: Option<&str>,
) -> String {
    let link = commit_url.and_then(|u| self::commit_url(u).ok());
    let mut h = String::with_capacity(64 * 1024);
    let title = format!("History of {spec}");
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"infer-bench {}\">\n<title>{}</title>\n<style>{}{EXTRA_STYLE}</style>\n</head>\n<body>\n<main>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&title),
        crate::report::html::STYLE
    );
    let _ = write!(
        h,
        "<header><h1>History of <code>{}</code></h1><p>{}; exit code {} ({}).",
        escape(spec),
        escape(&super::check::counts(checks, false)),
        checks.exit_code,
        escape(&super::check::headline(checks))
    );
    if let Some(pr) = pr {
        let _ = write!(
            h,
            " The pull request's commit {} is the last mark of each chart, in <span style=\"color:{}\">vermillion</span>.",
            commit_html(&pr.commit, link),
            chart::color(PR)
        );
    }
    h.push_str("</p>\n");

    let mut points: Vec<(&str, Vec<&Series>)> = Vec::new();
    for s in series {
        match points.iter_mut().find(|(slug, _)| *slug == s.slug) {
            Some((_, list)) => list.push(s),
            None => points.push((&s.slug, vec![s])),
        }
    }
    if points.len() > 1 {
        h.push_str("<nav>");
        for (i, (slug, _)) in points.iter().enumerate() {
            let _ = write!(h, "<a href=\"#p{i}\">{}</a>", escape(slug));
        }
        h.push_str("</nav>");
    }
    h.push_str("</header>\n");

    if points.is_empty() {
        h.push_str("<section><p class=\"lead\">No history recorded for this spec yet: <code>infer-bench history record</code> on main adds a commit.</p></section>\n");
    }
    let mut k = 0;
    for (i, (slug, list)) in points.iter().enumerate() {
        let _ = writeln!(
            h,
            "<section id=\"p{i}\"><h2><code>{}</code></h2><div class=\"charts\">",
            escape(slug)
        );
        for s in list {
            let check = checks
                .series
                .iter()
                .find(|c| c.slug == s.slug && c.label == s.label);
            let pr_value = pr
                .and_then(|r| r.points.get(&s.slug))
                .and_then(|p| p.metrics.get(&s.label))
                .map(|l| l.value)
                .filter(|v| v.is_finite());
            figure(
                &mut h,
                k,
                s,
                check,
                pr.map(|r| (r.commit.as_str(), pr_value)),
                link,
            );
            k += 1;
        }
        h.push_str("</div></section>\n");
    }
    h.push_str("<footer>Made by infer-bench ");
    h.push_str(env!("CARGO_PKG_VERSION"));
    h.push_str(": one file, no script, nothing fetched.</footer>\n</main>\n</body>\n</html>\n");
    h
}

/// One series' chart and caption. `pr` is the pull request's commit and
/// its value for this series, if it has one.
fn figure(
    h: &mut String,
    k: usize,
    s: &Series,
    check: Option<&SeriesCheck>,
    pr: Option<(&str, Option<f64>)>,
    link: Option<&str>,
) {
    let unit = unit_of(&s.metric);
    let mut c = Chart::new(
        format!("{} · {}", s.slug, s.label),
        Axis::linear("commits of main, oldest to newest"),
        Axis {
            label: if unit.is_empty() {
                s.label.clone()
            } else {
                format!("{} ({unit})", s.label)
            },
            scale: chart::Scale::Linear,
            zero: false,
            range: None,
        },
    );
    c.id = format!("h{k}");

    // Each comparable stretch is its own line; a marked break between.
    let mut x = 0usize;
    let mut current_start = 0usize;
    for (n, seg) in s.segments.iter().enumerate() {
        if n > 0 {
            c.lines.push(RefLine {
                value: x as f64 - 0.5,
                label: "restart".into(),
                tip: Some(format!(
                    "Not comparable with before: {}",
                    seg.started_because
                )),
                vertical: true,
                color: Some(NEUTRAL),
            });
        }
        current_start = x;
        let points: Vec<Point> = seg
            .entries
            .iter()
            .enumerate()
            .map(|(j, e)| {
                let runs = if e.runs.len() == 1 {
                    "1 run".to_string()
                } else {
                    format!("{} runs", e.runs.len())
                };
                Point::new((x + j) as f64, e.value).tip(format!(
                    "{} ({})\n{} ({runs})",
                    e.commit,
                    e.time,
                    value(Some(e.value), unit)
                ))
            })
            .collect();
        x += seg.entries.len();
        let mut line = chart::Series::line("main", MAIN, points);
        line.in_legend = n == 0;
        c.series.push(line);
    }

    // The noise band around the newest level, over the current stretch.
    let current = s.current();
    if let Some(newest) = current.entries.last().map(|e| e.value) {
        let half = newest.abs() * s.noise_pct / 100.0;
        if half.is_finite() && half > 0.0 {
            let last = (current_start + current.entries.len()) as f64 - 1.0;
            c.bands.push(Band {
                low: newest - half,
                high: newest + half,
                x: Some((current_start as f64 - 0.25, last + 0.25)),
                label: format!(
                    "noise band ±{}% around the newest level ({})",
                    crate::report::csv::num(s.noise_pct),
                    value(Some(newest), unit)
                ),
                color: MAIN,
            });
        }
    }

    // Change points: a marker between the last commit at the old level
    // and the first at the new one.
    let shifts: &[Shift] = check.map_or(&[], |c| &c.shifts);
    for sh in shifts {
        let Some(j) = current.entries.iter().position(|e| e.commit == sh.commit) else {
            continue;
        };
        c.lines.push(RefLine {
            value: (current_start + j) as f64 - 0.5,
            label: format!("{} {}", relative(sh.relative), short(&sh.commit)),
            tip: Some(format!(
                "change point at {}: {}, confidence {}",
                sh.commit,
                from_to(sh.before, sh.after, unit, "→"),
                confidence(sh.confidence)
            )),
            vertical: true,
            color: tone(sh),
        });
    }

    // The pull request's value, after main's newest.
    if let Some((commit, Some(v))) = pr {
        let mut p = Point::new(x as f64, v).tip(format!(
            "this pull request: {commit}\n{}",
            value(Some(v), unit)
        ));
        p.label = Some("PR".into());
        let mut mark = chart::Series::line(
            format!("this pull request ({})", short(commit)),
            PR,
            vec![p],
        );
        mark.stroke = Stroke::None;
        c.series.push(mark);
    }

    let _ = write!(
        h,
        "<figure data-slug=\"{}\" data-label=\"{}\">",
        escape(&s.slug),
        escape(&s.label)
    );
    h.push_str(&inline(&chart::render(&c)));
    h.push_str("<figcaption>");
    caption(h, s, check, unit, link);
    h.push_str("</figcaption></figure>\n");
}

/// The colour of a change point's marker: red for a change for the worse
/// beyond the noise band, green for one for the better, grey within it.
fn tone(sh: &Shift) -> Option<usize> {
    match (sh.beyond_noise, sh.worse) {
        (true, true) => None,
        (true, false) => Some(BETTER),
        (false, _) => Some(NEUTRAL),
    }
}

/// An SVG for inline use in HTML, which needs no namespace: the page
/// then holds no URL but the commit links.
fn inline(svg: &str) -> String {
    svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
}

/// The verdict, the newest value, the stretch judged, why the series
/// restarted, and the change points with their commits.
fn caption(
    h: &mut String,
    s: &Series,
    check: Option<&SeriesCheck>,
    unit: &str,
    link: Option<&str>,
) {
    let current = s.current();
    h.push_str("<p>");
    if let Some(c) = check {
        let class = match c.verdict {
            Verdict::Regressed => "fail",
            Verdict::Insufficient => "warn",
            Verdict::Improved | Verdict::Unchanged => "pass",
        };
        let _ = write!(
            h,
            "<span class=\"badge {class}\">{}</span> ",
            c.verdict.word()
        );
    }
    if let Some(e) = current.entries.last() {
        let _ = write!(
            h,
            "newest {} at {}; {} comparable commit{} since {}; noise band ±{}%.",
            escape(&value(Some(e.value), unit)),
            commit_html(&e.commit, link),
            current.entries.len(),
            if current.entries.len() == 1 { "" } else { "s" },
            current
                .entries
                .first()
                .map(|f| commit_html(&f.commit, link))
                .unwrap_or_default(),
            crate::report::csv::num(s.noise_pct)
        );
    }
    h.push_str("</p>");
    let restarts: Vec<&str> = s
        .segments
        .iter()
        .skip(1)
        .map(|g| g.started_because.as_str())
        .collect();
    if !restarts.is_empty() {
        h.push_str("<ul class=\"notes\">");
        for why in restarts {
            let _ = write!(h, "<li>Restarted: {}</li>", escape(why));
        }
        h.push_str("</ul>");
    }
    let shifts: &[Shift] = check.map_or(&[], |c| &c.shifts);
    if !shifts.is_empty() {
        h.push_str("<table class=\"shifts\"><tr><th class=\"l\">change point</th><th class=\"l\">commit</th><th class=\"l\">before → after</th><th>confidence</th></tr>");
        for sh in shifts {
            let class = match tone(sh) {
                None => "badge fail",
                Some(BETTER) => "badge pass",
                Some(_) => "muted",
            };
            let _ = write!(
                h,
                "<tr data-commit=\"{}\"><td class=\"l\"><span class=\"{class}\">{}</span></td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td></tr>",
                escape(&sh.commit),
                escape(&relative(sh.relative)),
                commit_html(&sh.commit, link),
                escape(&from_to(sh.before, sh.after, unit, "→")),
                confidence(sh.confidence)
            );
        }
        h.push_str("</table>");
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{HOSTILE, history, level, rec, report, series_check, shift};
    use super::*;
    use infer_bench_history::series::series;
    use infer_bench_results::exit::{EXIT_FAILED, EXIT_UNJUDGED};

    fn sample() -> (Vec<Series>, Report, Record) {
        let mut records = history(&[10.0, 10.1, 9.9, 10.0, 12.0, 12.1, 11.9, 12.0]);
        // A new GPU from c6 on: a second stretch.
        for r in &mut records[6..] {
            for p in r.points.values_mut() {
                p.identity.insert("sim_gpu".into(), "b200".into());
            }
        }
        let all = series(&records);
        let checks = report(
            vec![
                series_check("sim.a", "output_tokens_per_s", Verdict::Unchanged, vec![]),
                series_check(
                    "sim.a",
                    "tpot p50",
                    Verdict::Regressed,
                    vec![shift("c7", 11.9, 12.6, true)],
                ),
            ],
            EXIT_FAILED,
        );
        let pr = rec(
            "prhead",
            99_999,
            &[("sim.a", "tpot p50", level("tpot", Some("p50"), 12.4, &[]))],
        );
        (all, checks, pr)
    }

    #[test]
    fn history_page_draws_a_chart_per_series_with_breaks_bands_and_markers() {
        let (all, checks, pr) = sample();
        let page = html("q", &all, &checks, Some(&pr), None);
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.trim_end().ends_with("</html>"));
        assert_eq!(page.matches("<figure").count(), 2);
        assert_eq!(page.matches("<svg").count(), 2);
        // Two stretches: two lines and a restart marker with its reason.
        assert!(page.contains("Not comparable with before: the environment changed at c6"));
        assert!(page.contains("Restarted: the environment changed at c6 (sim_gpu: h100 -&gt; b200; last comparable c5)"));
        // The noise band around the newest level.
        assert!(page.contains("noise band ±5% around the newest level (12.0 ms)"));
        assert_eq!(page.matches("<g class=\"band\"").count(), 2);
        // The change point: a marker with its change, and its commit.
        assert!(page.contains(">+5.9% c7<"), "the marker's label");
        assert!(page.contains("<tr data-commit=\"c7\">"));
        assert!(page.contains("<span class=\"badge fail\">REGRESSED</span>"));
        // The pull request's value, in its own colour, on the TPOT chart only.
        assert_eq!(
            page.matches("this pull request (prhead)").count(),
            2,
            "legend title and key"
        );
        assert!(page.contains("this pull request: prhead\n12.4 ms"));
        assert!(page.contains(chart::color(PR)));
    }

    #[test]
    fn history_page_links_commits_only_to_an_https_prefix() {
        let (all, checks, pr) = sample();
        let prefix = "https://github.com/o/r/commit/";
        let page = html("q", &all, &checks, Some(&pr), Some(prefix));
        assert!(page.contains(
            "<a href=\"https://github.com/o/r/commit/c7\"><code title=\"c7\">c7</code></a>"
        ));
        let without = page.replace(prefix, "");
        assert!(
            !without.contains("http://") && !without.contains("https://"),
            "no other URL"
        );
        for bad in [
            "http://github.com/o/r/commit/",
            "javascript:alert(1)//",
            "https://",
            "https:///x",
            "https://x\" onmouseover=\"alert(1)",
            "https://x/<script>",
            "//evil.example/",
        ] {
            assert!(commit_url(bad).is_err(), "{bad}");
            let page = html("q", &all, &checks, Some(&pr), Some(bad));
            assert!(!page.contains("<a href"), "{bad}");
            assert!(
                !page.contains("http://") && !page.contains("https://"),
                "{bad}"
            );
        }
        assert_eq!(commit_url(prefix), Ok(prefix));
    }

    #[test]
    fn history_page_escapes_hostile_slugs_commits_and_reasons() {
        let mut records = vec![
            rec(
                "c0",
                1,
                &[(HOSTILE, "tpot p50", level("tpot", Some("p50"), 10.0, &[]))],
            ),
            rec(
                "c1",
                2,
                &[(HOSTILE, "tpot p50", level("tpot", Some("p50"), 11.0, &[]))],
            ),
        ];
        records[1].commit = "<img src=x onerror=alert(1)>\"'".into();
        records[1]
            .points
            .get_mut(HOSTILE)
            .unwrap()
            .identity
            .insert("sim_gpu".into(), "<script>alert(2)</script>".into());
        let all = series(&records);
        let checks = report(
            vec![series_check(
                HOSTILE,
                "tpot p50",
                Verdict::Insufficient,
                vec![shift(&records[1].commit, 10.0, 11.0, true)],
            )],
            EXIT_UNJUDGED,
        );
        let page = html(
            "<b>spec</b>",
            &all,
            &checks,
            Some(&records[1]),
            Some("https://github.com/o/r/commit/"),
        );
        for bad in ["<script", "<img", "<b>", "\u{1b}", "onerror=alert(1)>"] {
            assert!(!page.contains(bad), "{bad:?} in the page");
        }
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        // The commit is a URL path segment in the link, escaped in text.
        assert!(page.contains("commit/%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E%22%27\""));
        assert!(page.contains("data-commit=\"&lt;img src=x onerror=alert(1)&gt;&quot;&#39;\""));
    }

    #[test]
    fn history_page_of_nothing_says_so() {
        let page = html("q", &[], &report(vec![], EXIT_UNJUDGED), None, None);
        assert!(page.contains("No history recorded for this spec yet"));
        assert!(!page.contains("<svg"));
        assert!(!page.contains("http"));
        // A series of one commit draws without a band's width of zero.
        let one = series(&history(&[10.0]));
        let page = html("q", &one, &report(vec![], EXIT_UNJUDGED), None, None);
        assert_eq!(page.matches("<svg").count(), 2);
    }
}
