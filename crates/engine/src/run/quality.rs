//! The quality phase (`[quality]`): once per server (target, model,
//! precision), after it is up and before its points' timed runs, the
//! quality prompts are asked greedily and the answers kept ([`ask`]).
//! After each server, and when the run ends, every point gets its
//! server's agreement with the reference server's answers and the quality
//! SLOs are judged on it ([`settle`]). Nothing of the phase enters a
//! point's latency or throughput figures.
//!
//! The prompts are the tool's own: a seeded set, the same for every
//! server of the run, whatever its precision ([`PromptSet`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use infer_bench_protocol::answer::{self, AnswerApi, AnswerRequest};
use infer_bench_protocol::{ClientOptions, client};
use infer_bench_results::agreement::{Z95, agreement_of, wilson};
use infer_bench_results::outside::clip;
use infer_bench_results::quality::{
    AccuracyResult, AgreementResult, Answer, MAX_EXAMPLE_BYTES, MAX_EXAMPLES, MAX_TEXT_BYTES,
    MAX_TOKEN_BYTES, MAX_TOP, PointQuality, QualityExample,
};
use infer_bench_results::{Outside, Results};
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::raw::QualityApi;
use infer_bench_spec::{Quality, QualityReference, Spec};
use sha2::{Digest, Sha256};

use super::context::Interrupt;
use super::servers::Server;

/// A server, as the quality phase knows it: (target, model, precision).
pub(super) type ServerKey = (String, String, Option<String>);

/// The server a point runs on.
pub(super) fn key_of(cfg: &PointConfig) -> ServerKey {
    (
        cfg.target.name.clone(),
        cfg.model.name.clone(),
        cfg.precision.as_ref().map(|p| p.name.clone()),
    )
}

/// `target/model/precision`, as results name a server.
fn label(key: &ServerKey) -> String {
    let mut s = format!("{}/{}", key.0, key.1);
    if let Some(p) = &key.2 {
        s.push('/');
        s.push_str(p);
    }
    s
}

/// The server whose answers `key`'s are compared with, if any.
fn reference_of(q: &Quality, key: &ServerKey) -> Option<ServerKey> {
    Some(match q.reference.as_ref()? {
        QualityReference::Precision(p) => (key.0.clone(), key.1.clone(), Some(p.clone())),
        QualityReference::Target(t) => (t.clone(), key.1.clone(), key.2.clone()),
    })
}

/// What the prompts are about and how they ask: every prompt is one of
/// each, so that answers are ordinary text of a few sentences.
const TOPICS: &[&str] = &[
    "how a refrigerator keeps food cold",
    "why the sky is blue",
    "how vaccines train the immune system",
    "what a hash table is",
    "how tides are caused by the moon",
    "why bread rises",
    "how a bicycle stays upright",
    "what inflation does to savings",
    "how bees make honey",
    "why leaves change colour in autumn",
    "how a compiler turns code into a program",
    "what causes earthquakes",
    "how a solar panel makes electricity",
    "why the ocean is salty",
    "how GPS finds your position",
    "what a black hole is",
    "how a vaccine differs from an antibiotic",
    "why cats purr",
    "how an electric motor works",
    "what photosynthesis produces",
    "how a bill becomes a law",
    "why we have seasons",
    "how noise-cancelling headphones work",
    "what a prime number is",
    "how a rainbow forms",
    "why ice floats on water",
    "how the heart pumps blood",
    "what a database index does",
    "how airplanes stay in the air",
    "why metal feels colder than wood",
    "how a microwave oven heats food",
    "what compound interest is",
];

const FORMS: &[&str] = &[
    "Explain {} in three sentences.",
    "In plain words, describe {}.",
    "Write a short paragraph for a curious child about {}.",
    "Summarize {} as if for a textbook glossary.",
    "Give a concise, factual explanation of {}.",
    "What should a new student know about {}? Answer briefly.",
    "Describe {} step by step, in a few sentences.",
    "Tell me, briefly and precisely, {}.",
];

/// The quality prompts of a run and their identity.
#[derive(Debug, Clone)]
pub(super) struct PromptSet {
    pub(super) prompts: Vec<String>,
    /// A dataset's expected answers, by prompt (empty without a dataset).
    pub(super) expected: Vec<Option<String>>,
    /// SHA-256 over the prompts and the request settings: results compare
    /// only where theirs are equal.
    pub(super) sha256: String,
}

