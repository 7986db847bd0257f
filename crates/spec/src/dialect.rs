//! Server dialects: which request fields beyond the OpenAI API a server
//! accepts, and under what name. Strict servers (OpenAI itself, Hugging
//! Face `transformers serve`) reject a body with a field they do not know
//! (HTTP 422), so a field is sent only to a dialect that carries it.
//!
//! This module owns the table (the names a spec may write are `raw`'s,
//! with the rest of the TOML); the compiler checks a spec against a
//! target's declared dialect, and the OpenAI backend builds bodies with it.

pub use crate::raw::Dialect;

/// The request fields a spec can set that the OpenAI API does not define
/// (`workloads.*.ignore_eos` and the `sampling` keys below).
pub const EXTRA_FIELDS: [&str; 4] = ["ignore_eos", "top_k", "min_p", "repetition_penalty"];

impl Dialect {
    pub const ALL: [Dialect; 7] = [
        Dialect::Openai,
        Dialect::Vllm,
        Dialect::Sglang,
        Dialect::Tgi,
        Dialect::LlamaCpp,
        Dialect::Trtllm,
        Dialect::Tei,
    ];

    /// The name a spec uses.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Openai => "openai",
            Dialect::Vllm => "vllm",
            Dialect::Sglang => "sglang",
            Dialect::Tgi => "tgi",
            Dialect::LlamaCpp => "llama.cpp",
            Dialect::Trtllm => "trtllm",
            Dialect::Tei => "tei",
        }
    }

    /// The name `field` goes by on the wire in this dialect, or `None` if
    /// the dialect cannot carry it. A field of the OpenAI API is carried by
    /// every dialect under its own name.
    pub fn wire_name(self, field: &str) -> Option<&str> {
        if !EXTRA_FIELDS.contains(&field) {
            return Some(field);
        }
        match self {
            Dialect::Openai | Dialect::Tgi | Dialect::Tei => None,
            Dialect::Vllm | Dialect::Sglang | Dialect::Trtllm => Some(field),
            Dialect::LlamaCpp if field == "repetition_penalty" => Some("repeat_penalty"),
            Dialect::LlamaCpp => Some(field),
        }
    }

    /// The dialect a server's `GET /v1/models` names in `owned_by` (vLLM,
    /// SGLang, llama.cpp and TensorRT-LLM each name themselves; the
    /// built-in simulator takes vLLM's fields).
    pub fn from_owned_by(owned_by: &str) -> Option<Dialect> {
        match owned_by {
            "vllm" => Some(Dialect::Vllm),
            "sglang" => Some(Dialect::Sglang),
            "llamacpp" => Some(Dialect::LlamaCpp),
            "tensorrt_llm" => Some(Dialect::Trtllm),
            "infer-bench-sim" => Some(Dialect::Vllm),
            _ => None,
        }
    }
}

/// The fields beyond the OpenAI API a workload asks for, each with its key
/// under `workloads.NAME`.
pub fn extra_fields_asked(w: &crate::model::Workload) -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    if w.ignore_eos {
        out.push(("ignore_eos", "ignore_eos"));
    }
    let s = &w.sampling;
    for (field, key, set) in [
        ("top_k", "sampling.top_k", s.top_k.is_some()),
        ("min_p", "sampling.min_p", s.min_p.is_some()),
        (
            "repetition_penalty",
            "sampling.repetition_penalty",
            s.repetition_penalty.is_some(),
        ),
    ] {
        if set {
            out.push((field, key));
        }
    }
    out
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde() {
        for d in Dialect::ALL {
            let v = serde_json::to_value(d).unwrap();
            assert_eq!(v, serde_json::json!(d.name()));
            assert_eq!(serde_json::from_value::<Dialect>(v).unwrap(), d);
        }
    }

    #[test]
    fn strict_dialects_carry_only_the_openai_fields() {
        for d in [Dialect::Openai, Dialect::Tgi, Dialect::Tei] {
            for f in EXTRA_FIELDS {
                assert_eq!(d.wire_name(f), None, "{d} {f}");
            }
            assert_eq!(d.wire_name("temperature"), Some("temperature"));
        }
        assert_eq!(
            Dialect::LlamaCpp.wire_name("repetition_penalty"),
            Some("repeat_penalty")
        );
        assert_eq!(Dialect::Vllm.wire_name("ignore_eos"), Some("ignore_eos"));
        assert_eq!(Dialect::from_owned_by("llamacpp"), Some(Dialect::LlamaCpp));
        assert_eq!(Dialect::from_owned_by("someone"), None);
    }
}
