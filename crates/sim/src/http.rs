//! Minimal HTTP/1.1 server plumbing on hyper 1, shared by the loopback
//! servers this crate runs in-process (the scripted test server now, the
//! built-in simulator later).
//!
//! This module owns the socket side only: binding `127.0.0.1:0`, the accept
//! loop (one task per connection, keep-alive, `TCP_NODELAY`), reading a whole
//! request body, writing a full or streamed response, and shutting down. It
//! knows nothing of OpenAI, SSE or tokens.
//!
//! # Write timing of streamed bodies
//!
//! A streamed response is fed through a [`BodySender`]. Every chunk sent is
//! written to the socket as its own write (one HTTP/1.1 chunk frame, one
//! `writev`), never coalesced with the next: the body hands hyper one frame,
//! then withholds the next frame until hyper's write buffer has been drained
//! into the kernel. The connection's socket is wrapped so that the moment
//! hyper finishes draining its buffer (hyper calls the transport's
//! `poll_flush` exactly when its buffer is empty) is observable;
//! [`BodySender::send_flushed`] returns that instant. It is taken right after
//! the `writev` system call returned, so on loopback, where the kernel hands
//! the bytes to the receiving socket inside that call, a reader on another
//! thread can see the bytes a few microseconds *before* the recorded instant.
//!
//! Nothing here touches process-wide state: no signal handlers, no rlimits,
//! no global subscriber.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

/// Largest request body read; a larger one gets `413`.
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Listen backlog: room for thousands of clients connecting at once (the
/// kernel caps it at `net.core.somaxconn`).
const BACKLOG: u32 = 8192;

/// Chunks a [`BodySender`] may queue ahead of the socket.
const STREAM_QUEUE: usize = 16;

/// How long [`ServerHandle::shutdown`] lets in-flight responses finish.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// One request, read in full.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    /// The path without the query, e.g. `/v1/completions`.
    pub path: String,
    /// The query string without `?`, if any.
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub peer: SocketAddr,
    /// When the last byte of the body had been read (the head arrives just
    /// before; for small JSON bodies the two are microseconds apart).
    pub received: Instant,
}

/// What a handler answers: a status, headers and a body that is complete,
/// streamed through a [`BodySender`], or no response at all.
#[derive(Debug)]
pub struct Response {
    status: StatusCode,
    headers: HeaderMap,
    body: Payload,
}

#[derive(Debug)]
enum Payload {
    Full(Bytes),
    Stream(mpsc::Receiver<Msg>),
    DropConnection,
}

impl Response {
    /// A complete body with a `Content-Length`.
    pub fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        Response {
            status,
            headers,
            body: Payload::Full(body.into()),
        }
    }

    /// A complete `application/json` body.
    pub fn json(status: StatusCode, body: impl Into<Bytes>) -> Self {
        Self::full(status, "application/json; charset=utf-8", body)
    }

    /// A streamed body (chunked transfer encoding unless a `Content-Length`
    /// header is added). The head is written as soon as the handler returns;
    /// each chunk sent through the returned [`BodySender`] is then written
    /// as its own socket write. Dropping the sender ends the body properly
    /// (the `0\r\n\r\n` terminator); [`BodySender::abort`] ends it without.
    pub fn stream(status: StatusCode, content_type: &'static str) -> (Self, BodySender) {
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        let response = Response {
            status,
            headers,
            body: Payload::Stream(rx),
        };
        (response, BodySender { tx })
    }

    /// No response at all: the connection is closed as soon as the handler
    /// returns, without a status line (a server crashing or refusing).
    pub fn drop_connection() -> Self {
        Response {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            body: Payload::DropConnection,
        }
    }

    /// Adds (or replaces) a header.
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.insert(name, value);
        self
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    fn into_hyper(self, gate: Arc<FlushGate>) -> hyper::Response<OutBody> {
        let body = match self.body {
            Payload::Full(bytes) => OutBody::Full(Some(bytes)),
            Payload::Stream(rx) => OutBody::Stream { rx, gate },
            Payload::DropConnection => OutBody::Drop,
        };
        let mut response = hyper::Response::new(body);
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        response
    }
}

