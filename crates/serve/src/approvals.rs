//! How a served run's approvals reach a person (docs/SERVE.md, "Approvals").
//!
//! The model that wrote the program is never asked: it could approve its
//! own calls. Each request picks one route, from what the MCP client
//! declared:
//!
//! - a 2025-11-25 client with form elicitation: the calls that wait for a
//!   decision together send one `elicitation/create` (MCP 2025-11-25,
//!   client/elicitation) listing them, each by tool and subject, while the
//!   run waits (eliciting.rs); accept allows them, decline and cancel deny
//!   them, no answer within the approval timeout denies them. The wait
//!   does not count against the run's deadline (the engine pauses its
//!   clock while any approver decides);
//! - a 2026-07-28 client with elicitation: the run pauses, and the result
//!   is `input_required` with one elicitation listing the pending calls and
//!   a signed `requestState` (request_state.rs); the client's retry resumes
//!   the run from the journal with the person's answer (pausing.rs);
//! - a client without elicitation: the run pauses; the result lists the
//!   pending calls and names `codemode approve`, which a person runs against
//!   the same journal store; `execute_tools {"resume": RUN_ID}` then goes on
//!   with the person's decisions only.
//!
//! On both elicitation routes the question may offer the rest of the run
//! (question.rs): the terminal prompt's `a`, held in the same
//! [`codemode::approval::RunGrants`] with the same limits.
//!
//! `codemode mcp serve --approve deny|allow|cmd:PROGRAM` puts that approver
//! in place of all three.

use std::sync::Arc;

use rmcp::service::{RequestContext, RoleServer};

use codemode::Approver;
use codemode::approval::RunGrants;

pub(crate) use super::eliciting::Eliciting;
pub(crate) use super::pausing::PausingApprover;

/// Who decides one request's approvals.
#[derive(Clone)]
pub(crate) enum Route {
    /// Ask the client with `elicitation/create` while the run waits.
    Elicit(Eliciting),
    /// Pause, and answer the request `input_required` (2026-07-28); the
    /// approver holds the grants carried over from earlier answers.
    InputRequired(Arc<PausingApprover>),
    /// Pause, and name `codemode approve` in the result.
    Pause,
    /// The approver given with `--approve`.
    Fixed(Arc<dyn Approver>),
}

impl Route {
    /// The route for a request with `context`: the pause or approver the
    /// server's `options` fix, else from the client's era and declared
    /// capabilities.
    pub fn of(context: &RequestContext<RoleServer>, options: &super::ServeOptions) -> Route {
        if options.pause_always {
            return Route::Pause;
        }
        if let Some(approver) = &options.approver {
            return Route::Fixed(approver.clone());
        }
        let timeout = options.approval_timeout;
        let modern = super::is_modern(context);
        let form = context.client_capabilities().and_then(|c| c.elicitation).is_some_and(|e| {
            // MCP 2025-11-25: an empty `elicitation: {}` means form mode.
            e.form.is_some() || e.url.is_none()
        });
        match (modern, form) {
            (true, true) => Route::InputRequired(Arc::new(PausingApprover::new(
                client_name(context),
                RunGrants::default(),
            ))),
            (false, true) => {
                Route::Elicit(Eliciting::new(context.peer.clone(), timeout, client_name(context)))
            }
            _ => Route::Pause,
        }
    }

    /// Whether approvals on this route pause the run (for a person to
    /// decide after it).
    pub fn pauses(&self) -> bool {
        matches!(self, Route::InputRequired(_) | Route::Pause)
    }

    /// The approver of a run on this route.
    pub fn approver(&self) -> Arc<dyn Approver> {
        match self {
            Route::Elicit(a) => Arc::new(a.clone()),
            Route::InputRequired(a) => a.clone(),
            Route::Pause => Arc::new(PausingApprover::new(String::new(), RunGrants::default())),
            Route::Fixed(a) => a.clone(),
        }
    }
}

/// The client's name as it gave it, for reasons in the receipt.
pub(crate) fn client_name(context: &RequestContext<RoleServer>) -> String {
    context
        .client_info()
        .map(|i| i.name)
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "the MCP client".to_owned())
}
