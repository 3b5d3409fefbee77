//! Classic ELBs against moto: what a Service without a type gets, that an
//! ensure with nothing new changes nothing, how instances follow nodes,
//! annotations changed in place, named groups replacing the ELB's own, and
//! that deletion leaves nothing behind.

use std::collections::BTreeSet;

use aws_sdk_elasticloadbalancing::types::LoadBalancerDescription;
use ccm_cloud_provider::CloudError;
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::{CLUSTER, ec2, elb};

use super::fixture::*;

fn classic(
    annotations: &[(&str, &str)],
    ports: &[(i32, i32)],
) -> ccm_cloud_provider::k8s_openapi::api::core::v1::Service {
    ccm_provider_aws::test_util::classic_service(UID, annotations, ports)
}

impl Fixture {
    pub(crate) async fn classic_elbs(&self) -> Vec<LoadBalancerDescription> {
        let out = elb(&self.moto)
            .describe_load_balancers()
            .send()
            .await
            .expect("described");
        out.load_balancer_descriptions().to_vec()
    }

    async fn classic_elb(&self) -> LoadBalancerDescription {
        let mut all = self.classic_elbs().await;
        assert_eq!(all.len(), 1, "one classic ELB");
        all.remove(0)
    }

    /// The ID of the group named `name`, if any.
    async fn group_named(&self, name: &str) -> Option<String> {
        let out = ec2(&self.moto)
            .describe_security_groups()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name("group-name")
                    .values(name)
                    .build(),
            )
            .send()
            .await
            .expect("described");
        out.security_groups()
            .first()
            .and_then(|g| g.group_id().map(str::to_owned))
    }

    /// The groups the node group lets in.
    async fn node_group_sources(&self) -> BTreeSet<String> {
        let out = ec2(&self.moto)
            .describe_security_groups()
            .group_ids(&self.estate.node_security_group)
            .send()
            .await
            .expect("described");
        out.security_groups()
            .iter()
            .flat_map(|g| g.ip_permissions())
            .flat_map(|p| p.user_id_group_pairs())
            .filter_map(|p| p.group_id().map(str::to_owned))
            .collect()
    }
}

pub(crate) fn registered(lb: &LoadBalancerDescription) -> BTreeSet<String> {
    lb.instances()
        .iter()
        .filter_map(|i| i.instance_id().map(str::to_owned))
        .collect()
}

