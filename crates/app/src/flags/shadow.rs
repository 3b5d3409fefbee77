//! This CCM's own flags for migrating from another: shadow mode.

use clap::Args;

use super::parse_bool;

/// The "shadow mode" section.
#[derive(Debug, Clone, Args)]
pub(crate) struct Shadow {
    /// Shadow mode: run every controller against the API server and the
    /// cloud's reads, but send no cloud mutation and no Kubernetes write and
    /// take no Lease, so it can run beside the CCM that leads; each change
    /// it would make is logged and listed at /debug/plan.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub(super) dry_run: bool,
}
