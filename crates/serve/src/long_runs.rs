//! Runs longer than a request (docs/SERVE.md, "Runs longer than a
//! request"): the `wait` and `cancel` fields of `execute_tools`, the runs a
//! server let go on after answering `running`, and that answer.
//!
//! A request whose run has not ended after [`ServeOptions::yield_after`]
//! answers `{status: "running", run_id}`; the run goes on in the server,
//! held here by its id ([`Background`]) until it ends and for
//! [`KEEP_ENDED`] after, so a later `{"wait": RUN_ID}` gets its result.
//!
//! [`ServeOptions::yield_after`]: super::ServeOptions::yield_after

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};
use tokio::sync::{mpsc::UnboundedSender, watch};

use super::arguments::Request;
use codemode::run::Canceller;

/// The name of the field of `execute_tools`' input that waits for a run.
pub const WAIT: &str = "wait";

/// The name of the field of `execute_tools`' input that cancels a run.
pub const CANCEL: &str = "cancel";

/// How long a run that ended stays known to `wait` after its end.
pub(crate) const KEEP_ENDED: Duration = Duration::from_secs(600);

/// Most runs held at once; past it, the runs that ended longest ago are
/// forgotten first (runs still going are never forgotten).
const MOST_HELD: usize = 1024;

/// `{"wait": RUN_ID}` or `{"cancel": RUN_ID}` read from `args`, each alone
/// and a non-empty string; `None` when `args` has neither field.
pub(crate) fn read(args: &Value) -> Option<Request> {
    let object = args.as_object()?;
    let field = [WAIT, CANCEL].into_iter().find(|f| object.contains_key(*f))?;
    let others: Vec<String> = object.keys().filter(|k| *k != field).map(|k| format!("`{k}`")).collect();
    if !others.is_empty() {
        return Some(Request::Refused(format!(
            "`{field}` takes a run_id and no other field; remove {}",
            others.join(", ")
        )));
    }
    let Some(run_id) = object[field].as_str().filter(|s| !s.is_empty()) else {
        return Some(Request::Refused(format!(
            "`{field}` must be the run_id (a string) of a run an earlier call answered `running`"
        )));
    };
    Some(if field == WAIT { Request::Wait(run_id.to_owned()) } else { Request::Cancel(run_id.to_owned()) })
}

/// Where the calls that end in a run go as progress: to the request
/// waiting for it now, if any (the first request, then each `wait`).
#[derive(Clone, Default)]
pub(crate) struct Relay(Arc<Mutex<Option<UnboundedSender<String>>>>);

impl Relay {
    /// Sends the calls' lines to `sender` from now on (`None`: nowhere).
    pub(crate) fn set(&self, sender: Option<UnboundedSender<String>>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = sender;
    }

    /// Sends `line` to the request waiting now, if any.
    pub(crate) fn send(&self, line: String) {
        if let Some(sender) = &*self.0.lock().unwrap_or_else(PoisonError::into_inner) {
            let _ = sender.send(line);
        }
    }
}

/// A run this server answered `running` for.
pub(crate) struct Held<T> {
    /// Cancels the run.
    pub canceller: Canceller,
    /// Its end (what answers it) once it has ended.
    pub ended: watch::Receiver<Option<Arc<T>>>,
    /// Where its calls' progress goes.
    pub relay: Relay,
    /// When it started (this request's start, for a resumed run).
    pub started: Instant,
}

/// A run held, and when it ended (if it has).
type Entry<T> = (Arc<Held<T>>, Option<Instant>);

/// The runs this server let go on after answering `running`, by id.
pub(crate) struct Background<T> {
    runs: Mutex<HashMap<String, Entry<T>>>,
}

impl<T> Default for Background<T> {
    fn default() -> Self {
        Background { runs: Mutex::default() }
    }
}

