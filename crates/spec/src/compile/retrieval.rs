//! The keys of the retrieval kinds (`api = "embeddings"` and `"rerank"`):
//! `batch`, `encoding_format`, `dimensions`, `documents` and
//! `document_tokens`, checked against the workload's api, and the keys
//! of generation (`output_tokens`, `stream`, ...) that such a workload
//! cannot take.

use super::Cx;
use crate::raw::{Api, RawWorkload};
use crate::retrieval::Retrieval;
use crate::{Dist, limits};

/// Most inputs in one embeddings request.
pub const MAX_BATCH: u32 = 65_536;
/// Most documents in one rerank request.
pub const MAX_DOCUMENTS: u32 = 65_536;

/// Whether a workload of `api` sends no generation request (and so takes
/// no `output_tokens`): embeddings, rerank, tensors.
pub(super) fn retrieves(api: Api) -> bool {
    !api.generates()
}

impl Cx<'_> {
    /// A simulator in virtual time runs generation, embeddings and rerank
    /// requests: a spec that would send it tensors (KServe v2, Triton's
    /// generate) is an error at its clock.
    pub(super) fn virtual_retrieval(
        &mut self,
        targets: &std::collections::BTreeMap<String, crate::model::Target>,
        workloads: &std::collections::BTreeMap<String, crate::model::Workload>,
    ) {
        let Some(w) = workloads.values().find(|w| !w.api.in_virtual_time()) else {
            return;
        };
        for (name, t) in targets {
            if t.sim
                .as_ref()
                .is_some_and(|s| s.clock == crate::raw::SimClock::Virtual)
            {
                self.err(
                    &format!("targets.{name}.sim.clock"),
                    format!(
                        "the simulator in virtual time serves generation, embeddings and rerank requests, and workload \"{}\" is {}",
                        w.name,
                        w.api.name()
                    ),
                    Some("use clock = \"real\" (the default): the simulator serves /v2 tensors in real time".into()),
                );
            }
        }
    }

    /// An SLO or goodput bound on what only a streamed answer has (TTFT,
    /// TPOT, ITL) where every workload is embeddings or rerank: no point
    /// could measure it, so it is an error at the gate's key.
    pub(super) fn stream_gates(
        &mut self,
        slo: &[crate::model::SloGate],
        goodput: &crate::model::Goodput,
        workloads: &std::collections::BTreeMap<String, crate::model::Workload>,
    ) {
        use infer_bench_results::metric::Metric;
        if workloads.is_empty() || !workloads.values().all(|w| retrieves(w.api)) {
            return;
        }
        let streamed = |m: Metric| {
            matches!(
                m,
                Metric::Ttft
                    | Metric::TtftFromSend
                    | Metric::TtftReasoning
                    | Metric::TtftAnswer
                    | Metric::Tpot
                    | Metric::Itl
                    | Metric::ItlToken
                    | Metric::OutputTokensPerS
            )
        };
        let mut keys: Vec<String> = Vec::new();
        for g in slo.iter().filter(|g| streamed(g.metric)) {
            let key = format!("slo.{}", g.metric);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        for (name, set) in [
            ("ttft", goodput.ttft.is_some()),
            ("tpot", goodput.tpot.is_some()),
        ] {
            if set {
                keys.push(format!("goodput.{name}"));
            }
        }
        for key in keys {
            self.key_err(
                &key,
                "every workload of this spec is embeddings, rerank or kserve, whose answers are not streamed: they have no TTFT, TPOT or ITL",
                Some("gate the whole request's latency instead, e.g. [slo] latency = \"p99 < 50ms\" (or e2e), and [goodput] e2e".into()),
            );
        }
    }

    /// The retrieval shape of `[workloads.NAME]`, or `None` for a chat or
    /// completions workload; every key set where it does not belong is an
    /// error at the key.
    pub(super) fn retrieval(&mut self, name: &str, w: &RawWorkload, api: Api) -> Option<Retrieval> {
        let k = |f: &str| format!("workloads.{name}.{f}");
        let api_name = api.name();
        let embed_keys = [
            ("batch", w.batch.is_some() && api != Api::Kserve),
            ("encoding_format", w.encoding_format.is_some()),
            ("dimensions", w.dimensions.is_some()),
        ];
        let rerank_keys = [
            ("documents", w.documents.is_some()),
            ("document_tokens", w.document_tokens.is_some()),
        ];
        let mut misplaced: Vec<(&str, &str)> = Vec::new();
        if api != Api::Embeddings {
            misplaced.extend(
                embed_keys
                    .iter()
                    .filter(|(_, set)| *set)
                    .map(|(key, _)| (*key, "embeddings")),
            );
        }
        if api != Api::Rerank {
            misplaced.extend(
                rerank_keys
                    .iter()
                    .filter(|(_, set)| *set)
                    .map(|(key, _)| (*key, "rerank")),
            );
        }
        if api != Api::Kserve {
            let kserve_keys = [
                ("inputs", w.inputs.is_some()),
                ("binary", w.binary.is_some()),
                ("model_version", w.model_version.is_some()),
            ];
            misplaced.extend(
                kserve_keys
                    .iter()
                    .filter(|(_, set)| *set)
                    .map(|(key, _)| (*key, "kserve")),
            );
        }
        for (key, kind) in misplaced {
            self.key_err(
                &k(key),
                format!(
                    "`{key}` belongs to api = \"{kind}\"; this workload's api is \"{api_name}\""
                ),
                Some(format!("remove it, or set api = \"{kind}\"")),
            );
        }
        if !retrieves(api) {
            return None;
        }
        // What only a generation request takes.
        let generation = [
            ("output_tokens", w.output_tokens.is_some()),
            ("stream", w.stream == Some(true)),
            ("ignore_eos", w.ignore_eos.is_some()),
            ("max_tokens_field", w.max_tokens_field.is_some()),
            ("sampling", w.sampling.is_some()),
            ("trace", w.trace.is_some()),
        ];
        for (key, _) in generation.iter().filter(|(_, set)| *set) {
            self.key_err(
                &k(key),
                format!("an {api_name} request generates no text, so the workload cannot set `{key}`"),
                Some(match api {
                    Api::Embeddings => "an embeddings workload takes input_tokens (or a dataset), batch, encoding_format and dimensions".into(),
                    Api::Kserve => super::tensors::TAKES.into(),
                    _ => "a rerank workload takes input_tokens (the query, or a dataset), documents and document_tokens".into(),
                }),
            );
        }
        match api {
            Api::Kserve => self.tensors(name, w).map(Retrieval::Tensors),
            Api::Embeddings => {
                self.count_in(
                    &k("batch"),
                    w.batch.map(u64::from),
                    1,
                    MAX_BATCH.into(),
                    "a number of inputs per request",
                );
                self.count_in(
                    &k("dimensions"),
                    w.dimensions.map(u64::from),
                    1,
                    limits::MAX_ARCH_DIM.into(),
                    "a number of dimensions",
                );
                Some(Retrieval::Embeddings {
                    batch: w.batch.unwrap_or(1).max(1),
                    encoding_format: w.encoding_format.unwrap_or_default(),
                    dimensions: w.dimensions,
                })
            }
            _ => {
                if w.documents.is_none() {
                    self.key_err(
                        &format!("workloads.{name}"),
                        "missing key `documents`",
                        Some("a rerank workload sends a query and documents: add e.g. documents = 16, document_tokens = 256".into()),
                    );
                }
                if w.document_tokens.is_none() {
                    self.key_err(
                        &format!("workloads.{name}"),
                        "missing key `document_tokens`",
                        Some("add e.g. document_tokens = 256 or \"uniform(64, 512)\"".into()),
                    );
                }
                self.count_in(
                    &k("documents"),
                    w.documents.map(u64::from),
                    1,
                    MAX_DOCUMENTS.into(),
                    "a number of documents per request",
                );
                let tokens = w
                    .document_tokens
                    .clone()
                    .map(|d| self.load_dist(&k("document_tokens"), d))
                    .unwrap_or(Dist::Fixed(1));
                if let Some(top) = tokens.upper() {
                    if top > limits::MAX_TOKENS {
                        self.err(
                            &k("document_tokens"),
                            format!(
                                "expected lengths of at most {} tokens, found up to {top}",
                                limits::MAX_TOKENS
                            ),
                            Some("no model has a longer context; set a smaller `max`".into()),
                        );
                    }
                }
                if let Dist::Fixed(0) = tokens {
                    self.err(
                        &k("document_tokens"),
                        "expected at least 1 token per document, found 0",
                        None,
                    );
                }
                Some(Retrieval::Rerank {
                    documents: w.documents.unwrap_or(1).max(1),
                    document_tokens: tokens,
                })
            }
        }
    }
}
