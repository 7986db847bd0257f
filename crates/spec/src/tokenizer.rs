//! Parsing a Hugging Face `tokenizer.json` with memory that follows the
//! tokenizer, not the file: what `validate` checks and what a run loads
//! go through [`parse`], so a file one accepts the other accepts too.
//!
//! `tokenizers::Tokenizer::from_bytes` does not know the model's kind
//! until it has read the model's object, so it buffers that object twice
//! over (serde's untagged buffer, then a `serde_json::Value`) before
//! building the model from the copy: about 30 bytes of memory per byte of
//! file at its peak (1.95 GB for a 61 MB file). Reading the model's
//! `"type"` first (a pass that skips everything else without allocating)
//! lets the second pass build the model of that kind straight from the
//! bytes. A file without a `"type"` (written by tokenizers before 0.9)
//! still goes the library's way.

use serde::Deserialize;
use tokenizers::models::{bpe::BPE, unigram::Unigram, wordlevel::WordLevel, wordpiece::WordPiece};
use tokenizers::{
    DecoderWrapper, NormalizerWrapper, PostProcessorWrapper, PreTokenizerWrapper, Tokenizer,
    TokenizerImpl,
};

/// The kind of model a `tokenizer.json` declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bpe,
    WordPiece,
    WordLevel,
    Unigram,
}

/// What the first pass reads: the model's `"type"`, nothing else.
#[derive(Deserialize)]
struct Outline {
    model: Option<ModelOutline>,
}

#[derive(Deserialize)]
struct ModelOutline {
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// The model kind `bytes` declares, if it declares one we know (a kind
/// this version of `tokenizers` does not know is the library's to refuse).
/// Any problem with the file is left for the parse that follows to report.
fn kind(bytes: &[u8]) -> Option<Kind> {
    let outline: Outline = serde_json::from_slice(bytes).ok()?;
    match outline.model?.kind?.as_str() {
        "BPE" => Some(Kind::Bpe),
        "WordPiece" => Some(Kind::WordPiece),
        "WordLevel" => Some(Kind::WordLevel),
        "Unigram" => Some(Kind::Unigram),
        _ => None,
    }
}

type Of<M> =
    TokenizerImpl<M, NormalizerWrapper, PreTokenizerWrapper, PostProcessorWrapper, DecoderWrapper>;

fn direct<M>(bytes: &[u8]) -> tokenizers::Result<Tokenizer>
where
    M: for<'de> Deserialize<'de> + tokenizers::Model + Into<tokenizers::ModelWrapper>,
{
    Ok(Tokenizer::from(serde_json::from_slice::<Of<M>>(bytes)?))
}

/// The tokenizer in the bytes of a `tokenizer.json`.
pub fn parse(bytes: &[u8]) -> tokenizers::Result<Tokenizer> {
    match kind(bytes) {
        Some(Kind::Bpe) => direct::<BPE>(bytes),
        Some(Kind::WordPiece) => direct::<WordPiece>(bytes),
        Some(Kind::WordLevel) => direct::<WordLevel>(bytes),
        Some(Kind::Unigram) => direct::<Unigram>(bytes),
        None => Tokenizer::from_bytes(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bpe_json() -> String {
        r#"{
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": [{"id": 0, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "Whitespace"},
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "pair": [{"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}},
  "decoder": null,
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": {"<s>": 0, "h": 1, "e": 2, "l": 3, "o": 4, "he": 5, "ll": 6, "hell": 7, "hello": 8},
            "merges": [["h", "e"], ["l", "l"], ["he", "ll"], ["hell", "o"]]}
}"#
        .to_string()
    }

    fn ids(t: &Tokenizer, text: &str) -> Vec<u32> {
        t.encode(text, true).unwrap().get_ids().to_vec()
    }

    #[test]
    fn a_bpe_tokenizer_reads_as_the_library_reads_it() {
        let json = bpe_json();
        assert_eq!(kind(json.as_bytes()), Some(Kind::Bpe));
        let ours = parse(json.as_bytes()).unwrap();
        let theirs = Tokenizer::from_bytes(json.as_bytes()).unwrap();
        for text in ["hello", "hello hell he", "", "ho"] {
            assert_eq!(ids(&ours, text), ids(&theirs, text), "{text:?}");
        }
        assert_eq!(ids(&ours, "hello"), vec![0, 8]);
        assert_eq!(ours.get_vocab_size(true), theirs.get_vocab_size(true));
    }

    #[test]
    fn every_kind_the_library_knows_is_read_directly() {
        let wordlevel = r#"{"version": "1.0", "added_tokens": [], "normalizer": null,
            "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1, "b": 2}, "unk_token": "[UNK]"}}"#;
        assert_eq!(kind(wordlevel.as_bytes()), Some(Kind::WordLevel));
        assert_eq!(
            ids(&parse(wordlevel.as_bytes()).unwrap(), "a b c"),
            vec![1, 2, 0]
        );
        let wordpiece = wordlevel
            .replace("\"WordLevel\"", "\"WordPiece\"")
            .replace(
                "\"unk_token\": \"[UNK]\"",
                "\"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"##\", \"max_input_chars_per_word\": 100",
            );
        assert_eq!(kind(wordpiece.as_bytes()), Some(Kind::WordPiece));
        assert_eq!(
            ids(&parse(wordpiece.as_bytes()).unwrap(), "a b"),
            vec![1, 2]
        );
        let unigram = r#"{"version": "1.0", "added_tokens": [], "normalizer": null,
            "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
            "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -1.0]]}}"#;
        assert_eq!(kind(unigram.as_bytes()), Some(Kind::Unigram));
        assert_eq!(ids(&parse(unigram.as_bytes()).unwrap(), "a b"), vec![1, 2]);
    }

    #[test]
    fn a_file_without_a_type_or_of_an_unknown_kind_goes_the_librarys_way() {
        let legacy = bpe_json().replace("\"type\": \"BPE\", ", "");
        assert_eq!(kind(legacy.as_bytes()), None);
        assert_eq!(ids(&parse(legacy.as_bytes()).unwrap(), "hello"), vec![0, 8]);
        let unknown = bpe_json().replace("\"type\": \"BPE\"", "\"type\": \"Sentencepiece2\"");
        assert_eq!(kind(unknown.as_bytes()), None);
        assert!(parse(unknown.as_bytes()).is_err());
    }

    #[test]
    fn what_is_not_a_tokenizer_is_an_error_from_either_path() {
        for bad in [
            &b"not json"[..],
            b"{}",
            b"[1, 2]",
            br#"{"model": {"type": "BPE", "vocab": 3}}"#,
            br#"{"model": {"type": 7}}"#,
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
