//! The transport every request kind shares: a request POSTed on a pooled
//! HTTP/1.1 connection, its answer read as an event stream or as one body,
//! with every arrival stamped when a read returns, before any parsing (a
//! chunk's events all carry its arrival instant). What the bytes mean is
//! the [`Protocol`]'s business; sending, timing, timeouts, bounds,
//! resends and failure classes are this module's.
//!
//! Every read is bounded (`[load.limits]`): the longest SSE line, the bytes
//! and events of one response, the part of an error body read for its
//! message. A response that breaks a bound fails its request (`oversized`)
//! and is dropped with its connection; the run goes on. The idle timeout
//! runs between *events*: comments and partial lines do not reset it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::client::{ClientOptions, builder, error_chain, read_capped};
use crate::error::Error;
use crate::record::{ErrorClass, Failure, OutputEvent, RequestRecord};
use crate::sse::SseParser;
use crate::structured::{Checker, MAX_ANSWER_BYTES, Reply};
use crate::{Backend, Prepared, Protocol, WarmError};
use infer_bench_spec::{Limits, Timeouts};
use infer_bench_workload::Prompt;

/// The client of one target and point, carrying one request kind.
pub struct HttpBackend {
    client: reqwest::Client,
    /// No pool: every request on a new connection (for resends).
    fresh: reqwest::Client,
    /// The target's base URL, with a trailing slash.
    base: reqwest::Url,
    url: reqwest::Url,
    /// What [`Backend::warm`] asks to open connections.
    warm_url: reqwest::Url,
    connect_timeout: Duration,
    /// Connections are kept alive (a pool), so a response's end is read to
    /// give its connection back.
    keep_alive: bool,
    /// Connections on their way back to the pool (`connect`).
    returning: Arc<crate::connect::Returning>,
    content_type: reqwest::header::HeaderValue,
    /// The names of the target's own headers (they win over a kind's).
    target_headers: Vec<String>,
    /// The request kind's headers, on every request.
    kind_headers: reqwest::header::HeaderMap,
    protocol: Box<dyn Protocol>,
    timeouts: Timeouts,
    limits: Limits,
    keep_reply: bool,
    /// The check of structured answers, when the workload asks for them.
    check: Option<Arc<Checker>>,
}

/// How a point's requests are read: its client limits, and whether the
/// reply's text is kept (a conversation sends it back).
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    pub timeouts: Timeouts,
    pub limits: Limits,
    pub keep_reply: bool,
}

