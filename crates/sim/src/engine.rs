//! The simulator's scheduler: vLLM-style continuous batching in virtual
//! time. It owns the request queues, the paged KV cache (16-token blocks),
//! admission, chunked prefill, preemption and the counters that become the
//! simulator's Prometheus metrics. Each [`Engine::step`] plans one step,
//! prices it with [`PerfModel`] and advances every scheduled sequence; it
//! never sleeps or reads a clock; the server driver sleeps for
//! [`Step::duration`] and streams the step's tokens. Deterministic: the same
//! calls give the same steps.
//!
//! Scheduling follows vLLM v1: running sequences first, in admission order
//! (each decode takes one token of the `max_batched_tokens` budget, a
//! partially prefilled prompt takes its next chunk), then waiting requests
//! FCFS while a sequence slot, the remaining token budget and KV blocks for
//! the whole prompt are free (admission reserves the prompt's blocks, as
//! vLLM v0 did; with `admission = "reserve-full"`, the blocks of the prompt
//! and of every output token, as TensorRT-LLM's guaranteed-no-evict policy
//! does, so nothing is preempted). When a running sequence needs a new block and none is free,
//! the most recently admitted sequence is preempted (recompute: its blocks
//! are freed and it goes back to the front of the queue, to re-prefill its
//! prompt and the tokens it generated); a step that preempts admits nobody.

use std::collections::{HashMap, VecDeque};

use super::perf::{PerfModel, PrefillChunk, StepBatch};
use super::profile::EngineConfig;
use infer_bench_spec::raw::{SimAdmission, SimScheduler};

/// Tokens per KV-cache block by default (vLLM's block size); a profile
/// sets its engine's own ([`EngineConfig::kv_block_tokens`]).
pub const KV_BLOCK_TOKENS: u64 = 16;

/// What one step did.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Seconds the step takes on the simulated GPUs (from [`PerfModel`]).
    pub duration: f64,
    /// Of `duration`, the roofline's compute time (GEMMs and attention) and
    /// memory-traffic time (weights and KV cache), seconds, before the
    /// p-norm that combines them ([`crate::perf::StepCost`]).
    pub compute_s: f64,
    pub memory_s: f64,
    /// Of `duration`, the time kernels run on the GPUs: all but the
    /// host's overhead of the step (scheduling, sampling), during which
    /// the GPUs wait.
    pub gpu_s: f64,
    /// Of `duration`, the tensor-parallel all-reduces and pipeline sends,
    /// seconds, and the bytes each GPU sent for them.
    pub communication_s: f64,
    pub link_bytes: f64,
    /// (request id, new tokens this step) for every sequence that produced
    /// a token at the end of this step: each decode, and each prompt whose
    /// prefill completed (its first token). Always 1 token per sequence.
    pub tokens: Vec<(u64, u32)>,
    /// Requests done at the end of this step: all their tokens are in
    /// `tokens` of this or earlier steps. Also requests rejected at submit
    /// (prompt longer than the KV cache), which produce no tokens.
    pub finished: Vec<u64>,
    /// Prompt tokens computed in this step (recomputation included).
    pub prefill_tokens: u32,
    /// Decoding sequences in this step (one token each).
    pub decode_tokens: u32,
    /// Sequences in this step, decoding or prefilling.
    pub batch_size: usize,
}

/// Counters and gauges, in vLLM's terms (`vllm:num_requests_running`,
/// `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`,
/// `vllm:num_preemptions_total`, `vllm:prompt_tokens_total`,
/// `vllm:generation_tokens_total`, `vllm:request_success_total`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EngineStats {
    pub running: usize,
    pub waiting: usize,
    /// Fraction of KV blocks in use, 0..=1.
    pub kv_usage: f64,
    pub preemptions_total: u64,
    /// Prompt tokens of requests that produced their first token (a
    /// recomputed prompt is not counted twice).
    pub prompt_tokens_total: u64,
    pub generation_tokens_total: u64,
    /// Requests that generated all their tokens (not cancelled, not rejected).
    pub requests_finished_total: u64,
    /// Requests refused at submit because their prompt cannot fit the KV cache.
    pub requests_rejected_total: u64,
    pub kv_capacity_tokens: u64,
}

/// One request's sequence.
#[derive(Debug, Clone)]
struct Seq {
    id: u64,
    /// Unique per submission: tells a live queue entry from a cancelled one
    /// whose id was submitted again.
    serial: u64,
    prompt_tokens: u32,
    max_tokens: u32,
    generated: u32,
    /// Tokens whose KV is in the cache (0 after preemption).
    computed: u32,
    /// KV blocks held.
    blocks: u64,
    /// Of the prompt, the tokens of its images, and whether the vision
    /// encoder has run on them (in its first prefill chunk; its output is
    /// kept, so a preempted sequence does not encode again).
    image_tokens: u32,
    encoded: bool,
}

