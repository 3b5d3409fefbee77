//! The server's call log: who called what, when, and how it ended.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// One call the server answered.
#[derive(Debug, Clone, Serialize)]
pub struct ServerCall {
    /// Its place in the log, from 0.
    pub seq: u64,
    /// The caller's leader-election identity, or `unknown`.
    pub caller: String,
    /// The operation, as [`Operation::as_str`](crate::Operation::as_str) spells it.
    pub op: &'static str,
    /// What it was for: a Service's `namespace/name`, a route's CIDR and
    /// node, node names or volume IDs.
    pub args: Vec<String>,
    /// Whether the operation changes the cloud (never for a dry run's).
    pub mutation: bool,
    /// Whether it was a dry run's plan (`--dry-run`): nothing changed.
    pub dry_run: bool,
    /// Whether it changed the cloud: a mutation that was applied, whatever
    /// the caller was told.
    pub applied: bool,
    /// When the server received it, in microseconds since the Unix epoch.
    pub started_us: u64,
    /// When the cloud applied or refused it, in microseconds since the
    /// Unix epoch.
    pub finished_us: u64,
    /// `ok`, or the kind of error the caller was told
    /// ([`CloudError::kind`](ccm_cloud_provider::CloudError::kind)).
    pub outcome: String,
}

/// Now, in microseconds since the Unix epoch.
pub(crate) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}
