//! HDR histograms as the tool keeps them: latencies in microseconds and
//! token counts, 3 significant digits, auto-resizing; summaries in the
//! metric's reporting unit; and the compact text form (V2 + deflate,
//! base64) that results and baselines store, so any percentile can be
//! recomputed later and histograms merge exactly across runs and machines.

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::HistError;

/// A histogram of u64 values (µs for latencies).
pub type Hist = Histogram<u64>;

pub fn new_hist() -> Hist {
    Histogram::new(3).expect("3 significant digits is valid")
}

/// The statistics every distribution reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub count: u64,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    #[serde(rename = "p99.9")]
    pub p999: f64,
}

impl Summary {
    /// Summarizes a histogram, dividing every value by `scale` (1000 turns
    /// µs into ms).
    pub fn of(h: &Hist, scale: f64) -> Summary {
        if h.is_empty() {
            return Summary::default();
        }
        let q = |p: f64| h.value_at_quantile(p) as f64 / scale;
        Summary {
            count: h.len(),
            mean: h.mean() / scale,
            std: h.stdev() / scale,
            min: h.min() as f64 / scale,
            max: h.max() as f64 / scale,
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
        }
    }

    /// Whether `stat` is one that a summary stores (what a run keeps):
    /// mean, min, max, std, p50, p90, p95, p99 and p99.9.
    pub fn keeps(stat: &crate::metric::Stat) -> bool {
        use crate::metric::Stat;
        match stat {
            Stat::Percentile(p) => [50.0, 90.0, 95.0, 99.0, 99.9].contains(p),
            _ => true,
        }
    }

    /// A named statistic, if it is one of the stored ones.
    pub fn get(&self, stat: &crate::metric::Stat) -> Option<f64> {
        use crate::metric::Stat;
        if self.count == 0 {
            return None;
        }
        Some(match stat {
            Stat::Mean => self.mean,
            Stat::Min => self.min,
            Stat::Max => self.max,
            Stat::Std => self.std,
            Stat::Percentile(p) => match *p {
                50.0 => self.p50,
                90.0 => self.p90,
                95.0 => self.p95,
                99.0 => self.p99,
                99.9 => self.p999,
                _ => return None,
            },
        })
    }
}

/// Any statistic of a histogram, in the scaled unit.
pub fn stat_of(h: &Hist, stat: &crate::metric::Stat, scale: f64) -> Option<f64> {
    use crate::metric::Stat;
    if h.is_empty() {
        return None;
    }
    Some(match stat {
        Stat::Mean => h.mean() / scale,
        Stat::Min => h.min() as f64 / scale,
        Stat::Max => h.max() as f64 / scale,
        Stat::Std => h.stdev() / scale,
        Stat::Percentile(p) => h.value_at_quantile(p / 100.0) as f64 / scale,
    })
}

/// Histogram -> base64 of its V2+deflate serialization.
pub fn encode(h: &Hist) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .expect("serializing to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

/// The most counts a histogram read from a file may declare: its range
/// and precision (lowest and highest trackable value, significant digits)
/// fix the length of its counts array, and one longer than this is refused
/// before anything is allocated. The tool's own histograms (3 digits,
/// auto-resizing) need at most 56,320 counts, whatever they hold; 2^20
/// (8 MiB of u64 counts) also fits 4 digits over the whole u64 range.
pub const MAX_COUNTS: u64 = 1 << 20;

/// The most bytes one count takes in a V2 payload (zig-zag LEB128, 9 bytes
/// at most); runs of zeros take fewer. A payload longer than its counts
/// array times this is refused: it cannot be a histogram of that range.
pub const MAX_BYTES_PER_COUNT: u64 = 9;

/// The V2 cookies (hdrhistogram's serialization, word size 8).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// A V2 header: cookie, payload length, normalizing offset, significant
/// digits (4 bytes each), lowest and highest trackable value (8 each) and
/// the integer-to-double ratio (an f64).
const V2_HEADER: usize = 40;

/// What a V2 header declares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    pub payload_len: u64,
    pub digits: u32,
    pub low: u64,
    pub high: u64,
}

