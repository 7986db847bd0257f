//! The memory budget of a point: an estimate of what the machine running
//! `infer-bench` holds for one point at its peak, derived from the spec
//! alone (the sizes of its dataset and tokenizer files, its largest prompt
//! and how many requests can be alive at once), and the documented limit
//! it must stay under ([`MEMORY_BUDGET_BYTES`]). `Plan::build` checks
//! every point, so a spec whose point would exhaust the memory fails
//! `validate` (and `run`, before anything starts) with the key responsible,
//! the figure and the limit, instead of aborting mid-run on a failed
//! allocation. The factors below were measured (docs/spec.md, "Memory
//! budget"); the estimate is an upper bound of the usual case, not exact.

use crate::{Level, Load};

/// The limit of a point's estimate: 4 GiB, which fits the 7 GiB of a
/// hosted CI runner with room for the server under test (or, with the
/// built-in simulator, its copies of the bodies, which the estimate counts).
pub const MEMORY_BUDGET_BYTES: u64 = 4 << 30;

/// What the process holds whatever the spec: runtime, threads and their
/// stacks, histograms, the simulator.
pub const BASE_BYTES: u64 = 256 << 20;

/// Bytes held per byte of a dataset file while a point loads it: the file
/// read whole, and its entries parsed from it.
pub const DATASET_FACTOR: u64 = 3;

/// Bytes held per byte of a `tokenizer.json` while it loads: read as
/// [`crate::tokenizer::parse`] reads it, a 45 MB BPE file peaks at 12.6
/// times its size (the library's own reader took 26 times; issue 45).
pub const TOKENIZER_FACTOR: u64 = 16;

/// Bytes held per byte of a request's JSON body while it is alive: the
/// body the client sends and, with the built-in simulator, the server's
/// copy of it and the text it parses from it.
pub const REQUEST_FACTOR: u64 = 3;

/// Bytes held per message of a request's chat history besides its text
/// (the client's message and the simulator's parsed JSON object).
pub const MESSAGE_BYTES: u64 = 512;

/// Bytes of request bodies the load engine builds ahead of their send
/// time, at most, beyond one per slot (`infer_bench_engine`'s pacer).
pub const LOOKAHEAD_BYTES: u64 = 64 << 20;

/// Requests a loop without a concurrency cap is counted with, at most,
/// beyond rate x total timeout: the arrivals of one total timeout.
pub const MAX_COUNTED_IN_FLIGHT: u64 = 1_000_000;

/// Requests built ahead of their send time beside `in_flight` alive ones
/// of `body` bytes: one more per slot, and [`LOOKAHEAD_BYTES`]' worth (at
/// least one).
pub fn built_ahead(in_flight: u64, body: u64) -> u64 {
    in_flight.saturating_add((LOOKAHEAD_BYTES / body.max(1)).max(1))
}

/// A dataset's sizes, measured when the spec is compiled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatasetSize {
    /// Bytes of the file.
    pub file_bytes: u64,
    /// Bytes of the largest entry's request body: its prompt and messages,
    /// JSON-escaped.
    pub largest_body_bytes: u64,
    /// Messages of the entry with the most of them.
    pub most_messages: u64,
    /// Bytes of the base64 of the distinct image files its rows name
    /// (held once, from load to the end of the point).
    pub image_bytes: u64,
}

/// The sizes of the files a spec names, measured when it is compiled,
/// with the key that names each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sizes {
    /// By the dataset's SHA-256: the key of its path, and its sizes.
    pub datasets: std::collections::BTreeMap<String, (String, DatasetSize)>,
    /// By model name: the key of its tokenizer, and the file's bytes.
    pub tokenizers: std::collections::BTreeMap<String, (String, u64)>,
}

/// The most the quality phase's answers may hold (`[quality]`): every
/// server's answers are kept, with their tokens and alternatives, until
/// the run ends, when each is compared with its reference's.
pub const QUALITY_BUDGET_BYTES: u64 = 1 << 30;

/// Bytes held per token entry of a kept answer (a token, or one of its
/// alternatives): its text on the heap and its log-probability.
pub const QUALITY_ENTRY_BYTES: u64 = 128;

