//! Tensors, for `api = "kserve"` (the KServe v2 inference protocol that
//! Triton, KServe, TorchServe and Seldon serve): their datatypes, an
//! input's declared name, datatype, per-item shape and fill, and the
//! request shape (`batch`, the binary extension, a model version) that
//! [`crate::retrieval::Retrieval::Tensors`] carries. Compiled in
//! `compile/tensors.rs`; read against the model's metadata by the
//! protocol crate before a point runs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A tensor's datatype, spelled as the KServe v2 protocol spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
pub enum DataType {
    #[serde(rename = "BOOL")]
    Bool,
    #[serde(rename = "UINT8")]
    Uint8,
    #[serde(rename = "UINT16")]
    Uint16,
    #[serde(rename = "UINT32")]
    Uint32,
    #[serde(rename = "UINT64")]
    Uint64,
    #[serde(rename = "INT8")]
    Int8,
    #[serde(rename = "INT16")]
    Int16,
    #[serde(rename = "INT32")]
    Int32,
    #[serde(rename = "INT64")]
    Int64,
    #[serde(rename = "FP16")]
    Fp16,
    #[serde(rename = "BF16")]
    Bf16,
    #[serde(rename = "FP32")]
    Fp32,
    #[serde(rename = "FP64")]
    Fp64,
    /// Strings (byte strings of any length): an input of this type reads
    /// its elements from a file (lines of text, or files' bytes).
    #[serde(rename = "BYTES")]
    Bytes,
}

impl DataType {
    pub const ALL: [DataType; 14] = [
        DataType::Bool,
        DataType::Uint8,
        DataType::Uint16,
        DataType::Uint32,
        DataType::Uint64,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::Fp16,
        DataType::Bf16,
        DataType::Fp32,
        DataType::Fp64,
        DataType::Bytes,
    ];

