//! Two Services whose Network Load Balancers need the same node rule (both
//! health-check kube-proxy's port from the same subnets): deleting one
//! keeps the rule the other needs; deleting both leaves none.

use std::collections::BTreeSet;

use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::{CLUSTER, IngressRule};

use super::fixture::*;

const PROBE: i32 = 10256;
const API_UID: &str = "0b7c2d91-3e4f-4a5b-9c6d-7e8f9a0b1c2d";
/// Upstream's name for the second Service's load balancer.
const API_LB: &str = "a0b7c2d913e4f4a5b9c6d7e8f9a0b1c2";

/// A second Service beside the fixture's, with its own name and UID.
fn other_service(annotations: &[(&str, &str)], ports: &[(i32, i32)]) -> Service {
    let mut svc = ccm_provider_aws::test_util::nlb_service(API_UID, annotations, ports);
    svc.metadata.name = Some("api".into());
    svc
}

/// The node group's rules on the probe port.
async fn probe_rules(f: &Fixture) -> BTreeSet<IngressRule> {
    f.ingress(&f.estate.node_security_group)
        .await
        .into_iter()
        .filter(|(_, from, _, _, _)| *from == PROBE)
        .collect()
}

#[tokio::test]
async fn a_health_rule_two_services_need_stays_until_neither_needs_it() {
    let f = Fixture::new(2).await;
    let before = f.ingress(&f.estate.node_security_group).await;
    let probe = PROBE.to_string();
    let web = service(&[(key::HEALTHCHECK_PORT, &probe)], &[(80, 30080)]);
    let api = other_service(&[(key::HEALTHCHECK_PORT, &probe)], &[(80, 30081)]);
    f.lb()
        .ensure_load_balancer(CLUSTER, &web, &f.nodes(&[0, 1]))
        .await
        .expect("web ensured");
    let subnets = f.load_balancer_subnet_cidrs().await;
    assert!(!subnets.is_empty());
    let for_web = probe_rules(&f).await;
    let from: BTreeSet<String> = for_web.iter().map(|r| r.3.clone()).collect();
    assert_eq!(
        from,
        subnets.iter().cloned().collect(),
        "health checks from the subnets"
    );

    f.lb()
        .ensure_load_balancer(CLUSTER, &api, &f.nodes(&[0, 1]))
        .await
        .expect("api ensured");
    let shared = probe_rules(&f).await;
    assert_eq!(shared.len(), for_web.len(), "one rule per subnet, not two");
    assert!(
        shared
            .iter()
            .all(|r| r.4 == "kubernetes.io/rule/nlb/health=(shared)"),
        "{shared:?}"
    );
    let before_again = mutations(&*f.provider);
    f.lb()
        .ensure_load_balancer(CLUSTER, &api, &f.nodes(&[0, 1]))
        .await
        .expect("api ensured again");
    f.lb()
        .ensure_load_balancer(CLUSTER, &web, &f.nodes(&[0, 1]))
        .await
        .expect("web ensured again");
    assert_eq!(
        mutations(&*f.provider),
        before_again,
        "a shared rule is steady"
    );

    // web goes: api still reaches its nodes on the probe port.
    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &web)
        .await
        .expect("web deleted");
    assert_eq!(probe_rules(&f).await, shared, "api still needs them");
    let api_client = f
        .admitted(30081, &format!("kubernetes.io/rule/nlb/client={API_LB}"))
        .await;
    assert_eq!(api_client, ["0.0.0.0/0"], "api's own client rule stays");
    assert!(
        f.admitted(30080, &format!("kubernetes.io/rule/nlb/client={LB_NAME}"))
            .await
            .is_empty(),
        "web's client rule went"
    );

    // api goes too: nothing of either is left.
    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &api)
        .await
        .expect("api deleted");
    assert_eq!(f.ingress(&f.estate.node_security_group).await, before);
}
