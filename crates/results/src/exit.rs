//! The exit codes of `infer-bench`: the one table of them, and a constant
//! for each. They are part of the published contract (a CI job decides on
//! them), like the file formats beside them: the judge computes a
//! verdict's code from this table, the command line maps every error
//! through it, `--help` prints it, and the README and
//! `docs/regression.md` document it (a test checks that they list the
//! same codes).

/// Passed: every point judged, nothing regressed, every SLO met.
pub const EXIT_OK: u8 = 0;
/// A confirmed regression or an SLO failure (for `self-bench`, a check
/// that failed).
pub const EXIT_FAILED: u8 = 1;
/// The spec or the command line is wrong, an input file is missing or
/// unreadable, or there is no baseline.
pub const EXIT_USAGE: u8 = 2;
/// Infrastructure: the system under test could not be measured.
pub const EXIT_INFRA: u8 = 3;
/// A point could not be judged, or the spec's rules differ from the
/// baseline's.
pub const EXIT_UNJUDGED: u8 = 4;
/// Interrupted (SIGINT, SIGTERM or SIGHUP): 128 + SIGINT, as shells report
/// a Ctrl-C.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Every exit code with what it means, in order: the text `--help`
/// prints under "Exit codes".
pub const TABLE: &[(u8, &str)] = &[
    (
        EXIT_OK,
        "passed: every point judged, nothing regressed, every SLO met",
    ),
    (EXIT_FAILED, "a confirmed regression or an SLO failure"),
    (
        EXIT_USAGE,
        "the spec or the command line is wrong, or there is no baseline",
    ),
    (
        EXIT_INFRA,
        "infrastructure: target unreachable, server failed to start, no request succeeded, GPU required but absent",
    ),
    (
        EXIT_UNJUDGED,
        "could not judge a point (INSUFFICIENT, INVALID, INCOMPARABLE, drift, missing; --allow-unjudged makes these advisory), the spec's rules differ from the baseline's, or with --strict an INCONCLUSIVE verdict",
    ),
    (
        EXIT_INTERRUPTED,
        "interrupted (Ctrl-C, SIGTERM or SIGHUP); finished points are kept",
    ),
];

/// The table as `--help` shows it: a heading, then one entry per code
/// (right-aligned), its meaning wrapped at 80 columns.
pub fn help() -> String {
    const WIDTH: usize = 80;
    const INDENT: usize = 7;
    let mut out = String::from("Exit codes:");
    for (code, meaning) in TABLE {
        let mut line = format!("{code:>5}  ");
        let mut len = line.len();
        for word in meaning.split(' ') {
            if len > INDENT && len + 1 + word.len() > WIDTH {
                out.push('\n');
                out.push_str(line.trim_end());
                line = " ".repeat(INDENT);
                len = INDENT;
            } else if len > INDENT {
                line.push(' ');
                len += 1;
            }
            line.push_str(word);
            len += word.len();
        }
        out.push('\n');
        out.push_str(&line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_every_code_once_in_order() {
        let codes: Vec<u8> = TABLE.iter().map(|(c, _)| *c).collect();
        assert_eq!(
            codes,
            [
                EXIT_OK,
                EXIT_FAILED,
                EXIT_USAGE,
                EXIT_INFRA,
                EXIT_UNJUDGED,
                EXIT_INTERRUPTED
            ]
        );
    }

    #[test]
    fn help_wraps_every_meaning_beside_its_code() {
        let text = help();
        assert!(
            text.starts_with("Exit codes:\n    0  passed: every point judged"),
            "{text}"
        );
        assert!(text.contains("\n  130  interrupted"), "{text}");
        for line in text.lines() {
            assert!(line.len() <= 80, "{line:?}");
        }
        // Every word of the table is there, in order, and nothing else.
        let mut words = vec!["Exit".to_string(), "codes:".to_string()];
        for (code, meaning) in TABLE {
            words.push(code.to_string());
            words.extend(meaning.split(' ').map(str::to_string));
        }
        assert_eq!(text.split_whitespace().collect::<Vec<_>>(), words);
    }
}
