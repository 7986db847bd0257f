//! What the simulated model answers when asked greedily (`temperature`
//! 0): text that is a pure function of the prompt, with the
//! log-probabilities behind each token, and that parts from the reference
//! precision's answer at a known rate, so that the quality metrics have a
//! truth to be checked against on a laptop.
//!
//! The model: at each position, every word of a 64-word vocabulary gets a
//! logit drawn (Gumbel) from a hash of the prompt and of the words chosen
//! so far, so a position's distribution depends on its whole context, as
//! a language model's does. The reference (BF16 weights and KV cache, and
//! FP32) decodes greedily on those logits. Another precision adds small
//! noise to them (scaled with its rate, so the divergence of its
//! distributions grows with it) and, at each position with probability
//! [`divergence`] of its number formats, picks the reference's second
//! choice instead of its first; everywhere else it keeps the reference's
//! choice. After a difference the context differs, and so does the rest
//! of the answer. An answer of `n` tokens thus equals the reference's with
//! probability `(1 - d)^n`.
//!
//! The rates are the simulator's assumptions, ordered by how coarse a
//! format is, not measurements of any model (docs/simulator.md).

use infer_bench_spec::DType;

/// The simulated model's vocabulary: one word per token.
const VOCAB: &[&str] = &[
    "the", "model", "says", "that", "tokens", "flow", "in", "batches", "of", "time", "and",
    "memory", "a", "river", "runs", "north", "past", "seven", "quiet", "towns", "where", "engines",
    "hum", "under", "blue", "paper", "skies", "while", "copper", "signals", "cross", "through",
    "winter", "market", "each", "garden", "keeps", "its", "own", "small", "light", "so", "every",
    "answer", "comes", "back", "slowly", "but", "surely", "to", "one", "who", "asks", "again",
    "with", "care", "for", "what", "was", "said", "before", "now", "then", "here",
];

/// The most alternatives listed per position.
pub const MAX_TOP: usize = 20;

/// The per-token rate at which a precision's greedy answer parts from
/// the reference's (BF16): its weights' rate plus its KV cache's.
pub fn divergence(weights: DType, kv: Option<DType>) -> f64 {
    let w = match weights {
        DType::Fp32 | DType::Bf16 => 0.0,
        DType::Fp16 => 0.002,
        DType::Fp8 | DType::Int8 => 0.01,
        DType::Fp4 => 0.03,
        DType::Int4 => 0.05,
    };
    let k = match kv {
        None | Some(DType::Fp32 | DType::Bf16) => 0.0,
        Some(DType::Fp16) => 0.001,
        Some(DType::Fp8 | DType::Int8) => 0.005,
        Some(DType::Fp4 | DType::Int4) => 0.02,
    };
    w + k
}

/// One generated token with its log-probability and the most likely
/// alternatives at its position, most likely first.
#[derive(Debug, Clone, PartialEq)]
pub struct SimToken {
    pub word: &'static str,
    pub logprob: f64,
    pub top: Vec<(&'static str, f64)>,
}

/// The greedy answers of one precision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answerer {
    /// Per-token probability of taking the reference's second choice.
    rate: f64,
    /// Tells this precision's noise and choices from another's.
    salt: u64,
}

impl Answerer {
    /// The answers of a model served with these number formats.
    pub fn of(weights: DType, kv: Option<DType>) -> Answerer {
        let salt = mix(0xA115_0000 ^ ((weights as u64) << 8) ^ kv.map_or(0xff, |k| k as u64));
        Answerer {
            rate: divergence(weights, kv),
            salt,
        }
    }

    /// The per-token rate this precision parts from the reference at.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The first `n` tokens of the greedy answer to the prompt hashed as
    /// `prompt` (see [`prompt_hash`]), each with `top` alternatives (at
    /// most [`MAX_TOP`]).
    pub fn answer(&self, prompt: u64, n: u32, top: usize) -> Vec<SimToken> {
        self.generate(prompt, top).take(n as usize).collect()
    }

    /// The greedy answer to the prompt hashed as `prompt`, a token at a
    /// time (as a stream hands them out).
    pub fn generate(&self, prompt: u64, top: usize) -> Generation {
        Generation {
            rate: self.rate,
            salt: self.salt,
            top: top.min(MAX_TOP),
            state: mix(prompt ^ 0x5EED_A115),
        }
    }
}

/// A greedy answer being generated: its context so far, as a hash.
#[derive(Debug, Clone)]
pub struct Generation {
    rate: f64,
    salt: u64,
    top: usize,
    state: u64,
}

impl Iterator for Generation {
    type Item = SimToken;

