//! Where a path named by a spec (not by the command line) may point: inside
//! the current directory's tree, so a spec from a pull request cannot make
//! `bless` write `../../elsewhere` or `/etc/...`. Paths given on the
//! command line are the user's own and are not checked.

use std::path::{Component, Path, PathBuf};

/// `path` if it stays inside the current directory's tree, after `..` and
/// symbolic links of its existing part are resolved; else an explanation.
pub fn inside_cwd(path: &Path) -> Result<PathBuf, String> {
    let cwd = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| format!("cannot read the current directory: {e}"))?;
    let outside = || {
        format!(
            "{} is outside the current directory ({}); a path from a spec must stay inside it (give it on the command line to write elsewhere)",
            path.display(),
            cwd.display()
        )
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
        .map_err(|e| format!("{}: {e}", existing.display()))?;
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
        assert!(e.contains("outside the current directory"), "{e}");
        assert!(inside_cwd(Path::new("/tmp/x.json")).is_err());
        assert!(inside_cwd(Path::new("a/../../x.json")).is_err());
    }
}
