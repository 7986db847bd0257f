//! Reading the files a spec names (the spec itself, tokenizers, datasets,
//! length files) as data from outside: only regular files (a fifo would
//! block, `/dev/zero` never ends), at most a documented number of bytes,
//! and never echoed. A message about a file's content names the file, the
//! line and the column, and quotes at most a short, escaped excerpt of the
//! offending token ([`excerpt`]): a file such as `/proc/self/environ` must
//! not reach the terminal through an error.
//!
//! A spec, and a file it names inside its repository, is not read through
//! a symbolic link that leads out of the repository ([`check_link`]): a
//! pull request can commit `bench.toml` as a link to `~/.env`. The
//! repository is the git work tree that holds the spec, or the spec's own
//! folder when there is none ([`repository`]). A path that names a file
//! outside the repository itself (`/models/tokenizer.json`) is the
//! spec's to name, links and all (a Hugging Face cache is made of links).

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Largest spec file read: 4 MiB.
pub const MAX_SPEC_BYTES: u64 = 4 << 20;
/// Largest dataset read: 64 MiB.
pub const MAX_DATASET_BYTES: u64 = 64 << 20;
/// Most bytes of a file of tensor items (`inputs[].file`).
pub const MAX_TENSOR_FILE_BYTES: u64 = 1 << 30;
/// Largest request trace read: 256 MiB (the window kept of it is bounded
/// by [`crate::limits::MAX_TRACE_REQUESTS`]).
pub const MAX_TRACE_BYTES: u64 = 256 << 20;
/// Largest tokenizer.json read: 64 MiB.
pub const MAX_TOKENIZER_BYTES: u64 = 64 << 20;
/// Largest empirical length file read: 1 MiB.
pub const MAX_LENGTHS_BYTES: u64 = 1 << 20;
/// Largest CA certificate file read: 1 MiB.
pub const MAX_CA_CERT_BYTES: u64 = 1 << 20;
/// Most characters of a file's content an error may quote.
pub const EXCERPT_CHARS: usize = 32;

/// Why a file could not be read. The message never holds the file's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Io(String),
    #[error("not a regular file ({0}); expected a file")]
    NotRegular(&'static str),
    #[error("larger than the limit of {}", fmt_bytes(*.0))]
    TooLarge(u64),
    /// A symbolic link on the path leads out of the repository.
    #[error(
        "{} is a symbolic link to {}, which is outside the repository ({}); refused, so that a checkout cannot make infer-bench read a file outside it: name the real file",
        infer_bench_results::outside::terminal(link),
        infer_bench_results::outside::terminal(to),
        infer_bench_results::outside::terminal(repo)
    )]
    LeavesRepository {
        /// The link (the first on the path that leads out).
        link: String,
        /// Where the path leads in the end.
        to: String,
        repo: String,
    },
}

/// `path` made absolute (against the current directory) with `.` and `..`
/// taken away by name, links left as they are.
fn lexical(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The repository of a spec in `dir`: the nearest folder at or above it
/// that holds `.git` (a work tree), else `dir` itself; by name, links not
/// followed.
pub fn repository(dir: &Path) -> PathBuf {
    let dir = lexical(dir);
    dir.ancestors()
        .find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok())
        .unwrap_or(&dir)
        .to_path_buf()
}

/// Refuses `path` when it lies inside `repo` by name but leads out of it
/// through a symbolic link (the link and where it leads are named; what
/// is there is not read). A path that is not there passes: reading it
/// says so.
pub fn check_link(path: &Path, repo: &Path) -> Result<(), ReadError> {
    let named = lexical(path);
    let repo = lexical(repo);
    if !named.starts_with(&repo) {
        return Ok(());
    }
    let (Ok(real), Ok(real_repo)) = (std::fs::canonicalize(path), std::fs::canonicalize(&repo))
    else {
        return Ok(());
    };
    if real.starts_with(&real_repo) {
        return Ok(());
    }
    // The first link on the way, to name it.
    let mut at = repo.clone();
    let mut link = named.clone();
    for c in named
        .strip_prefix(&repo)
        .unwrap_or(Path::new(""))
        .components()
    {
        at.push(c);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            link = at;
            break;
        }
    }
    Err(ReadError::LeavesRepository {
        link: link.display().to_string(),
        to: real.display().to_string(),
        repo: repo.display().to_string(),
    })
}