/// The connection that a streamed body was going to is gone (the peer
/// closed it, or the server shut down).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the response body's connection is closed")]
pub struct BodyClosed;

/// Feeds a streamed response body. Chunks go out in the order sent, each as
/// its own socket write, as soon as the connection can take it.
#[derive(Debug)]
pub struct BodySender {
    tx: mpsc::Sender<Msg>,
}

#[derive(Debug)]
enum Msg {
    Data(Bytes, Option<oneshot::Sender<Instant>>),
    Abort,
}

impl BodySender {
    /// Queues a chunk; waits only while the queue is full.
    pub async fn send(&self, data: Bytes) -> Result<(), BodyClosed> {
        self.tx
            .send(Msg::Data(data, None))
            .await
            .map_err(|_| BodyClosed)
    }

    /// Queues a chunk and waits until it has been written to the socket;
    /// returns the instant the write completed (see the module docs).
    pub async fn send_flushed(&self, data: Bytes) -> Result<Instant, BodyClosed> {
        self.queue_flushed(data).await?.await
    }

    /// Queues a chunk and returns at once with a future that resolves to the
    /// instant it was written, for a caller that must not wait (e.g. one that
    /// still has to return the response that will carry it).
    pub async fn queue_flushed(&self, data: Bytes) -> Result<Flushed, BodyClosed> {
        let (notify, rx) = oneshot::channel();
        self.tx
            .send(Msg::Data(data, Some(notify)))
            .await
            .map_err(|_| BodyClosed)?;
        Ok(Flushed(rx))
    }

    /// Ends the response abruptly once the chunks queued before it have been
    /// written: the connection is closed without the chunked terminator (or
    /// short of the promised `Content-Length`), as when a server dies.
    pub async fn abort(self) {
        let _ = self.tx.send(Msg::Abort).await;
    }

    /// Resolves when the connection is gone, so a producer that is waiting
    /// (a long stall, say) can stop early.
    pub async fn closed(&self) {
        self.tx.closed().await
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The instant a queued chunk was written; see [`BodySender::queue_flushed`].
#[derive(Debug)]
pub struct Flushed(oneshot::Receiver<Instant>);

impl Future for Flushed {
    type Output = Result<Instant, BodyClosed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map_err(|_| BodyClosed)
    }
}

/// A handle on a running server. Dropping it stops accepting and closes
/// every connection at once; [`ServerHandle::shutdown`] is the graceful way.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    stop: watch::Sender<Stop>,
    task: Option<JoinHandle<()>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Run,
    Graceful(Duration),
    Now,
}

impl ServerHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL an OpenAI client wants.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://127.0.0.1:PORT` followed by `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops accepting, closes idle keep-alive connections, lets in-flight
    /// responses finish for up to [`DEFAULT_GRACE`], then closes the rest.
    pub async fn shutdown(self) {
        self.shutdown_within(DEFAULT_GRACE).await
    }

    /// [`ServerHandle::shutdown`] with a chosen grace period.
    pub async fn shutdown_within(mut self, grace: Duration) {
        let _ = self.stop.send(Stop::Graceful(grace));
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        // After a graceful shutdown this is a no-op: the loop has ended.
        let _ = self.stop.send(Stop::Now);
    }
}

/// Binds `127.0.0.1:0` and serves every connection with `handler` until the
/// returned handle is shut down or dropped. Must be called within a tokio
/// runtime; the server's tasks run on it.
pub async fn bind<H, F>(handler: H) -> io::Result<ServerHandle>
where
    H: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    bind_port(0, handler).await
}

/// `bind` on a given port of 127.0.0.1 (0: one the OS picks).
pub async fn bind_port<H, F>(port: u16, handler: H) -> io::Result<ServerHandle>
where
    H: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    bind_port_with(port, MAX_BODY_BYTES, handler).await
}

