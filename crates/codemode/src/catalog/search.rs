//! Ranking tools for `tool_search`: BM25 over each tool's name, description
//! and parameters, and a regex mode over the same text.
//!
//! Each tool is one document with three fields: its name (weight
//! [`NAME_WEIGHT`]), its description, and its parameters (every property
//! name and property description in the input schema, at any depth, weight
//! [`PARAMS_WEIGHT`]). Field term frequencies are summed with their weights
//! before BM25's saturation, as in BM25F (Robertson, Zaragoza & Taylor,
//! "Simple BM25 extension to multiple weighted fields", 2004), with the
//! usual `k1 = 1.2`, `b = 0.75` and the non-negative IDF
//! `ln(1 + (N - df + 0.5) / (df + 0.5))`.
//!
//! Words are split on anything that is not a letter or digit (so `_`, `__`
//! and `-` separate words) and on camelCase boundaries, lower-cased, stripped
//! of a few English stop words, and stemmed with the Snowball English
//! stemmer (`files` and `file` are one term). Query words also search their
//! synonyms from a small thesaurus of tool vocabulary ([`SYNONYMS`]) at a
//! lower weight.

use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};
use serde_json::Value;

use super::ToolSpec;

/// How much more a word in the name counts than one in the description.
pub(crate) const NAME_WEIGHT: f64 = 3.0;
/// How much a word in a parameter name or description counts.
pub(crate) const PARAMS_WEIGHT: f64 = 0.5;
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// The largest compiled regex a search may build (bytes); a bigger one is
/// an error, not a slow search.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Words too common to say anything about a tool.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "i", "in", "into", "is", "it", "its",
    "me", "my", "of", "on", "or", "please", "some", "that", "the", "this", "to", "with", "want", "need",
];

/// Words a model uses for the same action or thing in tool vocabularies;
/// a query word in a group also searches the group's other words, at
/// [`SYNONYM_WEIGHT`] of its own weight (query expansion with a small
/// thesaurus: BM25 alone cannot tell that "folder" means "directory").
const SYNONYMS: &[&[&str]] = &[
    &["folder", "directory", "dir"],
    &["store", "save", "remember", "record", "create", "add"],
    &["find", "search", "lookup", "locate", "grep"],
    &["delete", "remove", "erase"],
    &["show", "view", "display", "get", "read"],
    &["history", "log"],
    &["run", "execute", "exec"],
    &["rename", "move"],
    &["change", "modify", "update", "edit", "replace"],
    &["download", "fetch", "url"],
    &["memory", "knowledge", "graph"],
];
/// Weight of a word found through [`SYNONYMS`] relative to the query word.
const SYNONYM_WEIGHT: f64 = 0.4;

/// One searchable tool: its weighted term frequencies and length.
struct Doc {
    terms: HashMap<String, f64>,
    length: f64,
    /// The fields as text, for regex mode: name, description, parameters.
    name: String,
    description: String,
    params: Vec<String>,
}

/// A BM25 index over tools, in catalog order.
pub(crate) struct SearchIndex {
    docs: Vec<Doc>,
    /// Number of documents each term occurs in.
    doc_freq: HashMap<String, usize>,
    avg_length: f64,
    stemmer: Stemmer,
}

/// Why a search could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SearchError {
    /// The regex does not compile.
    #[error(
        "the query is not a valid regular expression (Rust `regex` syntax): {0}; escape special characters with `\\`, or use mode \"bm25\" for words"
    )]
    BadRegex(String),
    /// The query has no words to rank by.
    #[error("the query has no words to search for; give a few words such as \"read a file\"")]
    NoWords,
}

