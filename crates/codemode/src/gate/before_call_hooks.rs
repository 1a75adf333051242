//! The `before_call_hooks` step. Each hook whose `match` regex matches the tool
//! name runs in order (`hooks/` runs one). A block refuses the call; an
//! `allow` or `ask` answer is kept for `ask_and_posture`; rewritten arguments are
//! checked again (the input schema, and escalation fields inside programs)
//! and replace the call's arguments for the hooks after and for the tool.

use std::path::Path;

use serde_json::Value;

use super::ask_posture::HookVerdict;
use super::hooks::{HookDecision, HookInput, HookOutcome, hooks_for, run_hook};
use super::{CallRequest, GateContext, Policy, Posture, Preparation, primary, recheck_rewrite};
use crate::catalog::Catalog;
use crate::receipt::Caller;
use crate::receipt::spill::utf8_prefix;

/// Bytes of a hook's `context` kept in the call's note.
const CONTEXT_BYTES: usize = 500;

/// The call as the hooks see it.
pub(crate) struct HookedCall<'a> {
    pub tool: &'a str,
    pub args: Value,
    pub caller: Caller,
    pub run_id: &'a str,
    pub workspace: &'a Path,
}

/// What the hooks decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Hooked {
    /// A hook blocked the call, or rewrote it into arguments that are refused.
    Blocked(String),
    /// Go on with these (perhaps rewritten) arguments; `rules` holds what
    /// the allow and ask rules say about a rewrite.
    Passed { args: Value, verdict: HookVerdict, notes: Vec<String>, rules: Option<Preparation> },
}

