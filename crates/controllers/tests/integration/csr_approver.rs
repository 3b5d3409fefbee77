//! The kubelet-serving-csr-approver controller against the test API server
//! and the fake cloud: what it approves, what it denies and why, waiting for
//! initialization, and batched cloud lookups.

use crate::support;

use std::num::NonZeroUsize;
use std::time::Duration;

use ccm_cloud_provider::{NodeAddress, NodeAddressType};
use ccm_controllers::{ControllerId, ControllerSettings};
use ccm_provider_fake::{FakeCloud, Instance, InstanceState, Operation};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Harness, eventually, fast_settings, ready_node, uninitialized_node};

const WAIT: Duration = Duration::from_secs(20);

fn instance(name: &str, ip: &str) -> Instance {
    Instance {
        name: name.to_owned(),
        provider_id: format!("fake://{name}"),
        instance_type: "fake.large".into(),
        zone: "fake-1a".into(),
        region: "fake-1".into(),
        addresses: vec![
            NodeAddress::new(NodeAddressType::InternalIp, ip),
            NodeAddress::new(NodeAddressType::Hostname, format!("{name}.fake.internal")),
        ],
        state: InstanceState::Running,
        labels: Default::default(),
    }
}

/// A fresh key's request for `cn` with these names.
fn pem(cn: &str, dns: &[&str], ips: &[&str]) -> String {
    let names: Vec<&str> = dns.iter().chain(ips).copied().collect();
    ccm_test_support::kubelet_serving_request(cn, &names)
}

/// The API server here authenticates nobody, so the request carries its
/// requester in the body, as kube-apiserver would have recorded it.
fn csr(name: &str, requester: &str, request: &str, usages: &[&str]) -> CertificateSigningRequest {
    let mut csr = ccm_test_support::kubelet_serving_csr(name, request, usages);
    csr.spec.username = Some(requester.to_owned());
    csr.spec.groups = Some(vec![
        "system:nodes".to_owned(),
        "system:authenticated".to_owned(),
    ]);
    csr
}

const SERVING: &[&str] = &["digital signature", "server auth"];

fn csrs(h: &Harness) -> Api<CertificateSigningRequest> {
    Api::all(h.client.clone())
}

async fn submit(h: &Harness, csr: &CertificateSigningRequest) {
    csrs(h)
        .create(&PostParams::default(), csr)
        .await
        .expect("request created");
}

/// The request's decision: its condition type, reason and message.
async fn decision(h: &Harness, name: &str) -> (String, String, String) {
    eventually("a decision", WAIT, || async {
        let csr = csrs(h).get(name).await.ok()?;
        let condition = csr.status?.conditions?.into_iter().next()?;
        Some((
            condition.type_,
            condition.reason.unwrap_or_default(),
            condition.message.unwrap_or_default(),
        ))
    })
    .await
    .expect("decided in time")
}

async fn harness(instances: &[Instance]) -> Harness {
    let cloud = FakeCloud::default();
    for instance in instances {
        cloud.add_instance(instance.clone());
    }
    Harness::with_cloud(cloud).await
}

async fn started(h: &mut Harness, settings: &ControllerSettings) {
    h.start(&[ControllerId::KubeletServingCsrApprover], settings)
        .await;
}

