//! Upstream's debugging flags (`--profiling`, `--contention-profiling`),
//! from k8s.io/controller-manager's `DebuggingOptions`.

use super::parse_bool;

/// What `/debug/pprof/` serves; also `Generic.Debugging` in `/configz`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub(crate) struct Debugging {
    /// Enable profiling via web interface host:port/debug/pprof/ (CPU and
    /// heap profiles in pprof format).
    #[arg(long = "profiling", value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = parse_bool)]
    pub(crate) profiling: bool,

    /// Accepted for compatibility: upstream turns on Go's block profiling
    /// (if --profiling); this process has no equivalent, so it does nothing.
    #[arg(long = "contention-profiling", value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub(crate) contention_profiling: bool,
}
