//! Wrappers (programs that run a command given in their words) and
//! interpreters (programs that run a script given as their first operand),
//! with the options of each that take a value.

use std::path::Path;

use super::{Walk, is_assignment};

/// How a program's options are read.
pub(super) struct Options {
    /// Short options that take a value: the rest of the word, or the next.
    short: &'static str,
    /// Long options that take a value: after `=`, or the next word.
    long: &'static [&'static str],
}

/// A program that runs the command given in its words.
pub(super) struct Wrapper {
    name: &'static str,
    options: Options,
    /// Operands before the command (`timeout`'s duration, `flock`'s lock
    /// file, `chrt`'s priority, `taskset`'s mask).
    operands: usize,
    /// Whether `NAME=VALUE` words before the command set its environment.
    assignments: bool,
    /// A shell builtin, not a program looked up on `PATH`.
    pub builtin: bool,
    /// Options that make the command's files unknowable, and why.
    unknowable: &'static [(&'static str, &'static str)],
}

const fn wrap(name: &'static str, short: &'static str, long: &'static [&'static str]) -> Wrapper {
    let options = Options { short, long };
    Wrapper { name, options, operands: 0, assignments: false, builtin: false, unknowable: &[] }
}

const CHDIR: &str = "changes the folder the command runs in";
const CHROOT: &str = "changes the root the command runs in";

const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        assignments: true,
        unknowable: &[("-C", CHDIR), ("--chdir", CHDIR)],
        ..wrap("env", "uCS", &["--unset", "--chdir", "--split-string"])
    },
    Wrapper { builtin: true, ..wrap("exec", "a", &[]) },
    Wrapper { builtin: true, ..wrap("command", "", &[]) },
    Wrapper { builtin: true, ..wrap("builtin", "", &[]) },
    wrap("time", "fo", &["--format", "--output"]),
    wrap("nohup", "", &[]),
    wrap("nice", "n", &["--adjustment"]),
    wrap("setsid", "", &[]),
    wrap("stdbuf", "ioe", &["--input", "--output", "--error"]),
    Wrapper { operands: 1, ..wrap("timeout", "sk", &["--signal", "--kill-after"]) },
    Wrapper { operands: 1, ..wrap("flock", "wE", &["--timeout", "--wait", "--conflict-exit-code"]) },
    wrap("ionice", "cnpPu", &["--class", "--classdata", "--pid", "--pgid", "--uid"]),
    Wrapper {
        operands: 1,
        ..wrap("chrt", "TPD", &["--sched-runtime", "--sched-period", "--sched-deadline"])
    },
    Wrapper { operands: 1, ..wrap("taskset", "", &[]) },
    Wrapper {
        unknowable: &[("-D", CHDIR), ("--chdir", CHDIR), ("-R", CHROOT), ("--chroot", CHROOT)],
        ..wrap(
            "sudo",
            "CDgprtTUuR",
            &[
                "--close-from",
                "--chdir",
                "--group",
                "--prompt",
                "--role",
                "--type",
                "--command-timeout",
                "--other-user",
                "--user",
                "--chroot",
                "--host",
            ],
        )
    },
    wrap("doas", "uC", &[]),
    wrap("busybox", "", &[]),
    wrap("xargs", "", &[]),
];

/// The wrapper called `name`, if it is one.
pub(super) fn wrapper(name: &str) -> Option<&'static Wrapper> {
    WRAPPERS.iter().find(|w| w.name == name)
}

/// A program that runs the script given as its first operand.
pub(super) struct Interpreter {
    names: &'static [&'static str],
    options: Options,
    /// Options that give inline code.
    inline: &'static [&'static str],
    /// Options that run a module found by name.
    module: &'static [&'static str],
    /// Options whose value is the script.
    script: &'static [&'static str],
    /// Options that change the folder the script is taken from.
    chdir: &'static [&'static str],
    /// Words before the script that name a subcommand (`deno run`).
    subcommands: &'static [&'static str],
}

