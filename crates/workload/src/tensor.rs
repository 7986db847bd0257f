//! The data of a KServe v2 request's input tensors: `items` items of an
//! input, filled from a seed as its [`Fill`] says, written as the
//! little-endian bytes of its datatype (what the binary tensor extension
//! sends; the JSON form is read back from them). Deterministic: the same
//! input, items and seed give the same bytes on every machine.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use infer_bench_spec::tensor::{
    DataType, Expect, FileSet, Fill, Layout, Pictures, Strings, TensorInput,
};

use crate::error::WorkloadError;

/// Items read from files, by input name.
pub type Files = BTreeMap<String, FileItems>;

/// An input's items read from files, one after another: of one size
/// (numbers: a `.npy` header left behind, or decoded pictures), or each
/// its own (BYTES: every element its 4-byte little-endian length and its
/// bytes, as the binary tensor extension sends them).
#[derive(Debug, Clone)]
pub enum FileItems {
    Sized { data: Arc<[u8]>, size: usize },
    Varied { data: Arc<[u8]>, ends: Arc<[usize]> },
}

impl FileItems {
    /// How many items it holds.
    pub fn count(&self) -> usize {
        match self {
            FileItems::Sized { data, size } => data.len() / (*size).max(1),
            FileItems::Varied { ends, .. } => ends.len(),
        }
    }

    /// Item `i`'s bytes.
    pub fn item(&self, i: usize) -> &[u8] {
        match self {
            FileItems::Sized { data, size } => &data[i * size..(i + 1) * size],
            FileItems::Varied { data, ends } => {
                let start = if i == 0 { 0 } else { ends[i - 1] };
                &data[start..ends[i]]
            }
        }
    }
}

/// Reads the files of a kserve workload's inputs (relative to `base_dir`),
/// each checked to be the file the spec was compiled with.
pub fn load_files(
    workload: &infer_bench_spec::Workload,
    base_dir: &Path,
) -> Result<Files, WorkloadError> {
    let mut out = Files::new();
    let Some(infer_bench_spec::retrieval::Retrieval::Tensors(t)) = &workload.retrieval else {
        return Ok(out);
    };
    for input in &t.inputs {
        let Some(f) = &input.file else { continue };
        let path = base_dir.join(&f.path);
        if let Some(pictures) = f.pictures {
            out.insert(
                input.name.clone(),
                load_pictures(&path, f, input, pictures)?,
            );
            continue;
        }
        if f.strings.is_some() {
            out.insert(input.name.clone(), load_strings(&path, f, input)?);
            continue;
        }
        let read = read_set(&path, f, Expect::Anything)?;
        let bytes = read.files.first().map_or(&[][..], |(_, b)| b.as_slice());
        let (start, _) = infer_bench_spec::tensor::file_items(bytes, input.datatype, &input.shape)
            .map_err(|e| WorkloadError::file(&path, e.to_string()))?;
        out.insert(
            input.name.clone(),
            FileItems::Sized {
                data: Arc::from(&bytes[start..]),
                size: item_size(input),
            },
        );
    }
    Ok(out)
}

/// Bytes of one item of a numeric input.
fn item_size(input: &TensorInput) -> usize {
    (input.elements() as usize * input.datatype.size().unwrap_or(1)).max(1)
}

/// The items of an input read from pictures: each decoded and laid out
/// ([`picture_item`]), one after the other, in the order of their names.
fn load_pictures(
    path: &Path,
    f: &infer_bench_spec::tensor::TensorFile,
    input: &TensorInput,
    pictures: Pictures,
) -> Result<FileItems, WorkloadError> {
    let read = read_set(path, f, Expect::Pictures)?;
    let mut items = Vec::new();
    for (p, bytes) in &read.files {
        items.extend(
            picture_item(bytes, input, pictures)
                .map_err(|e| WorkloadError::file(p, e.to_string()))?,
        );
    }
    Ok(FileItems::Sized {
        data: Arc::from(items),
        size: item_size(input),
    })
}

/// The items of a BYTES input: its elements (lines, or files' bytes), as
/// many to an item as its shape holds, each written as its length and
/// its bytes.
fn load_strings(
    path: &Path,
    f: &infer_bench_spec::tensor::TensorFile,
    input: &TensorInput,
) -> Result<FileItems, WorkloadError> {
    let read = read_set(path, f, Expect::Anything)?;
    // As compiled: lines of one text file, or each file's bytes.
    let (_, elements) = read
        .strings(f.strings == Some(Strings::Files))
        .map_err(|e| WorkloadError::file(path, e.to_string()))?;
    let per_item = (input.elements() as usize).max(1);
    let mut data = Vec::new();
    let mut ends = Vec::new();
    for item in elements.chunks_exact(per_item) {
        for e in item {
            data.extend_from_slice(&(e.len() as u32).to_le_bytes());
            data.extend_from_slice(e);
        }
        ends.push(data.len());
    }
    Ok(FileItems::Varied {
        data: Arc::from(data),
        ends: Arc::from(ends),
    })
}

