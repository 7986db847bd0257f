//! The server's Prometheus metrics: which series matter for each server
//! family, how a scrape is fetched (behind `MetricsSource`: HTTP, or a
//! scripted list of texts), what one scrape keeps, and how the scrapes of
//! a point become `ServerMetrics` (gauges as series and statistics over
//! the windows, counters as increases over the windows).
//!
//! Several label sets of one series (vLLM's `engine`, SGLang's `tp_rank`,
//! `finished_reason`...) are combined: counts and counters are summed,
//! ratios averaged. A failed scrape (refused, timed out, HTTP error,
//! malformed text) is recorded with its reason and never stops a run.

use std::collections::BTreeMap;
use std::time::Duration;

use super::error::{Error, FetchError};
use super::prom::{self, Exposition};
use super::series::{self, Span};
use infer_bench_results::telemetry::{
    CounterSeries, GaugeSeries, ScrapeError, ServerFamily, ServerHeadline, ServerMetrics,
};

/// Gauge or counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// How the label sets of one series combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    Sum,
    Mean,
}

/// What a series means, across families.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Running,
    Waiting,
    /// 0 to 1.
    KvCacheUsage,
    Preemptions,
    /// Prompt tokens looked up in the prefix cache (vLLM).
    PrefixCacheQueries,
    /// Prompt tokens found in the prefix cache (vLLM).
    PrefixCacheHits,
    /// Prompt tokens served from the cache (SGLang: part of the prompt
    /// tokens; llama.cpp: beside them).
    CachedPromptTokens,
    /// The server's own hit-rate gauge, 0 to 1 (SGLang).
    PrefixCacheHitRate,
    PromptTokens,
    GenerationTokens,
    /// Speculative decoding: verification steps that checked a draft (vLLM).
    SpecDrafts,
    /// Draft tokens proposed (vLLM).
    SpecDraftTokens,
    /// Draft tokens accepted (vLLM).
    SpecAcceptedTokens,
    /// Tokens a request gains per step, the bonus token included: the
    /// server's own gauge (SGLang).
    SpecAcceptLength,
    /// Draft tokens accepted over proposed, 0 to 1: the server's own gauge
    /// (SGLang).
    SpecAcceptRate,
}

/// A series worth recording.
#[derive(Debug, Clone, Copy)]
pub struct Tracked {
    pub family: ServerFamily,
    /// The sample name as exposed.
    pub name: &'static str,
    pub kind: Kind,
    pub agg: Agg,
    pub role: Option<Role>,
}

const fn t(
    family: ServerFamily,
    name: &'static str,
    kind: Kind,
    agg: Agg,
    role: Option<Role>,
) -> Tracked {
    Tracked {
        family,
        name,
        kind,
        agg,
        role,
    }
}

use Agg::{Mean, Sum};
use Kind::{Counter, Gauge};
use Role::*;
use ServerFamily::{Llamacpp, Sglang, Tgi, Triton, Vllm};

