//! The data of a KServe v2 request's input tensors: `items` items of an
//! input, filled from a seed as its [`Fill`] says, written as the
//! little-endian bytes of its datatype (what the binary tensor extension
//! sends; the JSON form is read back from them). Deterministic: the same
//! input, items and seed give the same bytes on every machine.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use infer_bench_spec::tensor::{DataType, Fill, TensorInput};

use crate::error::WorkloadError;

/// Items read from files, by input name: each the elements alone (a
/// `.npy` header left behind), item after item.
pub type Files = BTreeMap<String, Arc<[u8]>>;

/// Reads the files of a kserve workload's inputs (relative to `base_dir`),
/// each checked to be the file the spec was compiled with.
pub fn load_files(
    workload: &infer_bench_spec::Workload,
    base_dir: &Path,
) -> Result<Files, WorkloadError> {
    use sha2::{Digest, Sha256};
    let mut out = Files::new();
    let Some(infer_bench_spec::retrieval::Retrieval::Tensors(t)) = &workload.retrieval else {
        return Ok(out);
    };
    for input in &t.inputs {
        let Some(f) = &input.file else { continue };
        let path = base_dir.join(&f.path);
        let bytes = infer_bench_spec::files::read_regular(
            &path,
            infer_bench_spec::files::MAX_TENSOR_FILE_BYTES,
        )
        .map_err(|e| WorkloadError::file(&path, e.to_string()))?;
        let sha: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if sha != f.sha256 {
            return Err(
                WorkloadError::file(&path, "the file changed since the spec was compiled")
                    .with_hint("run again: the spec is compiled with the file as it is now"),
            );
        }
        let (start, _) = infer_bench_spec::tensor::file_items(&bytes, input.datatype, &input.shape)
            .map_err(|e| WorkloadError::file(&path, e.to_string()))?;
        out.insert(input.name.clone(), Arc::from(&bytes[start..]));
    }
    Ok(out)
}

/// Items `first..first + items` of a file's items (taken in turn, from the
/// start again at its end), as one tensor's bytes.
pub fn from_file(data: &[u8], input: &TensorInput, first: u64, items: u32) -> Vec<u8> {
    let size = input.elements() as usize * input.datatype.size().unwrap_or(1);
    let count = (data.len() / size.max(1)).max(1) as u64;
    let mut out = Vec::with_capacity(size * items as usize);
    for i in 0..u64::from(items) {
        let at = ((first + i) % count) as usize * size;
        out.extend_from_slice(&data[at..at + size]);
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
        let x = value();
        match input.datatype {
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
    out
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
}