/// The files of an input's `file`, checked to be those the spec was
/// compiled with.
fn read_set(
    path: &Path,
    f: &infer_bench_spec::tensor::TensorFile,
    expect: Expect,
) -> Result<FileSet, WorkloadError> {
    let read =
        FileSet::read(path, None, expect).map_err(|e| WorkloadError::file(path, e.to_string()))?;
    if read.sha256 != f.sha256 {
        return Err(
            WorkloadError::file(path, "it changed since the spec was compiled")
                .with_hint("run again: the spec is compiled with the files as they are now"),
        );
    }
    Ok(read)
}

/// Items `first..first + items` of an input's items from files (taken
/// in turn, from the start again at their end), as one tensor's bytes.
pub fn from_file(data: &FileItems, first: u64, items: u32) -> Vec<u8> {
    let count = data.count().max(1) as u64;
    let mut out = Vec::with_capacity(match data {
        FileItems::Sized { size, .. } => size * items as usize,
        FileItems::Varied { .. } => 0,
    });
    for i in 0..u64::from(items) {
        out.extend_from_slice(data.item(((first + i) % count) as usize));
    }
    out
}

/// A fast, seeded generator (xorshift64*): tensors of hundreds of MB
/// are filled at memory speed, and no statistical subtlety matters for
/// pixels fed to a model being timed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // splitmix64 of the seed: never the all-zero state.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// `items` items of `input`, as the little-endian bytes of its datatype.
/// BYTES (never declared by a workload) gives no bytes.
pub fn fill(input: &TensorInput, items: u32, seed: u64) -> Vec<u8> {
    let Some(size) = input.datatype.size() else {
        return Vec::new();
    };
    let n = input.elements() as usize * items as usize;
    let mut out = Vec::with_capacity(n * size);
    let mut rng = Rng::new(seed);
    let (min, max) = input.datatype.range();
    let int = !input.datatype.is_float();
    let mut spare: Option<f64> = None;
    let mut value = || -> f64 {
        let x = match input.fill {
            Fill::Constant { value } => value,
            Fill::Uniform { low, high } if int => {
                // Every integer in [low, high], equally likely.
                let (lo, hi) = (low.ceil(), high.floor());
                (lo + (rng.unit() * (hi - lo + 1.0)).floor()).min(hi)
            }
            Fill::Uniform { low, high } => low + rng.unit() * (high - low),
            Fill::Normal { mean, std } => {
                // Box-Muller, both values used.
                let z = match spare.take() {
                    Some(z) => z,
                    None => {
                        let u1 = 1.0 - rng.unit();
                        let u2 = rng.unit();
                        let r = (-2.0 * u1.ln()).sqrt();
                        let t = std::f64::consts::TAU * u2;
                        spare = Some(r * t.sin());
                        r * t.cos()
                    }
                };
                mean + std * z
            }
        };
        let x = if int { x.round() } else { x };
        x.clamp(min, max)
    };
    for _ in 0..n {
        push(&mut out, input.datatype, value());
    }
    out
}

/// Appends `x` (already in `datatype`'s range) as its little-endian
/// bytes; BYTES appends nothing.
fn push(out: &mut Vec<u8>, datatype: DataType, x: f64) {
    match datatype {
        DataType::Bool => out.push(u8::from(x >= 0.5)),
        DataType::Uint8 => out.push(x as u8),
        DataType::Int8 => out.push(x as i8 as u8),
        DataType::Uint16 => out.extend_from_slice(&(x as u16).to_le_bytes()),
        DataType::Int16 => out.extend_from_slice(&(x as i16).to_le_bytes()),
        DataType::Uint32 => out.extend_from_slice(&(x as u32).to_le_bytes()),
        DataType::Int32 => out.extend_from_slice(&(x as i32).to_le_bytes()),
        DataType::Uint64 => out.extend_from_slice(&(x as u64).to_le_bytes()),
        DataType::Int64 => out.extend_from_slice(&(x as i64).to_le_bytes()),
        DataType::Fp16 => out.extend_from_slice(&half::f16::from_f64(x).to_le_bytes()),
        DataType::Bf16 => out.extend_from_slice(&half::bf16::from_f64(x).to_le_bytes()),
        DataType::Fp32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
        DataType::Fp64 => out.extend_from_slice(&x.to_le_bytes()),
        DataType::Bytes => {}
    }
}

