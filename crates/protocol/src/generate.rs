//! Triton's generate extension (`POST v2/models/{model}/generate_stream`,
//! or `/generate` when not streamed), the text endpoint of Triton's
//! TensorRT-LLM and vLLM backends. Triton hands each field of the body to
//! the model's input of that name and the others to the model as request
//! parameters, so a body is flat: `text_input` (the prompt's text), the
//! output cap (`max_tokens` by default), `stream`, `ignore_eos` and the
//! sampling fields under their own names, then `extra_body` as written (a
//! TensorRT-LLM ensemble's `bad_words`, a vLLM backend's
//! `exclude_input_in_output`...).
//!
//! Each streamed event is one response of the model,
//! `{"model_name","model_version","text_output"}` with the text it added,
//! or `{"error": "..."}` when the model failed after the stream began; a
//! whole answer is one such object with the whole text. Nothing reports
//! token counts: they come from the model's tokenizer when the spec names
//! one, else each event counts as one token (marked approximate). The
//! stream has no end marker of its own: its clean end (the last chunk of
//! the body) completes it, and a connection cut before that is truncation.

use std::borrow::Cow;

use serde::Deserialize;

use crate::openai::{BodyTemplate, unreadable};
use crate::record::ErrorClass;
use crate::{EventInfo, Protocol, Unreadable};
use infer_bench_spec::Dialect;
use infer_bench_spec::raw::Api;
use infer_bench_workload::Prompt;

/// `POST {base_url}/v2/models/{model}/generate_stream` (or `/generate`).
#[derive(Debug, Clone)]
pub struct Generate {
    body: BodyTemplate,
    stream: bool,
    path: String,
}

impl Generate {
    pub fn new(workload: &infer_bench_spec::Workload, model: &str) -> Generate {
        let end = if workload.stream {
            "generate_stream"
        } else {
            "generate"
        };
        Generate {
            // The dialect names the OpenAI servers' extra fields; Triton
            // takes them all under their own names (see `BodyTemplate`).
            body: BodyTemplate::new(Api::Generate, workload, model, Dialect::Openai),
            stream: workload.stream,
            path: format!("{}/{end}", crate::kserve::model_path(model, None)),
        }
    }
}

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(borrow, default)]
    text_output: Option<TextOutput<'a>>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

