//! Image files that dataset rows name (LLaVA / ShareGPT-4V style `"image"`
//! or `"images"` next to the conversation): resolving each entry against
//! the dataset's folder, reading it through the confined readers of
//! [`crate::files`] (a regular file, inside the repository unless named
//! outside it, at most [`MAX_IMAGE_FILE_BYTES`]), recognising its format
//! by its first bytes (PNG, JPEG, WebP, GIF; anything else is refused) and
//! its size in pixels from its header. A file named by many rows is read
//! once (by its canonical path). `validate` and `run` use the same code:
//! `validate` keeps only each file's sizes, `run` its bytes, which the
//! workload base64s once before any clock starts. A file's content never
//! appears in a message; only its path and what is wrong with it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::dataset::{DatasetError, ImageRef, Record};
use crate::files::{self, ReadError};

/// Largest image file a dataset row may name: 20 MiB, OpenAI's limit per
/// image.
pub const MAX_IMAGE_FILE_BYTES: u64 = 20 << 20;

/// The formats of image files a dataset may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageType {
    Png,
    Jpeg,
    Webp,
    Gif,
}

impl ImageType {
    /// Its media type, for a data URL.
    pub fn mime(self) -> &'static str {
        match self {
            ImageType::Png => "image/png",
            ImageType::Jpeg => "image/jpeg",
            ImageType::Webp => "image/webp",
            ImageType::Gif => "image/gif",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ImageType::Png => "PNG",
            ImageType::Jpeg => "JPEG",
            ImageType::Webp => "WebP",
            ImageType::Gif => "GIF",
        }
    }
}

/// What is wrong with an image file's header. No variant holds its bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("not a PNG, JPEG, WebP or GIF file (judged by its first bytes)")]
    Unknown,
    #[error("a {} file whose header is cut short or malformed", .0.name())]
    Malformed(ImageType),
    #[error("a {} file of 0 pixels", .0.name())]
    Empty(ImageType),
}

/// A file's format and size in pixels, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: ImageType,
    pub width: u32,
    pub height: u32,
}

fn be16(b: &[u8], i: usize) -> Option<u32> {
    Some(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]) as u32)
}

fn le16(b: &[u8], i: usize) -> Option<u32> {
    Some(u16::from_le_bytes([*b.get(i)?, *b.get(i + 1)?]) as u32)
}

fn le24(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *b.get(i)?,
        *b.get(i + 1)?,
        *b.get(i + 2)?,
        0,
    ]))
}

/// Reads the format and size of an image file from its header: PNG's
/// IHDR, JPEG's frame header (SOF), WebP's VP8, VP8L or VP8X chunk, GIF's
/// logical screen. Any input gives an answer, never a panic.
pub fn header(b: &[u8]) -> Result<Header, HeaderError> {
    let (kind, size) = if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        let size = (b.get(12..16) == Some(b"IHDR"))
            .then(|| {
                let w = u32::from_be_bytes(b.get(16..20)?.try_into().ok()?);
                let h = u32::from_be_bytes(b.get(20..24)?.try_into().ok()?);
                Some((w, h))
            })
            .flatten();
        (ImageType::Png, size)
    } else if b.starts_with(&[0xff, 0xd8, 0xff]) {
        (ImageType::Jpeg, jpeg_size(b))
    } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        (ImageType::Webp, webp_size(b))
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        (ImageType::Gif, le16(b, 6).zip(le16(b, 8)))
    } else {
        return Err(HeaderError::Unknown);
    };
    let (width, height) = size.ok_or(HeaderError::Malformed(kind))?;
    if width == 0 || height == 0 {
        return Err(HeaderError::Empty(kind));
    }
    Ok(Header {
        kind,
        width,
        height,
    })
}

