//! Prompt synthesis: what each request says.
//!
//! **Synthesized prompts.** A prompt is words drawn from a list of common
//! English words, joined by single spaces. Without a tokenizer each word
//! counts as one token: every word of the list is a single token (with its
//! leading space) in the Llama, Mistral, Qwen and GPT tokenizers, and the
//! server-reported length is recorded beside the requested one, so any
//! deviation shows. With the model's tokenizer (`models.*.tokenizer`) the
//! list is narrowed to the words that are one token in *that* tokenizer,
//! and the prompt is built to the exact length. Verification is by
//! encoding: once per point, a sample of long random texts of those words
//! is encoded, and if every one counts exactly one token per word (plus the
//! tokenizer's special tokens) the tokenizer is *additive* over the list and
//! every prompt is exact by construction; if not, every prompt is encoded
//! after it is built and corrected (words dropped or added at its end) until
//! it is exact. Encoding costs about a millisecond per thousand tokens, too
//! much to pay per request when it is not needed: the client must never be
//! what limits a benchmark. Lengths count what
//! the server counts: for completions, the special tokens the tokenizer
//! adds (a Llama BOS is one of the N); for chat, the message content only
//! (the chat template's own tokens depend on the server's template and show
//! as the deviation). A length below what is fixed (BOS, a shared prefix)
//! is raised to it.
//!
//! **Caching.** A prompt begins with its shared prefix, if the workload has
//! one (`count` distinct prefixes of exactly `tokens` tokens, generated once
//! per point and the same in every run), then with a few words that spell
//! the request's index (offset by the seed) in base |words|: two requests
//! of a run differ within those words, so by construction no two share
//! more than the prefix plus three words, and a prompt is never served from
//! another's cache unless the spec says so. Datasets are sent as they are.
//!
//! **Datasets.** A prompt (and, when the workload sets no `output_tokens`,
//! its output length) is drawn from the dataset uniformly with replacement.
//!
//! **Traces.** Request `i` is the trace window's request `i`, with its
//! lengths; its prompt is the text of its `hash_ids` blocks (block `id` is
//! `block_tokens` words drawn from (prefix seed, `id`), the last cut to the
//! prompt's length), then marker words and words of its own, so the same
//! block ids give byte-identical prefixes.
//!
//! Everything is a pure function of (seed, index): request `i` is built
//! without building requests `0..i`, and the same spec and seed give the
//! same prompts on every machine.

use std::path::Path;
use std::sync::Arc;

use crate::media::{Media, MediaGen};
use crate::message::Message;
use rand::RngExt;

use super::WorkloadError;
use super::dataset::{self, DatasetPrompts};
use super::tokenizer::TokenCounter;
use super::trace::Replay;
use infer_bench_spec::raw::Api;
use infer_bench_spec::{Model, Workload};

