//! Results named on the command line (`diff`, `bless`, `merge`,
//! `report`): a results file, or a run directory that holds one. Read in
//! one place for every command, so each says the same when there is none.

use crate::error::{Result, Usage};

/// A results file given on the command line (`diff`, `bless`, `merge`,
/// `report`): a path that holds none is a usage error (exit 2) that says
/// what was expected, not a bare "No such file or directory".
pub fn read_results(
    path: &std::path::Path,
) -> Result<(crate::results::Results, std::path::PathBuf)> {
    let file = if path.is_dir() {
        path.join("results.json")
    } else {
        path.to_path_buf()
    };
    if !file.is_file() {
        return Err(Usage::NoResults {
            path: path.to_path_buf(),
        }
        .into());
    }
    Ok(crate::results::Results::read(path)?)
}
