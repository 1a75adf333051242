//! The engine's elicitor: each tool call's
//! [`ToolContext::elicitor`](crate::catalog::ToolContext::elicitor). A question the
//! tool asks (an MCP server's elicitation) goes to the run's approver as an
//! [`ElicitationRequest`]; while it is answered the call's own timeout is
//! paused, and the run's deadline clock stops while the run waits on
//! nothing but people (vm/clock.rs); the answer is checked (an accepted
//! form must match its schema) and recorded in the receipt under the call
//! ([`ElicitationRecord`]), and in the call's result as
//! `metadata.elicitations`.
//!
//! It also hears the progress the tool reports (an MCP server's
//! `notifications/progress`): each report resets the call's timeout (the
//! timeout counts from the last report, as the TypeScript SDK's
//! `resetTimeoutOnProgress` does; the MCP client caps the call's whole
//! length with the server's `max_total_timeout_ms`), and the last one goes
//! into the receipt ([`CallProgress`]).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::catalog::{
    CallProgress, Elicitation, ElicitationAction, ElicitationAnswer, ElicitationFuture, ElicitationMode,
    Elicitor,
};
use crate::gate::elicitation::form;
use crate::gate::later::unless_told_to_stop;
use crate::gate::{Approver, ElicitationReply, ElicitationRequest};
use crate::receipt::{Caller, ElicitationRecord};
use crate::vm::clock::RunClock;

/// Who answers, in the receipt, when codemode itself declines (a schema it
/// cannot pass on, an answer that does not match the form).
const CODEMODE: &str = "codemode";

/// The questions of one call: what was asked and answered, and how long the
/// call has waited on answers (its timeout does not count that time).
#[derive(Debug)]
pub(crate) struct CallQuestions {
    records: Mutex<Vec<ElicitationRecord>>,
    asking: Mutex<Asking>,
    /// The last progress reported, and when.
    progress: Mutex<Option<(Instant, CallProgress)>>,
    /// Made when first needed (most calls never wait with questions).
    changed: std::sync::OnceLock<tokio::sync::watch::Sender<()>>,
}

#[derive(Debug, Default)]
struct Asking {
    /// Questions waiting for an answer now.
    depth: u32,
    /// Since when one has been waiting.
    since: Option<Instant>,
    /// Time spent waiting before `since`.
    total: Duration,
}

impl Default for CallQuestions {
    fn default() -> Self {
        CallQuestions {
            records: Mutex::default(),
            asking: Mutex::default(),
            progress: Mutex::default(),
            changed: std::sync::OnceLock::new(),
        }
    }
}

impl CallQuestions {
    /// The records so far.
    pub(crate) fn records(&self) -> Vec<ElicitationRecord> {
        self.records.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The last progress reported, with how many reports there were.
    pub(crate) fn progress(&self) -> Option<CallProgress> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|(_, p)| p.clone())
    }

    /// A progress report: the call's timeout counts from now.
    fn progressed(&self, report: CallProgress) {
        let mut last = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        let count = last.as_ref().map_or(0, |(_, p)| p.count) + 1;
        *last = Some((Instant::now(), CallProgress { count, ..report }));
        drop(last);
        if let Some(changed) = self.changed.get() {
            changed.send_replace(());
        }
    }

    fn push(&self, record: ElicitationRecord) {
        self.records.lock().unwrap_or_else(|p| p.into_inner()).push(record);
    }

    fn start_asking(&self) {
        let mut a = self.asking.lock().unwrap_or_else(|p| p.into_inner());
        if a.depth == 0 {
            a.since = Some(Instant::now());
        }
        a.depth += 1;
        drop(a);
        if let Some(changed) = self.changed.get() {
            changed.send_replace(());
        }
    }

    fn stop_asking(&self) {
        let mut a = self.asking.lock().unwrap_or_else(|p| p.into_inner());
        a.depth = a.depth.saturating_sub(1);
        if a.depth == 0
            && let Some(since) = a.since.take()
        {
            a.total += since.elapsed();
        }
        drop(a);
        if let Some(changed) = self.changed.get() {
            changed.send_replace(());
        }
    }

    /// When a call started at `start` with `timeout` times out, given the
    /// time it waited on answers and its last progress report (the timeout
    /// counts from it); `None` while it waits.
    fn deadline(&self, start: Instant, timeout: Duration) -> Option<Instant> {
        let a = self.asking.lock().unwrap_or_else(|p| p.into_inner());
        let waited = (a.depth == 0).then(|| start + timeout + a.total)?;
        drop(a);
        let progressed = self.progress.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|(at, _)| *at);
        Some(progressed.map_or(waited, |at| waited.max(at + timeout)))
    }

    /// Runs `future` under `timeout`, not counting the time it waits on
    /// answers to its questions. `Err(())` when the time runs out.
    pub(crate) async fn timeout<F: Future + Unpin>(
        &self,
        timeout: Duration,
        future: &mut F,
    ) -> Result<F::Output, ()> {
        let start = Instant::now();
        let mut changed = self.changed.get_or_init(|| tokio::sync::watch::Sender::new(())).subscribe();
        loop {
            let deadline = self.deadline(start, timeout);
            let sleep = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                out = &mut *future => return Ok(out),
                () = sleep => {
                    // An answer that began just now moves the deadline.
                    if self.deadline(start, timeout).is_some_and(|d| d <= Instant::now()) {
                        return Err(());
                    }
                }
                _ = changed.changed() => {}
            }
        }
    }
}