impl HttpBackend {
    /// A client of `o.base_url` sending `protocol`'s requests.
    pub fn new(
        o: &ClientOptions,
        protocol: Box<dyn Protocol>,
        reading: Reading,
    ) -> Result<HttpBackend, Error> {
        let base = format!("{}/", o.base_url.trim_end_matches('/'));
        let bad_url = |source| Error::BaseUrl {
            url: o.base_url.to_string(),
            source,
        };
        let base = reqwest::Url::parse(&base).map_err(bad_url)?;
        let url = base.join(protocol.path()).map_err(bad_url)?;
        let warm_url = base.join(protocol.warm_path()).map_err(bad_url)?;
        let mut headers = reqwest::header::HeaderMap::new();
        for (k, v) in o.headers {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| Error::HeaderName(k.clone()))?;
            let value = reqwest::header::HeaderValue::from_str(v)
                .map_err(|_| Error::HeaderValue(k.clone()))?;
            headers.insert(name, value);
        }
        if let Some(key) = &o.api_key {
            let (name, value) = match protocol.auth() {
                crate::Auth::Bearer => (reqwest::header::AUTHORIZATION, format!("Bearer {key}")),
                crate::Auth::ApiKeyHeader => (
                    reqwest::header::HeaderName::from_static("x-api-key"),
                    key.to_string(),
                ),
            };
            let mut v =
                reqwest::header::HeaderValue::from_str(&value).map_err(|_| Error::ApiKey)?;
            v.set_sensitive(true);
            headers.insert(name, v);
        }
        let kind_headers = kind_headers(&*protocol, &headers)?;
        // Every connect is timed and charged to the request that waited
        // for it (`connect`); the target's headers go with every request
        // without a copy per request.
        let returning = Arc::new(crate::connect::Returning::default());
        let client = builder(o)?
            .connector_layer(crate::connect::ConnectTimer::new(returning.clone()))
            .default_headers(headers.clone())
            .build()
            .map_err(Error::Client)?;
        // The resend of a request whose kept-alive connection was lost goes
        // on a connection of its own: from the pool it could take another
        // the server is closing (llama-server closes one after 5 requests).
        let fresh = builder(o)?
            .pool_max_idle_per_host(0)
            .connector_layer(crate::connect::ConnectTimer::new(returning.clone()))
            .default_headers(headers)
            .build()
            .map_err(Error::Client)?;
        Ok(HttpBackend {
            client,
            fresh,
            base,
            url,
            warm_url,
            connect_timeout: o.connect_timeout,
            keep_alive: o.pool_size > 0,
            returning,
            content_type: reqwest::header::HeaderValue::from_static(protocol.content_type()),
            target_headers: o.headers.keys().cloned().collect(),
            kind_headers,
            protocol,
            timeouts: reading.timeouts,
            limits: reading.limits,
            keep_reply: reading.keep_reply,
            check: None,
        })
    }

    /// Validates every answer with `check` from now on (a workload with
    /// structured output or tools): answers are collected, bounded, and
    /// one that fails fails its request as `invalid_answer`.
    pub fn validate_with(&mut self, check: Option<Checker>) {
        self.check = check.map(Arc::new);
    }

    /// What a request's reader collects, if anything: the reply a
    /// conversation sends back, or the answer to validate. Neither: the
    /// reader keeps nothing (the plain path).
    fn reply(&self) -> Option<Reply> {
        match (&self.check, self.keep_reply) {
            (Some(_), _) => Some(Reply::bounded(MAX_ANSWER_BYTES)),
            (None, true) => Some(Reply::default()),
            (None, false) => None,
        }
    }

    /// The body of a prompt's request.
    pub fn body(&self, prompt: &Prompt) -> Vec<u8> {
        self.protocol.body(prompt)
    }

    /// The request kind it carries.
    pub fn protocol(&self) -> &dyn Protocol {
        &*self.protocol
    }

    /// Carries `protocol`'s requests from now on (same path, answers and
    /// headers: e.g. the same kind in the dialect a server named).
    pub fn set_protocol(&mut self, protocol: Box<dyn Protocol>) -> Result<(), Error> {
        self.url = self
            .base
            .join(protocol.path())
            .map_err(|source| Error::BaseUrl {
                url: self.base.to_string(),
                source,
            })?;
        self.content_type = reqwest::header::HeaderValue::from_static(protocol.content_type());
        let mut own = reqwest::header::HeaderMap::new();
        for k in &self.target_headers {
            if let Ok(name) = reqwest::header::HeaderName::from_bytes(k.as_bytes()) {
                own.insert(name, reqwest::header::HeaderValue::from_static(""));
            }
        }
        self.kind_headers = kind_headers(&*protocol, &own)?;
        self.protocol = protocol;
        Ok(())
    }

    /// `GET {base_url}/{path}` on the pool, its body read up to `cap` bytes
    /// within the connect timeout and five seconds: `None` when it does not
    /// answer or answers with a failure status.
    pub async fn get(&self, path: &str, cap: usize) -> Option<Vec<u8>> {
        let deadline = Instant::now() + self.connect_timeout + Duration::from_secs(5);
        let url = self.base.join(path).ok()?;
        let get = self.client.get(url).send();
        let response = tokio::time::timeout_at(deadline.into(), get)
            .await
            .ok()?
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        Some(read_capped(response, cap, deadline).await)
    }

    /// `GET {base_url}/{path}` on the pool: its status and body (read up
    /// to `cap` bytes) within the connect timeout and five seconds, or why
    /// there was no answer.
    pub async fn get_answer(&self, path: &str, cap: usize) -> Result<(u16, Vec<u8>), NoAnswer> {
        let deadline = Instant::now() + self.connect_timeout + Duration::from_secs(5);
        let url = self.base.join(path).map_err(|e| NoAnswer(e.to_string()))?;
        let get = self.client.get(url).send();
        let response = tokio::time::timeout_at(deadline.into(), get)
            .await
            .map_err(|_| NoAnswer("no answer within the connect timeout and 5 s".into()))?
            .map_err(|e| NoAnswer(error_chain(&e)))?;
        let status = response.status().as_u16();
        Ok((status, read_capped(response, cap, deadline).await))
    }

    /// `POST {path}` with an empty body on the pool, `path` read against
    /// the base URL as `get_answer` reads it: its status and body (read up
    /// to `cap` bytes) within the connect timeout and five seconds, or why
    /// there was no answer. For a server's control endpoints (a cache
    /// reset), never for a measured request.
    pub async fn post_answer(&self, path: &str, cap: usize) -> Result<(u16, Vec<u8>), NoAnswer> {
        let deadline = Instant::now() + self.connect_timeout + Duration::from_secs(5);
        let url = self.base.join(path).map_err(|e| NoAnswer(e.to_string()))?;
        let post = self.client.post(url).send();
        let response = tokio::time::timeout_at(deadline.into(), post)
            .await
            .map_err(|_| NoAnswer("no answer within the connect timeout and 5 s".into()))?
            .map_err(|e| NoAnswer(error_chain(&e)))?;
        let status = response.status().as_u16();
        Ok((status, read_capped(response, cap, deadline).await))
    }

    /// The target's base URL.
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    async fn execute(&self, req: Prepared, rec: &mut RequestRecord) {
        let t = self.timeouts;
        let mut attempt = 0;
        let response = loop {
            let mut request = reqwest::Request::new(reqwest::Method::POST, self.url.clone());
            request
                .headers_mut()
                .insert(reqwest::header::CONTENT_TYPE, self.content_type.clone());
            if !self.kind_headers.is_empty() {
                request.headers_mut().extend(self.kind_headers.clone());
            }
            *request.body_mut() = Some(req.body.clone().into());
            rec.payload.sent = req.body.len() as u64;
            rec.t_send = Instant::now();
            let total_deadline = rec.t_send + t.total.as_std();
            let first_deadline = (rec.t_send + t.first_token.as_std()).min(total_deadline);
            let client = if attempt == 0 {
                &self.client
            } else {
                &self.fresh
            };
            let sent = crate::connect::timed(client.execute(request));
            let sent = tokio::time::timeout_at(first_deadline.into(), sent)
                .await
                .map(|(r, connect_ns)| {
                    rec.connect_ns += connect_ns;
                    r
                });
            match sent {
                Err(_) => {
                    let (class, detail) = if first_deadline == total_deadline {
                        (
                            ErrorClass::TimeoutTotal,
                            format!("no response headers within timeouts.total ({})", t.total),
                        )
                    } else {
                        (
                            ErrorClass::TimeoutFirstToken,
                            format!(
                                "no response headers within timeouts.first_token ({})",
                                t.first_token
                            ),
                        )
                    };
                    return rec.fail(class, detail);
                }
                // A kept-alive connection the server had just closed or
                // reset: no byte of a response came, so the request is sent
                // once more on a fresh connection (counted; TTFT from the
                // scheduled time still includes the lost attempt).
                Ok(Err(e)) if attempt == 0 && lost_before_response(&e) => {
                    attempt += 1;
                    rec.retries += 1;
                    continue;
                }
                Ok(Err(e)) => {
                    let class = if out_of_descriptors(&e) {
                        ErrorClass::ClientLimit
                    } else if e.is_timeout() && e.is_connect() {
                        ErrorClass::TimeoutConnect
                    } else if e.is_connect() || lost_before_response(&e) {
                        ErrorClass::Connect
                    } else {
                        ErrorClass::Truncated
                    };
                    return rec.fail(class, error_chain(&e));
                }
                Ok(Ok(r)) => break r,
            }
        };
        let total_deadline = rec.t_send + t.total.as_std();
        let first_deadline = (rec.t_send + t.first_token.as_std()).min(total_deadline);
        let status = response.status();
        if !status.is_success() {
            // Only the head of an error body is read; the rest goes with
            // the connection (an endless 500 body costs nothing).
            let cap = usize::try_from(self.limits.max_error_body_bytes).unwrap_or(usize::MAX);
            let body = read_capped(response, cap, Instant::now() + Duration::from_secs(5)).await;
            rec.payload.received = body.len() as u64;
            let text = self.protocol.error_message(&body);
            rec.failure = Some(Failure {
                class: ErrorClass::of_status(status.as_u16()),
                detail: format!(
                    "HTTP {}{}{text}",
                    status.as_u16(),
                    if text.is_empty() { "" } else { ": " }
                ),
                status: Some(status.as_u16()),
            });
            return;
        }
        if self.protocol.streams() {
            self.read_stream(response, rec, first_deadline, total_deadline)
                .await;
        } else {
            self.read_whole(response, rec, total_deadline).await;
        }
    }

    /// Reads an event stream into `rec` until it ends, fails or times out.
    /// One function because the read loop's state (the parser, the moving
    /// deadline and its timer, the reply, whether it finished, what went
    /// wrong) is shared by every arm of the loop, and every exit stamps the
    /// record's end and class here, in one place.
    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        rec: &mut RequestRecord,
        first_deadline: Instant,
        total_deadline: Instant,
    ) {
        if let Some(ct) = response.headers().get(reqwest::header::CONTENT_TYPE) {
            if !is_event_stream(ct.as_bytes()) {
                let ct = ct.as_bytes().escape_ascii().to_string();
                let head = read_capped(response, NOT_SSE_SHOWN, first_deadline).await;
                rec.t_done = Instant::now();
                return rec.fail(
                    ErrorClass::NotSse,
                    format!(
                        "a stream was asked for but the response is {ct:?}, not text/event-stream; it begins \"{}\"",
                        head.escape_ascii()
                    ),
                );
            }
        }
        let limits = self.limits;
        let mut parser =
            SseParser::with_max_line(usize::try_from(limits.max_line_bytes).unwrap_or(usize::MAX));
        let mut finished = false;
        let mut done = false;
        let mut reply = self.reply();
        let mut problem: Option<(ErrorClass, String)> = None;
        let idle = self.timeouts.idle.as_std();
        // The arrival of the last event (not of the last read: comments
        // and partial lines do not count as the stream being alive).
        let mut last_event = rec.t_send;
        let mut events: u64 = 0;
        let mut received: u64 = 0;
        // One timer for the whole stream, moved when its deadline moves
        // (after an event), not a new one for every read.
        let timer = tokio::time::sleep_until(first_deadline.into());
        tokio::pin!(timer);
        loop {
            let deadline = if rec.events.is_empty() {
                first_deadline
            } else {
                (last_event + idle).min(total_deadline)
            };
            let due = tokio::time::Instant::from_std(deadline);
            if timer.deadline() != due {
                timer.as_mut().reset(due);
            }
            let read = tokio::select! {
                biased;
                read = response.chunk() => Ok(read),
                () = &mut timer => Err(()),
            };
            let now = Instant::now();
            let bytes: Bytes = match read {
                Err(_) => {
                    rec.t_done = now;
                    let (class, detail) =
                        self.timed_out(deadline, total_deadline, rec, now, last_event);
                    return rec.fail(class, detail);
                }
                Ok(Err(e)) => {
                    rec.t_done = now;
                    return rec.fail(
                        ErrorClass::Truncated,
                        format!("the stream broke: {}", error_chain(&e)),
                    );
                }
                Ok(Ok(None)) => {
                    let r = parser.finish(|ev| {
                        events += 1;
                        handle_event(
                            &*self.protocol,
                            ev.data,
                            now,
                            rec,
                            &mut reply,
                            &mut finished,
                            &mut done,
                            &mut problem,
                        )
                    });
                    if let Err(e) = r {
                        problem.get_or_insert((ErrorClass::Oversized, line_limit(e)));
                    }
                    rec.t_done = now;
                    break;
                }
                Ok(Ok(Some(b))) => b,
            };
            received += bytes.len() as u64;
            rec.payload.received = received;
            if received > limits.max_response_bytes {
                rec.t_done = now;
                return fail_oversized(rec, limits.max_response_bytes);
            }
            let before = events;
            let r = parser.feed(&bytes, |ev| {
                events += 1;
                handle_event(
                    &*self.protocol,
                    ev.data,
                    now,
                    rec,
                    &mut reply,
                    &mut finished,
                    &mut done,
                    &mut problem,
                )
            });
            if events != before {
                last_event = now;
            }
            if let Err(e) = r {
                problem.get_or_insert((ErrorClass::Oversized, line_limit(e)));
            }
            if events > limits.max_events && problem.is_none() && !done {
                problem = Some((
                    ErrorClass::Oversized,
                    format!(
                        "the stream sent more than load.limits.max_events ({}) events",
                        limits.max_events
                    ),
                ));
            }
            if problem.is_some() || done {
                rec.t_done = now;
                if done && problem.is_none() && self.keep_alive {
                    // The body's end (the chunked terminator) is read so
                    // the connection goes back to the pool instead of
                    // closing, on a task of its own: this request is over.
                    let on_its_way = self.returning.start();
                    tokio::spawn(drain_end(response, idle.min(DRAIN_TIME), on_its_way));
                }
                break;
            }
        }
        if let Some((class, detail)) = problem {
            rec.fail(class, detail);
        } else if rec.events.is_empty() {
            rec.fail(ErrorClass::Empty, "the stream carried no output");
        } else if !finished && !done && !self.protocol.stream_ends_at_close() {
            rec.fail(
                ErrorClass::Truncated,
                "the stream ended without a finish reason or [DONE]",
            );
        }
        settle(rec, reply, self.keep_reply, self.check.as_deref());
    }

    /// The class and sentence of a stream read that hit `deadline`.
    fn timed_out(
        &self,
        deadline: Instant,
        total_deadline: Instant,
        rec: &RequestRecord,
        now: Instant,
        last_event: Instant,
    ) -> (ErrorClass, String) {
        timeout_failure(
            self.timeouts,
            deadline == total_deadline,
            rec.events.len(),
            now.duration_since(last_event),
        )
    }
}

