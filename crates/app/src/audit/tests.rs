//! The audit's matching against the in-memory fake cloud: what is leaked,
//! what is owned, what is missing, and which routes are left alone.

use std::collections::BTreeSet;

use ccm_cloud_provider::{Inventory, LoadBalancer, Route, Routes};
use ccm_provider_fake::{FakeCloud, FakeConfig};
use k8s_openapi::api::core::v1::{Node, Service};
use serde_json::json;

use super::classify::classify;

const CLUSTER: &str = "c1";

fn service(name: &str, uid: &str, type_: &str, finalizer: bool, ingress: Option<&str>) -> Service {
    let finalizers = finalizer.then(|| vec!["service.kubernetes.io/load-balancer-cleanup"]);
    let status = ingress.map(|ip| json!({"loadBalancer": {"ingress": [{"ip": ip}]}}));
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": uid, "finalizers": finalizers},
        "spec": {"type": type_, "ports": [{"port": 80, "nodePort": 30080}]},
        "status": status,
    }))
    .expect("a Service")
}

fn node(name: &str, pod_cidr: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]},
    }))
    .expect("a Node")
}

fn route(node: &str, cidr: &str) -> Route {
    Route {
        name: String::new(),
        target_node: node.to_owned(),
        target_provider_id: None,
        destination_cidr: cidr.parse().expect("a CIDR"),
        blackhole: false,
    }
}

#[tokio::test]
async fn leaks_are_what_no_service_or_node_owns_and_missing_is_an_ingress_without_its_balancer() {
    let cloud = FakeCloud::new(FakeConfig::default());
    cloud.set_auto_instances(true);
    let live = service(
        "live",
        "10000000-0000-4000-8000-000000000000",
        "LoadBalancer",
        true,
        Some("100.64.0.1"),
    );
    let gone = service(
        "gone",
        "20000000-0000-4000-8000-000000000000",
        "LoadBalancer",
        true,
        None,
    );
    let leaving = service(
        "leaving",
        "30000000-0000-4000-8000-000000000000",
        "ClusterIP",
        true,
        None,
    );
    let lost = service(
        "lost",
        "40000000-0000-4000-8000-000000000000",
        "LoadBalancer",
        true,
        Some("100.64.0.9"),
    );
    for owner in [&live, &gone, &leaving] {
        cloud
            .ensure_load_balancer(CLUSTER, owner, &[])
            .await
            .expect("ensured");
    }
    let other = service(
        "other",
        "50000000-0000-4000-8000-000000000000",
        "LoadBalancer",
        true,
        None,
    );
    cloud
        .ensure_load_balancer("another-cluster", &other, &[])
        .await
        .expect("ensured");
    for (node, cidr) in [
        ("node-a", "10.244.1.0/24"),
        ("node-b", "10.244.2.0/24"),
        ("node-gone", "10.244.3.0/24"),
        ("node-a", "192.168.0.0/24"),
    ] {
        cloud
            .create_route(CLUSTER, "", &route(node, cidr))
            .await
            .expect("created");
    }
    let services = [live, leaving, lost];
    let nodes = [
        node("node-a", "10.244.1.0/24"),
        node("node-b", "10.244.9.0/24"),
    ];
    let owned = cloud.owned_resources(CLUSTER).await.expect("listed");

    let findings = classify(
        &cloud,
        CLUSTER,
        &["10.244.0.0/16".parse().expect("a CIDR")],
        owned,
        &services,
        &nodes,
    );
    let leaked: BTreeSet<(&str, &str)> = findings
        .leaked
        .iter()
        .map(|l| (l.kind.as_str(), l.id.as_str()))
        .collect();
    let gone_name = cloud.load_balancer_name(CLUSTER, &gone);
    assert_eq!(
        leaked,
        BTreeSet::from([
            ("load-balancer", gone_name.as_str()),
            ("route", "10.244.2.0/24"),
            ("route", "10.244.3.0/24"),
        ]),
        "{findings:#?}"
    );
    let reasons: Vec<&str> = findings.leaked.iter().map(|l| l.reason.as_str()).collect();
    assert!(reasons.contains(&"node node-gone is gone"), "{reasons:?}");
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("node-b's pod CIDRs are [10.244.9.0/24")),
        "{reasons:?}"
    );
    assert_eq!(
        findings.routes_not_audited, 1,
        "the route outside --cluster-cidr"
    );
    let missing: Vec<&str> = findings.missing.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(missing, ["lost"]);
    assert_eq!(findings.missing[0].ingress, ["100.64.0.9"]);
}

