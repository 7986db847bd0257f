//! The HTTP client every request and control call goes through: one
//! place that installs the TLS provider, turns proxies off (a benchmark is
//! never routed through whatever the environment says) and reads bounded
//! bodies. The load's pooled client ([`http_client`]) and the small one for
//! readiness, identity and scrapes ([`control_client`]) both come from
//! here; telemetry uses them too.

use std::time::{Duration, Instant};

use crate::error::Error;

/// Settings of the HTTP client, from the target.
pub struct ClientOptions<'a> {
    pub base_url: &'a str,
    pub api_key: Option<String>,
    pub headers: &'a std::collections::BTreeMap<String, String>,
    pub tls_insecure: bool,
    pub ca_cert_pem: Option<Vec<u8>>,
    /// Idle connections kept per host; 0 keeps none (every request opens
    /// its own connection).
    pub pool_size: usize,
    pub connect_timeout: Duration,
}

/// A small HTTP client for control requests (readiness, identity, scrapes):
/// no proxies, a per-request timeout.
pub fn control_client(timeout: Duration) -> Result<reqwest::Client, Error> {
    install_crypto();
    reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .build()
        .map_err(Error::Client)
}

/// Installs the TLS crypto provider once per process (reqwest is built
/// without a default one, so every client must come through here).
fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Builds the pooled HTTP/1.1 client: keep-alive, no Nagle, no proxies.
pub fn http_client(o: &ClientOptions) -> Result<reqwest::Client, Error> {
    builder(o)?.build().map_err(Error::Client)
}

/// [`http_client`]'s settings, before it is built.
pub(crate) fn builder(o: &ClientOptions) -> Result<reqwest::ClientBuilder, Error> {
    install_crypto();
    let mut b = reqwest::Client::builder()
        .http1_only()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(o.pool_size)
        .pool_idle_timeout(Duration::from_secs(90))
        .connect_timeout(o.connect_timeout);
    if o.tls_insecure {
        b = b.tls_danger_accept_invalid_certs(true);
    }
    if let Some(pem) = &o.ca_cert_pem {
        let cert = reqwest::Certificate::from_pem(pem).map_err(Error::CaCert)?;
        b = b.add_root_certificate(cert);
    }
    Ok(b)
}

/// At most `cap` bytes of a response body, read until `deadline`; the
/// response is then dropped, and with it the connection if the body had
/// more (a body never read to its end is never pooled).
pub async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
    deadline: Instant,
) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = tokio::time::timeout_at(deadline.into(), async {
        while out.len() < cap {
            match response.chunk().await {
                Ok(Some(b)) => out.extend_from_slice(&b[..b.len().min(cap - out.len())]),
                _ => break,
            }
        }
    })
    .await;
    out
}

/// An error with its causes, on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}