impl PromptSet {
    /// The dataset's first `q.prompts` prompts, or `q.prompts` prompts
    /// drawn from the spec's seed: every combination of a topic and a form
    /// in a seeded order, then numbered variations.
    pub(super) fn new(q: &Quality, seed: u64) -> PromptSet {
        if let Some(d) = &q.dataset {
            let items = &d.items[..(q.prompts as usize).min(d.items.len())];
            let prompts: Vec<String> = items.iter().map(|i| i.prompt.clone()).collect();
            let sha256 = Self::identity(q, seed, &prompts, Some(&d.sha256));
            return PromptSet {
                prompts,
                expected: items.iter().map(|i| i.answer.clone()).collect(),
                sha256,
            };
        }
        let mut combos: Vec<(usize, usize)> = (0..TOPICS.len())
            .flat_map(|t| (0..FORMS.len()).map(move |f| (t, f)))
            .collect();
        // A seeded Fisher-Yates shuffle (SplitMix64): the same seed gives
        // the same prompts on every machine.
        let mut state = seed ^ 0x5155_414c_4954_5921;
        let mut next = || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        for i in (1..combos.len()).rev() {
            let j = (next() % (i as u64 + 1)) as usize;
            combos.swap(i, j);
        }
        let prompts: Vec<String> = (0..q.prompts as usize)
            .map(|i| {
                let (t, f) = combos[i % combos.len()];
                let text = FORMS[f].replace("{}", TOPICS[t]);
                match i / combos.len() {
                    0 => text,
                    round => format!("{text} (Variation {round}.)"),
                }
            })
            .collect();
        let sha256 = Self::identity(q, seed, &prompts, None);
        PromptSet {
            prompts,
            expected: Vec::new(),
            sha256,
        }
    }

