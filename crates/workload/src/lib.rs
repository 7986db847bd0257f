//! Workload generation: everything about *what* is sent and *when*, derived
//! deterministically from the spec's seed. Length sampling, prompt
//! synthesis (exact with a tokenizer), datasets and arrival schedules live
//! here. Files (a tokenizer, a dataset) are read once per point into a
//! [`Material`]; after that nothing does I/O, so the same seed gives the
//! same requests at the same offsets on every machine.

pub mod arrival;
pub mod dataset;
pub mod error;
pub mod lengths;
pub mod media;
pub mod message;
pub mod prompt;
pub mod tensor;
pub mod tokenizer;
pub mod trace;

pub use arrival::{Arrivals, Due};
pub use error::{TokenizerError, WorkloadError};
pub use infer_bench_spec::seed;
pub use media::{Media, MediaGen, MediaSent};
pub use message::{Message, Role};
pub use prompt::{Material, Prompt, PromptGen};
pub use tokenizer::TokenCounter;