/// The class and sentence of a request that ran out of time: past
/// `timeouts.total` (`total`), else before its first event, else idle for
/// `idle_for` after `events` events.
pub fn timeout_failure(
    t: infer_bench_spec::Timeouts,
    total: bool,
    events: usize,
    idle_for: Duration,
) -> (ErrorClass, String) {
    if total {
        (
            ErrorClass::TimeoutTotal,
            format!(
                "the request ran past timeouts.total ({}) with {events} output events",
                t.total,
            ),
        )
    } else if events == 0 {
        (
            ErrorClass::TimeoutFirstToken,
            format!("no output within timeouts.first_token ({})", t.first_token),
        )
    } else {
        (
            ErrorClass::TimeoutIdle,
            format!(
                "no event for {:.3} s (timeouts.idle = {})",
                idle_for.as_secs_f64(),
                t.idle
            ),
        )
    }
}

impl HttpBackend {
    async fn read_whole(
        &self,
        response: reqwest::Response,
        rec: &mut RequestRecord,
        total_deadline: Instant,
    ) {
        let max = self.limits.max_response_bytes;
        let body = tokio::time::timeout_at(total_deadline.into(), async {
            let mut response = response;
            let mut body = Vec::new();
            while let Some(b) = response.chunk().await? {
                if (body.len() + b.len()) as u64 > max {
                    return Ok(None);
                }
                body.extend_from_slice(&b);
            }
            Ok::<_, reqwest::Error>(Some(body))
        })
        .await;
        if let Ok(Ok(Some(b))) = &body {
            rec.payload.received = b.len() as u64;
        }
        let now = Instant::now();
        rec.t_done = now;
        let bytes = match body {
            Err(_) => {
                return rec.fail(
                    ErrorClass::TimeoutTotal,
                    format!(
                        "the response did not complete within timeouts.total ({})",
                        self.timeouts.total
                    ),
                );
            }
            Ok(Err(e)) => {
                return rec.fail(
                    ErrorClass::Truncated,
                    format!("the response broke: {}", error_chain(&e)),
                );
            }
            Ok(Ok(None)) => return fail_oversized(rec, max),
            Ok(Ok(Some(b))) => b,
        };
        read_answer(
            self.protocol.as_ref(),
            &bytes,
            self.reply(),
            (self.keep_reply, self.check.as_deref()),
            rec,
            now,
        );
    }
}

