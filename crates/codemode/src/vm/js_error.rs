//! Turning a JavaScript exception into a receipt's `RunError`.

use rquickjs::Value;

use crate::receipt::{ErrorKind, RunError};
use codemode_program::PositionMap;

/// What the engine knew when the exception surfaced.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Circumstances<'a> {
    /// The exception came out of compiling the program.
    pub compiling: bool,
    /// Why the run was being stopped (deadline, cancel, limit), if it was:
    /// the exception is then the interrupt, and this error replaces it.
    pub stopping: Option<&'a RunError>,
    /// The VM's memory limit, in bytes, for the message of a memory error.
    pub memory_limit: usize,
    /// Where the script's positions come from in the user's program.
    pub positions: &'a PositionMap,
    /// The last results the program got, for what a hint says a value
    /// held.
    pub recent: Option<&'a super::recent::Recent>,
}

/// Classifies `exception` and finds its position in the user's program
/// (`file` is the program's name in stack traces).
///
/// QuickJS throws `null` when it cannot even allocate the "out of memory"
/// error, and an `InternalError` with no message when it can make the
/// error but not its message, so both are reported as kind `memory`; a
/// program that throws either itself is reported the same way.
pub(crate) fn run_error(exception: Value<'_>, file: &str, when: Circumstances<'_>) -> RunError {
    let thrown = match exception.as_object() {
        Some(obj) => Thrown {
            name: obj.get::<_, Option<String>>("name").ok().flatten(),
            message: obj.get::<_, Option<rquickjs::Coerced<String>>>("message").ok().flatten().map(|c| c.0),
            stack: obj.get::<_, Option<String>>("stack").ok().flatten(),
            null: false,
            tool: None,
        },
        None => Thrown {
            name: None,
            message: describe(&exception),
            stack: None,
            null: exception.is_null(),
            tool: None,
        },
    };
    from_parts(thrown, file, when)
}

/// What was thrown, already read out of the VM.
#[derive(Debug, Default)]
pub(crate) struct Thrown {
    pub name: Option<String>,
    pub message: Option<String>,
    pub stack: Option<String>,
    /// The thrown value was `null`.
    pub null: bool,
    /// The tool of a `ToolError` the prelude made.
    pub tool: Option<String>,
}

/// Classifies a thrown value and finds its position in the user's program.
pub(crate) fn from_parts(thrown: Thrown, file: &str, when: Circumstances<'_>) -> RunError {
    let Thrown { name, message, stack, null, tool } = thrown;
    let message = message.unwrap_or_default();
    let kind = match (name.as_deref(), message.as_str()) {
        _ if when.stopping.is_some() => when.stopping.map(|e| e.kind).unwrap_or(ErrorKind::Internal),
        (Some("SyntaxError"), _) if when.compiling => ErrorKind::Syntax,
        (Some("InternalError"), "out of memory" | "") => ErrorKind::Memory,
        _ if null => ErrorKind::Memory,
        (Some("RangeError"), "Maximum call stack size exceeded") => ErrorKind::Stack,
        (Some("InternalError"), m) if m.starts_with("stack overflow") => ErrorKind::Stack,
        _ => ErrorKind::Exception,
    };
    let text = match &name {
        _ if when.stopping.is_some() => when.stopping.map(|e| e.message.clone()).unwrap_or_default(),
        _ if kind == ErrorKind::Memory && null => format!(
            "{}; the program's error was `null`, which QuickJS throws when it cannot allocate even an error \
             object (a program that throws `null` itself reads the same: throw an Error instead)",
            memory_message(when.memory_limit)
        ),
        _ if kind == ErrorKind::Memory => memory_message(when.memory_limit),
        Some(n) if !n.is_empty() && !message.is_empty() => format!("{n}: {message}"),
        Some(n) if !n.is_empty() => n.clone(),
        _ if !message.is_empty() => message.clone(),
        _ => "the program threw a value that is not an error".to_owned(),
    };
    let told = match (&name, &stack) {
        (Some(n), Some(s)) if kind == ErrorKind::Exception => {
            super::hints::hint(n, &message, s, file, when.positions, when.recent)
        }
        _ => None,
    };
    let text = told.unwrap_or_else(|| with_hint(text, kind));
    // A run stopped from outside (deadline, cancel, a limit) stops at
    // QuickJS's interrupt check, which does not record where the frame it
    // stops is: that frame shows the position of its last call, or its
    // start (a loop on line 3 read as line 1). So no position is given,
    // and the stack starts with the frames whose positions are their
    // calls' (empty when the program's own body was running).
    let stack = match (&when.stopping, stack) {
        (Some(_), Some(s)) => Some(s.split_once('\n').map(|(_, rest)| rest.to_owned()).unwrap_or_default()),
        (_, stack) => stack,
    };
    let position = stack.as_deref().filter(|_| when.stopping.is_none()).and_then(|s| position_in(s, file));
    let (line, column) = match position {
        Some((l, c)) => {
            let (l, c) = when.positions.thrown_at(l, c);
            (Some(l), Some(c))
        }
        // A ToolError of a call that ended later was made with no frame
        // of the program on the stack: it is where the program calls the
        // tool, when that is one place.
        None if kind == ErrorKind::Exception && name.as_deref() == Some("ToolError") => {
            match tool.as_deref().and_then(|t| when.positions.only_call_site(t)) {
                Some((l, c)) => (Some(l), Some(c)),
                None => (None, None),
            }
        }
        None => (None, None),
    };
    let stack = stack.map(|s| user_stack(&s, file, when.positions)).filter(|s| !s.is_empty());
    RunError { kind, message: text, line, column, stack }
}