impl Seq {
    /// Tokens known: the prompt and every generated token.
    fn known_tokens(&self) -> u32 {
        self.prompt_tokens + self.generated
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Waiting,
    Running,
}

#[derive(Debug, Clone, Copy)]
struct Live {
    serial: u64,
    place: Place,
}

/// The continuous-batching engine. See the module docs.
#[derive(Debug)]
pub struct Engine {
    perf: PerfModel,
    max_num_seqs: usize,
    max_batched_tokens: u32,
    tokens_per_event: u32,
    admission: SimAdmission,
    scheduler: SimScheduler,
    scheduler_steps: u32,
    /// Steps run since the last scheduling decision (multi-step).
    since_schedule: u32,
    request_overhead_s: f64,
    /// Tokens per KV block.
    block_tokens: u64,
    total_blocks: u64,
    free_blocks: u64,
    /// Longest prompt + output a request may have: the KV capacity.
    max_model_len_tokens: u32,
    /// FCFS queue. May hold cancelled entries (not in `live` with their
    /// serial), skipped when they reach the front.
    waiting: VecDeque<Seq>,
    /// Live entries in `waiting`.
    waiting_live: usize,
    /// In admission order: the last is the next to preempt.
    running: Vec<Seq>,
    live: HashMap<u64, Live>,
    next_serial: u64,
    /// Rejected at submit; reported in the next step's `finished`.
    rejected: Vec<u64>,
    // Reused per step, so steady-state steps do not allocate for planning.
    batch: StepBatch,
    scheduled: Vec<(usize, u32)>,
    preemptions_total: u64,
    prompt_tokens_total: u64,
    generation_tokens_total: u64,
    requests_finished_total: u64,
    requests_rejected_total: u64,
}

impl Engine {
    /// An idle engine. Takes `max_num_seqs`, `max_batched_tokens`, the
    /// scheduler and `tokens_per_event` from `config` (zeros are read as 1);
    /// the KV cache is the model's capacity rounded down to whole blocks, and
    /// the longest sequence the smaller of that and the model's context.
    pub fn new(perf: PerfModel, config: &EngineConfig) -> Engine {
        let block_tokens = u64::from(config.kv_block_tokens.max(1));
        let total_blocks = (perf.kv_capacity_tokens() / block_tokens).max(1);
        let max_model_len_tokens = u32::try_from(total_blocks.saturating_mul(block_tokens))
            .unwrap_or(u32::MAX)
            .min(config.context_tokens.max(2));
        Engine {
            perf,
            max_num_seqs: usize::try_from(config.max_num_seqs.max(1)).unwrap_or(usize::MAX),
            max_batched_tokens: config.max_batched_tokens.max(1),
            tokens_per_event: config.tokens_per_event.max(1),
            admission: config.admission,
            scheduler: config.scheduler,
            scheduler_steps: config.scheduler_steps.max(1),
            since_schedule: 0,
            request_overhead_s: config.request_overhead_s,
            block_tokens,
            total_blocks,
            free_blocks: total_blocks,
            max_model_len_tokens,
            waiting: VecDeque::new(),
            waiting_live: 0,
            running: Vec::new(),
            live: HashMap::new(),
            next_serial: 0,
            rejected: Vec::new(),
            batch: StepBatch::default(),
            scheduled: Vec::new(),
            preemptions_total: 0,
            prompt_tokens_total: 0,
            generation_tokens_total: 0,
            requests_finished_total: 0,
            requests_rejected_total: 0,
        }
    }

    /// Queues a request. A prompt of 0 tokens counts as 1, and `max_tokens`
    /// of 0 as 1 (vLLM refuses both). `max_tokens` is cut so that prompt +
    /// output fits [`Engine::max_model_len_tokens`] (the request then ends
    /// early, like vLLM's finish reason "length"); a prompt that alone does
    /// not fit is rejected: it shows in the next step's `finished` with no
    /// tokens (a server should answer 400 before submitting it). An id that
    /// is already queued or running is ignored.
    pub fn submit(&mut self, id: u64, prompt_tokens: u32, max_tokens: u32) {
        self.submit_with_images(id, prompt_tokens, max_tokens, 0);
    }

    /// [`Engine::submit`] for a prompt of which `image_tokens` are images':
    /// a vision-language model encodes them in the sequence's first step.
    pub fn submit_with_images(
        &mut self,
        id: u64,
        prompt_tokens: u32,
        max_tokens: u32,
        image_tokens: u32,
    ) {
        if self.live.contains_key(&id) {
            return;
        }
        let prompt_tokens = prompt_tokens.max(1);
        if prompt_tokens >= self.max_model_len_tokens {
            self.rejected.push(id);
            self.requests_rejected_total += 1;
            return;
        }
        let max_tokens = max_tokens
            .max(1)
            .min(self.max_model_len_tokens - prompt_tokens);
        let serial = self.next_serial;
        self.next_serial += 1;
        self.live.insert(
            id,
            Live {
                serial,
                place: Place::Waiting,
            },
        );
        self.waiting.push_back(Seq {
            id,
            serial,
            prompt_tokens,
            max_tokens,
            generated: 0,
            computed: 0,
            blocks: 0,
            image_tokens: image_tokens.min(prompt_tokens),
            encoded: false,
        });
        self.waiting_live += 1;
    }