    /// Its name on the wire ("FP32").
    pub fn name(self) -> &'static str {
        match self {
            DataType::Bool => "BOOL",
            DataType::Uint8 => "UINT8",
            DataType::Uint16 => "UINT16",
            DataType::Uint32 => "UINT32",
            DataType::Uint64 => "UINT64",
            DataType::Int8 => "INT8",
            DataType::Int16 => "INT16",
            DataType::Int32 => "INT32",
            DataType::Int64 => "INT64",
            DataType::Fp16 => "FP16",
            DataType::Bf16 => "BF16",
            DataType::Fp32 => "FP32",
            DataType::Fp64 => "FP64",
            DataType::Bytes => "BYTES",
        }
    }

    /// The datatype named `s` on the wire.
    pub fn parse(s: &str) -> Option<DataType> {
        DataType::ALL.into_iter().find(|d| d.name() == s)
    }

    /// Bytes per element in the binary tensor extension; `None` for BYTES,
    /// whose elements are length-prefixed.
    pub fn size(self) -> Option<usize> {
        Some(match self {
            DataType::Bool | DataType::Uint8 | DataType::Int8 => 1,
            DataType::Uint16 | DataType::Int16 | DataType::Fp16 | DataType::Bf16 => 2,
            DataType::Uint32 | DataType::Int32 | DataType::Fp32 => 4,
            DataType::Uint64 | DataType::Int64 | DataType::Fp64 => 8,
            DataType::Bytes => return None,
        })
    }

    /// A floating-point type.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::Fp16 | DataType::Bf16 | DataType::Fp32 | DataType::Fp64
        )
    }

    /// The smallest and largest value it holds (as f64; 64-bit integers
    /// rounded), for checking a fill.
    pub fn range(self) -> (f64, f64) {
        match self {
            DataType::Bool => (0.0, 1.0),
            DataType::Uint8 => (0.0, u8::MAX as f64),
            DataType::Uint16 => (0.0, u16::MAX as f64),
            DataType::Uint32 => (0.0, u32::MAX as f64),
            DataType::Uint64 => (0.0, u64::MAX as f64),
            DataType::Int8 => (i8::MIN as f64, i8::MAX as f64),
            DataType::Int16 => (i16::MIN as f64, i16::MAX as f64),
            DataType::Int32 => (i32::MIN as f64, i32::MAX as f64),
            DataType::Int64 => (i64::MIN as f64, i64::MAX as f64),
            DataType::Fp16 => (-65504.0, 65504.0),
            DataType::Bf16 | DataType::Fp32 => (f32::MIN as f64, f32::MAX as f64),
            DataType::Fp64 | DataType::Bytes => (f64::MIN, f64::MAX),
        }
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a fill or a tensor file cannot be used, in one sentence (said at
/// the spec's key, or about the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TensorError(pub String);

impl From<String> for TensorError {
    fn from(s: String) -> TensorError {
        TensorError(s)
    }
}

impl From<&str> for TensorError {
    fn from(s: &str) -> TensorError {
        TensorError(s.to_string())
    }
}

/// How an input's elements are filled, from the point's seed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Fill {
    /// Uniform in `[low, high)` (integers: `[low, high]`).
    Uniform { low: f64, high: f64 },
    /// Normal with this mean and standard deviation (integers: rounded),
    /// clamped to the datatype's range.
    Normal { mean: f64, std: f64 },
    /// Every element the same.
    Constant { value: f64 },
}

impl Default for Fill {
    /// Pixels scaled to `[0, 1)`.
    fn default() -> Fill {
        Fill::Uniform {
            low: 0.0,
            high: 1.0,
        }
    }
}

impl Fill {
    /// The fill a spec writes as `"uniform(0, 1)"`, `"normal(0, 1)"` or
    /// `"constant(0.5)"` (a bare `"uniform"` or `"normal"` takes (0, 1));
    /// Err: what was expected.
    pub fn parse(s: &str) -> Result<Fill, TensorError> {
        let expected =
            "expected \"uniform(low, high)\", \"normal(mean, std)\" or \"constant(value)\"";
        let s = s.trim();
        let (name, args) = match s.find('(') {
            Some(i) if s.ends_with(')') => (&s[..i], &s[i + 1..s.len() - 1]),
            Some(_) => return Err(expected.into()),
            None => (s, ""),
        };
        let nums: Vec<f64> = if args.trim().is_empty() {
            Vec::new()
        } else {
            args.split(',')
                .map(|a| a.trim().parse::<f64>().ok().filter(|x| x.is_finite()))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("{expected}, with finite numbers"))?
        };
        match (name.trim(), nums.as_slice()) {
            ("uniform", []) => Ok(Fill::default()),
            ("uniform", [low, high]) if low < high => Ok(Fill::Uniform {
                low: *low,
                high: *high,
            }),
            ("uniform", [_, _]) => Err(TensorError::from(
                "expected uniform(low, high) with low < high",
            )),
            ("normal", []) => Ok(Fill::Normal {
                mean: 0.0,
                std: 1.0,
            }),
            ("normal", [mean, std]) if *std >= 0.0 => Ok(Fill::Normal {
                mean: *mean,
                std: *std,
            }),
            ("normal", [_, _]) => Err(TensorError::from(
                "expected normal(mean, std) with std >= 0",
            )),
            ("constant", [value]) => Ok(Fill::Constant { value: *value }),
            _ => Err(expected.into()),
        }
    }

    /// The values it can produce, roughly: what must fit the datatype.
    pub fn bounds(self) -> (f64, f64) {
        match self {
            Fill::Uniform { low, high } => (low, high),
            Fill::Normal { mean, .. } => (mean, mean),
            Fill::Constant { value } => (value, value),
        }
    }
}

/// One input tensor of a request, per item: its shape leaves out the
/// batch dimension, which the request's `batch` leads. Its elements come
/// from `fill`, or from `file` where one is given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TensorInput {
    pub name: String,
    pub datatype: DataType,
    pub shape: Vec<u64>,
    pub fill: Fill,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<TensorFile>,
}