    fn next(&mut self) -> Option<SimToken> {
        let state = self.state;
        let mut logits = [0f64; VOCAB.len()];
        for (w, l) in logits.iter_mut().enumerate() {
            *l = gumbel(mix(state ^ mix(w as u64 + 1)));
        }
        let (first, second) = best_two(&logits);
        if self.rate > 0.0 {
            let own = mix(state ^ self.salt);
            let noise = (4.0 * self.rate).min(1.0);
            for (w, l) in logits.iter_mut().enumerate() {
                *l += noise * (2.0 * unit(mix(own ^ mix(w as u64 + 101))) - 1.0);
            }
            let want = if unit(mix(own ^ 0xF11F)) < self.rate {
                second
            } else {
                first
            };
            let (now, _) = best_two(&logits);
            logits.swap(now, want);
        }
        let (chosen, _) = best_two(&logits);
        let max = logits[chosen];
        let log_z = max + logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln();
        let mut top = Vec::new();
        if self.top > 0 {
            let mut order: Vec<usize> = (0..VOCAB.len()).collect();
            order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
            top = order
                .iter()
                .take(self.top)
                .map(|&w| (VOCAB[w], logits[w] - log_z))
                .collect();
        }
        self.state = mix(state ^ mix(0x70C0 + chosen as u64));
        Some(SimToken {
            word: VOCAB[chosen],
            logprob: logits[chosen] - log_z,
            top,
        })
    }
}

/// A prompt's identity for [`Answerer::answer`]: FNV-1a over its bytes
/// (the request's prompt, messages or input, as JSON).
pub fn prompt_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The text of words as the simulator writes them: a space before each.
pub fn text(words: impl IntoIterator<Item = &'static str>) -> String {
    let mut s = String::new();
    for w in words {
        s.push(' ');
        s.push_str(w);
    }
    s
}

/// The indices of the largest and second largest values (distinct
/// indices; ties to the lower index).
fn best_two(v: &[f64]) -> (usize, usize) {
    let (mut a, mut b) = (0, 1);
    if v[b] > v[a] {
        std::mem::swap(&mut a, &mut b);
    }
    for (i, &x) in v.iter().enumerate().skip(2) {
        if x > v[a] {
            b = a;
            a = i;
        } else if x > v[b] {
            b = i;
        }
    }
    (a, b)
}

/// SplitMix64's finalizer: a well-mixed 64-bit hash of `z`.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform number in (0, 1) from a hash.
fn unit(h: u64) -> f64 {
    ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// A standard Gumbel variate from a hash.
fn gumbel(h: u64) -> f64 {
    -(-unit(h).ln()).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_its_own_token() {
        let mut v = VOCAB.to_vec();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), VOCAB.len());
        assert_eq!(VOCAB.len(), 64);
    }

    #[test]
    fn the_reference_formats_answer_alike_and_deterministically() {
        let bf16 = Answerer::of(DType::Bf16, None);
        let fp32 = Answerer::of(DType::Fp32, Some(DType::Bf16));
        let h = prompt_hash(b"\"hello\"");
        let a = bf16.answer(h, 32, 5);
        assert_eq!(a, bf16.answer(h, 32, 5));
        let words = |v: &[SimToken]| v.iter().map(|t| t.word).collect::<Vec<_>>();
        assert_eq!(words(&a), words(&fp32.answer(h, 32, 5)));
        // Another prompt, another answer.
        assert_ne!(
            words(&a),
            words(&bf16.answer(prompt_hash(b"\"bye\""), 32, 5))
        );
        for t in &a {
            assert_eq!(t.top.len(), 5);
            assert_eq!(t.top[0].0, t.word, "greedy: the most likely word");
            assert!(t.logprob < 0.0 && t.top.windows(2).all(|w| w[0].1 >= w[1].1));
        }
    }

    #[test]
    fn a_precision_parts_from_the_reference_at_its_rate() {
        let reference = Answerer::of(DType::Bf16, None);
        let int4 = Answerer::of(DType::Int4, None);
        assert_eq!(int4.rate(), 0.05);
        // The first difference is geometric with the rate: over 2000
        // prompts, the share of positions where the first difference
        // falls (of those reached) estimates it.
        let (mut differ, mut reached) = (0u64, 0u64);
        for p in 0..2000u64 {
            let h = mix(p);
            let r = reference.answer(h, 16, 0);
            let c = int4.answer(h, 16, 0);
            let first = r
                .iter()
                .zip(&c)
                .take_while(|(a, b)| a.word == b.word)
                .count();
            reached += first as u64 + u64::from(first < 16);
            differ += u64::from(first < 16);
        }
        let rate = differ as f64 / reached as f64;
        // Binomial sd at 0.05 over ~25000 positions is 0.0014: 5 sd.
        assert!((rate - 0.05).abs() < 0.007, "{rate}");
    }
}
