//! Findings said once: what the run summary gathers over the points
//! (failures, INVALID reasons, warnings, pre-flight checks, hints), each
//! one line that names the points it was found at. The summary and its
//! details both add to it; it knows neither.

/// Findings gathered over the points, each once with the points it was
/// found at, in the order first seen. Findings of one kind are one when
/// their keys are equal: the message itself, or a pre-flight check's name
/// (its message carries figures that differ point to point, e.g. how busy
/// the machine was); the line then quotes the first point's message.
#[derive(Default)]
pub(crate) struct Findings {
    seen: Vec<Finding>,
}

struct Finding {
    kind: String,
    key: String,
    message: String,
    slugs: Vec<String>,
    /// Another point's message (same key) said other figures.
    differs: bool,
}

impl Findings {
    /// `kind` is what the line says before the message ("pre-flight",
    /// "hint", ...; "" for none).
    pub(crate) fn add(&mut self, slug: &str, kind: &str, message: &str) {
        self.add_keyed(slug, kind, message, message);
    }

    /// As `add`, one with every finding of `kind` whose `key` is equal.
    pub(crate) fn add_keyed(&mut self, slug: &str, kind: &str, key: &str, message: &str) {
        match self
            .seen
            .iter_mut()
            .find(|f| f.kind == kind && f.key == key)
        {
            Some(f) => {
                if !f.slugs.iter().any(|s| s == slug) {
                    f.slugs.push(slug.to_string());
                }
                f.differs |= f.message != message;
            }
            None => self.seen.push(Finding {
                kind: kind.into(),
                key: key.into(),
                message: message.into(),
                slugs: vec![slug.to_string()],
                differs: false,
            }),
        }
    }

    /// One line per finding: "slug: kind: message" for one point, "all N
    /// points: ..." or "N points (a, b, c and 2 more): ..." for several.
    pub(crate) fn lines(&self, points: usize) -> Vec<String> {
        const NAMES: usize = 3;
        self.seen
            .iter()
            .map(|f| {
                let slugs = &f.slugs;
                let who = match slugs.len() {
                    1 => slugs[0].clone(),
                    n if n == points => format!("all {n} points"),
                    n if n <= NAMES => format!("{n} points ({})", slugs.join(", ")),
                    n => format!(
                        "{n} points ({} and {} more)",
                        slugs[..NAMES].join(", "),
                        n - NAMES
                    ),
                };
                let message = if f.differs {
                    format!(
                        "{} (figures of {}; each point's are in results.json)",
                        f.message, slugs[0]
                    )
                } else {
                    f.message.clone()
                };
                // Messages quote servers and specs: one line each, no
                // escape sequence, no workflow command.
                let who = infer_bench_results::outside::terminal(&who);
                let message = infer_bench_results::outside::terminal(&message);
                match f.kind.as_str() {
                    "" => format!("{who}: {message}"),
                    "INVALID" if slugs.len() == 1 => format!("{who} is INVALID: {message}"),
                    "INVALID" => format!("{who} are INVALID: {message}"),
                    k => format!("{who}: {k}: {message}"),
                }
            })
            .collect()
    }
}
