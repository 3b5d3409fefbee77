//! Services of type LoadBalancer end to end: the `aws-cloud-controller-manager`
//! process gives a Service a Network Load Balancer in moto whose targets
//! follow the nodes, removes everything it made when the Service goes, and
//! refuses bad annotations with a Warning event and no change in AWS.

use crate::support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ccm_provider_aws::annotations;
use ccm_provider_aws::test_util::seed::{Seeded, cluster_tag};
use ccm_test_support::{eventually, has_load_balancer_finalizer, ingress_hostnames};
use k8s_openapi::api::core::v1::Service;
use kube::api::{DeleteParams, Patch, PatchParams};
use support::objects::{
    NAMESPACE, create_node, create_service, events, is_initialized, kubelet_node, nlb_service,
    node_port, nodes, services,
};
use support::{E2e, aws};

/// How long the CCM may take to act on a change.
const ACT_WITHIN: Duration = Duration::from_secs(60);

/// Upstream's load balancer name: `a` and the Service's UID without dashes,
/// cut to 32 characters.
fn load_balancer_name(service: &Service) -> String {
    let uid = service.metadata.uid.clone().unwrap_or_default();
    format!("a{}", uid.replace('-', ""))
        .chars()
        .take(32)
        .collect()
}

/// Registers the nodes of `instances` and waits until the CCM initialized
/// them.
pub(crate) async fn join(e2e: &E2e, instances: &[&Seeded]) -> anyhow::Result<()> {
    for instance in instances {
        create_node(&e2e.client, &kubelet_node(instance, true, None)).await?;
    }
    let names: BTreeSet<&str> = instances
        .iter()
        .map(|i| i.private_dns_name.as_str())
        .collect();
    eventually("the nodes initialized", ACT_WITHIN, || async {
        let list = nodes(&e2e.client).list(&Default::default()).await?;
        let done = list
            .items
            .iter()
            .filter(|n| names.contains(n.metadata.name.as_deref().unwrap_or_default()))
            .filter(|n| is_initialized(n))
            .count();
        Ok((done == names.len()).then_some(()))
    })
    .await
}

/// Waits until every target group holds exactly `instances`, each on the
/// group's own port.
async fn wait_for_targets(e2e: &E2e, instances: &[&Seeded]) -> anyhow::Result<()> {
    let ids: BTreeSet<String> = instances.iter().map(|i| i.id.clone()).collect();
    eventually(&format!("targets {ids:?}"), ACT_WITHIN, || async {
        let groups = aws::target_groups(&e2e.elbv2).await?;
        for group in &groups {
            let port = group.port().unwrap_or_default();
            let arn = group.target_group_arn().unwrap_or_default();
            let want: BTreeSet<(String, i32)> = ids.iter().map(|id| (id.clone(), port)).collect();
            if aws::targets(&e2e.elbv2, arn).await? != want {
                return Ok(None);
            }
        }
        Ok((!groups.is_empty()).then_some(()))
    })
    .await
}

/// The names of the VPC's security groups.
async fn security_group_names(e2e: &E2e) -> anyhow::Result<BTreeSet<String>> {
    Ok(aws::security_groups(&e2e.ec2, &e2e.estate.vpc)
        .await?
        .iter()
        .filter_map(|g| g.group_name().map(str::to_owned))
        .collect())
}

fn owned_by(tags: &std::collections::BTreeMap<String, String>, service: &str) -> bool {
    tags.get(&cluster_tag()).map(String::as_str) == Some("owned")
        && tags.get("kubernetes.io/service-name").map(String::as_str) == Some(service)
}