/// Fails `rec` as an answer over `load.limits.max_response_bytes` (`max`).
fn fail_oversized(rec: &mut RequestRecord, max: u64) {
    rec.fail(
        ErrorClass::Oversized,
        format!("the response is larger than load.limits.max_response_bytes ({max} bytes)"),
    );
}

/// Reads a whole (non-streamed) answer that arrived complete at `now` into
/// `rec`: its usage, its one output event, or the class it failed with. The
/// HTTP client reads every such answer through this, and so does a driver
/// that has the answer's bytes without a socket (the simulator in virtual
/// time), so both count the same way.
pub fn read_answer(
    protocol: &dyn Protocol,
    bytes: &[u8],
    mut reply: Option<Reply>,
    (keep_reply, check): (bool, Option<&Checker>),
    rec: &mut RequestRecord,
    now: Instant,
) {
    read_body_into(protocol, bytes, &mut reply, rec, now);
    settle(rec, reply, keep_reply, check);
}

/// After a request's answer is read: an answer that `check` finds
/// invalid fails a request that had not failed otherwise (its timings
/// stay); the reply's text is kept when a conversation sends it back.
fn settle(
    rec: &mut RequestRecord,
    reply: Option<Reply>,
    keep_reply: bool,
    check: Option<&Checker>,
) {
    let Some(reply) = reply else { return };
    if let (Some(c), true) = (check, rec.ok()) {
        if let Err(e) = c.check(&reply) {
            rec.fail(ErrorClass::InvalidAnswer, e.0);
        }
    }
    if keep_reply && rec.ok() {
        rec.reply = Some(reply.text);
    }
}

