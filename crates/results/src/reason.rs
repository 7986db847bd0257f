//! Why a point is INVALID, and what it warns of: each reason a [`Reason`],
//! its kind one of a closed set ([`ReasonKind`]) decided where the reason
//! was found, with the message a person reads and, where one exists, the
//! setting that fixes it. Whatever decides on a reason (the judge's
//! verdicts) matches on its kind; the message is only ever shown, so
//! rewording it changes no verdict.
//!
//! Results files before version 5 hold reasons as bare strings; they are
//! read as kind [`ReasonKind::Other`] with the string as the message
//! ([`upgrade`]).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One reason a point is INVALID, or one warning it carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Reason {
    /// What kind of reason it is: what a program decides on.
    pub kind: ReasonKind,
    /// What happened, in words, with this point's particulars. Shown as
    /// it is; never parsed.
    pub message: String,
    /// The setting (or action) that fixes it, where one is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Reason {
    /// A reason of this kind, with the kind's usual fix ([`ReasonKind::fix`]).
    pub fn new(kind: ReasonKind, message: impl Into<String>) -> Reason {
        Reason {
            kind,
            message: message.into(),
            fix: kind.fix().map(String::from),
        }
    }

    /// A reason read from a file that gave no kind (before version 5).
    pub fn other(message: impl Into<String>) -> Reason {
        Reason::new(ReasonKind::Other, message)
    }

    /// The same reason with this fix (one that names this point's
    /// particulars, a target or a flag).
    pub fn with_fix(mut self, fix: impl Into<String>) -> Reason {
        self.fix = Some(fix.into());
        self
    }

    /// The same reason with its message behind `prefix` (`run 2: `,
    /// `agent 1/2: `); its kind and fix stay.
    pub fn prefixed(mut self, prefix: &str) -> Reason {
        self.message.insert_str(0, prefix);
        self
    }
}

/// A reason shows as its message.
impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The messages of `reasons`, joined by `sep`.
pub fn join(reasons: &[Reason], sep: &str) -> String {
    reasons
        .iter()
        .map(|r| r.message.as_str())
        .collect::<Vec<_>>()
        .join(sep)
}

/// Every kind of reason infer-bench gives. The set is closed: a kind added
/// is a new version of the results format, and code that decides on kinds
/// matches them all.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ReasonKind {
    // What makes a point INVALID (`invalid_reasons`).
    /// A run's measurement window was shorter than `[validity] min_duration`.
    WindowTooShort,
    /// A run measured fewer requests than `[validity] min_requests`.
    TooFewRequests,
    /// Open loop: requests went out at a rate further from the offered one
    /// than `[validity] max_rate_gap`.
    RateNotOffered,
    /// The client was late sending: its dispatch lag was above its budget,
    /// or an open loop could not send some of its arrivals at all
    /// (`requests.not_sent`).
    DispatchLag,
    /// The client was late reading: its read delay was above the budget.
    ReadDelay,
    /// Requests were still in flight when a run was cut short.
    DidNotFinish,
    /// Not one request of the point succeeded.
    NoSuccess,
    /// Requests failed because the client ran out of file descriptors
    /// (`client_limit`): this machine limited the load, not the server.
    ClientLimit,
    /// The simulator lost more of the point's time behind its own schedule
    /// than it may: the machine, not the model, set the pace.
    SimulatorBehind,
    /// A percentile SLO had fewer samples than it needs to mean something.
    TooFewSamples,
    /// The point could not be measured at all (see its `failure`).
    NotMeasured,
    /// A run stopped early: the server could not be reached, or refused
    /// every request.
    ServerUnreachable,
    /// The launched server died during the point.
    ServerDied,
    // What a point warns of (`warnings`).
    /// Prompts, as the server counted them, differ from the lengths asked.
    PromptLengths,
    /// Outputs were shorter than asked with `ignore_eos`: the server may
    /// not honour it.
    IgnoreEos,
    /// Requests were re-sent once after the server closed a kept-alive
    /// connection as they went out.
    Resent,
    /// Output token counts were counted from events (the server sent no
    /// usage): approximate.
    CountedFromEvents,
    /// Fields of the workload were not sent: the server did not name its
    /// dialect.
    DialectFieldsNotSent,
    /// Load sharding: a run began later than its agreed start.
    LateStart,
    /// Not every connection could be opened before a run.
    ConnectionsNotOpened,
    /// The server's prefix cache could not be reset before a run (issue
    /// 42): the run may have read an earlier run's cache.
    CacheResetFailed,
    /// Any other reason, and every reason of a file written before kinds
    /// (results version 1 to 4).
    Other,
}

