//! Running git in a scratch repository, as the baseline-from-a-revision
//! tests need: a fixed identity and default branch, so a commit works on a
//! machine with no git configuration; a failure panics with git's words.

use std::path::Path;
use std::process::Command;

/// Runs `git ARGS` in `dir` and panics unless it succeeds.
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "advice.detachedHead=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
