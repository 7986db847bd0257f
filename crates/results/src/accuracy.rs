//! Task accuracy: scoring a model's answer against the expected one, for
//! a task of prompts with expected answers, and the share scored correct.
//!
//! Each [`Scorer`] is one rule:
//!
//! - `exact`: the trimmed answer equals the trimmed expected text.
//! - `normalized`: equal after [`normalize`] (lowercase, no punctuation,
//!   no articles "a", "an", "the", whitespace collapsed; SQuAD-style).
//! - `regex`: the first capture group (or the whole match) of the
//!   pattern's first match in the answer equals the expected text, both
//!   normalized.
//! - `numeric`: the last number in the answer equals the expected number
//!   within a tolerance, relative for large values, absolute near zero.
//! - `choice`: the letter (A-J) the answer chose equals the expected one.
//!
//! [`accuracy`] counts the correct answers and gives the 95% Wilson
//! interval of their share ([`crate::agreement::wilson`]): with a few
//! hundred prompts, "71.2% +- 2.9 against 71.8% +- 2.9" reads as no
//! detectable difference, not as a loss of 0.6 points.
//!
//! The spec checks a scorer with it, the engine scores a server's answers
//! with it, the judge re-exports it. Plain data, no I/O. Answers come from a server and may be hostile:
//! no scorer panics on any text, and all of them run in time linear in
//! the answer's length (the `regex` crate guarantees it for a pattern
//! from a spec, within the size limits [`Scorer::new`] sets).

use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};

use crate::agreement::{Z95, wilson};

/// How an answer is scored against the expected one.
#[derive(Debug, Clone)]
pub enum Scorer {
    /// The whole answer, trimmed, equals the expected text (trimmed too).
    Exact,
    /// Equal after [`normalize`]-ing both: Unicode lowercase, punctuation
    /// removed (letters, digits and whitespace kept), the articles "a",
    /// "an", "the" removed as whole words, whitespace runs collapsed,
    /// trimmed (SQuAD-style normalization).
    Normalized,
    /// The first capture group (or the whole match when the pattern has
    /// no group) of the pattern's first match in the answer, normalized,
    /// equals the normalized expected text. No match, or a first group
    /// that took no part in the match, is wrong.
    Regex(Regex),
    /// The last number in the answer (integers, decimals, optional sign,
    /// thousands separators as in "1,234", a trailing "%" ignored,
    /// scientific as in "1e-3") equals the expected number within
    /// `tolerance`: |got - want| <= tolerance * max(1, |want|), relative
    /// for large values and absolute near zero. The expected text must
    /// be a number; a number too large for an f64 counts as none.
    Numeric {
        /// The tolerance, finite and >= 0 (0 asks for equality).
        tolerance: f64,
    },
    /// Multiple choice: the letter (A-J) the answer chose equals the
    /// expected letter, case-insensitively. The chosen letter is, in this
    /// order: the one after "answer is" or "answer:" ("The answer is (B)",
    /// "Answer: B", "answer: (b)"; lowercase only in parentheses or after
    /// a colon, so "the answer is a ..." chooses nothing); else a letter
    /// at the start of the trimmed answer, alone on its line or wrapped
    /// ("B", "(B)", "B)", "B.", "B:"; not "I think" or "A cat"); else
    /// none, which is wrong.
    Choice,
}

