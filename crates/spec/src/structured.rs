//! Structured output and tool calls: a workload's `response_format`,
//! `tools` and `tool_choice` as they are written (raw) and what they
//! compile to, and how each request kind carries them on the wire. The
//! compiler reads schema files (`compile/structured.rs`); the OpenAI,
//! Responses and Messages bodies take their JSON from [`wire_fields`];
//! the answer is validated against them after the request
//! (`infer-bench-protocol`'s `structured`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Dialect;
use crate::raw::Api;

/// The most bytes of a schema or tools file read.
pub const MAX_SCHEMA_BYTES: u64 = 1 << 20;

/// `response_format = { json_schema = "file.json" }` or `{ type = "json_object" }`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawResponseFormat {
    /// A JSON Schema file (relative to the spec) every answer must match.
    #[serde(default)]
    pub json_schema: Option<String>,
    /// "json_object": any JSON object (no schema); "json_schema" is implied by `json_schema`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The schema's name on the wire (OpenAI's `json_schema.name`). Default "answer".
    #[serde(default)]
    pub name: Option<String>,
    /// OpenAI's `strict`. Default true.
    #[serde(default)]
    pub strict: Option<bool>,
}

/// `tools = [...]` (inline definitions) or `tools = "tools.json"` (a file
/// of OpenAI-shaped tools).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum RawTools {
    /// A JSON file: an array of `{ "type": "function", "function": { name, description, parameters } }`.
    File(String),
    /// Inline definitions.
    List(Vec<RawTool>),
}

/// One tool: `{ name, description, parameters }`, its parameters a JSON
/// Schema file (a string) or inline (a table).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawTool {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// The arguments' JSON Schema: a file relative to the spec, or an inline table.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub parameters: Option<toml::Value>,
}

/// What a workload asks answers to be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Any JSON object.
    JsonObject,
    /// JSON matching a schema read from a file.
    JsonSchema {
        /// As written in the spec (relative to it).
        file: String,
        /// SHA-256 of the file's bytes, so a changed schema is a changed point.
        sha256: String,
        name: String,
        strict: bool,
        schema: Value,
    },
}

impl ResponseFormat {
    /// The schema an answer must match (`{"type": "object"}` for a JSON object).
    pub fn schema(&self) -> Value {
        match self {
            ResponseFormat::JsonObject => json!({"type": "object"}),
            ResponseFormat::JsonSchema { schema, .. } => schema.clone(),
        }
    }
}

/// One tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its arguments' JSON Schema.
    pub parameters: Value,
    /// The file the tool (or its parameters) came from and its SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// `tool_choice`: whether the model must, may or must not call a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    Auto,
    Required,
    None,
    /// This tool, by name.
    Function(String),
}

impl ToolChoice {
    /// From the spec's string: `auto`, `required`, `none`, or a tool's name.
    pub fn parse(s: &str) -> ToolChoice {
        match s {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            name => ToolChoice::Function(name.to_string()),
        }
    }

    /// Whether an answer without a tool call breaks it.
    pub fn demands_call(&self) -> bool {
        matches!(self, ToolChoice::Required | ToolChoice::Function(_))
    }
}

/// A workload's structured-output settings, compiled.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Structured {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
}

impl Structured {
    /// Whether any of it is set (answers are then kept and validated).
    pub fn is_set(&self) -> bool {
        self.response_format.is_some() || !self.tools.is_empty() || self.tool_choice.is_some()
    }

    /// The tools' definitions as OpenAI's chat API writes them: the JSON
    /// a chat template renders into the prompt.
    pub fn tools_json(&self) -> String {
        serde_json::to_string(&chat_tools(&self.tools)).unwrap_or_default()
    }
}

/// Whether `api` can carry a response format in `dialect` (completions
/// only in dialects with a guided-decoding field of their own).
pub fn carries_response_format(api: Api, dialect: Option<Dialect>) -> bool {
    match api {
        Api::Chat | Api::Responses => true,
        Api::Completions => dialect.is_none_or(|d| completions_schema_field(d).is_some()),
        _ => false,
    }
}

/// Whether `api` can carry tools.
pub fn carries_tools(api: Api) -> bool {
    matches!(api, Api::Chat | Api::Responses | Api::Messages)
}

/// The completions field a dialect takes a JSON schema in: vLLM's
/// `structured_outputs` (`{ "json": SCHEMA }`), SGLang's `json_schema`
/// (the schema as a string), llama.cpp's `json_schema` (the schema).
pub fn completions_schema_field(d: Dialect) -> Option<&'static str> {
    match d {
        Dialect::Vllm => Some("structured_outputs"),
        Dialect::Sglang | Dialect::LlamaCpp => Some("json_schema"),
        _ => None,
    }
}

fn chat_tools(tools: &[Tool]) -> Value {
    Value::Array(
        tools
            .iter()
            .map(|t| {
                let mut f = serde_json::Map::new();
                f.insert("name".into(), t.name.clone().into());
                if let Some(d) = &t.description {
                    f.insert("description".into(), d.clone().into());
                }
                f.insert("parameters".into(), t.parameters.clone());
                json!({"type": "function", "function": f})
            })
            .collect(),
    )
}