/// The quality phase's answers at their largest: per server and prompt,
/// the text (up to what `max_tokens` tokens of the longest kept token
/// could spell, and never over the reader's bound) and `max_tokens` x
/// `(1 + logprobs)` token entries of [`QUALITY_ENTRY_BYTES`].
pub fn quality_bytes(servers: u64, prompts: u64, max_tokens: u64, logprobs: u64) -> u64 {
    use infer_bench_results::quality::{MAX_TEXT_BYTES, MAX_TOKEN_BYTES};
    let text = max_tokens
        .saturating_mul(MAX_TOKEN_BYTES as u64)
        .min(MAX_TEXT_BYTES as u64);
    let entries = max_tokens
        .saturating_mul(1 + logprobs)
        .saturating_mul(QUALITY_ENTRY_BYTES);
    servers
        .saturating_mul(prompts)
        .saturating_mul(text.saturating_add(entries))
}

/// What a point's estimate is made of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Inputs {
    pub dataset: Option<DatasetSize>,
    /// Bytes of the model's `tokenizer.json`.
    pub tokenizer_bytes: u64,
    /// Requests alive at once, at most (see [`in_flight`]).
    pub in_flight: u64,
}

/// A point's estimate, by part, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    pub dataset: u64,
    pub tokenizer: u64,
    /// Requests alive and built ahead.
    pub requests: u64,
    pub total: u64,
}

/// Which part of an [`Estimate`] is the largest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Dataset,
    Tokenizer,
    Requests,
}

impl Estimate {
    pub fn largest(&self) -> Part {
        if self.requests >= self.dataset && self.requests >= self.tokenizer {
            Part::Requests
        } else if self.dataset >= self.tokenizer {
            Part::Dataset
        } else {
            Part::Tokenizer
        }
    }

    pub fn over_budget(&self) -> bool {
        self.total > MEMORY_BUDGET_BYTES
    }
}

/// The estimate of a point: [`BASE_BYTES`], the dataset x
/// [`DATASET_FACTOR`] and its image files' base64, the tokenizer x [`TOKENIZER_FACTOR`], and the
/// requests: each alive one, and as many again built ahead of their time
/// plus [`LOOKAHEAD_BYTES`], at the largest entry's body x
/// [`REQUEST_FACTOR`] and its messages x [`MESSAGE_BYTES`].
pub fn estimate(i: &Inputs) -> Estimate {
    let dataset = i.dataset.map_or(0, |d| {
        d.file_bytes
            .saturating_mul(DATASET_FACTOR)
            .saturating_add(d.image_bytes)
    });
    let tokenizer = i.tokenizer_bytes.saturating_mul(TOKENIZER_FACTOR);
    let requests = i.dataset.map_or(0, |d| {
        let one = d
            .largest_body_bytes
            .saturating_mul(REQUEST_FACTOR)
            .saturating_add(d.most_messages.saturating_mul(MESSAGE_BYTES));
        let ahead = built_ahead(i.in_flight, d.largest_body_bytes);
        one.saturating_mul(i.in_flight.saturating_add(ahead))
    });
    let total = BASE_BYTES
        .saturating_add(dataset)
        .saturating_add(tokenizer)
        .saturating_add(requests);
    Estimate {
        dataset,
        tokenizer,
        requests,
        total,
    }
}

/// The most requests of a point alive at once: a closed loop's
/// concurrency (a ramp's highest level, a search's highest bound); an
/// open loop's `max_concurrency`, or without one its rate x the total
/// timeout (every request a stalled server holds before they time out),
/// at most [`MAX_COUNTED_IN_FLIGHT`].
pub fn in_flight(load: &Load) -> u64 {
    let mut levels: Vec<Level> = vec![load.level];
    if let Some(r) = &load.ramp {
        levels.extend(r.levels.iter().copied());
    }
    if let Some(s) = &load.search {
        levels.extend([s.from, s.to]);
    }
    let total_s = load.timeouts.total.as_secs_f64();
    levels
        .iter()
        .map(|l| match l {
            Level::Concurrency(c) => u64::from(*c),
            Level::Rate(r) => match load.max_concurrency {
                Some(cap) => u64::from(cap),
                None => {
                    let n = (r.as_per_second() * total_s).ceil();
                    if n >= MAX_COUNTED_IN_FLIGHT as f64 {
                        MAX_COUNTED_IN_FLIGHT
                    } else {
                        (n as u64).max(1)
                    }
                }
            },
        })
        .max()
        .unwrap_or(1)
}

