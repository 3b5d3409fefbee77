//! Every flag: its default, a good value, and a bad value with its message.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use ccm_controllers::ControllerId;

use super::{Command, Settings, parse};

fn run(args: &[&str]) -> Result<Settings, String> {
    let argv = std::iter::once("fake-cloud-controller-manager")
        .chain(args.iter().copied())
        .map(str::to_owned);
    match parse("fake", argv)? {
        Command::Run(settings) => Ok(*settings),
        other => panic!("expected a run, got {other:?}"),
    }
}

pub(super) fn ok(args: &[&str]) -> Settings {
    run(args).unwrap_or_else(|e| panic!("{args:?} should parse: {e}"))
}

pub(super) fn bad(args: &[&str], expected: &str) {
    let err = run(args).expect_err(&format!("{args:?} should be refused"));
    assert!(
        err.contains(expected),
        "{args:?}: `{err}` does not mention `{expected}`"
    );
    assert!(!err.contains('\n'), "one line: {err}");
}

#[test]
fn defaults_match_upstream() {
    let s = ok(&[]);
    assert_eq!(s.kubeconfig, None);
    assert_eq!(s.master, None);
    assert_eq!(s.cloud_config, None);
    assert_eq!(s.cluster_name, "kubernetes");
    assert_eq!(
        s.controllers,
        ControllerId::DEFAULT.into_iter().collect::<BTreeSet<_>>()
    );
    assert!(s.configure_cloud_routes);
    assert!(!s.allocate_node_cidrs);
    assert!(s.cluster_cidrs.is_empty());
    assert_eq!(s.concurrent_service_syncs, 1);
    assert_eq!(s.concurrent_node_syncs, 1);
    assert_eq!(s.node_status_update_frequency, Duration::from_secs(300));
    assert_eq!(s.node_monitor_period, Duration::from_secs(5));
    assert_eq!(s.route_reconciliation_period, Duration::from_secs(10));
    assert_eq!(s.node_sync_period, Duration::ZERO);
    let le = s.leader_election.expect("leader election is on by default");
    assert_eq!(
        (le.lease_duration, le.renew_deadline, le.retry_period),
        (
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_secs(2)
        )
    );
    assert_eq!(
        (le.lease_name.as_str(), le.lease_namespace.as_str()),
        ("cloud-controller-manager", "kube-system")
    );
    assert_eq!(s.kube_api_qps, Some(20.0));
    assert_eq!(s.kube_api_burst, 30);
    assert_eq!(
        s.serving.map(|serving| serving.addr),
        Some("0.0.0.0:10258".parse::<SocketAddr>().unwrap())
    );
    assert!(!s.allow_untagged_cloud);
    assert_eq!(s.logging.verbosity, 0);
    assert!(!s.logging.json && !s.logging.split_stream && s.logging.vmodule.is_empty());
    assert!(!s.use_service_account_credentials);
    assert_eq!(s.controller_start_interval, Duration::ZERO);
    assert!(
        s.notes.is_empty(),
        "defaults need no explanation: {:?}",
        s.notes
    );
}

#[test]
fn client_and_cloud_flags() {
    assert_eq!(
        ok(&["--kubeconfig=/etc/kubernetes/ccm.conf"])
            .kubeconfig
            .unwrap()
            .to_str(),
        Some("/etc/kubernetes/ccm.conf")
    );
    bad(&["--kubeconfig"], "--kubeconfig");
    assert_eq!(
        ok(&["--master", "https://10.0.0.1:6443"]).master.as_deref(),
        Some("https://10.0.0.1:6443")
    );
    bad(
        &["--master=not a url"],
        "--master: `not a url` is not a URL",
    );
    assert!(ok(&["--cloud-provider=fake"]).cloud_config.is_none());
    assert!(ok(&["--cloud-provider="]).cloud_config.is_none());
    bad(
        &["--cloud-provider=aws"],
        "--cloud-provider=`aws`: this binary runs the `fake` provider",
    );
    assert_eq!(
        ok(&["--cloud-config=/etc/cloud.toml"])
            .cloud_config
            .unwrap()
            .to_str(),
        Some("/etc/cloud.toml")
    );
    bad(&["--cloud-config"], "--cloud-config");
    assert_eq!(ok(&["--cluster-name=prod-eu"]).cluster_name, "prod-eu");
    bad(&["--cluster-name="], "--cluster-name must not be empty");
}

