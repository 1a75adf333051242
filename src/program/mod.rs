//! Programs and their normalisation before they run.
//!
//! A program is the body of an async function: top-level `await` and
//! `return` work. [`wrap`] puts the body inside the function without moving
//! any of the user's lines, so line numbers in errors are the user's own
//! (columns on the first line are shifted by [`WRAP_PREFIX`], which the VM
//! takes back off).

/// The text put before the program's first line.
pub(crate) const WRAP_PREFIX: &str = "(async () => {";
/// The text put after the program's last line.
const WRAP_SUFFIX: &str = "\n})()";

/// A program to run: JavaScript source and the name used in stack traces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    source: String,
    name: String,
}

impl Program {
    /// A program named `program.js`.
    pub fn new(source: impl Into<String>) -> Self {
        Program::named("program.js", source)
    }

    /// A program with a name for stack traces (usually its file name).
    /// Characters other than letters, digits, `.`, `_` and `-` are replaced
    /// by `_`.
    pub fn named(name: impl Into<String>, source: impl Into<String>) -> Self {
        let name: String = name
            .into()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
            .collect();
        let name = if name.is_empty() { "program.js".to_owned() } else { name };
        Program { source: source.into(), name }
    }

    /// The source as given.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The name used in stack traces.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The source the VM evaluates: the program inside an async arrow function
/// that is called at once, so the script's value is the program's promise.
pub(crate) fn wrap(source: &str) -> String {
    let mut s = String::with_capacity(WRAP_PREFIX.len() + source.len() + WRAP_SUFFIX.len());
    s.push_str(WRAP_PREFIX);
    s.push_str(source);
    s.push_str(WRAP_SUFFIX);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_line_in_place() {
        let src = "const a = 1;\nreturn a; // trailing comment";
        let w = wrap(src);
        assert_eq!(w.lines().nth(1), src.lines().nth(1));
        assert!(w.starts_with(WRAP_PREFIX) && w.ends_with("\n})()"));
    }

    #[test]
    fn names_are_sanitised() {
        assert_eq!(Program::named("my prog(1).js", "").name(), "my_prog_1_.js");
        assert_eq!(Program::named("", "").name(), "program.js");
    }
}