/// The sizes of a parsed dataset of `file_bytes` bytes whose rows name
/// the image `files` (see [`crate::image::load`]): a row's body holds its
/// images' base64 (a URL's length, for a URL).
pub fn dataset_size(
    file_bytes: u64,
    records: &[crate::dataset::Record],
    files: &[crate::image::ImageFile],
) -> DatasetSize {
    use crate::dataset::ImageRef;
    let mut d = DatasetSize {
        file_bytes,
        image_bytes: files.iter().map(|f| f.base64_len()).sum(),
        ..DatasetSize::default()
    };
    for r in records {
        let images: u64 = r
            .images
            .iter()
            .map(|i| {
                IMAGE_PART_BYTES
                    + match i {
                        ImageRef::Url(u) | ImageRef::Path(u) => json_len(u),
                        ImageRef::File(k) => files.get(*k).map_or(0, |f| f.base64_len()),
                    }
            })
            .sum();
        let body = json_len(&r.text)
            + r.history.iter().map(|(_, t)| json_len(t) + 32).sum::<u64>()
            + images;
        d.largest_body_bytes = d.largest_body_bytes.max(body);
        d.most_messages = d.most_messages.max(r.history.len() as u64 + 1);
    }
    d
}

/// Bytes of an image content part's JSON besides its URL.
pub const IMAGE_PART_BYTES: u64 = 64;

/// Bytes of `s` as a JSON string: quotes, and the escapes `serde_json`
/// writes (`\"`, `\\`, `\n`-style for five controls, `\u00XX` for the
/// other ones).
pub fn json_len(s: &str) -> u64 {
    let escaped: u64 = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum();
    s.len() as u64 + escaped + 2
}

