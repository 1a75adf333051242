//! Dates as text: RFC 3339 timestamps in journals, trust records and
//! receipts, without a date library.

use std::time::{SystemTime, UNIX_EPOCH};

/// `now` as an RFC 3339 UTC timestamp to the second
/// (`2026-12-01T14:24:41Z`).
pub fn rfc3339_utc(now: SystemTime) -> String {
    let secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let t = secs % 86_400;
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", t / 3600, t / 60 % 60, t % 60)
}

/// Year, month, day of the proleptic Gregorian calendar for days since
/// 1970-01-01 (H. Hinnant's `civil_from_days`).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`, the inverse of [`civil_from_days`]). `m` is 1-12,
/// `d` 1-31; out-of-range values give a meaningless day, not a panic.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds since the Unix epoch of an ISO 8601 basic-format UTC time to
/// the second, `YYYYMMDDThhmmssZ` (`20261206T012732Z`, as run ids carry
/// it); `None` for anything else or an impossible date or time.
pub fn basic_utc_unix(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| -> Option<u32> {
        b[r.clone()].iter().all(u8::is_ascii_digit).then(|| text[r].parse().ok())?
    };
    let (y, m, d) = (n(0..4)?, n(4..6)?, n(6..8)?);
    let (hh, mm, ss) = (n(9..11)?, n(11..13)?, n(13..15)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let days = days_from_civil(i64::from(y), m, d);
    if civil_from_days(days) != (i64::from(y), m, d) {
        return None;
    }
    let days = u64::try_from(days).ok()?;
    Some(days * 86_400 + u64::from(hh * 3600 + mm * 60 + ss))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_from_civil_inverts_civil_from_days() {
        for z in [-800_000, -1, 0, 1, 11_016, 20_786, 20_793, 2_932_896] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z, "{y}-{m}-{d}");
        }
        assert_eq!(days_from_civil(2026, 12, 6), 20_793);
    }

    #[test]
    fn basic_format_times_read_back() {
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
        let compact: String = rfc3339_utc(now).chars().filter(|c| !matches!(c, '-' | ':')).collect();
        assert_eq!(basic_utc_unix(&compact), Some(secs), "{compact}");
        assert_eq!(basic_utc_unix("20261206T012732Z"), Some(20_793 * 86_400 + 5_252));
        for bad in [
            "20261306T012732Z",
            "20261206T252732Z",
            "20260230T012732Z",
            "20261206T012732",
            "+0261206T012732Z",
        ] {
            assert_eq!(basic_utc_unix(bad), None, "{bad}");
        }
    }
}