/// The series recorded, by family. Where a family renamed a series, both
/// names are listed, newest first; the headline takes the first present.
pub const TRACKED: &[Tracked] = &[
    // vLLM (V1 engine; V0 names where they differ).
    t(Vllm, "vllm:num_requests_running", Gauge, Sum, Some(Running)),
    t(Vllm, "vllm:num_requests_waiting", Gauge, Sum, Some(Waiting)),
    t(Vllm, "vllm:num_requests_swapped", Gauge, Sum, None),
    t(
        Vllm,
        "vllm:kv_cache_usage_perc",
        Gauge,
        Mean,
        Some(KvCacheUsage),
    ),
    t(
        Vllm,
        "vllm:gpu_cache_usage_perc",
        Gauge,
        Mean,
        Some(KvCacheUsage),
    ),
    // The built-in simulator's own check on its schedule (vLLM-named otherwise).
    t(Vllm, "infer_bench_sim_steps_total", Counter, Sum, None),
    t(Vllm, "infer_bench_sim_late_steps_total", Counter, Sum, None),
    t(
        Vllm,
        "infer_bench_sim_lag_seconds_total",
        Counter,
        Sum,
        None,
    ),
    t(
        Vllm,
        "vllm:num_preemptions_total",
        Counter,
        Sum,
        Some(Preemptions),
    ),
    t(
        Vllm,
        "vllm:prefix_cache_queries_total",
        Counter,
        Sum,
        Some(PrefixCacheQueries),
    ),
    t(
        Vllm,
        "vllm:prefix_cache_hits_total",
        Counter,
        Sum,
        Some(PrefixCacheHits),
    ),
    t(
        Vllm,
        "vllm:gpu_prefix_cache_queries_total",
        Counter,
        Sum,
        Some(PrefixCacheQueries),
    ),
    t(
        Vllm,
        "vllm:gpu_prefix_cache_hits_total",
        Counter,
        Sum,
        Some(PrefixCacheHits),
    ),
    t(
        Vllm,
        "vllm:prompt_tokens_total",
        Counter,
        Sum,
        Some(PromptTokens),
    ),
    t(
        Vllm,
        "vllm:generation_tokens_total",
        Counter,
        Sum,
        Some(GenerationTokens),
    ),
    t(Vllm, "vllm:request_success_total", Counter, Sum, None),
    // Speculative decoding (V1 engine), where a draft model or method runs.
    t(
        Vllm,
        "vllm:spec_decode_num_drafts_total",
        Counter,
        Sum,
        Some(SpecDrafts),
    ),
    t(
        Vllm,
        "vllm:spec_decode_num_draft_tokens_total",
        Counter,
        Sum,
        Some(SpecDraftTokens),
    ),
    t(
        Vllm,
        "vllm:spec_decode_num_accepted_tokens_total",
        Counter,
        Sum,
        Some(SpecAcceptedTokens),
    ),
    // SGLang.
    t(Sglang, "sglang:num_running_reqs", Gauge, Sum, Some(Running)),
    t(Sglang, "sglang:num_queue_reqs", Gauge, Sum, Some(Waiting)),
    t(
        Sglang,
        "sglang:token_usage",
        Gauge,
        Mean,
        Some(KvCacheUsage),
    ),
    t(Sglang, "sglang:num_used_tokens", Gauge, Sum, None),
    t(
        Sglang,
        "sglang:cache_hit_rate",
        Gauge,
        Mean,
        Some(PrefixCacheHitRate),
    ),
    t(Sglang, "sglang:gen_throughput", Gauge, Sum, None),
    t(Sglang, "sglang:total_retracted_reqs", Gauge, Sum, None),
    t(
        Sglang,
        "sglang:prompt_tokens_total",
        Counter,
        Sum,
        Some(PromptTokens),
    ),
    t(
        Sglang,
        "sglang:generation_tokens_total",
        Counter,
        Sum,
        Some(GenerationTokens),
    ),
    t(
        Sglang,
        "sglang:cached_tokens_total",
        Counter,
        Sum,
        Some(CachedPromptTokens),
    ),
    t(Sglang, "sglang:num_requests_total", Counter, Sum, None),
    t(
        Sglang,
        "sglang:spec_accept_length",
        Gauge,
        Mean,
        Some(SpecAcceptLength),
    ),
    t(
        Sglang,
        "sglang:spec_accept_rate",
        Gauge,
        Mean,
        Some(SpecAcceptRate),
    ),
    // Text Generation Inference (counters without _total; token counts
    // from the sums of its histograms).
    t(Tgi, "tgi_batch_current_size", Gauge, Sum, Some(Running)),
    t(Tgi, "tgi_queue_size", Gauge, Sum, Some(Waiting)),
    t(Tgi, "tgi_batch_current_max_tokens", Gauge, Sum, None),
    t(Tgi, "tgi_request_success", Counter, Sum, None),
    t(
        Tgi,
        "tgi_request_input_length_sum",
        Counter,
        Sum,
        Some(PromptTokens),
    ),
    t(
        Tgi,
        "tgi_request_generated_tokens_sum",
        Counter,
        Sum,
        Some(GenerationTokens),
    ),
    // llama.cpp's llama-server (--metrics).
    t(
        Llamacpp,
        "llamacpp:requests_processing",
        Gauge,
        Sum,
        Some(Running),
    ),
    t(
        Llamacpp,
        "llamacpp:requests_deferred",
        Gauge,
        Sum,
        Some(Waiting),
    ),
    t(
        Llamacpp,
        "llamacpp:kv_cache_usage_ratio",
        Gauge,
        Mean,
        Some(KvCacheUsage),
    ),
    t(Llamacpp, "llamacpp:kv_cache_tokens", Gauge, Sum, None),
    t(
        Llamacpp,
        "llamacpp:n_busy_slots_per_decode",
        Gauge,
        Mean,
        None,
    ),
    t(
        Llamacpp,
        "llamacpp:prompt_tokens_total",
        Counter,
        Sum,
        Some(PromptTokens),
    ),
    t(
        Llamacpp,
        "llamacpp:tokens_predicted_total",
        Counter,
        Sum,
        Some(GenerationTokens),
    ),
    t(
        Llamacpp,
        "llamacpp:prompt_tokens_cached_total",
        Counter,
        Sum,
        Some(CachedPromptTokens),
    ),
    t(Llamacpp, "llamacpp:n_decode_total", Counter, Sum, None),
    // Triton Inference Server: counters without _total, summed over its
    // models (the point's own model is split exactly by its statistics,
    // `/v2/models/{model}/stats`); its GPU gauges where it has GPUs.
    t(
        Triton,
        "nv_inference_pending_request_count",
        Gauge,
        Sum,
        Some(Waiting),
    ),
    t(Triton, "nv_inference_request_success", Counter, Sum, None),
    t(Triton, "nv_inference_request_failure", Counter, Sum, None),
    t(Triton, "nv_inference_count", Counter, Sum, None),
    t(Triton, "nv_inference_exec_count", Counter, Sum, None),
    t(
        Triton,
        "nv_inference_request_duration_us",
        Counter,
        Sum,
        None,
    ),
    t(Triton, "nv_inference_queue_duration_us", Counter, Sum, None),
    t(
        Triton,
        "nv_inference_compute_input_duration_us",
        Counter,
        Sum,
        None,
    ),
    t(
        Triton,
        "nv_inference_compute_infer_duration_us",
        Counter,
        Sum,
        None,
    ),
    t(
        Triton,
        "nv_inference_compute_output_duration_us",
        Counter,
        Sum,
        None,
    ),
    t(Triton, "nv_gpu_utilization", Gauge, Mean, None),
    t(Triton, "nv_gpu_memory_used_bytes", Gauge, Sum, None),
    t(Triton, "nv_gpu_memory_total_bytes", Gauge, Sum, None),
    t(Triton, "nv_gpu_power_usage", Gauge, Sum, None),
];

