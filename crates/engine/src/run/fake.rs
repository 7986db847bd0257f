//! A deterministic in-memory backend for tests of the load engine: it
//! "streams" `output_tokens` events after scripted delays without any
//! network, so scheduling, recording and statistics can be checked alone.

use std::time::{Duration, Instant};

use infer_bench_protocol::{Backend, Prepared, WarmError};
use infer_bench_protocol::{ErrorClass, OutputEvent, RequestRecord};
use infer_bench_workload::Prompt;

/// Scripted behaviour.
#[derive(Debug, Clone)]
pub struct FakeBackend {
    pub ttft: Duration,
    pub itl: Duration,
    /// Fail every n-th request (by index) with this class; 0 = never.
    pub fail_every: u64,
    pub fail_class: ErrorClass,
}

impl Default for FakeBackend {
    fn default() -> Self {
        FakeBackend {
            ttft: Duration::from_millis(5),
            itl: Duration::from_millis(1),
            fail_every: 0,
            fail_class: ErrorClass::Status5xx,
        }
    }
}

impl Backend for FakeBackend {
    fn prepare(&self, prompt: &Prompt) -> Prepared {
        Prepared {
            body: bytes::Bytes::new(),
            input_tokens: prompt.input_tokens,
            output_tokens: prompt.output_tokens,
            part: prompt.part,
            media: prompt.media.as_deref().map(|m| m.sent).unwrap_or_default(),
            units: Default::default(),
        }
    }

    async fn send(&self, req: Prepared, mut rec: RequestRecord) -> RequestRecord {
        rec.requested_input = req.input_tokens;
        rec.requested_output = req.output_tokens;
        rec.part = req.part;
        rec.media = req.media;
        rec.t_send = Instant::now();
        if self.fail_every > 0 && rec.index % self.fail_every == self.fail_every - 1 {
            tokio::time::sleep(self.ttft).await;
            rec.t_done = Instant::now();
            rec.fail(self.fail_class, "scripted failure");
            return rec;
        }
        for i in 0..req.output_tokens {
            let due = rec.t_send + self.ttft + self.itl * i;
            tokio::time::sleep_until(due.into()).await;
            rec.events.push(OutputEvent {
                at_ns: Instant::now().duration_since(rec.t_send).as_nanos() as u64,
                text_bytes: 4,
                token_ids: None,
                reasoning: false,
            });
        }
        rec.usage.prompt_tokens = Some(req.input_tokens);
        rec.usage.completion_tokens = Some(req.output_tokens);
        rec.t_done = Instant::now();
        rec
    }

    /// Any answer in hand is one event of `output_tokens` 4-byte tokens.
    fn read_answer(&self, _body: &[u8], rec: &mut RequestRecord, at: Instant) {
        rec.t_done = at;
        rec.events.push(OutputEvent {
            at_ns: at.saturating_duration_since(rec.t_send).as_nanos() as u64,
            text_bytes: 4 * rec.requested_output,
            token_ids: None,
            reasoning: false,
        });
    }

    /// No connections to open.
    async fn warm(&self, _n: usize) -> Result<(), WarmError> {
        Ok(())
    }
}