impl SearchIndex {
    /// Indexes `specs`; results refer to tools by their position here.
    pub(crate) fn new<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> Self {
        let stemmer = Stemmer::create(Algorithm::English);
        let mut docs = Vec::new();
        let mut doc_freq: HashMap<String, usize> = HashMap::new();
        for spec in specs {
            let mut params = Vec::new();
            collect_params(&spec.input_schema, &mut params, 0);
            let mut terms: HashMap<String, f64> = HashMap::new();
            let mut length = 0.0;
            let mut add = |text: &str, weight: f64| {
                for term in terms_of(&stemmer, text) {
                    *terms.entry(term).or_default() += weight;
                    length += weight;
                }
            };
            add(&spec.name, NAME_WEIGHT);
            add(&spec.description, 1.0);
            for p in &params {
                add(p, PARAMS_WEIGHT);
            }
            for term in terms.keys() {
                *doc_freq.entry(term.clone()).or_default() += 1;
            }
            docs.push(Doc {
                terms,
                length,
                name: spec.name.clone(),
                description: spec.description.clone(),
                params,
            });
        }
        let avg_length = if docs.is_empty() {
            1.0
        } else {
            (docs.iter().map(|d| d.length).sum::<f64>() / docs.len() as f64).max(1.0)
        };
        SearchIndex { docs, doc_freq, avg_length, stemmer }
    }

    /// The documents matching `query` by BM25, best first, as `(position,
    /// score)`; only positions `eligible` accepts. A query equal to a tool's
    /// name (ignoring case and surrounding space) ranks that tool first; one
    /// equal to the last part of an MCP tool's name (`read_file` for
    /// `mcp__fs__read_file`) ranks it above tools that only share words.
    /// Ties keep catalog order.
    ///
    /// # Errors
    /// [`SearchError::NoWords`] when the query has no searchable word and
    /// names no tool.
    pub(crate) fn bm25(
        &self,
        query: &str,
        eligible: impl Fn(usize) -> bool,
    ) -> Result<Vec<(usize, f64)>, SearchError> {
        let wanted = query.trim();
        let query_terms = self.weighted_terms(wanted);
        let n = self.docs.len() as f64;
        let mut scored = Vec::new();
        for (i, doc) in self.docs.iter().enumerate() {
            if !eligible(i) {
                continue;
            }
            let mut score = 0.0;
            for (term, weight) in &query_terms {
                let Some(&tf) = doc.terms.get(term) else { continue };
                let df = self.doc_freq.get(term).copied().unwrap_or(0) as f64;
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                score +=
                    weight * idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * doc.length / self.avg_length));
            }
            if doc.name.eq_ignore_ascii_case(wanted) {
                score += 1e9;
            } else if doc.name.rsplit("__").next().is_some_and(|short| short.eq_ignore_ascii_case(wanted)) {
                score += 1e6;
            }
            if score > 0.0 {
                scored.push((i, score));
            }
        }
        if query_terms.is_empty() && scored.is_empty() {
            return Err(SearchError::NoWords);
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(scored)
    }

    /// How well the best tool `eligible` accepts covers `query`: the most
    /// of the query's distinct terms (stemmed, stop words dropped, no
    /// synonyms) that one tool's name, description or parameters hold, and
    /// how many distinct terms the query has. `(0, 0)` for a query with no
    /// terms.
    pub(crate) fn best_coverage(&self, query: &str, eligible: impl Fn(usize) -> bool) -> (usize, usize) {
        let mut wanted = terms_of(&self.stemmer, query);
        wanted.sort();
        wanted.dedup();
        let best = (self.docs.iter().enumerate())
            .filter(|(i, _)| eligible(*i))
            .map(|(_, doc)| wanted.iter().filter(|t| doc.terms.contains_key(t.as_str())).count())
            .max()
            .unwrap_or(0);
        (best, wanted.len())
    }

    /// The query's terms with their weights: each query word at 1, and the
    /// other words of its [`SYNONYMS`] groups at [`SYNONYM_WEIGHT`] (never
    /// more than the word's own weight when a term comes both ways).
    fn weighted_terms(&self, query: &str) -> Vec<(String, f64)> {
        let mut weights: HashMap<String, f64> = HashMap::new();
        for word in words(query) {
            if STOP_WORDS.contains(&word.as_str()) {
                continue;
            }
            let stem = self.stemmer.stem(&word).into_owned();
            weights.insert(stem.clone(), 1.0);
            for group in SYNONYMS.iter().filter(|g| g.iter().any(|w| self.stemmer.stem(w) == stem)) {
                for other in group.iter() {
                    let other = self.stemmer.stem(other).into_owned();
                    let w = weights.entry(other).or_insert(0.0);
                    *w = w.max(SYNONYM_WEIGHT);
                }
            }
        }
        let mut terms: Vec<(String, f64)> = weights.into_iter().collect();
        terms.sort_by(|a, b| a.0.cmp(&b.0));
        terms
    }

    /// The documents where `pattern` matches the name (score 3), else the
    /// description (2), else a parameter name or description (1), best
    /// first; ties keep catalog order. Only positions `eligible` accepts.
    ///
    /// # Errors
    /// [`SearchError::BadRegex`] when the pattern does not compile.
    pub(crate) fn regex(
        &self,
        pattern: &str,
        eligible: impl Fn(usize) -> bool,
    ) -> Result<Vec<(usize, f64)>, SearchError> {
        let re = compile(pattern).map_err(|e| SearchError::BadRegex(one_line(&e.to_string())))?;
        let mut scored: Vec<(usize, f64)> = self
            .docs
            .iter()
            .enumerate()
            .filter(|(i, _)| eligible(*i))
            .filter_map(|(i, d)| {
                let score = if re.is_match(&d.name) {
                    3.0
                } else if re.is_match(&d.description) {
                    2.0
                } else if d.params.iter().any(|p| re.is_match(p)) {
                    1.0
                } else {
                    return None;
                };
                Some((i, score))
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(scored)
    }
}

/// `pattern` compiled for a search, within [`REGEX_SIZE_LIMIT`] (the
/// `regex` crate matches in time linear in the text, so a compiled pattern
/// is bounded in time and memory).
///
/// # Errors
/// The pattern does not compile or is over the size limit.
pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern).size_limit(REGEX_SIZE_LIMIT).build()
}

