//! The workspace files a command names: what a hook, a `cmd:` approver or
//! an MCP stdio server runs outside the sandbox, so that codemode can pin
//! them by digest when they are trusted and protect them from tool calls
//! while a run lasts (docs/SECURITY.md, "Protected paths").
//!
//! A command names a file with
//! - its program: a path, or a name without `/` looked up on the `PATH`
//!   the command will get. Every `PATH` entry inside the workspace (a
//!   relative or empty entry is taken from the working folder) up to and
//!   including the first where the name is an executable file names
//!   `<entry>/<name>`, existing or not: a program that creates `bin/python3`
//!   where `bin` comes first on `PATH` changes what runs;
//! - the interpreter on that program's `#!` line;
//! - the script of a known interpreter (`python3`, `node`, `perl`, `ruby`,
//!   `deno`, `bun`, `php`, `lua`, `tsx`, `ts-node`, a shell), whatever its
//!   name and whether or not it exists;
//! - each argument that is an existing file or a script by its extension
//!   (`guard.py`);
//! - the words of a shell string a shell is given (`bash -euo pipefail -c
//!   "python3 hooks/guard.py"`: the options `-o`, `-O`, `+o`, `+O`,
//!   `--rcfile`, `--init-file` take a value, `--` ends the options) and of
//!   `env -S`;
//! - the command a wrapper runs (`env`, `timeout`, `nice`, `nohup`,
//!   `setsid`, `stdbuf`, `sudo`, `doas`, `flock`, `ionice`, `chrt`,
//!   `taskset`, `exec`, `command`, `time`, `busybox`), past the wrapper's
//!   own options and operands.
//!
//! A file that does not exist yet is named too, so that its folder can be
//! protected before a program creates it. Redirection targets (`>log`)
//! are written, not run, and do not count.
//!
//! Some commands' files cannot be known from their words:
//! [`CommandFiles::undetermined`] says why. A shell string that expands a
//! variable or a command (`$X`, `$(...)`, backquotes), a glob, `eval`,
//! `cd`, `for`/`case`; inline code (`python3 -c`, `node -e`); a module
//! found by name (`python3 -m pkg`); a wrapper that changes the folder
//! (`env -C`, `sudo -D`) or takes its command's words from its input
//! (`xargs`); a shell option codemode cannot read; and an unknown program
//! given `-c` with what looks like a shell string.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

mod programs;
mod shell;
#[cfg(test)]
mod tests;

/// Extensions that make a missing argument a script a command names.
const SCRIPT_EXTENSIONS: &[&str] =
    &["py", "sh", "bash", "zsh", "js", "mjs", "cjs", "ts", "mts", "cts", "rb", "pl", "php", "lua", "jar"];
/// How deep shell strings, wrappers and `#!` lines are followed.
const MAX_DEPTH: usize = 6;
/// The most files one command names: past it the command's files are
/// undetermined (a real hook or server names a handful).
pub const MAX_FILES: usize = 1000;
/// The most words and `PATH` entries one command's reading looks at (each
/// costs a file-system lookup): past it the reading stops and the
/// command's files are undetermined, so a megabyte of words (a cloned
/// workspace's `.mcp.json` or `codemode.toml`) costs milliseconds, not
/// minutes.
pub const MAX_LOOKUPS: usize = 4096;

/// What [`command_files`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandFiles {
    /// Absolute paths beneath the workspace, existing or not, in the order
    /// named, without repeats: as named (lexically normalised, links kept)
    /// and, for a file reached through a link, its real path too when that
    /// is in the workspace. Regular files or missing paths; never a folder.
    pub files: Vec<PathBuf>,
    /// Why the files the command runs cannot all be known from its words
    /// (the first reason found), `None` when they can. Also set when the
    /// command names more than [`MAX_FILES`] files or has more than
    /// [`MAX_LOOKUPS`] words and `PATH` entries to look at (then `files`
    /// holds those found before the bound).
    pub undetermined: Option<String>,
}

/// The workspace files `argv` names when run in the folder `cwd`
/// (absolute) with codemode's own `PATH`; `workspace` is canonical. See
/// the module docs.
pub fn command_files(argv: &[String], cwd: &Path, workspace: &Path) -> CommandFiles {
    command_files_with_path(argv, cwd, workspace, std::env::var_os("PATH").as_deref())
}