/// What a run that ran out of memory says, for a VM limited to `limit`
/// bytes.
fn memory_message(limit: usize) -> String {
    format!(
        "out of memory: the program reached the VM's memory limit of {limit} bytes ({})",
        codemode_base::limit_settings::setting("memory_bytes")
    )
}

/// The error of a run the host stopped because the VM ran out of memory
/// while making `what` (a built-in made on first use), where the program
/// could otherwise have gone on with it half made.
pub(crate) fn memory_error(what: &str, limit: usize) -> RunError {
    RunError::new(
        ErrorKind::Memory,
        format!("{} (while making {what} on its first use)", memory_message(limit)),
    )
}

/// The stack as the user wrote the program: the engine's wrapper frame
/// (`<eval>`, which calls the program) is dropped, and every position in the
/// program becomes the user's own line and column (the first one, where the
/// error was thrown, as the run error's own position:
/// [`PositionMap::thrown_at`]).
fn user_stack(stack: &str, file: &str, positions: &PositionMap) -> String {
    let needle = format!("{file}:");
    let mut first = true;
    let mut out = Vec::new();
    for frame in stack.lines() {
        if frame.contains("<eval>") {
            continue;
        }
        let fixed = match frame.find(&needle) {
            Some(at) => {
                let start = at + needle.len();
                let rest = &frame[start..];
                let line_digits = rest.chars().take_while(char::is_ascii_digit).count();
                let after_line = &rest[line_digits..];
                let col_digits = after_line
                    .strip_prefix(':')
                    .map_or(0, |r| r.chars().take_while(char::is_ascii_digit).count());
                let line = rest[..line_digits].parse::<u32>().ok();
                let col =
                    (col_digits > 0).then(|| after_line[1..1 + col_digits].parse::<u32>().ok()).flatten();
                match (line, col) {
                    (Some(l), Some(c)) => {
                        let (l, c) = if std::mem::take(&mut first) {
                            positions.thrown_at(l, c)
                        } else {
                            positions.user_position(l, c)
                        };
                        format!("{}{l}:{c}{}", &frame[..start], &after_line[1 + col_digits..])
                    }
                    _ => frame.to_owned(),
                }
            }
            None => frame.to_owned(),
        };
        out.push(fixed);
    }
    out.join("\n").trim_end().to_owned()
}