/// What one successful scrape keeps: the value of each tracked series present.
pub type Values = BTreeMap<&'static str, f64>;

/// The tracked series of an exposition, label sets combined. Only finite
/// numbers are kept: `NaN` and `±Inf` samples are left out (the text
/// format allows them; results cannot hold them), and so is a series whose
/// label sets add up past what a float holds.
pub fn extract(e: &Exposition) -> Values {
    extract_for(e, None)
}

/// [`extract`], with a Triton's per-model series (those labelled `model`)
/// taken only for `model`, the point's own, when it is given: a Triton
/// serving several models counts each apart, and the others' requests
/// are not the point's. A series none of whose samples is the point's
/// model is absent.
pub fn extract_for(e: &Exposition, model: Option<&str>) -> Values {
    let mut out = Values::new();
    for tr in TRACKED {
        let per_model = |s: &&prom::Sample| {
            tr.family != ServerFamily::Triton
                || match (model, s.labels.iter().find(|(k, _)| k == "model")) {
                    (Some(m), Some((_, v))) => v == m,
                    _ => true,
                }
        };
        let v: Vec<f64> = e
            .samples_of(tr.name)
            .filter(per_model)
            .map(|s| s.value)
            .filter(|v| v.is_finite())
            .collect();
        if v.is_empty() {
            continue;
        }
        let sum: f64 = v.iter().sum();
        let value = match tr.agg {
            Agg::Sum => sum,
            Agg::Mean => sum / v.len() as f64,
        };
        if value.is_finite() {
            out.insert(tr.name, value);
        }
    }
    out
}

/// Statistics only where every figure is a finite number: huge values can
/// add up to infinity, and results must not hold one.
fn finite_stats(
    s: Option<infer_bench_results::telemetry::SeriesStats>,
) -> Option<infer_bench_results::telemetry::SeriesStats> {
    s.filter(|s| {
        [s.mean, s.min, s.p50, s.p95, s.max]
            .iter()
            .all(|v| v.is_finite())
    })
}

/// The family most of the present series belong to.
pub fn detect_family<'a>(present: impl IntoIterator<Item = &'a str>) -> Option<ServerFamily> {
    let mut votes: BTreeMap<&'static str, (ServerFamily, usize)> = BTreeMap::new();
    for name in present {
        if let Some(tr) = TRACKED.iter().find(|t| t.name == name) {
            votes.entry(tr.family.name()).or_insert((tr.family, 0)).1 += 1;
        }
    }
    votes.into_values().max_by_key(|v| v.1).map(|v| v.0)
}

/// Where scrapes come from.
pub trait MetricsSource: Send {
    /// The exposition text, or why there is none.
    fn fetch(&mut self) -> Result<String, Error>;
}

/// Parses a fetched text into the tracked values.
pub fn scrape_once(src: &mut dyn MetricsSource) -> Result<Values, Error> {
    scrape_model(src, None)
}

/// [`scrape_once`], a Triton's per-model series kept for `model` only
/// ([`extract_for`]).
pub fn scrape_model(src: &mut dyn MetricsSource, model: Option<&str>) -> Result<Values, Error> {
    let text = src.fetch()?;
    let e = prom::parse(&text).map_err(|source| Error::Malformed { url: None, source })?;
    Ok(extract_for(&e, model))
}

/// The largest metrics text accepted.
const MAX_BODY_BYTES: usize = 16 << 20;

/// GETs a metrics URL over HTTP(S) with a runtime of its own, so scraping
/// never shares an executor with the load.
pub struct HttpMetrics {
    url: String,
    timeout: Duration,
    rt: tokio::runtime::Runtime,
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
}

/// How to reach a metrics URL: the target's TLS settings, and the
/// credentials the target's requests carry where they may go.
#[derive(Debug, Clone, Default)]
pub struct ScrapeAccess {
    pub tls_insecure: bool,
    pub ca_cert_pem: Option<Vec<u8>>,
    pub headers: BTreeMap<String, String>,
    pub api_key: Option<String>,
}