    /// SHA-256 over the settings, the prompts, and a dataset's own hash
    /// (its expected answers and scorer with it).
    fn identity(q: &Quality, seed: u64, prompts: &[String], dataset: Option<&str>) -> String {
        let mut h = Sha256::new();
        // Spelled out, not Debug-printed: a renamed field must not make
        // every baseline's prompt set another.
        let api = match q.api {
            QualityApi::Chat => "chat",
            QualityApi::Completions => "completions",
        };
        h.update(format!(
            "max_tokens={} logprobs={} api={api} seed={seed}\n",
            q.max_tokens, q.logprobs
        ));
        if let Some(d) = dataset {
            let scorer = q.scorer.as_ref().map_or(String::new(), |s| {
                format!(
                    "{} pattern={:?} tolerance={:?}",
                    s.name,
                    s.pattern.as_deref().unwrap_or(""),
                    s.tolerance
                )
            });
            h.update(format!("dataset={d} scorer={scorer}\n"));
        }
        for p in prompts {
            h.update(p.as_bytes());
            h.update([0]);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// One server's answers to the quality prompts.
#[derive(Debug, Clone, Default)]
pub(super) struct Phase {
    /// By prompt index; `None` where the prompt failed.
    pub(super) answers: Vec<Option<Answer>>,
    pub(super) failures: BTreeMap<String, u64>,
    pub(super) failure_example: Option<String>,
    pub(super) elapsed_s: f64,
}

impl Phase {
    fn fail(&mut self, class: &str, message: String) {
        *self.failures.entry(class.to_string()).or_default() += 1;
        self.failure_example.get_or_insert(message);
    }

    pub(super) fn answered(&self) -> u64 {
        self.answers.iter().filter(|a| a.is_some()).count() as u64
    }
}

/// The most bytes of one answer's body read: its text and its tokens with
/// their alternatives at their longest, with room for JSON.
fn body_cap(q: &Quality) -> usize {
    let per_token = (1 + MAX_TOP.min(q.logprobs as usize)) * (MAX_TOKEN_BYTES + 64);
    (MAX_TEXT_BYTES + 64 * 1024 + q.max_tokens as usize * per_token).min(64 << 20)
}

/// Asks `server` every prompt greedily, `q.concurrency` at a time. A
/// failed prompt is counted by class, never fatal; Ctrl-C stops asking.
pub(super) fn ask(
    q: &Quality,
    set: &PromptSet,
    cfg: &PointConfig,
    server: &Server,
    rt: &tokio::runtime::Runtime,
    interrupt: &Interrupt,
) -> Phase {
    let started = Instant::now();
    let api = match q.api {
        QualityApi::Chat => AnswerApi::Chat,
        QualityApi::Completions => AnswerApi::Completions,
    };
    let seed = 0;
    let bodies: Vec<Vec<u8>> = set
        .prompts
        .iter()
        .map(|p| {
            AnswerRequest {
                api,
                model: cfg.served_name(),
                prompt: p,
                max_tokens: q.max_tokens,
                top_logprobs: q.logprobs,
                seed,
            }
            .body()
        })
        .collect();
    let mut phase = Phase {
        answers: vec![None; bodies.len()],
        ..Phase::default()
    };
    if let Server::Virtual(_) = server {
        // No server runs on the virtual clock: the simulator answers at
        // once, with the bytes its HTTP server would write.
        match infer_bench_sim::request::Setup::of(cfg) {
            Ok(setup) => {
                let wire = match api {
                    AnswerApi::Chat => infer_bench_sim::request::Wire::Chat,
                    AnswerApi::Completions => infer_bench_sim::request::Wire::Completions,
                };
                for (i, body) in bodies.iter().enumerate() {
                    match infer_bench_sim::server::answer_at_once(&setup, body, wire) {
                        Ok(b) => keep(&mut phase, i, 200, &b),
                        Err(r) => phase.fail(&format!("status_{}", r.status), r.message),
                    }
                }
            }
            Err(e) => {
                for _ in &bodies {
                    phase.fail("simulator", e.to_string());
                }
            }
        }
        return phase;
    }
    let http = match http_client(cfg, server, q) {
        Ok(c) => c,
        Err(e) => {
            for _ in &bodies {
                phase.fail(&e.class, e.message.clone());
            }
            phase.elapsed_s = started.elapsed().as_secs_f64();
            return phase;
        }
    };
    let url = format!("{}/{}", server.base_url().trim_end_matches('/'), api.path());
    let cap = body_cap(q);
    let total = cfg.load.timeouts.total.as_std();
    let got: Vec<(usize, Posted)> = rt.block_on(async {
        let limit = Arc::new(tokio::sync::Semaphore::new(q.concurrency.max(1) as usize));
        let mut tasks = tokio::task::JoinSet::new();
        for (i, body) in bodies.into_iter().enumerate() {
            if interrupt.is_set() {
                break;
            }
            let Ok(permit) = limit.clone().acquire_owned().await else {
                break;
            };
            let (http, url) = (http.clone(), url.clone());
            tasks.spawn(async move {
                let _permit = permit;
                (i, post(&http, &url, body, cap, total).await)
            });
        }
        let mut out = Vec::new();
        while let Some(r) = tasks.join_next().await {
            if let Ok(r) = r {
                out.push(r);
            }
        }
        out
    });
    for (i, r) in got {
        match r {
            Ok((status, body)) => keep(&mut phase, i, status, &body),
            Err(f) => phase.fail(&f.class, f.message),
        }
    }
    let asked = phase.answered() + phase.failures.values().sum::<u64>();
    let unasked = phase.answers.len() as u64 - asked.min(phase.answers.len() as u64);
    if unasked > 0 {
        *phase.failures.entry("interrupted".into()).or_default() += unasked;
    }
    phase.elapsed_s = started.elapsed().as_secs_f64();
    phase
}

/// Reads one answer into `phase`, or counts why it could not be.
fn keep(phase: &mut Phase, i: usize, status: u16, body: &[u8]) {
    if !(200..300).contains(&status) {
        let message = infer_bench_protocol::openai::error_body_message(body);
        phase.fail(&format!("status_{status}"), message);
        return;
    }
    match answer::read(body) {
        Ok(a) => phase.answers[i] = Some(a),
        Err(e) => phase.fail("unreadable", e.0),
    }
}

/// A client with the target's headers, key and TLS roots.
fn http_client(cfg: &PointConfig, server: &Server, q: &Quality) -> Result<reqwest::Client, Failed> {
    let (api_key, ca_cert_pem) =
        super::point::credentials(cfg).map_err(|e| Failed::new("client", e.to_string()))?;
    let base_url = server.base_url();
    client::http_client(&ClientOptions {
        base_url: &base_url,
        api_key,
        headers: &cfg.target.headers,
        tls_insecure: cfg.target.tls_insecure,
        ca_cert_pem,
        pool_size: q.concurrency as usize,
        connect_timeout: cfg.load.timeouts.connect.as_std(),
    })
    .map_err(|e| Failed::new("client", e.to_string()))
}

/// Why a quality prompt got no answer: the class it is counted under
/// (`connect`, `timeout`, `status_503`, ...) and what was said.
#[derive(Debug, Clone)]
struct Failed {
    class: String,
    message: String,
}

impl Failed {
    fn new(class: &str, message: impl Into<String>) -> Failed {
        Failed {
            class: class.to_string(),
            message: message.into(),
        }
    }
}

/// The most bytes of an error response read, for its message.
const ERROR_BODY_BYTES: usize = 4096;

/// What one prompt got: its status and body, or why it got none.
type Posted = Result<(u16, Vec<u8>), Failed>;

/// One prompt: its status and body, or a failure's class and message.
async fn post(
    http: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    cap: usize,
    total: Duration,
) -> Posted {
    let deadline = Instant::now() + total;
    let send = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send();
    let response = match tokio::time::timeout_at(deadline.into(), send).await {
        Err(_) => {
            return Err(Failed::new(
                "timeout",
                format!("no answer within {total:?}"),
            ));
        }
        Ok(Err(e)) => {
            let class = if e.is_connect() { "connect" } else { "http" };
            return Err(Failed::new(class, client::error_chain(&e)));
        }
        Ok(Ok(r)) => r,
    };
    let status = response.status().as_u16();
    if !response.status().is_success() {
        // An error's body is read for its message only.
        return Ok((
            status,
            client::read_capped(response, ERROR_BODY_BYTES, deadline).await,
        ));
    }
    let body = client::read_capped(response, cap + 1, deadline).await;
    if body.len() > cap {
        return Err(Failed::new(
            "too_large",
            format!("the answer is larger than {cap} bytes"),
        ));
    }
    Ok((status, body))
}

/// Gives every point its server's quality figures, and judges the quality
/// SLOs on them: agreement with the reference server's answers where both
/// answered, or a note saying why there is none. Run after every server
/// and at the end, so it is idempotent.
pub(super) fn settle(
    spec: &Spec,
    q: &Quality,
    set: &PromptSet,
    phases: &BTreeMap<ServerKey, Phase>,
    results: &mut Results<PointConfig>,
) {
    let scorer = q.scorer.as_ref().and_then(|s| {
        infer_bench_results::accuracy::Scorer::new(&s.name, s.pattern.as_deref(), s.tolerance).ok()
    });
    let mut figures: BTreeMap<ServerKey, PointQuality> = BTreeMap::new();
    for (key, phase) in phases {
        let reference = reference_of(q, key);
        let mut f = figures_of(set, key, reference.as_ref(), phase, phases);
        if let Some(scorer) = &scorer {
            f.accuracy = accuracy_of(scorer, set, phase);
        }
        figures.insert(key.clone(), f);
    }
    for p in &mut results.points {
        let key = key_of(&p.config);
        let Some(figures) = figures.get(&key) else {
            continue;
        };
        p.quality = Some(figures.clone());
        if p.status == infer_bench_results::PointStatus::Failed {
            continue;
        }
        p.slo.retain(|s| {
            !s.metric
                .parse::<infer_bench_results::metric::Metric>()
                .is_ok_and(|m| m.is_quality())
        });
        for g in spec.slo.iter().filter(|g| g.metric.is_quality()) {
            let mut slo = super::assess::slo_result(g, figures.value(g.metric));
            if slo.value.is_none() {
                slo.note = Some(
                    figures
                        .note
                        .clone()
                        .unwrap_or_else(|| "no quality figure".into()),
                );
            }
            p.slo.push(slo);
        }
        p.slo_pass = (!p.slo.is_empty()).then(|| p.slo.iter().all(|s| s.pass));
    }
}

/// Task accuracy: of the prompts with an expected answer, the share
/// answered right; a prompt that got no answer counts as wrong.
fn accuracy_of(
    scorer: &infer_bench_results::accuracy::Scorer,
    set: &PromptSet,
    phase: &Phase,
) -> Option<AccuracyResult> {
    let (mut scored, mut correct) = (0u64, 0u64);
    for (expected, answer) in set.expected.iter().zip(&phase.answers) {
        let Some(expected) = expected else { continue };
        scored += 1;
        if answer
            .as_ref()
            .is_some_and(|a| scorer.score(a.text.unencoded(), expected))
        {
            correct += 1;
        }
    }
    let (low, high) = wilson(correct, scored, Z95)?;
    Some(AccuracyResult {
        scorer: scorer.name().to_string(),
        scored,
        correct,
        rate: correct as f64 / scored as f64,
        low,
        high,
    })
}

fn figures_of(
    set: &PromptSet,
    key: &ServerKey,
    reference: Option<&ServerKey>,
    phase: &Phase,
    phases: &BTreeMap<ServerKey, Phase>,
) -> PointQuality {
    let mut out = PointQuality {
        reference: reference.map(label).unwrap_or_default(),
        is_reference: reference == Some(key),
        prompt_set: set.sha256.clone(),
        prompts: set.prompts.len() as u64,
        answered: phase.answered(),
        failures: phase.failures.clone(),
        failure_example: phase.failure_example.as_deref().map(Outside::new),
        elapsed_s: phase.elapsed_s,
        ..PointQuality::default()
    };
    let Some(reference) = reference else {
        return out;
    };
    let Some(base) = phases.get(reference) else {
        out.note = Some(format!(
            "the reference {} did not answer in this run (not on this run's matrix or partition, or its server failed)",
            label(reference)
        ));
        return out;
    };
    // Pairs by prompt, wherever the reference answered: a prompt this
    // server did not answer counts as an empty answer, different from
    // the reference's, so failing prompts cannot raise the agreement.
    let unanswered = Answer::default();
    let (mut pairs, mut index) = (Vec::new(), Vec::new());
    for (i, (a, b)) in base.answers.iter().zip(&phase.answers).enumerate() {
        if let Some(a) = a {
            pairs.push((a, b.as_ref().unwrap_or(&unanswered)));
            index.push(i);
        }
    }
    let Some(g) = agreement_of(&pairs) else {
        out.note = Some(format!(
            "the reference {} answered no prompt",
            label(reference)
        ));
        return out;
    };
    let (low, high) = wilson(g.exact, g.prompts, Z95).unwrap_or((0.0, 1.0));
    // The answers that left the reference's earliest, side by side.
    let mut differing: Vec<usize> = (0..pairs.len())
        .filter(|&k| pairs[k].0.text != pairs[k].1.text)
        .collect();
    differing.sort_by_key(|&k| (g.first_diffs[k], index[k]));
    out.examples = differing
        .into_iter()
        .take(MAX_EXAMPLES)
        .map(|k| QualityExample {
            index: index[k] as u64,
            prompt: Outside::new(clip(&set.prompts[index[k]], MAX_EXAMPLE_BYTES)),
            reference: Outside::new(clip(pairs[k].0.text.unencoded(), MAX_EXAMPLE_BYTES)),
            answer: Outside::new(clip(pairs[k].1.text.unencoded(), MAX_EXAMPLE_BYTES)),
            first_diff: g.first_diffs[k],
        })
        .collect();
    out.agreement = Some(AgreementResult {
        compared: g.prompts,
        exact: g.exact,
        exact_match: g.exact_match,
        exact_low: low,
        exact_high: high,
        first_diff_mean: g.first_diff_mean,
        first_diff_se: g.first_diff_se,
        token_agreement: g.token_agreement,
        unit: g.unit.name().to_string(),
        positions: g.positions,
        kl_mean: g.kl_mean,
        kl_se: g.kl_se,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quality(prompts: u32) -> Quality {
        Quality {
            reference: Some(QualityReference::Precision("bf16".into())),
            prompts,
            max_tokens: 16,
            logprobs: 3,
            api: QualityApi::Chat,
            concurrency: 4,
            dataset: None,
            scorer: None,
        }
    }

    #[test]
    fn prompts_are_seeded_distinct_and_named_by_their_settings() {
        let a = PromptSet::new(&quality(300), 7);
        assert_eq!(a.prompts.len(), 300);
        let distinct: std::collections::BTreeSet<_> = a.prompts.iter().collect();
        assert_eq!(distinct.len(), 300, "every prompt differs");
        let again = PromptSet::new(&quality(300), 7);
        assert_eq!(a.prompts, again.prompts);
        assert_eq!(a.sha256, again.sha256);
        let other = PromptSet::new(&quality(300), 8);
        assert_ne!(a.prompts, other.prompts);
        let mut longer = quality(300);
        longer.max_tokens = 32;
        assert_ne!(PromptSet::new(&longer, 7).sha256, a.sha256);
    }
}