fn read_body_into(
    protocol: &dyn Protocol,
    bytes: &[u8],
    reply: &mut Option<Reply>,
    rec: &mut RequestRecord,
    now: Instant,
) {
    match protocol.read_body(bytes, reply.as_mut(), Some(&mut rec.response_id)) {
        Err(e) => rec.fail(ErrorClass::Malformed, e.0),
        Ok(info) if info.error.is_some() => {
            rec.fail(ErrorClass::StreamError, info.error.unwrap_or_default())
        }
        Ok(info) => {
            if let Some(u) = info.usage {
                rec.usage = u;
            }
            rec.server_timing = info.server_timing;
            if !info.output {
                return rec.fail(ErrorClass::Empty, "the response carried no output");
            }
            rec.events.push(OutputEvent {
                at_ns: now.duration_since(rec.t_send).as_nanos() as u64,
                text_bytes: info.text_bytes,
                token_ids: info.token_ids,
                reasoning: info.reasoning,
            });
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn handle_event(
    protocol: &dyn Protocol,
    data: &[u8],
    now: Instant,
    rec: &mut RequestRecord,
    reply: &mut Option<Reply>,
    finished: &mut bool,
    done: &mut bool,
    problem: &mut Option<(ErrorClass, String)>,
) {
    if problem.is_some() || *done {
        return;
    }
    match protocol.read_event(data, reply.as_mut(), Some(&mut rec.response_id)) {
        Err(e) => *problem = Some((ErrorClass::Malformed, e.0)),
        Ok(info) => {
            if let Some(e) = info.error {
                *problem = Some((ErrorClass::StreamError, e));
                return;
            }
            if let Some(u) = info.usage {
                if u.prompt_tokens.is_some() {
                    rec.usage.prompt_tokens = u.prompt_tokens;
                }
                if u.completion_tokens.is_some() {
                    rec.usage.completion_tokens = u.completion_tokens;
                }
                if u.reasoning_tokens.is_some() {
                    rec.usage.reasoning_tokens = u.reasoning_tokens;
                }
            }
            if info.server_timing.is_some() {
                rec.server_timing = info.server_timing;
            }
            if info.output {
                rec.events.push(OutputEvent {
                    at_ns: now.duration_since(rec.t_send).as_nanos() as u64,
                    text_bytes: info.text_bytes,
                    token_ids: info.token_ids,
                    reasoning: info.reasoning,
                });
            }
            *finished |= info.finished;
            *done |= info.done;
        }
    }
}

/// Whether the connection was lost before any response came: hyper's
/// "connection closed before message completed" (the server closed a pooled
/// connection as the request went out; llama.cpp's server closes streaming
/// keep-alive connections after two responses), or a reset or abort of the
/// socket (a proxy or a restarting server). Only called before the
/// response's head, so no byte of a response had come.
fn lost_before_response(e: &reqwest::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() {
                return true;
            }
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            ) {
                return true;
            }
        }
        cur = err.source();
    }
    false
}