/// Common English words that tokenize to one token each with a leading space.
const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "it",
    "that",
    "for",
    "was",
    "on",
    "are",
    "as",
    "with",
    "his",
    "they",
    "at",
    "be",
    "this",
    "from",
    "have",
    "or",
    "by",
    "one",
    "had",
    "not",
    "but",
    "what",
    "all",
    "were",
    "when",
    "we",
    "there",
    "can",
    "an",
    "your",
    "which",
    "their",
    "said",
    "if",
    "do",
    "will",
    "each",
    "about",
    "how",
    "up",
    "out",
    "them",
    "then",
    "she",
    "many",
    "some",
    "so",
    "these",
    "would",
    "other",
    "into",
    "has",
    "more",
    "her",
    "two",
    "like",
    "him",
    "see",
    "time",
    "could",
    "no",
    "make",
    "than",
    "first",
    "been",
    "its",
    "who",
    "now",
    "people",
    "my",
    "made",
    "over",
    "did",
    "down",
    "only",
    "way",
    "find",
    "use",
    "may",
    "water",
    "long",
    "little",
    "very",
    "after",
    "words",
    "called",
    "just",
    "where",
    "most",
    "know",
    "get",
    "through",
    "back",
    "much",
    "before",
    "go",
    "good",
    "new",
    "write",
    "our",
    "used",
    "me",
    "man",
    "too",
    "any",
    "day",
    "same",
    "right",
    "look",
    "think",
    "also",
    "around",
    "another",
    "came",
    "come",
    "work",
    "three",
    "word",
    "must",
    "because",
    "does",
    "part",
    "even",
    "place",
    "well",
    "such",
    "here",
    "take",
    "why",
    "things",
    "help",
    "put",
    "years",
    "different",
    "away",
    "again",
    "off",
    "went",
    "old",
    "number",
    "great",
    "tell",
    "men",
    "say",
    "small",
    "every",
    "found",
    "still",
    "between",
    "name",
    "should",
    "home",
    "big",
    "give",
    "air",
    "line",
    "set",
    "own",
    "under",
    "read",
    "last",
    "never",
    "us",
    "left",
    "end",
    "along",
    "while",
    "might",
    "next",
    "sound",
    "below",
    "saw",
    "something",
    "thought",
    "both",
    "few",
    "those",
    "always",
    "show",
    "large",
    "often",
    "together",
    "asked",
    "house",
    "world",
    "going",
    "want",
    "school",
    "important",
    "until",
    "form",
    "food",
    "keep",
    "children",
    "feet",
    "land",
    "side",
    "without",
    "boy",
    "once",
    "animals",
    "life",
    "enough",
    "took",
    "sometimes",
    "four",
    "head",
    "above",
    "kind",
    "began",
    "almost",
    "live",
    "page",
    "got",
    "earth",
    "need",
    "far",
    "hand",
    "high",
    "year",
    "mother",
    "light",
    "parts",
    "country",
    "father",
    "let",
    "night",
    "following",
    "picture",
    "being",
    "study",
    "second",
    "eyes",
    "soon",
    "times",
    "story",
    "boys",
    "since",
    "white",
    "days",
    "ever",
    "paper",
    "hard",
    "near",
    "sentence",
    "better",
    "best",
    "across",
    "during",
    "today",
    "others",
    "however",
    "sure",
    "means",
    "knew",
    "try",
    "told",
    "young",
    "miles",
    "sun",
    "ways",
    "thing",
    "whole",
    "hear",
    "example",
    "heard",
    "several",
    "change",
    "answer",
    "room",
    "sea",
    "against",
    "top",
    "turned",
    "learn",
    "point",
    "city",
    "play",
    "toward",
    "five",
    "using",
    "himself",
    "usually",
    "money",
    "seen",
    "car",
    "morning",
    "given",
    "later",
    "state",
    "family",
    "body",
    "music",
    "color",
    "stand",
    "questions",
    "fish",
    "area",
    "mark",
    "horse",
    "birds",
    "problem",
    "complete",
];

/// The text of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// Chat: the messages before `text` (a conversation's history, or a
    /// dataset's earlier messages).
    pub history: Vec<Message>,
    /// The prompt (completions) or the last user message (chat).
    pub text: String,
    /// Its length in tokens as built (see the module docs); for a later
    /// turn of a conversation, the history's length included.
    pub input_tokens: u32,
    /// max_tokens of the request.
    pub output_tokens: u32,
    /// A mixed workload: the index of the part this request is from (0
    /// otherwise).
    pub part: u32,
    /// Images and audio after `text` in the last user message (chat).
    pub media: Option<Arc<Media>>,
    /// Embeddings: the inputs after `text`; rerank: the documents (`text`
    /// is the query). Empty for chat and completions.
    pub items: Vec<String>,
    /// Of `input_tokens`, the tokens of `items`.
    pub item_tokens: u32,
}

/// What a point's prompts are made from, read once per point before its
/// runs: the model's tokenizer and the workload's dataset, if any.
pub struct Material {
    pub counter: Option<TokenCounter>,
    pub dataset: Option<DatasetPrompts>,
    /// A replayed trace's window.
    pub trace: Option<Arc<Replay>>,
    /// A mixed workload: each part's material, in the mix's order.
    pub parts: Vec<Arc<Material>>,
    /// A kserve workload: the items of each input read from a file, by
    /// the input's name (`crate::tensor::load_files`).
    pub tensor_files: crate::tensor::Files,
    /// The words synthesized prompts are made of.
    words: Vec<&'static str>,
    /// With a tokenizer: whether texts of `words` count one token per word
    /// (checked by encoding a sample); if not, every prompt is verified.
    additive: bool,
}