    /// The client went away: forgets the request and frees its KV blocks.
    /// Unknown or finished ids are ignored.
    pub fn cancel(&mut self, id: u64) {
        self.rejected.retain(|&r| r != id);
        let Some(live) = self.live.remove(&id) else {
            return;
        };
        match live.place {
            // The queue entry stays, dead, until it reaches the front.
            Place::Waiting => self.waiting_live -= 1,
            Place::Running => {
                if let Some(pos) = self.running.iter().position(|s| s.serial == live.serial) {
                    let seq = self.running.remove(pos);
                    self.free_blocks += seq.blocks;
                }
            }
        }
    }

    /// Plans and runs one step; `None` when there is nothing to do.
    pub fn step(&mut self) -> Option<Step> {
        if self.running.is_empty() && self.waiting_live == 0 {
            self.waiting.clear();
            if self.rejected.is_empty() {
                return None;
            }
        }
        self.scheduled.clear();
        let mut budget = self.max_batched_tokens;
        // Multi-step: between scheduling decisions the running decodes go on
        // without the host's work, and nobody new joins.
        let reuse = self.since_schedule > 0;
        match self.scheduler {
            SimScheduler::Chunked | SimScheduler::WholePrompt => {
                let preempted = self.schedule_running(&mut budget, Phase::Any);
                if self.scheduler == SimScheduler::WholePrompt {
                    // The budget is for prompt tokens; the step's decodes
                    // (at most max_num_seqs) ride on top of it, so a prompt
                    // that fills the budget still shares a step with them.
                    budget = budget.saturating_add(self.scheduled_decodes());
                }
                if !preempted && !reuse {
                    self.admit_waiting(&mut budget);
                }
            }
            SimScheduler::PrefillFirst => {
                let preempted = self.schedule_running(&mut budget, Phase::Prefill);
                if !preempted && !reuse {
                    self.admit_waiting(&mut budget);
                }
                if self.scheduled.is_empty() {
                    self.schedule_running(&mut budget, Phase::Decode);
                }
            }
        }

        let mut prefill_tokens = 0u32;
        let mut decode_tokens = 0u32;
        self.batch.clear();
        for &(i, n) in &self.scheduled {
            let seq = &self.running[i];
            if seq.generated > 0 && seq.known_tokens() - seq.computed == 1 {
                self.batch.decode_context_tokens.push(seq.computed);
                decode_tokens += 1;
            } else {
                self.batch.prefill_chunks.push(PrefillChunk {
                    chunk_tokens: n,
                    start_context_tokens: seq.computed,
                    encoder_tokens: if seq.encoded { 0 } else { seq.image_tokens },
                });
                prefill_tokens = prefill_tokens.saturating_add(n);
            }
        }
        self.batch.reuses_schedule = reuse;
        let cost = self.perf.step_cost(&self.batch);
        let duration = cost.total_s;
        // A step with a prefill is scheduled alone; a run of decodes takes
        // `scheduler_steps` steps per decision.
        self.since_schedule = if prefill_tokens > 0 {
            0
        } else {
            (self.since_schedule + 1) % self.scheduler_steps
        };

        let mut tokens = Vec::with_capacity(self.scheduled.len());
        let mut finished = std::mem::take(&mut self.rejected);
        let mut any_finished = false;
        for &(i, n) in &self.scheduled {
            let seq = &mut self.running[i];
            seq.encoded = true;
            seq.computed += n;
            if seq.computed < seq.known_tokens() {
                continue; // a prefill chunk short of the end of the prompt
            }
            if seq.generated == 0 {
                self.prompt_tokens_total += u64::from(seq.prompt_tokens);
            }
            seq.generated += 1;
            self.generation_tokens_total += 1;
            tokens.push((seq.id, 1));
            if seq.generated >= seq.max_tokens {
                finished.push(seq.id);
                any_finished = true;
            }
        }
        if any_finished {
            let free_blocks = &mut self.free_blocks;
            let live = &mut self.live;
            let done = &mut self.requests_finished_total;
            self.running.retain(|s| {
                if s.generated < s.max_tokens {
                    return true;
                }
                *free_blocks += s.blocks;
                live.remove(&s.id);
                *done += 1;
                false
            });
        }
        Some(Step {
            duration,
            compute_s: cost.compute_s,
            memory_s: cost.memory_s,
            gpu_s: cost.gpu_s,
            communication_s: cost.communication_s,
            link_bytes: cost.link_bytes,
            tokens,
            finished,
            prefill_tokens,
            decode_tokens,
            batch_size: self.scheduled.len(),
        })
    }

    /// Gives each running sequence of `phase`, oldest first, its next tokens
    /// (1 for a decode, a chunk for a prefill) while the budget lasts,
    /// preempting from the newest end when KV blocks run out. Returns whether
    /// anything was preempted.
    fn schedule_running(&mut self, budget: &mut u32, phase: Phase) -> bool {
        let mut preempted = false;
        let mut i = 0;
        while i < self.running.len() && *budget > 0 {
            let seq = &self.running[i];
            let decoding = seq.generated > 0 && seq.known_tokens() - seq.computed == 1;
            if (phase == Phase::Prefill && decoding) || (phase == Phase::Decode && !decoding) {
                i += 1;
                continue;
            }
            let n = (seq.known_tokens() - seq.computed).min(*budget);
            let need = blocks_for(u64::from(seq.computed) + u64::from(n), self.block_tokens)
                .saturating_sub(seq.blocks);
            let mut fits = true;
            while need > self.free_blocks {
                preempted = true;
                let last = self.running.len() - 1;
                self.preempt_last();
                if last == i {
                    fits = false; // it was the newest: it preempted itself
                    break;
                }
            }
            if !fits {
                break;
            }
            self.free_blocks -= need;
            self.running[i].blocks += need;
            self.scheduled.push((i, n));
            *budget -= n;
            i += 1;
        }
        preempted
    }

