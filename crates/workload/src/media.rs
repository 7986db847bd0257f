//! Images and audio for chat requests: synthetic media made from the seed,
//! encoded and base64'd before any request's send time, and laid out as
//! the JSON of OpenAI content parts so that writing a body only copies
//! bytes.
//!
//! **Content.** A synthetic image is what a photograph looks like to an
//! encoder: smooth colour fields (a gradient and a few low-frequency waves,
//! drawn from the seed) under fine grain (±3 levels of noise a channel).
//! Pure noise is the worst case for size (PNG cannot compress it at all);
//! a flat image is unrealistically small. This content gives about 1.4
//! bytes a pixel as PNG and about 0.25 as JPEG (quality 85), in the range
//! of photographs.
//!
//! **Every image differs.** A server may cache images (or their encoder
//! output) by content, so an image sent twice would cost nothing the
//! second time. Each image sent differs from every other of the run:
//!
//! - PNG: the first row of pixels spells (seed, request, slot) in noise.
//!   The image is written as three IDAT chunks, the first holding the zlib
//!   header and that row as a stored deflate block, the second the rest of
//!   the image compressed once (it never refers back into the first row),
//!   the third the Adler-32 of the whole. Per request only the first row,
//!   two CRCs and the Adler-32 (combined from the rest's) are computed; the
//!   base64 of the compressed middle is computed once, the pieces cut at
//!   multiples of 3 bytes so their base64 concatenates.
//! - JPEG: a pool of [`JPEG_POOL`] distinct images is encoded once per
//!   point; request `i`'s slot `j` takes image `(i * count + j) mod pool`,
//!   and a comment segment (COM) spelling (request, slot) makes its bytes
//!   unique. Pixels repeat once the pool is used up: a server that caches
//!   by decoded pixels sees at most that many distinct JPEG images.
//! - WAV: every clip is generated whole for its request (a tone sweep under
//!   noise, 16-bit PCM mono), which is cheap next to sending it.
//!
//! Everything is a pure function of (seed, request index), and is built
//! where prompts are: ahead of the send time, by the builder.
//!
//! **Dataset images.** The images a dataset's rows name
//! ([`infer_bench_spec::image`]) are laid out here too, once when the
//! dataset loads ([`DatasetImages`]): each file's data URL is base64'd
//! once and shared by every request that sends it; they go before the
//! text of the message, as LLaVA-style rows place them.

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use infer_bench_spec::media::{Audio, ImageDetail, ImageFormat, ImageSource, Images};

/// Distinct JPEG images encoded per point (see the module docs).
pub const JPEG_POOL: usize = 8;
/// The JPEG quality of synthetic images.
pub const JPEG_QUALITY: u8 = 85;

/// What one request carries besides its text: counted as sent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MediaSent {
    pub images: u32,
    /// Pixels of all its images (0 for URLs: not ours to know).
    pub image_pixels: u64,
    /// Bytes of its image files, before base64 (0 for URLs).
    pub image_bytes: u64,
    pub audio_seconds: f64,
    /// Bytes of its audio files, before base64.
    pub audio_bytes: u64,
}

/// One content part's JSON, in pieces that concatenate to it (a large
/// piece is shared by every request; the small ones are the request's).
#[derive(Clone, PartialEq)]
pub struct Part {
    pieces: Vec<Arc<str>>,
}

impl Part {
    /// Appends the part's JSON to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        for p in &self.pieces {
            out.extend_from_slice(p.as_bytes());
        }
    }

    /// Its JSON's length in bytes.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|p| p.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The media of one request: its content parts, in order (the first
/// `leading` before the text, the others after it), and what they hold.
#[derive(Clone, Default, PartialEq)]
pub struct Media {
    pub parts: Vec<Part>,
    /// How many of `parts` go before the text (a dataset row's images).
    pub leading: usize,
    pub sent: MediaSent,
}

