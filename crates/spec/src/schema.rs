//! The spec's JSON Schema: generated from the raw types (draft-07, which
//! editors that read JSON Schema for TOML accept), committed as
//! `schemas/spec.schema.json`, and used as a second structural check of
//! every spec a user gives us.

use std::sync::OnceLock;

use schemars::generate::SchemaSettings;

use super::diag::{Locator, SpecError, SpecErrors};
use super::raw::RawSpec;

/// The spec schema as JSON.
pub fn spec_schema() -> serde_json::Value {
    let schema = SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<RawSpec>();
    let mut value = serde_json::to_value(schema).expect("a schema serializes");
    if let Some(obj) = value.as_object_mut() {
        obj.insert(
            "$id".into(),
            "https://infer-bench.dev/schemas/spec.schema.json".into(),
        );
    }
    value
}

/// The schema as committed: pretty JSON with a final newline.
pub fn spec_schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&spec_schema()).expect("serializes");
    s.push('\n');
    s
}

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        jsonschema::draft7::new(&spec_schema()).expect("the generated schema is valid draft-07")
    })
}

/// Converts a JSON pointer into our dotted key path (`/matrix/include/0/model`
/// becomes `matrix.include[0].model`), using the document to tell array
/// indices from keys.
fn pointer_to_path(pointer: &str, doc: &serde_json::Value) -> String {
    let mut out = String::new();
    let mut node = Some(doc);
    for raw in pointer.split('/').skip(1) {
        let seg = raw.replace("~1", "/").replace("~0", "~");
        match node {
            Some(serde_json::Value::Array(a)) => {
                out.push_str(&format!("[{seg}]"));
                node = seg.parse::<usize>().ok().and_then(|i| a.get(i));
            }
            _ => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&seg);
                node = node.and_then(|n| n.get(&seg));
            }
        }
    }
    out
}

/// Checks the document against the schema. The serde pass catches almost
/// everything with better messages first; this keeps the schema honest and
/// reports what only it says (ranges, patterns).
pub fn validate_structure(loc: &Locator, source: &str) -> Result<(), SpecErrors> {
    let Ok(value) = toml::from_str::<toml::Value>(source) else {
        return Ok(());
    };
    let Ok(json) = serde_json::to_value(&value) else {
        return Ok(());
    };
    let errors: Vec<SpecError> = validator()
        .iter_errors(&json)
        .map(|e| {
            let path = pointer_to_path(e.instance_path().as_str(), &json);
            loc.error(
                &path,
                format!("does not match the spec schema: {}", e.masked()),
                None,
            )
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SpecErrors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_become_key_paths() {
        let doc = serde_json::json!({"matrix": {"include": [{"model": "x"}]}});
        assert_eq!(
            pointer_to_path("/matrix/include/0/model", &doc),
            "matrix.include[0].model"
        );
        assert_eq!(pointer_to_path("", &doc), "");
    }

    #[test]
    fn schema_is_draft07() {
        let s = spec_schema();
        assert_eq!(s["$schema"], "http://json-schema.org/draft-07/schema#");
    }
}
