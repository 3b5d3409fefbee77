//! A dry run (`--dry-run`) of the provider against the Cattle emulator:
//! reads are sent, every change is refused and recorded, and what a change
//! would create stands in for it, so the plan holds the whole ensure, not
//! its first change; the ensure made afterwards sends what was planned.

use ccm_cloud_provider::CloudProvider;
use ccm_cloud_provider::fence::{Request, RequestFence, scope};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_provider_rancher::emulator::CattleEmulator;

use crate::support::{node, provider, service, settled};
use std::sync::{Arc, Mutex};

/// One change as the provider described it to the fence.
#[derive(Debug, Clone)]
struct Planned {
    operation: String,
    detail: String,
}

/// A dry run's fence: lets reads through, refuses changes and records
/// them.
#[derive(Debug, Default)]
struct DryRun(Mutex<Vec<Planned>>);

impl RequestFence for DryRun {
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    fn check_request(&self, request: &Request<'_>) -> Result<(), String> {
        if !request.mutates {
            return Ok(());
        }
        self.0.lock().expect("not poisoned").push(Planned {
            operation: request.operation.to_owned(),
            detail: request.detail.to_owned(),
        });
        Err("dry run: planned, not sent".into())
    }

    fn dry_run(&self) -> bool {
        true
    }
}

/// A change as `METHOD collection[/item][?action=name]`, with IDs (real
/// or planned) written `item`: the same for a planned request and the
/// one later sent.
fn shape(method: &str, path: &str, action: Option<&str>) -> String {
    let mut parts = path.trim_start_matches('/').split('/');
    let collection = parts.next().unwrap_or_default();
    let item = if parts.next().is_some() { "/item" } else { "" };
    let action = action.map(|a| format!("?action={a}")).unwrap_or_default();
    format!("{method} {collection}{item}{action}")
}

/// A planned request's shape: its path is the whole path, and an action is
/// named first in its detail.
fn planned_shape(planned: &Planned, base_path: &str) -> String {
    let (method, path) = planned.operation.split_once(' ').expect("METHOD path");
    let action = planned
        .detail
        .strip_prefix("action=")
        .and_then(|rest| rest.split_whitespace().next());
    shape(method, path.trim_start_matches(base_path), action)
}

/// The dry run of `svc`'s ensure, then the ensure, checking that it made
/// exactly the planned changes: the plan's shapes, and the plan.
async fn plan_then_ensure(
    cattle: &CattleEmulator,
    provider: &dyn CloudProvider,
    svc: &Service,
    nodes: &[Arc<Node>],
) -> (Vec<String>, Vec<Planned>) {
    let lb = provider.load_balancer().expect("load balancers");
    let before = cattle.snapshot();
    let fence = Arc::new(DryRun::default());
    let sent_before = cattle.calls().len();
    let planned = scope(fence.clone(), lb.ensure_load_balancer("c1", svc, nodes)).await;
    assert!(
        planned.is_ok(),
        "a dry run plans past each change: {planned:?}"
    );
    let planned = fence.0.lock().expect("not poisoned").clone();
    let sent = cattle.calls();
    assert!(
        sent[sent_before..].iter().all(|c| c.method == "GET"),
        "a dry run sends reads only: {:?}",
        &sent[sent_before..]
    );
    assert_eq!(cattle.snapshot(), before, "the dry run changed nothing");

    let url = cattle.url();
    let after_scheme = url.split_once("://").expect("a URL").1;
    let base_path = after_scheme[after_scheme.find('/').unwrap_or(after_scheme.len())..]
        .trim_end_matches('/')
        .to_owned();
    let shapes: Vec<String> = planned
        .iter()
        .map(|p| planned_shape(p, &base_path))
        .collect();
    let made_from = cattle.calls().len();
    settled(|| lb.ensure_load_balancer("c1", svc, nodes)).await;
    let made: Vec<String> = cattle.calls()[made_from..]
        .iter()
        .filter(|c| c.method != "GET" && (200..300).contains(&c.status))
        .map(|c| shape(&c.method, &c.path, c.action.as_deref()))
        .collect();
    assert_eq!(made, shapes, "the ensure made exactly what was planned");
    (shapes, planned)
}

