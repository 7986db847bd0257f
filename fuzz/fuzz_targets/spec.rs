//! The spec compiler and the plan on arbitrary text: never a panic. Seed
//! the corpus with the shipped specs (`cp specs/*.toml fuzz/corpus/spec/`)
//! and run `cargo +nightly fuzz run spec`. tests/spec_fuzz.rs runs a
//! bounded, generated corpus of the same kind in the suite.
#![no_main]

use infer_bench_spec::plan::Plan;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The reader refuses non-UTF-8 before the compiler sees it.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(spec) = infer_bench_spec::compile("fuzz.toml", text, std::path::Path::new(".")) {
        let _ = Plan::build(&spec);
    }
});