/// Items of an input read from a file: a NumPy `.npy` array of shape
/// `[items, ...shape]` (or `shape`, one item) and the input's datatype, or
/// raw little-endian elements, item after item. Requests take its items
/// in turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TensorFile {
    /// As the spec wrote it (relative to the spec's folder).
    pub path: String,
    /// SHA-256 of its bytes when the spec was compiled: a file that
    /// changed since fails the point.
    pub sha256: String,
    pub items: u64,
    /// Set when the file is a picture, or a folder of them: each picture
    /// is one item, decoded, resized and laid out as this says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pictures: Option<Pictures>,
    /// Set for a BYTES input: where its elements come from (`items` is
    /// then the elements over the elements per item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strings: Option<Strings>,
}

/// How pictures become an image input's items: each is decoded (PNG or
/// JPEG), scaled until it covers the input's height and width and
/// cropped at its centre (its aspect kept), and its pixels written in the
/// input's layout, as `pixels` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Pictures {
    pub layout: Layout,
    pub pixels: Pixels,
}

/// Where an image input keeps its channels, read from its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// `[C, H, W]`: channels first (PyTorch, ONNX).
    Chw,
    /// `[H, W, C]`: channels last (TensorFlow, most UINT8 pipelines).
    Hwc,
}

/// How a picture's pixel values (0 to 255 per channel) become elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Pixels {
    /// 0 to 255, as they are (the only choice for UINT8 inputs).
    Raw,
    /// Divided by 255: 0 to 1 (the default for floating-point inputs).
    Unit,
    /// Divided by 255, less ImageNet's channel mean (0.485, 0.456, 0.406),
    /// over its standard deviation (0.229, 0.224, 0.225): what
    /// torchvision's ResNets and most ImageNet classifiers expect. RGB only.
    Imagenet,
}

impl Pixels {
    pub const NAMES: &'static str = "\"raw\", \"unit\" or \"imagenet\"";

    /// The choice a spec names.
    pub fn parse(s: &str) -> Option<Pixels> {
        match s {
            "raw" => Some(Pixels::Raw),
            "unit" => Some(Pixels::Unit),
            "imagenet" => Some(Pixels::Imagenet),
            _ => None,
        }
    }

    /// The element a pixel value of `channel` (0 red, 1 green, 2 blue)
    /// becomes.
    pub fn value(self, v: u8, channel: usize) -> f64 {
        const MEAN: [f64; 3] = [0.485, 0.456, 0.406];
        const STD: [f64; 3] = [0.229, 0.224, 0.225];
        let x = f64::from(v);
        match self {
            Pixels::Raw => x,
            Pixels::Unit => x / 255.0,
            Pixels::Imagenet => (x / 255.0 - MEAN[channel % 3]) / STD[channel % 3],
        }
    }
}

/// The picture an input's per-item shape holds: its layout, channels (1
/// or 3), height and width; `None` when the shape is no picture's.
pub fn picture_shape(shape: &[u64]) -> Option<(Layout, u64, u64, u64)> {
    match *shape {
        [c @ (1 | 3), h, w] => Some((Layout::Chw, c, h, w)),
        [h, w, c @ (1 | 3)] => Some((Layout::Hwc, c, h, w)),
        _ => None,
    }
}

/// Most pixels of one picture an input reads (64 megapixels): what
/// decoding one may hold in memory is bounded.
pub const MAX_PICTURE_PIXELS: u64 = 64 << 20;

