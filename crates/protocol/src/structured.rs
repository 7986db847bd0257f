//! The answer of a request that asked for structured output or tools: its
//! text and tool calls as the readers collect them ([`Reply`], bounded),
//! and the check of that answer against the workload's schemas
//! ([`Checker`], compiled once per point). An answer that fails the check
//! fails its request as `invalid_answer`: a server that is fast because it
//! stopped constraining its output is not faster.

use std::collections::BTreeMap;

use infer_bench_spec::structured::{Structured, ToolChoice};
use serde_json::Value;

/// The most bytes of an answer's text and tool-call arguments kept for
/// validation; a longer answer is not validated and counts as invalid.
pub const MAX_ANSWER_BYTES: usize = 4 << 20;

/// The most tool calls one answer may make before it is invalid.
pub const MAX_TOOL_CALLS: usize = 128;

/// What a reader collects of an answer: its text (a conversation sends it
/// back; a structured answer is validated) and its tool calls, joined
/// from their streamed fragments.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// More than the limit came: what is kept is cut short.
    pub over: bool,
    /// The most bytes kept (0: no limit).
    limit: usize,
    kept: usize,
}

/// One tool call: its name and its arguments' JSON text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCall {
    /// Its index in the answer (the stream's fragments name it).
    pub index: u32,
    pub name: String,
    pub arguments: String,
}

impl Reply {
    /// A reply that keeps at most `limit` bytes (0: no limit).
    pub fn bounded(limit: usize) -> Reply {
        Reply {
            limit,
            ..Reply::default()
        }
    }

    fn room(&mut self, n: usize) -> bool {
        if self.limit > 0 && self.kept + n > self.limit {
            self.over = true;
            return false;
        }
        self.kept += n;
        true
    }

    /// Appends answer text.
    pub fn push_str(&mut self, s: &str) {
        if self.room(s.len()) {
            self.text.push_str(s);
        }
    }

    /// Adds a fragment of tool call `index` (a stream's `delta.tool_calls`
    /// entry, or a whole call): its name when it names one, its arguments'
    /// next piece. Fragments of one index are joined in order.
    pub fn tool_call(&mut self, index: Option<u32>, name: Option<&str>, arguments: Option<&str>) {
        let index = index.unwrap_or_else(|| self.tool_calls.last().map_or(0, |c| c.index));
        let at = match self.tool_calls.iter().position(|c| c.index == index) {
            Some(at) => at,
            None => {
                if self.tool_calls.len() >= MAX_TOOL_CALLS {
                    self.over = true;
                    return;
                }
                self.tool_calls.push(ToolCall {
                    index,
                    ..ToolCall::default()
                });
                self.tool_calls.len() - 1
            }
        };
        let n = name.map_or(0, str::len) + arguments.map_or(0, str::len);
        if !self.room(n) {
            return;
        }
        let call = &mut self.tool_calls[at];
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            call.name.push_str(name);
        }
        if let Some(a) = arguments {
            call.arguments.push_str(a);
        }
    }
}

/// A workload's structured-output settings, compiled into validators once
/// (per point, not per request).
pub struct Checker {
    /// The answer's text must be JSON matching this.
    format: Option<jsonschema::Validator>,
    /// Declared tools by name, each with its arguments' validator.
    tools: BTreeMap<String, jsonschema::Validator>,
    choice: Option<ToolChoice>,
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checker")
            .field("format", &self.format.is_some())
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("choice", &self.choice)
            .finish()
    }
}

