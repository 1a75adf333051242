//! The one grant a person can give for the rest of a run: the terminal
//! prompt's `a`, and the same answer given through a server mode's
//! questions (`codemode mcp serve`, docs/SERVE.md). Every approver that
//! offers it holds its grants in a [`RunGrants`], so the limits below are
//! the same wherever the person answers.

use super::approval::{ApprovalRequest, RunChanges, RunGrantScope};

/// What an answer "allow the rest of this run's calls of this tool"
/// allows: the calls of one run of one tool that only the posture sends to
/// approval (a call an ask rule or a hook's `ask` sends is asked every
/// time, and such an answer allows it alone), and for a tool that starts
/// programs (`bash`, `mcp_connect__<server>`) only those with the same
/// subject (the exact command or server start), and only while the run has
/// let no other call that may change files run (the run's `RunChanges`).
#[derive(Debug, Clone)]
pub struct RunGrant {
    run_id: String,
    /// The batch whose every run the grant reaches (a request marked with
    /// its batch, for a tool that starts no programs); `None`: this run.
    batch: Option<String>,
    tool: String,
    subject: Option<String>,
    scope: RunGrantScope,
}

impl RunGrant {
    /// The grant an answer for the rest of the run on `request` makes;
    /// `None` when such an answer allows the call alone (an ask rule or a
    /// hook's `ask` sent it: its request has no `run_grant`).
    pub fn of(request: &ApprovalRequest) -> Option<RunGrant> {
        let scope = request.run_grant.clone()?;
        let per_subject = super::ask_posture::starts_programs(&request.tool);
        Some(RunGrant {
            run_id: request.run_id.clone(),
            // A grant on a subject depends on the calls its run made since
            // (`RunChanges`): it stays with its run.
            batch: if per_subject { None } else { request.batch.clone() },
            tool: request.tool.clone(),
            subject: if per_subject { Some(request.subject.clone().unwrap_or_default()) } else { None },
            scope,
        })
    }

    /// A grant for every call of `tool` in run `run_id`, made again from a
    /// record of one given earlier (a server mode's signed state, carried
    /// over a pause). `None` for a tool that starts programs: such a grant
    /// depends on the calls the run made since it was given, which a
    /// record does not carry.
    pub fn of_tool(run_id: &str, tool: &str) -> Option<RunGrant> {
        (!super::ask_posture::starts_programs(tool)).then(|| RunGrant {
            run_id: run_id.to_owned(),
            batch: None,
            tool: tool.to_owned(),
            subject: None,
            scope: RunGrantScope { changes: RunChanges::default(), seen: 0 },
        })
    }

    /// The run the grant is for.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The tool the grant is for.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Whether the grant covers only calls with one subject (a tool that
    /// starts programs): such a grant cannot be carried over a pause
    /// ([`RunGrant::of_tool`]).
    pub fn per_subject(&self) -> bool {
        self.subject.is_some()
    }

    /// Whether this grant, held, covers the call `asked` would grant.
    pub fn covers(&self, asked: &RunGrant) -> bool {
        let scope = match &self.batch {
            Some(batch) => asked.batch.as_ref() == Some(batch),
            None => self.run_id == asked.run_id,
        };
        scope
            && self.tool == asked.tool
            && self.subject == asked.subject
            && (self.subject.is_none()
                || self.scope.changes.only_since(self.scope.seen, &self.tool, self.subject.as_deref()))
    }

    /// What the grant allows, as a phrase completing "allows ..."
    /// (`tool` as the caller shows it, already made printable).
    pub fn reach(&self, tool: &str) -> String {
        let until = "until another call that may change files runs";
        match &self.subject {
            Some(_) if self.tool == "bash" => format!("this exact command for the rest of this run, {until}"),
            Some(_) => format!("`{tool}` with this exact subject for the rest of this run, {until}"),
            None if self.batch.is_some() => format!("every `{tool}` call of this batch (all its runs)"),
            None => format!("every `{tool}` call of this run"),
        }
    }
}

