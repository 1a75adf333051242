//! Step 6: the rule lists. A deny rule that covers the call refuses it
//! (deny wins over allow); an allow rule spares it the approval; an ask rule
//! sends it to the approver whatever the posture (steps 9-10).

use super::{CallRequest, GateContext, Preparation, Step, Verdict};

/// Applies `[rules] deny / allow / ask`.
pub(crate) struct RuleLists;

impl Step for RuleLists {
    fn name(&self) -> &'static str {
        "rules"
    }

    fn check(&self, call: &CallRequest<'_>, cx: &GateContext<'_>, prep: &mut Preparation) -> Verdict {
        let rules = &cx.policy.rules;
        let covering = |list: &[super::Rule]| {
            list.iter().find(|r| r.matches(call.tool, call.primary)).map(|r| r.to_string())
        };
        if let Some(rule) = covering(&rules.deny) {
            return Verdict::Refuse(format!("refused by the deny rule `{rule}`"));
        }
        prep.allowed_by = covering(&rules.allow);
        prep.ask_rule = covering(&rules.ask);
        Verdict::Next
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
        let check = |primary: &str| {
            let call = CallRequest { primary: Some(primary), ..CallRequest::for_test("bash", &args) };
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
}
