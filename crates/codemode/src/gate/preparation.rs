//! The `preparation` step: what the tool is. A tool that declares `readOnlyHint: true` is a
//! reader; anything else (including a tool that says nothing, as MCP tools
//! often do) is a writer. A writer is destructive unless it says
//! `destructiveHint: false`; destructive writers are labelled in the
//! approval request and always asked under auto-review. (MCP specification
//! 2025-06-18, "Tool annotations": a missing `readOnlyHint` means false, a
//! missing `destructiveHint` means true.)

use super::{CallRequest, GateContext, Preparation, Step, Verdict};

/// Notes reader/writer and destructive for `ask_and_posture` and
/// `approval`.
pub(crate) struct Preparing;

impl Step for Preparing {
    fn name(&self) -> &'static str {
        "preparation"
    }

    fn check(&self, call: &CallRequest<'_>, cx: &GateContext<'_>, prep: &mut Preparation) -> Verdict {
        if let Some(entry) = cx.entry(call.tool) {
            prep.reader = entry.spec.is_read_only();
            prep.destructive = !prep.reader && entry.spec.annotations.destructive != Some(false);
        }
        Verdict::Next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::Policy;

    #[test]
    fn readers_and_writers_are_told_apart() {
        let catalog = crate::catalog::Catalog::new(crate::tools::native()).unwrap();
        let policy = Policy::default();
        let cx = GateContext::for_test(&catalog, &policy);
        let args = serde_json::json!({});
        for (tool, reader) in [("read", true), ("file_search", true), ("write", false), ("bash", false)] {
            let mut prep = Preparation::default();
            Preparing.check(&CallRequest::for_test(tool, &args), &cx, &mut prep);
            assert_eq!(prep.reader, reader, "{tool}");
        }
    }
}