#[tokio::test]
async fn a_request_naming_the_cloud_addresses_is_approved_with_an_event_on_the_node() {
    let mut h = harness(&[instance("n1", "10.0.0.1")]).await;
    h.create_node(&ready_node("n1")).await;
    started(&mut h, &fast_settings()).await;
    let request = pem("system:node:n1", &["n1.fake.internal"], &["10.0.0.1"]);
    submit(&h, &csr("good", "system:node:n1", &request, SERVING)).await;
    let (kind, reason, _) = decision(&h, "good").await;
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("Approved", "CloudAddressesVerified")
    );
    let events = eventually("the event", WAIT, || async {
        let events = h.events("n1", "KubeletServingCertificateApproved").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .unwrap();
    assert!(
        events[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("good")
    );
    let metrics = h.metrics.encode(None);
    assert!(
        metrics.contains(
            "kubelet_serving_csr_approver_decisions_total{decision=\"approved\",reason=\"CloudAddressesVerified\"} 1"
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn forged_names_other_nodes_and_extra_usages_are_denied_naming_what() {
    let mut h = harness(&[instance("n1", "10.0.0.1"), instance("n2", "10.0.0.2")]).await;
    h.create_node(&ready_node("n1")).await;
    h.create_node(&ready_node("n2")).await;
    started(&mut h, &fast_settings()).await;
    let forged = pem("system:node:n1", &[], &["10.0.0.1", "10.0.0.2"]);
    submit(&h, &csr("forged-ip", "system:node:n1", &forged, SERVING)).await;
    let other = pem("system:node:n2", &[], &["10.0.0.2"]);
    submit(&h, &csr("other-node", "system:node:n1", &other, SERVING)).await;
    let own = pem("system:node:n1", &[], &["10.0.0.1"]);
    let client_auth = ["digital signature", "server auth", "client auth"];
    submit(
        &h,
        &csr("client-auth", "system:node:n1", &own, &client_auth),
    )
    .await;

    let (kind, reason, message) = decision(&h, "forged-ip").await;
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("Denied", "AddressNotOfNode")
    );
    assert!(message.contains("10.0.0.2"), "{message}");
    let (kind, reason, message) = decision(&h, "other-node").await;
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("Denied", "SubjectMismatch")
    );
    assert!(message.contains("system:node:n2"), "{message}");
    let (kind, reason, message) = decision(&h, "client-auth").await;
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("Denied", "UsageMismatch")
    );
    assert!(message.contains("client auth"), "{message}");
    let denied = eventually("three denial events", WAIT, || async {
        let events = h.events("n1", "KubeletServingCertificateDenied").await;
        (events.len() == 3).then_some(events)
    })
    .await
    .unwrap();
    assert_eq!(denied.len(), 3);
}

#[tokio::test]
async fn the_cloud_is_asked_not_the_nodes_status() {
    // The node's status still says 10.0.0.4 (a kubelet can write it); the
    // instance has 10.0.0.5 now.
    let mut h = harness(&[instance("n1", "10.0.0.5")]).await;
    let mut node = ready_node("n1");
    node.status.get_or_insert_with(Default::default).addresses =
        Some(vec![k8s_openapi::api::core::v1::NodeAddress {
            type_: "InternalIP".into(),
            address: "10.0.0.4".into(),
        }]);
    h.create_node(&node).await;
    started(&mut h, &fast_settings()).await;
    let stale = pem("system:node:n1", &[], &["10.0.0.4"]);
    submit(&h, &csr("stale", "system:node:n1", &stale, SERVING)).await;
    let (kind, reason, message) = decision(&h, "stale").await;
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("Denied", "AddressNotOfNode")
    );
    assert!(
        message.contains("10.0.0.4") && message.contains("10.0.0.5"),
        "{message}"
    );
}

#[tokio::test]
async fn a_request_for_an_instance_the_cloud_no_longer_has_is_denied() {
    let mut h = harness(&[]).await;
    h.create_node(&ready_node("gone")).await;
    started(&mut h, &fast_settings()).await;
    let request = pem("system:node:gone", &[], &["10.0.0.9"]);
    submit(&h, &csr("gone", "system:node:gone", &request, SERVING)).await;
    let (kind, reason, _) = decision(&h, "gone").await;
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("Denied", "InstanceNotFound")
    );
}

#[tokio::test]
async fn a_node_borrowing_another_instances_provider_id_is_denied() {
    // A kubelet sets its own node's spec.providerID: "thief" names n1's
    // instance and asks for n1's address.
    let mut h = harness(&[instance("n1", "10.0.0.1")]).await;
    let mut thief = ready_node("thief");
    thief.spec.get_or_insert_default().provider_id = Some("fake://n1".to_owned());
    h.create_node(&thief).await;
    started(&mut h, &fast_settings()).await;
    let request = pem("system:node:thief", &[], &["10.0.0.1"]);
    submit(&h, &csr("borrowed", "system:node:thief", &request, SERVING)).await;
    let (kind, reason, message) = decision(&h, "borrowed").await;
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("Denied", "InstanceNameMismatch"),
        "{message}"
    );
    assert!(
        message.contains("n1") && message.contains("thief"),
        "{message}"
    );

    // With n1 itself registered too, both claim the instance: neither is
    // approved while the provider ID is shared.
    h.create_node(&ready_node("n1")).await;
    let own = pem("system:node:n1", &[], &["10.0.0.1"]);
    submit(&h, &csr("shared", "system:node:n1", &own, SERVING)).await;
    let (kind, reason, message) = decision(&h, "shared").await;
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("Denied", "ProviderIDNotUnique"),
        "{message}"
    );
    assert!(message.contains("thief"), "{message}");
}