/// `1.9 GiB`, `60.0 MiB`: a figure for a message.
pub fn fmt_size(bytes: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    const GIB: f64 = (1u64 << 30) as f64;
    let b = bytes as f64;
    if b >= GIB {
        format!("{:.1} GiB", b / GIB)
    } else {
        format!("{:.1} MiB", b / MIB)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset(file_mb: u64, body_mb: u64, messages: u64) -> Option<DatasetSize> {
        Some(DatasetSize {
            file_bytes: file_mb << 20,
            largest_body_bytes: body_mb << 20,
            most_messages: messages,
            image_bytes: 0,
        })
    }

    #[test]
    fn dataset_images_count_once_held_and_in_every_body() {
        use crate::dataset::{ImageRef, Record};
        use crate::image::{Header, ImageFile, ImageType};
        let file = |len: u64| ImageFile {
            header: Header {
                kind: ImageType::Png,
                width: 1,
                height: 1,
            },
            len,
            bytes: Vec::new(),
        };
        let row = |images: Vec<ImageRef>| Record {
            line: 1,
            history: Vec::new(),
            text: "hi".into(),
            output_tokens: None,
            reply: None,
            images,
        };
        let files = [file(3 << 20), file(6 << 20)];
        let d = dataset_size(
            100,
            &[
                row(vec![ImageRef::File(0), ImageRef::File(1)]),
                row(vec![ImageRef::File(1), ImageRef::Url("https://x/y".into())]),
            ],
            &files,
        );
        // Each file's base64 once for the dataset, both in the largest body.
        assert_eq!(d.image_bytes, (4 << 20) + (8 << 20));
        assert_eq!(
            d.largest_body_bytes,
            json_len("hi") + 2 * IMAGE_PART_BYTES + (12 << 20)
        );
        let e = estimate(&Inputs {
            dataset: Some(d),
            tokenizer_bytes: 0,
            in_flight: 1,
        });
        assert_eq!(e.dataset, 300 + (12 << 20));
    }

    #[test]
    fn quality_answers_count_their_text_and_token_entries() {
        // 200 prompts of 64 tokens with 5 alternatives: up to 16 KiB of
        // text and 384 entries each.
        assert_eq!(
            quality_bytes(1, 200, 64, 5),
            200 * (64 * 256 + 64 * 6 * QUALITY_ENTRY_BYTES)
        );
        // The text never counts more than the reader keeps.
        assert_eq!(
            quality_bytes(1, 1, 4096, 0),
            64 * 1024 + 4096 * QUALITY_ENTRY_BYTES
        );
        assert_eq!(quality_bytes(u64::MAX, 2, 2, 2), u64::MAX);
    }

    #[test]
    fn small_prompts_at_high_concurrency_fit() {
        // ShareGPT-sized: a 40 MiB file of 4 KiB prompts, 1024 users.
        let e = estimate(&Inputs {
            dataset: Some(DatasetSize {
                file_bytes: 40 << 20,
                largest_body_bytes: 4 << 10,
                most_messages: 8,
                image_bytes: 0,
            }),
            tokenizer_bytes: 9 << 20,
            in_flight: 1024,
        });
        assert!(!e.over_budget(), "{e:?}");
        assert_eq!(e.dataset, 120 << 20);
        assert_eq!(e.tokenizer, 144 << 20);
        // 1024 alive, 1024 + 16384 ahead, each 12 KiB + 4 KiB of messages.
        assert_eq!(e.requests, (1024 + 1024 + 16384) * ((12 << 10) + 8 * 512));
    }

    #[test]
    fn one_huge_prompt_is_counted_per_request_alive() {
        // The finding of issue 45: one 60 MB prompt. Two users: alive 2,
        // ahead 2 + 1, each 3 bodies.
        let two = estimate(&Inputs {
            dataset: dataset(60, 60, 0),
            tokenizer_bytes: 0,
            in_flight: 2,
        });
        assert_eq!(two.requests, 5 * 3 * (60 << 20));
        assert_eq!(two.largest(), Part::Requests);
        assert!(!two.over_budget(), "{two:?}");
        // Sixteen are over 4 GiB.
        let many = estimate(&Inputs {
            in_flight: 16,
            ..Inputs {
                dataset: dataset(60, 60, 0),
                tokenizer_bytes: 0,
                in_flight: 0,
            }
        });
        assert!(many.over_budget(), "{many:?}");
        assert_eq!(
            many.total,
            BASE_BYTES + 3 * (60 << 20) + 33 * 3 * (60 << 20)
        );
    }

    #[test]
    fn a_million_messages_cost_more_than_their_text() {
        // The finding of issue 45: one entry of a million messages (35 MB)
        // aborted at 3.6 GB with two users.
        let two = estimate(&Inputs {
            dataset: dataset(35, 35, 1_000_000),
            tokenizer_bytes: 0,
            in_flight: 2,
        });
        // 512 bytes a message: 488 MiB per request besides its text; alive
        // 2, ahead 2 + 1.
        assert_eq!(two.requests, 5 * (3 * (35 << 20) + 512_000_000));
        assert!(!two.over_budget(), "{two:?}");
        let four = estimate(&Inputs {
            in_flight: 4,
            ..Inputs {
                dataset: dataset(35, 35, 1_000_000),
                tokenizer_bytes: 0,
                in_flight: 0,
            }
        });
        assert!(four.over_budget(), "{four:?}");
    }

    #[test]
    fn the_largest_part_names_the_key_to_change() {
        let e = estimate(&Inputs {
            dataset: dataset(1, 0, 0),
            tokenizer_bytes: 64 << 20,
            in_flight: 1,
        });
        assert_eq!(e.largest(), Part::Tokenizer);
        assert_eq!(e.tokenizer, 1 << 30);
        let e = estimate(&Inputs {
            dataset: dataset(64, 0, 0),
            tokenizer_bytes: 0,
            in_flight: 1,
        });
        assert_eq!(e.largest(), Part::Dataset);
        assert_eq!(estimate(&Inputs::default()).total, BASE_BYTES);
    }

    #[test]
    fn json_len_counts_escapes() {
        assert_eq!(json_len("abc"), 5);
        assert_eq!(json_len("a\"b\\"), 8);
        assert_eq!(json_len("\n\u{1}"), 2 + 2 + 6);
        assert_eq!(
            json_len("é\u{1f680}\u{7f}"),
            serde_json::to_string("é\u{1f680}\u{7f}").unwrap().len() as u64
        );
        for s in ["say \"hi\"\n\t\\ \u{8}\u{c}\u{1b}", ""] {
            assert_eq!(
                json_len(s),
                serde_json::to_string(s).unwrap().len() as u64,
                "{s:?}"
            );
        }
    }

    #[test]
    fn in_flight_of_each_loop() {
        use crate::{Duration, Rate};
        let spec = crate::compile(
            "t.toml",
            "name = \"t\"\n[targets.s]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n\
             [models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 8\n\
             output_tokens = 8\n[load]\nconcurrency = 32\nduration = \"1s\"\n",
            std::path::Path::new("."),
        )
        .unwrap();
        let plan = crate::plan::Plan::build(&spec).unwrap();
        let mut load = plan.points[0].config.load.clone();
        assert_eq!(in_flight(&load), 32);
        load.level = Level::Rate(Rate::per_second(10.0).unwrap());
        load.timeouts.total = Duration::from_secs(120);
        assert_eq!(in_flight(&load), 1200);
        load.max_concurrency = Some(64);
        assert_eq!(in_flight(&load), 64);
        load.max_concurrency = None;
        load.level = Level::Rate(Rate::per_second(1e9).unwrap());
        assert_eq!(in_flight(&load), MAX_COUNTED_IN_FLIGHT);
    }
}