/// Why a picture cannot be an item of an input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PictureError {
    #[error("the input's shape {0:?} is no picture's ([C, H, W] or [H, W, C], C 1 or 3)")]
    Shape(Vec<u64>),
    #[error("it does not decode: {0}")]
    Decode(String),
}

/// One picture as an item of an image input: decoded (PNG or JPEG),
/// scaled (bilinear) until it covers the input's height and width and
/// cropped at its centre, then its pixel values written in the input's
/// layout and datatype as `pictures` says. Err: why it does not decode.
pub fn picture_item(
    bytes: &[u8],
    input: &TensorInput,
    pictures: Pictures,
) -> Result<Vec<u8>, PictureError> {
    use image::imageops::FilterType;
    let shape = || PictureError::Shape(input.shape.clone());
    let (_, channels, height, width) =
        infer_bench_spec::tensor::picture_shape(&input.shape).ok_or_else(shape)?;
    let (h, w) = (
        u32::try_from(height).map_err(|_| shape())?,
        u32::try_from(width).map_err(|_| shape())?,
    );
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| PictureError::Decode(e.to_string()))?;
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(infer_bench_spec::tensor::MAX_PICTURE_PIXELS * 8);
    reader.limits(limits);
    let decoded = reader
        .decode()
        .map_err(|e| PictureError::Decode(e.to_string()))?;
    let fitted = if (decoded.width(), decoded.height()) == (w, h) {
        decoded
    } else {
        decoded.resize_to_fill(w, h, FilterType::Triangle)
    };
    // Pixels row after row, each its channels (HWC).
    let c = channels as usize;
    let px = if c == 1 {
        fitted.to_luma8().into_raw()
    } else {
        fitted.to_rgb8().into_raw()
    };
    let (h, w) = (h as usize, w as usize);
    let size = input.datatype.size().unwrap_or(1);
    let mut out = Vec::with_capacity(px.len() * size);
    let mut put = |ch: usize, v: u8| push(&mut out, input.datatype, pictures.pixels.value(v, ch));
    match pictures.layout {
        Layout::Hwc => {
            for (i, v) in px.iter().enumerate() {
                put(i % c, *v);
            }
        }
        Layout::Chw => {
            for ch in 0..c {
                for at in 0..h * w {
                    put(ch, px[at * c + ch]);
                }
            }
        }
    }
    Ok(out)
}