/// Checks that `bytes` are a PNG or a JPEG of at most
/// [`MAX_PICTURE_PIXELS`], by its header; Err: what it is instead.
pub fn check_picture(bytes: &[u8]) -> Result<(), TensorError> {
    use crate::image::ImageType;
    match crate::image::header(bytes) {
        Ok(h) if !matches!(h.kind, ImageType::Png | ImageType::Jpeg) => Err(TensorError(format!(
            "is a {} picture; a tensor input reads PNG or JPEG ones",
            h.kind.name()
        ))),
        Ok(h) if u64::from(h.width) * u64::from(h.height) > MAX_PICTURE_PIXELS => {
            Err(TensorError(format!(
                "is a picture of {} x {} pixels; expected at most 64 megapixels",
                h.width, h.height
            )))
        }
        Ok(_) => Ok(()),
        Err(crate::image::HeaderError::Unknown) => Err(TensorError::from(
            "is not a PNG or JPEG picture (judged by its first bytes)",
        )),
        Err(e) => Err(TensorError(format!("is {e}"))),
    }
}

/// Most files one input reads from a folder (pictures, or a BYTES
/// input's elements).
pub const MAX_FOLDER_FILES: usize = 4096;

/// What the files of an input's `file` must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// PNG or JPEG pictures ([`check_picture`]).
    Pictures,
    /// Anything: each file's bytes are one BYTES element.
    Anything,
}

/// The files a path names, read: the file itself, or every file of the
/// folder in the order of their names (hidden ones left out); with a
/// SHA-256 that changes when any of them, or their names, does.
#[derive(Debug)]
pub struct FileSet {
    pub files: Vec<(std::path::PathBuf, Vec<u8>)>,
    pub sha256: String,
}

impl FileSet {
    /// One file, already read.
    pub fn one(
        path: &std::path::Path,
        bytes: Vec<u8>,
        expect: Expect,
    ) -> Result<FileSet, TensorError> {
        use sha2::{Digest, Sha256};
        if expect == Expect::Pictures {
            check_picture(&bytes).map_err(|e| TensorError(format!("{} {e}", path.display())))?;
        }
        let sha256 = crate::compile::hex(&Sha256::digest(&bytes));
        Ok(FileSet {
            files: vec![(path.to_path_buf(), bytes)],
            sha256,
        })
    }

    /// Reads them, each a regular file (inside `repo` where given) and all
    /// together at most [`crate::files::MAX_TENSOR_FILE_BYTES`]. Err:
    /// which one is not what `expect` says, or cannot be read.
    pub fn read(
        path: &std::path::Path,
        repo: Option<&std::path::Path>,
        expect: Expect,
    ) -> Result<FileSet, TensorError> {
        use sha2::{Digest, Sha256};
        let limit = crate::files::MAX_TENSOR_FILE_BYTES;
        let read = |p: &std::path::Path, left: u64| match repo {
            Some(r) => crate::files::read_regular_in(p, left, r),
            None => crate::files::read_regular(p, left),
        };
        if !std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            let bytes = read(path, limit)
                .map_err(|e| TensorError(format!("cannot read {}: {e}", path.display())))?;
            return FileSet::one(path, bytes, expect);
        }
        if let Some(r) = repo {
            crate::files::check_link(path, r)
                .map_err(|e| TensorError(format!("cannot read {}: {e}", path.display())))?;
        }
        let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(path)
            .map_err(|e| TensorError(format!("cannot list {}: {e}", path.display())))?
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .filter(|n| !n.to_string_lossy().starts_with('.'))
            .collect();
        names.sort();
        let what = match expect {
            Expect::Pictures => "picture",
            Expect::Anything => "file",
        };
        if names.is_empty() {
            return Err(TensorError(format!(
                "the folder {} holds no {what}",
                path.display()
            )));
        }
        if names.len() > MAX_FOLDER_FILES {
            return Err(TensorError(format!(
                "the folder {} holds {} files; expected at most {MAX_FOLDER_FILES}",
                path.display(),
                names.len()
            )));
        }
        let mut hash = Sha256::new();
        let mut files = Vec::with_capacity(names.len());
        let mut total = 0u64;
        for name in names {
            let p = path.join(&name);
            let bytes = read(&p, limit - total).map_err(|e| {
                TensorError(format!(
                    "cannot read {}: {e}{}",
                    p.display(),
                    if total > 0 {
                        " (the folder's files together)"
                    } else {
                        ""
                    }
                ))
            })?;
            if expect == Expect::Pictures {
                check_picture(&bytes).map_err(|e| {
                    TensorError(format!(
                        "{} {e} (a folder of pictures holds nothing else)",
                        p.display()
                    ))
                })?;
            }
            total += bytes.len() as u64;
            hash.update(name.as_encoded_bytes());
            hash.update([0]);
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(&bytes);
            files.push((p, bytes));
        }
        Ok(FileSet {
            files,
            sha256: crate::compile::hex(&hash.finalize()),
        })
    }

    /// A BYTES input's elements from these files: each file's bytes (a
    /// folder, or one picture), or the lines of one text file (`\n` or
    /// `\r\n`; a last empty line left out). Err: a text file that is
    /// not UTF-8, where.
    pub fn strings(&self, folder: bool) -> Result<(Strings, Vec<&[u8]>), TensorError> {
        match self.files.as_slice() {
            [(path, bytes)] if !folder && crate::image::header(bytes).is_err() => {
                if let Err(e) = std::str::from_utf8(bytes) {
                    let (line, col) = crate::files::line_col_of(bytes, e.valid_up_to());
                    return Err(TensorError(format!(
                        "{} is neither a folder, a picture nor UTF-8 text (one element a line): an invalid byte at line {line}, column {col}",
                        path.display()
                    )));
                }
                let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
                let lines = body
                    .split(|b| *b == b'\n')
                    .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                    .collect();
                Ok((
                    Strings::Lines,
                    if bytes.is_empty() { Vec::new() } else { lines },
                ))
            }
            files => Ok((
                Strings::Files,
                files.iter().map(|(_, b)| b.as_slice()).collect(),
            )),
        }
    }
}

