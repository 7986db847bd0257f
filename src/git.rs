//! Reading a file as it is at a git revision (`git show REV:./PATH`), for
//! `--baseline-ref`, and the commits `history` needs (a revision's commit
//! and time; the commits that changed a file): the one outside command the
//! tool runs on its own, with fixed arguments and no shell. A revision is
//! checked so that it cannot be read as an option.

use std::path::Path;
use std::process::Command;

pub use crate::error::GitError;
use crate::error::{GitFailed, GitMissing};

/// The text of `path` (absolute, or relative to the current directory) at
/// revision `rev` of the repository that holds it.
pub fn show(rev: &str, path: &Path) -> Result<String, GitError> {
    check_rev(rev)?;
    let (dir, name) = folder_and_name(path)?;
    // The folder is the user's to name: one that is not there, or not in
    // a git work tree, is a mistake on the command line, not git failing.
    if !dir.is_dir() {
        return Err(GitError::Missing(GitMissing::NoFolder {
            path: path.to_path_buf(),
        }));
    }
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .arg("show")
        .arg(format!("{rev}:./{}", name.to_string_lossy()))
        .output()
        .map_err(|source| {
            GitError::Failed(GitFailed::Run {
                rev: rev.to_string(),
                source,
            })
        })?;
    if out.status.success() {
        // `git show` of a folder lists it ("tree REV:./name").
        if out.stdout.starts_with(b"tree ") {
            return Err(GitError::Missing(GitMissing::NotAFile {
                path: path.to_path_buf(),
            }));
        }
        return String::from_utf8(out.stdout).map_err(|_| {
            GitError::Failed(GitFailed::NotUtf8 {
                rev: rev.to_string(),
                path: path.to_path_buf(),
            })
        });
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().next().unwrap_or("").trim();
    if first.contains("not a git repository") {
        return Err(GitError::Missing(GitMissing::NotInRepository {
            path: path.to_path_buf(),
        }));
    }
    if first.contains("does not exist")
        || first.contains("invalid object name")
        || first.contains("exists on disk, but not in")
        || first.contains("unknown revision")
        || first.contains("bad revision")
    {
        Err(GitError::Missing(GitMissing::NotInRevision {
            path: path.to_path_buf(),
            rev: rev.to_string(),
            said: first.to_string(),
        }))
    } else {
        Err(GitError::Failed(GitFailed::Git {
            path: path.to_path_buf(),
            rev: rev.to_string(),
            said: first.to_string(),
        }))
    }
}

/// The folder git runs in for `path` (`.` for a bare name) and the file's
/// name.
fn folder_and_name(path: &Path) -> Result<(&Path, &std::ffi::OsStr), GitError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        GitError::Missing(GitMissing::NotAFile {
            path: path.to_path_buf(),
        })
    })?;
    Ok((dir, name))
}

/// Refuses a revision that git could read as an option or a path.
fn check_rev(rev: &str) -> Result<(), GitError> {
    if rev.is_empty() || rev.starts_with('-') || rev.contains(':') {
        return Err(GitError::Missing(GitMissing::NotARevision {
            rev: rev.to_string(),
        }));
    }
    Ok(())
}

/// A commit: its full object name, committer time (RFC 3339) and depth
/// (how many commits its history holds, `git rev-list --count`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub sha: String,
    pub time: String,
    pub depth: Option<u64>,
}

/// The commit `rev` names in the repository that holds the folder `dir`.
pub fn commit(rev: &str, dir: &Path) -> Result<Commit, GitError> {
    check_rev(rev)?;
    let text = run(dir, rev, &["log", "-1", "--format=%H %cI", rev, "--"])?;
    let mut c = commits(&text).into_iter().next().ok_or_else(|| {
        GitError::Missing(GitMissing::NotARevision {
            rev: rev.to_string(),
        })
    })?;
    c.depth = depth(dir, &c.sha);
    Ok(c)
}

