//! A provider's own controllers on the command line: their names in
//! `--controllers` and their flags only where the provider declares them,
//! upstream's defaults and validation, one line on bad input.

use std::collections::BTreeMap;

use ccm_cloud_provider::{ProviderController, ProviderControllerKind};
use ccm_controllers::{ControllerId, QueueRate};

use super::provider::{help_for, parse_for};
use super::{Command, Settings};

const EXTRAS: &[ProviderController] = &[
    ProviderController {
        name: "tagging",
        kind: ProviderControllerKind::InstanceTagging,
        metrics_prefix: "cloudprovider_test",
    },
    ProviderController {
        name: "nodeipam",
        kind: ProviderControllerKind::NodeIpam,
        metrics_prefix: "cloudprovider_test",
    },
];

fn run(extras: &[ProviderController], args: &[&str]) -> Result<Settings, String> {
    let argv = std::iter::once("test-cloud-controller-manager")
        .chain(args.iter().copied())
        .map(str::to_owned);
    match parse_for("test", extras, argv)? {
        Command::Run(settings) => Ok(*settings),
        other => panic!("expected a run, got {other:?}"),
    }
}

fn ok(args: &[&str]) -> Settings {
    run(EXTRAS, args).unwrap_or_else(|e| panic!("{args:?} should parse: {e}"))
}

fn bad(extras: &[ProviderController], args: &[&str], expected: &str) {
    let err = run(extras, args).expect_err(&format!("{args:?} should be refused"));
    assert!(
        err.contains(expected),
        "{args:?}: `{err}` does not mention `{expected}`"
    );
    assert!(!err.contains('\n'), "one line: {err}");
}

fn names(s: &Settings) -> Vec<&'static str> {
    s.provider_controllers
        .enabled
        .iter()
        .map(|c| c.name)
        .collect()
}

#[test]
fn provider_controllers_are_off_unless_named_even_with_a_star() {
    let s = ok(&[]);
    assert!(names(&s).is_empty());
    let s = ok(&["--controllers=*"]);
    assert!(names(&s).is_empty());
    assert_eq!(s.controllers.len(), ControllerId::DEFAULT.len());
}

#[test]
fn star_and_tagging_runs_the_generic_ones_and_tagging() {
    let s = ok(&[
        "--controllers=*,tagging",
        "--tags=team=platform,cost-center=42",
        "--resources=instance",
    ]);
    assert_eq!(names(&s), ["tagging"]);
    assert_eq!(s.controllers.len(), ControllerId::DEFAULT.len());
    assert_eq!(
        s.provider_controllers.settings.tags,
        BTreeMap::from([
            ("team".to_owned(), "platform".to_owned()),
            ("cost-center".to_owned(), "42".to_owned()),
        ])
    );
    assert_eq!(s.provider_controllers.settings.tagging_rate, None);
}

#[test]
fn a_negated_name_wins() {
    let s = ok(&["--controllers=nodeipam,-nodeipam,cloud-node"]);
    assert!(names(&s).is_empty());
    assert_eq!(s.controllers.len(), 1);
}

#[test]
fn repeated_tags_flags_add_to_the_map() {
    let s = ok(&[
        "--controllers=tagging",
        "--tags=a=1",
        "--tags=b=2",
        "--resources=instance",
    ]);
    assert_eq!(s.provider_controllers.settings.tags.len(), 2);
}

#[test]
fn tagging_is_validated_as_upstream_when_on() {
    bad(
        EXTRAS,
        &["--controllers=tagging", "--resources=instance"],
        "--tags must not be empty",
    );
    bad(
        EXTRAS,
        &["--controllers=tagging", "--tags=a=b"],
        "--resources must not be empty",
    );
    bad(
        EXTRAS,
        &["--controllers=tagging", "--tags=a=b", "--resources=volume"],
        "volume is not a supported resource",
    );
    bad(
        EXTRAS,
        &[
            "--controllers=tagging",
            "--tags=a=b",
            "--resources=instance",
            "--tagging-controller-rate-limit=-1",
        ],
        "--tagging-controller-rate-limit should not be less than zero",
    );
    bad(
        EXTRAS,
        &[
            "--controllers=tagging",
            "--tags=a=b",
            "--resources=instance",
            "--tagging-controller-burst-limit=-1",
        ],
        "--tagging-controller-burst-limit should not be less than zero",
    );
    bad(
        EXTRAS,
        &["--tags=novalue"],
        "must be formatted as key=value",
    );
    // Off, its flags are accepted unchecked, as upstream.
    let s = ok(&["--tagging-controller-rate-limit=-1"]);
    assert!(names(&s).is_empty());
}

