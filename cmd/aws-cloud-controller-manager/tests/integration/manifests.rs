//! Started as upstream's own manifest starts it: the arguments of
//! cloud-provider-aws's example DaemonSet (`examples/existing-cluster/base`:
//! `--v=2 --cloud-provider=aws --use-service-account-credentials=true
//! --configure-cloud-routes=false`). A pod gets its API server from the
//! in-cluster config and its region from the metadata service; a test has
//! neither, so it adds `--kubeconfig` and a cloud config pointing at moto,
//! and nothing else.
//!
//! And a manifest written for upstream applies: the admission webhook
//! denies only what upstream also fails the Service on ([`admission`]).

#[path = "manifests/admission.rs"]
mod admission;
use crate::support;

use std::time::Duration;

use ccm_provider_aws::test_util::seed;
use ccm_provider_aws::test_util::{cloud_config, ec2, moto};
use ccm_test_support::{Credentials, eventually};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use support::objects::{create_node, is_initialized, kubelet_node, nodes};

/// The example DaemonSet's arguments, verbatim.
const UPSTREAM_ARGS: [&str; 4] = [
    "--v=2",
    "--cloud-provider=aws",
    "--use-service-account-credentials=true",
    "--configure-cloud-routes=false",
];

#[tokio::test]
async fn upstreams_example_daemonset_starts_leads_and_initializes_a_node() -> anyhow::Result<()> {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 1).await?;
    let api = ccm_test_support::ApiServer::start().await?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("cloud.conf");
    std::fs::write(
        &config,
        cloud_config(&moto, &format!("VPC = {}", estate.vpc)),
    )?;
    // Per-controller ServiceAccounts need the rights upstream's example
    // grants its own account (controller-credentials-role.yaml), which the
    // chart grants only with useServiceAccountCredentials: run as the
    // administrator, as the example's superset role would.
    let admin = Credentials {
        kubeconfig: api.kubeconfig_path().to_owned(),
        rbac_limited: false,
    };
    let mut args: Vec<String> = UPSTREAM_ARGS.iter().map(|a| (*a).to_owned()).collect();
    args.push(format!("--cloud-config={}", config.display()));
    let ccm = support::ccm::launch("manifest", &args)
        .credentials(&admin)
        .start()
        .await?;

    let leases: Api<Lease> = Api::namespaced(api.client(), "kube-system");
    let holder = eventually("the Lease held", Duration::from_secs(30), || async {
        Ok(leases
            .get_opt("cloud-controller-manager")
            .await?
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty()))
    })
    .await?;
    assert!(!holder.is_empty());

    let instance = &estate.instances[0];
    let client = api.client();
    create_node(&client, &kubelet_node(instance, true, None)).await?;
    eventually("the node initialized", Duration::from_secs(60), || async {
        let node = nodes(&client).get(&instance.private_dns_name).await?;
        Ok(is_initialized(&node).then_some(()))
    })
    .await?;
    let log = ccm.log();
    assert!(
        log.contains("controllers use their own ServiceAccounts' credentials"),
        "{log}"
    );
    assert!(
        !log.contains("route controller started"),
        "--configure-cloud-routes=false: {log}"
    );
    Ok(())
}
