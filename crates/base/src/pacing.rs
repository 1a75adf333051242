//! Limits on how a tool or an MCP server is called (docs/LIMITS.md,
//! "Limits per server and per tool"): the most calls in flight, calls per
//! second, and the retry policy. The MCP configuration (a server's entry)
//! and the policy (`[tools.NAME]`) read them with the same checks, from
//! JSON values ([`parse_rate`], [`parse_retry`]), so both files accept the
//! same shapes and say the same things about a bad value.
//!
//! A limit is kept by one process (one engine) unless its `scope` is
//! `"global"` ([`parse_scope`]): then the counts are kept in the journal's
//! PostgreSQL store and hold across every process sharing it (batch
//! workers, replicas).

use std::time::Duration;

use serde_json::Value;

/// The most calls per second a `rate` may allow: 10,000.
pub const MAX_RATE: f64 = 10_000.0;

/// The most attempts a `retry` may make (the first call included): 10.
pub const MAX_ATTEMPTS: u32 = 10;

/// The longest delay between attempts a `retry` may set, and the longest
/// `retryAfterMs` a server's answer is followed for: 10 minutes.
pub const MAX_DELAY: Duration = Duration::from_secs(600);

/// How calls of one tool, or of one MCP server's tools, are paced. Each
/// field is optional; an empty one paces nothing. Kept by one process, or
/// with `global` by every process sharing the PostgreSQL journal store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallLimits {
    /// The most calls running at once; more wait for a slot (the wait is
    /// recorded as the call's `queued_ms` and does not count against its
    /// timeout). `None`: no cap but the run's own `max_in_flight`.
    pub max_in_flight: Option<usize>,
    /// Calls started per second, evenly spaced (a call starts at least
    /// `1 / rate` seconds after the one before); fractions allowed (`0.5`
    /// is one call every 2 s). `None`: no bound.
    pub rate: Option<Rate>,
    /// Failures called again, and how long to wait between attempts.
    /// `None`: a call is made once.
    pub retry: Option<RetryPolicy>,
    /// `scope = "global"`: `max_in_flight` and `rate` hold across every
    /// process sharing the journal store (which must then be able to keep
    /// them: PostgreSQL); `retry` stays per call. `false`: per process.
    pub global: bool,
}

impl CallLimits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.max_in_flight.is_none() && self.rate.is_none() && self.retry.is_none()
    }

    /// Limits with `max_in_flight`, `rate` and `retry`.
    pub fn new(max_in_flight: Option<usize>, rate: Option<Rate>, retry: Option<RetryPolicy>) -> Self {
        CallLimits { max_in_flight, rate, retry, global: false }
    }

    /// These limits with `scope = "global"` when `global`.
    pub fn with_global(mut self, global: bool) -> Self {
        self.global = global;
        self
    }
}

/// Calls per second: a number above 0 and at most [`MAX_RATE`] (made by
/// [`parse_rate`], so never NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate(f64);

// A `Rate` is finite and above 0 (parse_rate checks), so `==` is total.
impl Eq for Rate {}

impl Rate {
    /// Calls per second.
    pub fn per_second(self) -> f64 {
        self.0
    }

    /// The time between two starts: `1 / rate` seconds.
    pub fn interval(self) -> Duration {
        Duration::from_secs_f64(1.0 / self.0)
    }
}

/// When a failed call is made again: exponential backoff from
/// `base_delay`, doubling per attempt, at most `max_delay`, with jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Calls made at most, the first included (2 to [`MAX_ATTEMPTS`]).
    /// Default: 3.
    pub attempts: u32,
    /// The wait before the second attempt; each later wait doubles.
    /// Default: 500 ms.
    pub base_delay: Duration,
    /// The longest wait between attempts. Default: 30 s.
    pub max_delay: Duration,
    /// Each wait is drawn between half of it and all of it, so calls that
    /// failed together do not come back together. Default: true.
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt `attempt` (1-based) before the next:
    /// `base_delay * 2^(attempt-1)`, at most `max_delay`; with `jitter`,
    /// scaled to between half and all of it by `draw` (a number in
    /// `0.0..1.0`, drawn at random by the caller). A server's
    /// `retry_after`, when given, is the wait (up to [`MAX_DELAY`]) when it
    /// is longer.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>, draw: f64) -> Duration {
        let doubling = 2u32.saturating_pow(attempt.saturating_sub(1).min(31));
        let own = self.base_delay.saturating_mul(doubling).min(self.max_delay);
        let own = if self.jitter { own.mul_f64(0.5 + draw.clamp(0.0, 1.0) / 2.0) } else { own };
        match retry_after {
            Some(after) => own.max(after.min(MAX_DELAY)),
            None => own,
        }
    }
}

/// Reads a `rate`: calls per second, a number above 0 and at most
/// [`MAX_RATE`].
///
/// # Errors
/// A sentence saying what was wrong and what to give instead.
pub fn parse_rate(value: &Value) -> Result<Rate, String> {
    match value.as_f64() {
        Some(r) if r > 0.0 && r <= MAX_RATE => Ok(Rate(r)),
        Some(r) => Err(format!(
            "{r} is out of range: give calls per second above 0 and at most {MAX_RATE} (0.5 is one call every 2 s)"
        )),
        None => Err(format!("{value} is not a number: give calls per second, e.g. 5 or 0.5")),
    }
}

/// Reads a `scope`: `"process"` (false) or `"global"` (true).
///
/// # Errors
/// A sentence saying what was wrong and what to give instead.
pub fn parse_scope(value: &Value) -> Result<bool, String> {
    match value.as_str() {
        Some("global") => Ok(true),
        Some("process") => Ok(false),
        _ => Err(format!(
            "{value} is not a scope: give \"process\" (each process keeps its own counts, the default) or \
             \"global\" (kept in the PostgreSQL journal store, across every process sharing it)"
        )),
    }
}