/// Keeps call `seq` marked as waiting on an answer (for the run's deadline
/// clock) and its timeout paused while alive (also when the question is
/// abandoned).
struct Waiting<'a> {
    clock: &'a RunClock,
    seq: u64,
    questions: &'a CallQuestions,
}

impl<'a> Waiting<'a> {
    fn start(clock: &'a RunClock, seq: u64, questions: &'a CallQuestions) -> Self {
        clock.asking(seq, true);
        questions.start_asking();
        Waiting { clock, seq, questions }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.questions.stop_asking();
        self.clock.asking(self.seq, false);
    }
}

/// The elicitor of one call.
pub(crate) struct CallElicitor {
    pub approver: Arc<dyn Approver>,
    pub clock: Arc<RunClock>,
    pub run_id: Arc<str>,
    pub seq: u64,
    pub tool: Arc<str>,
    pub caller: Caller,
    pub questions: Arc<CallQuestions>,
}

impl Elicitor for CallElicitor {
    fn elicit(&self, question: Elicitation) -> ElicitationFuture {
        let approver = self.approver.clone();
        let clock = self.clock.clone();
        let questions = self.questions.clone();
        let seq = self.seq;
        let request = ElicitationRequest {
            run_id: self.run_id.to_string(),
            seq: self.seq,
            tool: self.tool.to_string(),
            caller: self.caller,
            elicitation: question,
        };
        Box::pin(async move {
            let started = Instant::now();
            let reply = match passable(&request.elicitation) {
                Err(why) => ElicitationReply::decline(CODEMODE, why),
                // Looked at before the call is marked as waiting, which
                // may stop the clock and hide a deadline just passed.
                Ok(()) if clock.should_stop() => ElicitationReply::cancel(
                    CODEMODE,
                    "the run was told to stop (its deadline, a cancel or a limit) before the question was asked",
                ),
                Ok(()) => {
                    let _waiting = Waiting::start(&clock, seq, &questions);
                    // The run told to stop (its deadline passed while
                    // JavaScript ran, a cancel, a limit) before or while
                    // the question waits: nobody is asked, or the question
                    // is withdrawn, and the server gets a cancel, even
                    // when the VM that would cut the call does not come
                    // back (engine/overrun_watch.rs). An answer that came
                    // after acts on nothing either.
                    match unless_told_to_stop(clock.as_ref(), || approver.elicit(request.clone())).await {
                        Some(reply) if !clock.should_stop() => reply,
                        _ => ElicitationReply::cancel(
                            CODEMODE,
                            "the run was told to stop (its deadline, a cancel or a limit) before the answer came",
                        ),
                    }
                }
            };
            let reply = checked(reply, &request.elicitation);
            questions.push(record(&request.elicitation, &reply, started.elapsed()));
            reply.answer
        })
    }

    fn progress(&self, progress: CallProgress) {
        self.questions.progressed(progress);
    }
}

/// Whether `question` can be put to an approver: a form's schema must be
/// JSON Schema (or no answer could be checked).
fn passable(question: &Elicitation) -> Result<(), String> {
    match &question.mode {
        ElicitationMode::Form { requested_schema } => crate::catalog::schema_validator(requested_schema)
            .map(|_| ())
            .map_err(|e| format!("the server's form is not valid JSON Schema, so it was not asked: {e}")),
        ElicitationMode::Url { .. } => Ok(()),
    }
}

