//! Go's `time.ParseDuration` syntax, which upstream's duration flags use:
//! `300ms`, `1.5h`, `2h45m`, `10s`.

use std::time::Duration;

/// Parses a non-negative Go duration, to the nanosecond as Go does: whole
/// numbers exactly, fractions as Go computes them (truncated).
///
/// # Errors
/// A message saying what is wrong, for the flag's error line.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err("empty duration; expected a number with a unit, such as 10s or 5m".into());
    }
    if text.starts_with('-') {
        return Err(format!(
            "`{text}` is negative; durations must be zero or more"
        ));
    }
    let too_long =
        || format!("`{text}` is longer than Go allows ({GO_MAX}), so upstream refuses it too");
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    let mut total = 0u64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(format!(
                "`{text}` is not a duration; expected a number with a unit, such as 10s or 5m"
            ));
        }
        let number = &rest[..number_len];
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if fraction.contains('.') || (whole.is_empty() && fraction.is_empty()) {
            return Err(format!("`{number}` in `{text}` is not a number"));
        }
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos_per_unit: u64 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("`{text}` is missing a unit (ns, us, ms, s, m, h)")),
            unit => {
                return Err(format!(
                    "unknown unit `{unit}` in `{text}` (use ns, us, ms, s, m, h)"
                ));
            }
        };
        total = whole_nanos(whole, nanos_per_unit)
            .and_then(|n| n.checked_add(fraction_nanos(fraction, nanos_per_unit)))
            .and_then(|n| n.checked_add(total))
            .filter(|n| *n <= GO_MAX_NANOS)
            .ok_or_else(too_long)?;
        rest = &rest[unit_len..];
    }
    Ok(Duration::from_nanos(total))
}

/// `digits` (ASCII digits) of a unit of `unit` nanoseconds; `None` beyond
/// Go's range.
fn whole_nanos(digits: &str, unit: u64) -> Option<u64> {
    let mut value = 0u64;
    for digit in digits.bytes() {
        value = value
            .checked_mul(10)?
            .checked_add(u64::from(digit - b'0'))
            .filter(|v| *v <= GO_MAX_NANOS)?;
    }
    value.checked_mul(unit)
}

/// The nanoseconds of `.digits` of a unit of `unit` nanoseconds, computed
/// as Go's `ParseDuration` does: the leading digits while they fit in
/// 2^63, scaled in floating point and truncated.
fn fraction_nanos(digits: &str, unit: u64) -> u64 {
    let (mut value, mut scale) = (0u64, 1f64);
    for digit in digits.bytes() {
        if value > GO_MAX_NANOS / 10 {
            break;
        }
        let next = value * 10 + u64::from(digit - b'0');
        if next > 1 << 63 {
            break;
        }
        value = next;
        scale *= 10.0;
    }
    (value as f64 * (unit as f64 / scale)) as u64
}

/// The longest duration Go's `time.ParseDuration` accepts (2^63 - 1 ns),
/// as it prints it; anything longer is an error upstream too.
const GO_MAX: &str = "2562047h47m16.854775807s";
const GO_MAX_NANOS: u64 = i64::MAX as u64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("2h45m30s"), Ok(Duration::from_secs(9930)));
        assert_eq!(parse("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("1m0s"), Ok(Duration::from_secs(60)));
    }

    #[test]
    fn rejects_malformed_durations_with_a_reason() {
        assert!(parse("10").unwrap_err().contains("missing a unit"));
        assert!(parse("10x").unwrap_err().contains("unknown unit `x`"));
        assert!(parse("-5s").unwrap_err().contains("negative"));
        assert!(parse("fast").unwrap_err().contains("not a duration"));
        assert!(parse("1..5s").unwrap_err().contains("not a number"));
        assert!(parse("").is_err());
    }

    #[test]
    fn durations_beyond_gos_maximum_are_refused_as_upstream_refuses_them() {
        assert_eq!(parse("2562047h"), Ok(Duration::from_secs(2_562_047 * 3600)));
        for text in [
            "2562048h",
            "5000000000000000h",
            "99999999999999999999999999999999h",
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains("longer than Go allows"), "{text}: {err}");
        }
        assert!(
            parse("2562048h")
                .unwrap_err()
                .contains("2562047h47m16.854775807s")
        );
    }

    #[test]
    fn gos_longest_duration_as_go_prints_it_parses_to_the_nanosecond() {
        assert_eq!(parse(GO_MAX), Ok(Duration::new(9_223_372_036, 854_775_807)));
        assert!(
            parse("2562047h47m16.854775808s")
                .unwrap_err()
                .contains("longer than Go allows")
        );
    }

    #[test]
    fn long_durations_keep_their_nanoseconds() {
        // Found by the go_duration fuzz target: summed as f64 seconds,
        // this came back 130 ns short.
        assert_eq!(
            parse("986357h0m2.450954567s"),
            Ok(Duration::new(3_550_885_202, 450_954_567))
        );
        assert_eq!(parse("1000h0.000000001s"), Ok(Duration::new(3_600_000, 1)));
    }

    #[test]
    fn fractions_are_truncated_to_the_nanosecond_as_go_truncates_them() {
        assert_eq!(parse("1.9ns"), Ok(Duration::from_nanos(1)));
        assert_eq!(parse("0.0000000005s"), Ok(Duration::ZERO));
        assert_eq!(parse(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("5.s"), Ok(Duration::from_secs(5)));
        assert_eq!(
            parse("1.000000000000000000000000001h"),
            Ok(Duration::from_secs(3600))
        );
    }
}
