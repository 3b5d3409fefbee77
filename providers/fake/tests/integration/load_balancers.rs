//! Load balancers: idempotent ensure, update, delete, and annotation checks.

use crate::support;

use ccm_cloud_provider::{CloudError, LoadBalancer};
use ccm_provider_fake::{
    ANNOTATION_FAIL, ANNOTATION_HEALTHCHECK_INTERVAL, ANNOTATION_HOSTNAME,
    ANNOTATION_LOAD_BALANCER_ID, ANNOTATION_TYPE, FakeCloud, Operation,
};
use support::{node, service};

const UID: &str = "11111111-2222-3333-4444-555555555555";

#[tokio::test]
async fn ensure_is_idempotent_and_keeps_the_address() {
    let cloud = FakeCloud::default();
    let svc = service("web", UID, &[]);
    let first = cloud
        .ensure_load_balancer("c1", &svc, &[node("n1")])
        .await
        .unwrap();
    let second = cloud
        .ensure_load_balancer("c1", &svc, &[node("n2"), node("n1")])
        .await
        .unwrap();
    assert_eq!(first, second);
    assert_eq!(
        first
            .service_annotations
            .get(ANNOTATION_LOAD_BALANCER_ID)
            .map(String::as_str),
        Some(&"a11111111222233334444555555555555"[..32]),
        "the fake records its load balancer's name on the Service"
    );
    let lbs = cloud.load_balancers();
    assert_eq!(lbs.len(), 1, "a second ensure never duplicates");
    assert_eq!(lbs[0].name, "a11111111222233334444555555555555"[..32]);
    assert_eq!(*lbs[0].nodes, ["n1", "n2"]);
    assert_eq!(lbs[0].service, "default/web");
    assert_eq!(lbs[0].ports[0].node_port, 30080);
    assert_eq!(
        cloud.get_load_balancer("c1", &svc).await.unwrap(),
        Some(first.status)
    );
}

#[tokio::test]
async fn update_changes_backends_and_delete_removes_everything() {
    let cloud = FakeCloud::default();
    let svc = service("web", UID, &[]);
    assert!(
        cloud
            .update_load_balancer("c1", &svc, &[node("n1")])
            .await
            .is_err(),
        "nothing to update yet"
    );
    cloud
        .ensure_load_balancer("c1", &svc, &[node("n1")])
        .await
        .unwrap();
    cloud
        .update_load_balancer("c1", &svc, &[node("n3")])
        .await
        .unwrap();
    assert_eq!(*cloud.load_balancers()[0].nodes, ["n3"]);

    cloud
        .ensure_load_balancer_deleted("c1", &svc)
        .await
        .unwrap();
    cloud
        .ensure_load_balancer_deleted("c1", &svc)
        .await
        .unwrap();
    assert!(cloud.load_balancers().is_empty());
    assert_eq!(cloud.get_load_balancer("c1", &svc).await.unwrap(), None);
    assert_eq!(cloud.count(Operation::EnsureLoadBalancerDeleted), 2);
}

#[tokio::test]
async fn malformed_annotation_is_invalid_input_and_changes_nothing() {
    let cloud = FakeCloud::default();
    let svc = service("web", UID, &[(ANNOTATION_HEALTHCHECK_INTERVAL, "often")]);
    let err = cloud
        .ensure_load_balancer("c1", &svc, &[node("n1")])
        .await
        .unwrap_err();
    match err {
        CloudError::InvalidInput { field, message } => {
            assert_eq!(field, ANNOTATION_HEALTHCHECK_INTERVAL);
            assert!(message.contains("5 to 300"), "{message}");
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    assert!(cloud.load_balancers().is_empty());
}

#[tokio::test]
async fn the_fail_annotation_fails_every_call_until_removed() {
    let cloud = FakeCloud::default();
    let failing = service("web", UID, &[(ANNOTATION_FAIL, "outage")]);
    let err = cloud
        .ensure_load_balancer("c1", &failing, &[node("n1")])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "error");
    assert!(err.to_string().contains("outage"), "{err}");
    assert!(cloud.get_load_balancer("c1", &failing).await.is_err());
    assert!(cloud.load_balancers().is_empty());
    let healed = service("web", UID, &[]);
    cloud
        .ensure_load_balancer("c1", &healed, &[node("n1")])
        .await
        .expect("without the annotation the call succeeds");
    assert_eq!(cloud.load_balancers().len(), 1);
}

#[tokio::test]
async fn external_type_is_implemented_elsewhere() {
    let cloud = FakeCloud::default();
    let svc = service("web", UID, &[(ANNOTATION_TYPE, "external")]);
    let err = cloud
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::ImplementedElsewhere), "{err:?}");
    assert!(matches!(
        cloud.ensure_load_balancer_deleted("c1", &svc).await,
        Err(CloudError::ImplementedElsewhere)
    ));
}

#[tokio::test]
async fn hostname_annotation_reports_a_hostname_ingress() {
    let cloud = FakeCloud::default();
    let svc = service("web", UID, &[(ANNOTATION_HOSTNAME, "web.example.test")]);
    let status = cloud
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap()
        .status;
    assert_eq!(
        status.ingress[0].hostname.as_deref(),
        Some("web.example.test")
    );
    assert_eq!(status.ingress[0].ip, None);
}