impl ScrapeAccess {
    /// What a scrape of `metrics_url` takes from `target`, whose requests
    /// go to `base_url`: its TLS settings (`tls_insecure`, `ca_cert`)
    /// always; its headers and API key in full when the metrics URL is on
    /// the same host and port as `base_url`. On another host (a separate
    /// exporter, a sidecar) the credentials stay home: the API key,
    /// `Authorization`, `Proxy-Authorization`, `Cookie` and any header whose
    /// name says it holds a key, token, secret or password are not sent;
    /// other headers (routing, tenant) are. A `ca_cert` that cannot be read
    /// is an error, never a silent fallback to the system roots.
    pub fn of_target(
        target: &infer_bench_spec::Target,
        base_url: &str,
        metrics_url: &str,
    ) -> Result<ScrapeAccess, Error> {
        let ca_cert_pem = match &target.ca_cert {
            Some(path) => Some(std::fs::read(path).map_err(|source| Error::CaCert {
                path: path.clone(),
                source,
            })?),
            None => None,
        };
        let same = same_origin(base_url, metrics_url);
        let headers = target
            .headers
            .iter()
            .filter(|(k, _)| same || !credential_header(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let api_key = if same {
            target
                .api_key_env
                .as_ref()
                .and_then(|v| std::env::var(v).ok())
        } else {
            None
        };
        Ok(ScrapeAccess {
            tls_insecure: target.tls_insecure,
            ca_cert_pem,
            headers,
            api_key,
        })
    }
}

/// Whether two URLs reach the same host and port (scheme default ports
/// filled in); `false` when either does not parse.
fn same_origin(a: &str, b: &str) -> bool {
    match (reqwest::Url::parse(a), reqwest::Url::parse(b)) {
        (Ok(a), Ok(b)) => {
            a.host_str().map(str::to_ascii_lowercase) == b.host_str().map(str::to_ascii_lowercase)
                && a.port_or_known_default() == b.port_or_known_default()
        }
        _ => false,
    }
}

/// A header whose value is a credential, by its name.
fn credential_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "authorization" | "proxy-authorization" | "cookie"
    ) || [
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "auth",
        "credential",
        "signature",
    ]
    .iter()
    .any(|w| n.contains(w))
}

impl HttpMetrics {
    /// A scraper of `url` with no credentials and the system's TLS roots;
    /// each scrape gives up after `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Result<HttpMetrics, Error> {
        HttpMetrics::with_access(url, timeout, &ScrapeAccess::default())
    }

    /// A scraper of a target's metrics URL (see [`ScrapeAccess::of_target`]).
    pub fn for_target(
        url: &str,
        target: &infer_bench_spec::Target,
        base_url: &str,
        timeout: Duration,
    ) -> Result<HttpMetrics, Error> {
        HttpMetrics::with_access(
            url,
            timeout,
            &ScrapeAccess::of_target(target, base_url, url)?,
        )
    }

    /// A scraper of `url` that reaches it as `access` says.
    pub fn with_access(
        url: &str,
        timeout: Duration,
        access: &ScrapeAccess,
    ) -> Result<HttpMetrics, Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        let opts = infer_bench_protocol::ClientOptions {
            base_url: url,
            api_key: access.api_key.clone(),
            headers: &access.headers,
            tls_insecure: access.tls_insecure,
            ca_cert_pem: access.ca_cert_pem.clone(),
            pool_size: 1,
            connect_timeout: timeout,
        };
        let client = {
            let _guard = rt.enter();
            infer_bench_protocol::client::http_client(&opts)?
        };
        let headers = request_headers(&access.headers, access.api_key.as_deref())?;
        Ok(HttpMetrics {
            url: url.to_string(),
            timeout,
            rt,
            client,
            headers,
        })
    }
}

/// The headers every scrape sends.
fn request_headers(
    headers: &BTreeMap<String, String>,
    api_key: Option<&str>,
) -> Result<reqwest::header::HeaderMap, Error> {
    use infer_bench_protocol::Error as Refused;
    use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name =
            HeaderName::from_bytes(k.as_bytes()).map_err(|_| Refused::HeaderName(k.clone()))?;
        let mut value = HeaderValue::from_str(v).map_err(|_| Refused::HeaderValue(k.clone()))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    if let Some(key) = api_key {
        let mut v = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| Refused::ApiKey)?;
        v.set_sensitive(true);
        map.insert(AUTHORIZATION, v);
    }
    Ok(map)
}

