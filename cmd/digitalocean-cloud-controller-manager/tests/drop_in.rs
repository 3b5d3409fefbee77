//! Switching from upstream's DigitalOcean CCM, end to end: the real binary
//! with upstream's defaults against the fake API behind Prism — a private
//! load balancer when asked, per-Service ownership whatever the annotations
//! say, and the public-access firewall.

mod support;

use ccm_test_support::{annotation, eventually, ingress_ips};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Patch, PatchParams};
use provider_digitalocean::test_util::{FakeDroplet, account};
use serde_json::json;
use support::{CLUSTER_ID, Cluster, LOAD_BALANCER_ID, REGION, WAIT};

const NETWORK: &str = "service.beta.kubernetes.io/do-loadbalancer-network";
const PROXY_PROTOCOL: &str = "service.beta.kubernetes.io/do-loadbalancer-enable-proxy-protocol";

/// Upstream's environment: token, API, cluster ID and region, nothing else.
fn upstream_env(
    account: &provider_digitalocean::test_util::Account,
) -> Vec<(&'static str, String)> {
    vec![
        ("DO_ACCESS_TOKEN", account.token.clone()),
        ("DO_OVERRIDE_URL", account.harness.prism_url.clone()),
        ("DO_CLUSTER_ID", CLUSTER_ID.to_owned()),
        ("REGION", REGION.to_owned()),
    ]
}

async fn provisioned(cluster: &Cluster, name: &str) -> (Service, String) {
    let service = eventually(&format!("{name} has an ingress IP"), WAIT, || async {
        cluster
            .services()
            .get(name)
            .await
            .ok()
            .filter(|s| !ingress_ips(s).is_empty())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.ccm.log_tail()));
    let id = annotation(&service, LOAD_BALANCER_ID)
        .expect("the load-balancer ID is recorded")
        .to_owned();
    (service, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_service_gets_a_private_load_balancer_and_ownership_holds() {
    let account = account();
    account.set_activate_after_reads(0);
    account.add_droplet(FakeDroplet::new(4101, "node-1"));
    let env = upstream_env(&account);
    let cluster = Cluster::start_with(account, 1, &env).await;

    cluster
        .create_service("private", &[(NETWORK, "INTERNAL")])
        .await;
    let (private, private_id) = provisioned(&cluster, "private").await;
    let lb = cluster.load_balancer(&private_id).unwrap();
    assert_eq!(lb["network"], "INTERNAL");
    assert_eq!(lb["network_stack"], "IPV4");
    assert_eq!(lb["type"], "REGIONAL_NETWORK", "upstream's default type");
    assert_eq!(
        annotation(&private, "service.beta.kubernetes.io/do-loadbalancer-type"),
        Some("REGIONAL_NETWORK"),
        "the type is recorded on the Service, as upstream"
    );

    cluster.create_service("public", &[]).await;
    let (_, public_id) = provisioned(&cluster, "public").await;
    let before = cluster.account.load_balancers();

    // Point `public` at `private`'s load balancer, and ask for a change.
    let hijack = json!({"metadata": {"annotations": {LOAD_BALANCER_ID: private_id, PROXY_PROTOCOL: "true"}}});
    cluster
        .services()
        .patch("public", &PatchParams::default(), &Patch::Merge(&hijack))
        .await
        .unwrap();
    let warning = eventually("a Warning on the hijacking Service", WAIT, || async {
        cluster
            .warnings_about("public")
            .await
            .into_iter()
            .find(|e| {
                e.message
                    .as_deref()
                    .is_some_and(|m| m.contains(&private_id))
            })
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.ccm.log_tail()));
    assert!(warning.message.unwrap().len() < 1024);
    assert_eq!(
        cluster.account.load_balancers(),
        before,
        "neither load balancer changed"
    );
    assert!(cluster.load_balancer(&public_id).is_some());
    cluster.assert_contract_clean();
}