/// The body fields that carry `s` in `api` (and, for completions,
/// `dialect`): name and JSON value, for the body template to insert.
pub fn wire_fields(s: &Structured, api: Api, dialect: Dialect) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    if let Some(f) = &s.response_format {
        match api {
            Api::Chat => {
                let v = match f {
                    ResponseFormat::JsonObject => json!({"type": "json_object"}),
                    ResponseFormat::JsonSchema {
                        name,
                        strict,
                        schema,
                        ..
                    } => json!({"type": "json_schema",
                        "json_schema": {"name": name, "schema": schema, "strict": strict}}),
                };
                out.insert("response_format".into(), v);
            }
            Api::Responses => {
                let v = match f {
                    ResponseFormat::JsonObject => json!({"format": {"type": "json_object"}}),
                    ResponseFormat::JsonSchema {
                        name,
                        strict,
                        schema,
                        ..
                    } => json!({"format": {"type": "json_schema", "name": name,
                        "schema": schema, "strict": strict}}),
                };
                out.insert("text".into(), v);
            }
            Api::Completions => {
                let schema = f.schema();
                match dialect {
                    Dialect::Vllm => {
                        let v = match f {
                            ResponseFormat::JsonObject => json!({"json_object": true}),
                            ResponseFormat::JsonSchema { .. } => json!({"json": schema}),
                        };
                        out.insert("structured_outputs".into(), v);
                    }
                    Dialect::Sglang => {
                        out.insert("json_schema".into(), schema.to_string().into());
                    }
                    Dialect::LlamaCpp => {
                        out.insert("json_schema".into(), schema);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    if !s.tools.is_empty() {
        let tools = match api {
            Api::Chat => Some(chat_tools(&s.tools)),
            Api::Responses => Some(Value::Array(
                s.tools
                    .iter()
                    .map(|t| {
                        let mut v =
                            json!({"type": "function", "name": t.name, "parameters": t.parameters});
                        if let Some(d) = &t.description {
                            v["description"] = d.clone().into();
                        }
                        v
                    })
                    .collect(),
            )),
            Api::Messages => Some(Value::Array(
                s.tools
                    .iter()
                    .map(|t| {
                        let mut v = json!({"name": t.name, "input_schema": t.parameters});
                        if let Some(d) = &t.description {
                            v["description"] = d.clone().into();
                        }
                        v
                    })
                    .collect(),
            )),
            _ => None,
        };
        if let Some(tools) = tools {
            out.insert("tools".into(), tools);
        }
    }
    if let Some(c) = &s.tool_choice {
        let v = match (api, c) {
            (Api::Messages, ToolChoice::Auto) => Some(json!({"type": "auto"})),
            (Api::Messages, ToolChoice::Required) => Some(json!({"type": "any"})),
            (Api::Messages, ToolChoice::None) => Some(json!({"type": "none"})),
            (Api::Messages, ToolChoice::Function(n)) => Some(json!({"type": "tool", "name": n})),
            (Api::Chat | Api::Responses, ToolChoice::Auto) => Some("auto".into()),
            (Api::Chat | Api::Responses, ToolChoice::Required) => Some("required".into()),
            (Api::Chat | Api::Responses, ToolChoice::None) => Some("none".into()),
            (Api::Chat, ToolChoice::Function(n)) => {
                Some(json!({"type": "function", "function": {"name": n}}))
            }
            (Api::Responses, ToolChoice::Function(n)) => {
                Some(json!({"type": "function", "name": n}))
            }
            _ => None,
        };
        if let Some(v) = v {
            out.insert("tool_choice".into(), v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Structured {
        Structured {
            response_format: Some(ResponseFormat::JsonSchema {
                file: "s.json".into(),
                sha256: "x".into(),
                name: "answer".into(),
                strict: true,
                schema: json!({"type": "object"}),
            }),
            tools: vec![Tool {
                name: "get_weather".into(),
                description: Some("Weather".into()),
                parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
                sha256: None,
            }],
            tool_choice: Some(ToolChoice::Required),
        }
    }

    #[test]
    fn each_api_gets_its_own_shape() {
        let s = sample();
        let chat = wire_fields(&s, Api::Chat, Dialect::Openai);
        assert_eq!(chat["response_format"]["type"], "json_schema");
        assert_eq!(chat["response_format"]["json_schema"]["name"], "answer");
        assert_eq!(chat["tools"][0]["function"]["name"], "get_weather");
        assert_eq!(chat["tool_choice"], "required");
        let r = wire_fields(&s, Api::Responses, Dialect::Openai);
        assert_eq!(r["text"]["format"]["type"], "json_schema");
        assert_eq!(r["tools"][0]["name"], "get_weather");
        let m = wire_fields(&s, Api::Messages, Dialect::Openai);
        assert!(!m.contains_key("response_format"));
        assert_eq!(m["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(m["tool_choice"]["type"], "any");
        let v = wire_fields(&s, Api::Completions, Dialect::Vllm);
        assert_eq!(v["structured_outputs"]["json"]["type"], "object");
        let l = wire_fields(&s, Api::Completions, Dialect::LlamaCpp);
        assert_eq!(l["json_schema"]["type"], "object");
        let g = wire_fields(&s, Api::Completions, Dialect::Sglang);
        assert!(g["json_schema"].is_string());
        assert!(wire_fields(&s, Api::Completions, Dialect::Openai).is_empty());
    }

    #[test]
    fn which_apis_carry_what() {
        assert!(carries_tools(Api::Messages));
        assert!(!carries_tools(Api::Completions));
        assert!(!carries_response_format(Api::Messages, None));
        assert!(carries_response_format(
            Api::Completions,
            Some(Dialect::LlamaCpp)
        ));
        assert!(!carries_response_format(
            Api::Completions,
            Some(Dialect::Openai)
        ));
        assert_eq!(ToolChoice::parse("f"), ToolChoice::Function("f".into()));
        assert!(ToolChoice::parse("required").demands_call());
        assert!(!ToolChoice::parse("auto").demands_call());
    }
}
