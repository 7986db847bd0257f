//! Structured answers: what the simulated model answers a request that
//! asks for JSON under a schema (`response_format`, the Responses API's
//! `text.format`, completions' `structured_outputs` or `json_schema`) or
//! offers tools: a JSON value that matches simple schemas (object, string,
//! number, integer, boolean, array, enum, const, required), or a call of
//! the first tool (the one `tool_choice` names, if any) with such
//! arguments. Deterministic: a pure function of the schema. The scripted
//! test server answers with the same values.

use serde_json::{Map, Value, json};

/// What a request asks its answer to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// JSON text matching this schema.
    Json(Value),
    /// A call of this tool with arguments matching its parameters.
    Tool { name: String, parameters: Value },
}

impl Ask {
    /// What `body` asks for, if anything: a tool call where tools are
    /// offered (and `tool_choice` is not "none"), else JSON where a schema
    /// or a JSON object is asked for.
    pub fn of(body: &Value) -> Option<Ask> {
        let choice = body.get("tool_choice");
        let none = choice.is_some_and(|c| {
            c.as_str() == Some("none") || c.get("type").and_then(Value::as_str) == Some("none")
        });
        if let Some(tools) = body
            .get("tools")
            .and_then(Value::as_array)
            .filter(|_| !none)
        {
            let named = choice.and_then(|c| {
                c.pointer("/function/name")
                    .or_else(|| c.get("name"))
                    .and_then(Value::as_str)
            });
            let tool = tools
                .iter()
                .map(|t| t.get("function").unwrap_or(t))
                .find(|f| named.is_none_or(|n| f.get("name").and_then(Value::as_str) == Some(n)));
            if let Some(f) = tool {
                return Some(Ask::Tool {
                    name: f
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("tool")
                        .into(),
                    parameters: f
                        .get("parameters")
                        .or_else(|| f.get("input_schema"))
                        .cloned()
                        .unwrap_or_else(|| json!({"type": "object"})),
                });
            }
        }
        let format = body
            .get("response_format")
            .or_else(|| body.pointer("/text/format"));
        if let Some(f) = format {
            return match f.get("type").and_then(Value::as_str) {
                Some("json_schema") => Some(Ask::Json(
                    f.pointer("/json_schema/schema")
                        .or_else(|| f.get("schema"))
                        .cloned()
                        .unwrap_or(Value::Bool(true)),
                )),
                Some("json_object") => Some(Ask::Json(json!({"type": "object"}))),
                _ => None,
            };
        }
        if let Some(s) = body.pointer("/structured_outputs/json") {
            return Some(Ask::Json(s.clone()));
        }
        match body.get("json_schema") {
            Some(Value::String(s)) => serde_json::from_str(s).ok().map(Ask::Json),
            Some(s @ Value::Object(_)) => Some(Ask::Json(s.clone())),
            _ => None,
        }
    }

    /// The answer's JSON text (a tool call's arguments), at least `min`
    /// bytes long (padded with spaces, which JSON allows), so that each of
    /// `min` tokens can carry a piece of it.
    pub fn text(&self, min: usize) -> String {
        let schema = match self {
            Ask::Json(s) => s,
            Ask::Tool { parameters, .. } => parameters,
        };
        let mut t = value_for(schema, 0).to_string();
        if t.len() < min {
            t.push_str(&" ".repeat(min - t.len()));
        }
        t
    }
}

/// The `i`-th of `n` pieces of `text` (split at character boundaries, each
/// non-empty when the text has at least `n` characters).
pub fn piece(text: &str, i: u32, n: u32) -> &str {
    let n = n.max(1) as usize;
    let len = text.len();
    let at = |k: usize| {
        let mut p = (k * len / n).min(len);
        while !text.is_char_boundary(p) {
            p += 1;
        }
        p
    };
    &text[at(i as usize)..at(i as usize + 1)]
}

/// A value that matches `schema` (for the simple schemas the module
/// names; others get what their `type` says, or `null`).
pub fn value_for(schema: &Value, depth: u32) -> Value {
    let Some(s) = schema.as_object() else {
        return json!({});
    };
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    if let Some(first) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if depth > 8 {
        return Value::Null;
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = s.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return value_for(first, depth + 1);
        }
    }
    let kind = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.contains_key("properties") => "object",
        _ => "object",
    };
    match kind {
        "object" => {
            let mut out = Map::new();
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    out.insert(k.clone(), value_for(v, depth + 1));
                }
            }
            Value::Object(out)
        }
        "array" => {
            let min = s
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .min(8);
            let item = s.get("items").cloned().unwrap_or(json!({"type": "string"}));
            Value::Array((0..min).map(|_| value_for(&item, depth + 1)).collect())
        }
        "string" => {
            let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
            let max = s.get("maxLength").and_then(Value::as_u64).unwrap_or(64) as usize;
            let word = "answer";
            let mut t = word.repeat(min.div_ceil(word.len()).max(1));
            t.truncate(max.max(min));
            Value::String(t)
        }
        "integer" | "number" => {
            let lo = s.get("minimum").and_then(Value::as_f64);
            let hi = s.get("maximum").and_then(Value::as_f64);
            let v = match (lo, hi) {
                (Some(lo), _) => lo.ceil(),
                (None, Some(hi)) => hi.floor().min(42.0),
                _ => 42.0,
            };
            json!(v as i64)
        }
        "boolean" => Value::Bool(true),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_simple_schemas() {
        let schema = json!({"type": "object", "required": ["name", "age", "tags", "ok", "kind"],
            "properties": {"name": {"type": "string", "minLength": 3},
                "age": {"type": "integer", "minimum": 18},
                "score": {"type": "number"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "ok": {"type": "boolean"},
                "kind": {"enum": ["a", "b"]}}});
        let v = value_for(&schema, 0);
        assert!(jsonschema::is_valid(&schema, &v), "{v}");
        assert_eq!(v["age"], 18);
        assert_eq!(v["kind"], "a");
    }

    #[test]
    fn a_request_asks_for_json_or_a_tool_call() {
        let chat = json!({"response_format": {"type": "json_schema",
            "json_schema": {"name": "a", "schema": {"type": "object"}}}});
        assert_eq!(Ask::of(&chat), Some(Ask::Json(json!({"type": "object"}))));
        let tools = json!({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "g"}}],
            "tool_choice": {"type": "function", "function": {"name": "g"}}});
        assert!(matches!(Ask::of(&tools), Some(Ask::Tool { name, .. }) if name == "g"));
        let text = Ask::Json(json!({"type": "object"})).text(10);
        assert_eq!(text.len(), 10);
        let pieces: String = (0..10).map(|i| piece(&text, i, 10)).collect();
        assert_eq!(pieces, text);
        assert!((0..10).all(|i| !piece(&text, i, 10).is_empty()));
        assert_eq!(Ask::of(&json!({"model": "m"})), None);
    }
}
