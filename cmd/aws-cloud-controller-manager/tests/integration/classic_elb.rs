//! A Service without `aws-load-balancer-type` end to end: the
//! `aws-cloud-controller-manager` process gives it a classic ELB in moto,
//! as upstream does, whose instances follow the nodes, and removes the ELB,
//! its security group and its node rules when the Service goes; asked to
//! become an NLB, it keeps its classic ELB with a Warning, through crashes,
//! and its deletion leaves neither kind behind.

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use ccm_provider_aws::annotations;
use ccm_provider_aws::test_util::elb;
use ccm_test_support::{eventually, has_load_balancer_finalizer, ingress_hostnames};
use kube::api::{DeleteParams, Patch, PatchParams};
use support::objects::{
    create_node, create_service, events, is_initialized, kubelet_node, nlb_service, node_port,
    nodes, services,
};
use support::{E2e, aws};

/// How long the CCM may take to act on a change.
const ACT_WITHIN: Duration = Duration::from_secs(60);

/// The instances registered with the (one) classic ELB, if there is one.
async fn registered(e2e: &E2e) -> anyhow::Result<Option<BTreeSet<String>>> {
    let out = elb(&e2e.moto).describe_load_balancers().send().await?;
    Ok(out.load_balancer_descriptions().first().map(|lb| {
        lb.instances()
            .iter()
            .filter_map(|i| i.instance_id().map(str::to_owned))
            .collect()
    }))
}

async fn group_names(e2e: &E2e) -> anyhow::Result<BTreeSet<String>> {
    Ok(aws::security_groups(&e2e.ec2, &e2e.estate.vpc)
        .await?
        .iter()
        .filter_map(|g| g.group_name().map(str::to_owned))
        .collect())
}

