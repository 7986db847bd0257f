//! How terminal text is drawn: with colour or without, narrow (fits
//! [`WIDTH`] columns) or wide (every column). The command line decides
//! once ([`install`]: `--color auto|always|never`, `NO_COLOR`, whether
//! stdout is a terminal; `--wide`); the summary and verdict tables read it
//! ([`current`]). Nothing installed means plain and narrow, which is what
//! a file or a pipe gets: colour is only ever drawn for a terminal.

use std::sync::atomic::{AtomicBool, Ordering};

/// The widest a narrow table may be: a terminal split in two, a CI log.
pub const WIDTH: usize = 120;

/// How tables are drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Look {
    /// ANSI colour for verdicts, SLO results and validity.
    pub color: bool,
    /// Every column, however wide the table gets.
    pub wide: bool,
}

static COLOR: AtomicBool = AtomicBool::new(false);
static WIDE: AtomicBool = AtomicBool::new(false);

/// Sets the look of the process's terminal output (the binary, once).
pub fn install(look: Look) {
    COLOR.store(look.color, Ordering::Relaxed);
    WIDE.store(look.wide, Ordering::Relaxed);
}

/// The installed look (plain and narrow unless [`install`] said otherwise).
pub fn current() -> Look {
    Look {
        color: COLOR.load(Ordering::Relaxed),
        wide: WIDE.load(Ordering::Relaxed),
    }
}

/// `--color`: always, never, or only for a terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

/// Whether to colour: `always` and `never` are what they say; `auto`
/// colours only a terminal, and not when `NO_COLOR` is set to anything but
/// the empty string (<https://no-color.org>). An explicit `--color always`
/// wins over `NO_COLOR`, as the command line wins over the environment.
pub fn use_color(choice: ColorChoice, is_terminal: bool, no_color: Option<&str>) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => is_terminal && no_color.is_none_or(str::is_empty),
    }
}

/// What a cell says, for its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// REGRESSED, FAIL, FAILED: what fails the check.
    Bad,
    /// INVALID, INCONCLUSIVE, INSUFFICIENT, INCOMPARABLE: could not say.
    Warn,
    /// IMPROVED, UNCHANGED, pass: what holds.
    Good,
}

/// The tone of a table cell that holds a verdict, an SLO result or a
/// validity; `None` for every other cell (numbers, names, "yes").
pub fn tone(cell: &str) -> Option<Tone> {
    let word = cell.split([' ', '(']).next().unwrap_or("");
    match word {
        "REGRESSED" | "FAIL" | "FAILED" => Some(Tone::Bad),
        "INVALID" | "INCONCLUSIVE" | "INSUFFICIENT" | "INCOMPARABLE" => Some(Tone::Warn),
        "IMPROVED" | "UNCHANGED" | "pass" => Some(Tone::Good),
        _ => None,
    }
}

/// `text` in its tone's colour (bold red, yellow, green).
pub fn paint(text: &str, tone: Tone) -> String {
    let code = match tone {
        Tone::Bad => "1;31",
        Tone::Warn => "33",
        Tone::Good => "32",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_colours_only_a_terminal_without_no_color() {
        use ColorChoice::*;
        assert!(use_color(Auto, true, None));
        assert!(use_color(Auto, true, Some("")));
        assert!(!use_color(Auto, true, Some("1")));
        assert!(!use_color(Auto, false, None));
        assert!(use_color(Always, false, Some("1")));
        assert!(!use_color(Never, true, None));
    }

    #[test]
    fn tones_of_cells() {
        assert_eq!(tone("REGRESSED (confirmed)"), Some(Tone::Bad));
        assert_eq!(tone("FAIL (ttft p90 < 300ms)"), Some(Tone::Bad));
        assert_eq!(tone("FAILED"), Some(Tone::Bad));
        assert_eq!(tone("INVALID"), Some(Tone::Warn));
        assert_eq!(tone("INCONCLUSIVE"), Some(Tone::Warn));
        assert_eq!(tone("UNCHANGED"), Some(Tone::Good));
        assert_eq!(tone("pass"), Some(Tone::Good));
        for plain in ["yes", "-", "12.5", "sim.llama-8b.bf16.chat.c8", "passed"] {
            assert_eq!(tone(plain), None, "{plain}");
        }
    }
}
