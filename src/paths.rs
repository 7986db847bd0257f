//! Where a path named by a spec (not by the command line) may point: inside
//! the current directory's tree, so a spec from a pull request cannot make
//! `bless` write `../../elsewhere` or `/etc/...`. Paths given on the
//! command line are the user's own and are not checked.

use std::path::{Component, Path, PathBuf};

use crate::error::PathError;

/// `path` if it stays inside the current directory's tree, after `..` and
/// symbolic links of its existing part are resolved; else why not.
pub fn inside_cwd(path: &Path) -> Result<PathBuf, PathError> {
    let cwd = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(PathError::Cwd)?;
    let outside = || PathError::Outside {
        path: path.to_path_buf(),
        cwd: cwd.clone(),
    };
    let mut depth = 0usize;
    for c in path.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => depth = depth.checked_sub(1).ok_or_else(outside)?,
            Component::RootDir | Component::Prefix(_) => return Err(outside()),
        }
    }
    // A symbolic link on the way may still lead out: resolve the part of
    // the path that exists.
    let full = cwd.join(path);
    let mut existing = full.as_path();
    while !existing.exists() {
        existing = existing.parent().unwrap_or(Path::new("/"));
    }
    let real = existing
        .canonicalize()
        .map_err(|source| PathError::Resolve {
            path: existing.to_path_buf(),
            source,
        })?;
    if !real.starts_with(&cwd) {
        return Err(outside());
    }
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_leave_the_tree_are_refused() {
        assert!(inside_cwd(Path::new("baselines/x.json")).is_ok());
        assert!(inside_cwd(Path::new("a/../baselines/x.json")).is_ok());
        let e = inside_cwd(Path::new("../../outside/new-file.json")).unwrap_err();
        assert!(matches!(e, PathError::Outside { .. }), "{e}");
        assert!(
            e.to_string().contains("outside the current directory"),
            "{e}"
        );
        assert!(inside_cwd(Path::new("/tmp/x.json")).is_err());
        assert!(inside_cwd(Path::new("a/../../x.json")).is_err());
    }
}