/// The grants an approver holds: later calls one of them covers are
/// allowed unasked.
#[derive(Debug, Clone, Default)]
pub struct RunGrants(Vec<RunGrant>);

impl RunGrants {
    /// Whether a held grant covers `asked`.
    pub fn cover(&self, asked: &RunGrant) -> bool {
        self.0.iter().any(|held| held.covers(asked))
    }

    /// Whether a held grant covers `request` (never one an ask rule or a
    /// hook's `ask` sends to a person).
    pub fn cover_request(&self, request: &ApprovalRequest) -> bool {
        RunGrant::of(request).is_some_and(|asked| self.cover(&asked))
    }

    /// Holds `grant`.
    pub fn hold(&mut self, grant: RunGrant) {
        self.0.push(grant);
    }

    /// The grants held.
    pub fn iter(&self) -> impl Iterator<Item = &RunGrant> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::Caller;
    use serde_json::json;

    fn request(run_id: &str, tool: &str, subject: &str) -> ApprovalRequest {
        ApprovalRequest {
            tool: tool.into(),
            arguments: json!({}),
            caller: Caller::Program,
            run_id: run_id.into(),
            seq: 1,
            reason: "posture ask".into(),
            subject: Some(subject.into()),
            annotations: Default::default(),
            destructive: false,
            run_grant: Some(RunGrantScope::now(&RunChanges::default())),
            batch: None,
        }
    }

    #[test]
    fn a_grant_in_a_batch_covers_its_runs_but_not_a_command_of_another_run() {
        let in_batch = |run: &str, tool: &str, batch: &str| ApprovalRequest {
            batch: Some(batch.into()),
            ..request(run, tool, "s")
        };
        let mut grants = RunGrants::default();
        grants.hold(RunGrant::of(&in_batch("r1", "write", "b1")).unwrap());
        assert!(grants.cover_request(&in_batch("r2", "write", "b1")), "another run of the batch");
        assert!(!grants.cover_request(&in_batch("r2", "write", "b2")), "another batch");
        assert!(!grants.cover_request(&request("r2", "write", "s")), "a run of no batch");
        let grant = RunGrant::of(&in_batch("r1", "write", "b1")).unwrap();
        assert_eq!(grant.reach("write"), "every `write` call of this batch (all its runs)");
        grants.hold(RunGrant::of(&in_batch("r1", "bash", "b1")).unwrap());
        assert!(!grants.cover_request(&in_batch("r2", "bash", "b1")), "a command's grant stays in its run");
    }

    #[test]
    fn a_grant_covers_its_run_and_tool_only() {
        let mut grants = RunGrants::default();
        grants.hold(RunGrant::of(&request("r1", "write", "a.txt")).unwrap());
        assert!(grants.cover_request(&request("r1", "write", "b.txt")));
        assert!(!grants.cover_request(&request("r2", "write", "b.txt")), "another run");
        assert!(!grants.cover_request(&request("r1", "edit", "b.txt")), "another tool");
        let asked_every_time = ApprovalRequest { run_grant: None, ..request("r1", "write", "b.txt") };
        assert!(!grants.cover_request(&asked_every_time), "an ask rule's call");
    }

    #[test]
    fn a_grant_from_a_record_is_never_for_a_tool_that_starts_programs() {
        assert!(RunGrant::of_tool("r1", "bash").is_none());
        assert!(RunGrant::of_tool("r1", "mcp_connect__fs").is_none());
        let carried = RunGrant::of_tool("r1", "write").unwrap();
        assert!(!carried.per_subject());
        let mut grants = RunGrants::default();
        grants.hold(carried);
        assert!(grants.cover_request(&request("r1", "write", "c.txt")));
        assert!(!grants.cover_request(&request("r1", "bash", "ls")));
    }
}
