//! Workload generation: everything about *what* is sent and *when*, derived
//! deterministically from the spec's seed. Length sampling, prompt
//! synthesis and arrival schedules live here; none of it does I/O, so the
//! same seed gives the same requests at the same offsets on every machine.

pub mod arrival;
pub mod lengths;
pub mod prompt;
pub mod seed;

pub use arrival::{Arrivals, Due};
pub use prompt::{Prompt, PromptGen};