/// `bind_port`, reading request bodies of up to `max_body` bytes (a
/// larger one is answered 413).
pub async fn bind_port_with<H, F>(
    port: u16,
    max_body: usize,
    handler: H,
) -> io::Result<ServerHandle>
where
    H: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
    let listener = socket.listen(BACKLOG)?;
    let addr = listener.local_addr()?;
    let (stop, stop_rx) = watch::channel(Stop::Run);
    let task = tokio::spawn(accept_loop(listener, Arc::new(handler), stop_rx, max_body));
    Ok(ServerHandle {
        addr,
        stop,
        task: Some(task),
    })
}

async fn accept_loop<H, F>(
    listener: TcpListener,
    handler: Arc<H>,
    mut stop: watch::Receiver<Stop>,
    max_body: usize,
) where
    H: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let mut conns = JoinSet::new();
    let mode = loop {
        tokio::select! {
            biased;
            changed = stop.changed() => match changed {
                Err(_) => break Stop::Now,
                Ok(()) => match *stop.borrow_and_update() {
                    Stop::Run => {}
                    other => break other,
                },
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    conns.spawn(serve_connection(stream, peer, handler.clone(), stop.clone(), max_body));
                }
                // Out of descriptors or a connection reset while queued:
                // nothing to do for that one; back off a little so a full
                // descriptor table does not spin the loop.
                Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
            },
        }
    };
    drop(listener);
    if let Stop::Graceful(grace) = mode {
        let drain = async { while conns.join_next().await.is_some() {} };
        let _ = tokio::time::timeout(grace, drain).await;
    }
    conns.shutdown().await;
}

async fn serve_connection<H, F>(
    stream: TcpStream,
    peer: SocketAddr,
    handler: Arc<H>,
    stop: watch::Receiver<Stop>,
    max_body: usize,
) where
    H: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    // Every SSE event must leave as soon as it is written.
    let _ = stream.set_nodelay(true);
    serve_io(stream, peer, handler, stop, max_body).await
}

/// Serves one connection over any transport (a `TcpStream` in production,
/// an in-memory pipe in tests).
async fn serve_io<T, H, F>(
    io: T,
    peer: SocketAddr,
    handler: Arc<H>,
    mut stop: watch::Receiver<Stop>,
    max_body: usize,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let gate = Arc::new(FlushGate::default());
    let io = TokioIo::new(GatedStream {
        inner: io,
        gate: gate.clone(),
    });
    let service = hyper::service::service_fn(move |req| {
        let handler = handler.clone();
        let gate = gate.clone();
        async move { Ok::<_, Infallible>(respond(&*handler, req, peer, gate, max_body).await) }
    });
    let conn = http1::Builder::new()
        .keep_alive(true)
        // No timer: an idle keep-alive connection stays open until the
        // client closes it, as a benchmark's connection pool expects.
        .header_read_timeout(None)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let stopping = async move {
        // An error means the server is gone: stop as well.
        let _ = stop.wait_for(|s| *s != Stop::Run).await;
    };
    tokio::select! {
        _ = conn.as_mut() => return,
        () = stopping => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

async fn respond<H, F>(
    handler: &H,
    req: hyper::Request<Incoming>,
    peer: SocketAddr,
    gate: Arc<FlushGate>,
    max_body: usize,
) -> hyper::Response<OutBody>
where
    H: Fn(Request) -> F,
    F: Future<Output = Response>,
{
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, max_body).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            let (status, message) = if e.downcast_ref::<LengthLimitError>().is_some() {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("request body larger than {max_body} bytes"),
                )
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    format!("could not read the request body: {e}"),
                )
            };
            return error_response(status, &message).into_hyper(gate);
        }
    };
    let request = Request {
        method: parts.method,
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts.headers,
        body,
        peer,
        received: Instant::now(),
    };
    handler(request).await.into_hyper(gate)
}