/// `String(value)` for a thrown non-object, when it is a string or number.
fn describe(value: &Value<'_>) -> Option<String> {
    if let Some(s) = value.as_string() {
        return s.to_string().ok().map(|s| format!("uncaught {s:?}"));
    }
    if let Some(n) = value.as_number() {
        return Some(format!("uncaught {n}"));
    }
    if value.is_null() || value.is_undefined() {
        return Some(format!("uncaught {}", if value.is_null() { "null" } else { "undefined" }));
    }
    None
}

/// The first `file:line:column` of `stack` that is in `file`.
pub(super) fn position_in(stack: &str, file: &str) -> Option<(u32, u32)> {
    let needle = format!("{file}:");
    stack.lines().find_map(|frame| {
        let at = frame.find(&needle)?;
        let rest = &frame[at + needle.len()..];
        let mut parts = rest.split(|c: char| !c.is_ascii_digit());
        let line: u32 = parts.next()?.parse().ok()?;
        let column: u32 = parts.next().and_then(|c| c.parse().ok()).unwrap_or(1);
        Some((line, column))
    })
}

/// `text` with a hint for the errors programs meet when they use what the
/// VM does not have: modules (`import(...)`), decorators, and the globals
/// of Node and browsers ([`missing_global_hint`]).
fn with_hint(text: String, kind: ErrorKind) -> String {
    if text.contains("could not load module") {
        format!("{text}: programs have no module loader (no import, no require); call tools with tools.call")
    } else if kind == ErrorKind::Syntax && text.contains("'@'") {
        format!("{text} (decorators are not supported in programs; call the function directly)")
    } else if let Some(hint) = undefined_name(&text).and_then(missing_global_hint) {
        format!("{text}: {hint}")
    } else {
        text
    }
}

/// The name in QuickJS's `ReferenceError: NAME is not defined` (also with
/// the name quoted, as older QuickJS spells it).
fn undefined_name(text: &str) -> Option<&str> {
    let name = text.strip_prefix("ReferenceError: ")?.strip_suffix(" is not defined")?;
    Some(name.trim_matches('\''))
}

