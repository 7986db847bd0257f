//! `self-bench` is held to its own verdicts: a check that cannot hold
//! fails its row and the command; a measurement with nothing to hold does
//! not; an unknown check is a usage error. Structural only: no figure of
//! speed is asserted here (they depend on the machine).

use std::process::Command;

fn self_bench(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("self-bench")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn row<'a>(text: &'a str, check: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(check))
        .unwrap_or_else(|| panic!("no {check} row: {text}"))
}

#[test]
fn an_impossible_check_fails_its_row_and_the_command() {
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    let (code, text, stderr) = self_bench(&["--quick", "--only", "unpaced,impossible"]);
    assert_eq!(code, Some(1), "{text}{stderr}");
    let impossible = row(&text, "impossible");
    assert!(impossible.contains(" FAIL "), "{impossible}");
    // Held to 2 ms against a server writing every 20 ms: the ITL is off,
    // and the server's own figures show it was the script, not the client.
    assert!(impossible.contains("ITL p50"), "{impossible}");
    assert!(impossible.contains("server wrote"), "{impossible}");
    // The server kept its own deadlines, so this is not `server late`:
    // the row's script is one the server was not asked to follow.
    assert!(
        impossible.contains("did not write to this script"),
        "{impossible}"
    );
    // The unpaced measurement holds nothing, so it neither passes nor fails.
    let unpaced = row(&text, "unpaced");
    assert!(
        !unpaced.contains(" FAIL ") && unpaced.contains("us/event"),
        "{unpaced}"
    );
    assert!(text.contains("Result: a check failed (exit 1)."), "{text}");
    // Only what was asked ran.
    for other in ["paced", "floor", "idle", "streams", "rate"] {
        assert!(!text.lines().any(|l| l.starts_with(other)), "{text}");
    }
}

#[test]
fn an_unknown_check_is_a_usage_error() {
    let (code, _, stderr) = self_bench(&["--only", "unpaced,fastest"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("no check `fastest`"), "{stderr}");
}

#[test]
fn the_help_documents_the_checks_and_the_exit_status() {
    let (code, text, _) = self_bench(&["--help"]);
    assert_eq!(code, Some(0));
    for needle in ["within 1 ms of the script", "1  a check failed", "1.3x"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}
