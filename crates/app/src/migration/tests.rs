//! Reading, validating and defaulting the configuration, the flags, and the
//! split of controllers between the leases.

use std::collections::BTreeSet;

use ccm_controllers::ControllerId::{
    self, CloudNode, CloudNodeLifecycle, PersistentVolumeLabel, Route, Service,
};

use super::config::{ConfigError, ControllerLeader, MigrationConfig};
use super::{LeaderMigration, Plan};
use crate::flags::{Command, parse};

/// What `--controllers=*` enables.
fn all() -> BTreeSet<ControllerId> {
    ControllerId::DEFAULT.into_iter().collect()
}

fn set<const N: usize>(ids: [ControllerId; N]) -> BTreeSet<ControllerId> {
    ids.into_iter().collect()
}

fn leader(name: &str, component: &str) -> ControllerLeader {
    ControllerLeader {
        name: name.to_owned(),
        component: component.to_owned(),
    }
}

const V1: &str = "\
kind: LeaderMigrationConfiguration
apiVersion: controllermanager.config.k8s.io/v1
leaderName: cloud-provider-extraction-migration
controllerLeaders:
  - name: route
    component: cloud-controller-manager
  - name: service
    component: '*'
  - name: nodeipam
    component: kube-controller-manager
";

#[test]
fn v1_file_parses_with_leases_implied() {
    let config = MigrationConfig::parse(V1).unwrap();
    assert_eq!(config.leader_name, "cloud-provider-extraction-migration");
    assert_eq!(
        config.controller_leaders,
        [
            leader("route", "cloud-controller-manager"),
            leader("service", "*"),
            leader("nodeipam", "kube-controller-manager"),
        ]
    );
}

#[test]
fn v1beta1_and_v1alpha1_need_resource_lock_leases() {
    for version in ["v1beta1", "v1alpha1"] {
        let text = format!(
            "kind: LeaderMigrationConfiguration\napiVersion: controllermanager.config.k8s.io/{version}\nleaderName: m\nresourceLock: leases\ncontrollerLeaders: []\n"
        );
        let config = MigrationConfig::parse(&text).unwrap();
        assert_eq!(config.leader_name, "m");
        assert!(config.controller_leaders.is_empty());

        let missing = text.replace("resourceLock: leases\n", "");
        let err = MigrationConfig::parse(&missing).unwrap_err();
        assert!(err.to_string().contains("resourceLock"), "{err}");
        let endpoints = text.replace("resourceLock: leases", "resourceLock: endpoints");
        let err = MigrationConfig::parse(&endpoints).unwrap_err();
        assert!(
            err.to_string()
                .contains("`endpoints` is no longer supported"),
            "{err}"
        );
    }
}

#[test]
fn v1_refuses_resource_lock_and_unknown_fields_as_upstream_strict_decoding() {
    let err = MigrationConfig::parse(&format!("{V1}resourceLock: leases\n")).unwrap_err();
    assert!(matches!(err, ConfigError::Malformed(_)), "{err:?}");
    assert!(err.to_string().contains("resourceLock"), "{err}");
    let err = MigrationConfig::parse(&V1.replace("component: '*'", "component: '*'\n    extra: 1"))
        .unwrap_err();
    assert!(err.to_string().contains("extra"), "{err}");
    assert!(!err.to_string().contains('\n'), "one line: {err}");
}

#[test]
fn wrong_kind_or_api_version_is_named() {
    for text in [
        V1.replace(
            "kind: LeaderMigrationConfiguration",
            "kind: KubeControllerManagerConfiguration",
        ),
        V1.replace(
            "controllermanager.config.k8s.io/v1",
            "controllermanager.config.k8s.io/v2",
        ),
        V1.replace("controllermanager.config.k8s.io/v1", "v1"),
        V1.replace("apiVersion: controllermanager.config.k8s.io/v1\n", ""),
    ] {
        let err = MigrationConfig::parse(&text).unwrap_err();
        assert!(
            matches!(err, ConfigError::WrongKind { .. }),
            "{text}: {err:?}"
        );
        assert!(
            err.to_string()
                .contains("expected kind LeaderMigrationConfiguration"),
            "{err}"
        );
    }
}

#[test]
fn not_yaml_is_malformed_on_one_line() {
    let err = MigrationConfig::parse("kind: [unclosed\n  apiVersion: x").unwrap_err();
    assert!(matches!(err, ConfigError::Malformed(_)), "{err:?}");
    assert!(!err.to_string().contains('\n'), "one line: {err}");
}

#[test]
fn validation_lists_every_problem_as_upstream() {
    let text = "\
kind: LeaderMigrationConfiguration
apiVersion: controllermanager.config.k8s.io/v1
controllerLeaders:
  - name: route
  - component: '*'
";
    let err = MigrationConfig::parse(text).unwrap_err();
    assert_eq!(
        err,
        ConfigError::Invalid(vec![
            "leaderName: Required value: leaderName must be set for LeaderMigrationConfiguration"
                .to_owned(),
            "controllerLeaders[0].component: Required value".to_owned(),
            "controllerLeaders[1].name: Required value".to_owned(),
        ])
    );
    let err = MigrationConfig::parse(&V1.replace(
        "leaderName: cloud-provider-extraction-migration",
        "leaderName: Not_A_Name",
    ))
    .unwrap_err();
    assert!(err.to_string().contains("cannot name a Lease"), "{err}");
}

