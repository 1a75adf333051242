//! Globs over workspace paths with `.gitignore` semantics, as ripgrep's
//! `-g` reads them (the `ignore` crate's overrides): a glob without a `/`
//! (other than a trailing one) matches a file name at any depth (`mod00*`
//! finds `src/mod001.rs`, `*.rs` every Rust file); one with a `/` is
//! anchored at the workspace root (`src/*.rs` only directly in `src`); `*`
//! and `?` do not cross `/`, `**` does; `{a,b}` alternates. Source:
//! gitignore(5), "PATTERN FORMAT".

use ignore::overrides::{Override, OverrideBuilder};

use crate::catalog::ToolError;

/// One compiled glob, matched against workspace-relative file paths.
#[derive(Debug)]
pub(crate) struct PathGlob(Override);

impl PathGlob {
    /// Compiles `glob`; `what` names the argument in the error (e.g.
    /// "`query`"), which says what is wrong with it.
    pub(crate) fn new(glob: &str, what: &str) -> Result<PathGlob, ToolError> {
        let bad = |e: ignore::Error| ToolError::new(format!("{what} `{glob}` is not a valid glob: {e}"));
        if glob.starts_with('!') {
            return Err(ToolError::new(format!(
                "{what} `{glob}` starts with `!`: a glob here selects files; use `exclude` to leave some out"
            )));
        }
        let mut b = OverrideBuilder::new(".");
        b.add(glob).map_err(bad)?;
        Ok(PathGlob(b.build().map_err(bad)?))
    }

    /// Whether the file at `rel` (workspace-relative, `/`-separated)
    /// matches.
    pub(crate) fn is_match(&self, rel: &str) -> bool {
        self.0.matched(rel, false).is_whitelist()
    }
}

/// Globs of paths to leave out of a walk (`exclude`, and the default
/// exclusions), read as [`PathGlob`] reads one: `node_modules` or `mod00*`
/// leaves out names at any depth, `src/gen` only that folder. A folder left
/// out is not walked into.
#[derive(Debug)]
pub(crate) struct PathGlobSet(Override);

impl PathGlobSet {
    /// Compiles `globs`; `what` names the argument in the error.
    pub(crate) fn new<S: AsRef<str>>(globs: &[S], what: &str) -> Result<PathGlobSet, ToolError> {
        let mut b = OverrideBuilder::new(".");
        for glob in globs {
            let glob = glob.as_ref();
            let bad = |e: ignore::Error| ToolError::new(format!("{what} glob `{glob}` is invalid: {e}"));
            if glob.starts_with('!') {
                return Err(ToolError::new(format!(
                    "{what} glob `{glob}` starts with `!`: each glob here names paths to leave out"
                )));
            }
            b.add(glob).map_err(bad)?;
        }
        Ok(PathGlobSet(b.build().map_err(|e| ToolError::new(format!("{what}: {e}")))?))
    }

    /// Whether the entry at `rel` (workspace-relative, `/`-separated; a
    /// folder when `is_dir`) is left out.
    pub(crate) fn is_match(&self, rel: &str, is_dir: bool) -> bool {
        self.0.matched(rel, is_dir).is_whitelist()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_without_a_slash_matches_names_at_any_depth() {
        let g = PathGlob::new("mod00*", "`query`").unwrap();
        assert!(g.is_match("src/mod001.rs") && g.is_match("mod002.rs") && g.is_match("a/b/c/mod003"));
        assert!(!g.is_match("src/amod001.rs"));
        let anchored = PathGlob::new("src/*.rs", "`glob`").unwrap();
        assert!(
            anchored.is_match("src/a.rs")
                && !anchored.is_match("src/x/a.rs")
                && !anchored.is_match("b/src/a.rs")
        );
        let deep = PathGlob::new("src/**/*.{rs,md}", "`glob`").unwrap();
        assert!(deep.is_match("src/x/y/a.md") && deep.is_match("src/a.rs") && !deep.is_match("a.rs"));
        assert!(PathGlob::new("a[", "`query`").unwrap_err().message.contains("not a valid glob"));
        assert!(PathGlob::new("!*.rs", "`query`").unwrap_err().message.contains("exclude"));
    }

    #[test]
    fn exclusions_match_names_at_any_depth_as_query_globs_do() {
        let set = PathGlobSet::new(&["node_modules", "mod00*", "src/gen", "*.md"], "`exclude`").unwrap();
        assert!(set.is_match("pkg/node_modules", true) && set.is_match("node_modules", true));
        assert!(set.is_match("a/b/mod001.rs", false) && set.is_match("mod002.rs", false));
        assert!(set.is_match("src/gen", true) && !set.is_match("x/src/gen", true));
        assert!(set.is_match("docs/a.md", false) && !set.is_match("docs/a.rs", false));
        let dirs = PathGlobSet::new(&["build/"], "`exclude`").unwrap();
        assert!(dirs.is_match("x/build", true) && !dirs.is_match("x/build", false));
        assert!(PathGlobSet::new(&["!a"], "`exclude`").is_err());
        assert!(PathGlobSet::new(&["a["], "`exclude`").unwrap_err().message.contains("`a[`"));
    }
}