/// Why a scorer's description, or an expected answer for it, could not
/// be read. The messages say what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScorerError {
    /// The scorer's name is none of [`Scorer::NAMES`].
    #[error("unknown scorer {name:?}: expected one of {}", Scorer::NAMES.join(", "))]
    UnknownName {
        /// The name as written.
        name: String,
    },
    /// The `regex` scorer was given no pattern.
    #[error(
        "the \"regex\" scorer needs a pattern (a regular expression whose first group, or whole match, is compared)"
    )]
    MissingPattern,
    /// A pattern was given to a scorer other than `regex`.
    #[error("a pattern is only for the \"regex\" scorer, not for {name:?}")]
    UnexpectedPattern {
        /// The scorer it was given to.
        name: &'static str,
    },
    /// A tolerance was given to a scorer other than `numeric`.
    #[error("a tolerance is only for the \"numeric\" scorer, not for {name:?}")]
    UnexpectedTolerance {
        /// The scorer it was given to.
        name: &'static str,
    },
    /// The pattern is not a valid regular expression.
    #[error("invalid regex pattern: {message}")]
    BadRegex {
        /// The `regex` crate's message (plain text, may span lines).
        message: String,
    },
    /// The pattern compiles to more than the size limit.
    #[error("regex pattern too large: it compiles to more than {limit} bytes; use a simpler one")]
    RegexTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The tolerance is negative, infinite or NaN.
    #[error("the tolerance must be a finite number >= 0, not {tolerance}")]
    BadTolerance {
        /// The tolerance as given.
        tolerance: f64,
    },
    /// An expected answer of the `numeric` scorer is not a number.
    #[error(
        "expected answer {expected:?} is not a number, as the \"numeric\" scorer needs (e.g. 42, -1.5, 1,234, 12%, 1e-3)"
    )]
    NotANumber {
        /// The expected answer (its start, when long).
        expected: String,
    },
    /// An expected answer of the `choice` scorer is not a letter A-J.
    #[error(
        "expected answer {expected:?} is not a letter A-J, as the \"choice\" scorer needs (e.g. B or (b))"
    )]
    NotALetter {
        /// The expected answer (its start, when long).
        expected: String,
    },
}

/// The compiled size limit of a pattern from a spec (and of its lazy
/// DFA's cache), in bytes.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// The default tolerance of the `numeric` scorer.
const DEFAULT_TOLERANCE: f64 = 1e-6;

impl Scorer {
    /// The names accepted by [`Scorer::new`], for error messages and docs.
    pub const NAMES: &'static [&'static str] =
        &["exact", "normalized", "regex", "numeric", "choice"];

    /// Builds a scorer from the spec's words: `name` is one of
    /// [`Scorer::NAMES`]; `pattern` is required for (and only allowed
    /// with) "regex"; `tolerance` only for "numeric" (default 1e-6). The
    /// pattern is compiled with a size limit of 1 MiB, and as much for
    /// its lazy DFA.
    pub fn new(
        name: &str,
        pattern: Option<&str>,
        tolerance: Option<f64>,
    ) -> Result<Scorer, ScorerError> {
        let scorer = match name {
            "exact" => Scorer::Exact,
            "normalized" => Scorer::Normalized,
            "regex" => {
                let pattern = pattern.ok_or(ScorerError::MissingPattern)?;
                Scorer::Regex(compile(pattern)?)
            }
            "numeric" => {
                let tolerance = tolerance.unwrap_or(DEFAULT_TOLERANCE);
                if !tolerance.is_finite() || tolerance < 0.0 {
                    return Err(ScorerError::BadTolerance { tolerance });
                }
                Scorer::Numeric { tolerance }
            }
            "choice" => Scorer::Choice,
            _ => {
                return Err(ScorerError::UnknownName {
                    name: name.to_string(),
                });
            }
        };
        if pattern.is_some() && !matches!(scorer, Scorer::Regex(_)) {
            return Err(ScorerError::UnexpectedPattern {
                name: scorer.name(),
            });
        }
        if tolerance.is_some() && !matches!(scorer, Scorer::Numeric { .. }) {
            return Err(ScorerError::UnexpectedTolerance {
                name: scorer.name(),
            });
        }
        Ok(scorer)
    }

    /// The scorer's name as written in specs.
    pub fn name(&self) -> &'static str {
        match self {
            Scorer::Exact => "exact",
            Scorer::Normalized => "normalized",
            Scorer::Regex(_) => "regex",
            Scorer::Numeric { .. } => "numeric",
            Scorer::Choice => "choice",
        }
    }

    /// Whether `expected` can be scored against: a number for `numeric`,
    /// a letter A-J for `choice`, anything for the others. For reading a
    /// task's file, before any answer is scored (against an unreadable
    /// expected answer every answer is wrong).
    pub fn check_expected(&self, expected: &str) -> Result<(), ScorerError> {
        match self {
            Scorer::Numeric { .. } if expected_number(expected).is_none() => {
                Err(ScorerError::NotANumber {
                    expected: shorten(expected),
                })
            }
            Scorer::Choice if expected_letter(expected).is_none() => Err(ScorerError::NotALetter {
                expected: shorten(expected),
            }),
            _ => Ok(()),
        }
    }

    /// Whether `answer` is scored correct against `expected`. Never
    /// panics, whatever the strings.
    pub fn score(&self, answer: &str, expected: &str) -> bool {
        match self {
            Scorer::Exact => answer.trim() == expected.trim(),
            Scorer::Normalized => normalize(answer) == normalize(expected),
            Scorer::Regex(re) => {
                captured(re, answer).is_some_and(|got| normalize(got) == normalize(expected))
            }
            Scorer::Numeric { tolerance } => {
                match (last_number(answer), expected_number(expected)) {
                    (Some(got), Some(want)) => {
                        (got - want).abs() <= tolerance * want.abs().max(1.0)
                    }
                    _ => false,
                }
            }
            Scorer::Choice => match (chosen_letter(answer), expected_letter(expected)) {
                (Some(got), Some(want)) => got == want,
                _ => false,
            },
        }
    }

    /// What the scorer took from the answer, to show a reader why it was
    /// scored so: the trimmed answer (`exact`), the normalized answer
    /// (`normalized`), the captured text (`regex`), the number found
    /// (`numeric`), the letter chosen (`choice`); `None` when nothing was
    /// found.
    pub fn extract(&self, answer: &str) -> Option<String> {
        match self {
            Scorer::Exact => Some(answer.trim().to_string()),
            Scorer::Normalized => Some(normalize(answer)),
            Scorer::Regex(re) => captured(re, answer).map(str::to_string),
            Scorer::Numeric { .. } => last_number(answer).map(format_number),
            Scorer::Choice => chosen_letter(answer).map(String::from),
        }
    }
}

