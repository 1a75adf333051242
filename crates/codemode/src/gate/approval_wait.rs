//! The `approval` step. The approver answers while the program that made
//! the call waits; the run's deadline clock stops while the run waits on
//! nothing but approvals (vm/clock.rs: JavaScript and other calls that run
//! meanwhile count). Allow -> `approved`; deny -> `denied` (the program gets a
//! catchable ToolError of kind `denied`); an approver that fails -> `refused`.

use super::{Answer, ApprovalRequest, Approver};

/// Told when a call waits for its approval: the run's deadline clock.
pub(crate) trait ApprovalClock: Send + Sync {
    /// Call `seq` starts (`true`) or stops (`false`) waiting for its
    /// approval: the clock may stop while the run waits on nothing else,
    /// and a run that ends meanwhile can say the call never got one.
    fn awaiting(&self, seq: u64, waiting: bool);

    /// A person or approver answered call `seq` (allowed or denied it).
    /// Told before the wait ends: between the end of the wait and the
    /// call's decision being recorded, a run that ends meanwhile must
    /// still see that the call was put to an approver, so the answer is
    /// kept (see `Vm::cancel_unapproved`).
    fn answered(&self, seq: u64);

    /// Whether the run was told to stop (past its deadline while its clock
    /// ran, cancelled, or stopped by a run limit): a call of it is then not
    /// put to an approver, and one being asked is withdrawn. Default: never.
    fn told_to_stop(&self) -> bool {
        false
    }

    /// Time left before the run's deadline while its clock runs (`None`
    /// while it is stopped, or without a deadline): a question is
    /// withdrawn at the deadline itself, not at the next poll. Default:
    /// none.
    fn time_left(&self) -> Option<std::time::Duration> {
        None
    }
}

/// How often a question put to an approver (a person, a command, a
/// client) looks whether its run was told to stop.
pub(crate) const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// The output of the future `ask()` makes, or `None` when `clock`'s run
/// is told to stop before `ask` is called or while the future waits
/// (looked at at the deadline, and every [`STOP_POLL`] for a cancel or a
/// run limit): then the future is dropped, which
/// withdraws what it put to an approver (a `cmd:` approver's process ends,
/// a prompt waiting its turn never shows, `mcp serve` cancels its question
/// on the client; one on the terminal keeps its read, see
/// `PromptApprover`). The run that was told to stop ends the call, or the
/// overrun watch does when its VM does not come back
/// (engine/overrun_watch.rs): nobody is asked about a call that cannot run.
pub(crate) async fn unless_told_to_stop<F: std::future::Future>(
    clock: &dyn ApprovalClock,
    ask: impl FnOnce() -> F,
) -> Option<F::Output> {
    if clock.told_to_stop() {
        return None;
    }
    let mut asking = std::pin::pin!(ask());
    loop {
        // A question gathered with others waits a moment before it goes
        // out (crates/serve's `GATHER`): dropped at the deadline, it is
        // not sent at all.
        let next_look = clock.time_left().map_or(STOP_POLL, |left| (left + STOP_SLACK).min(STOP_POLL));
        tokio::select! {
            out = &mut asking => return Some(out),
            () = tokio::time::sleep(next_look) => {
                if clock.told_to_stop() {
                    return None;
                }
            }
        }
    }
}

/// Added to the time left before looking at the deadline: the clock says
/// expired from the deadline's nanosecond on, a timer may fire a little
/// before.
const STOP_SLACK: std::time::Duration = std::time::Duration::from_millis(1);

/// How the approval went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Approved {
    /// Run the call; the approver's reason, if it gave one.
    Yes(Option<String>),
    /// The approver denied it, with this reason.
    Denied(String),
    /// The approver left it for later: the run pauses on it.
    Pause(Option<String>),
    /// The approver could not decide (crash, hang, nonsense).
    Failed(String),
}

/// Asks `approver`, with `clock` told the call waits while it decides.
/// A call whose run was told to stop, before or while it is asked, never
/// gets an answer (see [`unless_told_to_stop`]): it stays waiting for its
/// approval until the run's end drops it, cut as `pending`.
pub(crate) async fn ask(
    approver: &dyn Approver,
    clock: &dyn ApprovalClock,
    request: ApprovalRequest,
) -> Approved {
    let seq = request.seq;
    // Looked at before the call is marked as waiting: the mark may stop
    // the clock (the run waiting on people alone), which would hide a
    // deadline just passed.
    if clock.told_to_stop() {
        return std::future::pending().await;
    }
    let answer = {
        let _paused = Paused::new(clock, seq);
        let Some(answer) = unless_told_to_stop(clock, || approver.decide(request)).await else {
            return std::future::pending().await;
        };
        if matches!(&answer, Ok(a) if a.decision == Answer::Allow || a.decision == Answer::Deny) {
            clock.answered(seq);
        }
        answer
    };
    match answer {
        Ok(a) if a.decision == Answer::Allow => Approved::Yes(a.reason),
        Ok(a) if a.decision == Answer::Pause => Approved::Pause(a.reason),
        Ok(a) => Approved::Denied(a.reason.unwrap_or_else(|| "denied by the approver".to_owned())),
        Err(e) => Approved::Failed(format!("the approver could not decide: {e}")),
    }
}

