//! Switching from upstream's DigitalOcean CCM, end to end: the real binary
//! with upstream's defaults against the fake API behind Prism — a private
//! load balancer when asked, per-Service ownership whatever the annotations
//! say, and the public-access firewall.

use crate::support;

use ccm_provider_digitalocean::test_util::{FakeDroplet, account};
use ccm_test_support::{annotation, eventually};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::{CLUSTER_ID, Cluster, LOAD_BALANCER_ID, REGION, WAIT, provisioned};

const NETWORK: &str = "service.beta.kubernetes.io/do-loadbalancer-network";
const PROXY_PROTOCOL: &str = "service.beta.kubernetes.io/do-loadbalancer-enable-proxy-protocol";

/// Upstream's environment: token, API, cluster ID and region, nothing else.
fn upstream_env(
    account: &ccm_provider_digitalocean::test_util::Account,
) -> Vec<(&'static str, String)> {
    vec![
        ("DO_ACCESS_TOKEN", account.token.clone()),
        ("DO_OVERRIDE_URL", account.harness.prism_url.clone()),
        ("DO_CLUSTER_ID", CLUSTER_ID.to_owned()),
        ("REGION", REGION.to_owned()),
    ]
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

/// With upstream's firewall variables, the running binary keeps one
/// firewall whose inbound rules are the NodePorts of the NodePort Services
/// (upstream's rule), and drops a deleted Service's ports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_access_firewall_follows_the_node_ports() {
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use kube::api::{DeleteParams, PostParams};

    let account = account();
    let mut env = upstream_env(&account);
    env.extend([
        (
            "PUBLIC_ACCESS_FIREWALL_NAME",
            "k8s-public-access".to_owned(),
        ),
        ("PUBLIC_ACCESS_FIREWALL_TAGS", "k8s-worker".to_owned()),
    ]);
    let cluster = Cluster::start_with(account, 1, &env).await;
    let node_port = |name: &str| Service {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("NodePort".to_owned()),
            ports: Some(vec![ServicePort {
                port: 80,
                protocol: Some("TCP".to_owned()),
                ..Default::default()
            }]),
            selector: Some([("app".to_owned(), name.to_owned())].into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut ports = Vec::new();
    for name in ["shop", "blog"] {
        let created = cluster
            .services()
            .create(&PostParams::default(), &node_port(name))
            .await
            .unwrap();
        ports.push(created.spec.unwrap().ports.unwrap()[0].node_port.unwrap());
    }
    let inbound = || {
        let firewalls = cluster.account.firewalls();
        let mut got: Vec<String> = firewalls
            .first()
            .and_then(|f| f["inbound_rules"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|r| {
                format!(
                    "{}/{}",
                    r["protocol"].as_str().unwrap_or(""),
                    r["ports"].as_str().unwrap_or("")
                )
            })
            .collect();
        got.sort();
        (firewalls.len(), got)
    };
    let want = |ports: &[i32]| {
        let mut w: Vec<String> = ports.iter().map(|p| format!("tcp/{p}")).collect();
        w.sort();
        (1, w)
    };
    let both = want(&ports);
    eventually("the firewall opens both node ports", WAIT, || async {
        (inbound() == both).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", inbound(), cluster.ccm.log_tail()));
    assert_eq!(cluster.account.firewalls()[0]["name"], "k8s-public-access");
    assert_eq!(
        cluster.account.firewalls()[0]["tags"],
        json!(["k8s-worker"])
    );

    cluster
        .services()
        .delete("blog", &DeleteParams::default())
        .await
        .unwrap();
    let one = want(&ports[..1]);
    eventually("the deleted Service's port is closed", WAIT, || async {
        (inbound() == one).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", inbound(), cluster.ccm.log_tail()));
    cluster.assert_contract_clean();
}

/// A typo under upstream's prefix: a Warning naming the nearest key, and
/// the load balancer is made all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typo_is_a_warning_event_naming_the_nearest_key() {
    let account = account();
    account.set_activate_after_reads(0);
    account.add_droplet(FakeDroplet::new(4201, "node-1"));
    let env = upstream_env(&account);
    let cluster = Cluster::start_with(account, 1, &env).await;
    cluster
        .create_service(
            "web",
            &[(
                "service.beta.kubernetes.io/do-loadbalancer-helthcheck-path",
                "/ready",
            )],
        )
        .await;
    provisioned(&cluster, "web").await;
    let warning = eventually("an UnknownAnnotation warning", WAIT, || async {
        cluster
            .warnings_about("web")
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("UnknownAnnotation"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.ccm.log_tail()));
    let message = warning.message.unwrap_or_default();
    assert!(
        message.contains("service.beta.kubernetes.io/do-loadbalancer-healthcheck-path"),
        "{message}"
    );
}