impl std::fmt::Debug for Material {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Material")
            .field("tokenizer", &self.counter.is_some())
            .field("dataset", &self.dataset.as_ref().map(|d| d.entries.len()))
            .field("words", &self.words.len())
            .field("additive", &self.additive)
            .finish()
    }
}

/// Salts the prefix seed for a trace's blocks, so that they are not the
/// workload's shared prefixes.
const TRACE_BLOCKS: u64 = 0x7472_6163_652d_626c;

/// Fewest one-token words a tokenizer must have for synthesis.
const MIN_WORDS: usize = 16;

impl Material {
    /// No tokenizer and no dataset: the word-list approximation.
    pub fn plain() -> Material {
        Material {
            counter: None,
            dataset: None,
            trace: None,
            parts: Vec::new(),
            tensor_files: Default::default(),
            words: WORDS.to_vec(),
            additive: true,
        }
    }

    /// Reads the model's tokenizer and the workload's dataset; relative
    /// paths resolve against `base_dir` (the spec's directory).
    pub fn load(
        workload: &Workload,
        model: &Model,
        base_dir: &Path,
    ) -> Result<Material, WorkloadError> {
        let counter = match &model.tokenizer {
            Some(p) => Some(TokenCounter::load(&base_dir.join(p))?),
            None => None,
        };
        let mut m = Material::new(workload, counter, base_dir)?;
        for part in &workload.mix {
            m.parts
                .push(Arc::new(Material::load(&part.workload, model, base_dir)?));
        }
        Ok(m)
    }

    /// The material of a workload with a tokenizer already loaded.
    pub fn new(
        workload: &Workload,
        counter: Option<TokenCounter>,
        base_dir: &Path,
    ) -> Result<Material, WorkloadError> {
        let dataset = match &workload.dataset {
            Some(d) => Some(dataset::load(
                &base_dir.join(&d.path),
                &dataset::Options {
                    format: d.format,
                    api: workload.api,
                    counter: counter.as_ref(),
                    min_input_tokens: d.min_input_tokens,
                    max_input_tokens: d.max_input_tokens,
                    need_output: workload.output_tokens.is_none(),
                    repo: &infer_bench_spec::files::repository(base_dir),
                },
            )?),
            None => None,
        };
        let trace = match &workload.trace {
            Some(t) => Some(Arc::new(super::trace::load(&base_dir.join(&t.file), t)?)),
            None => None,
        };
        let words = match &counter {
            Some(c) => c.single_token_words(WORDS),
            None => WORDS.to_vec(),
        };
        // Words are needed to synthesize prompts and prefixes; a dataset
        // alone only needs counting.
        let synthesizes = workload.dataset.is_none() || workload.shared_prefix.is_some();
        if let Some(c) = counter
            .as_ref()
            .filter(|_| synthesizes && words.len() < MIN_WORDS)
        {
            return Err(WorkloadError::file(
                Path::new(c.source()),
                format!("fewer than {MIN_WORDS} common English words are one token in this tokenizer, so prompts of exact lengths cannot be built from them"),
            )
            .with_hint("use the model's own tokenizer.json, or remove `tokenizer` to use the approximation"));
        }
        let additive = counter
            .as_ref()
            .is_none_or(|c| words.is_empty() || additive(c, &words));
        let tensor_files = crate::tensor::load_files(workload, base_dir)?;
        Ok(Material {
            counter,
            dataset,
            trace,
            parts: Vec::new(),
            tensor_files,
            words,
            additive,
        })
    }

    /// Whether every prompt is encoded after it is built (the tokenizer
    /// did not prove additive over the word list).
    pub fn verifies_every_prompt(&self) -> bool {
        self.counter.is_some() && !self.additive
    }

    /// Encodes and corrects every prompt, whatever the sample said.
    pub fn verify_every_prompt(&mut self) {
        self.additive = false;
    }

    /// The words synthesized prompts are made of.
    pub fn words(&self) -> &[&'static str] {
        &self.words
    }
}

