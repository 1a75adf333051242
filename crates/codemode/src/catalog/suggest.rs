//! Nearest tool names, for "unknown tool" refusals.

/// The longest name [`nearest`] looks for: twice the longest tool name a
/// catalog accepts (128 bytes).
const MAX_WANTED: usize = 256;

/// Up to `max` names from `names` closest to `wanted`, best first: names
/// equal ignoring case, then names that contain `wanted` (or are contained in
/// it), then names within a small edit distance.
///
/// A `wanted` longer than [`MAX_WANTED`] bytes gets no suggestion: no tool
/// name is that long, and comparing it would cost time in proportion to
/// its length for every tool.
pub(crate) fn nearest<'a>(wanted: &str, names: impl Iterator<Item = &'a str>, max: usize) -> Vec<&'a str> {
    if wanted.len() > MAX_WANTED {
        return Vec::new();
    }
    let lower = wanted.to_ascii_lowercase();
    let mut scored: Vec<(u32, usize, &str)> = names
        .filter_map(|name| {
            let candidate = name.to_ascii_lowercase();
            let distance = strsim::levenshtein(&lower, &candidate);
            let score = if candidate == lower {
                0
            } else if !lower.is_empty() && (candidate.contains(&lower) || lower.contains(&candidate)) {
                1
            } else if distance <= (lower.len().max(candidate.len()) / 3).max(2) {
                2
            } else {
                return None;
            };
            Some((score, distance, name))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(max).map(|(_, _, name)| name).collect()
}

#[cfg(test)]
mod tests {
    use super::nearest;

    const NAMES: [&str; 4] = ["read", "write", "file_search", "grep_files"];

    #[test]
    fn typos_find_the_intended_tool() {
        assert_eq!(nearest("raed", NAMES.into_iter(), 3), vec!["read"]);
        assert_eq!(nearest("READ", NAMES.into_iter(), 3), vec!["read"]);
        assert_eq!(nearest("search", NAMES.into_iter(), 3), vec!["file_search"]);
    }

    #[test]
    fn names_longer_than_any_tool_suggest_nothing() {
        let long = format!("read{}", "x".repeat(300));
        assert!(nearest(&long, NAMES.into_iter(), 3).is_empty());
    }

    #[test]
    fn unrelated_names_suggest_nothing() {
        assert!(nearest("launch_rockets", NAMES.into_iter(), 3).is_empty());
    }
}