#[test]
fn controller_selection() {
    let s = ok(&["--controllers=*,-route"]);
    assert!(!s.controllers.contains(&ControllerId::Route) && s.controllers.len() == 4);
    assert!(s.controllers.contains(&ControllerId::PersistentVolumeLabel));
    assert!(
        !s.controllers
            .contains(&ControllerId::KubeletServingCsrApprover)
    );
    let s = ok(&["--controllers=*,kubelet-serving-csr-approver"]);
    assert_eq!(s.controllers.len(), 6);
    let s = ok(&["--controllers=service,cloud-node-controller"]);
    assert_eq!(
        s.controllers,
        [ControllerId::CloudNode, ControllerId::Service]
            .into_iter()
            .collect()
    );
    bad(
        &["--controllers=service,nodeipam"],
        "--controllers: unknown controller `nodeipam`",
    );
}

#[test]
fn route_flags() {
    let s = ok(&[
        "--allocate-node-cidrs",
        "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56",
        "--configure-cloud-routes=false",
    ]);
    assert!(s.allocate_node_cidrs && !s.configure_cloud_routes);
    assert_eq!(s.cluster_cidrs.len(), 2);
    bad(&["--allocate-node-cidrs=maybe"], "`maybe` is not a boolean");
    bad(
        &["--configure-cloud-routes", "false"],
        "unexpected argument `false`",
    );
    bad(
        &["--cluster-cidr=10.244.0.0/33"],
        "--cluster-cidr: `10.244.0.0/33` is not a CIDR",
    );
    bad(
        &["--cluster-cidr=10.244.0.0/16,10.245.0.0/16"],
        "two CIDRs of one IP family",
    );
    bad(
        &["--cluster-cidr=10.244.0.0/16,fd00::/56,10.9.0.0/16"],
        "at most 2",
    );
}

#[test]
fn period_flags() {
    assert_eq!(
        ok(&["--node-status-update-frequency=1m30s"]).node_status_update_frequency,
        Duration::from_secs(90)
    );
    bad(&["--node-status-update-frequency=5"], "missing a unit");
    bad(
        &["--node-status-update-frequency=0"],
        "--node-status-update-frequency must be above zero",
    );
    assert_eq!(
        ok(&["--node-monitor-period=500ms"]).node_monitor_period,
        Duration::from_millis(500)
    );
    bad(&["--node-monitor-period=5x"], "unknown unit `x`");
    assert_eq!(
        ok(&["--route-reconciliation-period=1m"]).route_reconciliation_period,
        Duration::from_secs(60)
    );
    bad(&["--route-reconciliation-period=-1s"], "negative");
    assert_eq!(
        ok(&["--node-sync-period=100s"]).node_sync_period,
        Duration::from_secs(100)
    );
    bad(&["--node-sync-period=soon"], "not a duration");
}

#[test]
fn leader_election_flags() {
    assert!(ok(&["--leader-elect=false"]).leader_election.is_none());
    bad(&["--leader-elect=yes"], "`yes` is not a boolean");
    let le = ok(&[
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=5s",
        "--leader-elect-resource-name=my-ccm",
        "--leader-elect-resource-namespace=ccm-system",
    ])
    .leader_election
    .unwrap();
    assert_eq!(
        (
            le.lease_duration.as_secs(),
            le.renew_deadline.as_secs(),
            le.retry_period.as_secs()
        ),
        (30, 20, 5)
    );
    assert_eq!(
        (le.lease_name.as_str(), le.lease_namespace.as_str()),
        ("my-ccm", "ccm-system")
    );
    bad(&["--leader-elect-lease-duration=15"], "missing a unit");
    bad(
        &["--leader-elect-renew-deadline=20s"],
        "must be shorter than --leader-elect-lease-duration",
    );
    bad(
        &["--leader-elect-retry-period=10s"],
        "shorter than --leader-elect-renew-deadline",
    );
    bad(
        &["--leader-elect-resource-lock=endpoints"],
        "only `leases` is supported",
    );
    assert!(
        ok(&["--leader-elect-resource-lock=leases"])
            .leader_election
            .is_some()
    );
    bad(
        &["--leader-elect-resource-name=My_CCM"],
        "`My_CCM` is not a valid Kubernetes name",
    );
    bad(
        &["--leader-elect-resource-namespace="],
        "--leader-elect-resource-namespace must not be empty",
    );
}