#[tokio::test]
async fn a_dry_run_of_a_new_load_balancer_plans_every_change_the_ensure_then_makes() {
    let cattle = CattleEmulator::start().await.expect("the emulator starts");
    cattle.add_host("worker-1", "10.0.0.1");
    cattle.add_host("worker-2", "10.0.0.2");
    let provider = provider(&cattle);
    let nodes = [node("worker-1"), node("worker-2")];
    let svc = service(&[(80, 30080)]);

    let (plan, planned) = plan_then_ensure(&cattle, provider.as_ref(), &svc, &nodes).await;
    assert_eq!(
        plan,
        [
            "POST stacks",
            "POST loadbalancerservices",
            "POST externalservices",
            "POST externalservices",
            "POST externalservices/item?action=activate",
            "POST externalservices/item?action=activate",
            "POST loadbalancerservices/item?action=setservicelinks",
            "PUT loadbalancerservices/item",
            "POST loadbalancerservices/item?action=activate",
        ],
        "{planned:#?}"
    );
    assert!(
        planned[1]
            .detail
            .contains("planned:kubernetes-loadbalancers"),
        "the load balancer is planned in the planned stack: {planned:#?}"
    );
    assert!(
        planned[6].detail.contains("planned:"),
        "the links name the planned external services: {planned:#?}"
    );
}

#[tokio::test]
async fn a_dry_run_of_a_node_change_plans_the_new_target_and_the_old_ones_removal() {
    let cattle = CattleEmulator::start().await.expect("the emulator starts");
    for (host, ip) in [("worker-1", "10.0.0.1"), ("worker-2", "10.0.0.2")] {
        cattle.add_host(host, ip);
    }
    let provider = provider(&cattle);
    let svc = service(&[(80, 30080)]);
    let lb = provider.load_balancer().expect("load balancers");
    let first = [node("worker-1")];
    settled(|| lb.ensure_load_balancer("c1", &svc, &first)).await;

    // worker-1 goes, worker-2 comes.
    let (plan, planned) =
        plan_then_ensure(&cattle, provider.as_ref(), &svc, &[node("worker-2")]).await;
    assert_eq!(
        plan,
        [
            "POST externalservices",
            "POST externalservices/item?action=activate",
            "POST loadbalancerservices/item?action=setservicelinks",
            "PUT loadbalancerservices/item",
            "DELETE externalservices/item",
        ],
        "{planned:#?}"
    );
}

/// Rancher cannot change a load balancer's ports: the ensure replaces it,
/// and the plan makes new external services for the new one, not links
/// to those the planned deletion removes.
#[tokio::test]
async fn a_dry_run_of_a_port_change_plans_the_replacement_whole() {
    let cattle = CattleEmulator::start().await.expect("the emulator starts");
    cattle.add_host("worker-1", "10.0.0.1");
    let provider = provider(&cattle);
    let lb = provider.load_balancer().expect("load balancers");
    let workers = [node("worker-1")];
    let first = service(&[(80, 30080)]);
    settled(|| lb.ensure_load_balancer("c1", &first, &workers)).await;

    let moved = service(&[(80, 30080), (443, 30443)]);
    let (plan, planned) = plan_then_ensure(&cattle, provider.as_ref(), &moved, &workers).await;
    assert_eq!(
        plan,
        [
            "DELETE externalservices/item",
            "DELETE loadbalancerservices/item",
            "POST loadbalancerservices",
            "POST externalservices",
            "POST externalservices/item?action=activate",
            "POST loadbalancerservices/item?action=setservicelinks",
            "PUT loadbalancerservices/item",
            "POST loadbalancerservices/item?action=activate",
        ],
        "{planned:#?}"
    );
    assert!(
        planned[6].detail.contains("planned:") && planned[6].detail.contains("443"),
        "the new rules forward to the planned external service: {planned:#?}"
    );
}
