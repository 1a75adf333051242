//! The `rules` step: the rule lists. A deny rule that covers the call refuses it
//! (deny wins over allow); an allow rule spares it the approval; an ask rule
//! sends it to the approver whatever the posture (`ask_and_posture`, `approval`).
//!
//! A deny or ask rule covers a call when it covers any spelling of the
//! primary argument (as written, or resolved through symlinks); an allow
//! rule only when it covers every spelling, and an allow rule with a
//! pattern never covers a command that has shell control characters
//! (`; & | < > $ \``, newlines): `bash(git status*)` must not also allow
//! `git status; rm -rf x`.

use super::primary::Primary;
use super::{CallRequest, GateContext, Preparation, Rule, Step, Verdict};

/// Whether a deny or ask `rule` covers the call.
pub(crate) fn covers_any(rule: &Rule, tool: &str, primary: Option<&Primary>) -> bool {
    match primary {
        None => rule.matches(tool, None),
        Some(p) => p.spellings().any(|s| rule.matches(tool, Some(s))),
    }
}

/// Whether an allow `rule` covers the call.
pub(crate) fn covers_all(rule: &Rule, tool: &str, primary: Option<&Primary>) -> bool {
    match primary {
        None => rule.matches(tool, None),
        Some(p) if rule.pattern.is_some() && p.chained => false,
        Some(p) => p.spellings().all(|s| rule.matches(tool, Some(s))),
    }
}

/// Applies `[rules] deny / allow / ask`.
pub(crate) struct RuleLists;

impl Step for RuleLists {
    fn name(&self) -> &'static str {
        "rules"
    }

    fn check(&self, call: &CallRequest<'_>, cx: &GateContext<'_>, prep: &mut Preparation) -> Verdict {
        let rules = &cx.policy.rules;
        let (tool, primary) = (call.tool, call.primary);
        let first = |list: &[Rule], covers: fn(&Rule, &str, Option<&Primary>) -> bool| {
            list.iter().find(|r| covers(r, tool, primary)).map(|r| r.to_string())
        };
        if let Some(rule) = first(&rules.deny, covers_any) {
            return Verdict::Refuse(format!("refused by the deny rule `{rule}`"));
        }
        prep.allowed_by = first(&rules.allow, covers_all);
        prep.not_allowed_by =
            if prep.allowed_by.is_none() { not_covered(&rules.allow, tool, primary) } else { None };
        prep.ask_rule = first(&rules.ask, covers_any);
        Verdict::Next
    }
}

/// Why the allow rules naming `tool` do not cover the call, one clause per
/// rule (`None` when no allow rule names the tool): the message an
/// approval request and a refusal carry, so a person sees which rule they
/// meant to apply and why it did not.
fn not_covered(allow: &[Rule], tool: &str, primary: Option<&Primary>) -> Option<String> {
    let named: Vec<String> =
        allow.iter().filter(|r| r.tool == tool).map(|r| format!("`{r}` {}", why_not(r, primary))).collect();
    match named.len() {
        0 => None,
        1 => Some(format!("the allow rule {} (so it needs an approval)", named[0])),
        _ => Some(format!(
            "the allow rules for `{tool}` do not cover this call: {} (so it needs an approval)",
            named.join("; ")
        )),
    }
}

