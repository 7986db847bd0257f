//! `init --url` against a KServe v2 server (Triton, KServe, TorchServe,
//! Seldon), asked when the URL answers no OpenAI `/models`. This module
//! owns what init asks it and how the answers become a workload:
//!
//! 1. `GET {url}/v2`: the server's metadata; a JSON object with a `name`
//!    says the URL is a KServe v2 server's root (anything else: not one);
//! 2. the models: `--model`, else Triton's repository index (`POST
//!    {url}/v2/repository/index` with `{"ready": true}`) in its order, or
//!    where that lists none (models loaded through Triton's API, as
//!    PyTriton loads them) the models its statistics name (`GET
//!    /v2/models/stats`); a server with neither needs `--model`;
//! 3. each model in turn (at most [`MAX_TRIED`]): its metadata (`GET
//!    /v2/models/{m}`) and, where the server has it, Triton's config
//!    (`/config`: `max_batch_size`, whether it is decoupled). The first
//!    one a workload can send becomes the spec's model: a `text_input`
//!    of BYTES is Triton's generate extension (streamed when decoupled);
//!    inputs of BOOL, integers and floats whose shapes per item are fixed
//!    are a tensor workload, its inputs as declared. A BYTES tensor or a
//!    dimension of any length (-1) is one init cannot choose a value for.
//!
//! Every answer is read up to [`META_CAP`] within the init timeout, and
//! what a server names (models, tensors) reaches the spec only as TOML
//! strings (`toml_str`), after the checks model ids get.

use std::time::Instant;

use super::{
    DataType, InitError, MODELS_TIMEOUT, Served, ServedApi, Tensor, check_model_id, listed, shown,
};
use crate::protocol::kserve::{META_CAP, Metadata, model_path};

/// The most models init reads the metadata of before it gives up.
pub const MAX_TRIED: usize = 16;
/// The most inputs of a model init writes into a workload.
pub const MAX_INPUTS: usize = 32;
/// The longest tensor name init writes into a workload.
pub const MAX_TENSOR_NAME_BYTES: usize = 256;

/// Why a server's answer or a model is not one init can use: a clause,
/// shown in the error init gives (never decided on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Why(pub String);

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A GET or POST that answered 200 with JSON, or why not.
async fn json(
    request: reqwest::RequestBuilder,
    deadline: Instant,
) -> Result<serde_json::Value, Why> {
    let response = request
        .send()
        .await
        .map_err(|e| Why(crate::protocol::client::error_chain(&e)))?;
    let status = response.status();
    let body = crate::protocol::client::read_capped(response, META_CAP, deadline).await;
    if !status.is_success() {
        return Err(Why(format!("it answered HTTP {}", status.as_u16())));
    }
    serde_json::from_slice(&body)
        .map_err(|_| Why("its answer is not JSON (or is longer than init reads)".into()))
}

/// `None`: `base` is no KServe v2 server's root. Otherwise the model the
/// spec is written for, or why there is none.
pub(super) async fn ask(
    client: &reqwest::Client,
    base: &str,
    want: Option<&str>,
) -> Option<Result<Served, InitError>> {
    let deadline = Instant::now() + MODELS_TIMEOUT;
    let server = json(client.get(format!("{base}/v2")), deadline)
        .await
        .ok()?;
    server.get("name")?.as_str()?;
    Some(models(client, base, want).await)
}

async fn models(
    client: &reqwest::Client,
    base: &str,
    want: Option<&str>,
) -> Result<Served, InitError> {
    let names = match want {
        Some(m) => vec![m.to_string()],
        None => served_models(client, base).await?,
    };
    let mut refused = Vec::new();
    for name in names.iter().take(MAX_TRIED) {
        let why = match check_model_id(name) {
            Err(e) if want.is_some() => return Err(e),
            Err(_) => Why("its name cannot be written into a spec".into()),
            Ok(()) => match model_api(client, base, name).await {
                Ok(api) => {
                    return Ok(Served {
                        base_url: base.to_string(),
                        model: name.clone(),
                        api,
                    });
                }
                Err(why) => why,
            },
        };
        if want.is_some() {
            return Err(InitError::Unsendable {
                url: base.to_string(),
                shown: shown(name),
                why: why.0,
            });
        }
        refused.push(format!("{}: {why}", shown(name)));
    }
    Err(InitError::NoModel {
        url: base.to_string(),
        why: format!(
            "none of its ready models {} is one init can write a workload for ({}); name one with --model to see why, or write the spec by hand",
            listed(names.iter().map(String::as_str)),
            refused.join("; ")
        ),
    })
}

