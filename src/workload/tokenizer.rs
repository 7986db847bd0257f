//! Token counting with a model's own tokenizer: a Hugging Face
//! `tokenizer.json` loaded with the `tokenizers` crate (no network, no C
//! dependencies). It counts tokens the way the server will: `count(text,
//! true)` includes the special tokens the tokenizer's post-processor adds
//! around any text (a Llama tokenizer's BOS), which is what a server's
//! `usage.prompt_tokens` reports for a completions prompt.

use std::path::Path;

use super::WorkloadError;

/// A loaded tokenizer.
pub struct TokenCounter {
    tok: tokenizers::Tokenizer,
    /// Tokens the post-processor adds to any text (BOS, EOS...).
    specials: u32,
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
        let bytes = std::fs::read(path).map_err(|e| WorkloadError::file(path, e.to_string()))?;
        TokenCounter::from_bytes(&bytes).map_err(|m| {
            WorkloadError::file(path, m).with_hint(
                "`tokenizer` must point at a Hugging Face tokenizer.json (the file model repositories ship beside the weights)",
            )
        })
    }

    /// A tokenizer from the bytes of a `tokenizer.json`.
    pub fn from_bytes(bytes: &[u8]) -> Result<TokenCounter, String> {
        let mut tok = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| format!("not a tokenizer.json: {e}"))?;
        tok.with_truncation(None)
            .map_err(|e| format!("cannot turn truncation off: {e}"))?;
        tok.with_padding(None);
        let mut t = TokenCounter { tok, specials: 0 };
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
    pub fn single_token_words<'a>(&self, candidates: &[&'a str]) -> Vec<&'a str> {
        candidates
            .iter()
            .copied()
            .filter(|w| {
                self.count(w, false) == 1 && self.count(&format!("{w} {w} {w}"), false) == 3
            })
            .collect()
    }
}