/// Runs the matching hooks in order.
pub(crate) async fn run(
    call: HookedCall<'_>,
    catalog: &Catalog,
    policy: &Policy,
    posture: Posture,
    (protections, confinement): (&[super::protection::Protection], &crate::sandbox::Confinement),
) -> Hooked {
    let HookedCall { tool, mut args, caller, run_id, workspace } = call;
    let mut verdict = HookVerdict::default();
    let mut notes = Vec::new();
    let mut rules = None;
    for hook in hooks_for(&policy.hooks, tool) {
        let name = hook.command.first().map_or("?", String::as_str);
        // A hook runs outside the sandbox: a file it names that a tool
        // call created during this run must not run (docs/SECURITY.md,
        // "Protected paths").
        if let Some(file) = super::protection::file_appeared(protections, super::protection::NamedBy::Hook) {
            return Hooked::Blocked(format!(
                "hook `{}` was not run: `{}`, a file the hooks name, did not exist when the engine was built \
                 and exists now (a tool call may have created it); the call is blocked. Check the file, \
                 then start a new run",
                hook.command.join(" "),
                file.display()
            ));
        }
        let input = HookInput { tool, arguments: &args, caller, run_id, workspace };
        match run_hook(hook, &input).await {
            HookOutcome::Pass => {}
            // The reason names the hook and why it blocked.
            HookOutcome::Block { reason } => return Hooked::Blocked(reason),
            HookOutcome::Decide { decision, reason, arguments, context } => {
                if let Some(rewritten) = arguments {
                    let primary = catalog.get(tool).and_then(|e| primary::of(&e.spec, &rewritten, workspace));
                    let request = CallRequest {
                        tool,
                        args: &rewritten,
                        caller,
                        calls_made: 0,
                        primary: primary.as_ref(),
                    };
                    let cx = GateContext {
                        catalog,
                        policy,
                        max_calls: usize::MAX,
                        posture,
                        posture_at_start: None,
                        guard: super::protection::Guard { protections, confinement, run_id },
                        known: None,
                    };
                    match recheck_rewrite(&request, &cx) {
                        Ok(found) => rules = Some(found),
                        Err(why) => {
                            return Hooked::Blocked(format!(
                                "the before-call hook `{name}` rewrote the arguments, and the rewrite is refused: {why}"
                            ));
                        }
                    }
                    args = rewritten;
                    notes.push(format!("arguments rewritten by the before-call hook `{name}`"));
                }
                if let Some(context) = context {
                    let kept = utf8_prefix(&context, CONTEXT_BYTES);
                    let cut = if kept.len() < context.len() { " [cut]" } else { "" };
                    notes.push(format!("hook `{name}`: {kept}{cut}"));
                }
                match decision {
                    HookDecision::Allow => verdict.allow = true,
                    HookDecision::Ask => {
                        verdict.ask =
                            Some(reason.unwrap_or_else(|| format!("the hook `{name}` asks for approval")))
                    }
                }
            }
        }
    }
    Hooked::Passed { args, verdict, notes, rules }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::gate::HookSpec;
    use serde_json::json;
    use std::time::Duration;

    fn fixture(name: &str) -> HookSpec {
        HookSpec {
            matcher: regex::Regex::new("^write$").unwrap(),
            command: vec![format!(
                "{}/tests/fixtures/hooks/{name}",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
            )],
            timeout: Duration::from_secs(10),
        }
    }

    fn test_confinement() -> crate::sandbox::Confinement {
        crate::sandbox::Confinement::for_workspace(Path::new("/ws"))
    }

    async fn run_with(hooks: Vec<HookSpec>, args: Value) -> Hooked {
        let catalog = Catalog::new(crate::tools::native()).unwrap();
        let policy = Policy { hooks, ..Policy::default() };
        let ws = tempfile::tempdir().unwrap();
        let call =
            HookedCall { tool: "write", args, caller: Caller::Program, run_id: "r", workspace: ws.path() };
        run(call, &catalog, &policy, Posture::Ask, (&[], &test_confinement())).await
    }

    #[tokio::test]
    async fn hooks_run_in_order_and_rewrites_carry_over() {
        let out = run_with(
            vec![fixture("pass.sh"), fixture("move_path.py"), fixture("ask.sh")],
            json!({"path": "a.txt", "content": "x"}),
        )
        .await;
        let Hooked::Passed { args, verdict, notes, .. } = out else { panic!("{out:?}") };
        assert_eq!(args["path"], "sandbox/a.txt");
        assert!(verdict.ask.is_some(), "the last hook asks");
        assert!(notes.iter().any(|n| n.contains("rewritten")), "{notes:?}");
    }

    #[tokio::test]
    async fn a_block_stops_the_hooks_after_it() {
        let out =
            run_with(vec![fixture("block.sh"), fixture("allow.sh")], json!({"path": "a", "content": ""}))
                .await;
        assert!(matches!(out, Hooked::Blocked(_)), "{out:?}");
    }

    #[tokio::test]
    async fn a_rewrite_that_breaks_the_schema_is_blocked() {
        // rewrite.py adds `rewritten_by`, which write's schema does not allow.
        let out = run_with(vec![fixture("rewrite.py")], json!({"path": "a", "content": ""})).await;
        let Hooked::Blocked(reason) = out else { panic!("{out:?}") };
        assert!(reason.contains("rewrite is refused"), "{reason}");
    }

    #[tokio::test]
    async fn a_rewrite_into_a_denied_path_is_refused() {
        let catalog = Catalog::new(crate::tools::native()).unwrap();
        let deny = vec![crate::gate::Rule::parse("write(sandbox/**)").unwrap()];
        let policy = Policy {
            hooks: vec![fixture("move_path.py")],
            rules: crate::gate::Rules { deny, ..Default::default() },
            ..Policy::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let args = json!({"path": "a.txt", "content": ""});
        let call = HookedCall { tool: "write", args, caller: Caller::Program, run_id: "r", workspace: &ws };
        let out = run(call, &catalog, &policy, Posture::Ask, (&[], &test_confinement())).await;
        let Hooked::Blocked(reason) = out else { panic!("{out:?}") };
        assert!(reason.contains("deny rule `write(sandbox/**)`"), "{reason}");
    }

    #[tokio::test]
    async fn hooks_that_do_not_match_do_not_run() {
        let mut block = fixture("block.sh");
        block.matcher = regex::Regex::new("^bash$").unwrap();
        let out = run_with(vec![block], json!({"path": "a", "content": ""})).await;
        assert!(matches!(out, Hooked::Passed { .. }), "{out:?}");
    }
}
