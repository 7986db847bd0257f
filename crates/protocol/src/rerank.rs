//! `api = "rerank"`: `POST {base_url}/rerank`, a query and N documents
//! scored by a cross-encoder. The target's dialect decides the body:
//! Hugging Face TEI (`dialect = "tei"`) takes `{query, texts}` and answers a
//! bare array of `{index, score}`; vLLM, llama.cpp, Infinity and Cohere
//! (every other dialect) take `{model, query, documents, top_n}` and answer
//! `{results: [{index, relevance_score}], usage?}`. Either answer is read
//! (a server is known by what it says, not by what it was called) and
//! checked: exactly one score per document, each index in range and once,
//! every score finite; a failed check fails the request as `malformed`.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserializer, Serialize};

use crate::embeddings::{UsageWire, check_indices};
use crate::record::ErrorClass;
use crate::{EventInfo, Protocol, Unreadable};
use infer_bench_spec::Dialect;
use infer_bench_spec::retrieval::Retrieval;
use infer_bench_workload::Prompt;

/// `POST {base_url}/rerank`.
#[derive(Debug, Clone)]
pub struct Rerank {
    model: String,
    documents: u32,
    tei: bool,
    extra_body: serde_json::Map<String, serde_json::Value>,
}

impl Rerank {
    pub fn new(workload: &infer_bench_spec::Workload, model: &str, dialect: Dialect) -> Rerank {
        let documents = match &workload.retrieval {
            Some(Retrieval::Rerank { documents, .. }) => *documents,
            _ => 1,
        };
        Rerank {
            model: model.to_string(),
            documents,
            tei: dialect == Dialect::Tei,
            extra_body: workload.extra_body.clone(),
        }
    }
}

/// The documents of a prompt: its items (its text is the query).
struct Documents<'a>(&'a [String]);

impl Serialize for Documents<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0)
    }
}

#[derive(Serialize)]
struct CohereBody<'a> {
    model: &'a str,
    query: &'a str,
    documents: Documents<'a>,
    top_n: u32,
    #[serde(flatten)]
    extra: &'a serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize)]
struct TeiBody<'a> {
    query: &'a str,
    texts: Documents<'a>,
    #[serde(flatten)]
    extra: &'a serde_json::Map<String, serde_json::Value>,
}

/// The scores of one answer, checked as they are read.
#[derive(Default)]
struct Scores {
    indices: Vec<u64>,
}

struct ResultsSeed<'s>(&'s mut Scores);

impl<'de> DeserializeSeed<'de> for ResultsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ResultsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of `{index, relevance_score}`")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        while let Some(i) = a.next_element_seed(ScoreSeed)? {
            self.0.indices.push(i);
        }
        Ok(())
    }
}

/// One result: its index, its score checked finite.
struct ScoreSeed;

impl<'de> DeserializeSeed<'de> for ScoreSeed {
    type Value = u64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ScoreSeed {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a result `{index, relevance_score}`")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<u64, A::Error> {
        let (mut index, mut score) = (None, None);
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*k {
                "index" => index = Some(m.next_value::<u64>()?),
                "relevance_score" | "score" => score = Some(m.next_value::<f64>()?),
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        let index = index.ok_or_else(|| de::Error::custom("a result has no `index`"))?;
        match score {
            None => Err(de::Error::custom(format!(
                "the result for document {index} has no `relevance_score`"
            ))),
            Some(s) if !(s as f32).is_finite() => Err(de::Error::custom(format!(
                "the score of document {index} is not finite ({s})"
            ))),
            Some(_) => Ok(index),
        }
    }
}

/// The whole answer: a bare array (TEI) or `{results, usage}`.
struct Answer<'s>(&'s mut Scores);

#[derive(Default)]
struct Parts {
    results: bool,
    usage: Option<UsageWire>,
    error: Option<serde_json::Value>,
}