/// Where a BYTES input's elements come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Strings {
    /// The lines of a UTF-8 text file.
    Lines,
    /// Each file's bytes: the files of a folder, or one picture.
    Files,
}

/// Where the elements of a tensor file start, and how many items it holds;
/// Err: why it does not hold items of `datatype` and per-item `shape`.
/// `.npy` (by its magic) is read by its header; anything else is raw.
pub fn file_items(
    bytes: &[u8],
    datatype: DataType,
    shape: &[u64],
) -> Result<(usize, u64), TensorError> {
    let size = datatype
        .size()
        .ok_or("BYTES tensors cannot be read from a file")?;
    let item = shape.iter().product::<u64>() as usize * size;
    if item == 0 {
        return Err(TensorError::from("the input's shape holds no element"));
    }
    let (start, count) = if bytes.starts_with(b"\x93NUMPY") {
        let (start, descr, fortran, dims) = npy_header(bytes)?;
        if fortran {
            return Err(
                "the array is in Fortran order; save it in C order (np.ascontiguousarray)".into(),
            );
        }
        let want = npy_descr(datatype)
            .ok_or_else(|| format!("NumPy has no {datatype} arrays; give a raw file"))?;
        if !want.contains(&descr.as_str()) {
            return Err(TensorError::from(format!(
                "the array's dtype is '{descr}'; the input is {datatype} ('{}')",
                want[0]
            )));
        }
        let per_item = if dims.len() == shape.len() + 1 && dims[1..] == *shape {
            dims[0]
        } else if dims == shape {
            1
        } else {
            return Err(TensorError::from(format!(
                "the array's shape is {dims:?}; expected [items, {}] or {shape:?}",
                shape
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        let need = per_item as usize * item;
        if bytes.len() - start < need {
            return Err(TensorError::from(format!(
                "the array's header promises {need} bytes of data; the file holds {}",
                bytes.len() - start
            )));
        }
        (start, per_item)
    } else {
        if bytes.len() % item != 0 {
            return Err(TensorError::from(format!(
                "a raw file of {} bytes is not a whole number of items of {item} bytes ({datatype} {shape:?})",
                bytes.len()
            )));
        }
        (0, (bytes.len() / item) as u64)
    };
    if count == 0 {
        return Err(TensorError::from("the file holds no item"));
    }
    Ok((start, count))
}

/// The NumPy dtype strings of a datatype (little-endian), first preferred.
fn npy_descr(d: DataType) -> Option<&'static [&'static str]> {
    Some(match d {
        DataType::Bool => &["|b1"],
        DataType::Uint8 => &["|u1", "<u1"],
        DataType::Int8 => &["|i1", "<i1"],
        DataType::Uint16 => &["<u2"],
        DataType::Int16 => &["<i2"],
        DataType::Uint32 => &["<u4"],
        DataType::Int32 => &["<i4"],
        DataType::Uint64 => &["<u8"],
        DataType::Int64 => &["<i8"],
        DataType::Fp16 => &["<f2"],
        DataType::Fp32 => &["<f4"],
        DataType::Fp64 => &["<f8"],
        DataType::Bf16 | DataType::Bytes => return None,
    })
}

/// A `.npy` header: where the data starts, the dtype string, Fortran
/// order, and the shape.
fn npy_header(b: &[u8]) -> Result<(usize, String, bool, Vec<u64>), TensorError> {
    let bad = || "not a readable .npy file (its header is cut or malformed)".to_string();
    let major = *b.get(6).ok_or_else(bad)?;
    let (len, at) = match major {
        1 => (
            u16::from_le_bytes([*b.get(8).ok_or_else(bad)?, *b.get(9).ok_or_else(bad)?]) as usize,
            10,
        ),
        2 | 3 => {
            let l = b.get(8..12).ok_or_else(bad)?;
            (u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize, 12)
        }
        v => {
            return Err(TensorError::from(format!(
                ".npy format version {v} is not known"
            )));
        }
    };
    let header = b.get(at..at + len).ok_or_else(bad)?;
    let header = std::str::from_utf8(header).map_err(|_| bad())?;
    let value_of = |key: &str| -> Option<&str> {
        let i = header.find(&format!("'{key}'"))?;
        let rest = header[i + key.len() + 2..].trim_start().strip_prefix(':')?;
        Some(rest.trim_start())
    };
    let descr = value_of("descr")
        .and_then(|v| v.strip_prefix('\''))
        .and_then(|v| v.split('\'').next())
        .ok_or_else(bad)?
        .to_string();
    let fortran = value_of("fortran_order")
        .ok_or_else(bad)?
        .starts_with("True");
    let shape = value_of("shape")
        .and_then(|v| v.strip_prefix('('))
        .and_then(|v| v.split(')').next())
        .ok_or_else(bad)?;
    let dims = shape
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse::<u64>().map_err(|_| bad()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((at + len, descr, fortran, dims))
}

impl TensorInput {
    /// Elements per item.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// A KServe v2 request's shape: `batch` items of each input (declared, or
/// all read from the model's metadata when `inputs` is empty), written as
/// JSON or with the binary tensor extension, to one version of the model
/// or its default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tensors {
    pub batch: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<TensorInput>,
    pub binary: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The elements of a tensor's JSON `data` (a flat or nested array of
/// numbers, booleans or strings), counted as they are read and not kept:
/// how the client checks an answer's outputs and the simulator a
/// request's inputs against their shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elements(pub u64);

impl<'de> Deserialize<'de> for Elements {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Elements, D::Error> {
        use serde::de::{self, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = u64;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a tensor's data: an array of numbers, booleans or strings")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<u64, A::Error> {
                let mut n = 0u64;
                while let Some(c) = a.next_element::<Elements>()? {
                    n = n.saturating_add(c.0);
                }
                Ok(n)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<u64, E> {
                Ok(1)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<u64, E> {
                Ok(1)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<u64, E> {
                Ok(1)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<u64, E> {
                Ok(1)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<u64, E> {
                Ok(1)
            }
        }
        d.deserialize_any(V).map(Elements)
    }
}

/// The raw form of one entry of `inputs`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTensorInput {
    /// The input's name, as the model's metadata has it.
    pub name: String,
    /// Its datatype: BOOL, UINT8..UINT64, INT8..INT64, FP16, BF16, FP32, FP64, or BYTES (strings, read from `file`).
    pub datatype: String,
    /// Its shape per item, without the batch dimension, e.g. [3, 224, 224].
    pub shape: Vec<i64>,
    /// How its elements are filled: "uniform(low, high)" (default uniform(0, 1)), "normal(mean, std)" or "constant(value)".
    #[serde(default)]
    pub fill: Option<String>,
    /// Items read from a file instead (relative to the spec): a NumPy .npy array of shape [items, ...shape] in the input's datatype, raw little-endian elements, or pictures: a PNG or JPEG file, or a folder of them, each one item, resized and cropped to the shape ([C, H, W] or [H, W, C], C 1 or 3). For BYTES: a UTF-8 text file (one element a line) or a folder (each file's bytes one element).
    #[serde(default)]
    pub file: Option<String>,
    /// For pictures: how pixel values become elements: "raw" (0 to 255; UINT8 inputs), "unit" (0 to 1; the default for floats) or "imagenet" (unit, then ImageNet's channel mean and deviation).
    #[serde(default)]
    pub pixels: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_parse_and_refuse() {
        assert_eq!(Fill::parse("uniform").unwrap(), Fill::default());
        assert_eq!(
            Fill::parse(" normal(0.5, 2) ").unwrap(),
            Fill::Normal {
                mean: 0.5,
                std: 2.0
            }
        );
        assert_eq!(
            Fill::parse("constant(3)").unwrap(),
            Fill::Constant { value: 3.0 }
        );
        assert!(
            Fill::parse("uniform(2, 1)")
                .unwrap_err()
                .0
                .contains("low < high")
        );
        assert!(Fill::parse("gauss(1)").unwrap_err().0.contains("expected"));
        assert!(
            Fill::parse("constant(nan)")
                .unwrap_err()
                .0
                .contains("finite")
        );
    }

    fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while (10 + h.len() + 1) % 64 != 0 {
            h.push(' ');
        }
        h.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn tensor_files_are_read_by_their_header_or_as_raw_items() {
        let f = npy("<f4", "(3, 2, 2)", &[0u8; 48]);
        let (start, items) = file_items(&f, DataType::Fp32, &[2, 2]).unwrap();
        assert_eq!((items, f.len() - start), (3, 48));
        assert_eq!(
            file_items(&npy("<f4", "(2, 2)", &[0u8; 16]), DataType::Fp32, &[2, 2])
                .unwrap()
                .1,
            1
        );
        let e = file_items(&f, DataType::Fp16, &[2, 2]).unwrap_err().0;
        assert!(e.contains("dtype is '<f4'; the input is FP16"), "{e}");
        let e = file_items(&f, DataType::Fp32, &[4]).unwrap_err().0;
        assert!(e.contains("shape is [3, 2, 2]"), "{e}");
        let e = file_items(
            &npy("<f4", "(3, 2, 2)", &[0u8; 40]),
            DataType::Fp32,
            &[2, 2],
        )
        .unwrap_err()
        .0;
        assert!(e.contains("promises 48 bytes"), "{e}");
        assert_eq!(
            file_items(&[0u8; 24], DataType::Int32, &[3]).unwrap(),
            (0, 2)
        );
        assert!(
            file_items(&[0u8; 25], DataType::Int32, &[3])
                .unwrap_err()
                .0
                .contains("whole number")
        );
        assert!(file_items(b"\x93NUMPY\x01", DataType::Int32, &[3]).is_err());
    }

    #[test]
    fn datatypes_round_trip_their_names() {
        for d in DataType::ALL {
            assert_eq!(DataType::parse(d.name()), Some(d));
        }
        assert_eq!(DataType::Fp16.size(), Some(2));
        assert_eq!(DataType::Bytes.size(), None);
    }
}
