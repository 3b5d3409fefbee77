//! Go's `time.ParseDuration` syntax, which upstream's duration flags use:
//! `300ms`, `1.5h`, `2h45m`, `10s`.

use std::time::Duration;

/// Parses a non-negative Go duration.
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
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(format!(
                "`{text}` is not a duration; expected a number with a unit, such as 10s or 5m"
            ));
        }
        let value: f64 = rest[..number_len]
            .parse()
            .map_err(|_| format!("`{}` in `{text}` is not a number", &rest[..number_len]))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("`{text}` is missing a unit (ns, us, ms, s, m, h)")),
            unit => {
                return Err(format!(
                    "unknown unit `{unit}` in `{text}` (use ns, us, ms, s, m, h)"
                ));
            }
        };
        total += value * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    if total > GO_MAX_SECONDS {
        return Err(format!(
            "`{text}` is longer than Go allows ({GO_MAX}), so upstream refuses it too"
        ));
    }
    Duration::try_from_secs_f64(total).map_err(|_| format!("`{text}` is too long"))
}

/// The longest duration Go's `time.ParseDuration` accepts (2^63 - 1 ns),
/// as it prints it; anything longer is an error upstream too.
const GO_MAX: &str = "2562047h47m16.854775807s";
const GO_MAX_SECONDS: f64 = 9_223_372_036.854_775;

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
}