/// Why one allow rule naming the call's tool does not cover it (its tool
/// matches, so the pattern is the reason).
fn why_not(rule: &Rule, primary: Option<&Primary>) -> String {
    let shown = |text: &str| super::approvers::bounded(&super::approvers::printable(text), 120);
    let Some(p) = primary else {
        return "has a pattern, and the call does not give the argument it is matched against".to_owned();
    };
    if p.chained {
        let text = p.resolved.as_deref().unwrap_or(&p.written);
        let found: Vec<String> = super::primary::SHELL_CONTROL
            .iter()
            .filter(|c| text.contains(**c))
            .map(|c| match c {
                '\n' => "a newline".to_owned(),
                '\r' => "a carriage return".to_owned(),
                '`' => "a backquote".to_owned(),
                c => format!("`{c}`"),
            })
            .collect();
        return format!(
            "does not cover the command: a rule with a pattern never covers a command with shell control \
             characters (`; & | < > $`, backquotes, newlines), even inside quotes, since the shell may run \
             more than the pattern names; this one has {}",
            found.join(", ")
        );
    }
    match p.spellings().find(|s| !rule.matches(&rule.tool, Some(s))) {
        Some(s) if s == p.written => format!("does not match `{}`", shown(s)),
        Some(s) => format!(
            "matches `{}` but not `{}`, where it leads through a symlink (an allow rule must cover both)",
            shown(&p.written),
            shown(s)
        ),
        None => "does not cover the call".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::gate::{Policy, Rule, Rules};

    fn policy(allow: &[&str], ask: &[&str], deny: &[&str]) -> Policy {
        let list = |l: &[&str]| l.iter().map(|r| Rule::parse(r).unwrap()).collect();
        Policy { rules: Rules { allow: list(allow), ask: list(ask), deny: list(deny) }, ..Policy::default() }
    }

    #[test]
    fn deny_beats_allow_and_patterns_match_the_primary_argument() {
        let catalog = Catalog::new(vec![]).unwrap();
        let p = policy(&["bash"], &["bash(git push*)"], &["bash(rm *)"]);
        let cx = GateContext::for_test(&catalog, &p);
        let args = serde_json::json!({});
        let check = |command: &str| {
            let primary = crate::gate::primary::of_command(command);
            let call = CallRequest { primary: Some(&primary), ..CallRequest::for_test("bash", &args) };
            let mut prep = Preparation::default();
            (RuleLists.check(&call, &cx, &mut prep), prep)
        };
        let (v, _) = check("rm -rf /");
        assert!(matches!(v, Verdict::Refuse(r) if r.contains("bash(rm *)")));
        let (v, prep) = check("git push origin");
        assert_eq!(v, Verdict::Next);
        assert_eq!(prep.allowed_by.as_deref(), Some("bash"));
        assert_eq!(prep.ask_rule.as_deref(), Some("bash(git push*)"));
        let (_, prep) = check("ls");
        assert_eq!(prep.ask_rule, None);
    }

    #[test]
    fn allow_patterns_do_not_cover_chained_commands() {
        let catalog = Catalog::new(vec![]).unwrap();
        let p = policy(&["bash(git status*)"], &[], &[]);
        let cx = GateContext::for_test(&catalog, &p);
        let args = serde_json::json!({});
        for (command, allowed) in [
            ("git status --short", true),
            ("git status; rm -rf x", false),
            ("git status && id", false),
            ("git status | sh", false),
            ("git status $(touch x)", false),
            ("git status\nrm x", false),
        ] {
            let primary = crate::gate::primary::of_command(command);
            let call = CallRequest { primary: Some(&primary), ..CallRequest::for_test("bash", &args) };
            let mut prep = Preparation::default();
            RuleLists.check(&call, &cx, &mut prep);
            assert_eq!(prep.allowed_by.is_some(), allowed, "{command}");
        }
    }

    #[test]
    fn allow_rules_that_do_not_cover_a_call_say_why() {
        let catalog = Catalog::new(vec![]).unwrap();
        let p = policy(&["bash(git log*)", "bash(ls*)", "write(docs/**)"], &[], &[]);
        let cx = GateContext::for_test(&catalog, &p);
        let args = serde_json::json!({});
        let why = |tool: &str, command: &str| {
            let primary = crate::gate::primary::of_command(command);
            let call = CallRequest { primary: Some(&primary), ..CallRequest::for_test(tool, &args) };
            let mut prep = Preparation::default();
            RuleLists.check(&call, &cx, &mut prep);
            prep.not_allowed_by
        };
        let piped = why("bash", "git log --format='%h|%s'").unwrap();
        assert!(piped.contains("`bash(git log*)`") && piped.contains("`bash(ls*)`"), "{piped}");
        assert!(piped.contains("shell control characters") && piped.contains("this one has `|`"), "{piped}");
        let other = why("bash", "git status").unwrap();
        assert!(other.contains("does not match `git status`"), "{other}");
        assert_eq!(why("bash", "git log -3"), None, "covered");
        assert_eq!(why("edit", "x"), None, "no allow rule names the tool");
    }

    #[test]
    fn deny_covers_any_spelling_and_allow_needs_every_one() {
        let catalog = Catalog::new(vec![]).unwrap();
        let p = policy(&["write(docs/**)"], &[], &["write(secrets/**)"]);
        let cx = GateContext::for_test(&catalog, &p);
        let args = serde_json::json!({});
        let check = |written: &str, resolved: &str| {
            let primary = Primary {
                written: written.into(),
                resolved: Some(resolved.into()),
                command: false,
                target: None,
                chained: false,
            };
            let call = CallRequest { primary: Some(&primary), ..CallRequest::for_test("write", &args) };
            let mut prep = Preparation::default();
            (RuleLists.check(&call, &cx, &mut prep), prep.allowed_by)
        };
        assert!(
            matches!(check("link/x", "secrets/x").0, Verdict::Refuse(_)),
            "a symlink does not dodge deny"
        );
        assert_eq!(check("docs/up/codemode.toml", "codemode.toml").1, None, "nor stretch allow");
        assert!(check("docs/a.md", "docs/b.md").1.is_some());
    }
}