/// The models a server lists: the ready ones of Triton's repository
/// index, else (a Triton whose models were loaded through its API, as
/// PyTriton loads them, has an empty index) those its statistics name.
async fn served_models(client: &reqwest::Client, base: &str) -> Result<Vec<String>, InitError> {
    let index_url = format!("{base}/v2/repository/index");
    let deadline = Instant::now() + MODELS_TIMEOUT;
    let index = json(
        client
            .post(&index_url)
            .header("content-type", "application/json")
            .body(r#"{"ready":true}"#),
        deadline,
    )
    .await;
    let from_index = match &index {
        Ok(v) => ready_models(v),
        Err(why) => Err(why.clone()),
    };
    if let Ok(names) = from_index {
        return Ok(names);
    }
    let stats = json(client.get(format!("{base}/v2/models/stats")), deadline).await;
    match stats.map(|v| v.get("model_stats").map(ready_models)) {
        Ok(Some(Ok(names))) => Ok(names),
        _ => Err(InitError::NoModel {
            url: index_url,
            why: format!(
                "it is a KServe v2 server that lists no ready model in Triton's repository index ({}) nor in its statistics (GET /v2/models/stats): name its model with --model",
                from_index.err().map(|w| w.0).unwrap_or_default()
            ),
        }),
    }
}

/// The names of the ready models of a list (Triton's repository index, or
/// its statistics' `model_stats`), in its order, each once (a model is
/// listed once per version).
fn ready_models(index: &serde_json::Value) -> Result<Vec<String>, Why> {
    let list = index
        .as_array()
        .ok_or_else(|| Why("its repository index is not a list".into()))?;
    let mut names: Vec<String> = Vec::new();
    for m in list {
        let ready = m
            .get("state")
            .and_then(|s| s.as_str())
            .is_none_or(|s| s == "READY");
        if let Some(name) = m.get("name").and_then(|n| n.as_str())
            && ready
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_string());
        }
    }
    if names.is_empty() {
        return Err(Why("its repository index lists no ready model".into()));
    }
    Ok(names)
}

/// What `model` takes, from its metadata and (Triton) its config.
async fn model_api(client: &reqwest::Client, base: &str, model: &str) -> Result<ServedApi, Why> {
    let path = model_path(model, None);
    let deadline = Instant::now() + MODELS_TIMEOUT;
    let meta = json(client.get(format!("{base}/{path}")), deadline)
        .await
        .map_err(|why| Why(format!("GET /{path}: {why}")))?;
    let meta: Metadata = serde_json::from_value(meta).map_err(|_| {
        Why(format!(
            "GET /{path}: its answer is no KServe v2 model metadata"
        ))
    })?;
    let config = json(client.get(format!("{base}/{path}/config")), deadline)
        .await
        .ok();
    classify(&meta, config.as_ref())
}

