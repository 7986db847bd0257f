//! The shape of the request kinds that generate no text: the two
//! retrieval kinds, embeddings and rerank (what a workload of `api =
//! "embeddings"` or `"rerank"` sends besides its first text,
//! `input_tokens`), and KServe v2 tensors (`api = "kserve"`,
//! `crate::tensor`). Compiled in `compile/retrieval.rs` and
//! `compile/tensors.rs`; a generation workload has none.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Dist;

/// How an embedding server writes its vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EncodingFormat {
    /// A JSON array of numbers.
    #[default]
    Float,
    /// Base64 of little-endian f32s.
    Base64,
}

impl EncodingFormat {
    pub fn name(self) -> &'static str {
        match self {
            EncodingFormat::Float => "float",
            EncodingFormat::Base64 => "base64",
        }
    }
}

/// What an embeddings or rerank request carries besides its first text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Retrieval {
    /// `batch` inputs per request, each of `input_tokens`.
    Embeddings {
        batch: u32,
        encoding_format: EncodingFormat,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dimensions: Option<u32>,
    },
    /// A query of `input_tokens` and `documents` documents of
    /// `document_tokens` each.
    Rerank {
        documents: u32,
        document_tokens: Dist,
    },
    /// KServe v2 inference: `batch` items of each input tensor.
    Tensors(crate::tensor::Tensors),
}

impl Retrieval {
    /// Texts per request besides the first (embeddings: `batch - 1`
    /// inputs; rerank: the documents).
    pub fn items(&self) -> u32 {
        match self {
            Retrieval::Embeddings { batch, .. } => batch.saturating_sub(1),
            Retrieval::Rerank { documents, .. } => *documents,
            Retrieval::Tensors(_) => 0,
        }
    }

    /// Whether requests of `self` and `other` are sent and read alike (the
    /// same count of inputs or documents, encoding and dimension): what the
    /// parts of a mix must share; document lengths may differ.
    pub fn sends_alike(&self, other: &Retrieval) -> bool {
        match (self, other) {
            (Retrieval::Rerank { documents: a, .. }, Retrieval::Rerank { documents: b, .. }) => {
                a == b
            }
            (a, b) => a == b,
        }
    }

    /// What a request counts per second beside requests: inputs
    /// (embeddings, `batch` of them), documents (rerank) or items
    /// (tensors, `batch` of them).
    pub fn units(&self) -> u32 {
        match self {
            Retrieval::Embeddings { batch, .. } => *batch,
            Retrieval::Rerank { documents, .. } => *documents,
            Retrieval::Tensors(t) => t.batch,
        }
    }
}

/// A workload as a matrix point's `batch` and `documents` axes make it:
/// the same workload when neither is set, else a copy with the count
/// replaced, named `{name}.b{batch}` or `{name}.d{documents}` (so its
/// slug, hash and prompts are its own). Err: the axis that does not fit
/// the workload's api, and why.
pub fn with_axes(
    w: &crate::model::Workload,
    batch: Option<u32>,
    documents: Option<u32>,
) -> Result<std::borrow::Cow<'_, crate::model::Workload>, (&'static str, String)> {
    use std::borrow::Cow;
    if batch.is_none() && documents.is_none() {
        return Ok(Cow::Borrowed(w));
    }
    let mut out = w.clone();
    let fits = |axis: &'static str, api: &str| {
        (
            axis,
            format!(
                "the matrix's `{axis}` axis applies to api = \"{api}\" workloads, and workload \"{}\" is not one",
                w.name
            ),
        )
    };
    if let Some(b) = batch {
        match &mut out.retrieval {
            Some(Retrieval::Embeddings { batch, .. }) => *batch = b,
            Some(Retrieval::Tensors(t)) => t.batch = b,
            _ => return Err(fits("batch", "embeddings\" or \"kserve")),
        }
        out.name = format!("{}.b{b}", w.name);
    }
    if let Some(d) = documents {
        match &mut out.retrieval {
            Some(Retrieval::Rerank { documents, .. }) => *documents = d,
            _ => return Err(fits("documents", "rerank")),
        }
        out.name = format!("{}.d{d}", w.name);
    }
    Ok(Cow::Owned(out))
}