/// Keeps the call marked as waiting while alive (also when the call is
/// cancelled mid-approval).
struct Paused<'a>(&'a dyn ApprovalClock, u64);

impl<'a> Paused<'a> {
    fn new(clock: &'a dyn ApprovalClock, seq: u64) -> Self {
        clock.awaiting(seq, true);
        Paused(clock, seq)
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.awaiting(self.1, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{Approval, ApprovalFuture, ApproverError};
    use crate::receipt::Caller;
    use std::sync::atomic::{AtomicI32, Ordering};

    /// Counts waits started minus waits ended.
    #[derive(Default)]
    struct Counting(AtomicI32);
    impl ApprovalClock for Counting {
        fn awaiting(&self, _seq: u64, waiting: bool) {
            self.0.fetch_add(if waiting { 1 } else { -1 }, Ordering::SeqCst);
        }
        fn answered(&self, _seq: u64) {}
    }

    /// Records what it is told, in order.
    #[derive(Default)]
    struct Told(std::sync::Mutex<Vec<String>>);
    impl ApprovalClock for Told {
        fn awaiting(&self, seq: u64, waiting: bool) {
            self.0.lock().unwrap().push(format!("awaiting {seq} {waiting}"));
        }
        fn answered(&self, seq: u64) {
            self.0.lock().unwrap().push(format!("answered {seq}"));
        }
    }

    struct Fixed(Result<Approval, ApproverError>);
    impl Approver for Fixed {
        fn decide(&self, _: ApprovalRequest) -> ApprovalFuture {
            let answer = self.0.clone();
            Box::pin(async move { answer })
        }
    }

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            tool: "write".into(),
            arguments: serde_json::json!({}),
            caller: Caller::Program,
            run_id: "r".into(),
            seq: 1,
            reason: "test".into(),
            subject: None,
            annotations: Default::default(),
            destructive: false,
            run_grant: None,
            batch: None,
        }
    }

    #[tokio::test]
    async fn answers_map_to_outcomes_and_the_clock_is_released() {
        let clock = Counting::default();
        let cases = [
            (Ok(Approval::allow()), Approved::Yes(None)),
            (Ok(Approval::deny("no")), Approved::Denied("no".into())),
            (
                Err(ApproverError("boom".into())),
                Approved::Failed("the approver could not decide: boom".into()),
            ),
        ];
        for (answer, want) in cases {
            assert_eq!(ask(&Fixed(answer), &clock, request()).await, want);
            assert_eq!(clock.0.load(Ordering::SeqCst), 0, "every pause is released");
        }
    }

    #[tokio::test]
    async fn the_clock_is_paused_while_the_approver_decides_and_released_on_cancel() {
        struct Pending;
        impl Approver for Pending {
            fn decide(&self, _: ApprovalRequest) -> ApprovalFuture {
                Box::pin(std::future::pending())
            }
        }
        let clock = Counting::default();
        let mut waiting = Box::pin(ask(&Pending, &clock, request()));
        assert!(tokio::time::timeout(std::time::Duration::from_millis(20), &mut waiting).await.is_err());
        assert_eq!(clock.0.load(Ordering::SeqCst), 1, "paused while waiting");
        drop(waiting);
        assert_eq!(clock.0.load(Ordering::SeqCst), 0, "a cancelled approval resumes the clock");
    }

    /// The run loop may look between the end of the wait and the gate's
    /// record of the decision (the call's task runs on another thread): a
    /// call answered is told as answered before it leaves the wait, so it
    /// is never seen as neither (the prompt's typed-ahead answers were lost
    /// that way when a denial failed the program).
    #[tokio::test]
    async fn an_answer_is_told_before_the_wait_ends_and_only_an_answer() {
        let cases = [
            (Ok(Approval::allow()), vec!["awaiting 1 true", "answered 1", "awaiting 1 false"]),
            (Ok(Approval::deny("no")), vec!["awaiting 1 true", "answered 1", "awaiting 1 false"]),
            (Ok(Approval::pause()), vec!["awaiting 1 true", "awaiting 1 false"]),
            (Err(ApproverError("boom".into())), vec!["awaiting 1 true", "awaiting 1 false"]),
        ];
        for (answer, want) in cases {
            let clock = Told::default();
            ask(&Fixed(answer.clone()), &clock, request()).await;
            assert_eq!(*clock.0.lock().unwrap(), want, "{answer:?}");
        }
    }
}
