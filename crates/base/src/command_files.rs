//! The workspace files a command names: what a hook, a `cmd:` approver or
//! an MCP stdio server runs outside the sandbox, so that codemode can pin
//! them by digest when they are trusted and protect them from tool calls
//! while a run lasts (docs/SECURITY.md, "Protected paths").
//!
//! A command names a file with its program (a path, or a name found on
//! `PATH`), the interpreter on that program's `#!` line, each argument,
//! and each word of a shell string it hands to a shell (`sh -c "python3
//! hooks/guard.py"`). A word counts when the file exists, or when it is a
//! program given as a path or a script by its extension (`guard.py`): such a
//! file that does not exist yet is named too, so that its folder can be
//! protected before a program creates it. Redirection targets (`>log`)
//! are written, not run, and do not count.
//!
//! Some commands' files cannot be known from their words: a shell string
//! that expands a variable or a command (`$X`, `$(...)`, backquotes), a
//! glob, `eval`, a `cd` before the program, or an interpreter given inline
//! code (`python3 -c`, `node -e`). [`CommandFiles::undetermined`] says why.

use std::path::{Path, PathBuf};

/// Shells whose `-c` argument is a shell string, and whose first operand
/// is otherwise a script.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"];
/// Interpreters whose `-c` / `-e` argument is inline code.
const INLINE_CODE: &[&str] =
    &["python", "python2", "python3", "node", "perl", "ruby", "deno", "bun", "php", "lua"];
/// Commands that run the rest of their words as a command.
const WRAPPERS: &[&str] = &["exec", "command", "env", "nohup", "nice", "time", "builtin"];
/// Extensions that make a missing file a script a command names.
const SCRIPT_EXTENSIONS: &[&str] =
    &["py", "sh", "bash", "zsh", "js", "mjs", "cjs", "ts", "mts", "cts", "rb", "pl", "php", "lua", "jar"];
/// How deep shell strings and `#!` lines are followed.
const MAX_DEPTH: usize = 4;

/// What [`command_files`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandFiles {
    /// Absolute paths beneath the workspace, existing or not, in the order
    /// named, without repeats: as named (lexically normalised, links kept)
    /// and, for an existing file reached through a link, its real path
    /// too when that is in the workspace. Regular files or missing paths;
    /// never a folder.
    pub files: Vec<PathBuf>,
    /// Why the files the command runs cannot all be known from its words
    /// (the first reason found), `None` when they can.
    pub undetermined: Option<String>,
}

/// The workspace files `argv` names when run in the folder `cwd`
/// (absolute); `workspace` is canonical. See the module docs.
pub fn command_files(argv: &[String], cwd: &Path, workspace: &Path) -> CommandFiles {
    let mut walk = Walk { workspace, out: CommandFiles::default() };
    walk.argv(argv, cwd, 0);
    walk.out
}

struct Walk<'a> {
    workspace: &'a Path,
    out: CommandFiles,
}

