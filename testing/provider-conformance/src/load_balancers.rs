//! Load balancers: idempotent ensure, update, delete of what is absent,
//! other Services' and clusters' load balancers left alone, and Services
//! the provider does not own left to their controller.

use std::sync::Arc;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::{CloudError, LoadBalancer};

use crate::steps::{bounded, delete, delta, ensure, expect, get, settled, uid, unchanged, without};
use crate::{Outcome, Report, Resources, Subject};

pub(crate) async fn run(subject: &Subject, report: &mut Report) {
    let Some(lb) = subject.provider.load_balancer() else {
        report.record(
            "load balancers",
            Outcome::NotApplicable("the provider has no load balancers".into()),
        );
        return;
    };
    let e = &subject.emulator;
    let a = Arc::new(e.add_instance("conformance-lb-a").await);
    let b = Arc::new(e.add_instance("conformance-lb-b").await);
    let nodes = [a.clone(), b.clone()];
    let ours = e.service("conformance-lb", &uid(0x01));
    let start = e.resources().await;
    report.result(
        "load balancers: ensure twice gives one status and creates nothing the second time",
        ensure_twice(subject, lb, &ours, &nodes).await,
    );
    let made = e.resources().await;
    report.result(
        "load balancers: update with another node set keeps the load balancer",
        update(subject, lb, &ours, &a).await,
    );
    report.result(
        "load balancers: another Service's and another cluster's survive a delete",
        neighbours_survive(subject, lb, &ours, &nodes, &start, &made).await,
    );
    report.result(
        "load balancers: deleting an absent one is Ok and changes nothing",
        delete_absent(subject, lb, &ours).await,
    );
    match e.foreign_service("conformance-foreign", &uid(0x09)) {
        Some(foreign) => report.result(
            "load balancers: a Service another controller serves is ImplementedElsewhere",
            foreign_left_alone(subject, lb, &foreign, &nodes).await,
        ),
        None => report.record(
            "load balancers: a Service another controller serves is ImplementedElsewhere",
            Outcome::NotApplicable("the provider claims every LoadBalancer Service".into()),
        ),
    }
    e.remove_instance(&a).await;
    e.remove_instance(&b).await;
}

async fn ensure_twice(
    subject: &Subject,
    lb: &dyn LoadBalancer,
    service: &Service,
    nodes: &[Arc<Node>],
) -> Result<(), String> {
    let e = &subject.emulator;
    let c = &subject.cluster;
    let before = get(lb, c, service).await?;
    expect(before.is_none(), || {
        format!("get_load_balancer found {before:?} before any ensure")
    })?;
    let r0 = e.resources().await;
    let first = ensure(lb, c, service, nodes).await?;
    let r1 = e.resources().await;
    expect(r0 != r1, || {
        "the first ensure created nothing in the cloud".into()
    })?;
    expect(!first.ingress.is_empty(), || {
        "the first ensure's status has no ingress".into()
    })?;
    let second = ensure(lb, c, service, nodes).await?;
    unchanged("the second ensure", &r1, &e.resources().await)?;
    expect(second == first, || {
        format!("the second ensure's status {second:?} differs from the first's {first:?}")
    })?;
    let got = get(lb, c, service).await?;
    expect(got.is_some(), || {
        "get_load_balancer found nothing after an ensure".into()
    })
}

async fn update(
    subject: &Subject,
    lb: &dyn LoadBalancer,
    service: &Service,
    node: &Arc<Node>,
) -> Result<(), String> {
    let e = &subject.emulator;
    let c = &subject.cluster;
    let before = e.resources().await;
    let status = get(lb, c, service).await?;
    let one = [node.clone()];
    settled("update_load_balancer", || {
        lb.update_load_balancer(c, service, &one)
    })
    .await?;
    let again = ensure(lb, c, service, &one).await?;
    // Per-node resources follow the node set; the load balancer stays.
    let node_kinds = e.node_kinds();
    unchanged(
        "an update and an ensure with one node",
        &without(&before, node_kinds),
        &without(&e.resources().await, node_kinds),
    )?;
    expect(status.as_ref() == Some(&again), || {
        format!("after an update the status is {again:?}, before it {status:?}")
    })
}