/// `text_output` as Triton writes it: a string for a one-element tensor,
/// an array of strings for more (a model that answers several).
#[derive(Deserialize)]
#[serde(untagged)]
enum TextOutput<'a> {
    One(#[serde(borrow)] Cow<'a, str>),
    Many(#[serde(borrow)] Vec<Cow<'a, str>>),
}

/// The useful line of a model's error: Triton passes a python model's
/// whole traceback, whose last line says what went wrong.
fn error_message(v: &serde_json::Value) -> String {
    let text = crate::openai::error_text(v);
    if text.starts_with("Traceback") {
        if let Some(last) = text.lines().rev().find(|l| !l.trim().is_empty()) {
            return last.trim().to_string();
        }
    }
    text
}

/// Reads one event (or a whole answer: the same object). Triton's
/// responses carry no id of their own.
pub fn read_event(
    data: &[u8],
    reply: Option<&mut crate::structured::Reply>,
) -> Result<EventInfo, Unreadable> {
    let r: Response = serde_json::from_slice(data).map_err(|e| unreadable(e, data))?;
    let mut info = EventInfo::default();
    if let Some(e) = &r.error {
        info.error = Some(error_message(e));
        return Ok(info);
    }
    let Some(out) = &r.text_output else {
        return Err(Unreadable(format!(
            "a response without `text_output` (expected Triton's generate responses): {}",
            crate::openai::shown(data)
        )));
    };
    let mut reply = reply;
    let mut add = |s: &str| {
        info.text_bytes = info.text_bytes.saturating_add(s.len() as u32);
        if let Some(r) = reply.as_deref_mut() {
            r.push_str(s);
        }
    };
    match out {
        TextOutput::One(s) => add(s),
        TextOutput::Many(v) => v.iter().for_each(|s| add(s)),
    }
    info.output = info.text_bytes > 0;
    Ok(info)
}

impl Protocol for Generate {
    fn name(&self) -> &'static str {
        "generate"
    }

    fn path(&self) -> &str {
        &self.path
    }

    fn body(&self, prompt: &Prompt) -> Vec<u8> {
        self.body.write(prompt)
    }

    fn streams(&self) -> bool {
        self.stream
    }

    fn stream_ends_at_close(&self) -> bool {
        true
    }

    fn read_event(
        &self,
        data: &[u8],
        reply: Option<&mut crate::structured::Reply>,
        _id: Option<&mut Option<String>>,
    ) -> Result<EventInfo, Unreadable> {
        read_event(data, reply)
    }

    fn read_body(
        &self,
        body: &[u8],
        reply: Option<&mut crate::structured::Reply>,
        _id: Option<&mut Option<String>>,
    ) -> Result<EventInfo, Unreadable> {
        let mut info = read_event(body, reply)?;
        // The whole answer: its one response is the end.
        info.finished = info.error.is_none();
        Ok(info)
    }

    fn warm_path(&self) -> &str {
        "v2/health/ready"
    }

    fn failure_classes(&self) -> &'static [ErrorClass] {
        ErrorClass::ALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(extra: &str) -> infer_bench_spec::Workload {
        let text = format!(
            "name = \"t\"\n[targets.t]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1\"\n[models.m]\nserved_name = \"m\"\n[workloads.w]\napi = \"generate\"\ninput_tokens = 4\noutput_tokens = 8\n{extra}\n[load]\nconcurrency = 1\nrequests = 1\n"
        );
        let spec = infer_bench_spec::compile("t.toml", &text, std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e:?}"));
        spec.workloads["w"].clone()
    }

    fn prompt(text: &str) -> Prompt {
        Prompt {
            history: Vec::new(),
            text: text.into(),
            input_tokens: 4,
            output_tokens: 8,
            part: 0,
            media: None,
            items: Vec::new(),
            item_tokens: 0,
        }
    }

    #[test]
    fn paths_and_bodies() {
        let g = Generate::new(&workload(""), "llama 3/8b");
        assert_eq!(g.path(), "v2/models/llama%203%2F8b/generate_stream");
        assert!(g.streams());
        assert_eq!(
            String::from_utf8(g.body(&prompt("Hi \"there\""))).unwrap(),
            r#"{"max_tokens":8,"stream":true,"text_input":"Hi \"there\""}"#
        );
        // Every field under its own name, whatever the dialect; no `model`.
        let w = workload(
            "ignore_eos = true\nstream = false\nmax_tokens_field = \"max_new_tokens\"\nsampling = { temperature = 0.5, top_k = 3 }\nextra_body = { bad_words = \"\", stop_words = \"\" }",
        );
        let g = Generate::new(&w, "ensemble");
        assert_eq!(g.path(), "v2/models/ensemble/generate");
        assert!(!g.streams());
        assert_eq!(
            String::from_utf8(g.body(&prompt("x"))).unwrap(),
            r#"{"bad_words":"","ignore_eos":true,"max_new_tokens":8,"stop_words":"","stream":false,"temperature":0.5,"text_input":"x","top_k":3}"#
        );
        assert_eq!(g.warm_path(), "v2/health/ready");
    }

    /// The events Triton 2.51 sends on `generate_stream` (captured from
    /// tests/triton/serve.py's `generate` model; tests/triton/README.md).
    #[test]
    fn reads_a_stream_as_triton_sends_it() {
        let mut reply = crate::structured::Reply::default();
        let info = read_event(
            br#"{"model_name":"generate","model_version":"1","text_output":"tok "}"#,
            Some(&mut reply),
        )
        .unwrap();
        assert!(info.output && !info.finished && !info.done && info.error.is_none());
        assert_eq!(info.text_bytes, 4);
        assert_eq!(reply.text, "tok ");
        // An empty delta (a token that detokenizes to nothing yet) is not output.
        let empty = read_event(
            br#"{"model_name":"m","model_version":"1","text_output":""}"#,
            None,
        )
        .unwrap();
        assert!(!empty.output);
        // More than one element: an array.
        let many = read_event(br#"{"text_output":["ab","c"]}"#, None).unwrap();
        assert_eq!(many.text_bytes, 3);
        // A TensorRT-LLM ensemble adds its other outputs beside the text.
        let trt = read_event(
            br#"{"context_logits":0.0,"cum_log_probs":0.0,"model_name":"ensemble","model_version":"1","output_log_probs":[0.0],"sequence_end":false,"sequence_id":0,"sequence_start":false,"text_output":" Machine"}"#,
            None)
        .unwrap();
        assert!(trt.output);
        assert_eq!(trt.text_bytes, 8);
    }

    #[test]
    fn errors_and_junk() {
        // A python model that raised after its first response: the
        // traceback's last line.
        let e = read_event(
            br#"{"error":"Traceback (most recent call last):\n  File \"/x/serve.py\", line 140, in generate\n    raise RuntimeError(\"generate: fails after one token on purpose\")\nRuntimeError: generate: fails after one token on purpose\n"}"#,
            None)
        .unwrap();
        assert_eq!(
            e.error.as_deref(),
            Some("RuntimeError: generate: fails after one token on purpose")
        );
        let e = read_event(
            br#"{"error":"generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses"}"#,
            None)
        .unwrap();
        assert!(e.error.unwrap().starts_with("generate expects model"));
        assert!(read_event(b"[DONE]", None).is_err());
        let no_text = read_event(br#"{"model_name":"m","model_version":"1"}"#, None);
        assert!(no_text.unwrap_err().0.contains("text_output"));
    }

    #[test]
    fn a_whole_answer_is_finished() {
        let g = Generate::new(&workload("stream = false"), "m");
        let mut reply = crate::structured::Reply::default();
        let info = g
            .read_body(
                br#"{"model_name":"m","model_version":"1","text_output":"tok tok tok "}"#,
                Some(&mut reply),
                None,
            )
            .unwrap();
        assert!(info.output && info.finished);
        assert_eq!(reply.text, "tok tok tok ");
        let err = g.read_body(br#"{"error":"bad"}"#, None, None).unwrap();
        assert_eq!(err.error.as_deref(), Some("bad"));
        assert!(!err.finished);
    }
}
