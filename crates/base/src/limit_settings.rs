//! The limits a user sets: the `[limits]` table of `codemode.toml` and the
//! CLI's `--max-calls`, `--memory`, `--max-in-flight`, `--deadline`,
//! `--tool-timeout` and `--max-value` (docs/LIMITS.md). Each setting is checked against its
//! accepted range here, so the file and the flags refuse the same values
//! with the same words, and the engine's own messages about a limit name
//! the setting a user changes ([`setting`]).

use std::time::Duration;

use crate::limits::Limits;

/// Accepted `max_calls`: 1 to 1,000,000 tool calls per run.
pub const MAX_CALLS_RANGE: (usize, usize) = (1, 1_000_000);
/// Accepted `max_in_flight`: 1 to 1,024 calls running at once.
pub const MAX_IN_FLIGHT_RANGE: (usize, usize) = (1, 1024);
/// Accepted `memory`: 1 MiB to 16 GiB, in bytes.
pub const MEMORY_RANGE: (usize, usize) = (1 << 20, 16 << 30);
/// Accepted `max_value`: 1 KiB to 1 GiB of the return value's compact
/// JSON, in bytes.
pub const VALUE_RANGE: (usize, usize) = (1 << 10, 1 << 30);
/// Longest `deadline` and `tool_timeout`: one day, in seconds.
pub const MAX_SECONDS: f64 = 86_400.0;

/// The limits a user set; `None` leaves the engine's default (or what a
/// lower layer set: flags override the file, the file the defaults).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct LimitSettings {
    /// Tool calls per run ([`Limits::max_calls`]).
    pub max_calls: Option<usize>,
    /// Memory of the program's VM, in bytes ([`Limits::memory_bytes`]).
    pub memory_bytes: Option<usize>,
    /// Calls running at once ([`Limits::max_in_flight`]).
    pub max_in_flight: Option<usize>,
    /// The run's deadline ([`Limits::deadline`]).
    pub deadline: Option<Duration>,
    /// One call's timeout ([`Limits::tool_timeout`]).
    pub tool_timeout: Option<Duration>,
    /// The return value kept, in bytes of compact JSON
    /// ([`Limits::value_bytes`]).
    pub value_bytes: Option<usize>,
}

impl LimitSettings {
    /// Writes the settings given into `limits`, leaving the others.
    pub fn apply(&self, limits: &mut Limits) {
        if let Some(n) = self.max_calls {
            limits.max_calls = n;
        }
        if let Some(n) = self.memory_bytes {
            limits.memory_bytes = n;
        }
        if let Some(n) = self.max_in_flight {
            limits.max_in_flight = n;
        }
        if let Some(d) = self.deadline {
            limits.deadline = d;
        }
        if let Some(d) = self.tool_timeout {
            limits.tool_timeout = d;
        }
        if let Some(n) = self.value_bytes {
            limits.value_bytes = n;
        }
    }

    /// These settings with `over`'s given ones in their place (flags over
    /// the file).
    #[must_use]
    pub fn overridden_by(self, over: LimitSettings) -> LimitSettings {
        LimitSettings {
            max_calls: over.max_calls.or(self.max_calls),
            memory_bytes: over.memory_bytes.or(self.memory_bytes),
            max_in_flight: over.max_in_flight.or(self.max_in_flight),
            deadline: over.deadline.or(self.deadline),
            tool_timeout: over.tool_timeout.or(self.tool_timeout),
            value_bytes: over.value_bytes.or(self.value_bytes),
        }
    }

