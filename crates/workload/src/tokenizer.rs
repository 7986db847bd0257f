//! Token counting with a model's own tokenizer: a Hugging Face
//! `tokenizer.json` loaded with the `tokenizers` crate (no network, no C
//! dependencies). It counts tokens the way the server will: `count(text,
//! true)` includes the special tokens the tokenizer's post-processor adds
//! around any text (a Llama tokenizer's BOS), which is what a server's
//! `usage.prompt_tokens` reports for a completions prompt.

use std::path::Path;

use super::{TokenizerError, WorkloadError};

/// A loaded tokenizer.
pub struct TokenCounter {
    tok: tokenizers::Tokenizer,
    /// Tokens the post-processor adds to any text (BOS, EOS...).
    specials: u32,
    /// Where it came from, for messages.
    source: String,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter")
            .field("specials", &self.specials)
            .finish_non_exhaustive()
    }
}

impl TokenCounter {
    /// Loads a `tokenizer.json`. Truncation and padding settings in the
    /// file are dropped: a count must be the text's full length.
    pub fn load(path: &Path) -> Result<TokenCounter, WorkloadError> {
        use infer_bench_spec::files;
        let bytes = files::read_regular(path, files::MAX_TOKENIZER_BYTES)
            .map_err(|e| WorkloadError::file(path, e.to_string()))?;
        let mut t = TokenCounter::from_bytes(&bytes).map_err(|m| {
            WorkloadError::file(path, m.to_string()).with_hint(
                "`tokenizer` must point at a Hugging Face tokenizer.json (the file model repositories ship beside the weights)",
            )
        })?;
        t.source = path.display().to_string();
        Ok(t)
    }

    /// A tokenizer from the bytes of a `tokenizer.json`.
    pub fn from_bytes(bytes: &[u8]) -> Result<TokenCounter, TokenizerError> {
        let mut tok =
            infer_bench_spec::tokenizer::parse(bytes).map_err(TokenizerError::NotTokenizer)?;
        tok.with_truncation(None)
            .map_err(TokenizerError::Truncation)?;
        tok.with_padding(None);
        let mut t = TokenCounter {
            tok,
            specials: 0,
            source: "tokenizer.json".into(),
        };
        t.specials = t.count("", true);
        Ok(t)
    }

    /// Tokens in `text`; with `specials`, those the post-processor adds too.
    pub fn count(&self, text: &str, specials: bool) -> u32 {
        self.tok
            .encode_fast(text, specials)
            .map(|e| e.len() as u32)
            .unwrap_or(u32::MAX)
    }

    /// The file it was loaded from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Tokens added to every text by the post-processor (1 for BOS).
    pub fn specials(&self) -> u32 {
        self.specials
    }

    /// The token strings of `text` (for tests and diagnostics; slower
    /// than `count`, which skips building them).
    pub fn tokens(&self, text: &str, specials: bool) -> Vec<String> {
        self.tok
            .encode(text, specials)
            .map(|e| e.get_tokens().to_vec())
            .unwrap_or_default()
    }

    /// Token ids of `text`.
    pub fn ids(&self, text: &str, specials: bool) -> Vec<u32> {
        self.tok
            .encode_fast(text, specials)
            .map(|e| e.get_ids().to_vec())
            .unwrap_or_default()
    }

    /// The words of `candidates` that are one token wherever they stand in
    /// a text of words joined by single spaces: alone (first word) and
    /// after another word. Prompts built from these have exactly one token
    /// per word; the builder still verifies.
    /// A word that maps to a special token (an unknown word's `<unk>`)
    /// does not count.
    pub fn single_token_words<'a>(&self, candidates: &[&'a str]) -> Vec<&'a str> {
        let special: std::collections::HashSet<u32> = self
            .tok
            .get_added_tokens_decoder()
            .iter()
            .filter(|(_, t)| t.special)
            .map(|(id, _)| *id)
            .collect();
        candidates
            .iter()
            .copied()
            .filter(|w| {
                let ids = self.ids(w, false);
                ids.len() == 1
                    && !special.contains(&ids[0])
                    && self.count(&format!("{w} {w} {w}"), false) == 3
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Material;
    use infer_bench_spec::raw::Api;
    use infer_bench_spec::{Dist, Workload};

    /// A word-level tokenizer that knows three words; all others are <unk>.
    const TINY: &str = r#"{"version":"1.0","truncation":null,"padding":null,
        "added_tokens":[{"id":0,"content":"[UNK]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],
        "normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,
        "model":{"type":"WordLevel","vocab":{"[UNK]":0,"the":1,"of":2,"and":3},"unk_token":"[UNK]"}}"#;

    fn workload(dataset: bool) -> Workload {
        Workload {
            name: "w".into(),
            api: Api::Completions,
            input_tokens: (!dataset).then_some(Dist::Fixed(8)),
            output_tokens: Some(Dist::Fixed(8)),
            shared_prefix: None,
            dataset: dataset.then(|| infer_bench_spec::Dataset {
                path: "tests/fixtures/datasets/prompts.jsonl".into(),
                sha256: String::new(),
                format: infer_bench_spec::raw::DatasetFormat::Jsonl,
                min_input_tokens: None,
                max_input_tokens: None,
            }),
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

    #[test]
    fn unknown_words_are_not_one_token_words() {
        let t = TokenCounter::from_bytes(TINY.as_bytes()).unwrap();
        assert_eq!(t.count("zebra", false), 1, "<unk>");
        assert_eq!(
            t.single_token_words(&["the", "zebra", "and"]),
            ["the", "and"]
        );
    }

    #[test]
    fn a_tokenizer_without_enough_words_cannot_synthesize_but_can_count() {
        let base = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        let t = || Some(TokenCounter::from_bytes(TINY.as_bytes()).unwrap());
        let e = Material::new(&workload(false), t(), base).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tokenizer.json: fewer than 16 common English words are one token in this tokenizer, so prompts of exact lengths cannot be built from them\n  hint: use the model's own tokenizer.json, or remove `tokenizer` to use the approximation"
        );
        let m = Material::new(&workload(true), t(), base).unwrap();
        assert_eq!(m.dataset.unwrap().entries.len(), 5);
    }
}
