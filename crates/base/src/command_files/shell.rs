//! A shell's arguments and the words of a shell string.

use std::path::Path;

use super::{Walk, is_assignment};

/// Shells whose `-c` argument is a shell string, and whose first operand
/// is otherwise a script.
pub(super) const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh"];
/// Long options of a shell that take no value.
const LONG_FLAGS: &[&str] = &[
    "login",
    "noprofile",
    "norc",
    "posix",
    "restricted",
    "verbose",
    "version",
    "help",
    "debugger",
    "dump-strings",
    "dump-po-strings",
    "noediting",
    "pretty-print",
];
/// Long options of a shell whose value is a file it runs.
const LONG_FILES: &[&str] = &["rcfile", "init-file"];
/// Reserved words that may open a command (`then python3 x.py`).
const OPENING_WORDS: &[&str] = &["if", "then", "else", "elif", "do", "while", "until", "!"];
/// Reserved words whose commands codemode does not read.
const COMPOUND_WORDS: &[&str] = &["for", "case", "select", "function", "coproc"];

impl Walk<'_> {
    /// A shell's arguments: options (`-o`, `-O`, `+o`, `+O` take the next
    /// word, also inside combined flags: `-euo pipefail`; `--rcfile FILE`
    /// runs FILE; `--` or `-` ends them), then the `-c` string or a script
    /// (none with `-s`: commands come from the input), then the string's or
    /// script's own arguments.
    pub(super) fn shell_args(&mut self, name: &str, args: &[String], cwd: &Path, depth: usize) {
        let (mut string_mode, mut stdin_mode) = (false, false);
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            if arg == "--" || arg == "-" {
                i += 1;
                break;
            }
            if let Some(long) = arg.strip_prefix("--") {
                if LONG_FILES.contains(&long) {
                    if let Some(file) = args.get(i + 1) {
                        self.word(file, cwd, true);
                    }
                    i += 2;
                    continue;
                }
                if !LONG_FLAGS.contains(&long) {
                    self.undetermined(format!("`{name}` has an option `{arg}` codemode does not know"));
                }
                i += 1;
                continue;
            }
            let minus = arg.starts_with('-');
            let Some(flags) = arg.strip_prefix(['-', '+']).filter(|f| !f.is_empty()) else { break };
            let mut values = 0;
            for flag in flags.chars() {
                match flag {
                    'o' | 'O' => values += 1,
                    'c' if minus => string_mode = true,
                    's' if minus => stdin_mode = true,
                    f if f.is_ascii_alphabetic() => {}
                    _ => self.undetermined(format!("`{name}` has an option `{arg}` codemode cannot read")),
                }
            }
            i += 1 + values;
        }
        let operands = args.get(i..).unwrap_or_default();
        let rest = match operands.split_first() {
            Some((string, rest)) if string_mode => {
                self.shell_string(string, cwd, depth + 1);
                rest
            }
            Some((script, rest)) if !stdin_mode => {
                self.word(script, cwd, true);
                rest
            }
            _ => operands,
        };
        for arg in rest {
            self.word(arg, cwd, false);
        }
    }

    /// The words of a shell string, command by command.
    pub(super) fn shell_string(&mut self, text: &str, cwd: &Path, depth: usize) {
        if text.contains('$') || text.contains('`') {
            return self
                .undetermined("its shell string expands a variable or a command (`$`, `` ` ``)".into());
        }
        if text.contains(['*', '?', '[', '{']) {
            return self.undetermined("its shell string has a glob or a brace expansion".to_owned());
        }
        for segment in text.split(['\n', ';', '&', '|', '(', ')']) {
            if self.exhausted() {
                return;
            }
            let Some(words) = shlex::split(segment) else {
                return self.undetermined("its shell string's quoting could not be read".to_owned());
            };
            let mut words = words.into_iter().skip_while(|w| OPENING_WORDS.contains(&w.as_str())).peekable();
            if let Some(word) = words.peek().filter(|w| COMPOUND_WORDS.contains(&w.as_str())) {
                return self.undetermined(format!("its shell string has a `{word}` command"));
            }
            let mut argv = Vec::new();
            let mut path = None;
            while let Some(word) = words.next() {
                let op = word.trim_start_matches(|c: char| c.is_ascii_digit());
                if let Some(target) = op.strip_prefix('<').map(|t| t.trim_start_matches('<')) {
                    // Read as input: it may be a script (`sh < hooks/x.sh`).
                    let target =
                        if target.is_empty() { words.next().unwrap_or_default() } else { target.into() };
                    self.word(&target, cwd, true);
                } else if op.starts_with('>') {
                    // Written, not run.
                    if op.trim_start_matches(['>', '&', '|']).is_empty() {
                        words.next();
                    }
                } else if argv.is_empty() && is_assignment(&word) {
                    let (name, value) = word.split_once('=').unwrap_or_default();
                    if name == "PATH" {
                        path = Some(value.to_owned());
                    }
                    self.word(value, cwd, false);
                } else {
                    argv.push(word);
                }
            }
            self.argv_with_path(&argv, cwd, depth, path.as_deref());
        }
    }
}