fn listeners(lb: &LoadBalancerDescription) -> BTreeSet<(i32, String, i32, String)> {
    lb.listener_descriptions()
        .iter()
        .filter_map(|d| d.listener())
        .map(|l| {
            (
                l.load_balancer_port(),
                l.protocol().to_ascii_uppercase(),
                l.instance_port(),
                l.instance_protocol()
                    .unwrap_or_default()
                    .to_ascii_uppercase(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_service_without_a_type_gets_upstreams_classic_elb_and_deletion_leaves_nothing() {
    let f = Fixture::new(3).await;
    let groups_before = f.security_group_ids().await;
    let svc = classic(
        &[
            (key::ADDITIONAL_RESOURCE_TAGS, "team=shop"),
            (key::CROSS_ZONE_LOAD_BALANCING_ENABLED, "true"),
            (key::CONNECTION_IDLE_TIMEOUT, "120"),
            (key::CONNECTION_DRAINING_ENABLED, "true"),
            (key::CONNECTION_DRAINING_TIMEOUT, "30"),
            (key::PROXY_PROTOCOL, "*"),
        ],
        &[(80, 30080), (443, 30443)],
    );
    let ensured = f
        .lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1, 2]))
        .await
        .expect("ensured");

    let lb = f.classic_elb().await;
    assert_eq!(lb.load_balancer_name(), Some(LB_NAME));
    assert_eq!(lb.scheme(), Some("internet-facing"));
    let subnets: BTreeSet<&str> = lb.subnets().iter().map(String::as_str).collect();
    let public: BTreeSet<&str> = f.estate.public_subnets.iter().map(String::as_str).collect();
    assert_eq!(subnets, public, "the tagged public subnets");
    assert_eq!(
        listeners(&lb),
        BTreeSet::from([
            (80, "TCP".into(), 30080, "TCP".into()),
            (443, "TCP".into(), 30443, "TCP".into()),
        ])
    );
    let ids: BTreeSet<String> = f.estate.instances.iter().map(|i| i.id.clone()).collect();
    assert_eq!(registered(&lb), ids);
    let hc = lb.health_check().expect("a health check");
    assert_eq!(
        (
            hc.target(),
            hc.healthy_threshold(),
            hc.unhealthy_threshold(),
            hc.timeout(),
            hc.interval()
        ),
        ("TCP:30080", 2, 6, 5, 10),
        "upstream's defaults"
    );
    let proxied: BTreeSet<i32> = lb
        .backend_server_descriptions()
        .iter()
        .filter(|b| {
            b.policy_names()
                .iter()
                .any(|p| p == "k8s-proxyprotocol-enabled")
        })
        .filter_map(|b| b.instance_port())
        .collect();
    assert_eq!(proxied, BTreeSet::from([30080, 30443]));
    let attributes = elb(&f.moto)
        .describe_load_balancer_attributes()
        .load_balancer_name(LB_NAME)
        .send()
        .await
        .expect("described");
    let a = attributes.load_balancer_attributes().expect("attributes");
    assert!(a.cross_zone_load_balancing().expect("cross-zone").enabled());
    assert_eq!(a.connection_settings().expect("idle").idle_timeout(), 120);
    let draining = a.connection_draining().expect("draining");
    assert!(draining.enabled());
    assert_eq!(draining.timeout(), Some(30));
    let tags = elb(&f.moto)
        .describe_tags()
        .load_balancer_names(LB_NAME)
        .send()
        .await
        .expect("described");
    let tags: std::collections::BTreeMap<String, String> = tags
        .tag_descriptions()
        .iter()
        .flat_map(|d| d.tags())
        .map(|t| (t.key().to_owned(), t.value().unwrap_or_default().to_owned()))
        .collect();
    assert!(owned_by_the_service(&tags), "{tags:?}");
    assert_eq!(tags.get("team").map(String::as_str), Some("shop"));

    // Its own group lets clients reach the listeners, and ICMP in.
    let own = f
        .group_named(&format!("k8s-elb-{LB_NAME}"))
        .await
        .expect("the ELB's own group");
    assert_eq!(lb.security_groups(), std::slice::from_ref(&own));
    let ingress = f.ingress(&own).await;
    for expected in [
        rule("tcp", 80, "0.0.0.0/0", ""),
        rule("tcp", 443, "0.0.0.0/0", ""),
        ("icmp".into(), 3, 4, "0.0.0.0/0".into(), String::new()),
    ] {
        assert!(ingress.contains(&expected), "{expected:?} in {ingress:?}");
    }
    assert_eq!(ingress.len(), 3, "{ingress:?}");
    assert!(
        f.node_group_sources().await.contains(&own),
        "nodes let the ELB in"
    );
    let hostname = ensured.status.ingress[0].hostname.clone();
    assert_eq!(hostname.as_deref(), lb.dns_name());

    // Nothing new asked: reads only.
    let before = mutations(&*f.provider);
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1, 2]))
        .await
        .expect("ensured again");
    assert_eq!(
        mutations(&*f.provider),
        before,
        "a second ensure changes nothing"
    );

    // Nodes leave: their instances are deregistered.
    f.lb()
        .update_load_balancer(CLUSTER, &svc, &f.nodes(&[0]))
        .await
        .expect("updated");
    assert_eq!(
        registered(&f.classic_elb().await),
        BTreeSet::from([f.estate.instances[0].id.clone()])
    );
    let status = f.lb().get_load_balancer(CLUSTER, &svc).await.expect("read");
    assert_eq!(
        status.expect("exists").ingress[0].hostname.as_deref(),
        lb.dns_name()
    );

    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .expect("deleted");
    assert!(f.classic_elbs().await.is_empty());
    assert!(f.group_named(&format!("k8s-elb-{LB_NAME}")).await.is_none());
    assert!(f.node_group_sources().await.is_empty(), "no node rule left");
    assert_eq!(f.security_group_ids().await, groups_before);
    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .expect("deleting again is fine");
}