#[tokio::test]
async fn a_request_from_an_uninitialized_node_waits_for_its_initialization() {
    let mut h = harness(&[instance("n1", "10.0.0.1")]).await;
    h.create_node(&uninitialized_node("n1")).await;
    started(&mut h, &fast_settings()).await;
    let request = pem("system:node:n1", &[], &["10.0.0.1"]);
    submit(&h, &csr("early", "system:node:n1", &request, SERVING)).await;
    h.settled().await;
    let pending = csrs(&h).get("early").await.unwrap();
    assert!(
        pending.status.and_then(|s| s.conditions).is_none(),
        "still pending"
    );
    assert_eq!(
        h.cloud.count(Operation::InstancesMetadata),
        0,
        "no lookup before initialization"
    );
    // What the cloud-node controller does: the taint goes.
    let untaint = json!({"spec": {"taints": null}});
    h.nodes()
        .patch("n1", &PatchParams::default(), &Patch::Merge(&untaint))
        .await
        .unwrap();
    let (kind, _, _) = decision(&h, "early").await;
    assert_eq!(kind, "Approved");
}

#[tokio::test]
async fn a_request_whose_node_never_comes_is_denied_after_the_wait() {
    let mut h = harness(&[]).await;
    let settings = ControllerSettings {
        csr_initialization_wait: Duration::from_secs(1),
        ..fast_settings()
    };
    started(&mut h, &settings).await;
    let request = pem("system:node:ghost", &[], &["10.0.0.1"]);
    submit(&h, &csr("ghost", "system:node:ghost", &request, SERVING)).await;
    let (kind, reason, message) = decision(&h, "ghost").await;
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("Denied", "NodeNotInitialized")
    );
    assert!(message.contains("did not exist"), "{message}");
}

#[tokio::test]
async fn other_signers_and_decided_requests_are_never_touched() {
    let mut h = harness(&[instance("n1", "10.0.0.1")]).await;
    h.create_node(&ready_node("n1")).await;
    started(&mut h, &fast_settings()).await;
    let request = pem("system:node:n1", &[], &["10.0.0.1"]);
    let mut client = csr(
        "client",
        "system:node:n1",
        &request,
        &["digital signature", "client auth"],
    );
    client.spec.signer_name = "kubernetes.io/kube-apiserver-client-kubelet".into();
    submit(&h, &client).await;
    h.settled().await;
    let untouched = csrs(&h).get("client").await.unwrap();
    assert!(untouched.status.and_then(|s| s.conditions).is_none());
    assert_eq!(h.cloud.count(Operation::InstancesMetadata), 0);
}

#[tokio::test]
async fn fifty_requests_at_once_cost_ceil_50_over_batch_lookups() {
    let cloud = FakeCloud::default();
    cloud.set_batch_size(NonZeroUsize::new(25).unwrap());
    let names: Vec<String> = (0..50).map(|i| format!("n{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        cloud.add_instance(instance(name, &format!("10.0.1.{i}")));
    }
    let mut h = Harness::with_cloud(cloud).await;
    for name in &names {
        h.create_node(&ready_node(name)).await;
    }
    let requests: Vec<CertificateSigningRequest> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let request = pem(
                &format!("system:node:{name}"),
                &[],
                &[&format!("10.0.1.{i}")],
            );
            csr(
                &format!("csr-{name}"),
                &format!("system:node:{name}"),
                &request,
                SERVING,
            )
        })
        .collect();
    for request in &requests {
        submit(&h, request).await;
    }
    // All 50 arrive together, in the controller's first list.
    started(&mut h, &fast_settings()).await;
    for name in &names {
        let (kind, _, _) = decision(&h, &format!("csr-{name}")).await;
        assert_eq!(kind, "Approved");
    }
    h.settled().await;
    let lookups = h.cloud.count(Operation::InstancesMetadata);
    println!("50 requests decided with {lookups} instances_metadata calls (batch 25)");
    assert_eq!(lookups, 2);
}

#[tokio::test]
async fn with_the_default_controllers_no_request_is_touched() {
    let mut h = harness(&[instance("n1", "10.0.0.1")]).await;
    h.create_node(&ready_node("n1")).await;
    let request = pem("system:node:n1", &[], &["10.0.0.1"]);
    submit(&h, &csr("untouched", "system:node:n1", &request, SERVING)).await;
    let settings = ControllerSettings {
        cluster_cidrs: vec!["10.244.0.0/16".parse().unwrap()],
        ..fast_settings()
    };
    h.start(&ControllerId::DEFAULT, &settings).await;
    h.settled().await;
    let csr = csrs(&h).get("untouched").await.unwrap();
    assert!(
        csr.status.and_then(|s| s.conditions).is_none(),
        "still pending"
    );
    let requests = h.server.requests();
    assert!(
        !requests
            .iter()
            .any(|r| r.resource == "certificatesigningrequests"
                && r.verb != "create"
                && r.verb != "get"),
        "the default controllers neither watch nor decide requests"
    );
}
