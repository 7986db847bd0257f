//! The keys of `api = "kserve"`: `inputs` (name, datatype, per-item shape,
//! fill), `batch`, `binary` and `model_version`, each checked where it is
//! written; the keys of text workloads that a tensor request cannot take.
//! What the model's metadata says is checked before the run, by the
//! protocol crate.

use sha2::{Digest, Sha256};

use super::{Cx, hex, shown};
use crate::raw::RawWorkload;
use crate::tensor::{DataType, Fill, TensorFile, TensorInput, Tensors};

/// What a kserve workload takes, for hints.
pub(super) const TAKES: &str = "a kserve workload takes inputs, batch, binary and model_version";

/// Most bytes one request's tensors may hold together.
pub const MAX_REQUEST_BYTES: u64 = 256 << 20;
/// Most dimensions of one input.
pub const MAX_RANK: usize = 8;

impl Cx<'_> {
    /// A file of tensor items: read (a regular file in the repository,
    /// bounded), hashed, and checked to hold items of the input's datatype
    /// and shape.
    fn tensor_file(
        &mut self,
        key: &str,
        path: &str,
        d: DataType,
        shape: &[u64],
    ) -> Option<TensorFile> {
        let full = self.base_dir.join(path);
        let bytes = match crate::files::read_regular_in(
            &full,
            crate::files::MAX_TENSOR_FILE_BYTES,
            self.repo,
        ) {
            Ok(b) => b,
            Err(e) => {
                self.err(
                    key,
                    format!("cannot read tensor file {}: {e}", full.display()),
                    Some("paths are relative to the spec file".into()),
                );
                return None;
            }
        };
        match crate::tensor::file_items(&bytes, d, shape) {
            Ok((_, items)) => Some(TensorFile {
                path: path.to_string(),
                sha256: hex(&Sha256::digest(&bytes)),
                items,
            }),
            Err(e) => {
                self.err(key, format!("{}: {e}", full.display()), None);
                None
            }
        }
    }

    /// The tensors of `[workloads.NAME]`, whose api is kserve.
    pub(super) fn tensors(&mut self, name: &str, w: &RawWorkload) -> Option<Tensors> {
        let k = |f: &str| format!("workloads.{name}.{f}");
        for (key, set) in [
            ("input_tokens", w.input_tokens.is_some()),
            ("dataset", w.dataset.is_some()),
            ("shared_prefix", w.shared_prefix.is_some()),
            ("conversation", w.conversation.is_some()),
            ("images", w.images.is_some()),
            ("audio", w.audio.is_some()),
        ] {
            if set {
                self.key_err(
                    &k(key),
                    format!("a kserve request sends tensors, not text, so the workload cannot set `{key}`"),
                    Some(TAKES.into()),
                );
            }
        }
        self.count_in(
            &k("batch"),
            w.batch.map(u64::from),
            1,
            super::retrieval::MAX_BATCH.into(),
            "a number of items per request",
        );
        let batch = w.batch.unwrap_or(1).max(1);
        let mut inputs: Vec<TensorInput> = Vec::new();
        for (i, raw) in w.inputs.iter().flatten().enumerate() {
            let at = |f: &str| format!("workloads.{name}.inputs[{i}].{f}");
            if raw.name.is_empty() || raw.name.len() > 256 || raw.name.chars().any(char::is_control)
            {
                self.err(
                    &at("name"),
                    format!(
                        "expected an input name of 1 to 256 printable characters, found \"{}\"",
                        shown(&raw.name)
                    ),
                    None,
                );
            } else if inputs.iter().any(|t| t.name == raw.name) {
                self.err(
                    &at("name"),
                    format!("input \"{}\" is declared twice", shown(&raw.name)),
                    None,
                );
            }
            let datatype = match DataType::parse(&raw.datatype) {
                Some(DataType::Bytes) => {
                    self.err(
                        &at("datatype"),
                        "BYTES inputs (strings) are not sent by a workload yet: their length has no shape to declare",
                        Some("declare a numeric input; a model with string inputs needs its own client for now".into()),
                    );
                    None
                }
                Some(d) => Some(d),
                None => {
                    let names: Vec<&str> = DataType::ALL
                        .iter()
                        .filter(|d| **d != DataType::Bytes)
                        .map(|d| d.name())
                        .collect();
                    self.err(
                        &at("datatype"),
                        format!(
                            "expected a datatype ({}), found \"{}\"",
                            names.join(", "),
                            shown(&raw.datatype)
                        ),
                        None,
                    );
                    None
                }
            };
            let mut shape = Vec::with_capacity(raw.shape.len());
            if raw.shape.is_empty() || raw.shape.len() > MAX_RANK {
                self.err(
                    &at("shape"),
                    format!(
                        "expected 1 to {MAX_RANK} dimensions per item (the batch dimension is `batch`, not part of the shape), found {}",
                        raw.shape.len()
                    ),
                    Some("e.g. shape = [3, 224, 224] for one RGB image".into()),
                );
            }
            for (j, d) in raw.shape.iter().enumerate() {
                if *d < 1 {
                    self.err(
                        &format!("workloads.{name}.inputs[{i}].shape[{j}]"),
                        format!("expected a dimension of at least 1, found {d}"),
                        (*d == -1).then(|| {
                            "a variable dimension (-1 in the model's metadata) needs the length to send: write it here".to_string()
                        }),
                    );
                } else {
                    shape.push(*d as u64);
                }
            }
            let fill = match raw.fill.as_deref().map(Fill::parse) {
                None => Fill::default(),
                Some(Ok(f)) => f,
                Some(Err(e)) => {
                    self.err(&at("fill"), e.to_string(), None);
                    Fill::default()
                }
            };
            if let Some(d) = datatype {
                let (lo, hi) = fill.bounds();
                let (min, max) = d.range();
                if lo < min || hi > max {
                    self.err(
                        &at("fill"),
                        format!(
                            "{d} holds values in [{min}, {max}]; this fill reaches [{lo}, {hi}]"
                        ),
                        None,
                    );
                }
                if raw.file.is_some() && raw.fill.is_some() {
                    self.err(
                        &at("fill"),
                        "an input's elements come from `fill` or from `file`, not both",
                        None,
                    );
                }
                let file = match &raw.file {
                    Some(f) if shape.len() == raw.shape.len() => {
                        self.tensor_file(&at("file"), f, d, &shape)
                    }
                    _ => None,
                };
                if shape.len() == raw.shape.len() && (raw.file.is_none() || file.is_some()) {
                    inputs.push(TensorInput {
                        name: raw.name.clone(),
                        datatype: d,
                        shape,
                        fill,
                        file,
                    });
                }
            }
        }
        if w.inputs.as_ref().is_some_and(Vec::is_empty) {
            self.err(
                &k("inputs"),
                "expected at least one input",
                Some("leave `inputs` out to send every input the model's metadata names".into()),
            );
        }
        let bytes: u64 = inputs
            .iter()
            .map(|t| {
                t.shape
                    .iter()
                    .try_fold(t.datatype.size().unwrap_or(1) as u64, |a, d| {
                        a.checked_mul(*d)
                    })
                    .unwrap_or(u64::MAX)
            })
            .fold(0u64, u64::saturating_add)
            .saturating_mul(batch.into());
        if bytes > MAX_REQUEST_BYTES {
            self.err(
                &k("inputs"),
                format!(
                    "a request would carry {bytes} bytes of tensors (batch {batch}); expected at most {MAX_REQUEST_BYTES}"
                ),
                Some("use a smaller batch or smaller shapes".into()),
            );
        }
        if let Some(v) = &w.model_version {
            if v.is_empty()
                || !v
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                self.err(
                    &k("model_version"),
                    format!(
                        "expected a version of letters, digits, `-`, `_` or `.`, found \"{}\"",
                        shown(v)
                    ),
                    None,
                );
            }
        }
        if inputs.iter().any(|t| t.file.is_some()) && !w.binary.unwrap_or(true) {
            self.err(
                &k("binary"),
                "inputs read from a file are sent with the binary tensor extension",
                Some("leave `binary` out, or use `fill`".into()),
            );
        }
        Some(Tensors {
            batch,
            inputs,
            binary: w.binary.unwrap_or(true),
            version: w.model_version.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    fn errors(workload: &str) -> Vec<crate::diag::SpecError> {
        let text = format!(
            "name = \"t\"\n[targets.t]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1\"\n[models.m]\nserved_name = \"m\"\n[workloads.w]\napi = \"kserve\"\n{workload}\n[load]\nconcurrency = 1\nrequests = 1\n"
        );
        match crate::compile("t.toml", &text, std::path::Path::new(".")) {
            Ok(_) => Vec::new(),
            Err(e) => e.0,
        }
    }

    #[test]
    fn a_good_tensor_workload_compiles() {
        let text = "name = \"t\"\n[targets.t]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1\"\n[models.m]\nserved_name = \"m\"\n[workloads.w]\napi = \"kserve\"\nbatch = 8\ninputs = [{ name = \"images\", datatype = \"FP16\", shape = [3, 224, 224], fill = \"normal(0, 1)\" }]\n[load]\nconcurrency = 1\nrequests = 1\n";
        let spec = crate::compile("t.toml", text, std::path::Path::new(".")).unwrap();
        let Some(crate::retrieval::Retrieval::Tensors(t)) = &spec.workloads["w"].retrieval else {
            panic!("no tensors");
        };
        assert_eq!(
            (t.batch, t.binary, t.inputs[0].shape.clone()),
            (8, true, vec![3, 224, 224])
        );
        assert!(!spec.workloads["w"].stream);
    }

    #[test]
    fn bad_tensors_are_named_where_they_are_written() {
        let e =
            errors("inputs = [{ name = \"images\", datatype = \"FP32\", shape = [3, 0, 224] }]");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].key, "workloads.w.inputs[0].shape[1]");
        assert_eq!(e[0].line, 9);
        assert!(
            e[0].message.contains("at least 1, found 0"),
            "{}",
            e[0].message
        );
        let e = errors("inputs = [{ name = \"x\", datatype = \"FLOAT\", shape = [4] }]");
        assert_eq!(e[0].key, "workloads.w.inputs[0].datatype");
        assert!(e[0].message.contains("found \"FLOAT\""));
        let e = errors(
            "inputs = [{ name = \"x\", datatype = \"UINT8\", shape = [4], fill = \"uniform(0, 300)\" }]",
        );
        assert!(
            e[0].message.contains("UINT8 holds values in [0, 255]"),
            "{}",
            e[0].message
        );
        let e = errors("input_tokens = 5");
        assert_eq!(e[0].key, "workloads.w.input_tokens");
        assert!(e[0].message.contains("sends tensors, not text"));
        let e = errors(
            "inputs = [{ name = \"x\", datatype = \"FP32\", shape = [8192, 8192] }]\nbatch = 2",
        );
        assert!(
            e[0].message.contains("bytes of tensors (batch 2)"),
            "{}",
            e[0].message
        );
        let e = errors("documents = 3");
        assert!(e[0].message.contains("belongs to api = \"rerank\""));
    }
}