async fn neighbours_survive(
    subject: &Subject,
    lb: &dyn LoadBalancer,
    ours: &Service,
    nodes: &[Arc<Node>],
    start: &Resources,
    made: &Resources,
) -> Result<(), String> {
    let e = &subject.emulator;
    let c = &subject.cluster;
    let other = e.service("conformance-lb-other", &uid(0x02));
    ensure(lb, c, &other, nodes).await?;
    // The neighbour cluster's Service has our Service's namespace and name.
    let theirs = e.service("conformance-lb", &uid(0x03));
    let their_lb = subject
        .neighbour
        .load_balancer()
        .ok_or("the neighbour provider has no load balancers")?;
    let nc = &subject.neighbour_cluster;
    ensure(their_lb, nc, &theirs, nodes).await?;
    let all = e.resources().await;
    delete(lb, c, ours).await?;
    // What remains: everything but what our first ensure made.
    let mut expected = all.clone();
    for (kind, change) in delta(start, made) {
        let count = expected.entry(kind).or_default();
        *count = (*count as i64 - change).max(0) as usize;
    }
    // Per-node resources shared with the load balancers that remain stay.
    expected.retain(|kind, n| *n > 0 && !e.node_kinds().contains(&kind.as_str()));
    let mut now = without(&e.resources().await, e.node_kinds());
    now.retain(|_, n| *n > 0);
    expect(now == expected, || {
        format!("after deleting one load balancer the cloud holds {now:?}, expected {expected:?}")
    })?;
    expect(get(lb, c, ours).await?.is_none(), || {
        "get_load_balancer still finds a deleted load balancer".into()
    })?;
    expect(get(lb, c, &other).await?.is_some(), || {
        "deleting one Service's load balancer removed another Service's".into()
    })?;
    expect(get(their_lb, nc, &theirs).await?.is_some(), || {
        "deleting our load balancer removed another cluster's for a Service of the same name".into()
    })?;
    delete(lb, c, &other).await?;
    delete(their_lb, nc, &theirs).await?;
    unchanged(
        "ensuring and deleting three load balancers",
        start,
        &e.resources().await,
    )
}

async fn delete_absent(
    subject: &Subject,
    lb: &dyn LoadBalancer,
    deleted: &Service,
) -> Result<(), String> {
    let e = &subject.emulator;
    let c = &subject.cluster;
    let before = e.resources().await;
    delete(lb, c, deleted).await?;
    let never = e.service("conformance-lb-never", &uid(0x04));
    delete(lb, c, &never).await?;
    unchanged(
        "deleting absent load balancers",
        &before,
        &e.resources().await,
    )
}

async fn foreign_left_alone(
    subject: &Subject,
    lb: &dyn LoadBalancer,
    foreign: &Service,
    nodes: &[Arc<Node>],
) -> Result<(), String> {
    let e = &subject.emulator;
    let c = &subject.cluster;
    let before = e.resources().await;
    let answer = bounded(
        "ensure_load_balancer",
        lb.ensure_load_balancer(c, foreign, nodes),
    )
    .await?;
    expect(
        matches!(answer, Err(CloudError::ImplementedElsewhere)),
        || format!("ensuring a Service another controller serves answered {answer:?}"),
    )?;
    let deleted = bounded(
        "ensure_load_balancer_deleted",
        lb.ensure_load_balancer_deleted(c, foreign),
    )
    .await?;
    expect(
        matches!(deleted, Ok(()) | Err(CloudError::ImplementedElsewhere)),
        || format!("deleting a Service another controller serves answered {deleted:?}"),
    )?;
    unchanged(
        "calls about a Service another controller serves",
        &before,
        &e.resources().await,
    )
}