/// [`command_files`] for a command run with `path` as its `PATH` (an MCP
/// server's `env.PATH`); `None`: no `PATH`, so a bare program name names
/// no file.
pub fn command_files_with_path(
    argv: &[String],
    cwd: &Path,
    workspace: &Path,
    path: Option<&OsStr>,
) -> CommandFiles {
    let mut walk = Walk {
        workspace,
        path: path.map(OsStr::to_owned),
        out: CommandFiles::default(),
        lookups: 0,
        seen: HashSet::new(),
    };
    walk.argv(argv, cwd, 0);
    walk.out
}

struct Walk<'a> {
    workspace: &'a Path,
    /// The `PATH` of the command being read (an assignment changes it).
    path: Option<OsString>,
    out: CommandFiles,
    /// Words and `PATH` entries looked at so far ([`MAX_LOOKUPS`]).
    lookups: usize,
    /// The files in `out.files`, to keep them without repeats.
    seen: HashSet<PathBuf>,
}

impl Walk<'_> {
    fn undetermined(&mut self, why: String) {
        self.out.undetermined.get_or_insert(why);
    }

    /// Whether the reading has looked at [`MAX_LOOKUPS`] words and `PATH`
    /// entries: then nothing more is looked at.
    fn exhausted(&self) -> bool {
        self.lookups > MAX_LOOKUPS
    }

    /// Counts one lookup; `false` (and the files undetermined) past
    /// [`MAX_LOOKUPS`].
    fn spend(&mut self) -> bool {
        self.lookups = self.lookups.saturating_add(1);
        if self.exhausted() {
            self.undetermined(format!(
                "the command has more than {MAX_LOOKUPS} words and PATH entries to look at; codemode stops \
                 reading it there (shorten the command, or move it into a script file)"
            ));
            return false;
        }
        true
    }

    /// `argv` with `PATH` set to `path` (an assignment `PATH=...` before
    /// the command), the walk's own `PATH` kept for the rest.
    fn argv_with_path(&mut self, argv: &[String], cwd: &Path, depth: usize, path: Option<&str>) {
        let Some(path) = path else { return self.argv(argv, cwd, depth) };
        let kept = self.path.replace(OsString::from(path));
        self.argv(argv, cwd, depth);
        self.path = kept;
    }

    fn argv(&mut self, argv: &[String], cwd: &Path, depth: usize) {
        if self.exhausted() {
            return;
        }
        if depth > MAX_DEPTH {
            return self.undetermined("shell strings or wrappers nested too deep to follow".to_owned());
        }
        let Some((program, args)) = argv.split_first() else { return };
        let name = program.rsplit('/').next().unwrap_or(program);
        match name {
            "eval" => return self.undetermined("`eval` runs a computed command".to_owned()),
            "cd" | "pushd" | "popd" => {
                return self.undetermined(format!("`{name}` changes the folder later words are taken from"));
            }
            "source" | "." => return args.iter().for_each(|a| self.word(a, cwd, true)),
            _ => {}
        }
        if let Some(wrapper) = programs::wrapper(name) {
            if !wrapper.builtin {
                self.program(program, cwd, depth);
            }
            return self.wrapped(wrapper, args, cwd, depth);
        }
        self.program(program, cwd, depth);
        if shell::SHELLS.contains(&name) {
            return self.shell_args(name, args, cwd, depth);
        }
        if let Some(interpreter) = programs::interpreter(name) {
            return self.interpreted(interpreter, name, args, cwd);
        }
        if programs::has_shell_string(args) {
            self.undetermined(format!("`{name}` is given `-c` with what looks like a shell string"));
        }
        for arg in args {
            self.word(arg, cwd, false);
        }
    }

    /// The program: a path, or a name looked up on `PATH`; and the
    /// interpreter of its `#!` line.
    fn program(&mut self, program: &str, cwd: &Path, depth: usize) {
        let path = if program.contains('/') {
            self.word(program, cwd, true);
            Some(lexical(cwd, program))
        } else {
            self.on_path(program, cwd)
        };
        if let Some(interpreter) = path.filter(|p| p.is_file()).and_then(|p| shebang(&p))
            && depth < MAX_DEPTH
        {
            self.argv(&interpreter, cwd, depth + 1);
        }
    }

    /// `name` looked up on the walk's `PATH` as `execvp` does: each entry
    /// in the workspace up to and including the first where `name` is an
    /// executable file names `<entry>/<name>`, existing or not. The file
    /// found, if any.
    fn on_path(&mut self, name: &str, cwd: &Path) -> Option<PathBuf> {
        // `.` and `..` name the entry's folder or the one above, never a
        // file `execvp` runs (and `<entry>/..` would name the workspace).
        if matches!(name, "" | "." | "..") {
            return None;
        }
        let path = self.path.clone()?;
        for entry in std::env::split_paths(&path) {
            if !self.spend() {
                return None;
            }
            let candidate = crate::links::lexical(&cwd.join(entry)).join(name);
            self.named(candidate.clone());
            if is_executable(&candidate) {
                return Some(candidate);
            }
        }
        None
    }

    /// One word: the file it names, if it names one (`forced`: it is run
    /// or read as a script, so it counts even when missing).
    fn word(&mut self, word: &str, cwd: &Path, forced: bool) {
        if !self.spend() {
            return;
        }
        let word = match word.strip_prefix('-') {
            Some(option) => match option.split_once('=') {
                Some((_, value)) => value,
                None => return,
            },
            None => word,
        };
        if word.is_empty() {
            return;
        }
        let path = match (word.strip_prefix("~/"), std::env::var_os("HOME")) {
            (Some(rest), Some(home)) => Path::new(&home).join(rest),
            _ => lexical(cwd, word),
        };
        let is_script =
            Path::new(word).extension().is_some_and(|e| SCRIPT_EXTENSIONS.iter().any(|s| e == *s));
        let counts = match path.symlink_metadata() {
            Ok(_) => !path.is_dir(),
            Err(_) => forced || is_script,
        };
        if counts {
            self.named(path);
        }
    }

    /// A file named: its path, and its real path (or, when missing, its
    /// real folder's) when that differs.
    fn named(&mut self, path: PathBuf) {
        let real = match std::fs::canonicalize(&path) {
            Ok(real) => Some(real),
            Err(_) if path.symlink_metadata().is_err() => path
                .parent()
                .and_then(|folder| std::fs::canonicalize(folder).ok())
                .zip(path.file_name())
                .map(|(folder, name)| folder.join(name)),
            Err(_) => None,
        };
        self.add(path);
        if let Some(real) = real {
            self.add(real);
        }
    }

    fn add(&mut self, path: PathBuf) {
        if !path.starts_with(self.workspace) || path == self.workspace || self.seen.contains(&path) {
            return;
        }
        if self.out.files.len() >= MAX_FILES {
            // Nothing more is looked at.
            self.lookups = MAX_LOOKUPS + 1;
            return self.undetermined(format!(
                "the command names more than {MAX_FILES} files; codemode stops reading it there \
                 (shorten the command, or move it into a script file)"
            ));
        }
        self.seen.insert(path.clone());
        self.out.files.push(path);
    }
}

/// `NAME=value`, as a shell reads an assignment before a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// `word` taken from `cwd`, with `.` and `..` resolved lexically (links
/// kept: the path as the command will open it).
fn lexical(cwd: &Path, word: &str) -> PathBuf {
    crate::links::lexical(&cwd.join(word))
}

/// Whether `path` is a file `execvp` would run (a link followed).
fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// The interpreter and its argument on `file`'s `#!` line, if it has one,
/// as the kernel passes them: the rest of the line is one word
/// (`#!/usr/bin/env -S python3 -u` is `env` and `-S python3 -u`).
fn shebang(file: &Path) -> Option<Vec<String>> {
    use std::io::Read as _;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let mut head = [0u8; 256];
    let read = options.open(file).and_then(|mut f| f.read(&mut head)).ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let line = line.trim();
    let (interpreter, argument) = line.split_once([' ', '\t']).unwrap_or((line, ""));
    let argument = argument.trim();
    let mut words = vec![interpreter.to_owned()];
    if !argument.is_empty() {
        words.push(argument.to_owned());
    }
    (!interpreter.is_empty()).then_some(words)
}
