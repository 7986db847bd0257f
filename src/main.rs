//! The `infer-bench` binary: everything is in the library.

fn main() -> std::process::ExitCode {
    infer_bench::cli::main()
}