    /// These settings without the ones that raise a limit above `defaults`
    /// (an untrusted workspace file may lower limits, never raise them);
    /// returns the `[limits]` keys dropped.
    ///
    /// Every field is decided by name (a raise is a grant): a new one does
    /// not compile until it is named here.
    pub fn without_raises(self, defaults: &Limits) -> (LimitSettings, Vec<&'static str>) {
        let LimitSettings { max_calls, memory_bytes, max_in_flight, deadline, tool_timeout, value_bytes } =
            self;
        let mut dropped = Vec::new();
        let mut keep = |raised: bool, key: &'static str| {
            if raised {
                dropped.push(key);
            }
            !raised
        };
        let kept = LimitSettings {
            max_calls: max_calls.filter(|&n| keep(n > defaults.max_calls, "max_calls")),
            memory_bytes: memory_bytes.filter(|&n| keep(n > defaults.memory_bytes, "memory")),
            max_in_flight: max_in_flight.filter(|&n| keep(n > defaults.max_in_flight, "max_in_flight")),
            deadline: deadline.filter(|&d| keep(d > defaults.deadline, "deadline")),
            tool_timeout: tool_timeout.filter(|&d| keep(d > defaults.tool_timeout, "tool_timeout")),
            value_bytes: value_bytes.filter(|&n| keep(n > defaults.value_bytes, "max_value")),
        };
        (kept, dropped)
    }
}

/// How a user sets the [`Limits`] field `field` (`"max_calls"`), for
/// messages: `--max-calls / [limits] max_calls`; the Rust field for the
/// limits only the library sets (`Limits::source_bytes`).
pub fn setting(field: &str) -> String {
    let (flag, key) = match field {
        "max_calls" => ("--max-calls", "max_calls"),
        "memory_bytes" => ("--memory", "memory"),
        "max_in_flight" => ("--max-in-flight", "max_in_flight"),
        "deadline" => ("--deadline", "deadline"),
        "tool_timeout" => ("--tool-timeout", "tool_timeout"),
        "value_bytes" => ("--max-value", "max_value"),
        other => return format!("Limits::{other}, set by the host embedding codemode"),
    };
    format!("{flag} / [limits] {key} in codemode.toml; Limits::{field} in the library")
}

/// Checks a count setting (`max_calls`, `max_in_flight`) against its
/// range.
///
/// # Errors
/// The value is outside `range`: what to give instead (the caller names
/// the flag or key).
pub fn check_count(value: i64, range: (usize, usize)) -> Result<usize, String> {
    match usize::try_from(value) {
        Ok(n) if (range.0..=range.1).contains(&n) => Ok(n),
        _ => Err(format!("{value} is out of range: give a whole number from {} to {}", range.0, range.1)),
    }
}

/// Checks a number of seconds (`deadline`, `tool_timeout`): at least a
/// nanosecond (a smaller positive number would be a zero duration), at
/// most [`MAX_SECONDS`].
///
/// # Errors
/// Not finite, under a nanosecond, or over a day: what to give instead.
pub fn check_seconds(secs: f64) -> Result<Duration, String> {
    let duration = (secs.is_finite() && secs > 0.0 && secs <= MAX_SECONDS)
        .then(|| Duration::from_secs_f64(secs))
        .filter(|d| !d.is_zero());
    if let Some(duration) = duration {
        Ok(duration)
    } else {
        // 1e-300 as written, not as three hundred zeros.
        let tiny_or_huge = secs.is_finite() && secs != 0.0 && !(1e-4..1e16).contains(&secs.abs());
        let secs = if tiny_or_huge { format!("{secs:e}") } else { secs.to_string() };
        Err(format!(
            "{secs} is out of range: give a number of seconds above 0 and at most {MAX_SECONDS}, e.g. 120 or 0.5"
        ))
    }
}

/// Parses a size in bytes with an optional binary unit: `67108864`,
/// `64MiB`, `512KiB`, `1GiB` (`B`, `KiB`, `MiB`, `GiB`; case-insensitive,
/// spaces allowed before the unit; `K`, `M`, `G`, `KB`, `MB`, `GB` are
/// taken as the binary units too, as memory sizes usually are), checked
/// against [`MEMORY_RANGE`].
///
/// # Errors
/// Not a whole number with a known unit, or outside the range: what is
/// accepted.
pub fn parse_memory(text: &str) -> Result<usize, String> {
    parse_size(text, MEMORY_RANGE, "1MiB to 16GiB", "64MiB, 512KiB, 1GiB")
}

