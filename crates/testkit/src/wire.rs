//! A raw HTTP/1.1 client for tests: exact bytes, and the chunk frames a
//! streamed body arrived in (one frame per server write).

use std::net::SocketAddr;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response as it came off the wire.
#[derive(Debug, Default)]
pub struct Wire {
    /// Everything received, head included.
    pub raw: Vec<u8>,
    /// The status code, 0 when no status line arrived.
    pub status: u16,
    /// The head, lowercased, without the blank line.
    pub head: String,
    /// The body's chunk frames in order (a `Content-Length` body is one
    /// frame), each with the instant its last byte was read.
    pub frames: Vec<(Vec<u8>, Instant)>,
    /// The body ended properly: the `0\r\n\r\n` terminator, or the full
    /// `Content-Length`.
    pub complete: bool,
}

impl Wire {
    /// The body, frames joined.
    pub fn body(&self) -> Vec<u8> {
        self.frames
            .iter()
            .flat_map(|(f, _)| f.iter().copied())
            .collect()
    }

    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body()).into_owned()
    }
}

/// Sends one request with `Connection: close` and reads until the
/// server closes the connection.
pub async fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> Wire {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(req.as_bytes()).await.expect("write");
    read_response(&mut stream).await
}

/// Reads one response from `stream`, stamping each chunk frame when its
/// last byte arrives; stops at the end of the response or of the
/// connection.
pub async fn read_response(stream: &mut TcpStream) -> Wire {
    let mut wire = Wire::default();
    let mut buf = vec![0u8; 8 * 1024];
    let mut pos = 0; // parse position in raw
    let mut head_end: Option<usize> = None;
    let mut chunked = false;
    let mut content_length: Option<usize> = None;
    loop {
        // Parse as much as possible.
        loop {
            if head_end.is_none() {
                let Some(i) = find(&wire.raw, b"\r\n\r\n") else {
                    break;
                };
                head_end = Some(i + 4);
                let head = String::from_utf8_lossy(&wire.raw[..i]).to_lowercase();
                wire.status = head
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                chunked = head.contains("transfer-encoding: chunked");
                content_length = head.lines().find_map(|l| {
                    l.strip_prefix("content-length: ")
                        .and_then(|v| v.trim().parse().ok())
                });
                wire.head = head;
                pos = i + 4;
                if !chunked && content_length == Some(0) {
                    wire.complete = true;
                    return wire;
                }
            }
            if chunked {
                let rest = &wire.raw[pos..];
                let Some(eol) = find(rest, b"\r\n") else {
                    break;
                };
                let size_str = String::from_utf8_lossy(&rest[..eol]).into_owned();
                let size = usize::from_str_radix(size_str.trim(), 16).expect("chunk size");
                if rest.len() < eol + 2 + size + 2 {
                    break;
                }
                let data = rest[eol + 2..eol + 2 + size].to_vec();
                pos += eol + 2 + size + 2;
                if size == 0 {
                    wire.complete = true;
                    return wire;
                }
                wire.frames.push((data, Instant::now()));
            } else if let Some(len) = content_length {
                if wire.raw.len() - pos >= len {
                    wire.frames
                        .push((wire.raw[pos..pos + len].to_vec(), Instant::now()));
                    wire.complete = true;
                    return wire;
                }
                break;
            } else {
                break;
            }
        }
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        wire.raw.extend_from_slice(&buf[..n]);
    }
    // The connection ended before the response did: keep what came.
    if head_end.is_some() && !chunked && content_length.is_none() {
        wire.frames.push((wire.raw[pos..].to_vec(), Instant::now()));
    } else if chunked || content_length.is_some() {
        let partial = wire.raw[pos..].to_vec();
        if !partial.is_empty() && content_length.is_some() {
            wire.frames.push((partial, Instant::now()));
        }
    }
    wire
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