#[test]
fn api_client_flags() {
    assert_eq!(ok(&["--kube-api-qps=100.5"]).kube_api_qps, Some(100.5));
    assert_eq!(
        ok(&["--kube-api-qps=-1"]).kube_api_qps,
        None,
        "client-go: a negative QPS means no client-side limit"
    );
    assert_eq!(
        ok(&["--kube-api-qps=0"]).kube_api_qps,
        Some(5.0),
        "client-go's default"
    );
    bad(&["--kube-api-qps=fast"], "`fast` is not a number");
    assert_eq!(ok(&["--kube-api-burst=200"]).kube_api_burst, 200);
    assert_eq!(ok(&["--kube-api-burst=0"]).kube_api_burst, 10);
    bad(
        &["--kube-api-burst=-3"],
        "--kube-api-burst: `-3` is negative",
    );
}

#[test]
fn logging_and_misc_flags() {
    assert!(ok(&["--allow-untagged-cloud"]).allow_untagged_cloud);
    bad(&["--allow-untagged-cloud=sometimes"], "not a boolean");
    assert_eq!(ok(&["--v=4"]).logging.verbosity, 4);
    assert_eq!(ok(&["-v", "2"]).logging.verbosity, 2);
    assert_eq!(ok(&["-v=3"]).logging.verbosity, 3);
    bad(&["--v=loud"], "invalid value `loud` for `--v");
    bad(&["--v=-1"], "negative");
    assert!(ok(&["--logging-format=json"]).logging.json);
    bad(
        &["--logging-format=xml"],
        "invalid value `xml` for `--logging-format",
    );
    bad(&["--no-such-flag"], "unexpected argument `--no-such-flag`");
    bad(&["stray"], "unexpected argument `stray`");
}

#[test]
fn version_and_help_are_commands() {
    let argv = |a: &str| vec!["ccm".to_owned(), a.to_owned()];
    assert_eq!(
        parse("fake", argv("--version")),
        Ok(Command::Version { raw: false })
    );
    assert_eq!(
        parse("fake", argv("--version=raw")),
        Ok(Command::Version { raw: true })
    );
    assert!(matches!(
        parse("fake", argv("--version=false")),
        Ok(Command::Run(_))
    ));
    assert!(matches!(parse("fake", argv("-h")), Ok(Command::Help(_))));
    match parse("fake", argv("--help")) {
        Ok(Command::Help(text)) => assert!(text.contains("--node-monitor-period")),
        other => panic!("expected help, got {other:?}"),
    }
}

#[test]
fn repeated_flags_take_the_last_value_as_pflag() {
    assert_eq!(ok(&["--v=1", "--v=3"]).logging.verbosity, 3);
    assert_eq!(
        ok(&["--cluster-name=a", "--cluster-name=b"]).cluster_name,
        "b"
    );
}

#[test]
fn logging_flags_follow_component_base() {
    let s = ok(&["--vmodule=route*=4,node=2"]).logging;
    assert_eq!(s.vmodule.len(), 2);
    bad(&["--vmodule=route"], "--vmodule: `route` is not pattern=N");
    bad(
        &["--logging-format=json", "--vmodule=route=4"],
        "--vmodule works only with --logging-format=text",
    );
    bad(
        &["--log-json-split-stream"],
        "--log-json-split-stream: the LoggingAlphaOptions feature gate is disabled",
    );
    let s = ok(&[
        "--logging-format=json",
        "--log-json-split-stream",
        "--feature-gates=LoggingAlphaOptions=true",
    ]);
    assert!(s.logging.json && s.logging.split_stream);
    bad(
        &[
            "--logging-format=json",
            "--feature-gates=LoggingBetaOptions=false",
        ],
        "--logging-format=json: the LoggingBetaOptions feature gate is disabled",
    );
    assert!(!ok(&["--log-text-split-stream=false"]).logging.split_stream);
    let s = ok(&["--log-flush-frequency=10s"]);
    assert!(
        s.notes
            .iter()
            .any(|n| n.starts_with("--log-flush-frequency"))
    );
    bad(&["--log-flush-frequency=often"], "not a duration");
    bad(&["--log-json-info-buffer-size=lots"], "not a quantity");
}

