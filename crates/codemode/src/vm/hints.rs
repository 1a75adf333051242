//! What to add to QuickJS's terse messages so that an uncaught error names
//! its fix: the expression that failed (read from the program's text at
//! the error's position, `codemode_program::Fault`) and what it held (a
//! tool call not awaited, a result used as the value it holds, a content
//! of another type than the program expected, from the last results the
//! program got: [`super::recent`]).
//!
//! A hint is given only when it is sure: the error was thrown by the
//! program's own code at that position (not inside a built-in it called,
//! such as `[].map(5)`), the text says which expression it was, and what
//! it says of the value is what the text or the kept result shows.

use codemode_program::{Fault, Origin, PositionMap, Site, ToolCall};

use super::recent::Recent;

/// The keys of every result (docs/RECEIPTS.md).
const RESULT_KEYS: &str = "an object with keys `content`, `metadata`, `truncated`";

/// The message of an uncaught error `name: message` thrown with `stack`
/// in the program `file`, with what it was about and what it held, or
/// `None` when there is nothing sure to add.
pub(super) fn hint(
    name: &str,
    message: &str,
    stack: &str,
    file: &str,
    positions: &PositionMap,
    recent: Option<&Recent>,
) -> Option<String> {
    let needle = format!("{file}:");
    let mut frames = stack.lines().map(str::trim).filter(|l| !l.is_empty());
    let fault = match (name, message) {
        ("TypeError", "not a function") => Fault::NotAFunction,
        ("TypeError", "value is not iterable") => Fault::NotIterable,
        ("TypeError", m) => Fault::PropertyOfNothing { property: unreadable_property(m)?.0.to_owned() },
        // JSON.parse's own frames come first: `<input>`, then `parse`.
        ("SyntaxError", _) => {
            let before = frames.by_ref().take_while(|f| !f.contains(&needle)).last()?;
            (before == "at parse (native)").then_some(Fault::JsonParse)?
        }
        _ => return None,
    };
    if fault != Fault::JsonParse && !frames.next()?.contains(&needle) {
        // Thrown inside something the program called.
        return None;
    }
    let (line, column) = super::js_error::position_in(stack, file)?;
    let (line, column) = positions.user_position(line, column);
    let site = positions.fault_site(&fault, line, column)?;
    let words = Words { site: &site, recent };
    let told = match &fault {
        Fault::NotAFunction => words.not_a_function(),
        Fault::NotIterable => words.not_iterable(),
        Fault::PropertyOfNothing { .. } => words.of_nothing(unreadable_property(message)?.1),
        Fault::JsonParse => format!("{message}; {}", words.json_parse()?),
        _ => return None,
    };
    Some(format!("{name}: {told}"))
}

/// The property and `undefined` or `null` of QuickJS's `cannot read
/// property 'NAME' of undefined`.
fn unreadable_property(message: &str) -> Option<(&str, &str)> {
    let rest = message.strip_prefix("cannot read property '")?;
    let (property, of) = rest.rsplit_once("' of ")?;
    matches!(of, "undefined" | "null").then_some((property, of))
}

/// Words for one site.
struct Words<'a> {
    site: &'a Site,
    recent: Option<&'a Recent>,
}

impl Words<'_> {
    /// The object of a member access (or the expression itself), as
    /// [`Site::origin`] describes.
    fn subject(&self) -> &str {
        self.site.member.as_ref().map_or(&self.site.expression, |(object, _)| object)
    }

    fn not_a_function(&self) -> String {
        let head = format!("`{}` is not a function", self.site.expression);
        match self.held() {
            Some(held) => format!("{head}; {held}"),
            None => head,
        }
    }

    fn not_iterable(&self) -> String {
        let expression = &self.site.expression;
        let head = format!("`{expression}` is not iterable");
        match &self.site.origin {
            Some(Origin::Result(call)) => format!(
                "{head}; it is the result of {}, {RESULT_KEYS}, not the array it holds: iterate `{expression}.content`",
                tool_ref(call)
            ),
            _ => match self.held() {
                Some(held) => format!("{head}; {held}"),
                None => head,
            },
        }
    }

    fn of_nothing(&self, nothing: &str) -> String {
        let head = format!("`{}` is {nothing}", self.site.expression);
        let Some((object, key)) = &self.site.member else { return head };
        match &self.site.origin {
            Some(Origin::Result(call)) if !matches!(key.as_str(), "content" | "metadata" | "truncated") => {
                format!(
                    "{head}; `{object}` is the result of {}, {RESULT_KEYS}: what the tool returned is \
                     `{object}.content`",
                    tool_ref(call)
                )
            }
            _ => match self.held() {
                Some(held) => format!("{head}; {held}"),
                None => head,
            },
        }
    }

    fn json_parse(&self) -> Option<String> {
        let expression = &self.site.expression;
        let Some(Origin::Content(call, path)) = &self.site.origin else { return None };
        let read_lines = call.tool.as_deref() == Some("read")
            && path.is_empty()
            && call.arguments.as_ref().is_some_and(|args| {
                args.iter().all(|(key, value)| key != "format" || value.as_deref() == Some("lines"))
            });
        if read_lines {
            return Some(format!(
                "JSON.parse of `{expression}`: tools.read returns numbered lines (`     1\\t...`) unless \
                 called with `format: \"text\"`, which returns the file's text as it is: \
                 `tools.read({{path, format: \"text\"}})`"
            ));
        }
        let described = self.described(call, path)?;
        (described.0 != "a string").then(|| {
            format!(
                "JSON.parse of `{expression}`: it is {} {}, already a value: use it without JSON.parse",
                described.0, described.1
            )
        })
    }

    /// What the subject is known to hold, in words.
    fn held(&self) -> Option<String> {
        let subject = self.subject();
        Some(match self.site.origin.as_ref()? {
            Origin::Promise(call) if call.text == subject => {
                format!("`{subject}` is a promise, not the call's result: write `(await {subject})`")
            }
            Origin::Promise(call) => format!(
                "`{subject}` is a promise, not the call's result: `{}` was not awaited; `await` it",
                call.text
            ),
            Origin::Result(call) => format!(
                "`{subject}` is the result of {}, {RESULT_KEYS}: what the tool returned is `{subject}.content`",
                tool_ref(call)
            ),
            Origin::Content(call, path) => match self.described(call, path) {
                Some((what, from)) => format!("`{subject}` is {what} {from}"),
                None => format!("`{subject}` is in the content {} returned", tool_ref(call)),
            },
            _ => return None,
        })
    }

    /// What the kept result of `call` holds at `path`, and which result
    /// that is, in words.
    fn described(&self, call: &ToolCall, path: &[String]) -> Option<(String, String)> {
        let tool = call.tool.as_deref()?;
        let d = self.recent?.describe(tool, path)?;
        let from = if d.calls == 1 {
            format!("(in the result of {})", tool_ref(call))
        } else {
            format!("(in the last result of {}, call {})", tool_ref(call), d.seq)
        };
        Some((d.what, from))
    }
}

/// How the program names `call`'s tool: `tools.NAME`, or
/// `tools.call("NAME")` for a name that is not an identifier.
fn tool_ref(call: &ToolCall) -> String {
    match call.tool.as_deref() {
        Some(t) if t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') => {
            format!("`tools.{t}`")
        }
        Some(t) => format!("`tools.call({t:?})`"),
        None => format!("`{}`", call.text),
    }
}