/// Share of correct answers: `correct` of `scored`, with the 95% Wilson
/// interval (`low` <= `rate` <= `high`, all in [0, 1]).
#[derive(Debug, Clone, PartialEq)]
pub struct Accuracy {
    /// How many answers were scored.
    pub scored: u64,
    /// How many of them were correct.
    pub correct: u64,
    /// `correct / scored`.
    pub rate: f64,
    /// The low end of the 95% Wilson interval.
    pub low: f64,
    /// The high end of the 95% Wilson interval.
    pub high: f64,
}

/// Scores the pairs (answer, expected) with `scorer`; `None` when there
/// are none.
pub fn accuracy<'a>(
    scorer: &Scorer,
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<Accuracy> {
    let (mut scored, mut correct) = (0u64, 0u64);
    for (answer, expected) in pairs {
        scored += 1;
        if scorer.score(answer, expected) {
            correct += 1;
        }
    }
    let (low, high) = wilson(correct, scored, Z95)?;
    Some(Accuracy {
        scored,
        correct,
        rate: correct as f64 / scored as f64,
        low,
        high,
    })
}

/// Normalizes a text as [`Scorer::Normalized`] does: Unicode lowercase,
/// every character but letters, digits and whitespace removed, the words
/// "a", "an" and "the" removed, words joined by single spaces.
pub fn normalize(s: &str) -> String {
    let kept: String = s
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .collect();
    let words: Vec<&str> = kept
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect();
    words.join(" ")
}

/// Compiles a pattern from a spec within the size limits.
fn compile(pattern: &str) -> Result<Regex, ScorerError> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(limit) => ScorerError::RegexTooLarge { limit },
            other => ScorerError::BadRegex {
                message: other.to_string(),
            },
        })
}

/// The text the `regex` scorer compares: group 1 of the first match, or
/// the whole match when the pattern has no group. One search: linear.
fn captured<'h>(re: &Regex, answer: &'h str) -> Option<&'h str> {
    let caps = re.captures(answer)?;
    // `captures_len` counts the whole match as group 0.
    let group = if re.captures_len() > 1 { 1 } else { 0 };
    caps.get(group).map(|m| m.as_str())
}

/// A number as the `numeric` scorer reads it: an optional sign (the
/// Unicode minus too), digits with or without thousands separators, an
/// optional fraction (or a fraction alone, ".5"), an optional exponent.
/// Every branch stops a few characters past where it fails, so finding
/// all the numbers of an answer stays linear.
const NUMBER: &str = r"[+\-\x{2212}]?(?:(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+\-]?[0-9]+)?";