impl Media {
    /// The JSON bytes of its parts together.
    pub fn json_len(&self) -> usize {
        self.parts.iter().map(Part::len).sum()
    }

    /// These parts, then `after`'s after the text.
    pub fn then(&self, after: Media) -> Media {
        let mut parts = self.parts.clone();
        parts.extend(after.parts);
        Media {
            parts,
            leading: self.leading,
            sent: MediaSent {
                images: self.sent.images + after.sent.images,
                image_pixels: self.sent.image_pixels + after.sent.image_pixels,
                image_bytes: self.sent.image_bytes + after.sent.image_bytes,
                audio_seconds: self.sent.audio_seconds + after.sent.audio_seconds,
                audio_bytes: self.sent.audio_bytes + after.sent.audio_bytes,
            },
        }
    }
}

/// The image parts of a dataset, laid out once: one per distinct file
/// (its data URL base64'd once), and a URL's on demand.
pub struct DatasetImages {
    /// Per file: its part, pixels and bytes.
    files: Vec<(Part, u64, u64)>,
}

impl fmt::Debug for DatasetImages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatasetImages")
            .field("files", &self.files.len())
            .finish()
    }
}

/// `{"image_url":{"url":"`
const IMAGE_OPEN: &str = "{\"image_url\":{\"url\":\"";
/// `"},"type":"image_url"}`
const IMAGE_CLOSE: &str = "\"},\"type\":\"image_url\"}";

impl DatasetImages {
    /// Base64s each file (its bytes are dropped as it goes).
    pub fn new(files: Vec<infer_bench_spec::image::ImageFile>) -> DatasetImages {
        let (open, close): (Arc<str>, Arc<str>) = (Arc::from(IMAGE_OPEN), Arc::from(IMAGE_CLOSE));
        DatasetImages {
            files: files
                .into_iter()
                .map(|f| {
                    let mut url = format!("data:{};base64,", f.header.kind.mime());
                    B64.encode_string(&f.bytes, &mut url);
                    let part = Part {
                        pieces: vec![open.clone(), Arc::from(url.as_str()), close.clone()],
                    };
                    let pixels = f.header.width as u64 * f.header.height as u64;
                    (part, pixels, f.len)
                })
                .collect(),
        }
    }

    /// The media of a row that names `images` (files by their index in
    /// the list given to [`DatasetImages::new`]); `None` for none.
    pub fn media(&self, images: &[infer_bench_spec::dataset::ImageRef]) -> Option<Media> {
        use infer_bench_spec::dataset::ImageRef;
        if images.is_empty() {
            return None;
        }
        let mut m = Media::default();
        for i in images {
            match i {
                ImageRef::File(k) => {
                    let (part, pixels, bytes) = self.files.get(*k)?;
                    m.parts.push(part.clone());
                    m.sent.image_pixels += pixels;
                    m.sent.image_bytes += bytes;
                }
                ImageRef::Url(u) => m.parts.push(Part {
                    pieces: vec![
                        Arc::from(IMAGE_OPEN),
                        Arc::from(json_inner(u).as_str()),
                        Arc::from(IMAGE_CLOSE),
                    ],
                }),
                // Every path was read when the dataset loaded.
                ImageRef::Path(_) => return None,
            }
            m.sent.images += 1;
        }
        m.leading = m.parts.len();
        Some(m)
    }
}

/// Sizes only: a data URL has no place in a log or a message.
impl fmt::Debug for Media {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Media")
            .field("parts", &self.parts.len())
            .field("leading", &self.leading)
            .field("json_bytes", &self.json_len())
            .field("sent", &self.sent)
            .finish()
    }
}

/// Makes the media of a workload's requests.
pub struct MediaGen {
    seed: u64,
    images: Option<ImageGen>,
    audio: Option<Audio>,
}

impl fmt::Debug for MediaGen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MediaGen").finish_non_exhaustive()
    }
}

struct ImageGen {
    count: u32,
    /// `{"image_url":{"detail":"high","url":"` or without detail.
    open: Arc<str>,
    /// `"},"type":"image_url"}`
    close: Arc<str>,
    kind: ImageKind,
}