/// Whether an error comes from this process running out of file
/// descriptors (EMFILE: its own limit; ENFILE: the system's): an
/// `io::Error` with either code anywhere in its chain. Such a request never
/// reached the server, and saying it could not connect would blame it.
fn out_of_descriptors(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                return true;
            }
            // A custom io::Error's source skips the error it wraps.
            if let Some(inner) = io.get_ref() {
                if out_of_descriptors(inner) {
                    return true;
                }
            }
        }
        cur = err.source();
    }
    false
}

/// Most of a body read after `[DONE]` to give its connection back: a
/// server that keeps talking is left (and its connection closed) after
/// this many bytes or [`DRAIN_TIME`].
const DRAIN_BYTES: usize = 64 * 1024;
const DRAIN_TIME: Duration = Duration::from_secs(1);

/// Reads what is left of a response after `[DONE]`, at most
/// [`DRAIN_BYTES`] and for at most `within`: read to its end, the
/// connection goes back to the pool. It counts in no timing. Until then
/// (and a turn of the scheduler after, for the pool's own task to take the
/// connection back) it is counted `on_its_way`, and a request that would
/// open a connection waits for it (`connect`).
async fn drain_end(
    mut response: reqwest::Response,
    within: Duration,
    on_its_way: crate::connect::OnItsWay,
) {
    let _ = tokio::time::timeout(within, async {
        let mut left = DRAIN_BYTES;
        while let Ok(Some(b)) = response.chunk().await {
            left = left.saturating_sub(b.len());
            if left == 0 {
                break;
            }
        }
    })
    .await;
    drop(response);
    tokio::task::yield_now().await;
    drop(on_its_way);
}

