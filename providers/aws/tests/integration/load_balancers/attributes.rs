//! `aws-load-balancer-target-group-attributes` against moto: the attributes
//! reach every target group, win over the proxy-protocol annotation, keep
//! their last value when the annotation stops naming them, and a key that
//! is not an attribute changes nothing.

use std::collections::BTreeMap;

use ccm_cloud_provider::CloudError;
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::{CLUSTER, elbv2};

use super::fixture::{Fixture, service};

/// The attributes of the Service's one target group.
async fn attributes(f: &Fixture) -> BTreeMap<String, String> {
    let groups = f.target_groups().await;
    assert_eq!(groups.len(), 1, "one port, one target group");
    let out = elbv2(&f.moto)
        .describe_target_group_attributes()
        .target_group_arn(groups[0].target_group_arn().expect("an ARN"))
        .send()
        .await
        .expect("described");
    out.attributes()
        .iter()
        .filter_map(|a| Some((a.key()?.to_owned(), a.value()?.to_owned())))
        .collect()
}

#[tokio::test]
async fn target_group_attributes_are_set_and_kept_as_upstream_keeps_them() {
    let f = Fixture::new(1).await;
    let nodes = f.nodes(&[0]);
    let lb = f.lb();
    let asked = |attributes: &str| {
        let mut annotations = vec![(key::PROXY_PROTOCOL, "*")];
        if !attributes.is_empty() {
            annotations.push((key::TARGET_GROUP_ATTRIBUTES, attributes));
        }
        service(&annotations, &[(80, 30080)])
    };

    lb.ensure_load_balancer(
        CLUSTER,
        &asked("preserve_client_ip.enabled=false, deregistration_delay.timeout_seconds=30"),
        &nodes,
    )
    .await
    .expect("ensured");
    let have = attributes(&f).await;
    assert_eq!(have["preserve_client_ip.enabled"], "false");
    assert_eq!(have["deregistration_delay.timeout_seconds"], "30");
    assert_eq!(have["proxy_protocol_v2.enabled"], "true");

    // Named by the annotation, an attribute wins over proxy-protocol; one
    // no longer named keeps its value. (A changed Service is ensured.)
    lb.ensure_load_balancer(
        CLUSTER,
        &asked("deregistration_delay.timeout_seconds=60,proxy_protocol_v2.enabled=false"),
        &nodes,
    )
    .await
    .expect("ensured");
    let have = attributes(&f).await;
    assert_eq!(have["deregistration_delay.timeout_seconds"], "60");
    assert_eq!(have["proxy_protocol_v2.enabled"], "false");
    assert_eq!(have["preserve_client_ip.enabled"], "false");

    // Without the annotation, proxy-protocol decides again.
    lb.ensure_load_balancer(CLUSTER, &asked(""), &nodes)
        .await
        .expect("ensured");
    let have = attributes(&f).await;
    assert_eq!(have["proxy_protocol_v2.enabled"], "true");
    assert_eq!(have["deregistration_delay.timeout_seconds"], "60");

    // A key that is no attribute is refused before anything is sent.
    let before = attributes(&f).await;
    let err = lb
        .ensure_load_balancer(
            CLUSTER,
            &asked("deregistration_delay.timeout_seconds=10,slow_start.duration_seconds=30"),
            &nodes,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::InvalidInput { field, .. } if field == key::TARGET_GROUP_ATTRIBUTES),
        "{err:?}"
    );
    assert_eq!(attributes(&f).await, before);
}