/// `reply` as it goes back: an accepted form's content must match the
/// requested schema (else the question is declined, saying where it does
/// not); a URL's accept carries no content; a decline or cancel none.
fn checked(reply: ElicitationReply, question: &Elicitation) -> ElicitationReply {
    let ElicitationReply { answer, by, reason } = reply;
    match (&question.mode, answer.action) {
        (ElicitationMode::Form { requested_schema }, ElicitationAction::Accept) => {
            let content = answer.content.unwrap_or_default();
            match form::check(requested_schema, &content) {
                Ok(()) => ElicitationReply {
                    answer: ElicitationAnswer { action: ElicitationAction::Accept, content: Some(content) },
                    by,
                    reason,
                },
                Err(why) => ElicitationReply::decline(
                    CODEMODE,
                    format!("the answer from `{by}` does not match the form ({why}), so it was declined"),
                ),
            }
        }
        (_, action) => ElicitationReply { answer: ElicitationAnswer { action, content: None }, by, reason },
    }
}

/// The receipt's record of `question` answered by `reply` after `waited`.
fn record(question: &Elicitation, reply: &ElicitationReply, waited: Duration) -> ElicitationRecord {
    let (mode, url, fields) = match &question.mode {
        ElicitationMode::Form { requested_schema } => {
            let fields = requested_schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            ("form", None, fields)
        }
        ElicitationMode::Url { url, .. } => {
            let bare = url.split(['?', '#']).next().unwrap_or(url);
            ("url", Some(cut(bare, 2000)), Vec::new())
        }
    };
    ElicitationRecord {
        server: question.server.clone(),
        message: cut(&question.message, ElicitationRecord::MAX_MESSAGE_CHARS),
        mode: mode.to_owned(),
        url,
        fields,
        action: reply.answer.action,
        content_keys: reply.answer.content.as_ref().map(|c| c.keys().cloned().collect()).unwrap_or_default(),
        answered_by: reply.by.clone(),
        reason: reply.reason.clone(),
        wait_ms: crate::receipt::millis(waited),
    }
}

/// `text` cut to `max` characters, marked when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}…")
}