impl<T: Send + Sync + 'static> Background<T> {
    /// Holds `held` as run `run_id`, forgetting runs that ended more than
    /// [`KEEP_ENDED`] ago, or the oldest ended ones past [`MOST_HELD`].
    pub(crate) fn hold(&self, run_id: &str, held: Arc<Held<T>>) {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.retain(|_, (_, ended)| ended.is_none_or(|at| at.elapsed() < KEEP_ENDED));
        while runs.len() >= MOST_HELD {
            let oldest = runs.iter().filter_map(|(id, (_, at))| at.map(|at| (at, id.clone()))).min();
            let Some((_, id)) = oldest else { break };
            runs.remove(&id);
        }
        runs.insert(run_id.to_owned(), (held, None));
    }

    /// Notes that run `run_id` has ended (it is forgotten [`KEEP_ENDED`]
    /// later).
    pub(crate) fn ended(&self, run_id: &str) {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, at)) = runs.get_mut(run_id) {
            *at = Some(Instant::now());
        }
    }

    /// Whether a run held here has not ended yet.
    pub(crate) fn going(&self) -> bool {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner).values().any(|(_, ended)| ended.is_none())
    }

    /// Run `run_id`, when this server holds it (going on, or ended less
    /// than [`KEEP_ENDED`] ago).
    pub(crate) fn get(&self, run_id: &str) -> Option<Arc<Held<T>>> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let (held, ended) = runs.get(run_id)?;
        ended.is_none_or(|at| at.elapsed() < KEEP_ENDED).then(|| held.clone())
    }
}

/// The answer saying run `run_id`, started at `started`, goes on: a tool
/// result (not an error) with status `running`, telling the model how to
/// wait for it or cancel it, and that a wait answers within `after`.
pub(crate) fn running_result(run_id: &str, started: Instant, after: Duration) -> CallToolResult {
    let text = format!(
        "running: run {run_id} has run {secs} s and goes on in the server. To get its result, call execute_tools \
         with {{\"wait\": \"{run_id}\"}} (it answers when the run ends, or `running` again after {after} s: then \
         wait again); to stop it, {{\"cancel\": \"{run_id}\"}}.",
        secs = started.elapsed().as_secs(),
        after = after.as_secs_f64(),
    );
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({
        "status": "running", "run_id": run_id, "value": null, "value_truncated": null, "error": null,
        "calls": {}, "pending": [], "receipt_path": null
    }));
    result
}

/// The answer to a `wait` or `cancel` of a run this server does not hold:
/// what the journal store says of it, if anything.
pub(crate) fn not_held(field: &str, run_id: &str, state: Option<String>) -> CallToolResult {
    let known = match state {
        Some(state) => format!("its journal says it is {state} (`codemode runs show {run_id}` shows it)"),
        None => "the journal store has no run of that id either".to_owned(),
    };
    let text = format!(
        "`{field}`: run {run_id} is not a run this server answered `running` for (or it ended more than {} \
         minutes ago); {known}. Only a run_id an earlier execute_tools call answered with status `running` can \
         be waited for or cancelled here",
        KEEP_ENDED.as_secs() / 60
    );
    CallToolResult::error(vec![ContentBlock::text(text)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_and_cancel_are_read_alone() {
        assert!(read(&json!({"code": "1"})).is_none());
        assert!(matches!(read(&json!({"wait": "r-1"})), Some(Request::Wait(r)) if r == "r-1"));
        assert!(matches!(read(&json!({"cancel": "r-1"})), Some(Request::Cancel(r)) if r == "r-1"));
        let refused = |args: Value| match read(&args) {
            Some(Request::Refused(why)) => why,
            _ => panic!("{args}"),
        };
        assert!(refused(json!({"wait": "r", "code": "x"})).contains("remove `code`"));
        assert!(refused(json!({"cancel": 3})).contains("must be the run_id"));
        assert!(refused(json!({"wait": ""})).contains("must be the run_id"));
    }

    #[test]
    fn the_running_answer_says_how_to_wait_and_cancel() {
        let r = running_result("run-9", Instant::now(), Duration::from_secs(45));
        assert_eq!(r.is_error, Some(false));
        let text = r.content[0].as_text().unwrap().text.clone();
        assert!(text.contains("{\"wait\": \"run-9\"}") && text.contains("{\"cancel\": \"run-9\"}"), "{text}");
        let validator = jsonschema::validator_for(&super::super::result::output_schema()).unwrap();
        assert!(validator.is_valid(r.structured_content.as_ref().unwrap()));
    }
}
