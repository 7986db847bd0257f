//! The spec's JSON Schema: generated from the raw types (draft-07, which
//! editors that read JSON Schema for TOML accept) and committed as
//! `schemas/spec.schema.json`, for editors and for tools that check specs.
//! The tool itself checks specs with serde and the compiler, which give
//! positioned messages; the tests below hold that every spec the schema
//! rejects, the compiler rejects too.

use schemars::generate::SchemaSettings;

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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    /// Converts a JSON pointer into our dotted key path
    /// (`/matrix/include/0/model` becomes `matrix.include[0].model`), using
    /// the document to tell array indices from keys.
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

    /// What the schema says of a spec's text: the key paths it rejects.
    fn schema_errors(validator: &jsonschema::Validator, source: &str) -> Vec<String> {
        let Ok(value) = toml::from_str::<toml::Value>(source) else {
            return Vec::new();
        };
        let json = serde_json::to_value(&value).unwrap();
        validator
            .iter_errors(&json)
            .map(|e| {
                format!(
                    "{}: {}",
                    pointer_to_path(e.instance_path().as_str(), &json),
                    e.masked()
                )
            })
            .collect()
    }

    fn toml_files(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        v.sort();
        v
    }

    /// The compiler is the check the tool runs; the schema must never
    /// reject a spec the compiler accepts, or the other way round for the
    /// cases the schema can see: every shipped and test spec, every invalid
    /// one, and variants of the shipped specs with one value broken.
    #[test]
    fn the_compiler_rejects_whatever_the_schema_rejects() {
        let validator = jsonschema::draft7::new(&spec_schema()).unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut sources: Vec<(String, String)> = Vec::new();
        for dir in ["specs", "tests/specs", "tests/invalid-specs"] {
            for f in toml_files(&root.join(dir)) {
                // Not text at all (not-utf8.toml): neither sees it.
                if let Ok(text) = std::fs::read_to_string(&f) {
                    sources.push((f.display().to_string(), text));
                }
            }
        }
        // One broken value at a time in every shipped spec.
        let breaks: &[(&str, &str)] = &[
            ("concurrency = ", "concurrency = -1 # "),
            ("runs = ", "runs = 0 # "),
            ("seed = ", "seed = -5 # "),
            ("duration = \"", "duration = \"soon\" # \""),
            ("kind = \"", "kind = \"nope\" # \""),
            ("gpu = \"", "gpu = 3 # \""),
            ("input_tokens = ", "input_tokens = \"many\" # "),
        ];
        for f in toml_files(&root.join("specs")) {
            let text = std::fs::read_to_string(&f).unwrap();
            for (from, to) in breaks {
                if text.contains(from) {
                    sources.push((
                        format!("{} ({to})", f.display()),
                        text.replacen(from, to, 1),
                    ));
                }
            }
        }
        let mut disagreements = Vec::new();
        let mut rejected = 0;
        for (name, text) in &sources {
            let schema = schema_errors(&validator, text);
            rejected += usize::from(!schema.is_empty());
            let compiled = crate::compile(name, text, &root.join("specs"));
            if !schema.is_empty() && compiled.is_ok() {
                disagreements.push(format!(
                    "{name}: the schema rejects it ({schema:?}), the compiler does not"
                ));
            }
        }
        assert!(sources.len() > 40, "{}", sources.len());
        assert!(
            rejected > 20,
            "the schema rejected only {rejected}: the cases test nothing"
        );
        assert!(disagreements.is_empty(), "{disagreements:#?}");
    }

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