const fn interp(names: &'static [&'static str], short: &'static str) -> Interpreter {
    let options = Options { short, long: &[] };
    Interpreter { names, options, inline: &[], module: &[], script: &[], chdir: &[], subcommands: &[] }
}

const INTERPRETERS: &[Interpreter] = &[
    Interpreter { inline: &["-c"], module: &["-m"], ..interp(&["python", "pypy"], "cmWXQ") },
    Interpreter {
        options: Options {
            short: "erpC",
            long: &[
                "--eval",
                "--print",
                "--require",
                "--import",
                "--loader",
                "--experimental-loader",
                "--conditions",
                "--input-type",
                "--title",
            ],
        },
        inline: &["-e", "--eval", "-p", "--print"],
        ..interp(&["node", "nodejs"], "")
    },
    Interpreter {
        options: Options {
            short: "erpP",
            long: &["--eval", "--print", "--require", "--project", "--tsconfig"],
        },
        inline: &["-e", "--eval", "-p", "--print"],
        ..interp(&["tsx", "ts-node"], "")
    },
    Interpreter { inline: &["-e", "-E"], ..interp(&["perl"], "eEIM") },
    Interpreter { inline: &["-e"], ..interp(&["ruby"], "eIrC") },
    Interpreter { inline: &["-e"], module: &["-l"], ..interp(&["lua", "luajit"], "el") },
    Interpreter { inline: &["-r"], script: &["-f"], ..interp(&["php"], "rfcdzt") },
    Interpreter {
        options: Options {
            short: "cL",
            long: &["--config", "--log-level", "--import-map", "--cert", "--location", "--seed"],
        },
        subcommands: &["run", "serve"],
        ..interp(&["deno"], "")
    },
    Interpreter {
        options: Options { short: "erp", long: &["--eval", "--print", "--preload", "--cwd", "--config"] },
        inline: &["-e", "--eval", "-p", "--print"],
        chdir: &["--cwd"],
        subcommands: &["run"],
        ..interp(&["bun"], "")
    },
];

/// The interpreter called `name` (`python3.12` is `python`), if it is one.
pub(super) fn interpreter(name: &str) -> Option<&'static Interpreter> {
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS.iter().find(|i| i.names.contains(&name) || i.names.contains(&base))
}

/// Whether `args` hold `-c` (or flags ending in `c`) followed by what
/// looks like a shell string: blanks or shell operators.
pub(super) fn has_shell_string(args: &[String]) -> bool {
    args.windows(2).any(|w| {
        let flag = w[0].strip_prefix('-').is_some_and(|f| {
            !f.starts_with('-') && f.ends_with('c') && f.chars().all(|c| c.is_ascii_alphabetic())
        }) || w[0] == "--command";
        flag && w[1].contains([' ', '\t', '\n', ';', '|', '&', '$', '`', '<', '>'])
    })
}

/// A program's words read: its options (as `-x` or `--long`, with their
/// value and the index of the word after them), then its operands.
struct Read<'a> {
    options: Vec<(String, Option<&'a str>, usize)>,
    operands: &'a [String],
}

/// Reads options from the start of `args` until `--` or the first operand.
fn read<'a>(options: &Options, args: &'a [String]) -> Read<'a> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        if arg == "--" {
            break;
        }
        if arg == "-" {
            out.push((arg.clone(), None, i));
            continue;
        }
        if let Some(long) = arg.strip_prefix("--").filter(|l| !l.is_empty()) {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (format!("--{name}"), Some(value)),
                None if options.long.contains(&arg.as_str()) => {
                    i += 1;
                    (arg.clone(), args.get(i - 1).map(String::as_str))
                }
                None => (arg.clone(), None),
            };
            out.push((name, value, i));
            continue;
        }
        let Some(flags) = arg.strip_prefix('-').filter(|f| !f.is_empty()) else {
            i -= 1;
            break;
        };
        for (at, flag) in flags.char_indices() {
            if !options.short.contains(flag) {
                out.push((format!("-{flag}"), None, i));
                continue;
            }
            let attached = &flags[at + flag.len_utf8()..];
            let value = if attached.is_empty() {
                i += 1;
                args.get(i - 1).map(String::as_str)
            } else {
                Some(attached)
            };
            out.push((format!("-{flag}"), value, i));
            break;
        }
    }
    Read { options: out, operands: args.get(i..).unwrap_or_default() }
}