#[test]
fn feature_gates_are_checked_against_upstreams_names() {
    assert!(
        ok(&["--feature-gates=LoggingAlphaOptions=true"])
            .feature_gates
            .enabled("LoggingAlphaOptions")
    );
    bad(
        &["--feature-gates=NoSuchGate=true"],
        "--feature-gates: unrecognized feature gate: NoSuchGate",
    );
    let s = ok(&["--feature-gates=CloudControllerManagerWebhook=true"]);
    assert!(
        s.notes.iter().any(|n| n.contains("has no effect here")),
        "{:?}",
        s.notes
    );
}

#[test]
fn the_watch_based_routes_gate_makes_the_route_period_a_resync() {
    let s = ok(&[]);
    assert_eq!(s.route_period, Duration::from_secs(10));
    let s = ok(&[
        "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
        "--min-resync-period=1h",
    ]);
    assert!(
        (Duration::from_secs(3600)..Duration::from_secs(7200)).contains(&s.route_period),
        "{:?}",
        s.route_period
    );
    assert_eq!(
        s.route_reconciliation_period,
        Duration::from_secs(10),
        "configz still shows the flag"
    );
    assert!(
        !s.notes
            .iter()
            .any(|n| n.contains("has no effect") || n.starts_with("--min-resync-period")),
        "{:?}",
        s.notes
    );
}

#[test]
fn flags_that_mean_nothing_here_say_why_once() {
    let s = ok(&[
        "--external-cloud-volume-plugin=aws",
        "--kube-api-content-type=application/vnd.kubernetes.protobuf",
        "--min-resync-period=12h",
        "--cidr-allocator-type=CloudAllocator",
        "--allocate-node-cidrs=true",
    ]);
    for flag in [
        "--external-cloud-volume-plugin",
        "--kube-api-content-type",
        "--min-resync-period",
        "--cidr-allocator-type",
        "--allocate-node-cidrs",
    ] {
        assert_eq!(
            s.notes.iter().filter(|n| n.starts_with(flag)).count(),
            1,
            "{flag}: {:?}",
            s.notes
        );
    }
    let s = ok(&["--allow-untagged-cloud", "--node-sync-period=100s"]);
    assert!(s.notes.contains(&"Flag --allow-untagged-cloud has been deprecated, This flag is deprecated and will be removed in a future release. A cluster-id will be required on cloud instances.".to_owned()));
    assert!(
        s.notes
            .iter()
            .any(|n| n.starts_with("Flag --node-sync-period has been deprecated"))
    );
}

#[test]
fn service_account_credentials_and_start_interval() {
    let s = ok(&[
        "--use-service-account-credentials=true",
        "--controller-start-interval=2s",
    ]);
    assert!(s.use_service_account_credentials);
    assert_eq!(s.controller_start_interval, Duration::from_secs(2));
    bad(
        &["--use-service-account-credentials=perhaps"],
        "not a boolean",
    );
}

#[test]
fn target_health_reads_are_on_unless_turned_off() {
    assert!(ok(&[]).load_balancer_target_health);
    assert!(ok(&["--load-balancer-target-health"]).load_balancer_target_health);
    assert!(!ok(&["--load-balancer-target-health=false"]).load_balancer_target_health);
    bad(&["--load-balancer-target-health=often"], "not a boolean");
}

