//! `api = "embeddings"`: `POST {base_url}/embeddings`, the OpenAI shape that
//! vLLM, TEI, llama.cpp and Infinity serve. A request carries `batch`
//! inputs (the prompt's text, then its items); the answer is one JSON body
//! whose vectors are checked as they are parsed and never kept: one vector
//! per input, each index in range and once, one dimension for all (the
//! `dimensions` asked, where asked), every number finite; base64 vectors
//! are little-endian f32s, a multiple of 4 bytes. A failed check fails the
//! request as `malformed`, its detail saying which.

use std::fmt;

use base64::Engine as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::record::ErrorClass;
use crate::{EventInfo, Protocol, Unreadable, Usage};
use infer_bench_spec::retrieval::{EncodingFormat, Retrieval};
use infer_bench_workload::Prompt;

/// `POST {base_url}/embeddings`.
#[derive(Debug, Clone)]
pub struct Embeddings {
    model: String,
    batch: u32,
    encoding_format: EncodingFormat,
    dimensions: Option<u32>,
    extra_body: serde_json::Map<String, serde_json::Value>,
}

impl Embeddings {
    pub fn new(workload: &infer_bench_spec::Workload, model: &str) -> Embeddings {
        let (batch, encoding_format, dimensions) = match &workload.retrieval {
            Some(Retrieval::Embeddings {
                batch,
                encoding_format,
                dimensions,
            }) => (*batch, *encoding_format, *dimensions),
            _ => (1, EncodingFormat::Float, None),
        };
        Embeddings {
            model: model.to_string(),
            batch,
            encoding_format,
            dimensions,
            extra_body: workload.extra_body.clone(),
        }
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    input: Inputs<'a>,
    encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
    #[serde(flatten)]
    extra: &'a serde_json::Map<String, serde_json::Value>,
}

/// A prompt's text and items as one JSON array of strings.
pub(crate) struct Inputs<'a>(pub(crate) &'a str, pub(crate) &'a [String]);

impl Serialize for Inputs<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(1 + self.1.len()))?;
        seq.serialize_element(self.0)?;
        for t in self.1 {
            seq.serialize_element(t)?;
        }
        seq.end()
    }
}

/// Usage as the retrieval servers write it: `prompt_tokens`, else
/// `total_tokens` (vLLM's rerank writes only that), else TEI-style
/// `input_tokens`.
#[derive(Deserialize, Default)]
pub(crate) struct UsageWire {
    #[serde(default)]
    prompt_tokens: Option<u32>,
    #[serde(default)]
    total_tokens: Option<u32>,
    #[serde(default)]
    input_tokens: Option<u32>,
}

impl UsageWire {
    pub(crate) fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self
                .prompt_tokens
                .or(self.input_tokens)
                .or(self.total_tokens),
            // Nothing is generated: the output is zero tokens, by the
            // server's word as much as ours.
            completion_tokens: Some(0),
            reasoning_tokens: None,
        }
    }
}

/// What the vectors of one answer were: checked, counted, not kept.
#[derive(Default)]
struct Seen {
    /// Index of each vector, in order of arrival.
    indices: Vec<u64>,
    /// The first vector's dimension.
    dimension: Option<usize>,
    problem: Option<String>,
}

/// Reads a vector into its dimension, failing on a number that is not
/// finite (JSON cannot write one, but a number too large for f32 is one
/// once it is read as the server's f32).
struct VectorVisitor;

impl<'de> Visitor<'de> for VectorVisitor {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an embedding: an array of numbers or a base64 string")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<usize, A::Error> {
        let mut n = 0usize;
        while let Some(x) = a.next_element::<f64>()? {
            if !(x as f32).is_finite() {
                return Err(de::Error::custom(format!(
                    "element {n} of an embedding is not a finite f32 ({x})"
                )));
            }
            n += 1;
        }
        Ok(n)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<usize, E> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| E::custom(format!("an embedding is not base64: {e}")))?;
        if bytes.len() % 4 != 0 {
            return Err(E::custom(format!(
                "a base64 embedding holds {} bytes, not a multiple of 4 (little-endian f32s)",
                bytes.len()
            )));
        }
        for (i, c) in bytes.chunks_exact(4).enumerate() {
            let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            if !x.is_finite() {
                return Err(E::custom(format!(
                    "element {i} of a base64 embedding is not finite ({x})"
                )));
            }
        }
        Ok(bytes.len() / 4)
    }
}