/// [`read_regular`] of a file of the repository `repo`: refused when a
/// link leads it out ([`check_link`]).
pub fn read_regular_in(path: &Path, limit: u64, repo: &Path) -> Result<Vec<u8>, ReadError> {
    check_link(path, repo)?;
    read_regular(path, limit)
}

/// [`read_text`] of a file of the repository `repo` ([`check_link`]).
pub fn read_text_in(path: &Path, limit: u64, repo: &Path) -> Result<String, TextError> {
    check_link(path, repo).map_err(TextError::Read)?;
    read_text(path, limit)
}

/// `4 MiB`, `1 KiB`, `12 B`.
pub fn fmt_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a fifo"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a plain file"
    }
}

/// Reads a regular file of at most `limit` bytes. Everything else (a
/// directory, a fifo, a device, a socket) is refused before it is opened,
/// so nothing blocks and nothing endless is read; the size is checked
/// again while reading, for files that grow or lie about their size
/// (`/proc`).
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let io = |e: std::io::Error| ReadError::Io(io_message(&e));
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(ReadError::NotRegular(kind_of(meta.file_type())));
    }
    // /proc/self/environ is a "regular file" of size 0 that holds every
    // secret of the environment: refuse the kernel's pseudo-files, also
    // behind a symbolic link.
    if let Ok(real) = std::fs::canonicalize(path) {
        if ["/proc", "/sys", "/dev"]
            .iter()
            .any(|d| real.starts_with(d))
        {
            return Err(ReadError::NotRegular("a file of the kernel"));
        }
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge(limit));
    }
    let file = std::fs::File::open(path).map_err(io)?;
    // Swapped for something else between the two looks: refuse it too.
    let opened = file.metadata().map_err(io)?;
    if !opened.file_type().is_file() {
        return Err(ReadError::NotRegular(kind_of(opened.file_type())));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(limit) as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge(limit));
    }
    Ok(bytes)
}

/// An I/O error in words.
fn io_message(e: &std::io::Error) -> String {
    e.to_string()
}

/// Reads a regular text file of at most `limit` bytes: UTF-8, else an
/// error naming the line and column of the first invalid byte.
pub fn read_text(path: &Path, limit: u64) -> Result<String, TextError> {
    let bytes = read_regular(path, limit).map_err(TextError::Read)?;
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let (line, col) = line_col_of(bytes, e.utf8_error().valid_up_to());
        TextError::NotUtf8 { line, col }
    })
}

/// Why a text file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error(transparent)]
    Read(ReadError),
    #[error("{line}:{col}: not UTF-8 text")]
    NotUtf8 { line: usize, col: usize },
}

/// 1-based line and column (in characters of the valid text before it) of
/// a byte offset.
pub fn line_col_of(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|b| *b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    let col = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    (line, col)
}

/// At most [`EXCERPT_CHARS`] characters of `s`, escaped (control
/// characters, quotes and backslashes as Rust escapes), with `...` when
/// cut: the only form in which a file's content may appear in a message.
pub fn excerpt(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    for c in chars.by_ref().take(EXCERPT_CHARS) {
        out.extend(c.escape_debug());
    }
    if chars.next().is_some() {
        out.push_str("...");
    }
    out
}

/// A token of a file for a message: quoted (as an excerpt) when it looks
/// like the number that was expected, else only described, so that no
/// word of a file that is not what the spec says (a secret) is shown.
pub fn describe_token(tok: &str) -> String {
    if tok.len() <= EXCERPT_CHARS
        && tok
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
    {
        format!("\"{tok}\"")
    } else {
        format!("text of {} characters", tok.chars().count())
    }
}