impl ReasonKind {
    /// Every kind, in the order declared.
    pub const ALL: &'static [ReasonKind] = &[
        ReasonKind::WindowTooShort,
        ReasonKind::TooFewRequests,
        ReasonKind::RateNotOffered,
        ReasonKind::DispatchLag,
        ReasonKind::ReadDelay,
        ReasonKind::DidNotFinish,
        ReasonKind::NoSuccess,
        ReasonKind::ClientLimit,
        ReasonKind::SimulatorBehind,
        ReasonKind::TooFewSamples,
        ReasonKind::NotMeasured,
        ReasonKind::ServerUnreachable,
        ReasonKind::ServerDied,
        ReasonKind::PromptLengths,
        ReasonKind::IgnoreEos,
        ReasonKind::Resent,
        ReasonKind::CountedFromEvents,
        ReasonKind::DialectFieldsNotSent,
        ReasonKind::LateStart,
        ReasonKind::ConnectionsNotOpened,
        ReasonKind::CacheResetFailed,
        ReasonKind::Other,
    ];

    /// The kind's name, as the file spells it.
    pub fn name(self) -> &'static str {
        match self {
            ReasonKind::WindowTooShort => "window_too_short",
            ReasonKind::TooFewRequests => "too_few_requests",
            ReasonKind::RateNotOffered => "rate_not_offered",
            ReasonKind::DispatchLag => "dispatch_lag",
            ReasonKind::ReadDelay => "read_delay",
            ReasonKind::DidNotFinish => "did_not_finish",
            ReasonKind::NoSuccess => "no_success",
            ReasonKind::ClientLimit => "client_limit",
            ReasonKind::SimulatorBehind => "simulator_behind",
            ReasonKind::TooFewSamples => "too_few_samples",
            ReasonKind::NotMeasured => "not_measured",
            ReasonKind::ServerUnreachable => "server_unreachable",
            ReasonKind::ServerDied => "server_died",
            ReasonKind::PromptLengths => "prompt_lengths",
            ReasonKind::IgnoreEos => "ignore_eos",
            ReasonKind::Resent => "resent",
            ReasonKind::CountedFromEvents => "counted_from_events",
            ReasonKind::DialectFieldsNotSent => "dialect_fields_not_sent",
            ReasonKind::LateStart => "late_start",
            ReasonKind::ConnectionsNotOpened => "connections_not_opened",
            ReasonKind::CacheResetFailed => "cache_reset_failed",
            ReasonKind::Other => "other",
        }
    }

    /// The setting that fixes a reason of this kind, the same for every
    /// point: what a verdict tells a point that could not be judged. `None`
    /// where the fix depends on the point (its message says it) or there
    /// is no one setting.
    pub fn fix(self) -> Option<&'static str> {
        Some(match self {
            ReasonKind::DispatchLag => {
                "a less busy machine, or a larger `[validity] max_dispatch_lag_p99`"
            }
            ReasonKind::SimulatorBehind => {
                "a less busy machine (the simulator shares the client's CPUs)"
            }
            ReasonKind::WindowTooShort => {
                "a longer `[load] duration` (or a smaller `[validity] min_duration`)"
            }
            ReasonKind::TooFewRequests => {
                "a longer `[load] duration` (or a smaller `[validity] min_requests`)"
            }
            ReasonKind::RateNotOffered => {
                "a less busy machine, or a larger `[validity] max_rate_gap`"
            }
            ReasonKind::DidNotFinish => "longer `[load] timeouts`, or a server that answers",
            ReasonKind::TooFewSamples => {
                "a longer `[load] duration`, so each percentile has the samples it needs"
            }
            ReasonKind::ReadDelay
            | ReasonKind::NoSuccess
            | ReasonKind::ClientLimit
            | ReasonKind::NotMeasured
            | ReasonKind::ServerUnreachable
            | ReasonKind::ServerDied
            | ReasonKind::PromptLengths
            | ReasonKind::IgnoreEos
            | ReasonKind::Resent
            | ReasonKind::CountedFromEvents
            | ReasonKind::DialectFieldsNotSent
            | ReasonKind::LateStart
            | ReasonKind::ConnectionsNotOpened
            | ReasonKind::CacheResetFailed
            | ReasonKind::Other => return None,
        })
    }
}