/// Parses the bound of the return value (`max_value`) as [`parse_memory`]
/// parses sizes, checked against [`VALUE_RANGE`].
///
/// # Errors
/// Not a whole number with a known unit, or outside the range: what is
/// accepted.
pub fn parse_value_size(text: &str) -> Result<usize, String> {
    parse_size(text, VALUE_RANGE, "1KiB to 1GiB", "16KiB, 1MiB, 65536")
}

/// A size in bytes with an optional binary unit, within `range`; `shown`
/// is the range and `examples` a few accepted sizes, for the message.
fn parse_size(text: &str, range: (usize, usize), shown: &str, examples: &str) -> Result<usize, String> {
    let usage = || format!("`{text}`: give a size from {shown}, as bytes or with a unit: {examples}");
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    let number: u64 = digits.parse().map_err(|_| usage())?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(usage()),
    };
    let bytes = number.checked_mul(1 << shift).ok_or_else(usage)?;
    match usize::try_from(bytes) {
        Ok(n) if (range.0..=range.1).contains(&n) => Ok(n),
        _ => Err(usage()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_take_binary_units_and_refuse_the_rest() {
        assert_eq!(parse_memory("64MiB"), Ok(64 << 20));
        assert_eq!(parse_memory("2048 kib"), Ok(2 << 20));
        assert_eq!(parse_memory("1G"), Ok(1 << 30));
        assert_eq!(parse_memory("2097152"), Ok(2 << 20));
        for bad in ["", "64XB", "-1MiB", "1.5GiB", "512KiB", "17GiB", "99999999999999999999"] {
            let e = parse_memory(bad).unwrap_err();
            assert!(e.starts_with(&format!("`{bad}`")) && e.contains("1MiB to 16GiB"), "{e}");
        }
    }

    #[test]
    fn value_sizes_take_the_same_units_within_their_range() {
        assert_eq!(parse_value_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_value_size("1024"), Ok(1024));
        for bad in ["512", "2GiB", "1.5MiB", "x"] {
            let e = parse_value_size(bad).unwrap_err();
            assert!(e.starts_with(&format!("`{bad}`")) && e.contains("1KiB to 1GiB"), "{e}");
        }
    }

    #[test]
    fn counts_and_seconds_name_the_range() {
        assert_eq!(check_count(5000, MAX_CALLS_RANGE), Ok(5000));
        let e = check_count(-3, MAX_CALLS_RANGE).unwrap_err();
        assert_eq!(e, "-3 is out of range: give a whole number from 1 to 1000000");
        assert!(check_seconds(0.0).unwrap_err().contains("above 0 and at most 86400"));
        assert_eq!(check_seconds(0.5), Ok(Duration::from_millis(500)));
        // Positive, but no time at all once a duration.
        let e = check_seconds(1e-300).unwrap_err();
        assert!(e.starts_with("1e-300 is out of range") && e.contains("above 0 and at most 86400"), "{e}");
        assert_eq!(check_seconds(1e-9), Ok(Duration::from_nanos(1)));
    }

    #[test]
    fn flags_override_the_file_and_untrusted_files_only_lower() {
        let file = LimitSettings { max_calls: Some(10), memory_bytes: Some(128 << 20), ..Default::default() };
        let flags = LimitSettings { max_calls: Some(20), ..Default::default() };
        let mut limits = Limits::default();
        file.overridden_by(flags).apply(&mut limits);
        assert_eq!((limits.max_calls, limits.memory_bytes), (20, 128 << 20));
        let (kept, dropped) = file.without_raises(&Limits::default());
        assert_eq!((kept.max_calls, kept.memory_bytes, dropped), (Some(10), None, vec!["memory"]));
    }
}
