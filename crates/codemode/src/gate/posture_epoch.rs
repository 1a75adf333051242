//! The `posture_epoch` step: a posture change during a run refuses the rest of that run.
//!
//! A program was written under the posture its run started with; if the
//! posture changes meanwhile (wider or narrower), its remaining calls are
//! refused and the model retries them under the new posture.

use std::sync::Mutex;

use super::{CallRequest, GateContext, Posture, Preparation, Step, Verdict};

/// The engine's current posture and how many times it changed (its epoch).
#[derive(Debug, Default)]
pub(crate) struct PostureCell(Mutex<(Posture, u64)>);

impl PostureCell {
    pub(crate) fn new(posture: Posture) -> Self {
        PostureCell(Mutex::new((posture, 0)))
    }

    /// The posture now and its epoch.
    pub(crate) fn get(&self) -> (Posture, u64) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the posture; any change starts a new epoch.
    pub(crate) fn set(&self, posture: Posture) {
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if state.0 != posture {
            *state = (posture, state.1 + 1);
        }
    }
}

/// Refuses every call made after the engine's posture changed.
pub(crate) struct PostureEpoch;

impl Step for PostureEpoch {
    fn name(&self) -> &'static str {
        "posture_epoch"
    }

    fn check(&self, _: &CallRequest<'_>, cx: &GateContext<'_>, _: &mut Preparation) -> Verdict {
        match cx.posture_at_start {
            Some(start) => Verdict::Refuse(format!(
                "the permission posture changed during this run (from {} to {}); \
                 the rest of the program's calls are refused: run it again",
                start.as_str(),
                cx.posture.as_str()
            )),
            None => Verdict::Next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::gate::{Policy, Posture};
    use serde_json::json;

    #[test]
    fn a_changed_posture_refuses() {
        let catalog = Catalog::new(vec![]).unwrap();
        let policy = Policy::default();
        let args = json!({});
        let call = CallRequest::for_test("read", &args);
        let same = GateContext::for_test(&catalog, &policy);
        assert_eq!(PostureEpoch.check(&call, &same, &mut Default::default()), Verdict::Next);
        let changed = GateContext {
            posture: Posture::FullAccess,
            posture_at_start: Some(Posture::Ask),
            ..GateContext::for_test(&catalog, &policy)
        };
        let v = PostureEpoch.check(&call, &changed, &mut Default::default());
        assert!(matches!(v, Verdict::Refuse(r) if r.contains("from ask to full-access")));
    }
}