/// Whether texts made of `words` count exactly one token per word, with
/// and without the tokenizer's special tokens: 16 texts of 256 random
/// words from a fixed seed, so every pair of words is likely to meet.
fn additive(c: &TokenCounter, words: &[&str]) -> bool {
    let mut rng = super::seed::rng(0x1f2e_3d4c, 0);
    (0..16).all(|_| {
        let mut text = String::new();
        push_words(&mut rng, words, 256, &mut text);
        c.count(&text, false) == 256 && c.count(&text, true) == 256 + c.specials()
    })
}

/// Appends `n` random words, space-separated.
fn push_words<R: rand::Rng + ?Sized>(rng: &mut R, words: &[&str], n: u32, out: &mut String) {
    out.reserve(n as usize * 7);
    for _ in 0..n {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(words[rng.random_range(0..words.len())]);
    }
}

/// Drops or adds words at the end of `text` (never before byte `keep`)
/// until it encodes to `target` tokens, at most a few rounds; returns the
/// final count. With one-token words the first count is already exact.
fn fit<R: rand::Rng + ?Sized>(
    c: &TokenCounter,
    words: &[&str],
    text: &mut String,
    keep: usize,
    target: u32,
    specials: bool,
    rng: &mut R,
) -> u32 {
    let mut n = c.count(text, specials);
    for _ in 0..8 {
        if n == target {
            break;
        }
        if n > target {
            for _ in 0..n - target {
                match text[keep..].rfind(' ') {
                    Some(i) => text.truncate(keep + i),
                    None => {
                        text.truncate(keep);
                        break;
                    }
                }
            }
        } else {
            push_words(rng, words, target - n, text);
        }
        n = c.count(text, specials);
    }
    n
}

/// Synthesizes the prompts of one point and run.
pub struct PromptGen {
    workload: Workload,
    material: Arc<Material>,
    seed: u64,
    /// Offsets the index the uniqueness words spell, per run.
    salt: u32,
    prefixes: Vec<String>,
    prefix_tokens: u32,
    /// Tokens before any word: the tokenizer's specials (completions).
    fixed: u32,
    /// Words that spell a request index: the fewest with words^n >= 2^32.
    marker_words: u32,
    /// A mixed workload: each part's generator with the upper end of its
    /// share of [0, 1).
    parts: Vec<(f64, PromptGen)>,
    /// Seeds a trace's blocks (the same in every run of the point).
    prefix_seed: u64,
    /// The workload's images and audio, if any.
    media: Option<Arc<MediaGen>>,
}