/// `data`: the vectors, each checked as it is read.
struct Data<'s>(&'s mut Seen);

impl<'de> DeserializeSeed<'de> for Data<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Data<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of embeddings")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        while let Some(item) = a.next_element_seed(Item)? {
            let (index, dim) = item;
            let at = self.0.indices.len() as u64;
            self.0.indices.push(index.unwrap_or(at));
            match self.0.dimension {
                None => self.0.dimension = Some(dim),
                Some(d) if d != dim && self.0.problem.is_none() => {
                    self.0.problem = Some(format!(
                        "the embeddings differ in dimension: {d} for the first, {dim} for the one at position {at}"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// One `data` element: its `index` and its vector's dimension.
struct Item;

impl<'de> DeserializeSeed<'de> for Item {
    type Value = (Option<u64>, usize);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Item {
    type Value = (Option<u64>, usize);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an embedding object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let (mut index, mut dim) = (None, None);
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*k {
                "index" => index = Some(m.next_value::<u64>()?),
                "embedding" => dim = Some(m.next_value_seed(VectorSeed)?),
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        let dim =
            dim.ok_or_else(|| de::Error::custom("an element of `data` has no `embedding`"))?;
        Ok((index, dim))
    }
}

struct VectorSeed;

impl<'de> DeserializeSeed<'de> for VectorSeed {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_any(VectorVisitor)
    }
}

/// The whole answer: `data`, `usage`, or an `error`.
struct Answer<'s>(&'s mut Seen);

#[derive(Default)]
struct AnswerParts {
    data: bool,
    usage: Option<UsageWire>,
    error: Option<serde_json::Value>,
}

impl<'de> Visitor<'de> for Answer<'_> {
    type Value = AnswerParts;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an embeddings answer (a JSON object with `data`)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<AnswerParts, A::Error> {
        let mut out = AnswerParts::default();
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*k {
                "data" => {
                    m.next_value_seed(Data(&mut *self.0))?;
                    out.data = true;
                }
                "usage" => out.usage = m.next_value()?,
                "error" => out.error = Some(m.next_value()?),
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// Checks that `indices` name each of `0..expected` once.
pub(crate) fn check_indices(indices: &[u64], expected: u32, what: &str) -> Result<(), Unreadable> {
    if indices.len() != expected as usize {
        return Err(Unreadable(format!(
            "expected {expected} {what} (one per {}), found {}",
            if what == "embeddings" {
                "input"
            } else {
                "document"
            },
            indices.len()
        )));
    }
    let mut seen = vec![false; expected as usize];
    for &i in indices {
        match seen.get_mut(i as usize) {
            None => {
                return Err(Unreadable(format!(
                    "a {} has index {i}, outside 0..{expected}",
                    what.trim_end_matches('s')
                )));
            }
            Some(true) => {
                return Err(Unreadable(format!(
                    "index {i} comes twice among the {what}"
                )));
            }
            Some(s) => *s = true,
        }
    }
    Ok(())
}

/// Reads an embeddings answer: checks its vectors against `batch` and
/// `dimensions`, and returns its usage.
pub fn read_answer(
    body: &[u8],
    batch: u32,
    dimensions: Option<u32>,
) -> Result<EventInfo, Unreadable> {
    let mut seen = Seen::default();
    let mut de = serde_json::Deserializer::from_slice(body);
    let parts = de
        .deserialize_map(Answer(&mut seen))
        .and_then(|p| de.end().map(|_| p))
        .map_err(|e| {
            Unreadable(format!(
                "not an embeddings answer: {e}: {}",
                crate::openai::shown(body)
            ))
        })?;
    if let Some(e) = &parts.error {
        return Ok(EventInfo {
            error: Some(crate::openai::error_text(e)),
            ..EventInfo::default()
        });
    }
    if !parts.data {
        return Err(Unreadable("an embeddings answer without `data`".into()));
    }
    if let Some(p) = seen.problem {
        return Err(Unreadable(p));
    }
    check_indices(&seen.indices, batch, "embeddings")?;
    if let (Some(want), Some(got)) = (dimensions, seen.dimension) {
        if got != want as usize {
            return Err(Unreadable(format!(
                "dimensions = {want} was asked, the embeddings have {got}"
            )));
        }
    }
    if seen.dimension == Some(0) {
        return Err(Unreadable("the embeddings are empty (dimension 0)".into()));
    }
    Ok(EventInfo {
        output: true,
        finished: true,
        usage: Some(parts.usage.unwrap_or_default().usage()),
        ..EventInfo::default()
    })
}

impl Protocol for Embeddings {
    fn name(&self) -> &'static str {
        "embeddings"
    }

    fn path(&self) -> &str {
        "embeddings"
    }

    fn body(&self, prompt: &Prompt) -> Vec<u8> {
        serde_json::to_vec(&Body {
            model: &self.model,
            input: Inputs(&prompt.text, &prompt.items),
            encoding_format: self.encoding_format.name(),
            dimensions: self.dimensions,
            extra: &self.extra_body,
        })
        .unwrap_or_default()
    }

    fn streams(&self) -> bool {
        false
    }

    fn read_event(
        &self,
        data: &[u8],
        _reply: Option<&mut crate::structured::Reply>,
        _id: Option<&mut Option<String>>,
    ) -> Result<EventInfo, Unreadable> {
        read_answer(data, self.batch, self.dimensions)
    }

    fn failure_classes(&self) -> &'static [ErrorClass] {
        ErrorClass::ALL
    }

    fn units(&self, prompt: &Prompt) -> crate::Units {
        crate::Units {
            inputs: 1 + prompt.items.len() as u32,
            ..crate::Units::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: &str, batch: u32, dims: Option<u32>) -> Result<EventInfo, String> {
        read_answer(body.as_bytes(), batch, dims).map_err(|e| e.0)
    }

    #[test]
    fn a_good_answer_gives_its_usage() {
        let body = r#"{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0.5,-1]},{"object":"embedding","index":0,"embedding":[1e-3,2]}],"model":"m","usage":{"prompt_tokens":7,"total_tokens":7}}"#;
        let info = check(body, 2, Some(2)).unwrap();
        assert!(info.output);
        assert_eq!(info.usage.unwrap().prompt_tokens, Some(7));
        assert_eq!(info.usage.unwrap().completion_tokens, Some(0));
    }

    #[test]
    fn base64_vectors_are_little_endian_f32s() {
        let enc = |xs: &[f32]| {
            let b: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
            base64::engine::general_purpose::STANDARD.encode(b)
        };
        let good = format!(
            r#"{{"data":[{{"index":0,"embedding":"{}"}}]}}"#,
            enc(&[1.0, 2.0, 3.0])
        );
        assert!(check(&good, 1, Some(3)).is_ok());
        let nan = format!(
            r#"{{"data":[{{"index":0,"embedding":"{}"}}]}}"#,
            enc(&[1.0, f32::NAN])
        );
        assert!(check(&nan, 1, None).unwrap_err().contains("not finite"));
        let odd = format!(
            r#"{{"data":[{{"index":0,"embedding":"{}"}}]}}"#,
            base64::engine::general_purpose::STANDARD.encode([1u8, 2, 3, 4, 5, 6])
        );
        assert!(check(&odd, 1, None).unwrap_err().contains("multiple of 4"));
    }

    #[test]
    fn every_broken_promise_is_named() {
        let one = |e: &str| format!(r#"{{"data":[{{"index":0,"embedding":{e}}}]}}"#);
        assert!(
            check(&one("[1,2]"), 2, None)
                .unwrap_err()
                .contains("expected 2 embeddings")
        );
        assert!(
            check(&one("[1,2]"), 1, Some(3))
                .unwrap_err()
                .contains("dimensions = 3")
        );
        assert!(
            check(&one("[1e300]"), 1, None)
                .unwrap_err()
                .contains("finite")
        );
        assert!(check(&one("[1,null]"), 1, None).is_err());
        assert!(
            check(&one("[]"), 1, None)
                .unwrap_err()
                .contains("dimension 0")
        );
        let ragged = r#"{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1]}]}"#;
        assert!(
            check(ragged, 2, None)
                .unwrap_err()
                .contains("differ in dimension")
        );
        let twice = r#"{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]}]}"#;
        assert!(check(twice, 2, None).unwrap_err().contains("twice"));
        let outside = r#"{"data":[{"index":5,"embedding":[1]}]}"#;
        assert!(check(outside, 1, None).unwrap_err().contains("outside"));
        assert!(
            check(r#"{"object":"list"}"#, 1, None)
                .unwrap_err()
                .contains("without `data`")
        );
        assert!(check("[1]", 1, None).is_err());
        let err = check(r#"{"error":{"message":"too long","code":400}}"#, 1, None).unwrap();
        assert_eq!(err.error.as_deref(), Some("too long"));
    }
}