#[tokio::test]
async fn a_service_gets_an_nlb_whose_targets_follow_the_nodes_and_leaves_nothing_when_deleted()
-> anyhow::Result<()> {
    let e2e = E2e::start("nlb", 3, &[]).await?;
    let [a, b, c] = [
        &e2e.estate.instances[0],
        &e2e.estate.instances[1],
        &e2e.estate.instances[2],
    ];
    join(&e2e, &[a, b]).await?;
    let groups_before = security_group_names(&e2e).await?;
    let node_rules_before = aws::ingress(&e2e.ec2, &e2e.estate.node_security_group).await?;

    let created = create_service(&e2e.client, &nlb_service("web", &[])).await?;
    let name = load_balancer_name(&created);
    let started = Instant::now();
    let service = eventually("the Service's ingress hostname", ACT_WITHIN, || async {
        let service = services(&e2e.client).get("web").await?;
        Ok((!ingress_hostnames(&service).is_empty()).then_some(service))
    })
    .await?;
    println!(
        "load balancer provisioned in {:?}; AWS calls so far: {:?}",
        started.elapsed(),
        aws::calls(&e2e.ccm.metrics().await?)
    );
    assert!(
        has_load_balancer_finalizer(&service),
        "{:?}",
        service.metadata.finalizers
    );

    let lbs = aws::load_balancers(&e2e.elbv2).await?;
    assert_eq!(lbs.len(), 1, "{lbs:?}");
    let nlb = &lbs[0];
    let lb_arn = nlb.load_balancer_arn().unwrap_or_default();
    assert_eq!(nlb.load_balancer_name(), Some(name.as_str()));
    assert_eq!(nlb.r#type().map(|t| t.as_str()), Some("network"));
    assert_eq!(nlb.scheme().map(|s| s.as_str()), Some("internet-facing"));
    assert_eq!(
        ingress_hostnames(&service),
        [nlb.dns_name().unwrap_or_default().to_owned()]
    );
    let subnets: BTreeSet<String> = nlb
        .availability_zones()
        .iter()
        .filter_map(|z| z.subnet_id().map(str::to_owned))
        .collect();
    let public: BTreeSet<String> = e2e.estate.public_subnets.iter().cloned().collect();
    assert_eq!(subnets, public, "the subnets tagged for the cluster's ELBs");
    let service_key = format!("{NAMESPACE}/web");
    let lb_tags = aws::tags(&e2e.elbv2, lb_arn).await?;
    assert!(owned_by(&lb_tags, &service_key), "{lb_tags:?}");

    let listeners = aws::listeners(&e2e.elbv2, lb_arn).await?;
    let groups = aws::target_groups(&e2e.elbv2).await?;
    assert_eq!((listeners.len(), groups.len()), (2, 2));
    let mut node_ports = BTreeSet::new();
    for listener in &listeners {
        let port = listener.port().unwrap_or_default();
        let node_port = node_port(&service, port).expect("a node port per port");
        node_ports.insert(node_port);
        assert_eq!(listener.protocol().map(|p| p.as_str()), Some("TCP"));
        let tg_arn = listener
            .default_actions()
            .first()
            .and_then(|a| a.target_group_arn())
            .unwrap_or_default();
        let group = groups
            .iter()
            .find(|g| g.target_group_arn() == Some(tg_arn))
            .expect("the listener forwards to one of the groups");
        assert_eq!(group.port(), Some(node_port), "listener {port}");
        assert_eq!(group.target_type().map(|t| t.as_str()), Some("instance"));
        assert!(owned_by(
            &aws::tags(&e2e.elbv2, tg_arn).await?,
            &service_key
        ));
    }
    wait_for_targets(&e2e, &[a, b]).await?;
    let node_rules = aws::ingress(&e2e.ec2, &e2e.estate.node_security_group).await?;
    for node_port in &node_ports {
        assert!(
            node_rules
                .iter()
                .any(|(protocol, from, to, cidr, description)| {
                    protocol == "tcp"
                        && (from, to) == (node_port, node_port)
                        && cidr == "0.0.0.0/0"
                        && description.contains(&name)
                }),
            "no rule for node port {node_port} in {node_rules:?}"
        );
    }

    create_node(&e2e.client, &kubelet_node(c, true, None)).await?;
    wait_for_targets(&e2e, &[a, b, c]).await?;
    nodes(&e2e.client)
        .delete(&a.private_dns_name, &DeleteParams::default())
        .await?;
    wait_for_targets(&e2e, &[b, c]).await?;

    services(&e2e.client)
        .delete("web", &DeleteParams::default())
        .await?;
    let started = Instant::now();
    eventually(
        "the Service gone (its finalizer removed)",
        ACT_WITHIN,
        || async {
            Ok(services(&e2e.client)
                .get_opt("web")
                .await?
                .is_none()
                .then_some(()))
        },
    )
    .await?;
    println!("load balancer deleted in {:?}", started.elapsed());
    assert!(aws::load_balancers(&e2e.elbv2).await?.is_empty());
    assert!(aws::target_groups(&e2e.elbv2).await?.is_empty());
    assert_eq!(
        security_group_names(&e2e).await?,
        groups_before,
        "the load balancer's own security group is deleted"
    );
    assert_eq!(
        aws::ingress(&e2e.ec2, &e2e.estate.node_security_group).await?,
        node_rules_before,
        "the node rules are removed"
    );
    Ok(())
}

#[tokio::test]
async fn a_malformed_annotation_gets_a_warning_and_changes_nothing_in_aws() -> anyhow::Result<()> {
    let e2e = E2e::start("malformed", 2, &[]).await?;
    let [a, b] = [&e2e.estate.instances[0], &e2e.estate.instances[1]];
    join(&e2e, &[a, b]).await?;
    let groups_before = security_group_names(&e2e).await?;

    let bad = nlb_service(
        "web",
        &[(annotations::HEALTHCHECK_INTERVAL, "every ten seconds")],
    );
    create_service(&e2e.client, &bad).await?;
    // No type: a classic ELB, whose own keys are checked as strictly.
    let mut classic = nlb_service("classic", &[]);
    classic.metadata.annotations = Some(
        [(
            annotations::CONNECTION_IDLE_TIMEOUT.to_owned(),
            "forever".to_owned(),
        )]
        .into(),
    );
    create_service(&e2e.client, &classic).await?;

    let warning = eventually("a Warning event on the Service", ACT_WITHIN, || async {
        let warnings = events(&e2e.client, "web", "Warning").await?;
        Ok(warnings.into_iter().next())
    })
    .await?;
    let note = warning.note.clone().unwrap_or_default();
    assert!(
        note.contains(annotations::HEALTHCHECK_INTERVAL) && note.contains("every ten seconds"),
        "the event names the annotation and its value: {note}"
    );
    let classic_warning = eventually(
        "a Warning event on the classic Service",
        ACT_WITHIN,
        || async {
            let warnings = events(&e2e.client, "classic", "Warning").await?;
            Ok(warnings.into_iter().next())
        },
    )
    .await?;
    let classic_note = classic_warning.note.unwrap_or_default();
    assert!(
        classic_note.contains(annotations::CONNECTION_IDLE_TIMEOUT)
            && classic_note.contains("forever"),
        "{classic_note}"
    );

    let metrics = e2e.ccm.metrics().await?;
    assert_eq!(
        aws::mutations(&metrics),
        Default::default(),
        "no AWS call that changes anything"
    );
    assert!(aws::load_balancers(&e2e.elbv2).await?.is_empty());
    assert!(aws::target_groups(&e2e.elbv2).await?.is_empty());
    assert_eq!(security_group_names(&e2e).await?, groups_before);
    assert!(
        aws::ingress(&e2e.ec2, &e2e.estate.node_security_group)
            .await?
            .is_empty()
    );
    let service = services(&e2e.client).get("web").await?;
    assert!(ingress_hostnames(&service).is_empty());

    // Fixing the annotation is a change of the Service: it is retried.
    let fixed = serde_json::json!({
        "metadata": { "annotations": { annotations::HEALTHCHECK_INTERVAL: "10" } }
    });
    services(&e2e.client)
        .patch("web", &PatchParams::default(), &Patch::Merge(&fixed))
        .await?;
    eventually(
        "the fixed Service's ingress hostname",
        ACT_WITHIN,
        || async {
            let service = services(&e2e.client).get("web").await?;
            Ok((!ingress_hostnames(&service).is_empty()).then_some(()))
        },
    )
    .await?;
    let groups = aws::target_groups(&e2e.elbv2).await?;
    assert_eq!(groups.len(), 2);
    assert!(
        groups
            .iter()
            .all(|g| g.health_check_interval_seconds() == Some(10)),
        "{groups:?}"
    );
    Ok(())
}
