//! The keys of `api = "kserve"`: `inputs` (name, datatype, per-item shape,
//! fill), `batch`, `binary` and `model_version`, each checked where it is
//! written; the keys of text workloads that a tensor request cannot take.
//! What the model's metadata says is checked before the run, by the
//! protocol crate.

use sha2::{Digest, Sha256};

use super::{Cx, hex, shown};
use crate::raw::RawWorkload;
use crate::tensor::{
    DataType, Expect, FileSet, Fill, Pictures, Pixels, Strings, TensorFile, TensorInput, Tensors,
};

/// What a kserve workload takes, for hints.
pub(super) const TAKES: &str = "a kserve workload takes inputs, batch, binary and model_version";

/// Most bytes one request's tensors may hold together.
pub const MAX_REQUEST_BYTES: u64 = 256 << 20;
/// Most dimensions of one input.
pub const MAX_RANK: usize = 8;

impl Cx<'_> {
    /// A file of tensor items: read (a regular file in the repository,
    /// bounded), hashed, and checked to hold items of the input's datatype
    /// and shape; or pictures (a PNG or JPEG, or a folder of them), each an
    /// item, for an input whose shape is a picture's, with `pixels` saying
    /// how their values become elements.
    fn tensor_file(
        &mut self,
        at: &dyn Fn(&str) -> String,
        path: &str,
        d: DataType,
        shape: &[u64],
        pixels: Option<&str>,
        batch: u32,
    ) -> Option<TensorFile> {
        let full = self.base_dir.join(path);
        let folder = std::fs::metadata(&full).is_ok_and(|m| m.is_dir());
        let bytes = if folder {
            None
        } else {
            match crate::files::read_regular_in(
                &full,
                crate::files::MAX_TENSOR_FILE_BYTES,
                self.repo,
            ) {
                Ok(b) => Some(b),
                Err(e) => {
                    self.err(
                        &at("file"),
                        format!("cannot read tensor file {}: {e}", full.display()),
                        Some("paths are relative to the spec file".into()),
                    );
                    return None;
                }
            }
        };
        if d == DataType::Bytes {
            return self.strings_file(at, path, bytes, shape, pixels, batch);
        }
        let picture = bytes
            .as_deref()
            .is_none_or(|b| crate::image::header(b).is_ok());
        if !picture {
            let bytes = bytes.unwrap_or_default();
            if pixels.is_some() {
                self.err(
                    &at("pixels"),
                    format!(
                        "`pixels` says how pictures become elements, and {} is a tensor file (.npy or raw), not a PNG or JPEG",
                        full.display()
                    ),
                    None,
                );
            }
            return match crate::tensor::file_items(&bytes, d, shape) {
                Ok((_, items)) => Some(TensorFile {
                    path: path.to_string(),
                    sha256: hex(&Sha256::digest(&bytes)),
                    items,
                    pictures: None,
                    strings: None,
                }),
                Err(e) => {
                    self.err(&at("file"), format!("{}: {e}", full.display()), None);
                    None
                }
            };
        }
        let Some((layout, channels, ..)) = crate::tensor::picture_shape(shape) else {
            self.err(
                &at("shape"),
                format!(
                    "pictures fill an input of shape [C, H, W] or [H, W, C] with C 1 (grey) or 3 (RGB); found {shape:?}"
                ),
                Some("e.g. shape = [3, 224, 224]".into()),
            );
            return None;
        };
        if !(d == DataType::Uint8 || d.is_float()) {
            self.err(
                &at("datatype"),
                format!("pictures fill UINT8 or floating-point inputs; this one is {d}"),
                None,
            );
            return None;
        }
        let pixels = match pixels {
            None if d == DataType::Uint8 => Pixels::Raw,
            None => Pixels::Unit,
            Some(p) => match Pixels::parse(p) {
                None => {
                    self.err(
                        &at("pixels"),
                        format!("expected {}, found \"{}\"", Pixels::NAMES, shown(p)),
                        None,
                    );
                    return None;
                }
                Some(px) if d == DataType::Uint8 && px != Pixels::Raw => {
                    self.err(
                        &at("pixels"),
                        format!("a UINT8 input takes pixel values as they are: expected \"raw\", found \"{p}\""),
                        Some("declare a floating-point datatype to scale them".into()),
                    );
                    return None;
                }
                Some(Pixels::Imagenet) if channels == 1 => {
                    self.err(
                        &at("pixels"),
                        "\"imagenet\" normalizes red, green and blue; this input has one channel",
                        Some("use \"unit\" or \"raw\", or shape the input with 3 channels".into()),
                    );
                    return None;
                }
                Some(px) => px,
            },
        };
        let read = match bytes {
            Some(b) => FileSet::one(&full, b, Expect::Pictures),
            None => FileSet::read(&full, Some(self.repo), Expect::Pictures),
        };
        let files = match read {
            Ok(f) => f,
            Err(e) => {
                self.err(&at("file"), e.to_string(), None);
                return None;
            }
        };
        let item = shape.iter().product::<u64>() * d.size().unwrap_or(1) as u64;
        let decoded = item.saturating_mul(files.files.len() as u64);
        if decoded > crate::files::MAX_TENSOR_FILE_BYTES {
            self.err(
                &at("file"),
                format!(
                    "{} pictures of {item} bytes each, decoded, would hold {decoded} bytes; expected at most {}",
                    files.files.len(),
                    crate::files::MAX_TENSOR_FILE_BYTES
                ),
                Some("use fewer pictures".into()),
            );
            return None;
        }
        Some(TensorFile {
            path: path.to_string(),
            sha256: files.sha256,
            items: files.files.len() as u64,
            pictures: Some(Pictures { layout, pixels }),
            strings: None,
        })
    }

    /// The file of a BYTES input: the lines of a text file, or the bytes
    /// of each file of a folder (or of one picture), `shape`'s elements
    /// an item; the largest request it makes within the bound.
    fn strings_file(
        &mut self,
        at: &dyn Fn(&str) -> String,
        path: &str,
        bytes: Option<Vec<u8>>,
        shape: &[u64],
        pixels: Option<&str>,
        batch: u32,
    ) -> Option<TensorFile> {
        let full = self.base_dir.join(path);
        if pixels.is_some() {
            self.err(
                &at("pixels"),
                "`pixels` says how pictures are decoded into numbers; a BYTES input sends each file's bytes as they are",
                None,
            );
        }
        let folder = bytes.is_none();
        let set = match bytes {
            Some(b) => FileSet::one(&full, b, Expect::Anything),
            None => FileSet::read(&full, Some(self.repo), Expect::Anything),
        };
        let strings = set.and_then(|set| {
            let (kind, elements) = set.strings(folder)?;
            Ok((
                set.sha256.clone(),
                kind,
                elements.iter().map(|e| e.len() as u64).collect::<Vec<_>>(),
            ))
        });
        let (sha256, kind, lengths) = match strings {
            Ok(x) => x,
            Err(e) => {
                self.err(&at("file"), e.to_string(), None);
                return None;
            }
        };
        let per_item = shape.iter().product::<u64>().max(1);
        let items = lengths.len() as u64 / per_item;
        if items == 0 {
            self.err(
                &at("file"),
                format!(
                    "{} holds {} elements ({}); an item of shape {shape:?} takes {per_item}",
                    full.display(),
                    lengths.len(),
                    match kind {
                        Strings::Lines => "lines",
                        Strings::Files => "files",
                    }
                ),
                None,
            );
            return None;
        }
        // Each element goes out as its 4-byte length and its bytes.
        let largest = lengths
            .chunks(per_item as usize)
            .map(|c| c.iter().map(|l| l + 4).sum::<u64>())
            .max()
            .unwrap_or(0);
        if largest.saturating_mul(batch.into()) > MAX_REQUEST_BYTES {
            self.err(
                &at("file"),
                format!(
                    "its largest item is {largest} bytes: a request of {batch} could carry {} bytes; expected at most {MAX_REQUEST_BYTES}",
                    largest.saturating_mul(batch.into())
                ),
                Some("use a smaller batch or smaller files".into()),
            );
            return None;
        }
        Some(TensorFile {
            path: path.to_string(),
            sha256,
            items,
            pictures: None,
            strings: Some(kind),
        })
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
                Some(DataType::Bytes) if raw.file.is_none() => {
                    self.err(
                        &at("datatype"),
                        "a BYTES input (strings) reads its elements from `file`: a UTF-8 text file (one element a line), or a folder (each file's bytes one element)",
                        Some("e.g. file = \"sentences.txt\"".into()),
                    );
                    None
                }
                Some(DataType::Bytes) if raw.fill.is_some() => {
                    self.err(
                        &at("fill"),
                        "a BYTES input's elements come from its `file`, not from a fill",
                        None,
                    );
                    None
                }
                Some(d) => Some(d),
                None => {
                    let names: Vec<&str> = DataType::ALL.iter().map(|d| d.name()).collect();
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
                if raw.pixels.is_some() && raw.file.is_none() {
                    self.err(
                        &at("pixels"),
                        "`pixels` says how pictures read with `file` become elements; this input has no `file`",
                        None,
                    );
                }
                let file = match &raw.file {
                    Some(f) if shape.len() == raw.shape.len() => {
                        self.tensor_file(&at, f, d, &shape, raw.pixels.as_deref(), batch)
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

    /// A real PNG of `w` x `h` grey pixels.
    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = png::Encoder::new(&mut out, w, h);
        e.set_color(png::ColorType::Grayscale);
        let mut wr = e.write_header().unwrap();
        wr.write_image_data(&vec![128u8; (w * h) as usize]).unwrap();
        drop(wr);
        out
    }

    /// The errors of a kserve workload with one input `input` (its
    /// fields), compiled in `dir`; and the spec when it compiles.
    fn compiled(
        dir: &std::path::Path,
        input: &str,
    ) -> Result<crate::Spec, Vec<crate::diag::SpecError>> {
        let text = format!(
            "name = \"t\"\n[targets.t]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1\"\n[models.m]\nserved_name = \"m\"\n[workloads.w]\napi = \"kserve\"\ninputs = [{{ name = \"images\", {input} }}]\n[load]\nconcurrency = 1\nrequests = 1\n"
        );
        crate::compile("t.toml", &text, dir).map_err(|e| e.0)
    }

    #[test]
    fn pictures_compile_as_items_of_an_image_input() {
        use crate::tensor::{Layout, Pictures, Pixels};
        let dir = tempfile::tempdir().unwrap();
        let pics = dir.path().join("pics");
        std::fs::create_dir(&pics).unwrap();
        std::fs::write(pics.join("b.png"), png(5, 4)).unwrap();
        std::fs::write(pics.join("a.png"), png(3, 7)).unwrap();
        std::fs::write(pics.join(".hidden"), b"not a picture").unwrap();
        std::fs::write(dir.path().join("one.png"), png(2, 2)).unwrap();
        let spec = compiled(
            dir.path(),
            r#"datatype = "FP32", shape = [3, 32, 32], file = "pics", pixels = "imagenet""#,
        )
        .unwrap();
        let Some(crate::retrieval::Retrieval::Tensors(t)) = &spec.workloads["w"].retrieval else {
            panic!("no tensors");
        };
        let f = t.inputs[0].file.as_ref().unwrap();
        assert_eq!(f.items, 2);
        assert_eq!(
            f.pictures,
            Some(Pictures {
                layout: Layout::Chw,
                pixels: Pixels::Imagenet
            })
        );
        let before = f.sha256.clone();
        std::fs::write(pics.join("b.png"), png(6, 4)).unwrap();
        let spec = compiled(
            dir.path(),
            r#"datatype = "FP32", shape = [3, 32, 32], file = "pics", pixels = "imagenet""#,
        )
        .unwrap();
        let Some(crate::retrieval::Retrieval::Tensors(t)) = &spec.workloads["w"].retrieval else {
            panic!("no tensors");
        };
        assert_ne!(t.inputs[0].file.as_ref().unwrap().sha256, before);
        // UINT8, channels last, one file: raw by default.
        let spec = compiled(
            dir.path(),
            r#"datatype = "UINT8", shape = [8, 8, 3], file = "one.png""#,
        )
        .unwrap();
        let Some(crate::retrieval::Retrieval::Tensors(t)) = &spec.workloads["w"].retrieval else {
            panic!("no tensors");
        };
        assert_eq!(
            t.inputs[0].file.as_ref().unwrap().pictures,
            Some(Pictures {
                layout: Layout::Hwc,
                pixels: Pixels::Raw
            })
        );
    }

    #[test]
    fn pictures_that_do_not_fit_are_named_where_they_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let pics = dir.path().join("pics");
        std::fs::create_dir(&pics).unwrap();
        std::fs::write(pics.join("a.png"), png(3, 7)).unwrap();
        std::fs::write(dir.path().join("one.png"), png(2, 2)).unwrap();
        std::fs::write(dir.path().join("x.raw"), [0u8; 16]).unwrap();
        let one = |input: &str| {
            let e = compiled(dir.path(), input).unwrap_err();
            assert_eq!(e.len(), 1, "{e:?}");
            (e[0].key.clone(), e[0].message.clone())
        };
        let (key, msg) = one(r#"datatype = "FP32", shape = [224, 224], file = "one.png""#);
        assert_eq!(key, "workloads.w.inputs[0].shape");
        assert!(msg.contains("[C, H, W] or [H, W, C]"), "{msg}");
        let (key, msg) = one(r#"datatype = "INT32", shape = [3, 8, 8], file = "one.png""#);
        assert_eq!(key, "workloads.w.inputs[0].datatype");
        assert!(msg.contains("UINT8 or floating-point"), "{msg}");
        let (key, msg) =
            one(r#"datatype = "UINT8", shape = [3, 8, 8], file = "one.png", pixels = "unit""#);
        assert_eq!(key, "workloads.w.inputs[0].pixels");
        assert!(msg.contains("expected \"raw\""), "{msg}");
        let (key, msg) =
            one(r#"datatype = "FP32", shape = [1, 8, 8], file = "one.png", pixels = "imagenet""#);
        assert_eq!(key, "workloads.w.inputs[0].pixels");
        assert!(msg.contains("one channel"), "{msg}");
        let (key, msg) =
            one(r#"datatype = "FP32", shape = [3, 8, 8], file = "one.png", pixels = "scaled""#);
        assert!(
            msg.contains("expected \"raw\", \"unit\" or \"imagenet\""),
            "{key}: {msg}"
        );
        let (key, msg) = one(r#"datatype = "FP32", shape = [4], pixels = "unit""#);
        assert_eq!(key, "workloads.w.inputs[0].pixels");
        assert!(msg.contains("has no `file`"), "{msg}");
        let (key, msg) = one(r#"datatype = "FP32", shape = [4], file = "x.raw", pixels = "unit""#);
        assert_eq!(key, "workloads.w.inputs[0].pixels");
        assert!(msg.contains("tensor file"), "{msg}");
        // A folder with something else in it names that file.
        std::fs::write(pics.join("notes.txt"), b"hello").unwrap();
        let (key, msg) = one(r#"datatype = "FP32", shape = [3, 8, 8], file = "pics""#);
        assert_eq!(key, "workloads.w.inputs[0].file");
        assert!(
            msg.contains("notes.txt") && msg.contains("not a PNG or JPEG picture"),
            "{msg}"
        );
        std::fs::remove_file(pics.join("notes.txt")).unwrap();
        std::fs::remove_file(pics.join("a.png")).unwrap();
        let (_, msg) = one(r#"datatype = "FP32", shape = [3, 8, 8], file = "pics""#);
        assert!(msg.contains("holds no picture"), "{msg}");
    }

    #[test]
    fn bytes_inputs_read_lines_or_files() {
        use crate::tensor::Strings;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.txt"), "one\ntwo\r\nthree\nfour\nfive\n").unwrap();
        std::fs::write(dir.path().join("bad.txt"), b"ok\nnot \xff utf-8\n").unwrap();
        let blobs = dir.path().join("blobs");
        std::fs::create_dir(&blobs).unwrap();
        std::fs::write(blobs.join("a.bin"), [0u8, 1, 2]).unwrap();
        std::fs::write(blobs.join("b.bin"), [9u8; 10]).unwrap();
        let file_of = |input: &str| {
            let spec = compiled(dir.path(), input).unwrap();
            let Some(crate::retrieval::Retrieval::Tensors(t)) = &spec.workloads["w"].retrieval
            else {
                panic!("no tensors");
            };
            t.inputs[0].file.clone().unwrap()
        };
        // Five lines, two to an item: two items (the fifth left over).
        let f = file_of(r#"datatype = "BYTES", shape = [2], file = "s.txt""#);
        assert_eq!((f.items, f.strings), (2, Some(Strings::Lines)));
        let f = file_of(r#"datatype = "BYTES", shape = [1], file = "blobs""#);
        assert_eq!((f.items, f.strings), (2, Some(Strings::Files)));
        let one = |input: &str| {
            let e = compiled(dir.path(), input).unwrap_err();
            assert_eq!(e.len(), 1, "{e:?}");
            (e[0].key.clone(), e[0].message.clone())
        };
        let (key, msg) = one(r#"datatype = "BYTES", shape = [1]"#);
        assert_eq!(key, "workloads.w.inputs[0].datatype");
        assert!(msg.contains("reads its elements from `file`"), "{msg}");
        let (key, msg) =
            one(r#"datatype = "BYTES", shape = [1], file = "s.txt", fill = "uniform""#);
        assert_eq!(key, "workloads.w.inputs[0].fill");
        assert!(msg.contains("not from a fill"), "{msg}");
        let (key, msg) = one(r#"datatype = "BYTES", shape = [1], file = "bad.txt""#);
        assert_eq!(key, "workloads.w.inputs[0].file");
        assert!(msg.contains("line 2, column 5"), "{msg}");
        let (_, msg) = one(r#"datatype = "BYTES", shape = [3], file = "blobs""#);
        assert!(
            msg.contains("holds 2 elements (files); an item of shape [3] takes 3"),
            "{msg}"
        );
        let (key, msg) = one(r#"datatype = "BYTES", shape = [1], file = "s.txt", pixels = "unit""#);
        assert_eq!(key, "workloads.w.inputs[0].pixels");
        assert!(msg.contains("as they are"), "{msg}");
    }
}