/// `git rev-list --count SHA`, when git can say.
fn depth(dir: &Path, sha: &str) -> Option<u64> {
    run(dir, sha, &["rev-list", "--count", sha, "--"])
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The commits of HEAD's history that changed `path`, oldest first.
pub fn changes_of(path: &Path) -> Result<Vec<Commit>, GitError> {
    let (dir, name) = folder_and_name(path)?;
    let name = format!("./{}", name.to_string_lossy());
    let text = run(
        dir,
        "HEAD",
        &["log", "--reverse", "--format=%H %cI", "HEAD", "--", &name],
    )?;
    Ok(commits(&text)
        .into_iter()
        .map(|mut c| {
            c.depth = depth(dir, &c.sha);
            c
        })
        .collect())
}

/// The files under the folder `dir` (relative to the current directory) at
/// revision `rev`, as paths relative to the current directory. A folder
/// that is not there at `rev` has none.
pub fn files_at(rev: &str, dir: &Path) -> Result<Vec<std::path::PathBuf>, GitError> {
    check_rev(rev)?;
    let folder = format!("{}/", dir.display());
    let text = run(
        Path::new("."),
        rev,
        &["ls-tree", "-r", "--name-only", "-z", rev, "--", &folder],
    )?;
    Ok(text
        .split('\0')
        .filter(|l| !l.is_empty())
        .map(std::path::PathBuf::from)
        .collect())
}

/// `git -C dir ARGS`'s output; `rev` names what was asked for in errors.
fn run(dir: &Path, rev: &str, args: &[&str]) -> Result<String, GitError> {
    if !dir.is_dir() {
        return Err(GitError::Missing(GitMissing::NoFolder {
            path: dir.to_path_buf(),
        }));
    }
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|source| {
            GitError::Failed(GitFailed::Run {
                rev: rev.to_string(),
                source,
            })
        })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().next().unwrap_or("").trim().to_string();
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    if first.contains("not a git repository") {
        return Err(GitError::Missing(GitMissing::NotInRepository {
            path: dir.to_path_buf(),
        }));
    }
    if first.contains("unknown revision")
        || first.contains("bad revision")
        || first.contains("does not have any commits")
        || first.contains("Not a valid object name")
    {
        return Err(GitError::Missing(GitMissing::NotARevision {
            rev: rev.to_string(),
        }));
    }
    Err(GitError::Failed(GitFailed::Git {
        path: dir.to_path_buf(),
        rev: rev.to_string(),
        said: first,
    }))
}

/// `SHA TIME` lines.
fn commits(text: &str) -> Vec<Commit> {
    text.lines()
        .filter_map(|l| {
            let (sha, time) = l.trim().split_once(' ')?;
            Some(Commit {
                sha: sha.to_string(),
                time: time.to_string(),
                depth: None,
            })
        })
        .collect()
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
        // The user's mistakes, not git's failures.
        assert!(matches!(
            show("HEAD", &d.join("sub")),
            Err(GitError::Missing(GitMissing::NotAFile { .. }))
        ));
        assert!(matches!(
            show("HEAD", &d.join("no-such-folder/f.txt")),
            Err(GitError::Missing(GitMissing::NoFolder { .. }))
        ));
        let elsewhere = tempfile::tempdir().unwrap();
        assert!(matches!(
            show("HEAD", &elsewhere.path().join("f.txt")),
            Err(GitError::Missing(GitMissing::NotInRepository { .. }))
        ));
    }

    #[test]
    fn commits_of_a_revision_and_of_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q"]);
        std::fs::create_dir(d.join("b")).unwrap();
        for (i, text) in ["one", "two"].iter().enumerate() {
            std::fs::write(d.join("b/f.json"), text).unwrap();
            git(d, &["add", "."]);
            git(d, &["commit", "-qm", &format!("c{i}")]);
        }
        std::fs::write(d.join("other"), "x").unwrap();
        git(d, &["add", "."]);
        git(d, &["commit", "-qm", "other"]);
        let head = commit("HEAD", d).unwrap();
        assert_eq!(head.sha.len(), 40);
        assert!(head.time.starts_with("20"), "{}", head.time);
        let changes = changes_of(&d.join("b/f.json")).unwrap();
        assert_eq!(changes.len(), 2);
        assert_ne!(changes[1].sha, head.sha);
        assert_eq!(commit("HEAD~1", d).unwrap(), changes[1]);
        assert_eq!(changes[0].depth, Some(1));
        assert_eq!(head.depth, Some(3));
        assert!(matches!(
            commit("--all", d),
            Err(GitError::Missing(GitMissing::NotARevision { .. }))
        ));
        assert!(matches!(
            commit("no-such", d),
            Err(GitError::Missing(GitMissing::NotARevision { .. }))
        ));
        let elsewhere = tempfile::tempdir().unwrap();
        assert!(matches!(
            commit("HEAD", elsewhere.path()),
            Err(GitError::Missing(GitMissing::NotInRepository { .. }))
        ));
    }
}