/// Bytes of a body that is not an event stream shown in the `not_sse` message.
const NOT_SSE_SHOWN: usize = 80;

/// Whether a `Content-Type` is `text/event-stream` (parameters allowed).
fn is_event_stream(ct: &[u8]) -> bool {
    let essence = ct.split(|&b| b == b';').next().unwrap_or_default();
    essence
        .trim_ascii()
        .eq_ignore_ascii_case(b"text/event-stream")
}

/// The sentence of a line or event over `load.limits.max_line_bytes`.
fn line_limit(e: crate::sse::SseError) -> String {
    format!("{e} (load.limits.max_line_bytes)")
}

/// Most of a `/models` body read while opening connections: read to its
/// end, the connection goes back to the pool; a longer body is dropped with
/// its connection.
pub const WARM_BODY_BYTES: usize = 256 * 1024;

/// Why one connection could not be opened before a run.
#[derive(Debug)]
enum WarmFail {
    Http(reqwest::Error),
    TooLong,
    NoAnswer,
    Join(tokio::task::JoinError),
}

impl std::fmt::Display for WarmFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WarmFail::Http(e) => f.write_str(&error_chain(e)),
            WarmFail::TooLong => write!(f, "its body was over {WARM_BODY_BYTES} bytes"),
            WarmFail::NoAnswer => f.write_str("no answer within timeouts.connect"),
            WarmFail::Join(e) => write!(f, "{e}"),
        }
    }
}

/// One `GET` of the warm path on a connection of the pool (opened if none is idle),
/// its body read to the end so that the connection stays open.
///
/// Its first poll takes an idle connection or starts a connect; it then
/// waits until all `n` have had theirs (`started` counts them). Until then
/// no `GET` can have finished and given its connection back, so none takes
/// another's: each holds an idle one or has started a connect, and a
/// started connect ends in the pool even if its `GET` is served on a
/// connection that came back first. So `n` of them leave `n` connections.
async fn warm_one(
    client: reqwest::Client,
    url: reqwest::Url,
    started: Arc<tokio::sync::watch::Sender<usize>>,
    n: usize,
) -> Result<(), WarmFail> {
    let mut get = std::pin::pin!(client.get(url).send());
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(get.as_mut().poll(cx))).await;
    started.send_modify(|s| *s += 1);
    let sent = match first {
        std::task::Poll::Ready(r) => r,
        std::task::Poll::Pending => {
            let _ = started.subscribe().wait_for(|s| *s >= n).await;
            get.await
        }
    };
    let mut response = sent.map_err(WarmFail::Http)?;
    let mut left = WARM_BODY_BYTES;
    while let Some(b) = response.chunk().await.map_err(WarmFail::Http)? {
        left = left.checked_sub(b.len()).ok_or(WarmFail::TooLong)?;
    }
    Ok(())
}

/// Why a GET got no answer (refused, timed out, broken), in one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoAnswer(pub String);

