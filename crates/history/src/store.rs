//! The history store: a folder of records, `<root>/<spec>/<yyyy>/<commit>.json`,
//! one small file per run of main, so two branches that record never touch
//! the same file and a merge never conflicts. The default root is
//! `bench-history` in the repository; a workflow may keep it on a branch of
//! its own instead (it is only a folder).
//!
//! Reading is defensive: the folder is in the repository, so a pull request
//! can put anything in it. Only plain files named `<commit>.json` in
//! four-digit year folders are read, each at most [`MAX_RECORD_BYTES`] and
//! at most [`MAX_RECORDS`] of them; a file that is not a record of this
//! spec and commit is skipped and named, never fatal. Writing goes through
//! `infer_bench_results::files` (no symbolic link is written through).

use std::path::{Path, PathBuf};

use crate::record::{Record, RecordError, safe_name};

/// The largest record read (a record of hundreds of points is ~100 KB).
pub const MAX_RECORD_BYTES: u64 = 4 << 20;
/// The most records of one spec read (years of runs on every commit).
pub const MAX_RECORDS: usize = 100_000;
/// The store's folder when none is named.
pub const DEFAULT_ROOT: &str = "bench-history";

/// Why the store could not be written or listed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Write(#[from] infer_bench_results::Error),
    #[error("cannot list {}: {message}", path.display())]
    List { path: PathBuf, message: String },
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// A file of the store that was not read, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub path: PathBuf,
    pub why: Skip,
}

/// Why a file of the store was passed over.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Skip {
    #[error("not a record (<commit>.json)")]
    NotARecordName,
    #[error("not a plain file")]
    NotPlain,
    #[error("not a year folder (yyyy)")]
    NotAYearFolder,
    #[error("not in the spec's folder")]
    OutsideSpec,
    #[error("more than {MAX_RECORDS} records; the rest are not read")]
    TooMany,
    #[error("{0}")]
    Read(#[from] infer_bench_spec::files::ReadError),
    #[error("not UTF-8")]
    NotUtf8,
    #[error("{0}")]
    Record(#[from] RecordError),
    #[error("holds commit {commit} of spec {spec} at {time}, not what its path says")]
    Misplaced {
        commit: String,
        spec: String,
        time: String,
    },
}

/// The records of one spec, oldest first, and the files passed over.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub records: Vec<Record>,
    pub skipped: Vec<Skipped>,
}

/// A history folder.
#[derive(Debug, Clone)]
pub struct Store {
    pub root: PathBuf,
}

/// What [`Store::write`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    New(PathBuf),
    /// A record of the same commit was there (a re-run): replaced.
    Replaced(PathBuf),
    /// The same record was there already.
    Unchanged(PathBuf),
}

impl Store {
    pub fn new(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }

    /// Where the record of `commit` at `time` for `spec` lives.
    pub fn path_of(&self, record: &Record) -> PathBuf {
        let year = record.time.get(..4).unwrap_or("0000");
        self.root
            .join(&record.spec)
            .join(year)
            .join(format!("{}.json", record.commit))
    }

    /// Writes `record` (atomically), replacing the record of the same
    /// commit of the same spec wherever its year folder is.
    pub fn write(&self, record: &Record) -> Result<Written, StoreError> {
        let path = self.path_of(record);
        let text = record.to_json();
        let loaded = self.load(&record.spec)?;
        let old: Vec<PathBuf> = loaded
            .records
            .iter()
            .filter(|r| r.commit == record.commit)
            .map(|r| self.path_of(r))
            .collect();
        if old.contains(&path) && std::fs::read_to_string(&path).is_ok_and(|t| t == text) {
            return Ok(Written::Unchanged(path));
        }
        infer_bench_results::files::write_atomic(&path, text.as_bytes())?;
        for p in old.iter().filter(|p| **p != path) {
            infer_bench_results::files::check(p)?;
            let _ = std::fs::remove_file(p);
        }
        Ok(if old.is_empty() {
            Written::New(path)
        } else {
            Written::Replaced(path)
        })
    }

    /// The specs with a folder in the store, in name order.
    pub fn specs(&self) -> Result<Vec<String>, StoreError> {
        if !self.root.is_dir() {
            return Ok(Vec::new());
        }
        let mut out: Vec<String> = entries(&self.root)?
            .into_iter()
            .filter(|(name, ft)| ft.is_dir() && safe_name(name))
            .map(|(name, _)| name)
            .collect();
        out.sort();
        Ok(out)
    }

    /// Every record of `spec`, oldest first (by time, then commit). An
    /// absent folder is an empty history.
    pub fn load(&self, spec: &str) -> Result<Loaded, StoreError> {
        if !safe_name(spec) {
            return Err(RecordError::BadSpec(spec.to_string()).into());
        }
        let dir = self.root.join(spec);
        let mut loaded = Loaded::default();
        if !dir.is_dir() {
            return Ok(loaded);
        }
        let mut years = entries(&dir)?;
        years.sort_by(|a, b| a.0.cmp(&b.0));
        for (year, ft) in years {
            let path = dir.join(&year);
            if !ft.is_dir() || year.len() != 4 || !year.bytes().all(|b| b.is_ascii_digit()) {
                loaded.skipped.push(Skipped {
                    path,
                    why: Skip::NotAYearFolder,
                });
                continue;
            }
            let mut files = entries(&path)?;
            files.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, ft) in files {
                let file = path.join(&name);
                if loaded.records.len() >= MAX_RECORDS {
                    loaded.skipped.push(Skipped {
                        path: file,
                        why: Skip::TooMany,
                    });
                    break;
                }
                match read_one(&file, &name, ft, spec, &year) {
                    Ok(r) => loaded.records.push(r),
                    Err(why) => loaded.skipped.push(Skipped { path: file, why }),
                }
            }
        }
        loaded.records.sort_by(|a, b| a.order().cmp(&b.order()));
        Ok(loaded)
    }
}