#[tokio::test]
async fn a_service_without_a_type_gets_a_classic_elb_and_leaves_nothing_when_deleted()
-> anyhow::Result<()> {
    let e2e = E2e::start("classic", 2, &[]).await?;
    let [a, b] = [&e2e.estate.instances[0], &e2e.estate.instances[1]];
    create_node(&e2e.client, &kubelet_node(a, true, None)).await?;
    eventually("the node initialized", ACT_WITHIN, || async {
        let node = nodes(&e2e.client).get(&a.private_dns_name).await?;
        Ok(is_initialized(&node).then_some(()))
    })
    .await?;
    let groups_before = group_names(&e2e).await?;
    let rules_before = aws::ingress(&e2e.ec2, &e2e.estate.node_security_group).await?;

    let mut classic = nlb_service("web", &[]);
    classic.metadata.annotations = None;
    create_service(&e2e.client, &classic).await?;
    let service = eventually("the Service's ingress hostname", ACT_WITHIN, || async {
        let service = services(&e2e.client).get("web").await?;
        Ok((!ingress_hostnames(&service).is_empty()).then_some(service))
    })
    .await?;
    assert!(has_load_balancer_finalizer(&service));
    let described = elb(&e2e.moto).describe_load_balancers().send().await?;
    let lb = described
        .load_balancer_descriptions()
        .first()
        .expect("a classic ELB");
    assert_eq!(
        ingress_hostnames(&service),
        vec![lb.dns_name().unwrap_or_default().to_owned()]
    );
    assert!(aws::load_balancers(&e2e.elbv2).await?.is_empty(), "no NLB");
    // A TCP listener per Service port to its node port, and upstream's
    // health check of the first node port.
    let listeners: BTreeSet<(i32, String, i32)> = lb
        .listener_descriptions()
        .iter()
        .filter_map(|d| d.listener())
        .map(|l| {
            (
                l.load_balancer_port(),
                l.protocol().to_ascii_uppercase(),
                l.instance_port(),
            )
        })
        .collect();
    let http = node_port(&service, 80).expect("a node port for 80");
    let https = node_port(&service, 443).expect("a node port for 443");
    assert_eq!(
        listeners,
        BTreeSet::from([(80, "TCP".into(), http), (443, "TCP".into(), https)])
    );
    let check = lb.health_check().expect("a health check");
    assert_eq!(
        (
            check.target(),
            check.healthy_threshold(),
            check.unhealthy_threshold()
        ),
        (format!("TCP:{http}").as_str(), 2, 6)
    );
    eventually(
        "the first node's instance registered",
        ACT_WITHIN,
        || async {
            Ok((registered(&e2e).await? == Some(BTreeSet::from([a.id.clone()]))).then_some(()))
        },
    )
    .await?;

    create_node(&e2e.client, &kubelet_node(b, true, None)).await?;
    eventually("both instances registered", ACT_WITHIN, || async {
        let both = BTreeSet::from([a.id.clone(), b.id.clone()]);
        Ok((registered(&e2e).await? == Some(both)).then_some(()))
    })
    .await?;

    services(&e2e.client)
        .delete("web", &DeleteParams::default())
        .await?;
    eventually("the Service gone", ACT_WITHIN, || async {
        Ok(services(&e2e.client)
            .get_opt("web")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    assert_eq!(registered(&e2e).await?, None, "the ELB is deleted");
    assert_eq!(
        group_names(&e2e).await?,
        groups_before,
        "its own group is deleted"
    );
    assert_eq!(
        aws::ingress(&e2e.ec2, &e2e.estate.node_security_group).await?,
        rules_before
    );
    Ok(())
}

/// The classic ELBs' names in moto.
async fn classic_names(e2e: &E2e) -> anyhow::Result<BTreeSet<String>> {
    let out = elb(&e2e.moto).describe_load_balancers().send().await?;
    Ok(out
        .load_balancer_descriptions()
        .iter()
        .filter_map(|lb| lb.load_balancer_name().map(str::to_owned))
        .collect())
}

/// The operator sets `aws-load-balancer-type: nlb` on a Service that has a
/// classic ELB while the CCM is down (it crashed), and deletes the Service
/// while it is down again: the classic ELB is kept with a Warning, no NLB
/// is made beside it, and the deletion leaves no load balancer, target
/// group, security group or node rule of either kind.
#[tokio::test]
async fn a_type_change_keeps_the_classic_elb_and_deletion_leaves_nothing_through_crashes()
-> anyhow::Result<()> {
    let mut e2e = E2e::start("type-change", 1, &[]).await?;
    let a = &e2e.estate.instances[0].clone();
    create_node(&e2e.client, &kubelet_node(a, true, None)).await?;
    eventually("the node initialized", ACT_WITHIN, || async {
        let node = nodes(&e2e.client).get(&a.private_dns_name).await?;
        Ok(is_initialized(&node).then_some(()))
    })
    .await?;
    let groups_before = group_names(&e2e).await?;
    let rules_before = aws::ingress(&e2e.ec2, &e2e.estate.node_security_group).await?;
    let mut classic = nlb_service("web", &[]);
    classic.metadata.annotations = None;
    create_service(&e2e.client, &classic).await?;
    eventually("the Service's ingress hostname", ACT_WITHIN, || async {
        let service = services(&e2e.client).get("web").await?;
        Ok((!ingress_hostnames(&service).is_empty()).then_some(()))
    })
    .await?;
    let elbs = classic_names(&e2e).await?;
    assert_eq!(elbs.len(), 1);

    // A crash; the type changes while no CCM runs; a new one takes over.
    e2e.crash().await?;
    let nlb = serde_json::json!({"metadata": {"annotations": {annotations::TYPE: "nlb"}}});
    services(&e2e.client)
        .patch("web", &PatchParams::default(), &Patch::Merge(&nlb))
        .await?;
    e2e.start_again("type-change-2").await?;
    let warning = eventually("the type change refused", ACT_WITHIN, || async {
        let warnings = events(&e2e.client, "web", "Warning").await?;
        Ok(warnings
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("LoadBalancerTypeUnchanged")))
    })
    .await?;
    let note = warning.note.unwrap_or_default();
    assert!(
        note.contains("asks for a Network Load Balancer") && note.contains("is a classic ELB"),
        "{note}"
    );
    assert!(
        aws::load_balancers(&e2e.elbv2).await?.is_empty(),
        "no NLB beside it"
    );
    assert_eq!(classic_names(&e2e).await?, elbs, "the classic ELB is kept");

    // Another crash; the Service is deleted while no CCM runs.
    e2e.crash().await?;
    services(&e2e.client)
        .delete("web", &DeleteParams::default())
        .await?;
    e2e.start_again("type-change-3").await?;
    eventually("the Service gone", ACT_WITHIN, || async {
        Ok(services(&e2e.client)
            .get_opt("web")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    assert!(classic_names(&e2e).await?.is_empty(), "no classic ELB left");
    assert!(
        aws::load_balancers(&e2e.elbv2).await?.is_empty(),
        "no NLB left"
    );
    assert!(
        aws::target_groups(&e2e.elbv2).await?.is_empty(),
        "no target group left"
    );
    assert_eq!(
        group_names(&e2e).await?,
        groups_before,
        "no security group left"
    );
    assert_eq!(
        aws::ingress(&e2e.ec2, &e2e.estate.node_security_group).await?,
        rules_before,
        "no node rule left"
    );
    Ok(())
}