#[tokio::test]
async fn classic_annotations_change_the_elb_in_place() {
    let f = Fixture::new(2).await;
    let first = classic(&[], &[(80, 30080), (443, 30443)]);
    f.lb()
        .ensure_load_balancer(CLUSTER, &first, &f.nodes(&[0, 1]))
        .await
        .expect("ensured");
    let cert = f.moto.certificate("shop.example.com").await;
    let changed = classic(
        &[
            (key::SSL_CERT, &cert),
            (key::SSL_PORTS, "443"),
            // `http` would make HTTPS to HTTP, which moto cannot store (it
            // reports a listener's instance protocol as its protocol).
            (key::BACKEND_PROTOCOL, "https"),
            (
                key::SSL_NEGOTIATION_POLICY,
                "ELBSecurityPolicy-TLS-1-2-2017-01",
            ),
            (key::HEALTHCHECK_PATH, "/ready"),
            (key::HEALTHCHECK_INTERVAL, "30"),
            (key::ACCESS_LOG_ENABLED, "true"),
            (key::ACCESS_LOG_S3_BUCKET_NAME, "elb-logs"),
            (key::ACCESS_LOG_EMIT_INTERVAL, "5"),
            (key::SOURCE_RANGES, "203.0.113.0/24"),
        ],
        &[(80, 30080), (443, 30443)],
    );
    f.lb()
        .ensure_load_balancer(CLUSTER, &changed, &f.nodes(&[0, 1]))
        .await
        .expect("changed");
    let lb = f.classic_elb().await;
    assert_eq!(
        listeners(&lb),
        BTreeSet::from([
            (80, "TCP".into(), 30080, "TCP".into()),
            (443, "HTTPS".into(), 30443, "HTTPS".into()),
        ])
    );
    let tls = lb
        .listener_descriptions()
        .iter()
        .find(|d| d.listener().is_some_and(|l| l.load_balancer_port() == 443))
        .expect("the 443 listener");
    assert_eq!(
        tls.policy_names(),
        ["k8s-SSLNegotiationPolicy-ELBSecurityPolicy-TLS-1-2-2017-01"]
    );
    assert_eq!(
        tls.listener().and_then(|l| l.ssl_certificate_id()),
        Some(cert.as_str())
    );
    let hc = lb.health_check().expect("a health check");
    assert_eq!(
        (hc.target(), hc.interval()),
        ("SSL:30080", 30),
        "TLS to the backend: SSL, without the path"
    );
    let attributes = elb(&f.moto)
        .describe_load_balancer_attributes()
        .load_balancer_name(LB_NAME)
        .send()
        .await
        .expect("described");
    let log = attributes
        .load_balancer_attributes()
        .and_then(|a| a.access_log())
        .expect("access log");
    assert!(log.enabled());
    assert_eq!(
        (log.s3_bucket_name(), log.emit_interval()),
        (Some("elb-logs"), Some(5))
    );
    let own = f
        .group_named(&format!("k8s-elb-{LB_NAME}"))
        .await
        .expect("own group");
    let ingress = f.ingress(&own).await;
    assert!(
        ingress.contains(&rule("tcp", 443, "203.0.113.0/24", "")),
        "{ingress:?}"
    );
    assert!(
        !ingress.iter().any(|(_, _, _, cidr, _)| cidr == "0.0.0.0/0"),
        "the open range is gone: {ingress:?}"
    );
    // Again: nothing to change.
    let before = mutations(&*f.provider);
    f.lb()
        .ensure_load_balancer(CLUSTER, &changed, &f.nodes(&[0, 1]))
        .await
        .expect("ensured again");
    assert_eq!(mutations(&*f.provider), before);
}

#[tokio::test]
async fn a_named_group_replaces_the_elbs_own_which_is_deleted_and_never_deleted_itself() {
    let f = Fixture::new(1).await;
    let svc = classic(&[], &[(80, 30080)]);
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0]))
        .await
        .expect("ensured");
    let own = f
        .group_named(&format!("k8s-elb-{LB_NAME}"))
        .await
        .expect("own group");
    let named = ec2(&f.moto)
        .create_security_group()
        .group_name("operators-elb")
        .description("the operator's")
        .vpc_id(&f.estate.vpc)
        .send()
        .await
        .expect("created")
        .group_id()
        .expect("an ID")
        .to_owned();
    let svc = classic(&[(key::SECURITY_GROUPS, &named)], &[(80, 30080)]);
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0]))
        .await
        .expect("ensured with the named group");
    assert_eq!(
        f.classic_elb().await.security_groups(),
        std::slice::from_ref(&named)
    );
    assert!(
        f.group_named(&format!("k8s-elb-{LB_NAME}")).await.is_none(),
        "the replaced own group {own} is deleted"
    );
    let sources = f.node_group_sources().await;
    assert!(
        sources.contains(&named) && !sources.contains(&own),
        "{sources:?}"
    );
    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .expect("deleted");
    assert!(f.classic_elbs().await.is_empty());
    assert!(
        f.group_named("operators-elb").await.is_some(),
        "never deleted"
    );
    assert!(
        f.node_group_sources().await.is_empty(),
        "its node rule goes with the last ELB"
    );
}

#[tokio::test]
async fn an_elb_with_the_name_but_not_the_tags_is_never_touched() {
    let f = Fixture::new(1).await;
    elb(&f.moto)
        .create_load_balancer()
        .load_balancer_name(LB_NAME)
        .listeners(
            aws_sdk_elasticloadbalancing::types::Listener::builder()
                .protocol("TCP")
                .load_balancer_port(80)
                .instance_port(30080)
                .build()
                .expect("a listener"),
        )
        .subnets(&f.estate.public_subnets[0])
        .send()
        .await
        .expect("created");
    let svc = classic(&[], &[(80, 30080)]);
    let err = f
        .lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("refusing to adopt"), "{err}");
    assert!(!matches!(err, CloudError::InvalidInput { .. }));
    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .expect("left alone");
    assert_eq!(f.classic_elbs().await.len(), 1, "still there");
}
