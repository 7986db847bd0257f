//! What the scripted server makes of the images and audio in a chat
//! request's content parts: each data URL's base64 decoded, a PNG decoded
//! whole (every pixel), a JPEG's and a WAV's headers read, so that a test
//! can hold what was sent to the spec exactly. A URL that is not a data
//! URL is recorded as it is, never fetched.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;

use crate::error::BadRequest;

/// One image or audio clip as received.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedMedia {
    /// "png", "jpeg" or "url" for an image; "wav" for audio.
    pub format: String,
    /// `image_url.detail`, where given.
    pub detail: Option<String>,
    /// An image URL that is not a data URL, as sent.
    pub url: Option<String>,
    pub width: u32,
    pub height: u32,
    /// Bytes of the file after base64 decoding.
    pub bytes: usize,
    /// Audio: samples per second and length.
    pub sample_rate: u32,
    pub seconds: f64,
    /// A hash of the decoded pixels (PNG) or the file's bytes (JPEG,
    /// WAV): equal media hash equal.
    pub content_hash: u64,
    /// A hash of the file's bytes after base64 decoding ([`fnv`]; 0 for a
    /// URL).
    pub file_hash: u64,
    /// Whether the part came before its message's text part.
    pub before_text: bool,
}

impl ReceivedMedia {
    pub fn is_image(&self) -> bool {
        self.format != "wav"
    }
}

fn bad(what: impl Into<String>) -> BadRequest {
    BadRequest::Media(what.into())
}

/// FNV-1a of `data`: the hashes of [`ReceivedMedia`].
pub fn fnv(data: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in data {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// Every media part of every message of a chat body's `messages`.
pub fn read(messages: Option<&Value>) -> Result<Vec<ReceivedMedia>, BadRequest> {
    let mut out = Vec::new();
    let Some(Value::Array(messages)) = messages else {
        return Ok(out);
    };
    for m in messages {
        let Some(Value::Array(parts)) = m.get("content") else {
            continue;
        };
        let mut text_seen = false;
        for p in parts {
            let first = out.len();
            match p.get("type").and_then(Value::as_str) {
                Some("image_url") => out.push(image(p.get("image_url"))?),
                Some("input_audio") => out.push(audio(p.get("input_audio"))?),
                Some("text") => text_seen = true,
                other => return Err(bad(format!("unknown content part type {other:?}"))),
            }
            for m in &mut out[first..] {
                m.before_text = !text_seen;
            }
        }
    }
    Ok(out)
}

fn image(v: Option<&Value>) -> Result<ReceivedMedia, BadRequest> {
    let url = v
        .and_then(|v| v.get("url"))
        .and_then(Value::as_str)
        .ok_or_else(|| bad("image_url.url must be a string"))?;
    let detail = v
        .and_then(|v| v.get("detail"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut r = ReceivedMedia {
        format: String::new(),
        detail,
        url: None,
        width: 0,
        height: 0,
        bytes: 0,
        sample_rate: 0,
        seconds: 0.0,
        content_hash: 0,
        file_hash: 0,
        before_text: false,
    };
    let Some(rest) = url.strip_prefix("data:") else {
        r.format = "url".into();
        r.url = Some(url.to_owned());
        r.content_hash = fnv(url.as_bytes());
        return Ok(r);
    };
    let (media_type, data) = rest
        .split_once(";base64,")
        .ok_or_else(|| bad("a data URL must be base64"))?;
    let file = B64
        .decode(data)
        .map_err(|e| bad(format!("image data URL: bad base64: {e}")))?;
    r.bytes = file.len();
    r.file_hash = fnv(&file);
    match media_type {
        "image/png" => {
            let d = png::Decoder::new(std::io::Cursor::new(&file));
            let mut reader = d.read_info().map_err(|e| bad(format!("PNG header: {e}")))?;
            let size = reader
                .output_buffer_size()
                .ok_or_else(|| bad("PNG too large"))?;
            let mut buf = vec![0; size];
            let info = reader
                .next_frame(&mut buf)
                .map_err(|e| bad(format!("PNG data: {e}")))?;
            buf.truncate(info.buffer_size());
            r.format = "png".into();
            (r.width, r.height) = (info.width, info.height);
            r.content_hash = fnv(&buf);
        }
        "image/jpeg" => {
            (r.width, r.height) = jpeg_size(&file)?;
            r.format = "jpeg".into();
            r.content_hash = fnv(&file);
        }
        other => return Err(bad(format!("unsupported image type {other}"))),
    }
    Ok(r)
}

/// A JPEG's size from its frame header; it must start with SOI and end
/// with EOI.
fn jpeg_size(f: &[u8]) -> Result<(u32, u32), BadRequest> {
    if f.len() < 4 || f[..2] != [0xff, 0xd8] || f[f.len() - 2..] != [0xff, 0xd9] {
        return Err(bad("JPEG must start with SOI and end with EOI"));
    }
    let mut i = 2;
    while i + 4 <= f.len() {
        if f[i] != 0xff {
            return Err(bad("JPEG: expected a marker"));
        }
        let marker = f[i + 1];
        let len = u16::from_be_bytes([f[i + 2], f[i + 3]]) as usize;
        if matches!(marker, 0xc0..=0xc3) {
            if i + 9 > f.len() {
                break;
            }
            let h = u16::from_be_bytes([f[i + 5], f[i + 6]]) as u32;
            let w = u16::from_be_bytes([f[i + 7], f[i + 8]]) as u32;
            return Ok((w, h));
        }
        i += 2 + len;
    }
    Err(bad("JPEG without a frame header"))
}

fn audio(v: Option<&Value>) -> Result<ReceivedMedia, BadRequest> {
    let data = v
        .and_then(|v| v.get("data"))
        .and_then(Value::as_str)
        .ok_or_else(|| bad("input_audio.data must be a string"))?;
    let format = v
        .and_then(|v| v.get("format"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if format != "wav" {
        return Err(bad(format!("unsupported audio format {format:?}")));
    }
    let f = B64
        .decode(data)
        .map_err(|e| bad(format!("input_audio: bad base64: {e}")))?;
    if f.len() < 44 || &f[..4] != b"RIFF" || &f[8..16] != b"WAVEfmt " {
        return Err(bad("WAV must start with a RIFF/WAVE header"));
    }
    let u16at = |i: usize| u16::from_le_bytes([f[i], f[i + 1]]) as u32;
    let u32at = |i: usize| u32::from_le_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]);
    let (channels, rate, bits) = (u16at(22), u32at(24), u16at(34));
    if &f[36..40] != b"data"
        || u32at(40) as usize != f.len() - 44
        || u32at(4) as usize != f.len() - 8
    {
        return Err(bad("WAV sizes do not match the file"));
    }
    let frame = (channels * bits / 8).max(1);
    Ok(ReceivedMedia {
        format: "wav".into(),
        detail: None,
        url: None,
        width: 0,
        height: 0,
        bytes: f.len(),
        sample_rate: rate,
        seconds: (f.len() - 44) as f64 / (rate.max(1) * frame) as f64,
        content_hash: fnv(&f),
        file_hash: fnv(&f),
        before_text: false,
    })
}
