//! One run per output folder. A run holds an exclusive `flock` on
//! `<out>/.infer-bench.lock` from before it writes anything until it ends,
//! with its PID in the file: a second run given the same `--out` (a retried
//! CI job, two jobs sharing a folder) is refused at once and told whose
//! folder it is, instead of both rewriting `results.json` and splicing
//! `requests.jsonl`. The kernel drops the lock when the process ends, so a
//! killed run leaves no stale lock behind; the file itself stays.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Result};

/// The lock file's name in the output folder.
pub const LOCK_FILE: &str = ".infer-bench.lock";

/// The held lock; released when dropped (the file is closed).
#[derive(Debug)]
pub struct OutLock {
    _file: File,
}

/// Takes the output folder `dir` (which must exist) for this process, or
/// says which process has it.
pub fn lock(dir: &Path) -> Result<OutLock> {
    let path = dir.join(LOCK_FILE);
    infer_bench_results::files::check(&path)?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    // SAFETY: `flock` on a descriptor this function owns; no memory is
    // passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let mut text = String::new();
            let _ = (&file).take(32).read_to_string(&mut text);
            return Err(Error::Busy {
                dir: dir.to_path_buf(),
                pid: text.trim().parse().ok(),
            });
        }
        return Err(Error::io(&path, e));
    }
    let pid = format!("{}\n", std::process::id());
    file.set_len(0)
        .and_then(|_| file.rewind())
        .and_then(|_| file.write_all(pid.as_bytes()))
        .map_err(|e| Error::io(&path, e))?;
    Ok(OutLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_and_free_after_a_drop() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock(dir.path()).unwrap();
        // A second open file description in this process conflicts like
        // another process would (flock locks belong to the description).
        match lock(dir.path()) {
            Err(Error::Busy { dir: d, pid }) => {
                assert_eq!(d, dir.path());
                assert_eq!(pid, Some(std::process::id()));
            }
            other => panic!("expected Busy, got {other:?}"),
        }
        drop(held);
        assert!(lock(dir.path()).is_ok());
    }
}
