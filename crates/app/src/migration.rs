//! Leader migration (`--enable-leader-migration`), as upstream's
//! `k8s.io/controller-manager/pkg/leadermigration`: moving controllers from
//! kube-controller-manager's in-tree cloud provider to this CCM without
//! either running them twice or neither running them.
//!
//! Both controller managers run with the same `LeaderMigrationConfiguration`
//! ([`MigrationConfig`]). Controllers it lists for this component (or `*`)
//! are *migrated*: once this process leads on its main Lease, it campaigns
//! for a second Lease (`leaderName`, same namespace and timings), which the
//! old owner holds until it stops, and only then starts them
//! ([`Migration`]). Controllers it does not list run under the main Lease as
//! usual; controllers it gives to another component are not started.
//! Losing the migration Lease exits the process non-zero, as losing the main
//! one does; on shutdown it is released after its controllers stop.

mod config;
mod plan;
mod run;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use ccm_controllers::ControllerId;

pub(crate) use self::config::MigrationConfig;
pub(crate) use self::plan::Plan;
pub(crate) use self::run::Migration;

/// What the leader-migration flags ask for, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum LeaderMigration {
    /// `--enable-leader-migration=false`, the default.
    #[default]
    Off,
    /// Migrate by this configuration.
    On(MigrationConfig),
    /// Flags upstream accepts and ignores (a configuration without
    /// `--enable-leader-migration`, or migration without leader election):
    /// runs as [`Off`](Self::Off), after logging this warning.
    Ignored(String),
}

impl LeaderMigration {
    /// Splits the `enabled` controllers between the leases, logging the
    /// split and any ignored flags.
    ///
    /// # Errors
    /// When the configuration assigns one controller twice, differently
    /// (checked with the flags already).
    pub(crate) fn plan(&self, enabled: &BTreeSet<ControllerId>) -> Result<Plan, String> {
        match self {
            Self::Off => Ok(Plan::without_migration(enabled)),
            Self::Ignored(warning) => {
                tracing::warn!("{warning}");
                Ok(Plan::without_migration(enabled))
            }
            Self::On(config) => {
                let plan = Plan::new(config, enabled)
                    .map_err(|reason| format!("--leader-migration-config: {reason}"))?;
                tracing::info!(
                    lease = %config.leader_name,
                    main = %plan::list(&plan.main),
                    migrated = %plan::list(&plan.migrated),
                    other_component = %plan::list(&plan.unowned),
                    "leader migration: migrated controllers start only once this process also holds the migration lease; those of another component never start here"
                );
                Ok(plan)
            }
        }
    }
}