enum ImageKind {
    Png(Box<PngBase>),
    Jpeg {
        pool: Vec<Vec<u8>>,
        width: u32,
        height: u32,
    },
    Urls(Vec<Arc<str>>),
}

impl MediaGen {
    /// The media of `images` and `audio`, from `seed` (the same in every
    /// run of a point); `None` when there are none. Encodes what is
    /// encoded once (PNG's compressed rows, the JPEG pool) now.
    pub fn new(images: Option<&Images>, audio: Option<&Audio>, seed: u64) -> Option<MediaGen> {
        if images.is_none() && audio.is_none() {
            return None;
        }
        let images = images.map(|i| {
            let open = match i.detail {
                Some(d) => format!(
                    "{{\"image_url\":{{\"detail\":\"{}\",\"url\":\"",
                    detail_name(d)
                ),
                None => "{\"image_url\":{\"url\":\"".to_string(),
            };
            let kind = match &i.source {
                ImageSource::Synthetic {
                    width,
                    height,
                    format: ImageFormat::Png,
                } => ImageKind::Png(Box::new(PngBase::new(*width, *height, seed))),
                ImageSource::Synthetic {
                    width,
                    height,
                    format: ImageFormat::Jpeg,
                } => ImageKind::Jpeg {
                    pool: (0..JPEG_POOL as u64)
                        .map(|k| jpeg(*width, *height, mix(seed, k)))
                        .collect(),
                    width: *width,
                    height: *height,
                },
                ImageSource::Urls(urls) => ImageKind::Urls(
                    urls.iter()
                        .map(|u| Arc::from(json_inner(u).as_str()))
                        .collect(),
                ),
            };
            ImageGen {
                count: i.count,
                open: Arc::from(open.as_str()),
                close: Arc::from("\"},\"type\":\"image_url\"}"),
                kind,
            }
        });
        Some(MediaGen {
            seed,
            images,
            audio: audio.cloned(),
        })
    }

    /// The media of request `index`.
    pub fn media(&self, index: u64) -> Media {
        let mut m = Media::default();
        if let Some(g) = &self.images {
            for slot in 0..g.count {
                let n = index.wrapping_mul(g.count as u64).wrapping_add(slot as u64);
                let mut pieces = vec![g.open.clone()];
                match &g.kind {
                    ImageKind::Png(base) => {
                        let (pre, mid, tail, bytes) = base.instance(mix(self.seed, n));
                        pieces.push(Arc::from(format!("data:image/png;base64,{pre}")));
                        pieces.push(mid);
                        pieces.push(Arc::from(tail.as_str()));
                        m.sent.image_bytes += bytes as u64;
                        m.sent.image_pixels += base.width as u64 * base.height as u64;
                    }
                    ImageKind::Jpeg {
                        pool,
                        width,
                        height,
                    } => {
                        let img = &pool[(n % pool.len() as u64) as usize];
                        let bytes = with_comment(img, n);
                        pieces.push(Arc::from(format!(
                            "data:image/jpeg;base64,{}",
                            B64.encode(&bytes)
                        )));
                        m.sent.image_bytes += bytes.len() as u64;
                        m.sent.image_pixels += *width as u64 * *height as u64;
                    }
                    ImageKind::Urls(urls) => {
                        pieces.push(urls[(n % urls.len() as u64) as usize].clone());
                    }
                }
                pieces.push(g.close.clone());
                m.parts.push(Part { pieces });
                m.sent.images += 1;
            }
        }
        if let Some(a) = &self.audio {
            let wav = wav(a, mix(self.seed ^ 0x6175_6469_6f00, index));
            let json = format!(
                "{{\"input_audio\":{{\"data\":\"{}\",\"format\":\"{}\"}},\"type\":\"input_audio\"}}",
                B64.encode(&wav),
                a.format.name()
            );
            m.parts.push(Part {
                pieces: vec![Arc::from(json.as_str())],
            });
            m.sent.audio_seconds += a.seconds;
            m.sent.audio_bytes += wav.len() as u64;
        }
        m
    }
}