impl MetricsSource for HttpMetrics {
    fn fetch(&mut self) -> Result<String, Error> {
        let url = &self.url;
        let failed = |problem| Error::Fetch {
            url: url.clone(),
            problem,
        };
        let req = self
            .client
            .get(url)
            .headers(self.headers.clone())
            .header(reqwest::header::ACCEPT, "text/plain;version=0.0.4")
            .timeout(self.timeout);
        self.rt.block_on(async {
            let mut resp = req.send().await.map_err(|e| {
                failed(if e.is_timeout() {
                    FetchError::TimedOut
                } else if e.is_connect() {
                    FetchError::Connect
                } else {
                    FetchError::Request(e)
                })
            })?;
            if !resp.status().is_success() {
                return Err(failed(FetchError::Status(resp.status())));
            }
            let mut body = Vec::new();
            while let Some(chunk) = resp
                .chunk()
                .await
                .map_err(|e| failed(FetchError::BodyBroke(e)))?
            {
                body.extend_from_slice(&chunk);
                if body.len() > MAX_BODY_BYTES {
                    return Err(failed(FetchError::TooLarge));
                }
            }
            String::from_utf8(body).map_err(|_| failed(FetchError::NotUtf8))
        })
    }
}

/// Texts played back in order (the last repeats), or failures (the
/// sentence each says), for tests.
pub struct ScriptedMetrics {
    pub texts: Vec<Result<String, &'static str>>,
    pub calls: usize,
}

impl MetricsSource for ScriptedMetrics {
    fn fetch(&mut self) -> Result<String, Error> {
        let r = self
            .texts
            .get(self.calls)
            .or_else(|| self.texts.last())
            .cloned()
            .unwrap_or(Err("no script"))
            .map_err(Error::Scripted);
        self.calls += 1;
        r
    }
}

/// Failed scrapes kept as examples.
const MAX_ERRORS: usize = 5;

/// The scrapes of a point (`t_s` on the point's clock) as results.
pub fn summarize(
    url: &str,
    interval_s: f64,
    scrapes: &[(f64, Result<Values, Error>)],
    windows: &[Span],
) -> ServerMetrics {
    let ok: Vec<(f64, &Values)> = scrapes
        .iter()
        .filter_map(|(t, r)| r.as_ref().ok().map(|v| (*t, v)))
        .collect();
    let failed: Vec<(f64, &Error)> = scrapes
        .iter()
        .filter_map(|(t, r)| r.as_ref().err().map(|e| (*t, e)))
        .collect();
    let t_s: Vec<f64> = ok.iter().map(|(t, _)| *t).collect();
    let present: Vec<&'static str> = TRACKED
        .iter()
        .map(|tr| tr.name)
        .filter(|n| ok.iter().any(|(_, v)| v.contains_key(n)))
        .collect();
    let column =
        |name: &str| -> Vec<Option<f64>> { ok.iter().map(|(_, v)| v.get(name).copied()).collect() };
    let mut gauges = BTreeMap::new();
    let mut counters = BTreeMap::new();
    for tr in TRACKED.iter().filter(|tr| present.contains(&tr.name)) {
        let values = column(tr.name);
        match tr.kind {
            Kind::Gauge => {
                gauges.insert(
                    tr.name.to_string(),
                    GaugeSeries {
                        stats: finite_stats(series::window_stats(
                            &t_s,
                            values.iter().copied(),
                            windows,
                        )),
                        values,
                    },
                );
            }
            Kind::Counter => {
                let points: Vec<(f64, f64)> = t_s
                    .iter()
                    .zip(&values)
                    .filter_map(|(t, v)| v.map(|v| (*t, v)))
                    .collect();
                let per_window: Option<Vec<(f64, f64)>> = windows
                    .iter()
                    .map(|w| series::covering_increase(&points, *w))
                    .collect();
                let (delta, span_s) = match per_window {
                    Some(v) if !v.is_empty() => (
                        Some(v.iter().map(|x| x.0).sum::<f64>()).filter(|d| d.is_finite()),
                        Some(v.iter().map(|x| x.1).sum::<f64>()).filter(|d| d.is_finite()),
                    ),
                    _ => (None, None),
                };
                // Increase since the first scrape, resets handled.
                let mut since = Vec::with_capacity(values.len());
                let mut seen: Vec<f64> = Vec::new();
                for v in &values {
                    since.push(
                        v.map(|x| {
                            seen.push(x);
                            series::increase(seen.iter().copied())
                        })
                        .filter(|x| x.is_finite()),
                    );
                }
                counters.insert(
                    tr.name.to_string(),
                    CounterSeries {
                        delta,
                        span_s,
                        values: since,
                    },
                );
            }
        }
    }
    let family = detect_family(present.iter().copied());
    let headline = headline(family, &gauges, &counters);
    ServerMetrics {
        url: url.to_string(),
        family,
        interval_s,
        scrapes_ok: ok.len() as u64,
        scrapes_failed: failed.len() as u64,
        errors: failed
            .iter()
            .take(MAX_ERRORS)
            .map(|(t, e)| ScrapeError {
                t_s: *t,
                message: e.to_string(),
            })
            .collect(),
        headline,
        t_s,
        gauges,
        counters,
    }
}

/// The server's KV-cache usage gauge (0 to 1), whatever its family calls it.
pub fn kv_cache_gauge(sm: &ServerMetrics) -> Option<&GaugeSeries> {
    first(Role::KvCacheUsage, &sm.gauges)
}