/// A JPEG's size from its first frame header (SOF0 to SOF15, less DHT,
/// JPG and DAC, which share the range), walking the segments after SOI.
fn jpeg_size(b: &[u8]) -> Option<(u32, u32)> {
    let mut i = 2;
    loop {
        if *b.get(i)? != 0xff {
            return None;
        }
        // Fill bytes before a marker.
        while *b.get(i + 1)? == 0xff {
            i += 1;
        }
        let marker = *b.get(i + 1)?;
        match marker {
            // Markers without a length: TEM, RSTn.
            0x01 | 0xd0..=0xd7 => i += 2,
            // EOI or SOS before any frame header.
            0xd9 | 0xda => return None,
            0xc0..=0xcf if !matches!(marker, 0xc4 | 0xc8 | 0xcc) => {
                let h = be16(b, i + 5)?;
                let w = be16(b, i + 7)?;
                return Some((w, h));
            }
            _ => {
                let len = be16(b, i + 2)? as usize;
                if len < 2 {
                    return None;
                }
                i += 2 + len;
            }
        }
    }
}

/// A WebP's size from its first chunk: VP8 (lossy), VP8L (lossless) or
/// VP8X (extended: the canvas).
fn webp_size(b: &[u8]) -> Option<(u32, u32)> {
    match b.get(12..16)? {
        b"VP8 " => {
            // Frame tag (3 bytes), start code, then 14-bit sizes.
            if b.get(23..26)? != [0x9d, 0x01, 0x2a] {
                return None;
            }
            Some((le16(b, 26)? & 0x3fff, le16(b, 28)? & 0x3fff))
        }
        b"VP8L" => {
            if *b.get(20)? != 0x2f {
                return None;
            }
            let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
            Some((1 + (bits & 0x3fff), 1 + ((bits >> 14) & 0x3fff)))
        }
        b"VP8X" => Some((1 + le24(b, 24)?, 1 + le24(b, 27)?)),
        _ => None,
    }
}

/// One image file of a dataset, read once.
#[derive(Clone, PartialEq, Eq)]
pub struct ImageFile {
    pub header: Header,
    /// Bytes of the file.
    pub len: u64,
    /// The file, when it was loaded to be sent (empty for `validate`).
    pub bytes: Vec<u8>,
}

/// Sizes only: an image's bytes have no place in a log.
impl std::fmt::Debug for ImageFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageFile")
            .field("header", &self.header)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl ImageFile {
    /// Bytes of its data URL's base64 (what a request body holds).
    pub fn base64_len(&self) -> u64 {
        self.len.div_ceil(3) * 4
    }
}

/// Why one image file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageFileError {
    #[error("cannot read image {path}: {error}")]
    Read { path: String, error: ReadError },
    #[error("image {path} is {error}")]
    Header { path: String, error: HeaderError },
}

/// Reads the image file at `path` of the repository `repo` (see
/// [`files::read_regular_in`]) and its header; keeps its bytes when `keep`.
pub fn read(path: &Path, repo: &Path, keep: bool) -> Result<ImageFile, ImageFileError> {
    let shown = || infer_bench_results::outside::terminal(&path.display().to_string()).into_owned();
    let bytes = files::read_regular_in(path, MAX_IMAGE_FILE_BYTES, repo).map_err(|error| {
        ImageFileError::Read {
            path: shown(),
            error,
        }
    })?;
    let header = header(&bytes).map_err(|error| ImageFileError::Header {
        path: shown(),
        error,
    })?;
    Ok(ImageFile {
        header,
        len: bytes.len() as u64,
        bytes: if keep { bytes } else { Vec::new() },
    })
}