/// The workload a model's metadata (and Triton's config) asks for; Err:
/// why init cannot write one, in a clause.
pub fn classify(meta: &Metadata, config: Option<&serde_json::Value>) -> Result<ServedApi, Why> {
    let max_batch = config
        .and_then(|c| c.get("max_batch_size"))
        .and_then(serde_json::Value::as_u64);
    let decoupled = config
        .and_then(|c| c.pointer("/model_transaction_policy/decoupled"))
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    if meta
        .inputs
        .iter()
        .any(|t| t.name == "text_input" && t.datatype == "BYTES")
    {
        return Ok(ServedApi::Generate { stream: decoupled });
    }
    if meta.inputs.is_empty() {
        return Err(Why("its metadata lists no input".into()));
    }
    if meta.inputs.len() > MAX_INPUTS {
        return Err(Why(format!(
            "it has {} inputs, more than the {MAX_INPUTS} init writes",
            meta.inputs.len()
        )));
    }
    // As the run reads it: Triton's config, else the metadata's shapes.
    let batching = crate::protocol::kserve::batches(meta, max_batch);
    let mut inputs = Vec::new();
    for t in &meta.inputs {
        let name = &t.name;
        if name.is_empty()
            || name.len() > MAX_TENSOR_NAME_BYTES
            || name.chars().any(char::is_control)
        {
            return Err(Why(format!(
                "its input {} has a name that cannot be written into a spec",
                shown(name)
            )));
        }
        let datatype = match DataType::parse(&t.datatype) {
            Some(DataType::Bytes) => {
                return Err(Why(format!(
                    "its input {} is BYTES (strings), whose elements init cannot make up: write the workload by hand with a `file` of them (docs/spec.md, tensor workloads)",
                    shown(name)
                )));
            }
            Some(d) => d,
            None => {
                return Err(Why(format!(
                    "its input {} has the datatype {}, which is not a KServe v2 datatype",
                    shown(name),
                    shown(&t.datatype)
                )));
            }
        };
        let per_item = match (batching, t.shape.split_first()) {
            (true, Some((_, rest))) => rest,
            (true, None) => {
                return Err(Why(format!(
                    "its input {} has no dimension, and the model batches",
                    shown(name)
                )));
            }
            (false, _) => &t.shape[..],
        };
        let Some(shape) = per_item
            .iter()
            .map(|d| u64::try_from(*d).ok().filter(|d| *d > 0))
            .collect::<Option<Vec<u64>>>()
        else {
            return Err(Why(format!(
                "its input {} has the shape [{}] per item, and a length of -1 (any) is one init cannot choose",
                shown(name),
                per_item
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        inputs.push(Tensor {
            name: name.clone(),
            datatype,
            shape,
        });
    }
    Ok(ServedApi::Tensors {
        inputs,
        max_batch: batching.then_some(max_batch.filter(|m| *m > 0)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::kserve::TensorMeta;
    use serde_json::json;

    fn meta(inputs: &[(&str, &str, &[i64])]) -> Metadata {
        Metadata {
            name: "m".into(),
            platform: None,
            versions: vec!["1".into()],
            inputs: inputs
                .iter()
                .map(|(n, d, s)| TensorMeta {
                    name: (*n).into(),
                    datatype: (*d).into(),
                    shape: s.to_vec(),
                })
                .collect(),
            outputs: vec![],
        }
    }

    #[test]
    fn a_models_metadata_becomes_its_workload() {
        // A batching model (Triton's config says): the batch is dropped.
        let m = meta(&[
            ("images", "FP32", &[-1, 3, 224, 224]),
            ("k", "INT64", &[-1, 1]),
        ]);
        let cfg = json!({"max_batch_size": 32});
        assert_eq!(
            classify(&m, Some(&cfg)),
            Ok(ServedApi::Tensors {
                inputs: vec![
                    Tensor {
                        name: "images".into(),
                        datatype: DataType::Fp32,
                        shape: vec![3, 224, 224]
                    },
                    Tensor {
                        name: "k".into(),
                        datatype: DataType::Int64,
                        shape: vec![1]
                    },
                ],
                max_batch: Some(Some(32)),
            })
        );
        // Without a config, leading -1s say it batches, by how much unsaid.
        let ServedApi::Tensors { inputs, max_batch } = classify(&m, None).unwrap() else {
            panic!()
        };
        assert_eq!((inputs[0].shape.len(), max_batch), (3, Some(None)));
        // max_batch_size 0: the shapes are as declared, one item a request.
        let m = meta(&[("x", "UINT8", &[4, 4])]);
        let ServedApi::Tensors { inputs, max_batch } =
            classify(&m, Some(&json!({"max_batch_size": 0}))).unwrap()
        else {
            panic!()
        };
        assert_eq!((inputs[0].shape.clone(), max_batch), (vec![4, 4], None));
        // A text_input: the generate extension, streamed when decoupled.
        let m = meta(&[("text_input", "BYTES", &[1]), ("max_tokens", "INT32", &[1])]);
        let decoupled =
            json!({"max_batch_size": 1, "model_transaction_policy": {"decoupled": true}});
        assert_eq!(
            classify(&m, Some(&decoupled)),
            Ok(ServedApi::Generate { stream: true })
        );
        assert_eq!(
            classify(&m, None),
            Ok(ServedApi::Generate { stream: false })
        );
    }

    #[test]
    fn what_init_cannot_choose_is_refused_saying_which_input() {
        let cfg = json!({"max_batch_size": 8});
        for (inputs, says) in [
            (
                &[("ids", "INT64", &[-1, -1][..])][..],
                "\"ids\" has the shape [-1] per item",
            ),
            (&[("s", "BYTES", &[-1, 1][..])][..], "\"s\" is BYTES"),
            (&[("x", "FP8", &[-1, 1][..])][..], "\"FP8\", which is not"),
            (
                &[("a\u{1b}[2J", "FP32", &[-1, 1][..])][..],
                "cannot be written",
            ),
            (&[("x", "FP32", &[][..])][..], "no dimension"),
            (&[][..], "no input"),
        ] {
            let why = classify(&meta(inputs), Some(&cfg)).unwrap_err().0;
            assert!(why.contains(says), "{why}");
            assert!(!why.contains('\u{1b}'), "{why}");
        }
    }

    #[test]
    fn the_index_gives_ready_models_once_each_in_order() {
        let index = json!([
            {"name": "b", "version": "1", "state": "READY"},
            {"name": "a", "version": "1", "state": "UNAVAILABLE"},
            {"name": "b", "version": "2", "state": "READY"},
            {"name": "c"},
        ]);
        assert_eq!(ready_models(&index).unwrap(), ["b", "c"]);
        assert!(ready_models(&json!([])).is_err());
        assert!(ready_models(&json!({"models": []})).is_err());
        // Triton's statistics list a model per version too.
        let stats =
            json!({"model_stats": [{"name": "x", "version": "1"}, {"name": "x", "version": "2"}]});
        assert_eq!(ready_models(&stats["model_stats"]).unwrap(), ["x"]);
    }
}