#[test]
fn a_queue_rate_needs_both_limits_above_zero() {
    let s = ok(&[
        "--controllers=tagging,nodeipam",
        "--tags=a=b",
        "--resources=instance",
        "--tagging-controller-rate-limit=5",
        "--tagging-controller-burst-limit=10",
        "--nodeipam-controller-rate-limit=5",
    ]);
    assert_eq!(
        s.provider_controllers.settings.tagging_rate,
        Some(QueueRate {
            qps: 5.0,
            burst: 10
        })
    );
    assert_eq!(s.provider_controllers.settings.nodeipam_rate, None);
}

#[test]
fn nodeipam_defaults_to_ipv6_only_with_upstreams_mask() {
    let s = ok(&["--controllers=*,nodeipam", "--dualstack=false"]);
    assert_eq!(names(&s), ["nodeipam"]);
    assert!(!s.provider_controllers.settings.dual_stack);
    assert_eq!(s.provider_controllers.settings.node_cidr_mask_size, 24);
}

#[test]
fn with_nodeipam_on_pod_cidr_allocation_is_no_longer_called_inert() {
    let off = ok(&["--allocate-node-cidrs"]);
    assert!(
        off.notes
            .iter()
            .any(|n| n.starts_with("--allocate-node-cidrs"))
    );
    let on = ok(&["--allocate-node-cidrs", "--controllers=*,nodeipam"]);
    assert!(
        !on.notes
            .iter()
            .any(|n| n.starts_with("--allocate-node-cidrs")),
        "{:?}",
        on.notes
    );
}

#[test]
fn dual_stack_needs_one_ipv4_cluster_cidr_the_mask_fits() {
    bad(
        EXTRAS,
        &["--controllers=nodeipam", "--dualstack"],
        "--cluster-cidr is required",
    );
    bad(
        EXTRAS,
        &[
            "--controllers=nodeipam",
            "--dualstack",
            "--cluster-cidr=10.0.0.0/16,fd00::/48",
        ],
        "takes one CIDR",
    );
    bad(
        EXTRAS,
        &[
            "--controllers=nodeipam",
            "--dualstack",
            "--cluster-cidr=10.0.0.0/16",
            "--node-cidr-mask-size=8",
        ],
        "--node-cidr-mask-size=8",
    );
    bad(
        EXTRAS,
        &[
            "--controllers=nodeipam",
            "--nodeipam-controller-burst-limit=-2",
        ],
        "--nodeipam-controller-burst-limit should not be less than zero",
    );
    let s = ok(&[
        "--controllers=nodeipam",
        "--dualstack",
        "--cluster-cidr=10.0.0.0/16",
        "--node-cidr-mask-size=26",
    ]);
    assert!(s.provider_controllers.settings.dual_stack);
    assert_eq!(s.provider_controllers.settings.node_cidr_mask_size, 26);
}

#[test]
fn without_the_provider_the_names_and_flags_are_unknown() {
    bad(
        &[],
        &["--controllers=*,tagging"],
        "unknown controller `tagging`",
    );
    bad(
        &[],
        &["--controllers=nodeipam"],
        "unknown controller `nodeipam`",
    );
    bad(&[], &["--tags=a=b"], "--tags");
    bad(&[], &["--dualstack=false"], "--dualstack");
}

#[test]
fn help_lists_the_provider_flags_only_where_declared() {
    let with = help_for("aws", EXTRAS);
    assert!(
        with.contains("Usage: aws-cloud-controller-manager [OPTIONS]"),
        "the usage line names the binary: {with}"
    );
    for flag in [
        "--tags",
        "--resources",
        "--nodeipam-controller-rate-limit",
        "--dualstack",
        "--node-cidr-mask-size",
    ] {
        assert!(with.contains(flag), "{flag} in --help");
    }
    assert!(!help_for("aws", &[]).contains("--dualstack"));
}