/// Reads the image files the records name (their [`ImageRef::Path`]s,
/// relative to `dir`, the dataset's folder), each distinct file once, and
/// turns each path into an [`ImageRef::File`] index into the returned
/// list. `keep`: keep the files' bytes (to send them), else only their
/// sizes (to check them). The first file that cannot be used is an error
/// at the line of the row that names it.
pub fn load(
    records: &mut [Record],
    dir: &Path,
    repo: &Path,
    keep: bool,
) -> Result<Vec<ImageFile>, DatasetError> {
    let mut out: Vec<ImageFile> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut by_real: HashMap<PathBuf, usize> = HashMap::new();
    for r in records.iter_mut() {
        for image in r.images.iter_mut() {
            let ImageRef::Path(name) = image else {
                continue;
            };
            let at = |message: String| DatasetError {
                line: Some(r.line),
                col: None,
                message,
                hint: Some(
                    "image paths are relative to the dataset's folder; give a PNG, JPEG, WebP or GIF file, or an http(s) URL",
                ),
            };
            let index = match by_name.get(name.as_str()) {
                Some(i) => *i,
                None => {
                    let path = dir.join(name.as_str());
                    // Each name is checked for links leading out of the
                    // repository, even one whose file was read already.
                    files::check_link(&path, repo).map_err(|error| {
                        at(ImageFileError::Read {
                            path: infer_bench_results::outside::terminal(
                                &path.display().to_string(),
                            )
                            .into_owned(),
                            error,
                        }
                        .to_string())
                    })?;
                    let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                    let i = match by_real.get(&real) {
                        Some(i) => *i,
                        None => {
                            let f = read(&path, repo, keep).map_err(|e| at(e.to_string()))?;
                            out.push(f);
                            by_real.insert(real, out.len() - 1);
                            out.len() - 1
                        }
                    };
                    by_name.insert(name.clone(), i);
                    i
                }
            };
            *image = ImageRef::File(index);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        b.extend(w.to_be_bytes());
        b.extend(h.to_be_bytes());
        b
    }

    fn jpeg(w: u16, h: u16) -> Vec<u8> {
        let mut b = vec![0xff, 0xd8];
        // An APP0 segment, a fill byte, then SOF2 (progressive).
        b.extend([0xff, 0xe0, 0, 6, b'J', b'F', b'I', b'F']);
        b.extend([0xff, 0xff, 0xc2, 0, 11, 8]);
        b.extend(h.to_be_bytes());
        b.extend(w.to_be_bytes());
        b
    }

    fn riff(chunk: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut b = b"RIFF\0\0\0\0WEBP".to_vec();
        b.extend(chunk);
        b.extend((data.len() as u32).to_le_bytes());
        b.extend(data);
        b
    }

    #[test]
    fn a_file_named_by_many_rows_is_read_once() {
        let dir = std::env::temp_dir().join(format!("infer-bench-image-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/a.png"), png(3, 2)).unwrap();
        std::fs::write(dir.join("b.gif"), b"GIF89a\x05\x00\x04\x00").unwrap();
        let row = |line: usize, images: &[&str]| Record {
            line,
            history: Vec::new(),
            text: String::new(),
            output_tokens: None,
            reply: None,
            images: images
                .iter()
                .map(|s| ImageRef::Path(s.to_string()))
                .collect(),
        };
        let mut rows = vec![
            row(1, &["sub/a.png", "b.gif"]),
            row(2, &["./sub/../sub/a.png"]),
            row(3, &["sub/a.png"]),
        ];
        rows[2].images.push(ImageRef::Url("https://x/y.png".into()));
        let files = load(&mut rows, &dir, &dir, true).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(rows[0].images, [ImageRef::File(0), ImageRef::File(1)]);
        assert_eq!(rows[1].images, [ImageRef::File(0)]);
        assert_eq!(rows[2].images[0], ImageRef::File(0));
        assert_eq!((files[0].header.width, files[0].len), (3, 24));
        assert_eq!(files[0].bytes, png(3, 2));
        assert_eq!(files[1].header.kind, ImageType::Gif);
        // Checking keeps the sizes only; a missing file is an error at its row.
        let mut rows = vec![row(1, &["b.gif"]), row(7, &["nope.png"])];
        let e = load(&mut rows, &dir, &dir, false).unwrap_err();
        assert_eq!(e.line, Some(7));
        assert!(e.message.contains("nope.png"), "{}", e.message);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn headers_give_format_and_size() {
        let h = |b: &[u8]| header(b).map(|h| (h.kind, h.width, h.height));
        assert_eq!(h(&png(640, 480)), Ok((ImageType::Png, 640, 480)));
        assert_eq!(h(&jpeg(300, 200)), Ok((ImageType::Jpeg, 300, 200)));
        // VP8: frame tag, start code, 14-bit sizes (scale bits masked).
        let mut vp8 = vec![0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a];
        vp8.extend((0x4000u16 | 321).to_le_bytes());
        vp8.extend(123u16.to_le_bytes());
        assert_eq!(h(&riff(b"VP8 ", &vp8)), Ok((ImageType::Webp, 321, 123)));
        // VP8L: width - 1 and height - 1 in 14 bits each.
        let bits: u32 = 99 | (49 << 14);
        let mut vp8l = vec![0x2f];
        vp8l.extend(bits.to_le_bytes());
        assert_eq!(h(&riff(b"VP8L", &vp8l)), Ok((ImageType::Webp, 100, 50)));
        // VP8X: flags, reserved, canvas width - 1 and height - 1 in 24 bits.
        let vp8x = [0, 0, 0, 0, 0x0f, 0x27, 0x00, 0x09, 0x00, 0x00];
        assert_eq!(h(&riff(b"VP8X", &vp8x)), Ok((ImageType::Webp, 10000, 10)));
        assert_eq!(
            h(b"GIF89a\x20\x03\x58\x02\x00\x00\x00"),
            Ok((ImageType::Gif, 800, 600))
        );
    }

    #[test]
    fn the_real_encoders_output_is_read() {
        let mut out = Vec::new();
        let mut e = png::Encoder::new(&mut out, 37, 21);
        e.set_color(png::ColorType::Rgb);
        let mut w = e.write_header().unwrap();
        w.write_image_data(&vec![7u8; 37 * 21 * 3]).unwrap();
        w.finish().unwrap();
        let h = header(&out).unwrap();
        assert_eq!((h.kind, h.width, h.height), (ImageType::Png, 37, 21));
        let mut jpg = Vec::new();
        jpeg_encoder::Encoder::new(&mut jpg, 90)
            .encode(
                &vec![9u8; 50 * 30 * 3],
                50,
                30,
                jpeg_encoder::ColorType::Rgb,
            )
            .unwrap();
        let h = header(&jpg).unwrap();
        assert_eq!((h.kind, h.width, h.height), (ImageType::Jpeg, 50, 30));
    }

    #[test]
    fn cut_or_foreign_headers_are_errors_never_panics() {
        let files = [
            png(64, 64),
            jpeg(64, 64),
            riff(b"VP8L", &[0x2f, 1, 2, 3, 4]),
            b"GIF87a\x01\x00\x01\x00".to_vec(),
        ];
        for f in &files {
            assert!(header(f).is_ok());
            for n in 0..f.len() - 1 {
                assert!(header(&f[..n]).is_err(), "{n} bytes of {:?}", &f[..4]);
            }
        }
        assert_eq!(header(b"root:x:0:0:root"), Err(HeaderError::Unknown));
        assert_eq!(header(b""), Err(HeaderError::Unknown));
        assert_eq!(header(&png(0, 10)), Err(HeaderError::Empty(ImageType::Png)));
        // A JPEG whose segment length is 0, or that scans before a frame.
        assert!(header(&[0xff, 0xd8, 0xff, 0xe0, 0, 0, 1, 2, 3]).is_err());
        assert!(header(&[0xff, 0xd8, 0xff, 0xda, 0, 4, 0, 0, 0xff, 0xd9]).is_err());
        // Every prefix of every byte pattern is answered.
        for seed in 0u32..2000 {
            let mut b = png(1, 1);
            b.truncate((seed % 24) as usize);
            b.extend(seed.to_le_bytes());
            let _ = header(&b);
        }
    }
}
