//! An answer for the rest of the run given through `codemode mcp serve`
//! (elicitation, or `input_required`) reaches no further than the terminal
//! prompt's `a`: the same tool, in the same run, and never a call an ask
//! rule sends to a person. A program that got `write` granted tried to
//! have an `edit`, a rule-asked write, a `bash` command and the next run's
//! write pass unasked on the strength of it.

use serde_json::json;

use crate::serve_clients::{Served, client, clients, execute};

/// Writes `n1.txt` (the person grants the rest of the run), then tries a
/// write an ask rule covers, an edit of `b.txt` and a bash command;
/// returns `ok` or the error's kind for each.
const AFTER_A_GRANT: &str = "const o = [];\n\
    const t = async (f) => { try { await f(); o.push('ok'); } catch (e) { o.push(e.kind); } };\n\
    await t(() => tools.write({path: 'n1.txt', content: 'x'}));\n\
    await t(() => tools.write({path: 'secrets/k.txt', content: 'x'}));\n\
    await t(() => tools.edit({path: 'b.txt', edits: [{old: 'one', new: 'ONE'}]}));\n\
    await t(() => tools.bash({command: 'echo ran >> count.txt'}));\n\
    await t(() => tools.write({path: 'n2.txt', content: 'x'}));\n\
    return o.join(',');";

#[test]
fn a_grant_through_the_client_covers_only_this_runs_calls_of_this_tool() {
    let Some(dir) = clients() else { return };
    for sdk in ["v1", "v2"] {
        let served = Served::new();
        let policy =
            served.path().parent().unwrap().join(format!("grants-{sdk}-{}.toml", std::process::id()));
        std::fs::write(&policy, "[rules]\nask = [\"write(secrets/**)\"]\n").unwrap();
        let grant = json!({"action": "accept", "content": {"rest_of_run": true}});
        let plan = json!({
            "server": served.server(&["--config", policy.to_str().unwrap()]),
            "elicitation": "accept",
            // The grant on the first question; every later one declined.
            "answers": [grant, {"action": "decline"}],
            "steps": [
                {"call": execute(AFTER_A_GRANT)},
                {"call": execute("try { await tools.write({path: 'n3.txt', content: 'x'}); return 'ok' } catch (e) { return e.kind }")},
            ],
        });
        let out = client(&dir, sdk, &plan);
        let _ = std::fs::remove_file(&policy);
        // The rule's write, the edit and the command were asked and
        // declined; the later write in the same run passed unasked.
        assert_eq!(out.structured(0)["value"], "ok,denied,denied,denied,ok", "{sdk}: {}", out.text(0));
        assert!(!served.path().join("secrets/k.txt").exists(), "{sdk}");
        assert_eq!(std::fs::read_to_string(served.path().join("b.txt")).unwrap(), "one\ntwo\nthree\nfour\n");
        assert!(!served.path().join("count.txt").exists(), "{sdk}");
        // The next run's write is asked again.
        assert_eq!(out.structured(1)["value"], "denied", "{sdk}: {}", out.text(1));
        assert_eq!(out.elicitations.len(), 5, "{sdk}: {:#?}", out.elicitations);
        assert!(out.elicitations[1].contains("secrets/k.txt"), "{sdk}: {}", out.elicitations[1]);
        // A call a rule asks about offers no grant.
        assert!(!out.elicitations[1].contains("rest_of_run"), "{sdk}: {}", out.elicitations[1]);
    }
}

/// Runs `sh x.sh` twice, rewrites `x.sh` (no approval under auto-review)
/// and runs it again; returns each run's output or the error's kind.
const REWRITE_THE_SCRIPT: &str = "const run = async () => { try { return (await tools.bash({command: 'sh x.sh'})).content.stdout.trim(); }\n\
      catch (e) { return e.kind; } };\n\
    await tools.write({path: 'x.sh', content: 'echo harmless'});\n\
    const o = [await run(), await run()];\n\
    await tools.write({path: 'x.sh', content: 'echo EVIL'});\n\
    o.push(await run());\n\
    return o.join(',');";

/// The terminal's command grant, given through the client: it holds for
/// the exact command only until another call that may change files runs.
/// On `input_required` it is not offered at all (a paused run's state
/// does not carry the calls made since).
#[test]
fn a_command_grant_through_the_client_ends_when_the_script_is_rewritten() {
    let Some(dir) = clients() else { return };
    for sdk in ["v1", "v2"] {
        let served = Served::new();
        let grant = json!({"action": "accept", "content": {"rest_of_run": true}});
        let plan = json!({
            "server": served.server(&["--posture", "auto-review"]),
            "elicitation": "accept",
            "answers": [grant, {"action": "decline"}],
            "steps": [{"call": execute(REWRITE_THE_SCRIPT)}],
        });
        let out = client(&dir, sdk, &plan);
        let value = &out.structured(0)["value"];
        if sdk == "v1" {
            assert!(
                out.elicitations[0].contains("for call 2, this exact command"),
                "{}",
                out.elicitations[0]
            );
            assert_eq!(value, "harmless,harmless,denied", "{sdk}: {}", out.text(0));
            assert_eq!(out.elicitations.len(), 2, "{sdk}: {:#?}", out.elicitations);
        } else {
            assert!(!out.elicitations[0].contains("rest_of_run"), "{}", out.elicitations[0]);
            assert_eq!(value, "harmless,denied,denied", "{sdk}: {}", out.text(0));
        }
    }
}