impl fmt::Display for ReasonKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads the reasons of a results file written before version 5, in its
/// JSON: every string of a point's `invalid_reasons` and `warnings` becomes
/// a reason of kind `other` with that string as its message. Entries that
/// are already reasons are left as they are.
pub fn upgrade(results: &mut serde_json::Value) {
    use serde_json::Value;
    let Some(points) = results.get_mut("points").and_then(Value::as_array_mut) else {
        return;
    };
    for point in points {
        for field in ["invalid_reasons", "warnings"] {
            let Some(list) = point.get_mut(field).and_then(Value::as_array_mut) else {
                continue;
            };
            for entry in list {
                if let Value::String(message) = entry {
                    *entry = serde_json::to_value(Reason::other(std::mem::take(message)))
                        .expect("reasons serialize");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_named_as_serde_spells_them() {
        for &k in ReasonKind::ALL {
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::Value::from(k.name())
            );
            let back: ReasonKind = serde_json::from_value(k.name().into()).unwrap();
            assert_eq!(back, k);
        }
        // ALL holds every kind: as many as the schema's enumeration.
        let schema = serde_json::to_value(schemars::schema_for!(ReasonKind)).unwrap();
        let listed = schema["enum"].as_array().map_or(0, |e| e.len())
            + schema["oneOf"].as_array().map_or(0, |e| e.len());
        assert_eq!(listed, ReasonKind::ALL.len(), "{schema}");
    }

    #[test]
    fn a_reason_is_written_with_its_kind_message_and_fix() {
        let r = Reason::new(ReasonKind::TooFewRequests, "3 requests measured");
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({
                "kind": "too_few_requests",
                "message": "3 requests measured",
                "fix": "a longer `[load] duration` (or a smaller `[validity] min_requests`)",
            })
        );
        assert_eq!(r.to_string(), "3 requests measured");
        let bare = Reason::other("x");
        assert_eq!(
            serde_json::to_value(&bare).unwrap(),
            serde_json::json!({"kind": "other", "message": "x"})
        );
        assert_eq!(
            Reason::new(ReasonKind::DispatchLag, "late").prefixed("run 2: "),
            Reason {
                kind: ReasonKind::DispatchLag,
                message: "run 2: late".into(),
                fix: ReasonKind::DispatchLag.fix().map(String::from),
            }
        );
    }

    #[test]
    fn an_unknown_kind_is_refused() {
        let e = serde_json::from_value::<Reason>(serde_json::json!({
            "kind": "cosmic_rays",
            "message": "x"
        }))
        .unwrap_err();
        assert!(e.to_string().contains("unknown variant"), "{e}");
    }

    /// Before version 5 a reason was a string: it reads as kind `other`
    /// with the string as its message; reasons already typed stay.
    #[test]
    fn strings_of_older_files_read_as_other() {
        let mut v = serde_json::json!({
            "points": [
                {
                    "invalid_reasons": ["the client itself was late: dispatch lag p99 2.255 ms is above the 1ms budget"],
                    "warnings": ["some output token counts were counted from events (the server sent no usage): approximate"],
                },
                {"invalid_reasons": [], "warnings": []},
                {},
                {"invalid_reasons": [{"kind": "no_success", "message": "no request succeeded"}]},
            ]
        });
        upgrade(&mut v);
        let reasons = |i: usize, f: &str| -> Vec<Reason> {
            serde_json::from_value(v["points"][i][f].clone()).unwrap_or_default()
        };
        assert_eq!(
            reasons(0, "invalid_reasons"),
            [Reason::other(
                "the client itself was late: dispatch lag p99 2.255 ms is above the 1ms budget"
            )]
        );
        assert_eq!(
            reasons(0, "warnings"),
            [Reason::other(
                "some output token counts were counted from events (the server sent no usage): approximate"
            )]
        );
        assert!(reasons(1, "invalid_reasons").is_empty());
        assert_eq!(v["points"][2], serde_json::json!({}));
        assert_eq!(
            reasons(3, "invalid_reasons"),
            [Reason {
                kind: ReasonKind::NoSuccess,
                message: "no request succeeded".into(),
                fix: None,
            }]
        );
    }
}