/// Why an answer is invalid: one sentence for the request's failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl Checker {
    /// The checker of `s`, or `None` when it asks for nothing. The schemas
    /// were checked when the spec compiled; one that still does not build
    /// a validator accepts any JSON.
    pub fn of(s: &Structured) -> Option<Checker> {
        if !s.is_set() {
            return None;
        }
        let build = |schema: &Value| {
            jsonschema::validator_for(schema)
                .unwrap_or_else(|_| jsonschema::validator_for(&Value::Bool(true)).expect("true"))
        };
        Some(Checker {
            format: s.response_format.as_ref().map(|f| build(&f.schema())),
            tools: s
                .tools
                .iter()
                .map(|t| (t.name.clone(), build(&t.parameters)))
                .collect(),
            choice: s.tool_choice.clone(),
        })
    }

    /// Checks an answer: its text against the response format, its tool
    /// calls against the declared tools and `tool_choice`.
    pub fn check(&self, r: &Reply) -> Result<(), Invalid> {
        if r.over {
            return Err(Invalid(format!(
                "the answer is longer than {MAX_ANSWER_BYTES} bytes or {MAX_TOOL_CALLS} tool calls, and was not validated"
            )));
        }
        if r.tool_calls.is_empty() {
            match &self.choice {
                Some(ToolChoice::Required) => {
                    return Err(Invalid(
                        "no tool call, though tool_choice = \"required\"".into(),
                    ));
                }
                Some(ToolChoice::Function(n)) => {
                    return Err(Invalid(format!(
                        "no tool call, though tool_choice = \"{n}\""
                    )));
                }
                _ => {}
            }
        } else if self.choice == Some(ToolChoice::None) {
            return Err(Invalid(format!(
                "a call of \"{}\", though tool_choice = \"none\"",
                clip(&r.tool_calls[0].name)
            )));
        }
        for c in &r.tool_calls {
            let Some(v) = self.tools.get(&c.name) else {
                return Err(Invalid(format!(
                    "a call of \"{}\", which is not a declared tool",
                    clip(&c.name)
                )));
            };
            if let Some(ToolChoice::Function(n)) = &self.choice {
                if n != &c.name {
                    return Err(Invalid(format!(
                        "a call of \"{}\", though tool_choice = \"{n}\"",
                        clip(&c.name)
                    )));
                }
            }
            let args = if c.arguments.trim().is_empty() {
                "{}"
            } else {
                c.arguments.as_str()
            };
            let json: Value = serde_json::from_str(args).map_err(|e| {
                Invalid(format!(
                    "the arguments of \"{}\" are not JSON ({e}): {}",
                    c.name,
                    clip(args)
                ))
            })?;
            if let Err(e) = v.validate(&json) {
                return Err(Invalid(format!(
                    "the arguments of \"{}\" do not match its parameters: {}",
                    c.name,
                    clip(&e.to_string())
                )));
            }
        }
        if let Some(v) = &self.format {
            // An answer that calls a tool may say nothing else.
            if r.tool_calls.is_empty() || !r.text.trim().is_empty() {
                let json: Value = serde_json::from_str(&r.text).map_err(|e| {
                    Invalid(format!("the answer is not JSON ({e}): {}", clip(&r.text)))
                })?;
                if let Err(e) = v.validate(&json) {
                    return Err(Invalid(format!(
                        "the answer does not match the schema: {}",
                        clip(&e.to_string())
                    )));
                }
            }
        }
        Ok(())
    }
}

/// At most 120 bytes of `s`, for a failure's detail.
fn clip(s: &str) -> &str {
    infer_bench_results::outside::clip(s, 120)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_spec::structured::{ResponseFormat, Tool};
    use serde_json::json;

    fn structured(choice: Option<ToolChoice>) -> Structured {
        Structured {
            response_format: Some(ResponseFormat::JsonSchema {
                file: "s.json".into(),
                sha256: String::new(),
                name: "answer".into(),
                strict: true,
                schema: json!({"type": "object", "required": ["n"],
                    "properties": {"n": {"type": "integer"}}}),
            }),
            tools: vec![Tool {
                name: "lookup".into(),
                description: None,
                parameters: json!({"type": "object", "required": ["q"],
                    "properties": {"q": {"type": "string"}}}),
                sha256: None,
            }],
            tool_choice: choice,
        }
    }

    fn text(s: &str) -> Reply {
        let mut r = Reply::default();
        r.push_str(s);
        r
    }

    #[test]
    fn text_answers_must_parse_and_match() {
        let c = Checker::of(&structured(None)).unwrap();
        assert_eq!(c.check(&text(r#"{"n": 3}"#)), Ok(()));
        let e = c.check(&text(r#"{"n": "3"}"#)).unwrap_err();
        assert!(e.0.contains("does not match the schema"), "{e}");
        let e = c.check(&text(r#"{"n": 3"#)).unwrap_err();
        assert!(e.0.contains("not JSON"), "{e}");
    }

    #[test]
    fn tool_calls_are_joined_by_index_and_checked() {
        let c = Checker::of(&structured(Some(ToolChoice::Required))).unwrap();
        let mut r = Reply::default();
        r.tool_call(Some(0), Some("lookup"), Some(""));
        r.tool_call(Some(0), None, Some(r#"{"q":"#));
        r.tool_call(Some(0), None, Some(r#""x"}"#));
        assert_eq!(r.tool_calls[0].arguments, r#"{"q":"x"}"#);
        assert_eq!(c.check(&r), Ok(()));
        let mut bad = Reply::default();
        bad.tool_call(Some(0), Some("lookup"), Some(r#"{"q":1}"#));
        assert!(c.check(&bad).is_err());
        let mut unknown = Reply::default();
        unknown.tool_call(Some(0), Some("nope"), Some("{}"));
        assert!(
            c.check(&unknown)
                .unwrap_err()
                .0
                .contains("not a declared tool")
        );
        let e = c.check(&text(r#"{"n": 1}"#)).unwrap_err();
        assert!(e.0.contains("required"), "{e}");
        let none = Checker::of(&structured(Some(ToolChoice::None))).unwrap();
        assert!(none.check(&r).is_err());
    }

    #[test]
    fn an_answer_over_the_limit_is_invalid() {
        let c = Checker::of(&structured(None)).unwrap();
        let mut r = Reply::bounded(4);
        r.push_str(r#"{"n": 3}"#);
        assert!(r.over && r.text.is_empty());
        assert!(c.check(&r).is_err());
        assert!(Checker::of(&Structured::default()).is_none());
    }
}
