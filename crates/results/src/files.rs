//! Writing files and folders without following a symbolic link we did
//! not make. A pull request can commit a path we write (the Action's
//! `infer-bench-results`, a `requests.jsonl` in it, a report's name) as a
//! link to any file the runner's user can write, and self-hosted runners
//! keep their disks between jobs. Every file and folder infer-bench writes
//! goes through here:
//!
//! - [`check`] refuses a path that is a symbolic link, or that passes
//!   through one below the current directory. The current directory and
//!   the folders above it are the user's own (`/tmp` is a link on macOS,
//!   a home directory may be one on a cluster); below it a checkout may
//!   have put links.
//! - [`create_dir_all`] checks, then creates what is missing: what it
//!   creates is ours.
//! - [`create`] opens a file for writing with `O_NOFOLLOW`, so a link put
//!   in place after the check is refused as well.
//! - [`write_atomic`] writes a temporary file beside the target and
//!   renames it over the target (a rename replaces a link, it never writes
//!   through one).
//!
//! A refusal is [`Error::Symlink`]: a usage error (exit 2) that names the
//! path, the link and where it points.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Refuses `path` if it is a symbolic link, or if a folder on it below the
/// current directory is one (see the module's documentation).
pub fn check(path: &Path) -> Result<()> {
    for p in looked_at(path) {
        if let Ok(meta) = std::fs::symlink_metadata(&p) {
            if meta.file_type().is_symlink() {
                return Err(refused(path, &p));
            }
        }
    }
    Ok(())
}

/// The prefixes of `path` that [`check`] looks at: each one below the
/// current directory (all of them for a relative path), and `path` itself.
fn looked_at(path: &Path) -> Vec<PathBuf> {
    let cwd = std::env::current_dir().ok();
    let (mut at, below) = if path.is_relative() {
        (PathBuf::new(), Some(path))
    } else {
        match cwd.as_deref() {
            Some(c) => (c.to_path_buf(), path.strip_prefix(c).ok()),
            None => (PathBuf::new(), None),
        }
    };
    let mut out = Vec::new();
    if let Some(below) = below {
        for c in below.components() {
            at.push(c);
            out.push(at.clone());
        }
    }
    if out.last().is_none_or(|last| last != path) {
        out.push(path.to_path_buf());
    }
    out
}

/// The error for `path`, refused because `link` is a symbolic link.
fn refused(path: &Path, link: &Path) -> Error {
    Error::Symlink {
        path: path.to_path_buf(),
        link: link.to_path_buf(),
        target: std::fs::read_link(link).unwrap_or_default(),
    }
}

/// Creates the folder `dir` and those above it that are missing, after
/// [`check`]ing it; an existing folder is kept as it is.
pub fn create_dir_all(dir: &Path) -> Result<()> {
    check(dir)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    // Made a link between the look and the creation: refuse it still.
    check(dir)
}

/// Opens `path` for writing, created or emptied, never through a symbolic
/// link (`O_NOFOLLOW`); its folder must exist.
pub fn create(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    check(path)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                refused(path, path)
            } else {
                Error::io(path, e)
            }
        })
}

/// Writes `bytes` to `path` in place (for a file another program owns and
/// watches, such as `$GITHUB_STEP_SUMMARY`), creating its folder.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    create_dir_all(folder_of(path))?;
    create(path)?
        .write_all(bytes)
        .map_err(|e| Error::io(path, e))
}

/// The folder a file is written in: its parent, `.` for a bare name.
fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// folder (created if missing), flushed and synced, then renamed over the
/// target.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    check(path)?;
    let dir = folder_of(path);
    create_dir_all(dir)?;
    let io = |e| Error::io(path, e);
    // The file it becomes is an ordinary one: created as 0666 less the
    // umask, like any file a program writes (a temporary file would be
    // 0600, unreadable to the rest of a shared filesystem or a volume),
    // and given the old file's mode when it replaces one.
    let mut builder = tempfile::Builder::new();
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir).map_err(io)?;
    if let Ok(old) = std::fs::symlink_metadata(path) {
        tmp.as_file()
            .set_permissions(old.permissions())
            .map_err(io)?;
    }
    tmp.write_all(bytes).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder under the current directory (so that every folder on a
    /// path into it is looked at) with `outside/victim`, a file we must
    /// not change, and links to it and to `outside` from `inside`.
    fn scene() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let root = tempfile::Builder::new()
            .prefix(".files-test")
            .tempdir_in(std::env::current_dir().unwrap())
            .unwrap();
        let outside = root.path().join("outside");
        let inside = root.path().join("inside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::write(outside.join("victim"), "keep").unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), inside.join("file-link")).unwrap();
        std::os::unix::fs::symlink(&outside, inside.join("dir-link")).unwrap();
        (root, inside, outside)
    }

    #[test]
    fn no_writer_follows_a_link() {
        let (_root, inside, outside) = scene();
        let file = inside.join("file-link");
        let dir = inside.join("dir-link");
        for e in [
            write(&file, b"x").unwrap_err(),
            write_atomic(&file, b"x").unwrap_err(),
            create(&file).map(|_| ()).unwrap_err(),
            create_dir_all(&dir).unwrap_err(),
        ] {
            assert!(matches!(e, Error::Symlink { .. }), "{e}");
            let text = e.to_string();
            assert!(text.contains("symbolic link"), "{text}");
            assert!(text.contains(&*outside.display().to_string()), "{text}");
        }
        // A folder on the way is a link.
        for e in [
            write(&dir.join("new"), b"x").unwrap_err(),
            write_atomic(&dir.join("victim"), b"x").unwrap_err(),
            create(&dir.join("victim")).map(|_| ()).unwrap_err(),
            create_dir_all(&dir.join("sub")).unwrap_err(),
        ] {
            assert!(
                matches!(&e, Error::Symlink { link, .. } if *link == dir),
                "{e}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(outside.join("victim")).unwrap(),
            "keep"
        );
        let names: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["victim"], "nothing new outside");
    }

    #[test]
    fn writes_where_there_is_no_link() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/c.json");
        write_atomic(&path, b"1").unwrap();
        write_atomic(&path, b"2").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "2");
        let md = dir.path().join("d/verdict.md");
        write(&md, b"long text").unwrap();
        write(&md, b"short").unwrap();
        assert_eq!(std::fs::read_to_string(&md).unwrap(), "short");
        create_dir_all(&dir.path().join("e/f")).unwrap();
        create_dir_all(&dir.path().join("e/f")).unwrap();
    }

    #[test]
    fn only_folders_below_the_current_directory_are_looked_at() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            looked_at(&cwd.join("a/b")),
            [cwd.join("a"), cwd.join("a/b")]
        );
        assert_eq!(
            looked_at(Path::new("a/b")),
            [PathBuf::from("a"), PathBuf::from("a/b")]
        );
        assert_eq!(
            looked_at(Path::new("/elsewhere/x")),
            [PathBuf::from("/elsewhere/x")]
        );
    }
}
