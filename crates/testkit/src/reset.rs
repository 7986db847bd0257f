//! A server that resets connections before any byte of a response: what a
//! restarting server, a proxy dropping idle upstreams, or a load balancer
//! draining a node does to a benchmark's kept-alive connections.
//!
//! This module owns a plain blocking HTTP/1.1 server (one thread per
//! connection), written by hand because only the raw socket can be closed
//! with a reset (`SO_LINGER` 0). It answers `POST` requests with a short,
//! complete completions stream and keeps the connection alive, and resets
//! the connection, instead of answering, as its [`Resets`] mode says.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

/// When the server resets a connection instead of answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resets {
    /// The first request on each connection is answered; the second one on
    /// the same connection is reset (a kept-alive connection the server
    /// lost while the client still pooled it).
    SecondOnConnection,
    /// Every request is reset.
    Always,
}

/// The stream every answered request gets: two tokens, usage, `[DONE]`.
const STREAM: &str = "data: {\"id\":\"cmpl-r\",\"object\":\"text_completion\",\"model\":\"reset-model\",\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":null}]}\n\n\
data: {\"id\":\"cmpl-r\",\"object\":\"text_completion\",\"model\":\"reset-model\",\"choices\":[{\"index\":0,\"text\":\"b\",\"finish_reason\":\"length\"}]}\n\n\
data: {\"id\":\"cmpl-r\",\"object\":\"text_completion\",\"model\":\"reset-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":2,\"total_tokens\":10}}\n\n\
data: [DONE]\n\n";

#[derive(Default)]
struct Counters {
    answered: AtomicU64,
    resets: AtomicU64,
    stop: AtomicBool,
}

/// A running reset server; dropping it stops accepting.
pub struct ResetServer {
    port: u16,
    counters: Arc<Counters>,
}

impl ResetServer {
    /// Binds `127.0.0.1:0` and serves on threads of its own.
    pub fn start(mode: Resets) -> io::Result<ResetServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let counters = Arc::new(Counters::default());
        let c = counters.clone();
        thread::spawn(move || {
            for conn in listener.incoming() {
                if c.stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let c = c.clone();
                thread::spawn(move || {
                    let _ = serve(conn, mode, &c);
                });
            }
        });
        Ok(ResetServer { port, counters })
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Requests answered with a stream.
    pub fn answered(&self) -> u64 {
        self.counters.answered.load(Ordering::Relaxed)
    }

    /// Requests whose connection was reset instead.
    pub fn resets(&self) -> u64 {
        self.counters.resets.load(Ordering::Relaxed)
    }
}

impl Drop for ResetServer {
    fn drop(&mut self) {
        self.counters.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Serves one connection's requests in turn.
fn serve(conn: TcpStream, mode: Resets, c: &Counters) -> io::Result<()> {
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut writer = conn;
    let mut on_this_connection = 0u32;
    loop {
        let Some((method, path, body_len)) = read_head(&mut reader)? else {
            return Ok(());
        };
        let mut body = vec![0u8; body_len];
        reader.read_exact(&mut body)?;
        on_this_connection += 1;
        if method == "GET" {
            let body = if path.ends_with("/models") {
                r#"{"object":"list","data":[{"id":"reset-model","object":"model"}]}"#
            } else {
                "{}"
            };
            write!(
                writer,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )?;
            continue;
        }
        let reset = match mode {
            Resets::Always => true,
            Resets::SecondOnConnection => on_this_connection >= 2,
        };
        if reset {
            c.resets.fetch_add(1, Ordering::Relaxed);
            return reset_now(writer);
        }
        c.answered.fetch_add(1, Ordering::Relaxed);
        write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{STREAM}",
            STREAM.len()
        )?;
        writer.flush()?;
    }
}

/// The request line's method and path, and the body's length; `None` at a
/// clean end of the connection.
fn read_head(reader: &mut impl BufRead) -> io::Result<Option<(String, String, usize)>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut body_len = 0;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let header = line.trim_end();
        if header.is_empty() {
            return Ok(Some((method, path, body_len)));
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                body_len = value.trim().parse().unwrap_or(0);
            }
        }
    }
}

/// Closes the connection with a reset: `SO_LINGER` on with a zero timeout
/// makes `close` send RST instead of FIN.
fn reset_now(conn: TcpStream) -> io::Result<()> {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the descriptor is this open socket's; the option value is a
    // valid `linger` of the size given.
    let rc = unsafe {
        libc::setsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // Both halves go with the socket: the clone the reader holds is closed
    // when `serve` returns, and the last close sends the reset.
    let _ = conn.shutdown(Shutdown::Read);
    drop(conn);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(s: &mut TcpStream) -> io::Result<String> {
        s.write_all(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")?;
        let mut buf = vec![0u8; 4096];
        let n = s.read(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    #[test]
    fn the_second_request_on_a_connection_is_reset() {
        let server = ResetServer::start(Resets::SecondOnConnection).unwrap();
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let first = post(&mut s).unwrap();
        assert!(first.starts_with("HTTP/1.1 200 OK"), "{first}");
        // The whole stream came in one write; wait for it if it did not.
        let mut rest = first;
        while !rest.contains("[DONE]") {
            rest += &post_read(&mut s);
        }
        let second = post(&mut s);
        let err = second.expect_err("a reset, not an answer");
        assert_eq!(err.kind(), io::ErrorKind::ConnectionReset, "{err}");
        assert_eq!((server.answered(), server.resets()), (1, 1));
    }

    fn post_read(s: &mut TcpStream) -> String {
        let mut buf = vec![0u8; 4096];
        let n = s.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}