#[test]
fn webhook_flags_are_validated_as_upstream() {
    assert_eq!(
        ok(&[]).webhook,
        None,
        "upstream serves no webhook by default"
    );
    assert_eq!(
        ok(&["--webhooks=*", "--webhook-secure-port=0"]).webhook,
        None
    );
    assert_eq!(ok(&["--webhooks=*,-service-annotations"]).webhook, None);
    let served = ok(&["--webhooks=service-annotations"]).webhook.unwrap();
    assert_eq!(
        served.addr.to_string(),
        "0.0.0.0:10260",
        "upstream's default port"
    );
    assert_eq!(served.tls.cert, crate::serving::CertSource::Generated);
    assert_eq!(served.managed, None);
    assert_eq!(served.client_ca, None, "any caller, as upstream");
    let verified = ok(&[
        "--webhooks=*",
        "--webhook-client-ca-file=/etc/ccm/apiserver-ca.crt",
    ]);
    assert_eq!(
        verified.webhook.unwrap().client_ca,
        Some(std::path::PathBuf::from("/etc/ccm/apiserver-ca.crt"))
    );
    let all = ok(&[
        "--webhooks=*",
        "--webhook-secure-port=10300",
        "--webhook-bind-address=127.0.0.1",
    ]);
    assert_eq!(all.webhook.unwrap().addr.to_string(), "127.0.0.1:10300");
    bad(
        &["--webhooks=lb-annotations"],
        "--webhooks: `lb-annotations` is not in the list of known webhooks (service-annotations)",
    );
    bad(
        &["--webhook-tls-cert-file=/tls.crt"],
        "--webhook-tls-cert-file and --webhook-tls-private-key-file go together",
    );
    bad(&["--webhook-secure-port=99999"], "--webhook-secure-port");
}

#[test]
fn kept_webhook_certificates_need_all_three_flags() {
    let kept = ok(&[
        "--webhooks=service-annotations",
        "--webhook-cert-secret=kube-system/ccm-webhook-certs",
        "--webhook-service=kube-system/ccm-webhook",
        "--webhook-configuration=ccm-service-annotations",
    ])
    .webhook
    .unwrap()
    .managed
    .unwrap();
    assert_eq!(kept.secret.namespace, "kube-system");
    assert_eq!(kept.secret.name, "ccm-webhook-certs");
    assert_eq!(kept.service.name, "ccm-webhook");
    assert_eq!(kept.configuration, "ccm-service-annotations");
    bad(
        &["--webhook-cert-secret=kube-system/x"],
        "--webhook-cert-secret, --webhook-service and --webhook-configuration go together",
    );
    bad(
        &["--webhook-cert-secret=nope"],
        "expected NAMESPACE/NAME, got `nope`",
    );
    bad(&["--webhook-service=Kube/System"], "--webhook-service");
    bad(
        &[
            "--webhook-cert-secret=a/b",
            "--webhook-service=a/c",
            "--webhook-configuration=d",
            "--webhook-cert-dir=/tmp",
        ],
        "--webhook-cert-secret: the CCM keeps its own certificates there",
    );
}

#[test]
fn webhook_strict_refuses_every_problem_and_is_off_by_default() {
    use crate::admission::Policy;
    let policy = |args: &[&str]| {
        let mut args = args.to_vec();
        args.push("--webhooks=service-annotations");
        ok(&args).webhook.expect("served").policy
    };
    assert_eq!(policy(&[]), Policy::Upstream, "what upstream fails on only");
    assert_eq!(policy(&["--webhook-strict"]), Policy::Strict);
    assert_eq!(policy(&["--webhook-strict=true"]), Policy::Strict);
    assert_eq!(policy(&["--webhook-strict=false"]), Policy::Upstream);
    assert_eq!(
        policy(&["--webhook-strict=true", "--webhook-strict=false"]),
        Policy::Upstream,
        "the last one wins, as pflag"
    );
    assert_eq!(
        ok(&["--webhook-strict"]).webhook,
        None,
        "strict alone serves no webhook"
    );
    bad(&["--webhook-strict=perhaps"], "not a boolean");
    bad(&["--webhook-strict", "yes"], "unexpected argument `yes`");
    let help = match parse("fake", vec!["ccm".to_owned(), "--help".to_owned()]) {
        Ok(Command::Help(text)) => text,
        other => panic!("expected help, got {other:?}"),
    };
    assert!(help.contains("--webhook-strict"), "{help}");
}

#[test]
fn repeated_list_flags_append_as_pflag_string_slices() {
    let s = ok(&["--controllers=service", "--controllers=route"]);
    assert_eq!(
        s.controllers,
        [ControllerId::Service, ControllerId::Route]
            .into_iter()
            .collect()
    );
}
