//! The first, structural stage: TOML syntax and serde into the raw types,
//! with serde's messages rewritten into ours (key path, what was found,
//! what was expected, a did-you-mean).

use crate::diag::{Locator, SpecError, SpecErrors, parse_path, suggestion};
use crate::raw::*;

/// TOML syntax and serde, with positions and key paths.
pub(super) fn parse_raw(loc: &Locator, source: &str) -> Result<RawSpec, SpecErrors> {
    let de = toml::Deserializer::parse(source).map_err(|e| {
        let msg = e.message().trim_end().to_string();
        let span = e.span().or_else(|| deepest_key(source));
        loc.error_at_span(span, "", format!("invalid TOML: {msg}"), None)
    })?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        SpecErrors::from(serde_error(loc, &path, inner.message(), inner.span()))
    })
}

/// The line whose key is the most deeply dotted (`a.b.c...`): where a
/// parser's "recursion limit", which comes without a position, was hit.
fn deepest_key(source: &str) -> Option<std::ops::Range<usize>> {
    let mut best: Option<(usize, std::ops::Range<usize>)> = None;
    let mut offset = 0;
    for line in source.split_inclusive('\n') {
        let key = line.split('=').next().unwrap_or("");
        let dots = key.matches('.').count();
        if dots > 0 && best.as_ref().is_none_or(|(d, _)| dots > *d) {
            let start = offset + (line.len() - line.trim_start().len());
            best = Some((dots, start..start + 1));
        }
        offset += line.len();
    }
    best.map(|(_, span)| span)
}

/// The backticked names in a serde message (`unknown field `x`, expected ...`).
fn backticked(s: &str) -> Vec<&str> {
    s.split('`').skip(1).step_by(2).collect()
}

/// Rewrites serde's messages into ours: the key path, what was found, what
/// was expected, and a did-you-mean where it helps.
fn serde_error(
    loc: &Locator,
    path: &str,
    message: &str,
    span: Option<std::ops::Range<usize>>,
) -> SpecError {
    let path = if path == "." { "" } else { path };
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let names = backticked(rest);
        if let Some((bad, expected)) = names.split_first() {
            let key = if path.ends_with(bad) {
                path.to_string()
            } else {
                join(bad)
            };
            let list = if expected.is_empty() {
                "no keys here".to_string()
            } else {
                format!("expected one of: {}", expected.join(", "))
            };
            return loc.error_at_span(
                span.or_else(|| loc.key_span(&parse_path(&key))),
                &key,
                format!("unknown key `{bad}`; {list}"),
                suggestion(bad, expected.iter().copied()),
            );
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let names = backticked(rest);
        if let Some((bad, expected)) = names.split_first() {
            return loc.error_at_span(
                span.or_else(|| loc.span(&parse_path(path))),
                path,
                format!(
                    "unknown value \"{bad}\"; expected one of: {}",
                    expected.join(", ")
                ),
                suggestion(bad, expected.iter().copied()),
            );
        }
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        let names = backticked(rest);
        let field = names.first().copied().unwrap_or(rest);
        return loc.error_at_span(
            span.or_else(|| loc.span(&parse_path(path))),
            path,
            format!("missing key `{field}`"),
            Some(format!(
                "add `{field} = ...` to {}",
                if path.is_empty() {
                    "the top of the file".to_string()
                } else {
                    format!("[{path}]")
                }
            )),
        );
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            return loc.error_at_span(
                span.or_else(|| loc.span(&parse_path(path))),
                path,
                format!("expected {}, found {found}", plain_type(expected)),
                None,
            );
        }
    }
    if let Some(rest) = message.strip_prefix("invalid value: ") {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            return loc.error_at_span(
                span.or_else(|| loc.span(&parse_path(path))),
                path,
                format!("expected {expected}, found {found}"),
                None,
            );
        }
    }
    let hint = if message.contains("expected a duration") {
        Some(format!("units are {}", crate::duration::DURATION_UNITS))
    } else if message.contains("expected a positive rate") {
        Some("units are /s, /min, /h".to_string())
    } else {
        None
    };
    loc.error_at_span(
        span.or_else(|| loc.span(&parse_path(path))),
        path,
        message.trim_end().to_string(),
        hint,
    )
}

/// serde's Rust type names in words.
fn plain_type(expected: &str) -> String {
    match expected.trim() {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number >= 0".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list".into(),
        "a map" => "a table".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The message for a key of the spec given `value`.
    fn message(key_and_value: &str) -> String {
        let source = format!(
            "name = \"t\"\n[targets.sim]\nkind = \"sim\"\n[models.m]\npreset = \"llama-3.1-8b\"\n\
             [workloads.w]\ninput_tokens = 1\noutput_tokens = 1\n{key_and_value}\n"
        );
        let errors = crate::compile("t.toml", &source, Path::new(".")).unwrap_err();
        let e = &errors.0[0];
        format!("{}: {}", e.key, e.message)
    }

    /// A typed string given a value of another type says what kind of
    /// string it wants (the `expecting` text of `from_str_visitor`), not
    /// just "a string": why these types do not derive `DeserializeFromStr`.
    #[test]
    fn typed_strings_say_what_they_expect() {
        for (given, expected) in [
            (
                "[load]\nduration = 5",
                "load.duration: expected a duration string such as \"500ms\" or \"2m\", found integer `5`",
            ),
            (
                "[load]\nduration = \"1s\"\nrate = 5",
                "load.rate: expected a rate string such as \"20/s\" or \"1200/min\", found integer `5`",
            ),
            (
                "[load]\nduration = \"1s\"\n[regression]\nconfidence = 95",
                "regression.confidence: expected a percentage string such as \"1%\", found integer `95`",
            ),
            (
                "[load]\nduration = \"1s\"\n[slo]\nttft = [\"p99 < 1s\", 5]",
                "slo.ttft[1]: expected an SLO expression such as \"p99 < 500ms\", found integer `5`",
            ),
            (
                "[load]\nduration = \"1s\"\n[regression]\nmetrics = [{ metric = \"ttft\", stat = 99 }]",
                "regression.metrics[0].stat: expected a statistic such as \"p99\" or \"mean\", found integer `99`",
            ),
        ] {
            assert_eq!(message(given), expected, "{given}");
        }
    }
}