impl Walk<'_> {
    /// A wrapper's words: its options and operands, then the command it
    /// runs (`env -S STRING` split as a shell would; `flock FILE -c
    /// STRING` a shell string).
    pub(super) fn wrapped(&mut self, wrapper: &Wrapper, args: &[String], cwd: &Path, depth: usize) {
        if wrapper.name == "xargs" {
            return self.undetermined("`xargs` takes its command's words from its input".to_owned());
        }
        let read = read(&wrapper.options, args);
        for (option, value, next) in &read.options {
            if let Some((_, why)) = wrapper.unknowable.iter().find(|(o, _)| o == option) {
                return self.undetermined(format!("`{} {option}` {why}", wrapper.name));
            }
            if wrapper.name == "env" && (option == "-S" || option == "--split-string") {
                let Some(words) = value.filter(|v| !v.contains('$')).and_then(shlex::split) else {
                    return self.undetermined("`env -S` is given a string codemode cannot split".to_owned());
                };
                let argv: Vec<String> = std::iter::once("env".to_owned())
                    .chain(words)
                    .chain(args[*next..].iter().cloned())
                    .collect();
                return self.argv(&argv, cwd, depth + 1);
            }
        }
        let mut command = read.operands;
        let mut path = None;
        while wrapper.assignments
            && let Some((word, rest)) = command.split_first()
            && is_assignment(word)
        {
            let (name, value) = word.split_once('=').unwrap_or_default();
            if name == "PATH" {
                path = Some(value);
            }
            self.word(value, cwd, false);
            command = rest;
        }
        command = command.get(wrapper.operands..).unwrap_or_default();
        if wrapper.name == "flock"
            && let [flag, string, ..] = command
            && (flag == "-c" || flag == "--command")
        {
            return self.shell_string(string, cwd, depth + 1);
        }
        self.argv_with_path(command, cwd, depth + 1, path);
    }

    /// An interpreter's words: options (inline code and modules leave the
    /// files unknown), then its script, which counts whatever its name and
    /// whether or not it exists, then the script's arguments.
    pub(super) fn interpreted(&mut self, interpreter: &Interpreter, name: &str, args: &[String], cwd: &Path) {
        let mut args = args;
        loop {
            let read = read(&interpreter.options, args);
            for (option, value, _) in &read.options {
                if interpreter.inline.contains(&option.as_str()) {
                    self.undetermined(format!(
                        "`{name} {option}` is given inline code, which may run any file"
                    ));
                } else if interpreter.module.contains(&option.as_str()) {
                    self.undetermined(format!(
                        "`{name} {option}` runs a module found by name, whose files cannot be known"
                    ));
                } else if interpreter.chdir.contains(&option.as_str()) {
                    self.undetermined(format!("`{name} {option}` {CHDIR}"));
                } else if let Some(value) = value {
                    self.word(value, cwd, interpreter.script.contains(&option.as_str()));
                }
            }
            args = read.operands;
            match args.split_first() {
                Some((sub, rest)) if interpreter.subcommands.contains(&sub.as_str()) => args = rest,
                Some((sub, _)) if sub == "eval" => {
                    return self
                        .undetermined(format!("`{name} eval` is given inline code, which may run any file"));
                }
                _ => break,
            }
        }
        if let Some((script, rest)) = args.split_first() {
            if script != "-" {
                self.word(script, cwd, true);
            }
            for arg in rest {
                self.word(arg, cwd, false);
            }
        }
    }
}