fn detail_name(d: ImageDetail) -> &'static str {
    d.name()
}

/// A string's JSON encoding without its quotes.
fn json_inner(s: &str) -> String {
    let q = serde_json_escape(s);
    q[1..q.len() - 1].to_string()
}

fn serde_json_escape(s: &str) -> String {
    // The workload crate has no serde_json: escape as JSON does.
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// SplitMix64 of `seed` and `n`: a well-mixed 64-bit value.
fn mix(seed: u64, n: u64) -> u64 {
    let mut z = seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A fast generator for noise bytes.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `width` x `height` RGB pixels that look like a photograph to an
/// encoder (see the module docs), from `seed`.
pub fn photo(width: u32, height: u32, seed: u64) -> Vec<u8> {
    let (w, h) = (width as usize, height as usize);
    let mut noise = Noise(mix(seed, 0x5eed) | 1);
    // Per channel: a base level, a gradient and two waves along each axis,
    // tabulated per column and per row (the image is their sum).
    let mut fx = vec![[0f32; 3]; w];
    let mut fy = vec![[0f32; 3]; h];
    for c in 0..3 {
        let r = |k: u64| (mix(seed, 16 + c as u64 * 8 + k) >> 11) as f32 / (1u64 << 53) as f32;
        let base = 40.0 + 170.0 * r(0);
        let (gx, gy) = (60.0 * (r(1) - 0.5), 60.0 * (r(2) - 0.5));
        let (ax, ay) = (30.0 * r(3), 30.0 * r(4));
        let (kx, ky) = (1.0 + 6.0 * r(5), 1.0 + 6.0 * r(6));
        let phase = std::f32::consts::TAU * r(7);
        for (x, v) in fx.iter_mut().enumerate() {
            let t = x as f32 / w.max(1) as f32;
            v[c] = base + gx * t + ax * (std::f32::consts::TAU * kx * t + phase).sin();
        }
        for (y, v) in fy.iter_mut().enumerate() {
            let t = y as f32 / h.max(1) as f32;
            v[c] = gy * t + ay * (std::f32::consts::TAU * ky * t).sin();
        }
    }
    let mut out = Vec::with_capacity(w * h * 3);
    for row in &fy {
        let mut bits = 0u64;
        let mut left = 0;
        for col in &fx {
            for c in 0..3 {
                if left == 0 {
                    bits = noise.next();
                    left = 21;
                }
                // Three bits of noise: -3..=4.
                let n = (bits & 7) as f32 - 3.0;
                bits >>= 3;
                left -= 1;
                out.push((col[c] + row[c] + n).clamp(0.0, 255.0) as u8);
            }
        }
    }
    out
}

/// A PNG laid out so that its first row can change per request cheaply
/// (see the module docs).
struct PngBase {
    width: u32,
    height: u32,
    /// Signature and IHDR.
    head: Vec<u8>,
    /// The second IDAT chunk whole (length, type, data, CRC).
    middle: Vec<u8>,
    /// Adler-32 of the rows after the first, and their length.
    rest_adler: u32,
    rest_len: u64,
    /// The base64 of the bytes of the file from `cut_a` to `cut_b` (both
    /// multiples of 3), shared by every instance.
    mid_b64: Arc<str>,
    cut_a: usize,
    cut_b: usize,
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// Adler-32 of `data`, continued from `a`.
fn adler32(a: u32, data: &[u8]) -> u32 {
    const M: u32 = 65521;
    let (mut s1, mut s2) = (a & 0xffff, a >> 16);
    for block in data.chunks(5552) {
        for &b in block {
            s1 += b as u32;
            s2 += s1;
        }
        s1 %= M;
        s2 %= M;
    }
    (s2 << 16) | s1
}

/// The Adler-32 of `A ++ B` from those of `A` and `B` and B's length
/// (zlib's `adler32_combine`).
fn adler32_combine(a1: u32, a2: u32, len2: u64) -> u32 {
    const M: u64 = 65521;
    let rem = len2 % M;
    let s1a = (a1 & 0xffff) as u64;
    let s2a = (a1 >> 16) as u64;
    let s1b = (a2 & 0xffff) as u64;
    let s2b = (a2 >> 16) as u64;
    let mut sum1 = s1a + s1b + M - 1;
    let mut sum2 = (rem * s1a) % M + s2a + s2b + M - rem;
    sum1 %= M;
    sum2 %= M;
    ((sum2 << 16) | sum1) as u32
}

impl PngBase {
    fn new(width: u32, height: u32, seed: u64) -> PngBase {
        let px = photo(width, height, seed);
        let stride = width as usize * 3;
        // Rows after the first, each with the Sub filter (what an encoder
        // would pick for smooth content).
        let mut rest = Vec::with_capacity((stride + 1) * height.saturating_sub(1) as usize);
        for row in px.chunks(stride).skip(1) {
            rest.push(1u8);
            for i in 0..stride {
                let left = if i >= 3 { row[i - 3] } else { 0 };
                rest.push(row[i].wrapping_sub(left));
            }
        }
        let rest_adler = adler32(1, &rest);
        let deflated = miniz_oxide::deflate::compress_to_vec(&rest, 6);
        let mut head = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut ihdr = Vec::with_capacity(13);
        ihdr.extend_from_slice(&width.to_be_bytes());
        ihdr.extend_from_slice(&height.to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
        chunk(&mut head, b"IHDR", &ihdr);
        let mut middle = Vec::new();
        chunk(&mut middle, b"IDAT", &deflated);
        // The first IDAT: zlib header, a stored block's 5 bytes, the row.
        let first_len = 12 + 2 + 5 + 1 + stride;
        let start_mid = head.len() + first_len;
        let cut_a = start_mid.div_ceil(3) * 3;
        let end_mid = start_mid + middle.len();
        let cut_b = end_mid / 3 * 3;
        let mid_b64 = B64.encode(&middle[cut_a - start_mid..cut_b - start_mid]);
        PngBase {
            width,
            height,
            head,
            middle,
            rest_adler,
            rest_len: rest.len() as u64,
            mid_b64: Arc::from(mid_b64.as_str()),
            cut_a,
            cut_b,
        }
    }

    /// The whole file of the instance whose first row is noise from
    /// `seed` (tests; the body is made from [`PngBase::instance`]).
    #[cfg(test)]
    fn file(&self, seed: u64) -> Vec<u8> {
        let (a, b) = self.ends(seed);
        let mut f = a;
        f.extend_from_slice(&self.middle);
        f.extend_from_slice(&b);
        f
    }

    /// The bytes before the middle chunk and after it.
    fn ends(&self, seed: u64) -> (Vec<u8>, Vec<u8>) {
        let stride = self.width as usize * 3;
        let mut row = Vec::with_capacity(stride + 1);
        row.push(0u8);
        let mut noise = Noise(seed | 1);
        while row.len() < stride + 1 {
            for b in noise.next().to_le_bytes() {
                if row.len() < stride + 1 {
                    row.push(b);
                }
            }
        }
        let mut first = vec![0x78, 0x01, 0x00];
        first.extend_from_slice(&(row.len() as u16).to_le_bytes());
        first.extend_from_slice(&(!(row.len() as u16)).to_le_bytes());
        first.extend_from_slice(&row);
        let mut a = self.head.clone();
        chunk(&mut a, b"IDAT", &first);
        let adler = adler32_combine(adler32(1, &row), self.rest_adler, self.rest_len);
        let mut b = Vec::with_capacity(28);
        chunk(&mut b, b"IDAT", &adler.to_be_bytes());
        chunk(&mut b, b"IEND", &[]);
        (a, b)
    }

    /// The instance from `seed`: the base64 of its file in three pieces
    /// (the first without the data URL's head), and its size in bytes.
    fn instance(&self, seed: u64) -> (String, Arc<str>, String, usize) {
        let (a, b) = self.ends(seed);
        let start_mid = a.len();
        let mut pre = a;
        pre.extend_from_slice(&self.middle[..self.cut_a - start_mid]);
        let mut tail = self.middle[self.cut_b - start_mid..].to_vec();
        tail.extend_from_slice(&b);
        let total = start_mid + self.middle.len() + b.len();
        (
            B64.encode(&pre),
            self.mid_b64.clone(),
            B64.encode(&tail),
            total,
        )
    }
}

/// A JPEG of [`photo`] content, quality [`JPEG_QUALITY`], 4:2:0.
fn jpeg(width: u32, height: u32, seed: u64) -> Vec<u8> {
    let px = photo(width, height, seed);
    let mut out = Vec::new();
    let enc = jpeg_encoder::Encoder::new(&mut out, JPEG_QUALITY);
    // Sides are capped at 8192 by the spec, within JPEG's 65535.
    let _ = enc.encode(
        &px,
        width as u16,
        height as u16,
        jpeg_encoder::ColorType::Rgb,
    );
    out
}

/// `img` with a comment segment naming image `n` after its SOI marker.
fn with_comment(img: &[u8], n: u64) -> Vec<u8> {
    let text = format!("infer-bench image {n:016x}");
    let mut out = Vec::with_capacity(img.len() + text.len() + 4);
    out.extend_from_slice(&img[..2]);
    out.extend_from_slice(&[0xff, 0xfe]);
    out.extend_from_slice(&((text.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&img[2..]);
    out
}

/// A WAV file of `a.seconds` at `a.sample_rate`: 16-bit PCM mono, a tone
/// sweep under noise, from `seed`.
pub fn wav(a: &Audio, seed: u64) -> Vec<u8> {
    let n = (a.seconds * a.sample_rate as f64).round() as usize;
    let data_len = n * 2;
    let mut out = Vec::with_capacity(44 + data_len);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&((36 + data_len) as u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&a.sample_rate.to_le_bytes());
    out.extend_from_slice(&(a.sample_rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(data_len as u32).to_le_bytes());
    let mut noise = Noise(seed | 1);
    let f0 = 150.0 + (seed % 300) as f64;
    let rate = a.sample_rate as f64;
    let mut phase = 0.0f64;
    for i in 0..n {
        let t = i as f64 / rate;
        phase += std::f64::consts::TAU * (f0 + 200.0 * (t * 0.5).sin()) / rate;
        let v = 6000.0 * phase.sin() + ((noise.next() >> 52) as f64 - 2048.0);
        out.extend_from_slice(&(v as i16).to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn images(count: u32, w: u32, h: u32, format: ImageFormat) -> Images {
        Images {
            count,
            source: ImageSource::Synthetic {
                width: w,
                height: h,
                format,
            },
            detail: Some(ImageDetail::High),
        }
    }

    fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let d = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut r = d.read_info().unwrap();
        let mut buf = vec![0; r.output_buffer_size().unwrap()];
        let info = r.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    /// The data URL inside a part's JSON, decoded.
    fn payload(p: &Part) -> Vec<u8> {
        let mut json = Vec::new();
        p.write_to(&mut json);
        let s = String::from_utf8(json).unwrap();
        let b64 = s
            .split("base64,")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        B64.decode(b64).unwrap()
    }

    #[test]
    fn png_instances_decode_whole_and_differ() {
        for (w, h) in [(1, 1), (3, 2), (17, 5), (64, 48)] {
            let g = MediaGen::new(Some(&images(2, w, h, ImageFormat::Png)), None, 7).unwrap();
            let m = g.media(3);
            assert_eq!(m.sent.images, 2);
            assert_eq!(m.sent.image_pixels, 2 * w as u64 * h as u64);
            let files: Vec<Vec<u8>> = m.parts.iter().map(payload).collect();
            assert_eq!(
                m.sent.image_bytes,
                files.iter().map(|f| f.len() as u64).sum::<u64>()
            );
            let mut pixels = Vec::new();
            for f in &files {
                let (dw, dh, px) = decode_png(f);
                assert_eq!((dw, dh), (w, h));
                assert_eq!(px.len(), (w * h * 3) as usize);
                pixels.push(px);
            }
            assert_ne!(pixels[0], pixels[1], "two slots of a request differ");
            let again = g.media(3);
            assert_eq!(again, m, "the same index gives the same bytes");
            assert_ne!(payload(&g.media(4).parts[0]), files[0]);
            // The rows after the first are the photo's.
            let base = photo(w, h, 7);
            let stride = (w * 3) as usize;
            assert_eq!(pixels[0][stride..], base[stride..]);
        }
    }

    #[test]
    fn png_file_and_its_pieces_agree() {
        let b = PngBase::new(40, 30, 1);
        let (pre, mid, tail, n) = b.instance(9);
        let joined = format!("{pre}{mid}{tail}");
        let file = b.file(9);
        assert_eq!(B64.decode(joined).unwrap(), file);
        assert_eq!(n, file.len());
    }

    #[test]
    fn photo_sized_images_compress_like_photographs() {
        let b = PngBase::new(256, 256, 3);
        let per_pixel = b.file(0).len() as f64 / (256.0 * 256.0);
        assert!((0.8..2.5).contains(&per_pixel), "{per_pixel} bytes a pixel");
        let j = jpeg(256, 256, 3);
        let per_pixel = j.len() as f64 / (256.0 * 256.0);
        assert!(
            (0.05..0.8).contains(&per_pixel),
            "{per_pixel} bytes a pixel"
        );
    }

    #[test]
    fn jpegs_and_wavs_have_their_headers() {
        let g = MediaGen::new(
            Some(&images(1, 33, 20, ImageFormat::Jpeg)),
            Some(&Audio {
                seconds: 0.5,
                format: Default::default(),
                sample_rate: 16_000,
            }),
            5,
        )
        .unwrap();
        let m = g.media(0);
        assert_eq!(m.parts.len(), 2);
        let j = payload(&m.parts[0]);
        assert_eq!(&j[..4], &[0xff, 0xd8, 0xff, 0xfe]);
        assert_ne!(j, payload(&g.media(1).parts[0]));
        let mut json = Vec::new();
        m.parts[1].write_to(&mut json);
        let s = String::from_utf8(json).unwrap();
        let data = s
            .split("\"data\":\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let wav = B64.decode(data).unwrap();
        assert_eq!(&wav[..4], b"RIFF");
        assert_eq!(wav.len(), 44 + 8000 * 2);
        assert_eq!(m.sent.audio_bytes, wav.len() as u64);
        assert_eq!(m.sent.audio_seconds, 0.5);
    }

    #[test]
    fn urls_go_in_turn_escaped() {
        let i = Images {
            count: 3,
            source: ImageSource::Urls(vec!["https://a/1.png".into(), "https://a/\"2\".png".into()]),
            detail: None,
        };
        let m = MediaGen::new(Some(&i), None, 1).unwrap().media(0);
        let texts: Vec<String> = m
            .parts
            .iter()
            .map(|p| {
                let mut v = Vec::new();
                p.write_to(&mut v);
                String::from_utf8(v).unwrap()
            })
            .collect();
        assert_eq!(
            texts[1],
            r#"{"image_url":{"url":"https://a/\"2\".png"},"type":"image_url"}"#
        );
        assert!(texts[2].contains("https://a/1.png"));
        assert_eq!(m.sent.image_bytes, 0);
        assert!(
            !format!("{m:?}").contains("https"),
            "Debug shows sizes only"
        );
    }
}
