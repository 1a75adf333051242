//! Text helpers for the declarations: identifiers, quoted names, type
//! names, JSDoc comments.

use serde_json::Value;

/// Whether `s` can be written bare as a property or method name: an ASCII
/// JavaScript identifier (`[A-Za-z_$][A-Za-z0-9_$]*`). Reserved words are
/// fine as property names (ECMAScript `IdentifierName`), so they are not
/// excluded here.
pub(super) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// `name` as a property key: bare when it is an identifier, else a quoted
/// string literal.
pub(super) fn property_key(name: &str) -> String {
    if is_identifier(name) { name.to_owned() } else { string_literal(name) }
}

/// `s` as a TypeScript string literal (JSON escaping, which TypeScript
/// accepts).
pub(super) fn string_literal(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A PascalCase type name made of the ASCII letters and digits of `raw`:
/// `get_current-time` -> `GetCurrentTime`, `TimeResult` stays. Never empty,
/// never starts with a digit, never one of the global names the
/// declarations use unqualified inside a namespace.
pub(super) fn pascal_name(raw: &str) -> String {
    let mut out = String::new();
    for part in raw.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if out.is_empty() {
        out.push_str("Type");
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'T');
    }
    if matches!(out.as_str(), "Record" | "Array" | "Promise" | "Object" | "String" | "Number" | "Boolean") {
        out.push('_');
    }
    out
}

/// `raw` with every character outside `[A-Za-z0-9_$]` replaced by `_`.
pub(super) fn sanitize(raw: &str) -> String {
    raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '$' { c } else { '_' }).collect()
}

/// Text that is safe inside a `/* */` or `/** */` comment: `*/` cannot end
/// it early.
pub(super) fn comment_safe(s: &str) -> String {
    s.replace("*/", "*\\/")
}

/// A JSDoc comment for `lines` (a description, then tags such as
/// `@minimum 1`), indented by `pad`, ending in a newline; empty when there
/// is nothing to say. One line when the text is one line, else one ` * `
/// line each.
pub(super) fn jsdoc(text: &str, tags: &[String], pad: &str) -> String {
    let text = comment_safe(text.trim().replace("\r\n", "\n").as_str());
    let tags: Vec<String> = tags.iter().map(|t| comment_safe(t)).collect();
    if text.is_empty() && tags.is_empty() {
        return String::new();
    }
    let mut one = text.clone();
    for tag in &tags {
        if !one.is_empty() {
            one.push(' ');
        }
        one.push_str(tag);
    }
    if !one.contains('\n') {
        return format!("{pad}/** {one} */\n");
    }
    let mut out = format!("{pad}/**\n");
    for line in text.lines().chain(tags.iter().map(String::as_str)) {
        let line = line.trim_end();
        if line.is_empty() {
            out.push_str(pad);
            out.push_str(" *\n");
        } else {
            out.push_str(&format!("{pad} * {line}\n"));
        }
    }
    out.push_str(&format!("{pad} */\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_keys() {
        assert!(is_identifier("path") && is_identifier("_a$1") && is_identifier("default"));
        assert!(!is_identifier("") && !is_identifier("1a") && !is_identifier("a-b") && !is_identifier("é"));
        assert_eq!(property_key("a-b"), "\"a-b\"");
        assert_eq!(property_key("say \"hi\"\n"), r#""say \"hi\"\n""#);
    }

    #[test]
    fn pascal_names() {
        assert_eq!(pascal_name("get_current-time"), "GetCurrentTime");
        assert_eq!(pascal_name("TimeResult"), "TimeResult");
        assert_eq!(pascal_name("1st"), "T1st");
        assert_eq!(pascal_name("--"), "Type");
        assert_eq!(pascal_name("record"), "Record_");
    }

    #[test]
    fn jsdoc_escapes_and_wraps() {
        assert_eq!(jsdoc("a */ b", &[], "  "), "  /** a *\\/ b */\n");
        assert_eq!(jsdoc("", &[], ""), "");
        assert_eq!(jsdoc("x\ny", &["@minimum 1".into()], ""), "/**\n * x\n * y\n * @minimum 1\n */\n");
    }
}