/// The first tracked series with `role` that was recorded.
fn first<T>(role: Role, map: &BTreeMap<String, T>) -> Option<&T> {
    TRACKED
        .iter()
        .filter(|t| t.role == Some(role))
        .find_map(|t| map.get(t.name))
}

fn headline(
    family: Option<ServerFamily>,
    gauges: &BTreeMap<String, GaugeSeries>,
    counters: &BTreeMap<String, CounterSeries>,
) -> ServerHeadline {
    let gauge = |r: Role| first(r, gauges).and_then(|g| g.stats);
    let delta = |r: Role| first(r, counters).and_then(|c| c.delta);
    let prompt = delta(PromptTokens);
    let hits = delta(PrefixCacheHits);
    let queries = delta(PrefixCacheQueries);
    let cached = delta(CachedPromptTokens);
    let ratio = |num: f64, den: f64| Some(num / den).filter(|r| den > 0.0 && r.is_finite());
    let prefix = match (hits, queries, cached, prompt) {
        (Some(h), Some(q), _, _) => ratio(h, q),
        // llama.cpp counts prompt tokens without the cached ones.
        (_, _, Some(c), Some(p)) if family == Some(Llamacpp) => ratio(c, p + c),
        (_, _, Some(c), Some(p)) => ratio(c, p),
        _ => gauge(PrefixCacheHitRate).map(|s| s.mean),
    };
    // Speculative decoding: vLLM's counters over the windows (its own
    // definitions: accepted over proposed; 1 + accepted per draft, the
    // bonus token counted), else SGLang's gauges.
    let (drafts, proposed, accepted) = (
        delta(SpecDrafts),
        delta(SpecDraftTokens),
        delta(SpecAcceptedTokens),
    );
    let spec_acceptance_rate = match (accepted, proposed) {
        (Some(a), Some(p)) => ratio(a, p),
        _ => gauge(SpecAcceptRate).map(|s| s.mean),
    };
    let spec_accept_length = match (accepted, drafts) {
        (Some(a), Some(d)) => ratio(a, d).map(|r| 1.0 + r),
        _ => gauge(SpecAcceptLength).map(|s| s.mean),
    };
    ServerHeadline {
        running: gauge(Running),
        waiting: gauge(Waiting),
        kv_cache_usage_ratio: gauge(KvCacheUsage),
        preemptions: delta(Preemptions),
        prefix_cache_hit_ratio: prefix,
        prompt_tokens: prompt,
        generation_tokens: delta(GenerationTokens),
        spec_acceptance_rate,
        spec_accept_length,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(headers: &[(&str, &str)], ca_cert: Option<&str>) -> infer_bench_spec::Target {
        let mut t: infer_bench_spec::Target = serde_json::from_value(serde_json::json!({
            "name": "t",
            "kind": "openai",
            "base_url": "https://api.example:8443/v1",
            "tls_insecure": true,
        }))
        .unwrap();
        t.headers = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        t.ca_cert = ca_cert.map(str::to_string);
        t
    }

    #[test]
    fn a_scrape_takes_the_targets_tls_and_credentials_only_to_its_host() {
        let t = target(
            &[
                ("Authorization", "Bearer k"),
                ("X-Api-Key", "k2"),
                ("X-Tenant", "a"),
            ],
            None,
        );
        let same = ScrapeAccess::of_target(
            &t,
            "https://api.example:8443/v1",
            "https://API.example:8443/metrics",
        )
        .unwrap();
        assert!(same.tls_insecure);
        assert_eq!(same.headers.len(), 3);
        let other = ScrapeAccess::of_target(
            &t,
            "https://api.example:8443/v1",
            "https://api.example:9090/metrics",
        )
        .unwrap();
        assert!(other.tls_insecure, "TLS settings go everywhere");
        assert_eq!(other.headers.keys().collect::<Vec<_>>(), ["X-Tenant"]);
        assert_eq!(other.api_key, None);
    }

    #[test]
    fn an_unreadable_ca_cert_stops_the_scraper() {
        let t = target(&[], Some("/nonexistent/ca.pem"));
        let e = ScrapeAccess::of_target(&t, "https://h/v1", "https://h/metrics").unwrap_err();
        assert!(
            matches!(&e, Error::CaCert { path, .. } if path == "/nonexistent/ca.pem"),
            "{e}"
        );
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn a_tritons_per_model_series_are_the_points_models_only() {
        let text = "\
# TYPE nv_inference_request_success counter
nv_inference_request_success{model=\"resnet\",version=\"1\"} 40
nv_inference_request_success{model=\"bert\",version=\"1\"} 7
nv_inference_request_success{model=\"bert\",version=\"2\"} 3
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model=\"resnet\",version=\"1\"} 2
nv_inference_pending_request_count{model=\"bert\",version=\"1\"} 5
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid=\"GPU-a\"} 0.5
";
        let e = prom::parse(text).unwrap();
        let all = extract(&e);
        assert_eq!(all["nv_inference_request_success"], 50.0);
        assert_eq!(all["nv_inference_pending_request_count"], 7.0);
        let bert = extract_for(&e, Some("bert"));
        // Every version of the model, no other model.
        assert_eq!(bert["nv_inference_request_success"], 10.0);
        assert_eq!(bert["nv_inference_pending_request_count"], 5.0);
        // Series without a model label (the GPUs) are the server's.
        assert_eq!(bert["nv_gpu_utilization"], 0.5);
        // A model the server does not count: its series are absent.
        let none = extract_for(&e, Some("yolo"));
        assert!(
            !none.contains_key("nv_inference_request_success"),
            "{none:?}"
        );
        assert_eq!(none["nv_gpu_utilization"], 0.5);
    }

    fn fixture(path: &str) -> Values {
        let text = std::fs::read_to_string(format!(
            "{}/../../tests/fixtures/{path}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        extract(&prom::parse(&text).unwrap())
    }

    #[test]
    fn vllm_fixture_values() {
        let v = fixture("prometheus/vllm.prom");
        assert_eq!(v["vllm:num_requests_running"], 32.0);
        assert_eq!(v["vllm:num_requests_waiting"], 4.0);
        assert_eq!(v["vllm:kv_cache_usage_perc"], 0.4113924050632911);
        assert_eq!(v["vllm:generation_tokens_total"], 128000.0);
        // Three finished_reason label sets, summed.
        assert_eq!(v["vllm:request_success_total"], 1000.0);
        assert!(!v.contains_key("vllm:gpu_cache_usage_perc"));
        assert_eq!(detect_family(v.keys().copied()), Some(Vllm));
    }

    #[test]
    fn sglang_fixture_values() {
        let v = fixture("prometheus/sglang.prom");
        assert_eq!(v["sglang:num_running_reqs"], 31.0);
        assert_eq!(v["sglang:num_queue_reqs"], 2.0);
        assert_eq!(v["sglang:token_usage"], 0.04);
        assert_eq!(v["sglang:cached_tokens_total"], 96256.0);
        assert_eq!(detect_family(v.keys().copied()), Some(Sglang));
    }

    #[test]
    fn tgi_fixture_values() {
        let v = fixture("prometheus/tgi.prom");
        assert_eq!(v["tgi_batch_current_size"], 29.0);
        assert_eq!(v["tgi_queue_size"], 3.0);
        assert_eq!(v["tgi_request_generated_tokens_sum"], 128000.0);
        assert_eq!(detect_family(v.keys().copied()), Some(Tgi));
    }

    #[test]
    fn recorded_llama_server_values() {
        let v = fixture("llama-server/metrics.prom");
        assert_eq!(v["llamacpp:tokens_predicted_total"], 32.0);
        assert_eq!(v["llamacpp:prompt_tokens_total"], 36.0);
        assert_eq!(v["llamacpp:prompt_tokens_cached_total"], 1.0);
        assert_eq!(v["llamacpp:requests_processing"], 0.0);
        assert_eq!(detect_family(v.keys().copied()), Some(Llamacpp));
    }

    fn text(running: f64, kv: f64, gen_total: f64, preempt: f64) -> String {
        format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{engine=\"0\"}} {running}\n\
             vllm:kv_cache_usage_perc{{engine=\"0\"}} {kv}\n\
             vllm:generation_tokens_total{{engine=\"0\"}} {gen_total}\n\
             vllm:num_preemptions_total{{engine=\"0\"}} {preempt}\n\
             vllm:prefix_cache_queries_total 100\nvllm:prefix_cache_hits_total 25\n"
        )
    }

    #[test]
    fn scrapes_become_series_deltas_and_headlines() {
        let mut src = ScriptedMetrics {
            texts: vec![
                Ok(text(0.0, 0.0, 1000.0, 2.0)),
                Ok(text(8.0, 0.5, 1500.0, 2.0)),
                Err("GET http://x/metrics: cannot connect"),
                Ok(text(8.0, 0.7, 2500.0, 5.0)),
                Ok("garbage here\n".into()),
                Ok(text(0.0, 0.1, 2600.0, 5.0)),
            ],
            calls: 0,
        };
        let scrapes: Vec<(f64, Result<Values, Error>)> = (0..6)
            .map(|i| (i as f64 * 0.5, scrape_once(&mut src)))
            .collect();
        // Window from 0.6 s to 1.6 s: covered by the scrapes at 0.5 and 2.5.
        let w = [Span {
            start_s: 0.6,
            end_s: 1.6,
        }];
        let m = summarize("http://x/metrics", 0.5, &scrapes, &w);
        assert_eq!(m.family, Some(Vllm));
        assert_eq!((m.scrapes_ok, m.scrapes_failed), (4, 2));
        assert!(m.errors[1].message.contains("malformed"), "{:?}", m.errors);
        assert_eq!(m.t_s, vec![0.0, 0.5, 1.5, 2.5]);
        let generated = &m.counters["vllm:generation_tokens_total"];
        assert_eq!(generated.delta, Some(1100.0)); // 2600 - 1500
        assert_eq!(generated.span_s, Some(2.0));
        assert_eq!(
            generated.values,
            vec![Some(0.0), Some(500.0), Some(1500.0), Some(1600.0)]
        );
        let running = &m.gauges["vllm:num_requests_running"];
        assert_eq!(
            running.values,
            vec![Some(0.0), Some(8.0), Some(8.0), Some(0.0)]
        );
        // Only the scrape at 1.5 s lies inside the window.
        assert_eq!(running.stats.unwrap().count, 1);
        assert_eq!(m.headline.running.unwrap().max, 8.0);
        assert_eq!(m.headline.kv_cache_usage_ratio.unwrap().mean, 0.7);
        assert_eq!(m.headline.preemptions, Some(3.0));
        assert_eq!(m.headline.generation_tokens, Some(1100.0));
        // Queries and hits did not move: no ratio to speak of.
        assert_eq!(m.headline.prefix_cache_hit_ratio, None);
    }

    #[test]
    fn speculative_decoding_from_counters_or_gauges() {
        let w = [Span {
            start_s: 0.0,
            end_s: 1.0,
        }];
        let at = |t: f64, v: &[(&'static str, f64)]| (t, Ok(Values::from_iter(v.iter().copied())));
        // vLLM: 40 drafts of 4 tokens, 100 accepted over the window.
        let vllm = [
            at(
                0.0,
                &[
                    ("vllm:spec_decode_num_drafts_total", 10.0),
                    ("vllm:spec_decode_num_draft_tokens_total", 40.0),
                    ("vllm:spec_decode_num_accepted_tokens_total", 30.0),
                ],
            ),
            at(
                1.0,
                &[
                    ("vllm:spec_decode_num_drafts_total", 50.0),
                    ("vllm:spec_decode_num_draft_tokens_total", 200.0),
                    ("vllm:spec_decode_num_accepted_tokens_total", 130.0),
                ],
            ),
        ];
        let m = summarize("u", 1.0, &vllm, &w);
        assert_eq!(m.headline.spec_acceptance_rate, Some(100.0 / 160.0));
        assert_eq!(m.headline.spec_accept_length, Some(1.0 + 100.0 / 40.0));
        // SGLang: its own gauges, averaged.
        let sglang = [
            at(
                0.0,
                &[
                    ("sglang:spec_accept_length", 2.5),
                    ("sglang:spec_accept_rate", 0.4),
                ],
            ),
            at(
                1.0,
                &[
                    ("sglang:spec_accept_length", 3.5),
                    ("sglang:spec_accept_rate", 0.6),
                ],
            ),
        ];
        let m = summarize("u", 1.0, &sglang, &w);
        assert_eq!(m.headline.spec_accept_length, Some(3.0));
        assert_eq!(m.headline.spec_acceptance_rate, Some(0.5));
        // No drafts in the window (speculation off, or idle): nothing to say.
        let counters = [
            ("vllm:spec_decode_num_drafts_total", 10.0),
            ("vllm:spec_decode_num_draft_tokens_total", 40.0),
        ];
        let idle = [at(0.0, &counters), at(1.0, &counters)];
        let m = summarize("u", 1.0, &idle, &w);
        assert_eq!(m.headline.spec_acceptance_rate, None);
        assert_eq!(m.headline.spec_accept_length, None);
    }

    #[test]
    fn prefix_cache_ratio_per_family() {
        let one = |name: &'static str, v0: f64, v1: f64| {
            [(0.0, v0), (1.0, v1)].map(|(t, v)| (t, Ok(Values::from([(name, v)]))))
        };
        let merge = |a: [(f64, Result<Values, Error>); 2], b: [(f64, Result<Values, Error>); 2]| {
            a.into_iter()
                .zip(b)
                .map(|((t, x), (_, y))| {
                    let mut x = x.unwrap();
                    x.extend(y.unwrap());
                    (t, Ok(x))
                })
                .collect::<Vec<_>>()
        };
        let w = [Span {
            start_s: 0.0,
            end_s: 1.0,
        }];
        let llama = merge(
            one("llamacpp:prompt_tokens_total", 0.0, 300.0),
            one("llamacpp:prompt_tokens_cached_total", 0.0, 100.0),
        );
        let m = summarize("u", 1.0, &llama, &w);
        assert_eq!(m.headline.prefix_cache_hit_ratio, Some(0.25));
        let sglang = merge(
            one("sglang:prompt_tokens_total", 0.0, 400.0),
            one("sglang:cached_tokens_total", 0.0, 100.0),
        );
        let m = summarize("u", 1.0, &sglang, &w);
        assert_eq!(m.headline.prefix_cache_hit_ratio, Some(0.25));
    }
}