impl<'de> Visitor<'de> for Answer<'_> {
    type Value = Parts;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a rerank answer (`{results: [...]}` or an array of `{index, score}`)")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Parts, A::Error> {
        ResultsSeed(self.0).visit_seq(a)?;
        Ok(Parts {
            results: true,
            ..Parts::default()
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Parts, A::Error> {
        let mut out = Parts::default();
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*k {
                "results" => {
                    m.next_value_seed(ResultsSeed(&mut *self.0))?;
                    out.results = true;
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

/// Reads a rerank answer for a request of `documents` documents.
pub fn read_answer(body: &[u8], documents: u32) -> Result<EventInfo, Unreadable> {
    let mut scores = Scores::default();
    let mut de = serde_json::Deserializer::from_slice(body);
    let parts = de
        .deserialize_any(Answer(&mut scores))
        .and_then(|p| de.end().map(|_| p))
        .map_err(|e| {
            Unreadable(format!(
                "not a rerank answer: {e}: {}",
                crate::openai::shown(body)
            ))
        })?;
    if let Some(e) = &parts.error {
        return Ok(EventInfo {
            error: Some(crate::openai::error_text(e)),
            ..EventInfo::default()
        });
    }
    if !parts.results {
        return Err(Unreadable("a rerank answer without `results`".into()));
    }
    check_indices(&scores.indices, documents, "scores")?;
    Ok(EventInfo {
        output: true,
        finished: true,
        usage: Some(parts.usage.unwrap_or_default().usage()),
        ..EventInfo::default()
    })
}

impl Protocol for Rerank {
    fn name(&self) -> &'static str {
        "rerank"
    }

    fn path(&self) -> &str {
        "rerank"
    }

    fn body(&self, prompt: &Prompt) -> Vec<u8> {
        let docs = Documents(&prompt.items);
        if self.tei {
            serde_json::to_vec(&TeiBody {
                query: &prompt.text,
                texts: docs,
                extra: &self.extra_body,
            })
        } else {
            serde_json::to_vec(&CohereBody {
                model: &self.model,
                query: &prompt.text,
                documents: docs,
                top_n: prompt.items.len() as u32,
                extra: &self.extra_body,
            })
        }
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
        read_answer(data, self.documents)
    }

    fn warm_path(&self) -> &str {
        if self.tei { "info" } else { "models" }
    }

    fn failure_classes(&self) -> &'static [ErrorClass] {
        ErrorClass::ALL
    }

    fn units(&self, prompt: &Prompt) -> crate::Units {
        crate::Units {
            documents: prompt.items.len() as u32,
            document_tokens: prompt.item_tokens,
            ..crate::Units::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: &str, n: u32) -> Result<EventInfo, String> {
        read_answer(body.as_bytes(), n).map_err(|e| e.0)
    }

    #[test]
    fn both_shapes_read() {
        let cohere = r#"{"model":"m","object":"list","usage":{"prompt_tokens":21,"total_tokens":21},"results":[{"index":1,"relevance_score":-3.5},{"index":0,"relevance_score":0.25}]}"#;
        let info = check(cohere, 2).unwrap();
        assert_eq!(info.usage.unwrap().prompt_tokens, Some(21));
        let vllm = r#"{"id":"r","model":"m","usage":{"total_tokens":9},"results":[{"index":0,"document":{"text":"a"},"relevance_score":0.9}]}"#;
        assert_eq!(
            check(vllm, 1).unwrap().usage.unwrap().prompt_tokens,
            Some(9)
        );
        let tei = r#"[{"index":1,"score":0.5},{"index":0,"score":0.1}]"#;
        assert_eq!(check(tei, 2).unwrap().usage.unwrap().prompt_tokens, None);
    }

    #[test]
    fn every_broken_promise_is_named() {
        assert!(
            check(r#"[{"index":0,"score":1}]"#, 2)
                .unwrap_err()
                .contains("expected 2 scores")
        );
        assert!(
            check(r#"[{"index":0,"score":1},{"index":0,"score":2}]"#, 2)
                .unwrap_err()
                .contains("twice")
        );
        assert!(
            check(r#"[{"index":3,"score":1}]"#, 1)
                .unwrap_err()
                .contains("outside")
        );
        assert!(
            check(r#"[{"index":0,"score":1e300}]"#, 1)
                .unwrap_err()
                .contains("finite")
        );
        assert!(
            check(r#"[{"index":0}]"#, 1)
                .unwrap_err()
                .contains("no `relevance_score`")
        );
        assert!(
            check(r#"{"usage":{}}"#, 1)
                .unwrap_err()
                .contains("without `results`")
        );
        assert_eq!(
            check(r#"{"error":{"message":"no"}}"#, 1)
                .unwrap()
                .error
                .as_deref(),
            Some("no")
        );
    }

    #[test]
    fn bodies_follow_the_dialect() {
        let text = "name = \"t\"\n[targets.s]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\napi = \"rerank\"\ninput_tokens = 4\ndocuments = 2\ndocument_tokens = 3\n[load]\nconcurrency = 1\nrequests = 1\n";
        let spec = infer_bench_spec::compile("t.toml", text, std::path::Path::new(".")).unwrap();
        let plan = infer_bench_spec::plan::Plan::build(&spec).unwrap();
        let w = &plan.points[0].config.workload;
        let p = Prompt {
            history: Vec::new(),
            text: "q".into(),
            input_tokens: 3,
            output_tokens: 0,
            part: 0,
            items: vec!["a".into(), "b".into()],
            item_tokens: 2,
            media: None,
        };
        let v: serde_json::Value =
            serde_json::from_slice(&Rerank::new(w, "m", Dialect::Vllm).body(&p)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model":"m","query":"q","documents":["a","b"],"top_n":2})
        );
        let v: serde_json::Value =
            serde_json::from_slice(&Rerank::new(w, "m", Dialect::Tei).body(&p)).unwrap();
        assert_eq!(v, serde_json::json!({"query":"q","texts":["a","b"]}));
    }
}
