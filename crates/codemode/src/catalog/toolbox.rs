//! The toolbox: the deferred tools a direct `tool_search` activated into
//! the model-facing surface (DESIGN.md §6).
//!
//! It holds at most [`Toolbox::MAX_TOOLS`] tools and
//! [`Toolbox::MAX_SCHEMA_BYTES`] of input schemas (canonical JSON). To make
//! room it evicts tools that were never called first (the one activated
//! earliest first), then the least recently called; it never evicts a tool
//! called in the current turn or the one before, nor one activated by the
//! same search. What it cannot fit is reported as unavailable. Every
//! evicted or unavailable tool comes with the exact regex query that
//! activates it again.
//!
//! A turn is one request from the model: a run or a direct call (see
//! [`Toolbox::begin_turn`]).

use serde::Serialize;

/// One tool in the toolbox.
#[derive(Debug, Clone)]
struct Slot {
    name: String,
    /// Size of its input schema (canonical JSON), bytes.
    bytes: usize,
    /// When it was (last) activated: the toolbox's activation counter.
    activated: u64,
    /// The last turn it was called in.
    last_called: Option<u64>,
}

/// A tool to activate: its name and input-schema size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub name: String,
    pub bytes: usize,
}

/// A tool that left or could not enter the toolbox, with the query that
/// brings it back: `tool_search {query, mode: "regex", limit: 1}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolReference {
    /// The tool's name; it stays callable by this exact name from programs.
    pub name: String,
    /// The `tool_search` arguments that activate it again.
    pub query: serde_json::Value,
    /// Why it is not in the toolbox (only for unavailable tools).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ToolReference {
    fn new(name: &str, reason: Option<String>) -> Self {
        ToolReference {
            name: name.to_owned(),
            query: serde_json::json!({
                "query": super::search::exact_query(name),
                "mode": "regex",
                "limit": 1,
            }),
            reason,
        }
    }
}

/// What one activation changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Activation {
    /// Tools now in the toolbox because of this search (including ones
    /// that were already there), in search order.
    pub activated: Vec<String>,
    /// Tools evicted to make room.
    pub evicted_tool_references: Vec<ToolReference>,
    /// Matches that could not be activated.
    pub unavailable_tool_references: Vec<ToolReference>,
}

/// The bounded set of activated deferred tools.
#[derive(Debug, Default)]
pub(crate) struct Toolbox {
    slots: Vec<Slot>,
    turn: u64,
    activations: u64,
}

impl Toolbox {
    /// Most tools the toolbox holds.
    pub(crate) const MAX_TOOLS: usize = 8;
    /// Most bytes of input schemas (canonical JSON) it holds.
    pub(crate) const MAX_SCHEMA_BYTES: usize = 16 * 1024;

    /// Starts a new turn and returns its number (1, 2, ...).
    pub(crate) fn begin_turn(&mut self) -> u64 {
        self.turn += 1;
        self.turn
    }

    /// Records that `name` was called in `turn` (no-op when it is not in
    /// the toolbox).
    pub(crate) fn note_called(&mut self, name: &str, turn: u64) {
        if let Some(s) = self.slots.iter_mut().find(|s| s.name == name) {
            s.last_called = Some(s.last_called.map_or(turn, |t| t.max(turn)));
        }
    }

