//! Reading a file as it is at a git revision (`git show REV:./PATH`), for
//! `--baseline-ref`: the one outside command the tool runs on its own, with
//! fixed arguments and no shell. The revision is checked so that it cannot
//! be read as an option.

use std::path::Path;
use std::process::Command;

use crate::error::Error;

/// Why a file could not be read from git.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The revision, or the path at that revision, does not exist.
    #[error("{0}")]
    Missing(String),
    /// git could not be run, or failed otherwise.
    #[error("{0}")]
    Failed(String),
}

impl From<GitError> for Error {
    fn from(e: GitError) -> Error {
        match e {
            GitError::Missing(m) => Error::Usage(m),
            GitError::Failed(m) => Error::Infra(m),
        }
    }
}

/// The text of `path` (absolute, or relative to the current directory) at
/// revision `rev` of the repository that holds it.
pub fn show(rev: &str, path: &Path) -> Result<String, GitError> {
    if rev.is_empty() || rev.starts_with('-') || rev.contains(':') {
        return Err(GitError::Missing(format!(
            "\"{rev}\" is not a git revision (expected a branch, tag or commit such as origin/main)"
        )));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| GitError::Missing(format!("{} is not a file", path.display())))?;
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .arg("show")
        .arg(format!("{rev}:./{}", name.to_string_lossy()))
        .output()
        .map_err(|e| GitError::Failed(format!("cannot run git to read {rev}: {e}")))?;
    if out.status.success() {
        return String::from_utf8(out.stdout)
            .map_err(|_| GitError::Failed(format!("{rev}:{} is not UTF-8 text", path.display())));
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().next().unwrap_or("").trim();
    if first.contains("does not exist")
        || first.contains("invalid object name")
        || first.contains("exists on disk, but not in")
        || first.contains("unknown revision")
        || first.contains("bad revision")
    {
        Err(GitError::Missing(format!(
            "{} is not in git revision {rev} ({first})",
            path.display()
        )))
    } else {
        Err(GitError::Failed(format!(
            "git could not read {} at {rev}: {first}",
            path.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use infer_bench_testkit::git::git;

    #[test]
    fn reads_a_file_at_a_revision_not_the_working_tree() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q"]);
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/f.txt"), "committed\n").unwrap();
        git(d, &["add", "."]);
        git(d, &["commit", "-qm", "x"]);
        std::fs::write(d.join("sub/f.txt"), "edited\n").unwrap();
        assert_eq!(show("HEAD", &d.join("sub/f.txt")).unwrap(), "committed\n");
        assert!(matches!(
            show("HEAD", &d.join("sub/none.txt")),
            Err(GitError::Missing(_))
        ));
        assert!(matches!(
            show("no-such-branch", &d.join("sub/f.txt")),
            Err(GitError::Missing(_))
        ));
        assert!(matches!(
            show("--output=/tmp/x", &d.join("sub/f.txt")),
            Err(GitError::Missing(_))
        ));
    }
}
