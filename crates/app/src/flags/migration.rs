//! The leader-migration flags, upstream's `LeaderMigrationOptions`:
//! `--enable-leader-migration` and `--leader-migration-config`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use ccm_controllers::ControllerId;
use clap::Args;

use super::parse_bool;
use crate::migration::{LeaderMigration, MigrationConfig, Plan};

/// The leader-migration flags, as clap parses them.
#[derive(Debug, Clone, Args)]
pub(crate) struct LeaderMigrationFlags {
    /// Whether to enable controller leader migration: the controllers the
    /// migration configuration gives this component start only while this
    /// process also holds the migration Lease.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    enable_leader_migration: bool,

    /// Path to the config file for controller leader migration, or empty to
    /// use upstream's default configuration of the cloud-controller-manager.
    /// The file is a LeaderMigrationConfiguration of
    /// controllermanager.config.k8s.io (v1, v1beta1 or v1alpha1).
    #[arg(long, value_name = "PATH", value_parser = path_or_empty)]
    leader_migration_config: Option<PathBuf>,
}

/// A path, or empty for none, as pflag's string flags allow.
fn path_or_empty(text: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(text))
}

impl LeaderMigrationFlags {
    /// Reads and validates the configuration when migration is enabled, as
    /// upstream's `ApplyTo` does (even with `--leader-elect=false`, where
    /// upstream then runs without migration).
    ///
    /// # Errors
    /// One line naming `--leader-migration-config`, the file and what is
    /// wrong with it.
    pub(crate) fn settings(self, leader_elect: bool) -> Result<LeaderMigration, String> {
        let path = self
            .leader_migration_config
            .filter(|p| !p.as_os_str().is_empty());
        if !self.enable_leader_migration {
            return Ok(match path {
                None => LeaderMigration::Off,
                Some(path) => LeaderMigration::Ignored(format!(
                    "--leader-migration-config={} is ignored without --enable-leader-migration, as upstream does",
                    path.display()
                )),
            });
        }
        let config = match &path {
            None => MigrationConfig::upstream_default(),
            Some(path) => MigrationConfig::read(path)
                .map_err(|e| format!("--leader-migration-config {}: {e}", path.display()))?,
        };
        let all: BTreeSet<ControllerId> = ControllerId::ALL.into_iter().collect();
        Plan::new(&config, &all).map_err(|reason| {
            let path = path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            format!("--leader-migration-config {path}: {reason}")
        })?;
        if !leader_elect {
            return Ok(LeaderMigration::Ignored(
                "--enable-leader-migration is ignored with --leader-elect=false, as upstream does: every controller runs without a lease".to_owned(),
            ));
        }
        Ok(LeaderMigration::On(config))
    }
}