/// An OpenAI-style error body (`{"error": {"code", "message", "type"}}`, the
/// shape llama.cpp sends) with the given status.
pub fn error_response(status: StatusCode, message: &str) -> Response {
    let kind = match status.as_u16() {
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    error_response_typed(status, message, kind)
}

/// [`error_response`] with an explicit `type`.
pub fn error_response_typed(status: StatusCode, message: &str, kind: &str) -> Response {
    let body = serde_json::json!({
        "error": { "code": status.as_u16(), "message": message, "type": kind }
    });
    Response::json(status, body.to_string())
}

// ---------------------------------------------------------------------------
// The response body hyper polls, and the flush gate that keeps one chunk per
// write.

/// Shared by a connection's transport and the body it is writing: records
/// that a frame was handed to hyper and not yet written, and who to tell
/// when it is. HTTP/1.1 writes one response at a time per connection, so
/// one slot is enough.
#[derive(Default)]
struct FlushGate {
    inner: Mutex<GateState>,
}

#[derive(Default)]
struct GateState {
    unflushed: bool,
    notify: Option<oneshot::Sender<Instant>>,
    waker: Option<Waker>,
}

impl FlushGate {
    /// True when the last frame has been written, so the next may be
    /// handed over; otherwise remembers who to wake.
    fn ready(&self, waker: &Waker) -> bool {
        let mut state = self.inner.lock();
        if state.unflushed {
            match &mut state.waker {
                Some(w) if w.will_wake(waker) => {}
                slot => *slot = Some(waker.clone()),
            }
            false
        } else {
            true
        }
    }

    fn handed(&self, notify: Option<oneshot::Sender<Instant>>) {
        let mut state = self.inner.lock();
        state.unflushed = true;
        state.notify = notify;
    }

    /// Hyper's write buffer is empty: everything handed over is in the
    /// kernel.
    fn flushed(&self) {
        let mut state = self.inner.lock();
        if !state.unflushed {
            return;
        }
        state.unflushed = false;
        let notify = state.notify.take();
        let waker = state.waker.take();
        drop(state);
        if let Some(notify) = notify {
            let _ = notify.send(Instant::now());
        }
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl fmt::Debug for FlushGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlushGate")
            .field("unflushed", &self.inner.lock().unflushed)
            .finish()
    }
}

/// The handler asked for the connection to be dropped.
#[derive(Debug, thiserror::Error)]
#[error("response aborted by the handler")]
struct Aborted;

enum OutBody {
    Full(Option<Bytes>),
    Stream {
        rx: mpsc::Receiver<Msg>,
        gate: Arc<FlushGate>,
    },
    Drop,
}

impl hyper::body::Body for OutBody {
    type Data = Bytes;
    type Error = Aborted;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Aborted>>> {
        match &mut *self {
            OutBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            OutBody::Drop => Poll::Ready(Some(Err(Aborted))),
            OutBody::Stream { rx, gate } => {
                if !gate.ready(cx.waker()) {
                    return Poll::Pending;
                }
                match rx.poll_recv(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(None) => Poll::Ready(None),
                    Poll::Ready(Some(Msg::Abort)) => Poll::Ready(Some(Err(Aborted))),
                    Poll::Ready(Some(Msg::Data(data, notify))) => {
                        gate.handed(notify);
                        Poll::Ready(Some(Ok(Frame::data(data))))
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, OutBody::Full(None))
            || matches!(self, OutBody::Full(Some(b)) if b.is_empty())
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            OutBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            OutBody::Full(None) => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

/// The accepted socket, telling the [`FlushGate`] when hyper's buffer has
/// been drained into it.
struct GatedStream<T> {
    inner: T,
    gate: Arc<FlushGate>,
}

impl<T: AsyncRead + Unpin> AsyncRead for GatedStream<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for GatedStream<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    /// Hyper calls this exactly when its write buffer is empty (after the
    /// last `writev` of it returned), which is the instant we record.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        if let Poll::Ready(Ok(())) = polled {
            self.gate.flushed();
        }
        polled
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_testkit::wire::{self as testing, read_response, request};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn echo_server() -> ServerHandle {
        bind(|req: Request| async move {
            match req.path.as_str() {
                "/echo" => Response::full(StatusCode::OK, "text/plain", req.body),
                "/stream" => {
                    let (resp, tx) = Response::stream(StatusCode::OK, "text/event-stream");
                    tokio::spawn(async move {
                        // Queued back to back: must still be separate writes.
                        for i in 0..5 {
                            if tx.send(Bytes::from(format!("chunk{i};"))).await.is_err() {
                                return;
                            }
                        }
                    });
                    resp
                }
                "/abort" => {
                    let (resp, tx) = Response::stream(StatusCode::OK, "text/event-stream");
                    tokio::spawn(async move {
                        let _ = tx.send_flushed(Bytes::from_static(b"partial")).await;
                        tx.abort().await;
                    });
                    resp
                }
                "/drop" => Response::drop_connection(),
                "/slow" => {
                    let (resp, tx) = Response::stream(StatusCode::OK, "text/plain");
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(150)).await;
                        let _ = tx.send(Bytes::from_static(b"late")).await;
                    });
                    resp
                }
                _ => error_response(StatusCode::NOT_FOUND, "no such path"),
            }
        })
        .await
        .expect("bind")
    }

    #[tokio::test]
    async fn full_body_and_base_url() {
        let server = echo_server().await;
        assert!(server.base_url().starts_with("http://127.0.0.1:"));
        assert!(server.base_url().ends_with("/v1"));
        let wire = request(server.addr(), "POST", "/echo", "hello").await;
        assert_eq!(wire.status, 200);
        assert!(wire.complete);
        assert!(wire.head.contains("content-length: 5"), "{}", wire.head);
        assert_eq!(wire.body(), b"hello");
        let wire = request(server.addr(), "GET", "/nope", "").await;
        assert_eq!(wire.status, 404);
        let v: serde_json::Value = serde_json::from_slice(&wire.body()).unwrap();
        assert_eq!(v["error"]["code"], 404);
        assert_eq!(v["error"]["type"], "invalid_request_error");
    }

    #[tokio::test]
    async fn each_chunk_is_its_own_write() {
        let server = echo_server().await;
        let wire = request(server.addr(), "GET", "/stream", "").await;
        assert_eq!(wire.status, 200);
        assert!(wire.head.contains("transfer-encoding: chunked"));
        assert!(wire.complete, "terminator expected");
        let frames: Vec<_> = wire.frames.iter().map(|(f, _)| f.clone()).collect();
        let expected: Vec<Vec<u8>> = (0..5).map(|i| format!("chunk{i};").into_bytes()).collect();
        assert_eq!(frames, expected);
    }

    /// A transport that keeps every write call's bytes.
    struct RecordingIo {
        inner: tokio::io::DuplexStream,
        writes: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl AsyncRead for RecordingIo {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for RecordingIo {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
            if let Poll::Ready(Ok(n)) = polled {
                self.writes.lock().push(buf[..n].to_vec());
            }
            polled
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    #[tokio::test]
    async fn one_write_per_chunk_even_when_queued_together() {
        let (mut client, server_side) = tokio::io::duplex(1 << 20);
        let writes = Arc::new(Mutex::new(Vec::new()));
        let io = RecordingIo {
            inner: server_side,
            writes: writes.clone(),
        };
        let (_stop, stop_rx) = watch::channel(Stop::Run);
        let handler = Arc::new(|_req: Request| async {
            let (resp, tx) = Response::stream(StatusCode::OK, "text/event-stream");
            // All five are ready before hyper polls the body once.
            for i in 0..5 {
                tx.send(Bytes::from(format!("chunk{i};"))).await.unwrap();
            }
            resp
        });
        let peer = SocketAddr::from((Ipv4Addr::LOCALHOST, 1));
        tokio::spawn(serve_io(io, peer, handler, stop_rx, MAX_BODY_BYTES));
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        client.read_to_end(&mut out).await.unwrap();
        assert!(out.ends_with(b"0\r\n\r\n"));
        let writes = writes.lock().clone();
        for i in 0..5 {
            let needle = format!("chunk{i};");
            let holders: Vec<usize> = (0..writes.len())
                .filter(|&w| testing::find(&writes[w], needle.as_bytes()).is_some())
                .collect();
            assert_eq!(holders.len(), 1, "{needle} in one write");
        }
        for w in &writes {
            let text = String::from_utf8_lossy(w);
            let n = (0..5)
                .filter(|i| text.contains(&format!("chunk{i};")))
                .count();
            assert!(n <= 1, "coalesced write: {:?}", String::from_utf8_lossy(w));
        }
    }

    #[tokio::test]
    async fn keep_alive_serves_several_requests() {
        let server = echo_server().await;
        let mut stream = TcpStream::connect(server.addr()).await.unwrap();
        for i in 0..3 {
            let body = format!("req{i}");
            let req = format!(
                "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(req.as_bytes()).await.unwrap();
            let wire = read_response(&mut stream).await;
            assert_eq!(wire.status, 200);
            assert_eq!(wire.body(), body.as_bytes());
        }
        // And a streamed response on the same connection.
        stream
            .write_all(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let wire = read_response(&mut stream).await;
        assert!(wire.complete);
        assert_eq!(wire.frames.len(), 5);
    }

    #[tokio::test]
    async fn abort_closes_without_terminator() {
        let server = echo_server().await;
        let wire = request(server.addr(), "GET", "/abort", "").await;
        assert_eq!(wire.status, 200);
        assert!(!wire.complete, "no 0-chunk after an abort");
        assert_eq!(wire.body(), b"partial");
        assert!(!wire.raw.ends_with(b"0\r\n\r\n"));
    }

    #[tokio::test]
    async fn drop_connection_sends_nothing() {
        let server = echo_server().await;
        let wire = request(server.addr(), "GET", "/drop", "").await;
        assert_eq!(wire.status, 0);
        assert!(
            wire.raw.is_empty(),
            "{:?}",
            String::from_utf8_lossy(&wire.raw)
        );
    }

    #[tokio::test]
    async fn send_flushed_reports_the_write() {
        let (tx_at, rx_at) = oneshot::channel();
        let tx_at = Arc::new(Mutex::new(Some(tx_at)));
        let server = bind(move |_req| {
            let tx_at = tx_at.clone();
            async move {
                let (resp, tx) = Response::stream(StatusCode::OK, "text/plain");
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let before = Instant::now();
                    let at = tx.send_flushed(Bytes::from_static(b"x")).await.unwrap();
                    if let Some(t) = tx_at.lock().take() {
                        let _ = t.send((before, at));
                    }
                });
                resp
            }
        })
        .await
        .unwrap();
        let wire = request(server.addr(), "GET", "/", "").await;
        let (before, at) = rx_at.await.unwrap();
        assert!(at >= before);
        assert!(at - before < Duration::from_millis(50));
        // The client read the byte within a few ms of the recorded write
        // (it can be slightly earlier on loopback).
        let arrived = wire.frames[0].1;
        let skew = if arrived > at {
            arrived - at
        } else {
            at - arrived
        };
        assert!(skew < Duration::from_millis(20), "skew {skew:?}");
    }

    #[tokio::test]
    async fn graceful_shutdown_finishes_in_flight_and_stops_accepting() {
        let server = echo_server().await;
        let addr = server.addr();
        let client = tokio::spawn(async move { request(addr, "GET", "/slow", "").await });
        tokio::time::sleep(Duration::from_millis(30)).await;
        server.shutdown().await;
        let wire = client.await.unwrap();
        assert!(wire.complete);
        assert_eq!(wire.body(), b"late");
        assert!(TcpStream::connect(addr).await.is_err(), "listener closed");
    }

    #[tokio::test]
    async fn drop_stops_accepting_and_closes_connections() {
        let server = echo_server().await;
        let addr = server.addr();
        let mut idle = TcpStream::connect(addr).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(server);
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(2), idle.read(&mut buf))
            .await
            .expect("closed promptly")
            .unwrap_or(0);
        assert_eq!(n, 0);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(TcpStream::connect(addr).await.is_err());
    }

    #[tokio::test]
    async fn malformed_http_gets_400_from_hyper() {
        let server = echo_server().await;
        let mut stream = TcpStream::connect(server.addr()).await.unwrap();
        stream.write_all(b"NOT HTTP AT ALL\r\n\r\n").await.unwrap();
        let wire = read_response(&mut stream).await;
        assert_eq!(wire.status, 400);
    }
}