    /// Decodes among the sequences scheduled so far this step.
    fn scheduled_decodes(&self) -> u32 {
        let decodes = self
            .scheduled
            .iter()
            .filter(|&&(i, _)| {
                let seq = &self.running[i];
                seq.generated > 0 && seq.known_tokens() - seq.computed == 1
            })
            .count();
        u32::try_from(decodes).unwrap_or(u32::MAX)
    }

    /// Moves the newest running sequence to the front of the queue,
    /// dropping its KV cache (it will be recomputed).
    fn preempt_last(&mut self) {
        let Some(mut seq) = self.running.pop() else {
            return;
        };
        self.free_blocks += seq.blocks;
        seq.blocks = 0;
        seq.computed = 0;
        if let Some(live) = self.live.get_mut(&seq.id) {
            live.place = Place::Waiting;
        }
        self.waiting.push_front(seq);
        self.waiting_live += 1;
        self.preemptions_total += 1;
    }

    /// Admits queued requests FCFS while a slot, budget and KV blocks for
    /// the whole (re)prefill (with `reserve-full`, for prompt and output)
    /// are free; each gets its first chunk.
    fn admit_waiting(&mut self, budget: &mut u32) {
        while *budget > 0 && self.running.len() < self.max_num_seqs {
            let Some(front) = self.waiting.front() else {
                break;
            };
            let is_live = self
                .live
                .get(&front.id)
                .is_some_and(|l| l.serial == front.serial);
            if !is_live {
                self.waiting.pop_front();
                continue;
            }
            let need = match self.admission {
                SimAdmission::ReservePrompt => {
                    blocks_for(u64::from(front.known_tokens()), self.block_tokens)
                }
                SimAdmission::ReserveFull => blocks_for(
                    u64::from(front.prompt_tokens) + u64::from(front.max_tokens),
                    self.block_tokens,
                ),
            };
            if need > self.free_blocks {
                break; // head-of-line: FCFS
            }
            // Without chunked prefill a prompt waits for a step with room
            // for all of it; one longer than a whole step's budget goes in
            // pieces (an engine would refuse it, or need a larger budget).
            if self.scheduler == SimScheduler::WholePrompt
                && front.known_tokens() > *budget
                && front.known_tokens() <= self.max_batched_tokens
            {
                break;
            }
            let Some(mut seq) = self.waiting.pop_front() else {
                break;
            };
            self.waiting_live -= 1;
            self.free_blocks -= need;
            seq.blocks = need;
            if let Some(live) = self.live.get_mut(&seq.id) {
                live.place = Place::Running;
            }
            let n = seq.known_tokens().min(*budget);
            *budget -= n;
            self.running.push(seq);
            self.scheduled.push((self.running.len() - 1, n));
        }
    }

    pub fn stats(&self) -> EngineStats {
        EngineStats {
            running: self.running.len(),
            waiting: self.waiting_live,
            kv_usage: (self.total_blocks - self.free_blocks) as f64 / self.total_blocks as f64,
            preemptions_total: self.preemptions_total,
            prompt_tokens_total: self.prompt_tokens_total,
            generation_tokens_total: self.generation_tokens_total,
            requests_finished_total: self.requests_finished_total,
            requests_rejected_total: self.requests_rejected_total,
            kv_capacity_tokens: self.total_blocks * self.block_tokens,
        }
    }

    /// The longest prompt + output a request may have (the KV capacity).
    pub fn max_model_len_tokens(&self) -> u32 {
        self.max_model_len_tokens
    }

    /// Tokens per streamed event, for the server driver.
    pub fn tokens_per_event(&self) -> u32 {
        self.tokens_per_event
    }

    /// Seconds a request spends in the server before the engine sees it
    /// (HTTP, tokenization), for the server driver.
    pub fn request_overhead_s(&self) -> f64 {
        self.request_overhead_s
    }

    pub fn perf(&self) -> &PerfModel {
        &self.perf
    }
}

/// Which running sequences a scheduling pass takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Any,
    Prefill,
    Decode,
}