#[test]
fn upstream_default_migrates_route_service_and_node_lifecycle_to_any_component() {
    let config = MigrationConfig::upstream_default();
    assert_eq!(config.leader_name, "cloud-provider-extraction-migration");
    let plan = Plan::new(&config, &all()).unwrap();
    // The PersistentVolume labeller was kube-apiserver's admission plugin,
    // never kube-controller-manager's: nothing to migrate, the main Lease.
    assert_eq!(plan.main, set([CloudNode, PersistentVolumeLabel]));
    assert_eq!(plan.migrated, set([CloudNodeLifecycle, Service, Route]));
    assert!(plan.unowned.is_empty());
    assert_eq!(
        plan.migration_lease.as_deref(),
        Some("cloud-provider-extraction-migration")
    );
}

#[test]
fn split_follows_component_names_aliases_and_enabled_controllers() {
    let config = MigrationConfig {
        leader_name: "m".to_owned(),
        controller_leaders: vec![
            leader("service-lb-controller", "cloud-controller-manager"),
            leader("route", "kube-controller-manager"),
            leader("cloud-node-lifecycle", "*"),
            leader("attachdetach", "kube-controller-manager"),
        ],
    };
    let plan = Plan::new(&config, &all()).unwrap();
    assert_eq!(plan.main, set([CloudNode, PersistentVolumeLabel]));
    assert_eq!(plan.migrated, set([CloudNodeLifecycle, Service]));
    assert_eq!(plan.unowned, set([Route]));

    // `--controllers=-service`: a disabled controller waits for nothing.
    let plan = Plan::new(&config, &set([CloudNode, CloudNodeLifecycle, Route])).unwrap();
    assert_eq!(plan.migrated, set([CloudNodeLifecycle]));

    let off = Plan::without_migration(&all());
    assert_eq!(off.main, all());
    assert!(off.migrated.is_empty() && off.unowned.is_empty());
    assert_eq!(off.migration_lease, None);
}

#[test]
fn two_names_for_one_controller_must_agree() {
    let mut config = MigrationConfig {
        leader_name: "m".to_owned(),
        controller_leaders: vec![
            leader("service", "*"),
            leader("service-lb-controller", "cloud-controller-manager"),
        ],
    };
    assert_eq!(Plan::new(&config, &all()).unwrap().migrated, set([Service]));
    config.controller_leaders[1].component = "kube-controller-manager".to_owned();
    let err = Plan::new(&config, &all()).unwrap_err();
    assert!(
        err.contains("`service` and `service-lb-controller`"),
        "{err}"
    );
}

fn migration_of(args: &[&str]) -> Result<LeaderMigration, String> {
    let argv = std::iter::once("fake-cloud-controller-manager")
        .chain(args.iter().copied())
        .map(str::to_owned);
    match parse("fake", argv)? {
        Command::Run(settings) => Ok(settings.leader_migration),
        other => panic!("expected a run, got {other:?}"),
    }
}

#[test]
fn flags_default_to_off_and_enable_upstream_default_without_a_file() {
    assert_eq!(migration_of(&[]), Ok(LeaderMigration::Off));
    assert_eq!(
        migration_of(&["--enable-leader-migration"]),
        Ok(LeaderMigration::On(MigrationConfig::upstream_default()))
    );
    assert_eq!(
        migration_of(&[
            "--enable-leader-migration=true",
            "--leader-migration-config="
        ]),
        Ok(LeaderMigration::On(MigrationConfig::upstream_default()))
    );
    assert_eq!(
        migration_of(&["--enable-leader-migration=f"]),
        Ok(LeaderMigration::Off)
    );
}

#[test]
fn flags_read_the_file_and_name_it_when_it_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, V1).unwrap();
    let flag = format!("--leader-migration-config={}", good.display());
    assert_eq!(
        migration_of(&["--enable-leader-migration", &flag]),
        Ok(LeaderMigration::On(MigrationConfig::parse(V1).unwrap()))
    );

    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, V1.replace("controllermanager.config.k8s.io/v1", "v1")).unwrap();
    let missing = dir.path().join("missing.yaml");
    for (path, expected) in [
        (&bad, "expected kind LeaderMigrationConfiguration"),
        (&missing, "cannot read it"),
    ] {
        let flag = format!("--leader-migration-config={}", path.display());
        let err = migration_of(&["--enable-leader-migration", &flag]).unwrap_err();
        assert!(
            err.starts_with(&format!("--leader-migration-config {}: ", path.display())),
            "{err}"
        );
        assert!(err.contains(expected), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
}

#[test]
fn flags_upstream_ignores_are_warnings_not_silence() {
    // Upstream reads no file unless migration is enabled.
    let ignored = migration_of(&["--leader-migration-config=/nonexistent.yaml"]).unwrap();
    assert!(
        matches!(&ignored, LeaderMigration::Ignored(w) if w.contains("without --enable-leader-migration")),
        "{ignored:?}"
    );
    // Upstream still validates the file, then runs without migration.
    let ignored = migration_of(&["--enable-leader-migration", "--leader-elect=false"]).unwrap();
    assert!(
        matches!(&ignored, LeaderMigration::Ignored(w) if w.contains("--leader-elect=false")),
        "{ignored:?}"
    );
    assert_eq!(
        ignored.plan(&all()).unwrap(),
        Plan::without_migration(&all())
    );
    let err = migration_of(&[
        "--enable-leader-migration",
        "--leader-elect=false",
        "--leader-migration-config=/nonexistent.yaml",
    ])
    .unwrap_err();
    assert!(err.contains("cannot read it"), "{err}");
}