impl Walk<'_> {
    fn undetermined(&mut self, why: String) {
        self.out.undetermined.get_or_insert(why);
    }

    fn argv(&mut self, argv: &[String], cwd: &Path, depth: usize) {
        if depth > MAX_DEPTH {
            return self.undetermined("shell strings nested too deep to follow".to_owned());
        }
        let Some((program, args)) = argv.split_first() else { return };
        let name = program.rsplit('/').next().unwrap_or(program);
        if WRAPPERS.contains(&name) {
            let rest = args.iter().position(|a| !a.starts_with('-') && !is_assignment(a));
            for a in &args[..rest.unwrap_or(args.len())] {
                self.word(a, cwd, false);
            }
            return rest.map_or((), |i| self.argv(&args[i..], cwd, depth + 1));
        }
        match name {
            "eval" => return self.undetermined("`eval` runs a computed command".to_owned()),
            "cd" | "pushd" | "popd" => {
                return self.undetermined(format!("`{name}` changes the folder later words are taken from"));
            }
            "source" | "." => {
                return args.iter().for_each(|a| self.word(a, cwd, true));
            }
            _ => {}
        }
        self.program(program, cwd, depth);
        if SHELLS.contains(&name) {
            return self.shell_args(args, cwd, depth);
        }
        let interpreter = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        if (INLINE_CODE.contains(&name) || INLINE_CODE.contains(&interpreter))
            && args.iter().any(|a| ["-c", "-e", "--eval", "-p", "--print", "-r"].contains(&a.as_str()))
        {
            self.undetermined(format!("`{name}` is given inline code, which may run any file"));
        }
        for arg in args {
            self.word(arg, cwd, false);
        }
    }

    /// A shell's arguments: options, then `-c STRING` or a script, then
    /// the script's own arguments.
    fn shell_args(&mut self, args: &[String], cwd: &Path, depth: usize) {
        let mut string_mode = false;
        let mut rest = args.iter();
        for arg in rest.by_ref() {
            if arg == "--" {
                break;
            }
            if let Some(flags) = arg.strip_prefix('-').filter(|f| !f.is_empty()) {
                string_mode |= flags.contains('c') && !flags.starts_with('-');
                continue;
            }
            if string_mode {
                self.shell_string(arg, cwd, depth + 1);
            } else {
                self.word(arg, cwd, true);
            }
            break;
        }
        for arg in rest {
            self.word(arg, cwd, false);
        }
    }

    /// The words of a shell string, command by command.
    fn shell_string(&mut self, text: &str, cwd: &Path, depth: usize) {
        if text.contains('$') || text.contains('`') {
            return self
                .undetermined("its shell string expands a variable or a command (`$`, `` ` ``)".into());
        }
        if text.contains(['*', '?', '[', '{']) {
            return self.undetermined("its shell string has a glob or a brace expansion".to_owned());
        }
        for segment in text.split(['\n', ';', '&', '|', '(', ')']) {
            let Some(words) = shlex::split(segment) else {
                return self.undetermined("its shell string's quoting could not be read".to_owned());
            };
            let mut argv = Vec::new();
            let mut words = words.into_iter();
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
                    self.word(word.split_once('=').map_or("", |(_, v)| v), cwd, false);
                } else {
                    argv.push(word);
                }
            }
            self.argv(&argv, cwd, depth);
        }
    }

    /// The program: a path, or a name looked up on `PATH`; and the
    /// interpreter of its `#!` line.
    fn program(&mut self, program: &str, cwd: &Path, depth: usize) {
        let path = if program.contains('/') {
            self.word(program, cwd, true);
            Some(lexical(cwd, program))
        } else {
            let found = std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths).map(|dir| cwd.join(dir).join(program)).find(|p| p.is_file())
            });
            if let Some(found) = &found {
                self.word(&found.display().to_string(), cwd, true);
            }
            found
        };
        if let Some(interpreter) = path.filter(|p| p.is_file()).and_then(|p| shebang(&p))
            && depth < MAX_DEPTH
        {
            self.argv(&interpreter, cwd, depth + 1);
        }
    }

    /// One word: the file it names, if it names one (`forced`: it is run
    /// or read as a script, so it counts even when missing).
    fn word(&mut self, word: &str, cwd: &Path, forced: bool) {
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
        let meta = path.symlink_metadata().ok();
        let is_script =
            Path::new(word).extension().is_some_and(|e| SCRIPT_EXTENSIONS.iter().any(|s| e == *s));
        let counts = match &meta {
            Some(_) => !path.is_dir(),
            None => forced || is_script,
        };
        if !counts {
            return;
        }
        self.add(path.clone());
        if meta.is_some()
            && let Ok(real) = std::fs::canonicalize(&path)
        {
            self.add(real);
        }
    }

    fn add(&mut self, path: PathBuf) {
        if path.starts_with(self.workspace) && path != self.workspace && !self.out.files.contains(&path) {
            self.out.files.push(path);
        }
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

/// The interpreter and its arguments on `file`'s `#!` line, if it has one
/// (`/usr/bin/env python3` is `env` and `python3`).
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
    let words: Vec<String> = String::from_utf8_lossy(line).split_whitespace().map(str::to_owned).collect();
    (!words.is_empty()).then_some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(argv: &[&str], ws: &Path) -> CommandFiles {
        let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
        command_files(&argv, ws, ws)
    }

    fn ws() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(ws.join("hooks")).unwrap();
        std::fs::write(ws.join("hooks/guard.py"), "print()\n").unwrap();
        (dir, ws)
    }

    #[test]
    fn arguments_and_the_words_of_a_shell_string_name_files() {
        let (_dir, ws) = ws();
        let guard = ws.join("hooks/guard.py");
        assert_eq!(files(&["python3", "hooks/guard.py"], &ws).files, vec![guard.clone()]);
        let string = files(&["sh", "-c", "python3 hooks/guard.py 2>/dev/null; true"], &ws);
        assert_eq!(string, CommandFiles { files: vec![guard.clone()], undetermined: None });
        assert_eq!(files(&["bash", "-lc", "exec python3 ./hooks/../hooks/guard.py"], &ws).files, vec![guard]);
        // A redirection target is written, not run.
        assert!(files(&["sh", "-c", "cat > hooks/out.py"], &ws).files.is_empty());
        // Words that name nothing: flags, names that are no file.
        assert!(files(&["sh", "-c", "touch hook-ran; cat >/dev/null"], &ws).files.is_empty());
    }

    #[test]
    fn missing_scripts_and_programs_given_as_paths_count() {
        let (_dir, ws) = ws();
        let named = files(&["python3", "hooks/new.py"], &ws).files;
        assert_eq!(named, vec![ws.join("hooks/new.py")]);
        let named = files(&["./bin/check", "--strict"], &ws).files;
        assert_eq!(named, vec![ws.join("bin/check")]);
        let named = files(&["sh", "scripts/missing"], &ws).files;
        assert_eq!(named, vec![ws.join("scripts/missing")]);
    }

    #[test]
    fn an_interpreter_in_the_workspace_and_a_shebang_are_named() {
        let (_dir, ws) = ws();
        std::fs::create_dir_all(ws.join(".venv/bin")).unwrap();
        std::os::unix::fs::symlink("/bin/sh", ws.join(".venv/bin/python")).unwrap();
        let named = files(&[".venv/bin/python", "hooks/guard.py"], &ws).files;
        assert_eq!(named, vec![ws.join(".venv/bin/python"), ws.join("hooks/guard.py")]);
        std::fs::write(ws.join("hooks/run"), format!("#!{}/.venv/bin/python\n", ws.display())).unwrap();
        let named = files(&["hooks/run"], &ws).files;
        assert_eq!(named, vec![ws.join("hooks/run"), ws.join(".venv/bin/python")]);
    }

    #[test]
    fn computed_commands_are_undetermined() {
        let (_dir, ws) = ws();
        for argv in [
            &["sh", "-c", "python3 $SCRIPT"][..],
            &["sh", "-c", "python3 $(cat which)"],
            &["bash", "-c", "eval python3 hooks/guard.py"],
            &["sh", "-c", "cd hooks && python3 guard.py"],
            &["sh", "-c", "python3 hooks/*.py"],
            &["python3", "-c", "import guard"],
            &["sh", "-c", "python3 'unclosed"],
        ] {
            assert!(files(argv, &ws).undetermined.is_some(), "{argv:?}");
        }
        assert!(files(&["python3", "hooks/guard.py"], &ws).undetermined.is_none());
    }

    #[test]
    fn a_link_names_its_target_in_the_workspace_too() {
        let (_dir, ws) = ws();
        std::os::unix::fs::symlink("hooks", ws.join("linked")).unwrap();
        let named = files(&["python3", "linked/guard.py"], &ws).files;
        assert_eq!(named, vec![ws.join("linked/guard.py"), ws.join("hooks/guard.py")]);
        // Outside the workspace: nothing.
        assert!(files(&["/bin/sh", "/etc/hostname"], &ws).files.is_empty());
    }
}
