//! Stripping a surrounding markdown fence.
//!
//! Models often send a program inside a fence (```` ```ts ```` ... ```` ``` ````).
//! The fence lines become empty lines, so every line inside keeps the number
//! the user sees (the fence's own line is line 1).

use std::borrow::Cow;

use super::Language;

/// The body inside a surrounding fence, and the language its info string
/// names. A source without a fence comes back borrowed and unchanged.
///
/// Errors: a fence whose info string names a language other than
/// JavaScript or TypeScript (the message names it).
pub(crate) fn strip(source: &str) -> Result<(Cow<'_, str>, Option<Language>), String> {
    // Fast path: most programs have no fence at all.
    if !source.trim_start().starts_with("```") {
        return Ok((Cow::Borrowed(source), None));
    }
    let lines: Vec<&str> = source.split_inclusive('\n').collect();
    let Some(open) = lines.iter().position(|l| !l.trim().is_empty()) else {
        return Ok((Cow::Borrowed(source), None));
    };
    let Some(close) = lines.iter().rposition(|l| !l.trim().is_empty()) else {
        return Ok((Cow::Borrowed(source), None));
    };
    let opening = lines[open].trim();
    let ticks = opening.chars().take_while(|&c| c == '`').count();
    let closing = lines[close].trim();
    // A surrounding fence closes with a line of at least as many backticks
    // and nothing else; anything else is not a fence we strip.
    if close == open || closing.len() < ticks || closing.chars().any(|c| c != '`') {
        return Ok((Cow::Borrowed(source), None));
    }
    let info = opening[ticks..].trim();
    let word = info.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
    let language = match word.as_str() {
        "" => None,
        "js" | "javascript" | "mjs" | "cjs" => Some(Language::JavaScript),
        "ts" | "typescript" | "mts" | "cts" => Some(Language::TypeScript),
        other => {
            return Err(format!(
                "the program is fenced as `{other}`; programs are JavaScript or TypeScript \
                 (fence them as ```js or ```ts, or send the code without a fence)"
            ));
        }
    };
    let mut body = String::with_capacity(source.len());
    for (i, line) in lines.iter().enumerate() {
        if i == open || i >= close {
            // Keep the line break, drop the fence (and anything after the
            // closing fence, which is blank).
            if line.ends_with('\n') {
                body.push('\n');
            }
        } else {
            body.push_str(line);
        }
    }
    Ok((Cow::Owned(body), language))
}

/// The first fenced block of `source` with everything around it blanked
/// (line breaks kept, so lines keep their numbers), and the language its
/// info string names; a fence left open runs to the end. `None` when there
/// is no fence, or the first one names another language.
pub(crate) fn extract(source: &str) -> Option<(String, Option<Language>)> {
    let lines: Vec<&str> = source.split_inclusive('\n').collect();
    let open = lines.iter().position(|l| l.trim_start().starts_with("```"))?;
    let opening = lines[open].trim();
    let ticks = opening.chars().take_while(|&c| c == '`').count();
    let language =
        match opening[ticks..].split_whitespace().next().unwrap_or("").to_ascii_lowercase().as_str() {
            "" => None,
            "js" | "javascript" | "mjs" | "cjs" => Some(Language::JavaScript),
            "ts" | "typescript" | "mts" | "cts" => Some(Language::TypeScript),
            _ => return None,
        };
    let close = lines
        .iter()
        .enumerate()
        .skip(open + 1)
        .find(|(_, l)| {
            let t = l.trim();
            t.len() >= ticks && t.chars().all(|c| c == '`')
        })
        .map_or(lines.len(), |(i, _)| i);
    let mut body = String::with_capacity(source.len());
    for (i, line) in lines.iter().enumerate() {
        if i > open && i < close {
            body.push_str(line);
        } else if line.ends_with('\n') {
            body.push('\n');
        }
    }
    Some((body, language))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_fence_is_borrowed() {
        let (body, lang) = strip("return 1;").unwrap();
        assert!(matches!(body, Cow::Borrowed("return 1;")));
        assert_eq!(lang, None);
    }

    #[test]
    fn every_spelling_is_stripped_and_lines_stay() {
        for (info, lang) in [
            ("", None),
            ("js", Some(Language::JavaScript)),
            ("javascript", Some(Language::JavaScript)),
            ("ts", Some(Language::TypeScript)),
            ("TypeScript", Some(Language::TypeScript)),
        ] {
            let src = format!("```{info}\nconst a = 1;\nreturn a;\n```\n");
            let (body, got) = strip(&src).unwrap();
            assert_eq!(body, "\nconst a = 1;\nreturn a;\n\n", "info {info:?}");
            assert_eq!(got, lang, "info {info:?}");
        }
    }

    #[test]
    fn leading_blank_lines_and_longer_fences() {
        let (body, lang) = strip("\n  ````ts \nlet x = 1\n````").unwrap();
        assert_eq!(body, "\n\nlet x = 1\n");
        assert_eq!(lang, Some(Language::TypeScript));
    }

    #[test]
    fn an_unclosed_fence_is_left_alone() {
        let (body, _) = strip("```js\nreturn 1").unwrap();
        assert_eq!(body, "```js\nreturn 1");
    }

    #[test]
    fn other_languages_are_refused() {
        let e = strip("```python\nprint(1)\n```").unwrap_err();
        assert!(e.contains("`python`"), "{e}");
    }

    #[test]
    fn the_first_fenced_block_is_extracted_from_prose() {
        let text = "Sure! Here it is:\n```ts\nconst a: number = 1;\nreturn a;\n```\nIt returns 1.\n";
        let (body, lang) = extract(text).unwrap();
        assert_eq!(lang, Some(Language::TypeScript));
        assert_eq!(body, "\n\nconst a: number = 1;\nreturn a;\n\n\n");
        // Left open, it runs to the end.
        let (body, lang) = extract("```js\nreturn 1").unwrap();
        assert_eq!((body.as_str(), lang), ("\nreturn 1", Some(Language::JavaScript)));
        assert!(extract("return 1").is_none());
        assert!(extract("text\n```python\nprint(1)\n```").is_none());
    }
}
