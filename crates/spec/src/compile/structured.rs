//! A workload's `response_format`, `tools` and `tool_choice`: the schema
//! and tools files read (confined to the spec's repository, bounded, their
//! SHA-256 kept), every schema checked as a JSON Schema, and the request
//! kinds that cannot carry them refused.

use serde_json::Value;

use super::{Cx, shown};
use crate::raw::{Api, RawWorkload};
use crate::structured::*;

impl Cx<'_> {
    /// Compiles `w`'s structured-output keys for workload `name`.
    pub(super) fn structured(&mut self, name: &str, w: &RawWorkload, api: Api) -> Structured {
        let k = |f: &str| format!("workloads.{name}.{f}");
        let mut out = Structured::default();
        if let Some(f) = &w.response_format {
            if !carries_response_format(api, None) {
                self.key_err(
                    &k("response_format"),
                    format!(
                        "api = \"{}\" cannot carry a response format",
                        api.name()
                    ),
                    Some("use api = \"chat\" or \"responses\" (or \"completions\" against vllm, sglang or llama.cpp)".into()),
                );
            } else {
                out.response_format = self.response_format(&k("response_format"), f);
            }
        }
        if let Some(t) = &w.tools {
            if !carries_tools(api) {
                self.key_err(
                    &k("tools"),
                    format!("api = \"{}\" cannot carry tools", api.name()),
                    Some("use api = \"chat\", \"responses\" or \"messages\"".into()),
                );
            } else {
                out.tools = self.tools(&k("tools"), t);
            }
        }
        if let Some(c) = &w.tool_choice {
            let choice = ToolChoice::parse(c);
            if let ToolChoice::Function(n) = &choice {
                if w.tools.is_some() && !out.tools.iter().any(|t| &t.name == n) {
                    self.err(
                        &k("tool_choice"),
                        format!(
                            "expected \"auto\", \"required\", \"none\" or the name of a tool, found \"{}\"",
                            shown(n)
                        ),
                        crate::diag::suggestion(n, out.tools.iter().map(|t| t.name.as_str())),
                    );
                }
            }
            if w.tools.is_none() {
                self.key_err(
                    &k("tool_choice"),
                    "`tool_choice` needs `tools` to choose from",
                    Some(
                        "add tools = [{ name = \"...\", parameters = { type = \"object\" } }]"
                            .into(),
                    ),
                );
            }
            out.tool_choice = Some(choice);
        }
        out
    }

    fn response_format(&mut self, key: &str, f: &RawResponseFormat) -> Option<ResponseFormat> {
        match (f.kind.as_deref(), &f.json_schema) {
            (Some("json_object"), None) => Some(ResponseFormat::JsonObject),
            (None | Some("json_schema"), Some(file)) => {
                let (sha256, schema) = self.schema_file(&format!("{key}.json_schema"), file)?;
                let name = f.name.clone().unwrap_or_else(|| "answer".into());
                if !is_tool_name(&name) {
                    self.err(
                        &format!("{key}.name"),
                        format!(
                            "expected a name of letters, digits, `-` or `_`, found \"{}\"",
                            shown(&name)
                        ),
                        None,
                    );
                }
                Some(ResponseFormat::JsonSchema {
                    file: file.clone(),
                    sha256,
                    name,
                    strict: f.strict.unwrap_or(true),
                    schema,
                })
            }
            (Some("json_object"), Some(_)) => {
                self.key_err(
                    &format!("{key}.json_schema"),
                    "type = \"json_object\" asks for any JSON object and takes no schema",
                    Some("remove `type` to validate against the schema".into()),
                );
                None
            }
            (Some(other), _) if other != "json_schema" => {
                self.err(
                    &format!("{key}.type"),
                    format!(
                        "expected \"json_object\" or \"json_schema\", found \"{}\"",
                        shown(other)
                    ),
                    None,
                );
                None
            }
            _ => {
                self.key_err(
                    key,
                    "missing key `json_schema`",
                    Some("add json_schema = \"schema.json\", or type = \"json_object\"".into()),
                );
                None
            }
        }
    }

    /// Reads a JSON Schema file: its SHA-256 and the schema, checked.
    fn schema_file(&mut self, key: &str, file: &str) -> Option<(String, Value)> {
        let path = self.base_dir.join(file);
        let (sha256, text) = self.read_text(key, &path, MAX_SCHEMA_BYTES, "JSON Schema file")?;
        let v = self.json_of(key, &path, &text)?;
        self.check_schema(key, &path.display().to_string(), &v)
            .then_some((sha256, v))
    }

    fn json_of(&mut self, key: &str, path: &std::path::Path, text: &str) -> Option<Value> {
        match serde_json::from_str::<Value>(text) {
            Ok(v) => Some(v),
            Err(e) => {
                self.err(
                    key,
                    format!(
                        "{}:{}:{}: not JSON: {}",
                        path.display(),
                        e.line(),
                        e.column(),
                        shown(&e.to_string())
                    ),
                    None,
                );
                None
            }
        }
    }

    /// Whether `v` (from `at`) is a JSON Schema; an error at `key` if not.
    fn check_schema(&mut self, key: &str, at: &str, v: &Value) -> bool {
        if !v.is_object() && !v.is_boolean() {
            self.err(
                key,
                format!(
                    "{at}: expected a JSON Schema (an object), found {}",
                    kind(v)
                ),
                None,
            );
            return false;
        }
        match jsonschema::validator_for(v) {
            Ok(_) => true,
            Err(e) => {
                let pointer = e.instance_path().to_string();
                self.err(
                    key,
                    format!(
                        "{at}: not a valid JSON Schema{}: {}",
                        if pointer.is_empty() {
                            String::new()
                        } else {
                            format!(" (at {})", shown(&pointer))
                        },
                        shown(&e.to_string())
                    ),
                    Some("see https://json-schema.org/understanding-json-schema".into()),
                );
                false
            }
        }
    }

    fn tools(&mut self, key: &str, t: &RawTools) -> Vec<Tool> {
        let mut out: Vec<Tool> = Vec::new();
        match t {
            RawTools::File(file) => {
                let path = self.base_dir.join(file);
                let Some((sha256, text)) =
                    self.read_text(key, &path, MAX_SCHEMA_BYTES, "tools file")
                else {
                    return out;
                };
                let Some(v) = self.json_of(key, &path, &text) else {
                    return out;
                };
                let at = path.display().to_string();
                let Some(list) = v.as_array() else {
                    self.err(
                        key,
                        format!("{at}: expected an array of tools, found {}", kind(&v)),
                        Some("e.g. [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}]".into()),
                    );
                    return out;
                };
                for (i, item) in list.iter().enumerate() {
                    let f = item.get("function").unwrap_or(item);
                    let name = f.get("name").and_then(Value::as_str);
                    let Some(name) = name.filter(|n| is_tool_name(n)) else {
                        self.err(
                            key,
                            format!("{at}: tool {i} has no `function.name` of letters, digits, `-` or `_`"),
                            None,
                        );
                        continue;
                    };
                    let parameters = f
                        .get("parameters")
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({"type": "object"}));
                    if !self.check_schema(key, &format!("{at}: tool \"{name}\""), &parameters) {
                        continue;
                    }
                    out.push(Tool {
                        name: name.to_string(),
                        description: f
                            .get("description")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                        parameters,
                        sha256: Some(sha256.clone()),
                    });
                }
            }
            RawTools::List(list) => {
                for (i, t) in list.iter().enumerate() {
                    let tk = format!("{key}[{i}]");
                    if !is_tool_name(&t.name) {
                        self.err(
                            &format!("{tk}.name"),
                            format!(
                                "expected a tool name of at most 64 letters, digits, `-` or `_`, found \"{}\"",
                                shown(&t.name)
                            ),
                            None,
                        );
                        continue;
                    }
                    let (parameters, sha256) = match &t.parameters {
                        None => (serde_json::json!({"type": "object"}), None),
                        Some(toml::Value::String(file)) => {
                            let pk = format!("{tk}.parameters");
                            match self.schema_file(&pk, file) {
                                Some((sha, v)) => (v, Some(sha)),
                                None => continue,
                            }
                        }
                        Some(table @ toml::Value::Table(_)) => {
                            let Ok(v) = serde_json::to_value(table) else {
                                continue;
                            };
                            if !self.check_schema(&format!("{tk}.parameters"), "inline", &v) {
                                continue;
                            }
                            (v, None)
                        }
                        Some(_) => {
                            self.err(
                                &format!("{tk}.parameters"),
                                "expected a JSON Schema file (a string) or an inline table",
                                None,
                            );
                            continue;
                        }
                    };
                    out.push(Tool {
                        name: t.name.clone(),
                        description: t.description.clone(),
                        parameters,
                        sha256,
                    });
                }
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for t in &out {
            if !seen.insert(t.name.as_str()) {
                self.err(
                    key,
                    format!("the tool \"{}\" is defined twice", t.name),
                    None,
                );
            }
        }
        if out.is_empty() && self.errors.is_empty() {
            self.err(key, "expected at least one tool", None);
        }
        out
    }
}

/// OpenAI's rule for function names: 1 to 64 of `a-zA-Z0-9_-`.
fn is_tool_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