/// `metadata` with the call's elicitation records under `elicitations`
/// (what the program gets as `metadata.elicitations`): a missing metadata
/// becomes an object; a metadata that is not an object is left alone.
pub(crate) fn with_elicitations(metadata: Option<Value>, records: &[ElicitationRecord]) -> Option<Value> {
    if records.is_empty() {
        return metadata;
    }
    let list = serde_json::to_value(records).expect("records serialise");
    match metadata {
        None | Some(Value::Null) => Some(serde_json::json!({ "elicitations": list })),
        Some(Value::Object(mut map)) => {
            map.insert("elicitations".to_owned(), list);
            Some(Value::Object(map))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> Elicitation {
        Elicitation {
            server: "x".into(),
            message: "m".repeat(600),
            mode: ElicitationMode::Form { requested_schema: schema },
        }
    }

    /// An answer that comes after the run was told to stop acts on nothing,
    /// even when the VM that would cut the call is stuck
    /// (engine/overrun_watch.rs): the server gets a cancel.
    #[test]
    fn an_answer_given_after_the_run_was_told_to_stop_is_a_cancel() {
        let q = form(json!({"type": "object", "properties": {"ok": {"type": "boolean", "default": true}}}));
        let elicitor = |clock| call_elicitor(Arc::new(crate::gate::approvers::AllowApprover), clock);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let going = Arc::new(RunClock::new(Duration::from_secs(60)));
        let answer = rt.block_on(elicitor(going).elicit(q.clone()));
        assert_eq!(answer.action, ElicitationAction::Accept, "{answer:?}");
        let stopped = Arc::new(RunClock::new(Duration::from_secs(60)));
        stopped.cancel();
        let answer = rt.block_on(elicitor(stopped).elicit(q));
        assert_eq!(answer.action, ElicitationAction::Cancel, "{answer:?}");
    }

    /// The elicitor of call 1 of a program's run timed by `clock`.
    fn call_elicitor(approver: Arc<dyn Approver>, clock: Arc<RunClock>) -> CallElicitor {
        CallElicitor {
            approver,
            clock,
            run_id: Arc::from("run-x"),
            seq: 1,
            tool: Arc::from("ask"),
            caller: Caller::Program,
            questions: Arc::default(),
        }
    }

    /// Counts the questions put to it and never answers them.
    #[derive(Default)]
    struct Silent(std::sync::atomic::AtomicUsize);
    impl Approver for Silent {
        fn decide(&self, _: crate::gate::ApprovalRequest) -> crate::gate::ApprovalFuture {
            Box::pin(std::future::pending())
        }
        fn elicit(&self, _: ElicitationRequest) -> crate::gate::ElicitationReplyFuture {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(std::future::pending())
        }
    }

    /// A question of a run told to stop is not put to anyone, and one put
    /// is withdrawn once the run is told to stop, even when the answer
    /// would never come: the server gets a cancel either way.
    #[test]
    fn a_question_of_a_run_told_to_stop_is_not_asked_or_is_withdrawn() {
        let q = form(json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}));
        let silent = Arc::new(Silent::default());
        let elicitor = |clock| call_elicitor(silent.clone(), clock);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let stopped = Arc::new(RunClock::new(Duration::from_secs(60)));
        stopped.cancel();
        let asked = elicitor(stopped).elicit(q.clone());
        let answer = rt.block_on(async { tokio::time::timeout(Duration::from_secs(30), asked).await });
        let answer = answer.expect("a question of a run told to stop waited for an answer");
        assert_eq!(answer.action, ElicitationAction::Cancel, "{answer:?}");
        assert_eq!(silent.0.load(std::sync::atomic::Ordering::SeqCst), 0, "asked after the stop");

        let going = Arc::new(RunClock::new(Duration::from_secs(60)));
        let cancel = going.clone();
        let answer = rt.block_on(async move {
            let asked = tokio::spawn(elicitor(going).elicit(q));
            tokio::time::sleep(Duration::from_millis(50)).await;
            cancel.cancel();
            tokio::time::timeout(Duration::from_secs(30), asked).await
        });
        let answer = answer.expect("the question was not withdrawn").unwrap();
        assert_eq!(answer.action, ElicitationAction::Cancel, "{answer:?}");
        assert_eq!(silent.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn an_accepted_form_that_does_not_match_is_declined_and_values_are_not_recorded() {
        let q =
            form(json!({"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}));
        let accept = |content: Value| ElicitationReply {
            answer: ElicitationAnswer {
                action: ElicitationAction::Accept,
                content: content.as_object().cloned(),
            },
            by: "cmd:x".into(),
            reason: None,
        };
        let bad = checked(accept(json!({"age": "secret"})), &q);
        assert_eq!(bad.answer, ElicitationAnswer::decline());
        assert_eq!(bad.by, CODEMODE);
        let why = bad.reason.unwrap();
        assert!(why.contains("/age fails `type`") && !why.contains("secret"), "{why}");
        let good = checked(accept(json!({"age": 41})), &q);
        assert_eq!(good.answer.action, ElicitationAction::Accept);
        let r = record(&q, &good, Duration::from_millis(3));
        assert_eq!(r.content_keys, ["age"]);
        assert_eq!(r.fields, ["age"]);
        assert_eq!(r.message.chars().count(), ElicitationRecord::MAX_MESSAGE_CHARS + 1);
        assert!(!serde_json::to_string(&r).unwrap().contains("41"), "values are not recorded");
    }

    #[test]
    fn a_url_is_recorded_without_its_query() {
        let q = Elicitation {
            server: "x".into(),
            message: "pay".into(),
            mode: ElicitationMode::Url {
                url: "https://p.example/c?token=abc#f".into(),
                elicitation_id: "1".into(),
            },
        };
        let r = record(&q, &ElicitationReply::decline("deny", "no"), Duration::ZERO);
        assert_eq!(r.url.as_deref(), Some("https://p.example/c"));
        assert!(r.declined());
    }

    #[test]
    fn a_schema_that_is_not_json_schema_is_not_asked() {
        let q = form(json!({"type": 7}));
        assert!(passable(&q).unwrap_err().contains("not valid JSON Schema"));
    }

    #[test]
    fn metadata_gets_the_records() {
        let r = record(
            &form(json!({"type": "object"})),
            &ElicitationReply::cancel("prompt", "c"),
            Duration::ZERO,
        );
        let m = with_elicitations(Some(json!({"server": "x"})), std::slice::from_ref(&r)).unwrap();
        assert_eq!(m["server"], "x");
        assert_eq!(m["elicitations"][0]["action"], "cancel");
        assert_eq!(
            with_elicitations(None, std::slice::from_ref(&r)).unwrap()["elicitations"][0]["answered_by"],
            "prompt"
        );
        assert_eq!(with_elicitations(Some(json!(3)), &[r]), Some(json!(3)));
    }

    #[tokio::test]
    async fn the_timeout_does_not_count_the_wait_for_an_answer() {
        let q = Arc::new(CallQuestions::default());
        let asker = q.clone();
        let mut work = Box::pin(async move {
            asker.start_asking();
            tokio::time::sleep(Duration::from_millis(1500)).await;
            asker.stop_asking();
            tokio::time::sleep(Duration::from_millis(10)).await;
            "done"
        });
        // 1.5 s of work, nearly all of it waiting on an answer: fits in 1 s.
        assert_eq!(q.timeout(Duration::from_secs(1), &mut work).await, Ok("done"));
        let mut slow = Box::pin(tokio::time::sleep(Duration::from_secs(30)));
        assert_eq!(q.timeout(Duration::from_millis(10), &mut slow).await, Err(()));
    }
}