#[tokio::test]
async fn without_a_cluster_cidr_no_route_is_audited() {
    let cloud = FakeCloud::new(FakeConfig::default());
    cloud.set_auto_instances(true);
    cloud
        .create_route(CLUSTER, "", &route("node-gone", "10.244.3.0/24"))
        .await
        .expect("created");
    let owned = cloud.owned_resources(CLUSTER).await.expect("listed");
    let findings = classify(&cloud, CLUSTER, &[], owned, &[], &[]);
    assert!(findings.leaked.is_empty(), "{findings:#?}");
    assert_eq!(findings.routes_not_audited, 1);
}

/// A cloud that names a route's target by a convention (AWS: the
/// instance's private DNS name) where nodes are named otherwise: the route
/// is matched by provider ID, as the route controller matches it.
#[tokio::test]
async fn a_route_is_a_nodes_by_name_or_by_provider_id_as_the_route_controller_decides() {
    let cloud = FakeCloud::new(FakeConfig::default());
    cloud.set_auto_instances(true);
    for (target, provider_id, cidr) in [
        (
            "ip-10-0-1-7.ec2.internal",
            "aws:///us-east-1a/i-07",
            "10.244.1.0/24",
        ),
        (
            "ip-10-0-1-8.ec2.internal",
            "aws:///us-east-1a/i-08",
            "10.244.2.0/24",
        ),
    ] {
        let mut r = route(target, cidr);
        r.target_provider_id = Some(provider_id.to_owned());
        cloud.create_route(CLUSTER, "", &r).await.expect("created");
    }
    let named_otherwise: Node = serde_json::from_value(json!({
        "metadata": {"name": "worker-7"},
        "spec": {"podCIDR": "10.244.1.0/24", "providerID": "aws:///us-east-1a/i-07"},
    }))
    .expect("a Node");
    let owned = cloud.owned_resources(CLUSTER).await.expect("listed");
    let findings = classify(
        &cloud,
        CLUSTER,
        &["10.244.0.0/16".parse().expect("a CIDR")],
        owned,
        &[],
        &[named_otherwise],
    );
    let leaked: Vec<(&str, &str)> = findings
        .leaked
        .iter()
        .map(|l| (l.id.as_str(), l.reason.as_str()))
        .collect();
    assert_eq!(
        leaked,
        [(
            "10.244.2.0/24",
            "no node is named ip-10-0-1-8.ec2.internal or has provider ID aws:///us-east-1a/i-08"
        )],
        "the live route to worker-7 is not listed"
    );
}

/// A Service that claims a listed load balancer between the listing and
/// the delete keeps it: each resource is classified again against the
/// cluster read just before its delete.
#[tokio::test]
async fn a_resource_claimed_after_the_listing_is_kept_and_the_rest_deleted() {
    let cloud = FakeCloud::new(FakeConfig::default());
    cloud.set_auto_instances(true);
    let adopter = service(
        "adopter",
        "60000000-0000-4000-8000-000000000000",
        "LoadBalancer",
        true,
        None,
    );
    let gone = service(
        "gone",
        "70000000-0000-4000-8000-000000000000",
        "LoadBalancer",
        true,
        None,
    );
    for owner in [&adopter, &gone] {
        cloud
            .ensure_load_balancer(CLUSTER, owner, &[])
            .await
            .expect("ensured");
    }
    let owned = cloud.owned_resources(CLUSTER).await.expect("listed");
    let findings = classify(&cloud, CLUSTER, &[], owned, &[], &[]);
    assert_eq!(findings.leaked.len(), 2, "{findings:#?}");

    // The adopter's Service appears after the listing.
    let mut reads = 0;
    let mut lines = Vec::new();
    let failed = super::delete_leaks(
        &cloud,
        CLUSTER,
        &[],
        &findings.leaked,
        || {
            reads += 1;
            let services = vec![adopter.clone()];
            async move { Ok((services, Vec::new())) }
        },
        |line| lines.push(line.to_owned()),
    )
    .await
    .expect("the cluster was read");
    assert_eq!(failed, 0);
    assert_eq!(reads, 2, "the cluster is read before each delete");
    let adopted = cloud.load_balancer_name(CLUSTER, &adopter);
    let gone_name = cloud.load_balancer_name(CLUSTER, &gone);
    let left: Vec<String> = cloud
        .owned_resources(CLUSTER)
        .await
        .expect("listed")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(left, std::slice::from_ref(&adopted), "{lines:?}");
    assert!(
        lines.contains(&format!(
            "kept load-balancer {adopted}: the cluster claims it since it was listed"
        )),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("deleted load-balancer {gone_name}"))),
        "{lines:?}"
    );
}