impl PromptGen {
    /// `seed` is the run's request seed; prefixes come from `prefix_seed`,
    /// which is the same for every run of the point.
    pub fn new(
        workload: &Workload,
        material: Arc<Material>,
        seed: u64,
        prefix_seed: u64,
    ) -> PromptGen {
        let words = material.words();
        let counter = material.counter.as_ref();
        let prefixes = match &workload.shared_prefix {
            Some(p) => (0..p.count)
                .map(|i| {
                    let mut r = super::seed::rng(prefix_seed, i as u64);
                    let mut s = String::new();
                    push_words(&mut r, words, p.tokens, &mut s);
                    if let Some(c) = counter {
                        fit(c, words, &mut s, 0, p.tokens, false, &mut r);
                    }
                    s
                })
                .collect(),
            None => Vec::new(),
        };
        let fixed = match (counter, workload.api) {
            (Some(c), Api::Completions) => c.specials(),
            _ => 0,
        };
        let mut marker_words = 1u32;
        let base = words.len().max(2) as f64;
        while base.powi(marker_words as i32) < 4_294_967_296.0 {
            marker_words += 1;
        }
        let mut upto = 0.0;
        let parts = workload
            .mix
            .iter()
            .zip(&material.parts)
            .enumerate()
            .map(|(i, (part, m))| {
                upto += part.weight;
                let salt = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1);
                let part_gen =
                    PromptGen::new(&part.workload, m.clone(), seed ^ salt, prefix_seed ^ salt);
                (upto, part_gen)
            })
            .collect();
        let media =
            MediaGen::new(workload.images.as_ref(), workload.audio.as_ref(), seed).map(Arc::new);
        PromptGen {
            parts,
            prefix_seed,
            media,
            workload: workload.clone(),
            seed,
            salt: seed as u32,
            prefix_tokens: workload
                .shared_prefix
                .as_ref()
                .map(|p| p.tokens)
                .unwrap_or(0),
            prefixes,
            fixed,
            marker_words,
            material,
        }
    }

    /// Turns per session (1 without a conversation).
    pub fn turns(&self) -> u32 {
        self.workload
            .conversation
            .as_ref()
            .map(|c| c.turns.max(1))
            .unwrap_or(1)
    }

    /// The material prompts are made from.
    pub fn material(&self) -> &Material {
        &self.material
    }

    /// The prompt of request `index`: the same for the same seed and index.
    pub fn prompt(&self, index: u64) -> Prompt {
        let mut p = self.first(index);
        if self.parts.is_empty() {
            self.add_items(index, &mut p);
        }
        if let Some(g) = &self.media {
            let m = g.media(index);
            p.media = Some(Arc::new(match p.media.take() {
                // A dataset row's images, then the workload's audio.
                Some(row) => row.then(m),
                None => m,
            }));
        }
        p
    }

    /// The prompt of request `index` without its media and without the
    /// items of a retrieval request (embeddings' further inputs, rerank's
    /// documents).
    fn first(&self, index: u64) -> Prompt {
        if !self.parts.is_empty() {
            // A mix: the part by a draw of its own, the prompt by the part.
            let u: f64 = super::seed::rng(self.seed ^ 0x6d69_7865_6421, index).random();
            let i = self
                .parts
                .iter()
                .position(|(upto, _)| u < *upto)
                .unwrap_or(self.parts.len() - 1);
            let mut p = self.parts[i].1.prompt(index);
            p.part = i as u32;
            return p;
        }
        let mut rng = super::seed::rng(self.seed, index);
        let w = &self.workload;
        if w.api == Api::Kserve {
            // Tensors, not text: the protocol writes them (`crate::tensor`).
            return Prompt {
                history: Vec::new(),
                text: String::new(),
                input_tokens: 0,
                output_tokens: 0,
                part: 0,
                media: None,
                items: Vec::new(),
                item_tokens: 0,
            };
        }
        if let Some(ds) = &self.material.dataset {
            return self.drawn_from(ds, &mut rng);
        }
        if let Some(t) = &self.material.trace {
            return self.replayed(t, index, &mut rng);
        }
        let input = w
            .input_tokens
            .as_ref()
            .map(|d| super::lengths::sample(d, &mut rng))
            .unwrap_or(1)
            .max(1);
        let output = self.output(&mut rng, None);
        let mut text = String::new();
        let mut floor = self.fixed;
        if !self.prefixes.is_empty() {
            text.push_str(&self.prefixes[rng.random_range(0..self.prefixes.len())]);
            floor += self.prefix_tokens;
        }
        let keep = text.len();
        let target = input.max(floor);
        let own = target - floor;
        let marker = own.min(self.marker_words);
        self.marker(index, marker, &mut text);
        push_words(&mut rng, self.material.words(), own - marker, &mut text);
        let input_tokens = match &self.material.counter {
            Some(c) if !self.material.additive => fit(
                c,
                self.material.words(),
                &mut text,
                keep,
                target,
                w.api == Api::Completions,
                &mut rng,
            ),
            _ => target,
        };
        Prompt {
            history: Vec::new(),
            text,
            input_tokens,
            output_tokens: output,
            part: 0,
            media: None,
            items: Vec::new(),
            item_tokens: 0,
        }
    }

    /// The prompts of session `s`: turn `k` is `prompt(s * turns + k)`.
    /// Later turns carry only their new message; the engine adds the
    /// history (earlier messages and the server's replies) when it sends.
    pub fn session(&self, s: u64) -> Vec<Prompt> {
        let t = self.turns() as u64;
        (0..t).map(|k| self.prompt(s * t + k)).collect()
    }

    fn output<R: rand::Rng + ?Sized>(&self, rng: &mut R, from_data: Option<u32>) -> u32 {
        match (&self.workload.output_tokens, from_data) {
            (Some(d), _) => super::lengths::sample(d, rng),
            (None, Some(n)) => n,
            (None, None) => 1,
        }
        .max(1)
    }

    /// Words spelling `index` (offset by the run's salt) in base |words|,
    /// least significant first: distinct indices differ in the first words.
    fn marker(&self, index: u64, n: u32, out: &mut String) {
        let words = self.material.words();
        let base = words.len() as u64;
        let mut v = (index as u32).wrapping_add(self.salt) as u64;
        for _ in 0..n {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(words[(v % base) as usize]);
            v /= base;
        }
    }

    /// Request `index` of a trace: its lengths exactly; its prompt the
    /// text of its `hash_ids` blocks (block `id` is `block_tokens` words
    /// drawn from (prefix seed, `id`), the last one cut to the prompt's
    /// length), then the index's marker words and words of its own. The
    /// same block ids give byte-identical prefixes in every request and
    /// run of the point.
    fn replayed<R: rand::Rng + ?Sized>(&self, t: &Replay, index: u64, rng: &mut R) -> Prompt {
        let r = t.record(index);
        let words = self.material.words();
        let target = r.input_tokens.max(self.fixed).max(1);
        let mut left = target - self.fixed;
        let mut text = String::new();
        for id in &r.hash_ids {
            if left == 0 {
                break;
            }
            let n = left.min(t.block_tokens);
            let mut block_rng = super::seed::rng(self.prefix_seed ^ TRACE_BLOCKS, *id);
            push_words(&mut block_rng, words, n, &mut text);
            left -= n;
        }
        let keep = text.len();
        let marker = left.min(self.marker_words);
        self.marker(index, marker, &mut text);
        push_words(rng, words, left - marker, &mut text);
        let input_tokens = match &self.material.counter {
            Some(c) if !self.material.additive => fit(
                c,
                words,
                &mut text,
                keep,
                target,
                self.workload.api == Api::Completions,
                rng,
            ),
            _ => target,
        };
        Prompt {
            history: Vec::new(),
            text,
            input_tokens,
            output_tokens: r.output_tokens,
            part: 0,
            media: None,
            items: Vec::new(),
            item_tokens: 0,
        }
    }

    fn drawn_from<R: rand::Rng + ?Sized>(&self, ds: &DatasetPrompts, rng: &mut R) -> Prompt {
        let e = &ds.entries[rng.random_range(0..ds.entries.len())];
        let output_tokens = self.output(rng, e.output_tokens);
        let mut text = String::new();
        let mut input_tokens = e.input_tokens;
        if !self.prefixes.is_empty() {
            text.push_str(&self.prefixes[rng.random_range(0..self.prefixes.len())]);
            text.push(' ');
            input_tokens += self.prefix_tokens;
        }
        text.push_str(&e.text);
        Prompt {
            history: e.history.clone(),
            text,
            input_tokens,
            output_tokens,
            part: 0,
            media: e.media.clone(),
            items: Vec::new(),
            item_tokens: 0,
        }
    }
}

