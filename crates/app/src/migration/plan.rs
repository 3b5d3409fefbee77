//! Which lease each enabled controller runs under: upstream's
//! `LeaderMigrator.FilterFunc` over our controller IDs.

use std::collections::BTreeSet;

use ccm_controllers::ControllerId;

use super::config::MigrationConfig;

/// The component name this process answers to in `controllerLeaders`.
pub(crate) const COMPONENT: &str = "cloud-controller-manager";

/// Where one controller runs during a migration (upstream's
/// `FilterResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Assignment {
    /// Not in the configuration: runs under the main Lease, as without
    /// migration (`ControllerNonMigrated`).
    Main,
    /// Assigned to this component or to `*`: runs only while this process
    /// also holds the migration Lease (`ControllerMigrated`).
    Migrated,
    /// Assigned to another component: this process does not run it
    /// (`ControllerUnowned`).
    Unowned,
}

/// The names upstream's default configuration gives controllers that our
/// IDs do not know: kube-controller-manager's client names from before the
/// controllers had canonical names.
const LEGACY_NAMES: [(&str, ControllerId); 2] = [
    ("route-controller", ControllerId::Route),
    ("service-controller", ControllerId::Service),
];

/// The controller `name` stands for: a canonical name, an alias, or one of
/// [`LEGACY_NAMES`]. Other names (kube-controller-manager's own controllers,
/// listed in a configuration both managers share) are not ours.
fn controller(name: &str) -> Option<ControllerId> {
    ControllerId::parse(name).or_else(|| {
        LEGACY_NAMES
            .iter()
            .find(|(legacy, _)| *legacy == name)
            .map(|(_, id)| *id)
    })
}

/// The enabled controllers split by [`Assignment`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Started once the main Lease is held.
    pub(crate) main: BTreeSet<ControllerId>,
    /// Started once the migration Lease is held too.
    pub(crate) migrated: BTreeSet<ControllerId>,
    /// Not started: another component runs them.
    pub(crate) unowned: BTreeSet<ControllerId>,
    /// The migration Lease's name; `None` without migration.
    pub(crate) migration_lease: Option<String>,
}

impl Plan {
    /// Without migration: every enabled controller under the main Lease.
    pub(crate) fn without_migration(enabled: &BTreeSet<ControllerId>) -> Self {
        Self {
            main: enabled.clone(),
            ..Self::default()
        }
    }

    /// Splits `enabled` by `config`, for the component [`COMPONENT`].
    ///
    /// # Errors
    /// When two entries name the same controller (say `service` and
    /// `service-lb-controller`) and disagree on whether this component runs
    /// it: upstream would silently take the last.
    pub(crate) fn new(
        config: &MigrationConfig,
        enabled: &BTreeSet<ControllerId>,
    ) -> Result<Self, String> {
        let mut assigned: Vec<(ControllerId, Assignment, &str)> = Vec::new();
        for leader in &config.controller_leaders {
            let Some(id) = controller(&leader.name) else {
                continue;
            };
            let assignment = if leader.component == COMPONENT || leader.component == "*" {
                Assignment::Migrated
            } else {
                Assignment::Unowned
            };
            if let Some((_, earlier, earlier_name)) =
                assigned.iter().find(|(other, _, _)| *other == id)
            {
                if *earlier != assignment {
                    return Err(format!(
                        "controllerLeaders: `{earlier_name}` and `{}` both name the {id} controller but assign it differently",
                        leader.name
                    ));
                }
                continue;
            }
            assigned.push((id, assignment, &leader.name));
        }
        let mut plan = Self {
            migration_lease: Some(config.leader_name.clone()),
            ..Self::default()
        };
        for id in enabled {
            let assignment = assigned
                .iter()
                .find(|(other, _, _)| other == id)
                .map_or(Assignment::Main, |(_, a, _)| *a);
            match assignment {
                Assignment::Main => plan.main.insert(*id),
                Assignment::Migrated => plan.migrated.insert(*id),
                Assignment::Unowned => plan.unowned.insert(*id),
            };
        }
        Ok(plan)
    }
}

/// `ids` as a comma-separated list of aliases, or `none`.
pub(crate) fn list(ids: &BTreeSet<ControllerId>) -> String {
    if ids.is_empty() {
        return "none".to_owned();
    }
    ids.iter()
        .map(|id| id.alias())
        .collect::<Vec<_>>()
        .join(", ")
}