impl Header {
    fn parse(b: &[u8; V2_HEADER]) -> Result<Header, HistError> {
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let cookie = u32_at(0);
        if cookie != V2_COOKIE {
            return Err(HistError::Cookie(cookie));
        }
        let header = Header {
            payload_len: u64::from(u32_at(4)),
            digits: u32_at(12),
            low: u64_at(16),
            high: u64_at(24),
        };
        let counts = header.counts()?;
        if counts > MAX_COUNTS {
            return Err(HistError::TooManyCounts {
                counts,
                limit: MAX_COUNTS,
            });
        }
        let most = counts * MAX_BYTES_PER_COUNT;
        if header.payload_len > most {
            return Err(HistError::PayloadTooLong {
                declared: header.payload_len,
                most,
                counts,
            });
        }
        Ok(header)
    }

    /// The length of the counts array this range and precision need,
    /// computed as `Histogram::new_with_bounds` does (without allocating
    /// it); an error where it would refuse them.
    pub fn counts(&self) -> Result<u64, HistError> {
        let invalid = || HistError::Range {
            low: self.low,
            high: self.high,
            digits: self.digits,
        };
        let (low, high) = (self.low, self.high);
        if !(1..=u64::MAX / 2).contains(&low) || high < 2 * low || self.digits > 5 {
            return Err(invalid());
        }
        let largest = 2 * 10_u32.pow(self.digits);
        let unit_magnitude = (low as f64).log2().floor() as u32;
        let sub_bucket_count_magnitude = f64::from(largest).log2().ceil() as u32;
        if unit_magnitude + sub_bucket_count_magnitude > 63 {
            return Err(invalid());
        }
        let sub_bucket_count = 1_u64 << sub_bucket_count_magnitude;
        let mut smallest_untrackable = sub_bucket_count << unit_magnitude;
        let mut buckets = 1_u64;
        while smallest_untrackable <= high {
            if smallest_untrackable > u64::MAX / 2 {
                buckets += 1;
                break;
            }
            smallest_untrackable <<= 1;
            buckets += 1;
        }
        Ok((buckets + 1) * (sub_bucket_count / 2))
    }
}

/// The V2 (uncompressed) serialization inside a histogram's text, its
/// header checked before anything it declares is allocated: base64, then
/// the V2+deflate wrapper (cookie, length, zlib stream) inflated through a
/// bounded reader, so neither a declared length nor a zip bomb can make it
/// larger than its range and precision need (see `MAX_COUNTS`).
fn v2_bytes(s: &str) -> Result<(Header, Vec<u8>), HistError> {
    use std::io::Read as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(HistError::Base64)?;
    let word = |i: usize| {
        bytes
            .get(i..i + 4)
            .map(|w| u32::from_be_bytes(w.try_into().expect("4 bytes")))
            .ok_or(HistError::Short)
    };
    let mut head = [0u8; V2_HEADER];
    match word(0)? {
        V2_COMPRESSED_COOKIE => {
            let len = word(4)? as usize;
            let compressed = bytes.get(8..).unwrap_or_default();
            let compressed = &compressed[..len.min(compressed.len())];
            let mut inflate = flate2::bufread::ZlibDecoder::new(compressed);
            inflate.read_exact(&mut head).map_err(HistError::Inflate)?;
            let header = Header::parse(&head)?;
            let mut v2 = Vec::with_capacity(V2_HEADER + header.payload_len as usize);
            v2.extend_from_slice(&head);
            inflate
                .take(header.payload_len)
                .read_to_end(&mut v2)
                .map_err(HistError::Inflate)?;
            if v2.len() < V2_HEADER + header.payload_len as usize {
                return Err(HistError::Short);
            }
            Ok((header, v2))
        }
        V2_COOKIE => {
            let first = bytes.get(..V2_HEADER).ok_or(HistError::Short)?;
            head.copy_from_slice(first);
            let header = Header::parse(&head)?;
            if (bytes.len() - V2_HEADER) < header.payload_len as usize {
                return Err(HistError::Short);
            }
            Ok((header, bytes))
        }
        other => Err(HistError::Cookie(other)),
    }
}