/// One record file, checked against where it lies.
fn read_one(
    file: &Path,
    name: &str,
    ft: std::fs::FileType,
    spec: &str,
    year: &str,
) -> Result<Record, Skip> {
    if !name.ends_with(".json") {
        return Err(Skip::NotARecordName);
    }
    if ft.is_symlink() || !ft.is_file() {
        return Err(Skip::NotPlain);
    }
    let bytes = infer_bench_spec::files::read_regular(file, MAX_RECORD_BYTES)?;
    accept(&bytes, name, spec, year)
}

/// Every record of `spec` among `files` (paths below the store's root, as
/// `<spec>/<yyyy>/<commit>.json`, with their bytes), as [`Store::load`]
/// reads a folder: for a store read from git at a revision.
pub fn load_files(spec: &str, files: Vec<(PathBuf, Vec<u8>)>) -> Loaded {
    let mut loaded = Loaded::default();
    for (path, bytes) in files {
        let parts: Vec<String> = path
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let n = parts.len();
        let got = if n < 3 || parts[n - 3] != spec {
            Err(Skip::OutsideSpec)
        } else if loaded.records.len() >= MAX_RECORDS {
            Err(Skip::TooMany)
        } else if bytes.len() as u64 > MAX_RECORD_BYTES {
            Err(Skip::Read(infer_bench_spec::files::ReadError::TooLarge(
                MAX_RECORD_BYTES,
            )))
        } else {
            accept(&bytes, &parts[n - 1], spec, &parts[n - 2])
        };
        match got {
            Ok(r) => loaded.records.push(r),
            Err(why) => loaded.skipped.push(Skipped { path, why }),
        }
    }
    loaded.records.sort_by(|a, b| a.order().cmp(&b.order()));
    loaded
}

/// A record's bytes, checked against its file name and folders.
fn accept(bytes: &[u8], name: &str, spec: &str, year: &str) -> Result<Record, Skip> {
    let Some(commit) = name.strip_suffix(".json") else {
        return Err(Skip::NotARecordName);
    };
    if year.len() != 4 || !year.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Skip::NotAYearFolder);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| Skip::NotUtf8)?;
    let record = Record::parse(text)?;
    if record.commit != commit || record.spec != spec || !record.time.starts_with(year) {
        return Err(Skip::Misplaced {
            commit: record.commit,
            spec: record.spec,
            time: record.time,
        });
    }
    Ok(record)
}

/// A folder's entries: (name, type), names that are not UTF-8 left out.
fn entries(dir: &Path) -> Result<Vec<(String, std::fs::FileType)>, StoreError> {
    let list = |e: std::io::Error| StoreError::List {
        path: dir.to_path_buf(),
        message: e.to_string(),
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(list)? {
        let entry = entry.map_err(list)?;
        let (Ok(name), Ok(ft)) = (entry.file_name().into_string(), entry.file_type()) else {
            continue;
        };
        out.push((name, ft));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Source;

    fn record(commit: &str, time: &str) -> Record {
        Record::new("q", commit, time, Source::Run)
    }

    #[test]
    fn records_come_back_oldest_first_and_a_rerun_replaces_its_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let b = record("bbb", "2026-01-02T00:00:00Z");
        let a = record("aaa", "2025-12-31T00:00:00Z");
        assert!(matches!(store.write(&b).unwrap(), Written::New(_)));
        assert!(matches!(store.write(&a).unwrap(), Written::New(_)));
        assert!(matches!(store.write(&a).unwrap(), Written::Unchanged(_)));
        assert!(store.root.join("q/2025/aaa.json").is_file());
        let loaded = store.load("q").unwrap();
        let commits: Vec<&str> = loaded.records.iter().map(|r| r.commit.as_str()).collect();
        assert_eq!(commits, ["aaa", "bbb"]);
        let mut again = record("aaa", "2026-03-01T00:00:00Z");
        again.metrics_version = 4;
        assert!(matches!(store.write(&again).unwrap(), Written::Replaced(_)));
        assert!(!store.root.join("q/2025/aaa.json").exists());
        let loaded = store.load("q").unwrap();
        assert_eq!(loaded.records.len(), 2);
        assert_eq!(loaded.records[1].commit, "aaa");
        assert_eq!(store.specs().unwrap(), ["q"]);
    }

    #[test]
    fn what_is_not_a_record_of_its_place_is_skipped_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.write(&record("aaa", "2026-01-02T00:00:00Z")).unwrap();
        let year = dir.path().join("q/2026");
        std::fs::write(year.join("zzz.json"), "{\"format\":\"other\"}").unwrap();
        std::fs::write(year.join("notes.txt"), "hello").unwrap();
        // A record that says it is another commit than its name.
        let liar = record("ccc", "2026-01-03T00:00:00Z").to_json();
        std::fs::write(year.join("ddd.json"), liar).unwrap();
        std::fs::create_dir_all(dir.path().join("q/latest")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", year.join("eee.json")).unwrap();
        let loaded = store.load("q").unwrap();
        assert_eq!(loaded.records.len(), 1);
        let names: Vec<String> = loaded
            .skipped
            .iter()
            .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["ddd.json", "eee.json", "notes.txt", "zzz.json", "latest"],
            "{:?}",
            loaded.skipped
        );
        assert!(store.load("../etc").is_err());
        assert!(store.load("absent").unwrap().records.is_empty());
    }
}