fn blocks_for(tokens: u64, block_tokens: u64) -> u64 {
    tokens.div_ceil(block_tokens)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::perf::tests::{arch, target};
    use infer_bench_spec::model::DType;

    pub(crate) fn engine_with(t: &EngineConfig, model: &str, w: DType) -> Engine {
        let perf = PerfModel::new(t, &arch(model), w).unwrap();
        Engine::new(perf, t)
    }

    fn engine(gpu: &str, model: &str, w: DType) -> Engine {
        engine_with(&target(gpu, 1), model, w)
    }

    #[test]
    fn images_are_encoded_in_their_sequences_first_chunk_only() {
        // A prompt longer than a step's budget: the chunk that starts it
        // pays for the encoder, the chunks after it and the decodes do not.
        let durations = |images: u32| {
            let mut e = engine("h100-sxm", "qwen2.5-vl-7b", DType::Bf16);
            e.submit_with_images(1, 20_000, 4, images);
            drain(&mut e)
                .1
                .iter()
                .map(|s| s.duration)
                .collect::<Vec<_>>()
        };
        let (text, image) = (durations(0), durations(2738));
        assert_eq!(text.len(), image.len());
        assert!(image[0] > 1.05 * text[0], "{image:?} vs {text:?}");
        assert!(text.len() > 5, "chunks and decodes: {text:?}");
        assert_eq!(image[1..], text[1..]);
    }

    /// Steps until idle; returns (virtual seconds, steps), bounded.
    fn drain(e: &mut Engine) -> (f64, Vec<Step>) {
        let mut steps = Vec::new();
        let mut t = 0.0;
        while let Some(s) = e.step() {
            t += s.duration;
            steps.push(s);
            assert!(steps.len() < 1_000_000, "engine never went idle");
        }
        (t, steps)
    }

    #[derive(Debug)]
    pub(crate) struct Load {
        pub(crate) output_tokens_per_s: f64,
        mean_ttft_s: f64,
        mean_tpot_s: f64,
    }

    /// A closed loop of `clients`, each sending a request of `prompt` /
    /// `output` tokens as soon as its previous one finishes, for `run_s`
    /// virtual seconds; measured after the first quarter.
    pub(crate) fn closed_loop(
        e: &mut Engine,
        clients: u64,
        prompt: u32,
        output: u32,
        run_s: f64,
    ) -> Load {
        let warmup_s = run_s / 4.0;
        let mut now = 0.0;
        let mut next_id = 0;
        // id -> (sent at, first token at)
        let mut open: HashMap<u64, (f64, Option<f64>)> = HashMap::new();
        for _ in 0..clients {
            e.submit(next_id, prompt, output);
            open.insert(next_id, (now, None));
            next_id += 1;
        }
        let (mut tokens, mut ttft_sum, mut tpot_sum, mut done) = (0u64, 0.0, 0.0, 0u64);
        while now < run_s {
            let s = e.step().expect("closed loop never idles");
            now += s.duration;
            for &(id, n) in &s.tokens {
                if now > warmup_s {
                    tokens += u64::from(n);
                }
                let entry = open.get_mut(&id).unwrap();
                entry.1.get_or_insert(now);
            }
            for id in s.finished {
                let (sent, first) = open.remove(&id).unwrap();
                let first = first.unwrap();
                if sent > warmup_s {
                    ttft_sum += first - sent;
                    tpot_sum += (now - first) / f64::from(output.max(2) - 1);
                    done += 1;
                }
                e.submit(next_id, prompt, output);
                open.insert(next_id, (now, None));
                next_id += 1;
            }
        }
        let done = done.max(1) as f64;
        Load {
            output_tokens_per_s: tokens as f64 / (now - warmup_s),
            mean_ttft_s: ttft_sum / done,
            mean_tpot_s: tpot_sum / done,
        }
    }

    #[test]
    fn one_request_prefills_then_decodes_one_token_per_step() {
        let mut e = engine("h100-sxm", "llama-3.1-8b", DType::Bf16);
        assert!(e.step().is_none());
        e.submit(7, 1000, 5);
        let (_, steps) = drain(&mut e);
        assert_eq!(steps.len(), 5);
        assert_eq!(steps[0].prefill_tokens, 1000);
        assert_eq!(steps[0].decode_tokens, 0);
        assert_eq!(steps[0].tokens, vec![(7, 1)]);
        for s in &steps[1..] {
            assert_eq!((s.prefill_tokens, s.decode_tokens, s.batch_size), (0, 1, 1));
            assert_eq!(s.tokens, vec![(7, 1)]);
        }
        assert!(steps[0].duration > steps[1].duration);
        assert_eq!(steps[4].finished, vec![7]);
        let st = e.stats();
        assert_eq!((st.running, st.waiting, st.kv_usage), (0, 0, 0.0));
        assert_eq!(st.prompt_tokens_total, 1000);
        assert_eq!(st.generation_tokens_total, 5);
        assert_eq!(st.requests_finished_total, 1);
        assert!(e.step().is_none());
    }

    #[test]
    fn long_prompts_are_chunked_and_decodes_go_first() {
        let mut e = engine("h100-sxm", "llama-3.1-8b", DType::Bf16);
        e.submit(1, 100, 50);
        e.step().unwrap();
        e.submit(2, 20_000, 3);
        let mut first_token_step = None;
        for k in 0..3 {
            let s = e.step().unwrap();
            // The running decode is never starved by the long prompt.
            assert_eq!(s.decode_tokens, 1, "step {k}");
            assert_eq!(s.prefill_tokens, [8191, 8191, 20_000 - 2 * 8191][k]);
            if s.tokens.iter().any(|&(id, _)| id == 2) {
                first_token_step = Some(k);
            }
        }
        assert_eq!(first_token_step, Some(2));
    }

    #[test]
    fn batch_never_exceeds_max_num_seqs_or_the_token_budget() {
        let mut t = target("h100-sxm", 1);
        t.max_num_seqs = 8;
        t.max_batched_tokens = 512;
        let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
        for id in 0..40 {
            e.submit(id, 300, 20);
        }
        let (_, steps) = drain(&mut e);
        for s in &steps {
            assert!(s.batch_size <= 8, "{s:?}");
            assert!(s.prefill_tokens + s.decode_tokens <= 512, "{s:?}");
        }
        let finished: usize = steps.iter().map(|s| s.finished.len()).sum();
        assert_eq!(finished, 40);
        assert_eq!(e.stats().generation_tokens_total, 40 * 20);
    }

    #[test]
    fn throughput_saturates_and_ttft_climbs_past_the_knee() {
        let mut results = Vec::new();
        for clients in [1, 8, 64, 256, 1024] {
            let t = EngineConfig {
                max_num_seqs: 256,
                ..target("h100-sxm", 1)
            };
            let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
            let load = closed_loop(&mut e, clients, 512, 256, 60.0);
            results.push((clients, load));
        }
        for (clients, load) in &results {
            eprintln!("clients {clients}: {load:?}");
        }
        let tput = |i: usize| results[i].1.output_tokens_per_s;
        let ttft = |i: usize| results[i].1.mean_ttft_s;
        // Below the knee, more clients means nearly proportionally more tokens.
        assert!(tput(1) > 5.0 * tput(0), "{results:?}");
        assert!(tput(2) > 4.0 * tput(1), "{results:?}");
        // Past max_num_seqs (256) throughput flattens ...
        assert!(tput(4) < 1.1 * tput(3), "{results:?}");
        // ... and the extra clients only queue: TTFT grows by seconds.
        assert!(ttft(4) > 10.0 * ttft(3), "{results:?}");
        assert!(ttft(4) > 1.0, "{results:?}");
        // TPOT grows with the batch.
        assert!(results[3].1.mean_tpot_s > 2.0 * results[0].1.mean_tpot_s);
    }

    #[test]
    fn fp8_beats_bf16_on_memory_bound_decode_on_h100() {
        let run = |w| {
            let mut e = engine("h100-sxm", "llama-3.1-8b", w);
            closed_loop(&mut e, 16, 128, 1024, 30.0).output_tokens_per_s
        };
        let (bf16, fp8) = (run(DType::Bf16), run(DType::Fp8));
        // Half the weight bytes; the fixed step overhead keeps it under 2×.
        assert!(fp8 > 1.4 * bf16, "fp8 {fp8} vs bf16 {bf16}");
    }

    #[test]
    fn reserving_the_whole_sequence_never_preempts() {
        let mut t = target("h100-sxm", 1);
        t.kv_cache_tokens = Some(4096);
        t.admission = SimAdmission::ReserveFull;
        let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
        for id in 0..64u64 {
            e.submit(id, 200, 300);
        }
        let mut finished = 0;
        let mut max_running = 0;
        while let Some(s) = e.step() {
            finished += s.finished.len();
            max_running = max_running.max(e.stats().running);
        }
        assert_eq!(finished, 64);
        assert_eq!(e.stats().preemptions_total, 0);
        // 4096 tokens hold 8 sequences of 500 (32 blocks each), no more.
        assert_eq!(max_running, 8);
    }

    #[test]
    fn small_kv_cache_queues_and_preempts_yet_finishes_everything() {
        let mut t = target("h100-sxm", 1);
        t.kv_cache_tokens = Some(4096);
        let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
        let requests = 64u64;
        for id in 0..requests {
            e.submit(id, 200, 300);
        }
        let mut tokens: HashMap<u64, u32> = HashMap::new();
        let mut finished = Vec::new();
        let mut max_usage: f64 = 0.0;
        let mut max_waiting = 0;
        let mut steps = 0;
        while let Some(s) = e.step() {
            for (id, n) in s.tokens {
                *tokens.entry(id).or_default() += n;
            }
            finished.extend(s.finished);
            let st = e.stats();
            max_usage = max_usage.max(st.kv_usage);
            max_waiting = max_waiting.max(st.waiting);
            assert!(st.kv_usage <= 1.0);
            steps += 1;
            assert!(steps < 200_000);
        }
        let st = e.stats();
        assert!(st.preemptions_total > 0, "{st:?}");
        assert!(max_waiting > 32, "requests should queue: {max_waiting}");
        assert!(max_usage > 0.9);
        finished.sort_unstable();
        assert_eq!(finished, (0..requests).collect::<Vec<_>>());
        // Recomputation re-prefills but never re-emits tokens.
        assert!(tokens.values().all(|&n| n == 300), "{tokens:?}");
        assert_eq!(st.generation_tokens_total, requests * 300);
        assert_eq!(st.prompt_tokens_total, requests * 200);
        assert_eq!(st.requests_finished_total, requests);
        assert_eq!((st.running, st.waiting, st.kv_usage), (0, 0, 0.0));
    }

    #[test]
    fn cancel_frees_kv_and_forgets_the_request() {
        let mut e = engine("h100-sxm", "llama-3.1-8b", DType::Bf16);
        e.submit(1, 1000, 100);
        e.submit(2, 1000, 100);
        e.step().unwrap();
        let used = e.stats().kv_usage;
        assert!(used > 0.0);
        e.cancel(1);
        assert!(e.stats().kv_usage < used);
        assert_eq!(e.stats().running, 1);
        // A queued request can be cancelled too, and its id reused.
        let mut t = target("h100-sxm", 1);
        t.max_num_seqs = 1;
        let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
        e.submit(1, 10, 3);
        e.submit(2, 10, 3);
        e.submit(3, 10, 3);
        e.cancel(2);
        assert_eq!(e.stats().waiting, 2);
        e.submit(2, 10, 3); // resubmitted: now behind 3
        e.cancel(99); // unknown: ignored
        let (_, steps) = drain(&mut e);
        let order: Vec<u64> = steps.iter().flat_map(|s| s.finished.clone()).collect();
        assert_eq!(order, vec![1, 3, 2]);
        assert_eq!(e.stats().requests_finished_total, 3);
        assert_eq!(e.stats().generation_tokens_total, 9);
    }

    #[test]
    fn odd_requests_are_clamped_rejected_or_ignored() {
        let mut t = target("h100-sxm", 1);
        t.kv_cache_tokens = Some(1000); // 62 blocks = 992 tokens
        let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
        assert_eq!(e.max_model_len_tokens(), 992);
        e.submit(1, 5000, 10); // prompt alone too long: rejected
        e.submit(2, 900, 500); // output cut to 92 tokens
        e.submit(2, 10, 10); // duplicate id: ignored
        e.submit(3, 0, 0); // read as 1 and 1
        let (_, steps) = drain(&mut e);
        // 1 is rejected; 3 prefills its one token and is done at once.
        assert_eq!(steps[0].finished, vec![1, 3]);
        let count = |id| -> usize {
            steps
                .iter()
                .flat_map(|s| &s.tokens)
                .filter(|&&(i, _)| i == id)
                .count()
        };
        assert_eq!((count(1), count(2), count(3)), (0, 92, 1));
        let st = e.stats();
        assert_eq!(
            (st.requests_rejected_total, st.requests_finished_total),
            (1, 2)
        );
        // Only rejections pending: a zero-length step reports them.
        e.submit(4, 4000, 1);
        let s = e.step().unwrap();
        assert_eq!((s.duration, s.finished, s.batch_size), (0.0, vec![4], 0));
        assert!(e.step().is_none());
    }

    #[test]
    fn same_calls_give_the_same_steps() {
        let run = || {
            let mut t = target("h100-sxm", 1);
            t.kv_cache_tokens = Some(8192);
            let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
            for id in 0..50 {
                e.submit(
                    id,
                    100 + (id as u32 * 37) % 500,
                    50 + (id as u32 * 11) % 200,
                );
            }
            drain(&mut e).1
        };
        assert_eq!(run(), run());
    }

    /// Per-step CPU cost with 10,000 waiting and 512 running sequences.
    /// `cargo test --release --lib sim::engine -- --ignored --nocapture`
    #[test]
    #[ignore = "timing measurement; run in release"]
    fn step_cpu_cost_with_10k_waiting_and_512_running() {
        let mut t = target("h100-sxm", 1);
        t.max_num_seqs = 512;
        t.kv_cache_tokens = Some(100_000_000);
        let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
        for id in 0..10_512 {
            e.submit(id, 100, 1_000_000);
        }
        loop {
            let s = e.step().unwrap();
            if e.stats().running == 512 && s.prefill_tokens == 0 {
                break;
            }
        }
        let st = e.stats();
        assert_eq!((st.running, st.waiting), (512, 10_000));
        let steps = 2_000;
        let start = std::time::Instant::now();
        for _ in 0..steps {
            let s = e.step().unwrap();
            assert_eq!(s.decode_tokens, 512);
        }
        let per_step = start.elapsed() / steps;
        eprintln!("per-step CPU with 10,000 waiting + 512 running: {per_step:?}");
        assert!(
            per_step < std::time::Duration::from_millis(1),
            "{per_step:?}"
        );
    }

    #[test]
    fn prefill_first_steps_hold_no_decodes() {
        let t = EngineConfig {
            scheduler: SimScheduler::PrefillFirst,
            max_batched_tokens: 4096,
            ..target("h100-sxm", 1)
        };
        let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
        e.submit(1, 100, 50);
        assert_eq!(e.step().unwrap().prefill_tokens, 100);
        e.submit(2, 3000, 5);
        // The waiting prompt goes first, alone: the running decode waits.
        let s = e.step().unwrap();
        assert_eq!((s.prefill_tokens, s.decode_tokens), (3000, 0));
        // Then both decode.
        let s = e.step().unwrap();
        assert_eq!((s.prefill_tokens, s.decode_tokens), (0, 2));
        // A prompt longer than the budget goes in pieces, still without decodes.
        e.submit(3, 6000, 5);
        let s = e.step().unwrap();
        assert_eq!((s.prefill_tokens, s.decode_tokens), (4096, 0));
        let s = e.step().unwrap();
        assert_eq!((s.prefill_tokens, s.decode_tokens), (6000 - 4096, 0));
    }

    #[test]
    fn whole_prompts_wait_for_a_step_with_room() {
        let t = EngineConfig {
            scheduler: SimScheduler::WholePrompt,
            max_batched_tokens: 4096,
            ..target("h100-sxm", 1)
        };
        let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
        e.submit(1, 3000, 5);
        e.submit(2, 3000, 5);
        // The second prompt does not fit beside the first: it is not split.
        let s = e.step().unwrap();
        assert_eq!((s.prefill_tokens, s.decode_tokens), (3000, 0));
        let s = e.step().unwrap();
        assert_eq!((s.prefill_tokens, s.decode_tokens), (3000, 1));
        // One longer than any step's budget is chunked rather than starved.
        let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
        e.submit(3, 10_000, 2);
        assert_eq!(e.step().unwrap().prefill_tokens, 4096);
    }

    /// The `trtllm` profile's settings for `model` at `weights` on `gpus` × `gpu`.
    fn trtllm(gpu: &str, gpus: u32, model: &str, w: DType) -> Engine {
        let t = infer_bench_spec::model::SimTarget {
            profile: Some(infer_bench_spec::raw::SimProfile::Trtllm),
            ..crate::perf::tests::sim_target(gpu, gpus)
        };
        let c = crate::profile::resolve(&t, &arch(model), w, None).unwrap();
        engine_with(&c, model, w)
    }

    #[test]
    fn a_prompt_that_fills_the_step_budget_is_no_cliff() {
        // Issue 40: Llama 3.1 8B FP8 on one H100 under TensorRT-LLM's
        // whole-prompt scheduler (budget 8192): prompts of 8191 and 8192
        // tokens never shared a step with a decode, so requests ran one at
        // a time (10x below their neighbours 8000 and 8193).
        let tput = |prompt: u32| {
            let mut e = trtllm("h100-sxm", 1, "llama-3.1-8b", DType::Fp8);
            closed_loop(&mut e, 32, prompt, 256, 40.0).output_tokens_per_s
        };
        let lengths = [8000, 8190, 8191, 8192, 8193, 8400];
        let t: Vec<f64> = lengths.iter().map(|&l| tput(l)).collect();
        for (w, l) in t.windows(2).zip(lengths.windows(2)) {
            let ratio = w[0].max(w[1]) / w[0].min(w[1]);
            assert!(ratio < 1.5, "{l:?}: {w:?} (all: {t:?})");
        }
    }

    #[test]
    fn tensorrt_llm_rounds_each_sequence_to_its_64_token_blocks() {
        // Issue 40: a concurrency just past what TensorRT-LLM holds must
        // queue. Its paged cache has 64-token blocks (trtllm-build's
        // tokens_per_block) and guaranteed-no-evict reserves prompt and
        // output: 70 + 30 tokens take 2 blocks (128 tokens), not 7 of 16.
        let mut t = infer_bench_spec::model::SimTarget {
            profile: Some(infer_bench_spec::raw::SimProfile::Trtllm),
            ..crate::perf::tests::sim_target("h100-sxm", 1)
        };
        t.kv_cache_tokens = Some(2560);
        let c = crate::profile::resolve(&t, &arch("llama-3.1-8b"), DType::Fp8, None).unwrap();
        assert_eq!(c.kv_block_tokens, 64);
        let mut e = engine_with(&c, "llama-3.1-8b", DType::Fp8);
        for id in 0..21 {
            e.submit(id, 70, 30);
        }
        let s = e.step().unwrap();
        assert_eq!((s.batch_size, e.stats().waiting), (20, 1), "{s:?}");
        assert_eq!(e.stats().kv_capacity_tokens, 2560);
        // vLLM's 16-token blocks hold all 21 (7 blocks each of 160).
        let mut v = target("h100-sxm", 1);
        v.kv_cache_tokens = Some(2560);
        v.admission = SimAdmission::ReserveFull;
        assert_eq!(v.kv_block_tokens, 16);
        let mut e = engine_with(&v, "llama-3.1-8b", DType::Fp8);
        for id in 0..21 {
            e.submit(id, 70, 30);
        }
        assert_eq!(e.step().unwrap().batch_size, 21);
    }

    #[test]
    fn multi_step_pays_the_host_once_and_admits_only_when_it_schedules() {
        let t = EngineConfig {
            scheduler_steps: 4,
            step_overhead_s: 0.002,
            ..target("h100-sxm", 1)
        };
        let mut e = engine_with(&t, "llama-3.1-8b", DType::Bf16);
        e.submit(1, 100, 20);
        e.step().unwrap(); // the prefill: scheduled on its own
        let first = e.step().unwrap(); // decode, a scheduling step
        e.submit(2, 100, 20);
        // Three more decodes of request 1 before request 2 may join, each
        // without the 2 ms of host work.
        for _ in 0..3 {
            let s = e.step().unwrap();
            assert_eq!((s.prefill_tokens, s.decode_tokens), (0, 1));
            assert!(s.duration < first.duration - 0.0015, "{s:?} vs {first:?}");
        }
        assert_eq!(e.step().unwrap().prefill_tokens, 100);
    }
}