/// The inverse of `encode`, for text from outside: the header is checked
/// and the payload inflated within its bound (see `v2_bytes`) before
/// hdrhistogram allocates anything, so a hostile histogram is an error,
/// never an allocation of what it declares.
pub fn decode(s: &str) -> Result<Hist, HistError> {
    let (_, v2) = v2_bytes(s)?;
    let mut h: Hist = Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(v2))
        .map_err(HistError::Histogram)?;
    h.auto(true);
    Ok(h)
}

/// Checks a histogram's text as `decode` reads it (base64, wrapper,
/// header, bounds, a payload as long as it declares) without building the
/// histogram: what a file's reader checks of every histogram it holds, so
/// that a bad one is an error of the file, whichever command reads it.
pub fn check(s: &str) -> Result<Header, HistError> {
    v2_bytes(s).map(|(header, _)| header)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write as _;

    /// A V2 header: cookie, payload length, normalizing offset, digits,
    /// lowest and highest trackable value, integer-to-double ratio.
    fn header(payload: u32, digits: u32, low: u64, high: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(V2_COOKIE.to_be_bytes());
        b.extend(payload.to_be_bytes());
        b.extend(0u32.to_be_bytes());
        b.extend(digits.to_be_bytes());
        b.extend(low.to_be_bytes());
        b.extend(high.to_be_bytes());
        b.extend(1.0f64.to_be_bytes());
        b
    }

    /// The text of a V2+deflate histogram whose uncompressed serialization
    /// is `v2`.
    fn wrapped(v2: &[u8]) -> String {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(v2).unwrap();
        let z = z.finish().unwrap();
        let mut b = Vec::new();
        b.extend(V2_COMPRESSED_COOKIE.to_be_bytes());
        b.extend((z.len() as u32).to_be_bytes());
        b.extend(z);
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    /// A small histogram text (~100 bytes) that declares a payload of
    /// `payload` bytes for a 3-digit range of 1 to 2048: what a hostile
    /// file holds to make its reader allocate gigabytes.
    pub(crate) fn hostile(payload: u32) -> String {
        let mut v2 = header(payload, 3, 1, 2048);
        v2.extend([2u8; 16]);
        wrapped(&v2)
    }

    #[test]
    fn a_declared_payload_past_what_the_range_needs_is_refused_unallocated() {
        for payload in [0xC000_0000, u32::MAX, 27_649] {
            let err = decode(&hostile(payload)).unwrap_err();
            assert!(
                matches!(err, HistError::PayloadTooLong { declared, most: 27_648, counts: 3072 } if declared == u64::from(payload)),
                "{err}"
            );
            assert!(err.to_string().contains(&payload.to_string()), "{err}");
        }
        // Within the bound but longer than the bytes: it ends early.
        assert!(matches!(decode(&hostile(27_648)), Err(HistError::Short)));
    }

    #[test]
    fn the_counts_a_header_declares_are_what_hdrhistogram_allocates() {
        for digits in 0..=5u8 {
            for low in [1u64, 2, 3, 1000, 1 << 20, (1 << 40) + 7] {
                for high in [2 * low, 2 * low + 1, 1 << 41, u64::MAX / 3, u64::MAX] {
                    let Ok(h) = Hist::new_with_bounds(low, high, digits) else {
                        continue;
                    };
                    let header = Header {
                        payload_len: 0,
                        digits: u32::from(digits),
                        low,
                        high,
                    };
                    assert_eq!(
                        header.counts().unwrap(),
                        h.distinct_values() as u64,
                        "{low} {high} {digits}"
                    );
                }
            }
        }
        // The tool's own histograms fit, whatever they hold.
        let ours = Header {
            payload_len: 0,
            digits: 3,
            low: 1,
            high: u64::MAX,
        };
        assert_eq!(ours.counts().unwrap(), 56_320);
    }

    #[test]
    fn a_range_too_wide_or_impossible_is_refused() {
        let v2 = header(100, 5, 1, u64::MAX);
        let err = decode(&wrapped(&v2)).unwrap_err();
        assert!(
            matches!(
                err,
                HistError::TooManyCounts {
                    limit: MAX_COUNTS,
                    ..
                }
            ),
            "{err}"
        );
        for (digits, low, high) in [
            (3, 0, 100),
            (6, 1, 100),
            (3, 10, 15),
            (5, 1 << 60, u64::MAX),
        ] {
            let err = decode(&wrapped(&header(0, digits, low, high))).unwrap_err();
            assert!(matches!(err, HistError::Range { .. }), "{err}");
        }
    }

    #[test]
    fn a_zip_bomb_inflates_only_as_far_as_its_declared_payload() {
        // 64 MiB of zeros (a few KiB compressed) behind a header that
        // declares the most its range allows: inflated no further.
        let most = 27_648u32;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&header(most, 3, 1, 2048)).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            z.write_all(&zeros).unwrap();
        }
        let z = z.finish().unwrap();
        assert!(z.len() < 1 << 20);
        let mut b = Vec::new();
        b.extend(V2_COMPRESSED_COOKIE.to_be_bytes());
        b.extend((z.len() as u32).to_be_bytes());
        b.extend(z);
        let text = base64::engine::general_purpose::STANDARD.encode(b);
        let (header, v2) = v2_bytes(&text).unwrap();
        assert_eq!(header.payload_len, u64::from(most));
        assert_eq!(v2.len(), V2_HEADER + most as usize);
        // Zeros are empty counts: a histogram, and an empty one.
        assert!(decode(&text).unwrap().is_empty());
    }

    #[test]
    fn broken_texts_are_errors() {
        let good = encode(&new_hist());
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&good)
            .unwrap();
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        assert!(matches!(decode("not base64!"), Err(HistError::Base64(_))));
        assert!(matches!(decode(&b64(&bytes[..6])), Err(HistError::Short)));
        assert!(matches!(
            decode(&b64(&[1, 2, 3, 4, 5])),
            Err(HistError::Cookie(0x0102_0304))
        ));
        assert!(matches!(
            decode(&b64(&bytes[..bytes.len() / 2])),
            Err(HistError::Inflate(_) | HistError::Short)
        ));
        let mut flipped = bytes.clone();
        flipped[10] ^= 0xff;
        assert!(decode(&b64(&flipped)).is_err());
    }

    #[test]
    fn uncompressed_v2_reads_too() {
        use hdrhistogram::serialization::V2Serializer;
        let mut h = new_hist();
        for v in [1u64, 10, 100, 100_000] {
            h.record(v).unwrap();
        }
        let mut buf = Vec::new();
        V2Serializer::new().serialize(&h, &mut buf).unwrap();
        let text = base64::engine::general_purpose::STANDARD.encode(&buf);
        assert_eq!(decode(&text).unwrap(), h);
        // Cut short: the payload it declares is not there.
        let cut = base64::engine::general_purpose::STANDARD.encode(&buf[..buf.len() - 1]);
        assert!(matches!(decode(&cut), Err(HistError::Short)));
    }

    #[test]
    fn round_trips_and_summarizes() {
        let mut h = new_hist();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back, h);
        let s = Summary::of(&h, 1000.0);
        assert_eq!(s.count, 1000);
        assert!((s.p50 - 500.0).abs() <= 0.5, "{}", s.p50);
        assert!((s.p99 - 990.0).abs() <= 1.0, "{}", s.p99);
        assert!(
            (s.max - 1000.0).abs() <= 1.0,
            "3 significant digits: {}",
            s.max
        );
        assert!((s.mean - 500.5).abs() < 0.5);
    }

    #[test]
    fn histograms_merge_exactly() {
        let (mut a, mut b, mut all) = (new_hist(), new_hist(), new_hist());
        for v in 0..500u64 {
            a.record(v).unwrap();
            all.record(v).unwrap();
        }
        for v in 500..2000u64 {
            b.record(v * 7).unwrap();
            all.record(v * 7).unwrap();
        }
        a.add(&b).unwrap();
        assert_eq!(a, all);
    }
}
