// The shared part of the client scripts: reads the plan, runs its steps
// through an SDK-specific `session`, prints one JSON line per step.
//
// A plan (argv[2], JSON):
//   {
//     "server": {"command": "...", "args": [...], "cwd": "...", "env": {...}} | {"url": "http://..."},
//     "elicitation": "accept" | "decline" | "cancel" | null,   // null: not declared
//     "elicitation_delay_ms": 0,        // the person takes this long to answer
//     "answers": [{"action": "accept", "content": {...}, "delay_ms": 0}, ...],
//                                       // the person's answers to the questions in turn
//                                       // (the last one repeats); default: `elicitation`;
//                                       // v1: `delay_ms` replaces elicitation_delay_ms
//     "steps": [
//       {"list": true},
//       {"call": {"name": "execute_tools", "arguments": {...}},
//        "progress": true,                 // pass onprogress, report the notifications: `progress`
//                                          // as the SDK delivered them, `wire_progress` as they
//                                          // arrived before the call's response, `late_progress`
//                                          // those that arrived after it (see watchWire)
//        "abort_when_file": "/path",       // abort the request once this file exists
//        "raw": true,                      // v1: send the params as given (requestState...)
//        "allow_input_required": true,     // v2: hand `input_required` back instead of fulfilling it
//        "state_from": 1,                  // put step 1's requestState into params.requestState
//        "state": "...",                   // or this requestState
//        "responses": {...},               // params.inputResponses
//        "timeout_ms": 60000,              // the SDK's request timeout (default 120000)
//        "cancel_of": 1}                   // arguments {"cancel": step 1's run_id}
//       {"wait_for": 1,                    // while step 1's run is `running`, call
//        "timeout_ms": 60000,              // execute_tools {"wait": RUN_ID} again (at most
//        "most": 20, "progress": true}     // `most` times); reports each wait in `waits`
//     ]
//   }
// Output: one line `{"step": i, ...}` per step, then `{"done": true,
// "elicitations": [...], "withdrawn": [...]}` naming each elicitation the
// server sent, and (v1) the indexes of those it cancelled
// (`notifications/cancelled`) before they were answered.
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

export function readPlan() {
  const text = process.argv[2];
  if (!text) {
    console.error('usage: node CLIENT.mjs PLAN_JSON (see tests/node/clients/plan.mjs)');
    process.exit(2);
  }
  return JSON.parse(text);
}

/// The person's answer to question `i` (from 0) of `plan`: `answers[i]`
/// (the last one once they run out), else `elicitation` (with empty content
/// when it accepts).
export function reply(plan, i) {
  const answers = plan.answers;
  if (answers?.length) return answers[Math.min(i, answers.length - 1)];
  return { action: plan.elicitation, ...(plan.elicitation === 'accept' ? { content: {} } : {}) };
}

/// An AbortController that aborts once `file` exists (polled every 20 ms).
export function abortWhenFile(file) {
  const controller = new AbortController();
  (async () => {
    while (!existsSync(file)) await sleep(20);
    controller.abort(new Error(`aborted by the client once ${file} existed`));
  })();
  return controller;
}

/// Watches the messages `transport` delivers, in the order they arrive, for
/// progress notifications and responses. The SDKs hand a notification to its
/// handler one microtask later but a response at once, so a progress
/// notification that arrives in the same read as its request's response is
/// dropped by the SDK ("unknown token"; typescript-sdk issue 2580) though
/// the server sent it first. Call after `connect` (which sets onmessage).
export function watchWire(transport) {
  const events = [];
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (message?.method === 'notifications/progress') {
      const { progressToken, progress, message: text } = message.params ?? {};
      events.push({ token: String(progressToken), progress, message: text });
    } else if (message?.method === undefined && message?.id !== undefined) {
      events.push({ response: String(message.id) });
    }
    deliver?.(message, extra);
  };
  return events;
}

/// The progress notifications among `events` (watchWire's, from one step),
/// split into those that arrived before their request's response and after.
function progressOnWire(events) {
  const answered = new Set();
  const before = [];
  const after = [];
  for (const e of events) {
    if (e.response !== undefined) answered.add(e.response);
    else (answered.has(e.token) ? after : before).push({ progress: e.progress, message: e.message });
  }
  return { wire_progress: before, late_progress: after };
}

function out(value) {
  process.stdout.write(JSON.stringify(value) + '\n');
}

/// Runs `plan`'s steps with `session`: {connected, list(), call(params, options)}.
/// `wire` is watchWire's list for the session's transport; `withdrawn`
/// the questions the server cancelled, filled by the client's handler.
export async function runPlan(plan, session, elicitations, wire = [], withdrawn = []) {
  out({ connected: session.connected });
  const results = [];
  for (const [i, step] of plan.steps.entries()) {
    try {
      if (step.list) {
        const tools = await session.list();
        out({ step: i, tools: tools.map((t) => t.name), bytes: JSON.stringify(tools).length, listed: tools });
      } else if (step.call) {
        const progress = [];
        const options = {};
        const params = { ...step.call };
        if (step.cancel_of !== undefined) params.arguments = { cancel: results[step.cancel_of]?.structuredContent?.run_id };
        if (step.state_from !== undefined) params.requestState = results[step.state_from]?.requestState;
        if (step.state !== undefined) params.requestState = step.state;
        if (step.responses !== undefined) params.inputResponses = step.responses;
        if (step.allow_input_required) options.allowInputRequired = true;
        if (step.progress) options.onprogress = (p) => progress.push(p);
        if (step.abort_when_file) options.signal = abortWhenFile(step.abort_when_file).signal;
        if (step.timeout_ms) options.timeout = step.timeout_ms;
        const seen = wire.length;
        const result = await session.call(params, options, step.raw === true);
        results[i] = result;
        out({ step: i, result, progress, ...progressOnWire(wire.slice(seen)) });
      } else if (step.wait_for !== undefined) {
        results[i] = await waitFor(session, step, results[step.wait_for], i);
      }
    } catch (e) {
      out({ step: i, error: String(e?.message ?? e), code: e?.code ?? null });
    }
  }
  out({ done: true, elicitations, withdrawn });
}

/// Waits for the run of `result` (a `running` answer) as a model would:
/// execute_tools {"wait": RUN_ID} until the answer is not `running`.
async function waitFor(session, step, result, i) {
  const runId = result?.structuredContent?.run_id;
  const waits = [];
  while (result?.structuredContent?.status === 'running' && waits.length < (step.most ?? 20)) {
    const progress = [];
    const options = { timeout: step.timeout_ms ?? 120000 };
    if (step.progress) options.onprogress = (p) => progress.push(p);
    const started = Date.now();
    result = await session.call({ name: 'execute_tools', arguments: { wait: runId } }, options, false);
    waits.push({ ms: Date.now() - started, status: result?.structuredContent?.status ?? null, progress });
  }
  out({ step: i, result, waits });
  return result;
}