/// Any number in an answer.
static NUMBER_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(NUMBER).expect("the number pattern is valid"));

/// A whole text that is a number.
static WHOLE_NUMBER_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"\A(?:{NUMBER})\z")).expect("the whole-number pattern is valid")
});

/// The value of a text `NUMBER` matched: `None` when it overflows an f64.
fn number_value(text: &str) -> Option<f64> {
    let plain: String = text
        .chars()
        .filter(|&c| c != ',')
        .map(|c| if c == '\u{2212}' { '-' } else { c })
        .collect();
    plain.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// The last number in an answer. A sign right after a letter or a digit
/// is a hyphen, not a sign ("3-4" ends with 4, "x-5" with 5).
fn last_number(answer: &str) -> Option<f64> {
    let m = NUMBER_RE.find_iter(answer).last()?;
    let mut text = m.as_str();
    let signed = text.starts_with(['+', '-', '\u{2212}']);
    let after_word = answer
        .get(..m.start())
        .and_then(|before| before.chars().next_back())
        .is_some_and(char::is_alphanumeric);
    if signed && after_word {
        let mut chars = text.chars();
        chars.next();
        text = chars.as_str();
    }
    number_value(text)
}

/// The expected number: the whole trimmed text, a trailing "%" ignored.
fn expected_number(expected: &str) -> Option<f64> {
    let t = expected.trim();
    let t = t.strip_suffix('%').unwrap_or(t).trim_end();
    if WHOLE_NUMBER_RE.is_match(t) {
        number_value(t)
    } else {
        None
    }
}

/// Formats a number found for a reader: plainly, or in scientific
/// notation when very small or very large.
fn format_number(x: f64) -> String {
    if x == 0.0 || (1e-4..1e15).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// "answer is (B)", "Answer: B", "**Answer:** b": group 1 is the colon,
/// group 2 a letter in parentheses, group 3 a bare letter (which must
/// stand alone). Each try stops right after its letter: linear.
const CHOICE: &str =
    r"(?i:answer)(?:\s+(?i:is))?(?:\s*(:)[\s*_]*|[\s*_]+)(?:\(([A-Ja-j])\)|([A-Ja-j])(?:\W|\z))";

static CHOICE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(CHOICE).expect("the choice pattern is valid"));

/// A letter A-J (uppercase, or lowercase when `wrapped`), uppercased.
fn choice_letter(c: char, wrapped: bool) -> Option<char> {
    match c {
        'A'..='J' => Some(c),
        'a'..='j' if wrapped => Some(c.to_ascii_uppercase()),
        _ => None,
    }
}

/// The letter an answer chose, uppercase.
fn chosen_letter(answer: &str) -> Option<char> {
    for caps in CHOICE_RE.captures_iter(answer) {
        let found = if let Some(m) = caps.get(2) {
            m.as_str()
                .chars()
                .next()
                .and_then(|c| choice_letter(c, true))
        } else if let Some(m) = caps.get(3) {
            let colon = caps.get(1).is_some();
            m.as_str()
                .chars()
                .next()
                .and_then(|c| choice_letter(c, colon))
        } else {
            None
        };
        if found.is_some() {
            return found;
        }
    }
    leading_letter(answer)
}

/// A letter standing alone at the start of the trimmed answer (markdown
/// bold stars skipped), either all there is on its line or wrapped:
/// "B", "(B)", "B)", "B.", "B:", "B\nBecause...", any case. A letter
/// followed by a space is not one: "I think" and "A cat" choose nothing.
fn leading_letter(answer: &str) -> Option<char> {
    let s = answer.trim().trim_start_matches('*');
    let mut chars = s.chars();
    let (c, alone) = match chars.next()? {
        '(' => {
            let c = chars.next()?;
            (c, chars.next() == Some(')'))
        }
        c => (
            c,
            matches!(
                chars.next(),
                None | Some(')' | '.' | ':' | '*' | '\n' | '\r')
            ),
        ),
    };
    if alone { choice_letter(c, true) } else { None }
}

/// The expected letter: "B", "b", "(B)", "B)", "B." (trimmed), uppercase.
fn expected_letter(expected: &str) -> Option<char> {
    let t = expected.trim();
    let t = t.strip_prefix('(').unwrap_or(t);
    let t = t.strip_suffix(['.', ')', ':']).unwrap_or(t).trim();
    let mut chars = t.chars();
    let c = chars.next()?;
    if chars.next().is_some() {
        return None;
    }
    choice_letter(c, true)
}

/// The start of a text for an error message: at most 60 characters.
fn shorten(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(MAX).collect();
        out.push_str("...");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scorer(name: &str) -> Scorer {
        Scorer::new(name, None, None).expect("a valid scorer")
    }

    fn regex(pattern: &str) -> Scorer {
        Scorer::new("regex", Some(pattern), None).expect("a valid regex scorer")
    }

    fn numeric(tolerance: f64) -> Scorer {
        Scorer::new("numeric", None, Some(tolerance)).expect("a valid numeric scorer")
    }

    #[test]
    fn names_round_trip() {
        for &name in Scorer::NAMES {
            let s = match name {
                "regex" => regex("x"),
                _ => scorer(name),
            };
            assert_eq!(s.name(), name);
        }
    }

    #[test]
    fn exact_trims_and_compares() {
        let s = scorer("exact");
        assert!(s.score("  Paris\n", "Paris"));
        assert!(s.score("Paris", " Paris "));
        assert!(!s.score("paris", "Paris"));
        assert!(!s.score("Paris.", "Paris"));
        assert!(s.score("", ""));
        assert_eq!(s.extract("  Paris \n").as_deref(), Some("Paris"));
    }

    #[test]
    fn normalize_is_squad_style() {
        assert_eq!(normalize("The  Cat!"), "cat");
        assert_eq!(
            normalize("  An apple, a pear\tand THE plum. "),
            "apple pear and plum"
        );
        assert_eq!(normalize("Theory of an anthem"), "theory of anthem");
        assert_eq!(normalize("Ünïcode  ÉCOLE"), "ünïcode école");
        assert_eq!(normalize("don't"), "dont");
        assert_eq!(normalize("$3.50"), "350");
        assert_eq!(normalize(""), "");
        assert_eq!(normalize("!!! ... ?"), "");
    }

    #[test]
    fn normalized_scorer() {
        let s = scorer("normalized");
        assert!(s.score("The  Cat!", "cat"));
        assert!(s.score("the Eiffel tower.", "Eiffel Tower"));
        assert!(!s.score("a dog", "cat"));
        assert!(!s.score("cats", "cat"));
        assert_eq!(s.extract("The  Cat!").as_deref(), Some("cat"));
    }

    #[test]
    fn regex_with_a_group_compares_the_group() {
        let s = regex(r"(?i)final answer:\s*(.+)");
        assert!(s.score("Let me think.\nFinal answer: The Cat!", "cat"));
        assert!(!s.score("Final answer: dog", "cat"));
        assert!(!s.score("no marker here: cat", "cat"));
        assert_eq!(
            s.extract("Final answer: The Cat!").as_deref(),
            Some("The Cat!")
        );
        assert_eq!(s.extract("nothing"), None);
    }

    #[test]
    fn regex_takes_the_first_match() {
        let s = regex(r"<(\w+)>");
        assert!(s.score("<cat> then <dog>", "cat"));
        assert!(!s.score("<cat> then <dog>", "dog"));
    }

    #[test]
    fn regex_without_a_group_compares_the_whole_match() {
        let s = regex(r"\d+ apples");
        assert!(s.score("I count 12 Apples? no, 12 apples.", "12 apples"));
        assert_eq!(s.extract("so 3 apples").as_deref(), Some("3 apples"));
        assert!(!s.score("twelve apples", "12 apples"));
    }

    #[test]
    fn regex_group_that_took_no_part_is_wrong() {
        let s = regex(r"(cat)|dog");
        assert!(s.score("a cat", "cat"));
        assert!(!s.score("a dog", "dog"));
        assert_eq!(s.extract("a dog"), None);
    }

    #[test]
    fn numeric_reads_the_last_number() {
        let s = scorer("numeric");
        assert!(s.score("The answer is 1,234.", "1234"));
        assert!(s.score("1234", "1,234"));
        assert!(s.score("First 7, then 12 and finally 42", "42"));
        assert!(!s.score("42 at first, then 12", "42"));
        assert!(s.score("It went up 12%", "12"));
        assert!(s.score("It went up 12%", "12%"));
        assert!(s.score("x = -5", "-5"));
        assert!(s.score("x = \u{2212}5", "-5"));
        assert!(s.score("a rate of 1e-3 per step", "0.001"));
        assert!(s.score("about 2.5E+3", "2500"));
        assert!(s.score("so .5 of it", "0.5"));
        assert!(s.score("1,234,567.89 dollars", "1234567.89"));
        assert!(!s.score("12", "13"));
        assert!(!s.score("no number at all", "12"));
        assert!(!s.score("", "0"));
    }

    #[test]
    fn numeric_hyphens_are_not_signs() {
        let s = scorer("numeric");
        assert!(s.score("pages 3-4", "4"));
        assert!(s.score("the x-5 model", "5"));
        assert!(s.score("it was (-5)", "-5"));
        assert_eq!(s.extract("pages 3-4").as_deref(), Some("4"));
    }

    #[test]
    fn numeric_tolerance() {
        assert!(numeric(1e-4).score("about 3.14159", "3.1416"));
        assert!(!numeric(1e-6).score("about 3.14159", "3.1416"));
        // Relative for large values: 1e-6 of a million is 1.
        assert!(numeric(1e-6).score("1000000.9", "1000000"));
        assert!(!numeric(1e-6).score("1000002", "1000000"));
        // Absolute near zero.
        assert!(numeric(1e-3).score("0.0005", "0"));
        assert!(!numeric(1e-3).score("0.002", "0"));
        // Zero asks for equality.
        assert!(numeric(0.0).score("0.1", "0.1"));
        assert!(!numeric(0.0).score("0.1000001", "0.1"));
    }

    #[test]
    fn numeric_extract_formats_the_number() {
        let s = scorer("numeric");
        assert_eq!(s.extract("The answer is 1,234.").as_deref(), Some("1234"));
        assert_eq!(s.extract("-2.5").as_deref(), Some("-2.5"));
        assert_eq!(s.extract("1e-9").as_deref(), Some("1e-9"));
        assert_eq!(s.extract("1e20").as_deref(), Some("1e20"));
        assert_eq!(s.extract("nothing"), None);
        // Too large for an f64: no number.
        assert_eq!(s.extract("1e999"), None);
        assert!(!s.score("1e999", "1e999"));
    }

    #[test]
    fn numeric_expected_must_be_a_number() {
        let s = scorer("numeric");
        for ok in ["42", " -1.5 ", "1,234", "12%", "1e-3", "+7", ".5"] {
            assert_eq!(s.check_expected(ok), Ok(()), "{ok:?}");
        }
        for bad in [
            "",
            "forty-two",
            "12 apples",
            "1e999",
            "inf",
            "NaN",
            "%",
            "-",
            "1..2",
        ] {
            assert!(
                matches!(s.check_expected(bad), Err(ScorerError::NotANumber { .. })),
                "{bad:?}"
            );
        }
        assert!(!s.score("forty-two 42", "forty-two"));
        let long = "x".repeat(1000);
        let err = s.check_expected(&long).expect_err("not a number");
        assert!(err.to_string().len() < 300, "{err}");
    }

    #[test]
    fn choice_reads_the_answer_phrase() {
        let s = scorer("choice");
        assert_eq!(s.extract("The answer is (C).").as_deref(), Some("C"));
        assert_eq!(s.extract("Answer: B").as_deref(), Some("B"));
        assert_eq!(s.extract("Answer: (b)").as_deref(), Some("B"));
        assert_eq!(s.extract("answer: d").as_deref(), Some("D"));
        assert_eq!(s.extract("The answer is: E").as_deref(), Some("E"));
        assert_eq!(s.extract("**Answer:** F").as_deref(), Some("F"));
        assert_eq!(s.extract("So the answer is J").as_deref(), Some("J"));
        // The phrase wins over a leading letter.
        assert_eq!(s.extract("A. Hmm. The answer is (C)").as_deref(), Some("C"));
        assert!(s.score("The answer is (C).", "C"));
        assert!(s.score("The answer is (C).", "c"));
        assert!(s.score("The answer is (C).", "(C)"));
        assert!(!s.score("The answer is (C).", "D"));
    }

    #[test]
    fn choice_reads_a_leading_letter() {
        let s = scorer("choice");
        assert_eq!(s.extract("B) because it is").as_deref(), Some("B"));
        assert_eq!(s.extract("  (d) since").as_deref(), Some("D"));
        assert_eq!(s.extract("C.").as_deref(), Some("C"));
        assert_eq!(s.extract("a: yes").as_deref(), Some("A"));
        assert_eq!(s.extract("E").as_deref(), Some("E"));
        assert_eq!(s.extract("**B** is right").as_deref(), Some("B"));
        assert_eq!(s.extract("b").as_deref(), Some("B"));
        assert_eq!(s.extract(" G \n").as_deref(), Some("G"));
        assert_eq!(s.extract("H\nBecause it is").as_deref(), Some("H"));
        assert!(s.score("B) because...", "B"));
    }

    #[test]
    fn choice_finds_none_in_prose() {
        let s = scorer("choice");
        for none in [
            "I think",
            "A cat sat down",
            "B because",
            "Because it is",
            "the answer is a mystery",
            "answers vary",
            "K) out of range",
            "(B",
            "b because",
            "",
        ] {
            assert_eq!(s.extract(none), None, "{none:?}");
        }
        assert!(!s.score("I think", "A"));
    }

    #[test]
    fn choice_expected_must_be_a_letter() {
        let s = scorer("choice");
        for ok in ["B", "b", "(B)", " C. ", "J)"] {
            assert_eq!(s.check_expected(ok), Ok(()), "{ok:?}");
        }
        for bad in ["", "K", "BC", "option B", "()"] {
            assert!(
                matches!(s.check_expected(bad), Err(ScorerError::NotALetter { .. })),
                "{bad:?}"
            );
        }
        assert!(!s.score("B", "option B"));
        assert_eq!(scorer("exact").check_expected("anything"), Ok(()));
    }

    #[test]
    fn new_rejects_bad_descriptions() {
        let err = Scorer::new("fuzzy", None, None).expect_err("unknown");
        assert_eq!(
            err,
            ScorerError::UnknownName {
                name: "fuzzy".into()
            }
        );
        let message = err.to_string();
        for name in Scorer::NAMES {
            assert!(message.contains(name), "{message}");
        }
        assert_eq!(
            Scorer::new("regex", None, None).expect_err("no pattern"),
            ScorerError::MissingPattern
        );
        assert_eq!(
            Scorer::new("exact", Some("x"), None).expect_err("pattern"),
            ScorerError::UnexpectedPattern { name: "exact" }
        );
        assert_eq!(
            Scorer::new("choice", None, Some(0.1)).expect_err("tolerance"),
            ScorerError::UnexpectedTolerance { name: "choice" }
        );
        assert_eq!(
            Scorer::new("numeric", None, Some(-0.1)).expect_err("negative"),
            ScorerError::BadTolerance { tolerance: -0.1 }
        );
        for t in [f64::NAN, f64::INFINITY] {
            assert!(matches!(
                Scorer::new("numeric", None, Some(t)),
                Err(ScorerError::BadTolerance { .. })
            ));
        }
        let err = Scorer::new("regex", Some("(unclosed"), None).expect_err("bad regex");
        let ScorerError::BadRegex { message } = &err else {
            panic!("not a bad regex: {err:?}");
        };
        assert!(message.contains("unclosed"), "{message}");
        assert!(err.to_string().starts_with("invalid regex pattern: "));
    }

    #[test]
    fn new_rejects_huge_regexes() {
        let err = Scorer::new("regex", Some(r"\w{1000}\w{1000}"), None).expect_err("too big");
        assert_eq!(
            err,
            ScorerError::RegexTooLarge {
                limit: REGEX_SIZE_LIMIT
            }
        );
    }

    #[test]
    fn numeric_default_tolerance() {
        let Scorer::Numeric { tolerance } = scorer("numeric") else {
            panic!("not numeric");
        };
        assert_eq!(tolerance, 1e-6);
        assert!(numeric(0.5).score("1", "1.4"));
    }

    #[test]
    fn accuracy_counts_and_bounds() {
        let s = scorer("exact");
        assert_eq!(accuracy(&s, std::iter::empty()), None);

        let pairs = [("a", "a"), ("b", "b"), ("c", "x"), ("d", "d")];
        let acc = accuracy(&s, pairs).expect("some pairs");
        assert_eq!((acc.scored, acc.correct), (4, 3));
        assert_eq!(acc.rate, 0.75);
        assert!(0.0 <= acc.low && acc.low <= acc.rate && acc.rate <= acc.high && acc.high <= 1.0);
        assert_eq!(Some((acc.low, acc.high)), wilson(3, 4, Z95));

        // 712 of 1000: about 71.2% +- 2.8.
        let answers: Vec<String> = (0..1000).map(|i| (i < 712).to_string()).collect();
        let acc = accuracy(&s, answers.iter().map(|a| (a.as_str(), "true"))).expect("pairs");
        assert_eq!((acc.scored, acc.correct), (1000, 712));
        assert!((acc.rate - 0.712).abs() < 1e-12);
        assert!(acc.low < acc.rate && acc.rate < acc.high);
        assert!((acc.high - acc.low - 0.056).abs() < 0.002, "{acc:?}");

        let all = accuracy(&s, [("a", "a"), ("b", "b")]).expect("pairs");
        assert_eq!((all.rate, all.high), (1.0, 1.0));
        assert!(all.low < 1.0);
        let none = accuracy(&s, [("a", "b")]).expect("pairs");
        assert_eq!((none.rate, none.low), (0.0, 0.0));
        assert!(none.high > 0.0);
    }

    #[test]
    fn scoring_never_panics_on_odd_inputs() {
        let digits = "7".repeat(64 * 1024);
        let commas = "1,234".repeat(64 * 1024 / 5);
        let lists = "1,2".repeat(64 * 1024 / 3);
        let answers = "answer ".repeat(64 * 1024 / 7);
        let colons = "Answer: ".repeat(64 * 1024 / 8);
        let spaces = format!("answer{}", " ".repeat(64 * 1024));
        let exps = "1e".repeat(32 * 1024);
        let signs = "-+".repeat(32 * 1024);
        let dots = "1.".repeat(32 * 1024);
        let unicode = "é\u{2212}٣ 🦀 \u{0301}ǅ ".repeat(4 * 1024);
        let odd: Vec<&str> = vec![
            "",
            " ",
            "%",
            "-",
            "+",
            ".",
            ",",
            "e",
            "E",
            "1e999",
            "-1e999",
            "1e",
            "1e-",
            "0x1F",
            "NaN",
            "inf",
            "-inf",
            "(",
            ")",
            "()",
            "(A",
            "answer",
            "answer:",
            "answer is",
            "\u{2212}",
            "٣",
            "🦀",
            "\u{0301}",
            "\0",
            &digits,
            &commas,
            &lists,
            &answers,
            &colons,
            &spaces,
            &exps,
            &signs,
            &dots,
            &unicode,
        ];
        let scorers = [
            scorer("exact"),
            scorer("normalized"),
            regex(r"(\d+)"),
            regex(r"(?i)answer:\s*(\w+)"),
            regex(r"\w+"),
            regex(r""),
            scorer("numeric"),
            numeric(0.0),
            scorer("choice"),
        ];
        for s in &scorers {
            for answer in &odd {
                for expected in &odd[..29] {
                    let _ = s.score(answer, expected);
                }
                let _ = s.score(answer, answer);
                let _ = s.extract(answer);
                let _ = s.check_expected(answer);
            }
            let _ = accuracy(s, odd.iter().map(|a| (*a, *a)));
        }
        assert!(scorer("exact").score(&digits, &digits));
        assert_eq!(scorer("numeric").extract(&digits), None);
        assert_eq!(scorer("numeric").extract(&commas).as_deref(), Some("1234"));
        assert_eq!(scorer("numeric").extract(&lists).as_deref(), Some("2"));
        assert_eq!(scorer("choice").extract(&answers), None);
    }
}
