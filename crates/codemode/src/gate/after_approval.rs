//! The `after_approval` step. A call approved under a posture that
//! narrowed while it waited is refused: the approval was given for a wider
//! posture than the one now in force.

use super::Posture;

/// Why the call is refused, when the posture narrowed from `before` to `now`.
pub(crate) fn narrowed(before: Posture, now: Posture) -> Option<String> {
    (now < before).then(|| {
        format!(
            "the posture narrowed from {} to {} while the call waited for approval; make the call again",
            before.as_str(),
            now.as_str()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_narrower_posture_refuses() {
        assert!(narrowed(Posture::FullAccess, Posture::Ask).unwrap().contains("from full-access to ask"));
        assert!(narrowed(Posture::AutoReview, Posture::Ask).is_some());
        assert!(narrowed(Posture::Ask, Posture::Ask).is_none());
        assert!(narrowed(Posture::Ask, Posture::FullAccess).is_none());
    }
}