/// What to use instead of a global a program expects from Node or a
/// browser: programs run in a bare VM whose only way out is `tools`, with
/// no timers, no network, no process and no file system of their own.
fn missing_global_hint(name: &str) -> Option<&'static str> {
    Some(match name {
        "require" | "module" | "exports" => {
            "programs have no module loader (no require, no import); everything outside the program \
             is a tool: `await tools.call(name, args)` or `await tools.read({path})`, \
             `tools.write`, `tools.bash`, ...; `tools.search(\"words\")` finds tools"
        }
        "setTimeout" | "setInterval" | "setImmediate" | "clearTimeout" | "clearInterval" => {
            "programs have no timers: await each tool call (`await tools.call(...)`), or start \
             several and await them together with `Promise.all`; there is no sleep, so a delay \
             needs a tool (`tools.bash({command: \"sleep 2\"})`, which needs an approval)"
        }
        "fetch" | "XMLHttpRequest" | "WebSocket" => {
            "programs have no network access of their own: call an MCP server's fetch tool \
             (`await tools.search(\"fetch url\")` finds one among the configured MCP servers), \
             or run `curl` with tools.bash (which needs an approval, and network access in the \
             sandbox: `[sandbox] network = true`)"
        }
        "process" => {
            "programs have no `process` (no env, argv, cwd or exit): end the program with \
             `return value`, read files with tools.read, run commands (`printenv NAME`) with \
             tools.bash"
        }
        "fs" => {
            "programs have no file system module: use tools.read({path}), tools.write({path, \
             content}), tools.edit, tools.file_search({query}) and tools.grep_files({pattern}), \
             paths relative to the workspace"
        }
        "Deno" | "Bun" | "Buffer" | "atob" | "btoa" | "TextEncoder" | "TextDecoder" | "crypto" | "URL"
        | "URLSearchParams" | "performance" | "structuredClone" => {
            "programs run in a bare QuickJS VM, not Node, Deno, Bun or a browser: there is no \
             `Buffer`, `atob`/`btoa`, `TextEncoder`, `crypto`, `URL`, `performance` or \
             `structuredClone`; tools take and return text and JSON (plain strings and objects), \
             and hashing or encoding needs a tool (`tools.bash({command: \"sha256sum f.txt\"})`, \
             which needs an approval)"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::position_in;
    use codemode_program::{Program, normalise};

    #[test]
    fn stacks_show_the_users_positions() {
        let positions = normalise(&Program::new("f();\n\n    g()\n")).unwrap().positions;
        let stack = "    at f (p.js:1:25)\n    at <anonymous> (p.js:3:12)\n    at <eval> (p.js:4:1)\n";
        assert_eq!(
            super::user_stack(stack, "p.js", &positions),
            "    at f (p.js:1:11)\n    at <anonymous> (p.js:3:5)"
        );
    }

    #[test]
    fn missing_node_and_browser_globals_get_a_hint() {
        use crate::receipt::ErrorKind::Exception;
        for (name, says) in [
            ("require", "no module loader"),
            ("setTimeout", "no timers"),
            ("setInterval", "no timers"),
            ("fetch", "fetch tool"),
            ("process", "no `process`"),
            ("fs", "tools.read"),
            ("Buffer", "bare QuickJS VM"),
            ("atob", "bare QuickJS VM"),
            ("TextEncoder", "bare QuickJS VM"),
            ("crypto", "sha256sum"),
            ("Deno", "not Node, Deno"),
        ] {
            for spelled in [name.to_owned(), format!("'{name}'")] {
                let text = super::with_hint(format!("ReferenceError: {spelled} is not defined"), Exception);
                assert!(text.contains(says), "{text}");
            }
        }
        let plain = "ReferenceError: x is not defined";
        assert_eq!(super::with_hint(plain.to_owned(), Exception), plain);
        let no_name = "TypeError: fetch is not a function";
        assert_eq!(super::with_hint(no_name.to_owned(), Exception), no_name);
    }

    #[test]
    fn quickjs_out_of_memory_errors_are_kind_memory_in_each_form() {
        use crate::receipt::ErrorKind;
        let positions = normalise(&Program::new("1")).unwrap().positions;
        let when = super::Circumstances {
            compiling: false,
            stopping: None,
            memory_limit: 1 << 20,
            positions: &positions,
            recent: None,
        };
        let kind_of = |name: Option<&str>, message: Option<&str>, null: bool| {
            let thrown = super::Thrown {
                name: name.map(str::to_owned),
                message: message.map(str::to_owned),
                stack: None,
                null,
                tool: None,
            };
            let e = super::from_parts(thrown, "p.js", when);
            (e.kind, e.message)
        };
        // The error with its message; the error whose message could not be
        // made; no error at all (`null`).
        for (name, message, null) in [
            (Some("InternalError"), Some("out of memory"), false),
            (Some("InternalError"), None, false),
            (None, None, true),
        ] {
            let (kind, text) = kind_of(name, message, null);
            assert_eq!(kind, ErrorKind::Memory, "{name:?} {message:?}");
            assert!(text.contains("memory limit of 1048576 bytes"), "{text}");
            assert_eq!(text.contains("throw an Error instead"), null, "{text}");
        }
        assert_eq!(kind_of(Some("InternalError"), Some("too many arguments"), false).0, ErrorKind::Exception);
    }

    #[test]
    fn positions_come_from_the_first_frame_in_the_program() {
        let stack =
            "    at f (codemode:prelude:10:3)\n    at <anonymous> (hello.js:7:12)\n    at hello.js:2:1";
        assert_eq!(position_in(stack, "hello.js"), Some((7, 12)));
        assert_eq!(position_in("    at hello.js:4", "hello.js"), Some((4, 1)));
        assert_eq!(position_in("    at other.js:4:1", "hello.js"), None);
    }
}