/// The regex query that finds exactly the tool `name` (by its name, which
/// regex mode ranks above every other kind of match).
pub(crate) fn exact_query(name: &str) -> String {
    format!("^{}$", regex::escape(name))
}

/// The search terms of `text`: words split on non-alphanumerics and
/// camelCase, lower-cased, without stop words, stemmed.
fn terms_of(stemmer: &Stemmer, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in words(text) {
        if STOP_WORDS.contains(&word.as_str()) {
            continue;
        }
        out.push(stemmer.stem(&word).into_owned());
    }
    out
}

/// Lower-cased words of `text`: runs of letters and digits, with a new word
/// at each lower-to-upper change (`readFile` is `read file`) and before the
/// last capital of a run of capitals followed by a lower-case letter
/// (`HTTPServer` is `http server`).
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        if c.is_uppercase() && !current.is_empty() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                out.push(std::mem::take(&mut current));
            }
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Property names and descriptions of `schema`, at any depth (at most 8
/// levels, 256 entries), depth-first in document order.
fn collect_params(schema: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > 8 || out.len() >= 256 {
        return;
    }
    let Some(obj) = schema.as_object() else { return };
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            out.push(name.clone());
            if let Some(d) = prop.get("description").and_then(Value::as_str) {
                out.push(d.to_owned());
            }
            collect_params(prop, out, depth + 1);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = obj.get(key) {
            collect_params(sub, out, depth + 1);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(list) = obj.get(key).and_then(Value::as_array) {
            for sub in list {
                collect_params(sub, out, depth + 1);
            }
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(defs) = obj.get(key).and_then(Value::as_object) {
            for sub in defs.values() {
                collect_params(sub, out, depth + 1);
            }
        }
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str, description: &str) -> ToolSpec {
        ToolSpec::new(name, description, json!({"type": "object"}))
    }

    #[test]
    fn words_split_on_separators_and_camel_case() {
        assert_eq!(words("mcp__github__create_issue"), ["mcp", "github", "create", "issue"]);
        assert_eq!(
            words("read-file readFile HTTPServer getV2Data"),
            ["read", "file", "read", "file", "http", "server", "get", "v2", "data"]
        );
        assert_eq!(words("  Ünïcode—words  "), ["ünïcode", "words"]);
    }

    #[test]
    fn terms_drop_stop_words_and_stem() {
        let s = Stemmer::create(Algorithm::English);
        assert_eq!(terms_of(&s, "Read the files in a directory"), ["read", "file", "directori"]);
        assert_eq!(terms_of(&s, "list_directories"), ["list", "directori"]);
    }

    #[test]
    fn bm25_prefers_rarer_terms_and_shorter_documents() {
        let specs = [
            spec("alpha", "common common rare"),
            spec("beta", "common"),
            spec("gamma", "common words and many more words that make this description long rare"),
        ];
        let index = SearchIndex::new(&specs);
        let hits = index.bm25("rare", |_| true).unwrap();
        // `rare` is in alpha and gamma; the shorter document ranks first.
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 2]);
        let hits = index.bm25("common rare", |_| true).unwrap();
        assert_eq!(hits[0].0, 0);
        // Term frequency counts, with saturation.
        assert!(hits.iter().all(|h| h.1 > 0.0));
    }

    #[test]
    fn names_weigh_more_than_descriptions() {
        let specs = [spec("fetch", "gets a page"), spec("other", "can fetch a page")];
        let index = SearchIndex::new(&specs);
        assert_eq!(index.bm25("fetch", |_| true).unwrap()[0].0, 0);
    }

    #[test]
    fn exact_names_rank_first_and_eligibility_filters() {
        let specs = [spec("read_file_lines", "read a file's lines"), spec("read", "x")];
        let index = SearchIndex::new(&specs);
        assert_eq!(index.bm25("read", |_| true).unwrap()[0].0, 1);
        assert_eq!(index.bm25(" READ ", |_| true).unwrap()[0].0, 1);
        assert_eq!(index.bm25("read", |i| i == 0).unwrap().iter().map(|h| h.0).collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn parameters_are_searched() {
        let s = ToolSpec::new(
            "t",
            "does things",
            json!({"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA zone name"}}}),
        );
        let index = SearchIndex::new([&s]);
        assert_eq!(index.bm25("timezone", |_| true).unwrap().len(), 1);
        assert_eq!(index.bm25("iana", |_| true).unwrap().len(), 1);
        assert_eq!(index.regex("^timezone$", |_| true).unwrap(), [(0, 1.0)]);
    }

    #[test]
    fn regex_ranks_name_then_description_then_parameters() {
        let specs = [spec("b", "mentions file"), spec("file_tool", "x"), spec("c", "nothing")];
        let index = SearchIndex::new(&specs);
        assert_eq!(index.regex("file", |_| true).unwrap(), [(1, 3.0), (0, 2.0)]);
        assert_eq!(index.regex(&exact_query("file_tool"), |_| true).unwrap(), [(1, 3.0)]);
    }

    #[test]
    fn bad_regexes_and_empty_queries_are_clear_errors() {
        let index = SearchIndex::new([&spec("a", "b")]);
        let err = index.regex("(unclosed", |_| true).unwrap_err();
        assert!(matches!(err, SearchError::BadRegex(_)));
        assert!(err.to_string().contains("not a valid regular expression"), "{err}");
        assert_eq!(index.bm25("the a of", |_| true).unwrap_err(), SearchError::NoWords);
        assert!(index.bm25("zzz", |_| true).unwrap().is_empty());
    }

    #[test]
    fn exact_queries_escape_the_name() {
        assert_eq!(exact_query("mcp__a-b__c"), "^mcp__a\\-b__c$");
    }
}