/// A parser's message with every quoted string (`"..."`, `` `...` ``) cut
/// to an excerpt: serde's "invalid type: string \"...\"" quotes the value
/// it found, which may be a whole line of a file.
pub fn sanitize_message(msg: &str) -> String {
    let mut out = String::new();
    let mut rest = msg;
    let cut = |s: &str| s.chars().count() > EXCERPT_CHARS || s.chars().any(char::is_control);
    while let Some(i) = rest.find(['"', '`']) {
        let q = rest.as_bytes()[i] as char;
        out.push_str(&rest[..=i]);
        let after = &rest[i + 1..];
        match after.find(q) {
            Some(j) => {
                let inner = &after[..j];
                if cut(inner) {
                    out.push_str(&excerpt(inner));
                } else {
                    out.push_str(inner);
                }
                out.push(q);
                rest = &after[j + 1..];
            }
            // A quote that is not closed (a lone backtick in a list of
            // characters): the rest, cut by the same rule.
            None if cut(after) => {
                out.push_str(&excerpt(after));
                return out;
            }
            None => {
                out.push_str(after);
                return out;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_regular_file() {
        for (path, kind) in [
            ("/dev/zero", "a character device"),
            ("/dev/urandom", "a character device"),
            ("/", "a directory"),
        ] {
            assert_eq!(
                read_regular(Path::new(path), 10).unwrap_err().to_string(),
                format!("not a regular file ({kind}); expected a file")
            );
        }
        let dir = tempfile_dir();
        let fifo = dir.join("fifo");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status();
        if status.is_ok_and(|s| s.success()) {
            // Would block forever if it were opened.
            assert_eq!(
                read_regular(&fifo, 10).unwrap_err(),
                ReadError::NotRegular("a fifo")
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ib-files-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_at_most_the_limit() {
        let dir = tempfile_dir().join("limit");
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("f");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_regular(&f, 10).unwrap(), b"0123456789");
        assert_eq!(
            read_regular(&f, 9).unwrap_err().to_string(),
            "larger than the limit of 9 B"
        );
        // The environment, directly or through a link, is never read.
        if Path::new("/proc/self/environ").exists() {
            let link = dir.join("environ");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink("/proc/self/environ", &link).unwrap();
            for p in [Path::new("/proc/self/environ"), &link] {
                assert_eq!(
                    read_regular(p, 1 << 20).unwrap_err(),
                    ReadError::NotRegular("a file of the kernel")
                );
            }
        }
        std::fs::write(&f, b"ok\n\xff").unwrap();
        assert_eq!(
            read_text(&f, 10).unwrap_err(),
            TextError::NotUtf8 { line: 2, col: 1 }
        );
    }

    #[test]
    fn excerpts_are_short_and_escaped() {
        assert_eq!(excerpt("abc"), "abc");
        assert_eq!(excerpt("a\nb\"c"), "a\\nb\\\"c");
        let long = "SECRET=".repeat(20);
        let e = excerpt(&long);
        assert!(
            e.ends_with("...") && e.chars().count() == EXCERPT_CHARS + 3,
            "{e}"
        );
        assert_eq!(
            sanitize_message(&format!("invalid type: string \"{long}\", expected u32")),
            format!("invalid type: string \"{e}\", expected u32")
        );
        assert_eq!(
            sanitize_message("invalid type: string \"ten\", expected u32"),
            "invalid type: string \"ten\", expected u32"
        );
        assert_eq!(fmt_bytes(64 << 20), "64 MiB");
    }

    #[test]
    fn a_link_that_leads_out_of_the_repository_is_refused() {
        let root = tempfile_dir().join("links");
        let _ = std::fs::remove_dir_all(&root);
        let repo = root.join("repo");
        let outside = root.join("outside");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("specs")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("env"), "GH_TOKEN=ghp_secret\n").unwrap();
        std::fs::write(repo.join("real.toml"), "name = 1\n").unwrap();
        let link =
            |to: &std::path::Path, at: &str| std::os::unix::fs::symlink(to, repo.join(at)).unwrap();
        link(&outside.join("env"), "specs/leaves.toml");
        link(&outside, "out-dir");
        link(&repo.join("real.toml"), "specs/stays.toml");
        let found = repository(&repo.join("specs"));
        assert_eq!(found, repo);
        for (path, named) in [
            (
                repo.join("specs/leaves.toml"),
                repo.join("specs/leaves.toml"),
            ),
            (repo.join("out-dir/env"), repo.join("out-dir")),
        ] {
            let e = read_text_in(&path, 100, &found).unwrap_err();
            let text = e.to_string();
            assert!(
                matches!(&e, TextError::Read(ReadError::LeavesRepository { link, .. }) if std::path::Path::new(link) == named.as_path()),
                "{text}"
            );
            assert!(text.contains("outside the repository"), "{text}");
            assert!(!text.contains("ghp_"), "{text}");
        }
        // A link that stays inside, the real path, and a path named
        // outside the repository on its own: read.
        assert!(read_text_in(&repo.join("specs/stays.toml"), 100, &found).is_ok());
        assert!(read_text_in(&repo.join("real.toml"), 100, &found).is_ok());
        assert!(read_text_in(&outside.join("env"), 100, &found).is_ok());
        // Without a work tree, the spec's own folder is the repository.
        let bare = root.join("bare");
        std::fs::create_dir_all(&bare).unwrap();
        assert_eq!(repository(&bare), bare);
    }
}