/// Seeds the items of retrieval requests (a stream of their own, so a
/// request's first text is what it would be without them).
const ITEMS: u64 = 0x6974_656d_7321;

impl PromptGen {
    /// Adds a retrieval request's items to its prompt: an embeddings
    /// request's `batch - 1` further inputs (each of `input_tokens`, or
    /// drawn from the dataset), a rerank request's `documents` documents
    /// (each of `document_tokens`). Each item opens with words spelling a
    /// draw of its own, so no two items of a point are alike (a server
    /// cannot answer one from a cache of another).
    fn add_items(&self, index: u64, p: &mut Prompt) {
        use infer_bench_spec::retrieval::Retrieval;
        let Some(r) = &self.workload.retrieval else {
            return;
        };
        let n = r.items();
        let mut rng = super::seed::rng(self.seed ^ ITEMS, index);
        let words = self.material.words();
        p.items.reserve(n as usize);
        for _ in 0..n {
            if let (Retrieval::Embeddings { .. }, Some(ds)) = (r, &self.material.dataset) {
                let e = &ds.entries[rng.random_range(0..ds.entries.len())];
                p.items.push(e.text.clone());
                p.item_tokens += e.input_tokens;
                continue;
            }
            let dist = match r {
                Retrieval::Embeddings { .. } => self.workload.input_tokens.as_ref(),
                Retrieval::Rerank {
                    document_tokens, ..
                } => Some(document_tokens),
                Retrieval::Tensors(_) => None,
            };
            let target = dist
                .map(|d| super::lengths::sample(d, &mut rng))
                .unwrap_or(1)
                .max(1);
            let mut text = String::new();
            let marker = target.min(self.marker_words);
            let mut v = rng.random::<u64>();
            let base = words.len().max(1) as u64;
            for _ in 0..marker {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(words[(v % base) as usize]);
                v /= base;
            }
            push_words(&mut rng, words, target - marker, &mut text);
            let tokens = match &self.material.counter {
                Some(c) if !self.material.additive => {
                    fit(c, words, &mut text, 0, target, false, &mut rng)
                }
                _ => target,
            };
            p.items.push(text);
            p.item_tokens += tokens;
        }
        p.input_tokens += p.item_tokens;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_spec::{Dist, SharedPrefix};

    fn workload(api: Api, input: Dist, prefix: Option<SharedPrefix>) -> Workload {
        Workload {
            name: "w".into(),
            api,
            input_tokens: Some(input),
            output_tokens: Some(Dist::Fixed(10)),
            shared_prefix: prefix,
            dataset: None,
            trace: None,
            conversation: None,
            ignore_eos: true,
            stream: true,
            max_tokens_field: "max_tokens".into(),
            sampling: Default::default(),
            extra_body: Default::default(),
            mix: Vec::new(),
            images: None,
            audio: None,
            retrieval: None,
            structured: Default::default(),
        }
    }

    fn plain(w: &Workload) -> PromptGen {
        PromptGen::new(w, Arc::new(Material::plain()), 5, 6)
    }

    pub(crate) fn fixture_tokenizer() -> TokenCounter {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/tokenizer/tokenizer.json");
        TokenCounter::load(&path).unwrap()
    }

    fn with_tokenizer(w: &Workload) -> PromptGen {
        let m = Material::new(w, Some(fixture_tokenizer()), Path::new(".")).unwrap();
        PromptGen::new(w, Arc::new(m), 5, 6)
    }

    #[test]
    fn prompts_have_the_requested_word_count_and_are_reproducible() {
        let g = plain(&workload(
            Api::Completions,
            Dist::Uniform { min: 50, max: 60 },
            None,
        ));
        for i in 0..50 {
            let p = g.prompt(i);
            assert_eq!(p.text.split(' ').count() as u32, p.input_tokens);
            assert!((50..=60).contains(&p.input_tokens));
            assert_eq!(p.output_tokens, 10);
            assert_eq!(p, g.prompt(i));
        }
        assert_ne!(g.prompt(0).text, g.prompt(1).text);
    }

    #[test]
    fn no_two_prompts_share_more_than_a_few_words() {
        let g = plain(&workload(Api::Completions, Dist::Fixed(64), None));
        assert_eq!(g.marker_words, 4, "{} words", WORDS.len());
        let heads: std::collections::HashSet<String> = (0..5000)
            .map(|i| {
                g.prompt(i)
                    .text
                    .split(' ')
                    .take(4)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        assert_eq!(
            heads.len(),
            5000,
            "the first four words differ for every request"
        );
        // Another run (another seed) spells other words for the same index.
        let other = PromptGen::new(&g.workload, Arc::new(Material::plain()), 7, 6);
        assert_ne!(
            g.prompt(3).text.split(' ').take(4).collect::<Vec<_>>(),
            other.prompt(3).text.split(' ').take(4).collect::<Vec<_>>()
        );
    }

    #[test]
    fn shared_prefixes_are_shared_and_the_rest_is_unique() {
        let g = plain(&workload(
            Api::Completions,
            Dist::Uniform { min: 50, max: 60 },
            Some(SharedPrefix {
                tokens: 20,
                count: 2,
            }),
        ));
        let split = |i: u64| {
            let t = g.prompt(i).text;
            let w: Vec<&str> = t.split(' ').collect();
            (w[..20].join(" "), w[20..24].join(" "))
        };
        let heads: std::collections::BTreeSet<String> = (0..40).map(|i| split(i).0).collect();
        assert_eq!(heads.len(), 2);
        let tails: std::collections::BTreeSet<String> = (0..40).map(|i| split(i).1).collect();
        assert_eq!(tails.len(), 40);
        let p = g.prompt(3);
        assert_eq!(p.text.split(' ').count() as u32, p.input_tokens);
    }

    #[test]
    fn with_a_tokenizer_lengths_are_exact() {
        let c = fixture_tokenizer();
        assert_eq!(c.specials(), 1, "the fixture adds <s>");
        for n in [1, 7, 100, 1000, 4096] {
            // Completions: BOS is one of the n.
            let g = with_tokenizer(&workload(Api::Completions, Dist::Fixed(n), None));
            for i in 0..3 {
                let p = g.prompt(i);
                assert_eq!(p.input_tokens, n);
                assert_eq!(
                    c.count(&p.text, true),
                    n,
                    "completions, {n} tokens: {:?}",
                    p.text
                );
            }
            // Chat: the content is n tokens.
            let g = with_tokenizer(&workload(Api::Chat, Dist::Fixed(n), None));
            let p = g.prompt(0);
            assert_eq!((p.input_tokens, c.count(&p.text, false)), (n, n));
        }
    }

    #[test]
    fn with_a_tokenizer_prefixes_are_exact_and_shared() {
        let c = fixture_tokenizer();
        let g = with_tokenizer(&workload(
            Api::Completions,
            Dist::Uniform { min: 300, max: 400 },
            Some(SharedPrefix {
                tokens: 128,
                count: 3,
            }),
        ));
        for p in &g.prefixes {
            assert_eq!(c.count(p, false), 128);
        }
        for i in 0..20 {
            let p = g.prompt(i);
            assert_eq!(c.count(&p.text, true), p.input_tokens);
            assert!((300..=400).contains(&p.input_tokens));
            let ids = c.ids(&p.text, true);
            let shared = g
                .prefixes
                .iter()
                .any(|pre| ids[1..129] == c.ids(pre, false)[..]);
            assert!(shared, "the prompt's tokens 1..=128 are a prefix's tokens");
        }
        // Below the floor (BOS + prefix), a length is raised to it.
        let g = with_tokenizer(&workload(
            Api::Completions,
            Dist::Fixed(10),
            Some(SharedPrefix {
                tokens: 128,
                count: 1,
            }),
        ));
        let p = g.prompt(0);
        assert_eq!((p.input_tokens, c.count(&p.text, true)), (129, 129));
    }

    #[test]
    fn verified_prompts_equal_prompts_exact_by_construction() {
        let w = workload(Api::Completions, Dist::Uniform { min: 1, max: 600 }, None);
        let fast = with_tokenizer(&w);
        assert!(
            !fast.material().verifies_every_prompt(),
            "the fixture is additive"
        );
        let mut m = Material::new(&w, Some(fixture_tokenizer()), Path::new(".")).unwrap();
        m.verify_every_prompt();
        let slow = PromptGen::new(&w, Arc::new(m), 5, 6);
        for i in 0..30 {
            assert_eq!(fast.prompt(i), slow.prompt(i));
        }
    }

    #[test]
    fn fit_corrects_a_text_whose_words_are_not_one_token_each() {
        let c = fixture_tokenizer();
        let one = c.single_token_words(WORDS);
        let mut rng = infer_bench_spec::seed::rng(9, 0);
        // All words, many of which split into several tokens here.
        let mut text = "keep this".to_string();
        push_words(&mut rng, WORDS, 500, &mut text);
        assert!(c.count(&text, true) > 503, "some words split");
        let n = fit(&c, &one, &mut text, 9, 400, true, &mut rng);
        assert_eq!((n, c.count(&text, true)), (400, 400));
        assert!(text.starts_with("keep this "));
        // And upwards.
        let mut short = String::new();
        push_words(&mut rng, WORDS, 10, &mut short);
        let n = fit(&c, &one, &mut short, 0, 300, false, &mut rng);
        assert_eq!((n, c.count(&short, false)), (300, 300));
    }

    #[test]
    fn the_fixture_tokenizer_splits_some_words() {
        // So the narrowing of the word list is exercised, not vacuous.
        let m = Material::new(
            &workload(Api::Completions, Dist::Fixed(8), None),
            Some(fixture_tokenizer()),
            Path::new("."),
        )
        .unwrap();
        assert!(m.words().len() >= MIN_WORDS);
        assert!(
            m.words().len() < WORDS.len(),
            "{} of {}",
            m.words().len(),
            WORDS.len()
        );
    }
}
