//! The engines of one simulated deployment. Data-parallel `replicas` each
//! serve their share of the requests on their own GPUs; a pipeline of
//! `pipeline` stages runs as many micro-batches at once, each an engine of
//! its own over the pipeline's shared KV cache (vLLM's "virtual engines").
//! So a deployment is `replicas × pipeline` independent [`Engine`]s: a new
//! request goes to the one with the fewest requests, running or waiting
//! (the first on a tie), and each steps on its own schedule, which the
//! drivers keep (`server.rs` in real time, the engine crate's virtual-time
//! run). Counters are summed over the engines; KV usage is the share of
//! all their blocks in use. Pure, like the engine: no clock, no I/O.

use std::collections::HashMap;

use super::engine::{Engine, EngineStats, Step};

/// The engines of one deployment.
#[derive(Debug)]
pub struct Cluster {
    engines: Vec<Engine>,
    /// Which engine holds each live request.
    owner: HashMap<u64, usize>,
    /// Requests each engine holds, running or waiting.
    load: Vec<usize>,
}

impl Cluster {
    /// A deployment of the given engines (at least one).
    pub fn new(engines: Vec<Engine>) -> Cluster {
        assert!(!engines.is_empty(), "a deployment has an engine");
        let load = vec![0; engines.len()];
        Cluster {
            engines,
            owner: HashMap::new(),
            load,
        }
    }

    /// Engines in the deployment.
    pub fn len(&self) -> usize {
        self.engines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.engines.is_empty()
    }

    /// Queues a request on the least loaded engine. An id already live is
    /// ignored, as the engine does.
    pub fn submit(&mut self, id: u64, prompt_tokens: u32, max_tokens: u32) {
        self.submit_with_images(id, prompt_tokens, max_tokens, 0);
    }

    /// [`Cluster::submit`] for a prompt of which `image_tokens` are images'
    /// (see [`Engine::submit_with_images`]).
    pub fn submit_with_images(
        &mut self,
        id: u64,
        prompt_tokens: u32,
        max_tokens: u32,
        image_tokens: u32,
    ) {
        if self.owner.contains_key(&id) {
            return;
        }
        let i = (0..self.load.len())
            .min_by_key(|&i| (self.load[i], i))
            .unwrap_or(0);
        self.owner.insert(id, i);
        self.load[i] += 1;
        self.engines[i].submit_with_images(id, prompt_tokens, max_tokens, image_tokens);
    }

    /// The client went away: its engine forgets the request.
    pub fn cancel(&mut self, id: u64) {
        if let Some(i) = self.owner.remove(&id) {
            self.load[i] -= 1;
            self.engines[i].cancel(id);
        }
    }

    /// Plans and runs engine `i`'s next step; `None` when it has nothing
    /// to do.
    pub fn step(&mut self, i: usize) -> Option<Step> {
        let step = self.engines[i].step()?;
        for id in &step.finished {
            if self.owner.remove(id).is_some() {
                self.load[i] -= 1;
            }
        }
        Some(step)
    }

    /// The deployment's counters, in vLLM's terms (see [`EngineStats`]).
    pub fn stats(&self) -> EngineStats {
        let mut total = EngineStats::default();
        let mut used = 0.0;
        for e in &self.engines {
            let s = e.stats();
            total.running += s.running;
            total.waiting += s.waiting;
            total.preemptions_total += s.preemptions_total;
            total.prompt_tokens_total += s.prompt_tokens_total;
            total.generation_tokens_total += s.generation_tokens_total;
            total.requests_finished_total += s.requests_finished_total;
            total.requests_rejected_total += s.requests_rejected_total;
            total.kv_capacity_tokens += s.kv_capacity_tokens;
            used += s.kv_usage * s.kv_capacity_tokens as f64;
        }
        if total.kv_capacity_tokens > 0 {
            total.kv_usage = used / total.kv_capacity_tokens as f64;
        }
        total
    }

    /// The longest prompt + output one request may have (every engine has
    /// the same).
    pub fn max_model_len_tokens(&self) -> u32 {
        self.engines[0].max_model_len_tokens()
    }

    pub fn tokens_per_event(&self) -> u32 {
        self.engines[0].tokens_per_event()
    }

    pub fn request_overhead_s(&self) -> f64 {
        self.engines[0].request_overhead_s()
    }

    pub fn engine(&self, i: usize) -> &Engine {
        &self.engines[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::PerfModel;
    use crate::perf::tests::{arch, target};
    use infer_bench_spec::model::DType;

    fn cluster(n: usize) -> Cluster {
        let t = target("h100-sxm", 1);
        Cluster::new(
            (0..n)
                .map(|_| {
                    Engine::new(
                        PerfModel::new(&t, &arch("llama-3.1-8b"), DType::Bf16).unwrap(),
                        &t,
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn requests_spread_over_the_engines_and_are_counted_once() {
        let mut c = cluster(2);
        for id in 0..4 {
            c.submit(id, 100, 3);
        }
        c.submit(0, 100, 3); // already live: ignored
        assert_eq!(c.stats().waiting, 4);
        // Each engine took two.
        let (a, b) = (c.step(0).unwrap(), c.step(1).unwrap());
        assert_eq!((a.batch_size, b.batch_size), (2, 2));
        c.cancel(1);
        assert_eq!(c.stats().running, 3);
        // The next request goes to the engine that lost one.
        c.submit(9, 100, 3);
        assert_eq!(c.engine(1).stats().running + c.engine(1).stats().waiting, 2);
        let mut finished = 0;
        for i in 0..2 {
            while let Some(s) = c.step(i) {
                finished += s.finished.len();
            }
        }
        assert_eq!(finished, 4);
        let s = c.stats();
        assert_eq!((s.running, s.waiting, s.requests_finished_total), (0, 0, 4));
        assert_eq!(
            s.kv_capacity_tokens,
            2 * c.engine(0).stats().kv_capacity_tokens
        );
        assert!(c.owner.is_empty() && c.load.iter().all(|&l| l == 0));
    }
}
