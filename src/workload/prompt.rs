//! Prompt synthesis. Until a tokenizer is given, a prompt of N tokens is N
//! words drawn from a list of common English words, each of which is a
//! single token (with its leading space) in the Llama, Mistral, Qwen and
//! GPT tokenizers; the server-reported prompt length is recorded beside the
//! requested one, so any deviation (chat templates add tokens) is visible.
//! Shared prefixes are generated once per point; the rest of each prompt is
//! unique, so caching helps exactly as much as the spec says it should.

use rand::RngExt;

use crate::spec::Workload;

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
    pub text: String,
    /// The length asked for, in tokens.
    pub input_tokens: u32,
    /// max_tokens of the request.
    pub output_tokens: u32,
}

/// Synthesizes the prompts of one point and run.
pub struct PromptGen {
    workload: Workload,
    seed: u64,
    prefixes: Vec<String>,
}

fn words<R: rand::Rng + ?Sized>(rng: &mut R, n: u32, out: &mut String) {
    out.reserve(n as usize * 6);
    for i in 0..n {
        if i > 0 || !out.is_empty() {
            out.push(' ');
        }
        out.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
}

impl PromptGen {
    /// `seed` is the run's request seed; prefixes come from `prefix_seed`,
    /// which is the same for every run of the point.
    pub fn new(workload: &Workload, seed: u64, prefix_seed: u64) -> PromptGen {
        let prefixes = match &workload.shared_prefix {
            Some(p) => (0..p.count)
                .map(|i| {
                    let mut r = super::seed::rng(prefix_seed, i as u64);
                    let mut s = String::new();
                    words(&mut r, p.tokens, &mut s);
                    s
                })
                .collect(),
            None => Vec::new(),
        };
        PromptGen {
            workload: workload.clone(),
            seed,
            prefixes,
        }
    }

    /// The prompt of request `index`: the same for the same seed and index.
    pub fn prompt(&self, index: u64) -> Prompt {
        let mut rng = super::seed::rng(self.seed, index);
        let w = &self.workload;
        let input = w
            .input_tokens
            .as_ref()
            .map(|d| super::lengths::sample(d, &mut rng))
            .unwrap_or(1)
            .max(1);
        let output = w
            .output_tokens
            .as_ref()
            .map(|d| super::lengths::sample(d, &mut rng))
            .unwrap_or(1)
            .max(1);
        let mut text = String::new();
        let mut own = input;
        if !self.prefixes.is_empty() {
            let p = &self.prefixes[rng.random_range(0..self.prefixes.len())];
            text.push_str(p);
            own = own.saturating_sub(w.shared_prefix.as_ref().map(|p| p.tokens).unwrap_or(0));
        }
        words(&mut rng, own, &mut text);
        Prompt {
            text,
            input_tokens: input,
            output_tokens: output,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::raw::Api;
    use crate::spec::{Dist, SharedPrefix};

    fn workload(prefix: Option<SharedPrefix>) -> Workload {
        Workload {
            name: "w".into(),
            api: Api::Completions,
            input_tokens: Some(Dist::Uniform { min: 50, max: 60 }),
            output_tokens: Some(Dist::Fixed(10)),
            shared_prefix: prefix,
            dataset: None,
            conversation: None,
            ignore_eos: true,
            stream: true,
            max_tokens_field: "max_tokens".into(),
            sampling: Default::default(),
            extra_body: Default::default(),
        }
    }

    #[test]
    fn prompts_have_the_requested_word_count_and_are_reproducible() {
        let g = PromptGen::new(&workload(None), 5, 6);
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
    fn shared_prefixes_are_shared() {
        let g = PromptGen::new(
            &workload(Some(SharedPrefix {
                tokens: 20,
                count: 2,
            })),
            5,
            6,
        );
        let heads: std::collections::BTreeSet<String> = (0..40)
            .map(|i| {
                g.prompt(i)
                    .text
                    .split(' ')
                    .take(20)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        assert_eq!(heads.len(), 2);
        let p = g.prompt(3);
        assert_eq!(p.text.split(' ').count() as u32, p.input_tokens);
    }
}