/// Reads a `max_in_flight`: a whole number from 1 to 1024.
///
/// # Errors
/// A sentence saying what was wrong and what to give instead.
pub fn parse_max_in_flight(value: &Value) -> Result<usize, String> {
    match value.as_u64() {
        Some(n @ 1..=1024) => Ok(n as usize),
        _ => Err(format!(
            "{value} is out of range: give the most calls at once, a whole number from 1 to 1024"
        )),
    }
}

/// Reads a `retry` table: `{attempts, base_delay_ms, max_delay_ms,
/// jitter}`, each optional ([`RetryPolicy::default`] for the others), or
/// `false` for no retries.
///
/// # Errors
/// A sentence naming the key that was wrong and what to give instead.
pub fn parse_retry(value: &Value) -> Result<Option<RetryPolicy>, String> {
    let table = match value {
        Value::Bool(false) => return Ok(None),
        Value::Object(table) => table,
        other => {
            return Err(format!(
                "{other} is not a retry table: give {{ attempts = 3, base_delay_ms = 500, \
                 max_delay_ms = 30000, jitter = true }} (each optional), or false"
            ));
        }
    };
    let mut policy = RetryPolicy::default();
    for (key, v) in table {
        match key.as_str() {
            "attempts" => match v.as_u64() {
                Some(n @ 2..=10) => policy.attempts = n as u32,
                _ => {
                    return Err(format!(
                        "`attempts`: {v}: give a whole number from 2 to {MAX_ATTEMPTS} (the first call included)"
                    ));
                }
            },
            "base_delay_ms" => policy.base_delay = delay_ms(key, v)?,
            "max_delay_ms" => policy.max_delay = delay_ms(key, v)?,
            "jitter" => match v.as_bool() {
                Some(b) => policy.jitter = b,
                None => return Err(format!("`jitter`: {v}: give true or false")),
            },
            other => {
                return Err(format!(
                    "unknown key `{other}`: a retry table takes attempts, base_delay_ms, max_delay_ms and jitter"
                ));
            }
        }
    }
    if policy.max_delay < policy.base_delay {
        return Err(format!(
            "`max_delay_ms` ({}) is below `base_delay_ms` ({}): give a max_delay_ms at least as long",
            policy.max_delay.as_millis(),
            policy.base_delay.as_millis()
        ));
    }
    Ok(Some(policy))
}

/// A delay in milliseconds, 1 to [`MAX_DELAY`].
fn delay_ms(key: &str, v: &Value) -> Result<Duration, String> {
    let max = MAX_DELAY.as_millis() as u64;
    match v.as_u64() {
        Some(ms @ 1..) if ms <= max => Ok(Duration::from_millis(ms)),
        _ => Err(format!("`{key}`: {v}: give milliseconds from 1 to {max}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn delays_double_up_to_the_max_and_a_longer_retry_after_wins() {
        let p = RetryPolicy {
            attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
            jitter: false,
        };
        let ms = |a, after| p.delay(a, after, 0.0).as_millis();
        assert_eq!([ms(1, None), ms(2, None), ms(3, None), ms(40, None)], [100, 200, 350, 350]);
        assert_eq!(ms(1, Some(Duration::from_millis(50))), 100);
        assert_eq!(ms(1, Some(Duration::from_secs(2))), 2000);
        assert_eq!(p.delay(1, Some(Duration::from_secs(100_000)), 0.0), MAX_DELAY);
        let jittered = RetryPolicy { jitter: true, ..p };
        assert_eq!(jittered.delay(2, None, 0.0), Duration::from_millis(100));
        assert_eq!(jittered.delay(2, None, 0.5), Duration::from_millis(150));
        assert_eq!(jittered.delay(2, Some(Duration::from_secs(1)), 0.0), Duration::from_secs(1));
    }

    #[test]
    fn retry_tables_are_read_with_defaults_and_bad_values_say_what_to_give() {
        let p = parse_retry(&json!({"attempts": 4, "base_delay_ms": 10})).unwrap().unwrap();
        assert_eq!(
            (p.attempts, p.base_delay, p.max_delay, p.jitter),
            (4, Duration::from_millis(10), Duration::from_secs(30), true)
        );
        assert_eq!(parse_retry(&json!(false)).unwrap(), None);
        for (bad, words) in [
            (json!({"attempts": 1}), "from 2 to 10"),
            (json!({"attempts": 11}), "from 2 to 10"),
            (json!({"base_delay_ms": 0}), "from 1 to"),
            (json!({"jitter": 1}), "true or false"),
            (json!({"tries": 3}), "unknown key `tries`"),
            (json!({"base_delay_ms": 500, "max_delay_ms": 100}), "below"),
            (json!(3), "not a retry table"),
        ] {
            let e = parse_retry(&bad).unwrap_err();
            assert!(e.contains(words), "{bad}: {e}");
        }
    }

    #[test]
    fn rates_and_caps_are_checked() {
        assert_eq!(parse_rate(&json!(0.5)).unwrap().interval(), Duration::from_secs(2));
        assert_eq!(parse_rate(&json!(5)).unwrap().per_second(), 5.0);
        assert!(parse_rate(&json!(0)).unwrap_err().contains("above 0"));
        assert!(parse_rate(&json!("5")).unwrap_err().contains("not a number"));
        assert_eq!(parse_max_in_flight(&json!(8)).unwrap(), 8);
        assert!(parse_max_in_flight(&json!(0)).unwrap_err().contains("1 to 1024"));
    }
}
