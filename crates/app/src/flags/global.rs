//! Upstream's "global" section: help, version and component-base's
//! logging flags (`--v`, `--vmodule`, `--logging-format`, `--log-*`).

use std::time::Duration;

use clap::Args;

use super::{duration, parse_bool};
use crate::logging::ModuleLevel;

/// The "global" section.
#[derive(Debug, Clone, Args)]
pub(crate) struct Global {
    /// Help for this command.
    #[arg(short = 'h', long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub(super) help: bool,

    /// Maximum time between log flushes (each line is written at once here).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(super) log_flush_frequency: Option<Duration>,

    /// [Alpha] In JSON format with split output streams, how many bytes of
    /// info messages may be buffered (needs the LoggingAlphaOptions gate).
    #[arg(long, value_name = "QUANTITY", value_parser = parse_quantity)]
    pub(super) log_json_info_buffer_size: Option<u64>,

    /// [Alpha] In JSON format, write error messages to stderr and info
    /// messages to stdout (needs the LoggingAlphaOptions gate).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub(super) log_json_split_stream: bool,

    /// [Alpha] In text format with split output streams, how many bytes of
    /// info messages may be buffered (needs the LoggingAlphaOptions gate).
    #[arg(long, value_name = "QUANTITY", value_parser = parse_quantity)]
    pub(super) log_text_info_buffer_size: Option<u64>,

    /// [Alpha] In text format, write error messages to stderr and info
    /// messages to stdout (needs the LoggingAlphaOptions gate).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub(super) log_text_split_stream: bool,

    /// The log format: `text`, or `json` (one object per line; needs the
    /// LoggingBetaOptions gate, on by default).
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub(super) logging_format: String,

    /// Log verbosity: 0 what an operator must see, 2 upstream's usual
    /// production level (each change to an object), 4 debug, 5 and up trace.
    /// RUST_LOG, when set, wins.
    #[arg(short = 'v', long = "v", value_name = "LEVEL", default_value_t = 0, value_parser = parse_level)]
    pub(super) verbosity: u8,

    /// Comma-separated `pattern=N` settings for file-filtered logging: a
    /// source file whose name (without `.rs`) matches the glob logs at
    /// level N (text format only).
    #[arg(long, value_name = "PATTERN=N,...")]
    pub(super) vmodule: Option<String>,

    /// Print version information and quit; `--version=raw` prints more
    /// detail; `--version=vX.Y.Z` sets the reported version.
    #[arg(long, value_name = "VERSION", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub(super) version: Option<String>,
}

/// klog's `Level`, an int32 that must not be negative.
fn parse_level(text: &str) -> Result<u8, String> {
    match text.parse::<i32>() {
        Ok(n) if n < 0 => Err(format!("`{text}` is negative; levels start at 0")),
        Ok(n) => Ok(u8::try_from(n).unwrap_or(u8::MAX)),
        Err(_) => Err(format!("`{text}` is not a log level such as 2")),
    }
}

/// A Kubernetes resource quantity of bytes (`0`, `64Ki`, `1M`, `1.5Mi`).
fn parse_quantity(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not a quantity such as 64Ki or 1M");
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let factor: f64 = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let bytes = (number * factor).ceil();
    if !(0.0..=9.0e15).contains(&bytes) {
        return Err(bad());
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "checked to be a whole non-negative number below 2^53"
    )]
    Ok(bytes as u64)
}

/// Parses klog's `--vmodule` syntax.
pub(super) fn parse_vmodule(text: &str) -> Result<Vec<ModuleLevel>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|entry| {
            let (pattern, level) = entry.split_once('=').ok_or_else(|| {
                format!("--vmodule: `{entry}` is not pattern=N; expected for example `route*=4`")
            })?;
            let level = level.parse::<u8>().map_err(|_| {
                format!("--vmodule: `{entry}`: `{level}` is not a level from 0 to 255")
            })?;
            if pattern.is_empty() {
                return Err(format!("--vmodule: `{entry}` has an empty pattern"));
            }
            Ok(ModuleLevel {
                pattern: pattern.to_owned(),
                level,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{parse_level, parse_quantity, parse_vmodule};

    #[test]
    fn quantities_follow_kubernetes_suffixes() {
        assert_eq!(parse_quantity("0"), Ok(0));
        assert_eq!(parse_quantity("64Ki"), Ok(65_536));
        assert_eq!(parse_quantity("1M"), Ok(1_000_000));
        assert_eq!(parse_quantity("1.5Mi"), Ok(1_572_864));
        assert!(parse_quantity("lots").is_err());
        assert!(parse_quantity("5Xi").is_err());
    }

    #[test]
    fn levels_are_non_negative() {
        assert_eq!(parse_level("2"), Ok(2));
        assert_eq!(parse_level("9999"), Ok(255));
        assert!(parse_level("-1").is_err());
    }

    #[test]
    fn vmodule_entries_are_pattern_and_level() {
        let parsed = parse_vmodule("route*=4, service=2").unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!((parsed[0].pattern.as_str(), parsed[0].level), ("route*", 4));
        assert!(
            parse_vmodule("route")
                .unwrap_err()
                .contains("not pattern=N")
        );
        assert!(parse_vmodule("=3").unwrap_err().contains("empty pattern"));
        assert!(parse_vmodule("x=high").unwrap_err().contains("`high`"));
    }
}
