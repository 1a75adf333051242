//! Runs longer than a request, on the server's side: a request whose run
//! has not ended after `yield_after` answers `running` and lets the run go
//! on ([`CodeModeServer::wait_or_yield`]); `{"wait": RUN_ID}` and
//! `{"cancel": RUN_ID}` answer with the run's result
//! ([`CodeModeServer::wait_or_cancel`]). docs/SERVE.md, "Runs longer than a
//! request".

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{CodeModeServer, Done, Progress, RunEnd, Started, place_receipt};
use crate::approvals::Route;
use crate::arguments::Request;
use crate::long_runs::{self, CANCEL, Held, Relay, WAIT};
use codemode::Receipt;
use codemode::receipt::CallReceipt;
use codemode::run::Canceller;

/// How long a `cancel` waits for the run to end once cancelled, at most
/// (its calls are cancelled at once; a receipt is usually there in
/// milliseconds).
const CANCEL_WAIT: Duration = Duration::from_secs(30);

/// How often a `wait` with a progress token says the run still goes on,
/// when none of its calls ended meanwhile.
const HEARTBEAT: Duration = Duration::from_secs(10);

/// How a request's run went.
pub(super) enum Waited {
    /// It ended: its receipt.
    Ended(Box<Receipt>),
    /// It goes on in the server: the `running` answer.
    Yielded(CallToolResult),
}

/// The observer of a run's calls: a line per finished call to whichever
/// request waits for the run now (`relay`).
pub(super) fn observer(relay: &Relay) -> codemode::receipt::CallEndObserver {
    let relay = relay.clone();
    Arc::new(move |call: &CallReceipt| {
        let status = serde_json::to_value(call.status).ok();
        let status = status.as_ref().and_then(Value::as_str).unwrap_or("ended");
        relay.send(format!("call {} {} {status}", call.seq, call.tool));
    })
}

impl CodeModeServer {
    /// Waits for `started`'s receipt: cancels the run if `cancelled` fires
    /// first; with `after`, a run not ended by then goes on in the server
    /// (held for `wait` and `cancel`, its receipt saved when it ends) and
    /// the answer is `running`.
    pub(super) async fn wait_or_yield(
        &self,
        started: Started,
        cancelled: &CancellationToken,
        after: Option<Duration>,
        relay: &Relay,
        route: &Route,
    ) -> Waited {
        let Some(after) = after else { return Waited::Ended(Box::new(started.wait(cancelled).await)) };
        let begun = Instant::now();
        let (run_id, canceller, mut end) = match started.parts() {
            Ok(parts) => parts,
            Err(receipt) => return Waited::Ended(receipt),
        };
        tokio::select! {
            biased;
            receipt = &mut end => Waited::Ended(Box::new(receipt)),
            () = cancelled.cancelled() => { canceller.cancel(); Waited::Ended(Box::new(end.await)) }
            () = tokio::time::sleep(after) => {
                self.go_on(&run_id, canceller, end, relay, route.clone(), begun);
                Waited::Yielded(long_runs::running_result(&run_id, begun, after))
            }
        }
    }

    /// Lets run `run_id` go on after its request's answer: held by its id
    /// until it ends (cancelled when the server stops), then its receipt
    /// saved and kept for `wait`.
    fn go_on(
        &self,
        run_id: &str,
        canceller: Canceller,
        end: RunEnd,
        relay: &Relay,
        route: Route,
        begun: Instant,
    ) {
        let (ended, watched) = tokio::sync::watch::channel(None);
        relay.set(None);
        let held =
            Held { canceller: canceller.clone(), ended: watched, relay: relay.clone(), started: begun };
        self.inner.background.hold(run_id, Arc::new(held));
        // A stopping server waits for it as for a request (unless it is
        // stopping already: then the run is cancelled below at once).
        let running = self.inner.inflight.clone().try_read_owned().ok();
        let (server, run_id) = (self.clone(), run_id.to_owned());
        tokio::spawn(async move {
            let mut end = end;
            let stop = server.inner.stop.clone();
            let mut receipt = tokio::select! {
                receipt = &mut end => receipt,
                () = stop.cancelled() => { canceller.cancel(); end.await }
            };
            let engine = &server.inner.engine;
            let place = place_receipt(engine, &mut receipt);
            let saved = place.path();
            // The file is written here (the answers that name it come later);
            // the run's end is kept, without its place, to answer `wait`s.
            let answer = Done { receipt: receipt.clone(), route, saved, place: None };
            Done { receipt, route: Route::Pause, saved: None, place: Some(place) }.save(engine).await;
            server.inner.background.ended(&run_id);
            let _ = ended.send(Some(Arc::new(answer)));
            drop(running);
        });
    }

    /// Answers `{"wait": RUN_ID}` or `{"cancel": RUN_ID}`; `None` for any
    /// other request (or one answering an `input_required` result).
    pub(super) async fn wait_or_cancel(
        &self,
        params: &CallToolRequestParams,
        args: &Value,
        cx: &RequestContext<RoleServer>,
    ) -> Option<CallToolResponse> {
        if params.request_state.is_some() || params.input_responses.is_some() {
            return None;
        }
        let (run_id, cancel) = match long_runs::read(args)? {
            Request::Wait(run_id) => (run_id, false),
            Request::Cancel(run_id) => (run_id, true),
            Request::Refused(why) => return Some(super::input_error(why).into()),
            _ => return None,
        };
        let Some(held) = self.inner.background.get(&run_id) else {
            return Some(self.not_held(&run_id, cancel).await.into());
        };
        let bound = match cancel {
            true => {
                held.canceller.cancel();
                CANCEL_WAIT
            }
            false => self.inner.options.yield_after.unwrap_or(crate::DEFAULT_YIELD_AFTER),
        };
        Some(match self.wait_for(&held, bound, cx).await {
            Some(done) => self.answer(&done, params, args),
            None => long_runs::running_result(&run_id, held.started, bound).into(),
        })
    }

    /// Run `held`'s end, if it comes within `bound` and before the request
    /// is cancelled; meanwhile, with a progress token, its finished calls
    /// and a line every [`HEARTBEAT`] as progress notifications.
    async fn wait_for(
        &self,
        held: &Held<Done>,
        bound: Duration,
        cx: &RequestContext<RoleServer>,
    ) -> Option<Arc<Done>> {
        let progress = Progress::start(cx);
        let heartbeat = progress.as_ref().map(|p| {
            held.relay.set(Some(p.sender.clone()));
            let (sender, started) = (p.sender.clone(), held.started);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(HEARTBEAT).await;
                    let line = format!("still running after {} s", started.elapsed().as_secs());
                    if sender.send(line).is_err() {
                        return;
                    }
                }
            })
        });
        let mut ended = held.ended.clone();
        let done = tokio::select! {
            done = ended.wait_for(Option::is_some) => done.ok().and_then(|d| (*d).clone()),
            () = tokio::time::sleep(bound) => None,
            () = cx.ct.cancelled() => None,
        };
        if let Some(task) = heartbeat {
            task.abort();
            held.relay.set(None);
        }
        if let Some(p) = progress {
            p.stop().await;
        }
        done
    }

    /// The refusal of a `wait` or `cancel` of run `run_id`, which this
    /// server does not hold, saying what the journal store knows of it.
    async fn not_held(&self, run_id: &str, cancel: bool) -> CallToolResult {
        let state = match self.inner.engine.runs().show(run_id).await {
            Ok(details) => Some(details.state.to_string()),
            Err(_) => None,
        };
        long_runs::not_held(if cancel { CANCEL } else { WAIT }, run_id, state)
    }
}
