//! Run ids: `run-YYYYMMDDThhmmssZ-xxxxxxxx`, sortable by start time, unique
//! within and across processes (8 hex digits of a SHA-256 over the clock,
//! the process id and a counter).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use codemode_base::time_text::civil_from_days;

use sha2::{Digest, Sha256};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new run id.
pub(crate) fn new_run_id() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut h = Sha256::new();
    h.update(now.as_nanos().to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let d = h.finalize();
    let secs = now.as_secs();
    let (y, m, day) = civil_from_days((secs / 86_400) as i64);
    let t = secs % 86_400;
    format!(
        "run-{y:04}{m:02}{day:02}T{:02}{:02}{:02}Z-{:02x}{:02x}{:02x}{:02x}",
        t / 3600,
        t / 60 % 60,
        t % 60,
        d[0],
        d[1],
        d[2],
        d[3]
    )
}

/// Whether `id` has the form [`new_run_id`] makes: `run-`, 8 digits, `T`,
/// 6 digits, `Z-`, 8 lower-case hex digits.
pub(crate) fn is_run_id(id: &str) -> bool {
    let b = id.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    b.len() == 29
        && id.starts_with("run-")
        && digits(4..12)
        && b[12] == b'T'
        && digits(13..19)
        && &id[19..21] == "Z-"
        && b[21..].iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_right() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn ids_are_unique() {
        let a = new_run_id();
        let b = new_run_id();
        assert_ne!(a, b);
        assert!(a.starts_with("run-") && a.len() == "run-20261129T184235Z-ab12cd34".len(), "{a}");
        assert!(is_run_id(&a) && is_run_id("run-20261129T184235Z-ab12cd34"));
        for bad in ["run-x", "run-20261129T184235Z-AB12CD34", "run-20261129T184235Z-ab12cd3/", "../etc"] {
            assert!(!is_run_id(bad), "{bad}");
        }
    }
}