    /// The names in the toolbox, in activation order.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut slots: Vec<&Slot> = self.slots.iter().collect();
        slots.sort_by_key(|s| s.activated);
        slots.into_iter().map(|s| s.name.clone()).collect()
    }

    /// Whether `name` is in the toolbox.
    #[cfg(test)]
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.slots.iter().any(|s| s.name == name)
    }

    /// Activates `candidates` (search order), evicting as the module says.
    pub(crate) fn activate(&mut self, candidates: &[Candidate]) -> Activation {
        let mut out = Activation::default();
        let first_of_this_search = self.activations + 1;
        for c in candidates {
            self.activations += 1;
            if let Some(s) = self.slots.iter_mut().find(|s| s.name == c.name) {
                s.activated = self.activations;
                s.bytes = c.bytes;
                out.activated.push(c.name.clone());
                continue;
            }
            if c.bytes > Self::MAX_SCHEMA_BYTES {
                out.unavailable_tool_references.push(ToolReference::new(
                    &c.name,
                    Some(format!(
                        "its input schema ({} bytes) is larger than the toolbox ({} bytes); call it by name from a program",
                        c.bytes,
                        Self::MAX_SCHEMA_BYTES
                    )),
                ));
                continue;
            }
            let mut evicted = Vec::new();
            let fits = loop {
                let used: usize = self.slots.iter().map(|s| s.bytes).sum();
                if self.slots.len() < Self::MAX_TOOLS && used + c.bytes <= Self::MAX_SCHEMA_BYTES {
                    break true;
                }
                match self.victim(first_of_this_search) {
                    Some(i) => evicted.push(self.slots.remove(i)),
                    None => break false,
                }
            };
            if fits {
                self.slots.push(Slot {
                    name: c.name.clone(),
                    bytes: c.bytes,
                    activated: self.activations,
                    last_called: None,
                });
                out.activated.push(c.name.clone());
                out.evicted_tool_references.extend(evicted.iter().map(|s| ToolReference::new(&s.name, None)));
            } else {
                // Nothing could be freed for it: put back what was taken.
                self.slots.extend(evicted);
                out.unavailable_tool_references.push(ToolReference::new(
                    &c.name,
                    Some(
                        "the toolbox is full of tools called in this turn or the last, or activated by this search; call it by name from a program"
                            .into(),
                    ),
                ));
            }
        }
        out
    }

    /// The slot to evict next: never-called first (earliest activated),
    /// then least recently called; never one called this turn or the last,
    /// nor one activated at or after `protected_from`.
    fn victim(&self, protected_from: u64) -> Option<usize> {
        let recent = self.turn.saturating_sub(1);
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.activated < protected_from)
            .filter(|(_, s)| s.last_called.is_none_or(|t| t < recent))
            .min_by_key(|(_, s)| (s.last_called.is_some(), s.last_called.unwrap_or(0), s.activated))
            .map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, bytes: usize) -> Candidate {
        Candidate { name: name.into(), bytes }
    }

    fn names(refs: &[ToolReference]) -> Vec<&str> {
        refs.iter().map(|r| r.name.as_str()).collect()
    }

    fn fill(tb: &mut Toolbox) {
        tb.begin_turn();
        let all: Vec<Candidate> = (0..8).map(|i| c(&format!("t{i}"), 100)).collect();
        let a = tb.activate(&all);
        assert_eq!(a.activated.len(), 8);
        assert!(a.evicted_tool_references.is_empty());
    }

    #[test]
    fn never_called_tools_go_first_in_activation_order() {
        let mut tb = Toolbox::default();
        fill(&mut tb);
        tb.note_called("t0", 1);
        // Three turns later nothing is protected by recency.
        for _ in 0..3 {
            tb.begin_turn();
        }
        let a = tb.activate(&[c("new1", 100), c("new2", 100)]);
        assert_eq!(a.activated, ["new1", "new2"]);
        assert_eq!(names(&a.evicted_tool_references), ["t1", "t2"]);
        assert!(tb.contains("t0"), "the called tool outlives never-called ones");
    }

    #[test]
    fn least_recently_called_goes_after_the_never_called() {
        let mut tb = Toolbox::default();
        fill(&mut tb);
        for name in ["t3", "t1", "t0", "t2", "t4", "t5", "t6", "t7"] {
            let turn = tb.begin_turn();
            tb.note_called(name, turn);
        }
        for _ in 0..3 {
            tb.begin_turn();
        }
        let a = tb.activate(&[c("n1", 100), c("n2", 100)]);
        assert_eq!(names(&a.evicted_tool_references), ["t3", "t1"]);
    }

    #[test]
    fn tools_called_this_turn_or_the_last_stay() {
        let mut tb = Toolbox::default();
        fill(&mut tb);
        tb.begin_turn(); // turn 2
        for i in 0..4 {
            tb.note_called(&format!("t{i}"), 2);
        }
        tb.begin_turn(); // turn 3
        for i in 4..8 {
            tb.note_called(&format!("t{i}"), 3);
        }
        let a = tb.activate(&[c("x", 100)]);
        assert!(a.activated.is_empty());
        assert_eq!(names(&a.unavailable_tool_references), ["x"]);
        assert_eq!(a.unavailable_tool_references[0].query["query"], "^x$");
        assert_eq!(tb.names().len(), 8);
        // One turn later, turn-2 tools may go (least recently called first).
        tb.begin_turn(); // turn 4: turn 3 is "the last"
        let a = tb.activate(&[c("x", 100)]);
        assert_eq!(names(&a.evicted_tool_references), ["t0"]);
    }

    #[test]
    fn a_search_never_evicts_its_own_matches() {
        let mut tb = Toolbox::default();
        tb.begin_turn();
        let many: Vec<Candidate> = (0..10).map(|i| c(&format!("m{i}"), 10)).collect();
        let a = tb.activate(&many);
        assert_eq!(a.activated.len(), 8);
        assert_eq!(names(&a.unavailable_tool_references), ["m8", "m9"]);
        assert!(a.evicted_tool_references.is_empty());
    }

    #[test]
    fn schema_bytes_are_bounded() {
        let mut tb = Toolbox::default();
        tb.begin_turn();
        tb.activate(&[c("a", 6000), c("b", 6000)]);
        for _ in 0..3 {
            tb.begin_turn();
        }
        let a = tb.activate(&[c("big", 6000)]);
        assert_eq!(names(&a.evicted_tool_references), ["a"]);
        let a = tb.activate(&[c("huge", 17 * 1024)]);
        assert_eq!(names(&a.unavailable_tool_references), ["huge"]);
        assert!(
            a.unavailable_tool_references[0].reason.as_deref().unwrap().contains("larger than the toolbox")
        );
    }

    #[test]
    fn reactivating_keeps_one_slot_and_refreshes_it() {
        let mut tb = Toolbox::default();
        fill(&mut tb);
        for _ in 0..3 {
            tb.begin_turn();
        }
        let a = tb.activate(&[c("t0", 100)]);
        assert_eq!(a.activated, ["t0"]);
        assert_eq!(tb.names().len(), 8);
        let a = tb.activate(&[c("new", 100)]);
        assert_eq!(names(&a.evicted_tool_references), ["t1"], "t0 was refreshed");
    }
}