/// Element `i` of little-endian `bytes` of `datatype`, as a JSON number
/// (a BOOL as `true`/`false`): how the JSON form writes what [`fill`]
/// made. `None` past the end.
pub fn element(datatype: DataType, bytes: &[u8], i: usize) -> Option<serde_json::Value> {
    use serde_json::Value;
    let size = datatype.size()?;
    let b = bytes.get(i * size..(i + 1) * size)?;
    let arr = |n: usize| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&b[..n]);
        a
    };
    Some(match datatype {
        DataType::Bool => Value::Bool(b[0] != 0),
        DataType::Uint8 => b[0].into(),
        DataType::Int8 => (b[0] as i8).into(),
        DataType::Uint16 => u16::from_le_bytes([b[0], b[1]]).into(),
        DataType::Int16 => i16::from_le_bytes([b[0], b[1]]).into(),
        DataType::Uint32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]).into(),
        DataType::Int32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]).into(),
        DataType::Uint64 => u64::from_le_bytes(arr(8)).into(),
        DataType::Int64 => i64::from_le_bytes(arr(8)).into(),
        DataType::Fp16 => f64::from(half::f16::from_le_bytes([b[0], b[1]])).into(),
        DataType::Bf16 => f64::from(half::bf16::from_le_bytes([b[0], b[1]])).into(),
        DataType::Fp32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])).into(),
        DataType::Fp64 => f64::from_le_bytes(arr(8)).into(),
        DataType::Bytes => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(datatype: DataType, fill: Fill) -> TensorInput {
        TensorInput {
            name: "x".into(),
            datatype,
            shape: vec![2, 3],
            fill,
            file: None,
        }
    }

    #[test]
    fn fills_are_deterministic_sized_and_in_range() {
        let t = input(DataType::Fp32, Fill::default());
        let a = fill(&t, 4, 7);
        assert_eq!(a.len(), 2 * 3 * 4 * 4);
        assert_eq!(a, fill(&t, 4, 7));
        assert_ne!(a, fill(&t, 4, 8));
        for i in 0..24 {
            let x = element(DataType::Fp32, &a, i).unwrap().as_f64().unwrap();
            assert!((0.0..1.0).contains(&x), "{x}");
        }
        assert!(element(DataType::Fp32, &a, 24).is_none());
    }

    #[test]
    fn integer_fills_cover_their_range_and_constants_are_exact() {
        let t = input(
            DataType::Int64,
            Fill::Uniform {
                low: 0.0,
                high: 3.0,
            },
        );
        let b = fill(&t, 100, 1);
        let seen: std::collections::BTreeSet<i64> = (0..600)
            .map(|i| element(DataType::Int64, &b, i).unwrap().as_i64().unwrap())
            .collect();
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        let c = fill(&input(DataType::Fp16, Fill::Constant { value: 0.5 }), 1, 0);
        assert_eq!(element(DataType::Fp16, &c, 5).unwrap().as_f64(), Some(0.5));
        let n = fill(
            &input(
                DataType::Uint8,
                Fill::Normal {
                    mean: 0.0,
                    std: 1e6,
                },
            ),
            10,
            3,
        );
        assert!(n.contains(&255) && n.contains(&0));
    }

    #[test]
    fn normal_fills_have_their_mean_and_spread() {
        let mut t = input(
            DataType::Fp64,
            Fill::Normal {
                mean: 2.0,
                std: 0.5,
            },
        );
        t.shape = vec![10_000];
        let b = fill(&t, 1, 11);
        let xs: Vec<f64> = (0..10_000)
            .map(|i| element(DataType::Fp64, &b, i).unwrap().as_f64().unwrap())
            .collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!((mean - 2.0).abs() < 0.03, "{mean}");
        assert!((var.sqrt() - 0.5).abs() < 0.03, "{}", var.sqrt());
    }

    /// A PNG of `w` x `h` RGB pixels, pixel (x, y) = `f(x, y)`.
    fn png(w: u32, h: u32, f: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = png::Encoder::new(&mut out, w, h);
        e.set_color(png::ColorType::Rgb);
        e.set_depth(png::BitDepth::Eight);
        let mut wr = e.write_header().unwrap();
        let data: Vec<u8> = (0..h)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .flat_map(|(x, y)| f(x, y))
            .collect();
        wr.write_image_data(&data).unwrap();
        drop(wr);
        out
    }

    fn image_input(datatype: DataType, shape: Vec<u64>) -> TensorInput {
        TensorInput {
            name: "images".into(),
            datatype,
            shape,
            fill: Fill::default(),
            file: None,
        }
    }

    #[test]
    fn pictures_are_laid_out_and_scaled_as_declared() {
        use infer_bench_spec::tensor::Pixels;
        // 2 x 2: red, green / blue, white.
        let four = png(2, 2, |x, y| match (x, y) {
            (0, 0) => [255, 0, 0],
            (1, 0) => [0, 255, 0],
            (0, 1) => [0, 0, 255],
            _ => [255, 255, 255],
        });
        let hwc = image_input(DataType::Uint8, vec![2, 2, 3]);
        let raw = Pictures {
            layout: Layout::Hwc,
            pixels: Pixels::Raw,
        };
        assert_eq!(
            picture_item(&four, &hwc, raw).unwrap(),
            vec![255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255]
        );
        let chw = image_input(DataType::Fp32, vec![3, 2, 2]);
        let unit = Pictures {
            layout: Layout::Chw,
            pixels: Pixels::Unit,
        };
        let b = picture_item(&four, &chw, unit).unwrap();
        let xs: Vec<f64> = (0..12)
            .map(|i| element(DataType::Fp32, &b, i).unwrap().as_f64().unwrap())
            .collect();
        // Red plane, green plane, blue plane.
        assert_eq!(xs, vec![1., 0., 0., 1., 0., 1., 0., 1., 0., 0., 1., 1.]);
        let net = Pictures {
            layout: Layout::Chw,
            pixels: Pixels::Imagenet,
        };
        let b = picture_item(&four, &chw, net).unwrap();
        let red0 = element(DataType::Fp32, &b, 0).unwrap().as_f64().unwrap();
        let blue0 = element(DataType::Fp32, &b, 8).unwrap().as_f64().unwrap();
        assert!((red0 - (1.0 - 0.485) / 0.229).abs() < 1e-5, "{red0}");
        assert!((blue0 - (0.0 - 0.406) / 0.225).abs() < 1e-5, "{blue0}");
    }

    #[test]
    fn pictures_are_scaled_to_cover_and_cropped_at_their_centre() {
        use infer_bench_spec::tensor::Pixels;
        // 12 x 4: white, with black bands 2 wide at the left and right.
        // Squeezed to 2 x 2 they would turn it grey; cropped, they are gone.
        let wide = png(12, 4, |x, _| {
            if (2..10).contains(&x) {
                [255; 3]
            } else {
                [0; 3]
            }
        });
        let grey = image_input(DataType::Uint8, vec![1, 2, 2]);
        let raw = Pictures {
            layout: Layout::Chw,
            pixels: Pixels::Raw,
        };
        // Scaled to 6 x 2 (covering 2 x 2), then its middle 2 x 2: white.
        let b = picture_item(&wide, &grey, raw).unwrap();
        assert_eq!(b.len(), 4);
        assert!(b.iter().all(|v| *v >= 250), "{b:?}");
        // A solid 40 x 30 picture keeps its colour at any size.
        let solid = png(40, 30, |_, _| [255, 0, 128]);
        let big = image_input(DataType::Fp16, vec![64, 48, 3]);
        let unit = Pictures {
            layout: Layout::Hwc,
            pixels: Pixels::Unit,
        };
        let b = picture_item(&solid, &big, unit).unwrap();
        assert_eq!(b.len(), 64 * 48 * 3 * 2);
        for i in [0, 1, 2, 3 * 1000 + 2] {
            let want = [1.0, 0.0, 128.0 / 255.0][i % 3];
            let x = element(DataType::Fp16, &b, i).unwrap().as_f64().unwrap();
            assert!((x - want).abs() < 2e-3, "{i}: {x}");
        }
        let e = picture_item(&solid[..solid.len() / 2], &big, unit).unwrap_err();
        assert!(matches!(e, PictureError::Decode(_)), "{e}");
    }

    #[test]
    fn bytes_items_are_length_prefixed_elements_taken_in_turn() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.txt"), "a\nbb\nccc\n").unwrap();
        let spec = infer_bench_spec::compile(
            "t.toml",
            "name = \"t\"\n[targets.t]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1\"\n[models.m]\nserved_name = \"m\"\n[workloads.w]\napi = \"kserve\"\ninputs = [{ name = \"text\", datatype = \"BYTES\", shape = [1], file = \"s.txt\" }]\n[load]\nconcurrency = 1\nrequests = 1\n",
            dir.path(),
        )
        .unwrap();
        let files = load_files(&spec.workloads["w"], dir.path()).unwrap();
        let items = &files["text"];
        assert_eq!(items.count(), 3);
        assert_eq!(items.item(1), b"\x02\x00\x00\x00bb");
        // Items 2, 0 (in turn, from the start again).
        assert_eq!(
            from_file(items, 2, 2),
            b"\x03\x00\x00\x00ccc\x01\x00\x00\x00a".to_vec()
        );
        // Changed since compiled: refused.
        std::fs::write(dir.path().join("s.txt"), "a\nbb\ncc\n").unwrap();
        let e = load_files(&spec.workloads["w"], dir.path()).unwrap_err();
        assert!(e.to_string().contains("changed since"), "{e}");
    }

    #[test]
    fn numeric_files_load_their_items_and_refuse_a_change() {
        let dir = tempfile::tempdir().unwrap();
        // Three items of INT32 [2], raw.
        let raw: Vec<u8> = (0..6i32).flat_map(i32::to_le_bytes).collect();
        std::fs::write(dir.path().join("x.raw"), &raw).unwrap();
        let spec = infer_bench_spec::compile(
            "t.toml",
            "name = \"t\"\n[targets.t]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1\"\n[models.m]\nserved_name = \"m\"\n[workloads.w]\napi = \"kserve\"\ninputs = [{ name = \"x\", datatype = \"INT32\", shape = [2], file = \"x.raw\" }]\n[load]\nconcurrency = 1\nrequests = 1\n",
            dir.path(),
        )
        .unwrap();
        let files = load_files(&spec.workloads["w"], dir.path()).unwrap();
        assert_eq!(files["x"].count(), 3);
        assert_eq!(files["x"].item(2), &raw[16..24]);
        std::fs::write(dir.path().join("x.raw"), &raw[..16]).unwrap();
        let e = load_files(&spec.workloads["w"], dir.path()).unwrap_err();
        assert!(e.to_string().contains("changed since"), "{e}");
    }
}