/// A request kind's headers, less those the target sets itself.
fn kind_headers(
    protocol: &dyn Protocol,
    target: &reqwest::header::HeaderMap,
) -> Result<reqwest::header::HeaderMap, Error> {
    let mut out = reqwest::header::HeaderMap::new();
    for (k, v) in protocol.headers() {
        if target.contains_key(k) {
            continue;
        }
        let value =
            reqwest::header::HeaderValue::from_str(&v).map_err(|_| Error::HeaderValue(k.into()))?;
        out.insert(k, value);
    }
    Ok(out)
}

impl Backend for HttpBackend {
    fn prepare(&self, prompt: &Prompt) -> Prepared {
        Prepared {
            body: self.protocol.body_bytes(prompt),
            input_tokens: prompt.input_tokens,
            output_tokens: prompt.output_tokens,
            part: prompt.part,
            media: prompt.media.as_deref().map(|m| m.sent).unwrap_or_default(),
            units: self.protocol.units(prompt),
        }
    }

    async fn send(&self, req: Prepared, mut rec: RequestRecord) -> RequestRecord {
        rec.requested_input = req.input_tokens;
        rec.requested_output = req.output_tokens;
        rec.part = req.part;
        rec.media = req.media;
        rec.units = req.units;
        self.execute(req, &mut rec).await;
        if rec.t_done < rec.t_send {
            rec.t_done = Instant::now();
        }
        rec
    }

    fn read_answer(&self, body: &[u8], rec: &mut RequestRecord, at: Instant) {
        rec.t_done = at;
        let max = self.limits.max_response_bytes;
        if body.len() as u64 > max {
            return fail_oversized(rec, max);
        }
        read_answer(
            self.protocol.as_ref(),
            body,
            self.reply(),
            (self.keep_reply, self.check.as_deref()),
            rec,
            at,
        );
    }

    /// `n` concurrent `GET {base_url}/{warm_path}` (any status will do): each
    /// holds a connection of the pool until its body is read, so together
    /// they leave `n` connections open, idle, in the pool; connections a
    /// previous run left there are reused, not reopened.
    async fn warm(&self, n: usize) -> Result<(), WarmError> {
        if n == 0 {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + self.connect_timeout;
        let started = Arc::new(tokio::sync::watch::Sender::new(0usize));
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..n {
            let one = warm_one(
                self.client.clone(),
                self.warm_url.clone(),
                started.clone(),
                n,
            );
            set.spawn(async move {
                tokio::time::timeout_at(deadline, one)
                    .await
                    .unwrap_or(Err(WarmFail::NoAnswer))
            });
        }
        let mut failed = 0usize;
        let mut example = None;
        while let Some(r) = set.join_next().await {
            if let Err(e) = r.map_err(WarmFail::Join).and_then(|r| r) {
                failed += 1;
                example.get_or_insert(e.to_string());
            }
        }
        match example {
            None => Ok(()),
            Some(example) => Err(WarmError {
                failed,
                asked: n,
                path: self.warm_url.path().to_string(),
                example,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that wraps another, as hyper and reqwest wrap a connect's.
    #[derive(Debug)]
    struct Wrapped(&'static str, Box<dyn std::error::Error + Send + Sync>);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&*self.1)
        }
    }

    #[test]
    fn running_out_of_descriptors_is_found_anywhere_in_the_chain() {
        let os = |code| Box::new(std::io::Error::from_raw_os_error(code));
        let chain = |code| {
            Wrapped(
                "client error (Connect)",
                Box::new(Wrapped("tcp open error", os(code))),
            )
        };
        assert!(out_of_descriptors(&chain(libc::EMFILE)));
        assert!(out_of_descriptors(&chain(libc::ENFILE)));
        assert!(!out_of_descriptors(&chain(libc::ECONNREFUSED)));
        assert!(!out_of_descriptors(&chain(libc::ETIMEDOUT)));
        // Inside a custom io::Error, whose source() skips what it wraps.
        let custom = std::io::Error::other(std::io::Error::from_raw_os_error(libc::EMFILE));
        assert!(out_of_descriptors(&Wrapped("dns error", Box::new(custom))));
        let plain = std::io::Error::other("too many open files");
        assert!(!out_of_descriptors(&plain));
        assert_eq!(ErrorClass::ClientLimit.name(), "client_limit");
    }
}
