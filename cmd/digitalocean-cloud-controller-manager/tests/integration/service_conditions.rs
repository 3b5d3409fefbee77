//! Issue 67's acceptance against DigitalOcean's spec (the fake API behind
//! Prism), with the real `digitalocean-cloud-controller-manager` process:
//! a new LoadBalancer Service says `LoadBalancerProvisioned=False/Pending`
//! while its load balancer is `new` and `True/Provisioned` once it is
//! `active`, and `LoadBalancerTargetsHealthy` follows the load balancer's
//! `status`, naming the nodes.
//!
//! DigitalOcean's API has no per-droplet health: every droplet shares its
//! load balancer's `status` (`new` initializing, `active` healthy,
//! `errored` unhealthy). And the provider's ensure succeeds only once the
//! load balancer is `active`, so a new Service's targets are first read,
//! and shown, healthy: they are never read while it is `new`. Here the
//! other states are set in the fake, and read when a node's shutdown taint
//! comes or goes, which makes the CCM read the health at once.

use crate::support;

use std::time::Duration;

use ccm_provider_digitalocean::test_util::{FakeDroplet, account};
use ccm_test_support::conditions::{PROVISIONED, Seen, TARGETS_HEALTHY, condition, states};
use ccm_test_support::{eventually, has_taint, ingress_ips, ready_condition};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::{Cluster, WAIT};

/// How long the health read after a shutdown taint comes or goes (or the
/// first backoff after it) may take: well under the minute a readiness
/// flap waits.
const AFTER_SHUTDOWN_WITHIN: Duration = Duration::from_secs(30);
const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// The tests' Service.
const SERVICE: &str = "web";

/// Whether the Service's condition `type_` has `status` and `reason`.
fn is(service: &Service, type_: &str, (status, reason): (&str, &str)) -> bool {
    condition(service, type_).is_some_and(|(s, r, _)| (s.as_str(), r.as_str()) == (status, reason))
}

fn message(service: &Service, type_: &str) -> String {
    condition(service, type_)
        .map(|(_, _, message)| message)
        .unwrap_or_default()
}

/// Polls the Service, recording its conditions in `seen`, until `done`
/// holds; answers it.
async fn wait_until(
    cluster: &Cluster,
    seen: &Seen,
    what: &str,
    within: Duration,
    done: impl Fn(&Service) -> bool,
) -> Service {
    eventually(what, within, || async {
        let service = cluster.services().get(SERVICE).await.ok()?;
        seen.record(&service);
        done(&service).then_some(service)
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}\nconditions seen: {:?}\nthe CCM's log:\n{}",
            seen,
            cluster.ccm.log_tail()
        )
    })
}

/// Waits until every node has its droplet's provider ID: target health
/// names droplets by it.
async fn initialized(cluster: &Cluster) {
    eventually("the nodes initialized", WAIT, || async {
        let nodes = cluster.nodes().list(&Default::default()).await.ok()?;
        nodes
            .items
            .iter()
            .all(|n| n.spec.as_ref().is_some_and(|s| s.provider_id.is_some()))
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.ccm.log_tail()));
}

/// Sets node `name`'s Ready condition, as its kubelet's heartbeat (or its
/// absence, through kube-controller-manager) does.
async fn set_ready(cluster: &Cluster, name: &str, ready: bool) {
    let patch = json!({ "status": { "conditions": [ready_condition(ready)] } });
    cluster
        .nodes()
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("node status patched");
}

async fn has_shutdown_taint(cluster: &Cluster, name: &str) -> bool {
    let node = cluster.nodes().get(name).await.expect("the node");
    has_taint(&node, SHUTDOWN)
}

/// Starts a cluster of `node-1` and `node-2` on droplets `first` and
/// `first + 1`, creates the Service, and waits until it is provisioned
/// with its targets healthy.
async fn provisioned(first: u64, seen: &Seen) -> Cluster {
    let account = account();
    // Created `new`; active from the first read after that.
    account.set_activate_after_reads(1);
    account.add_droplet(FakeDroplet::new(first, "node-1"));
    account.add_droplet(FakeDroplet::new(first + 1, "node-2"));
    let cluster = Cluster::start(account, 2).await;
    initialized(&cluster).await;
    cluster.create_service(SERVICE, &[]).await;
    wait_until(&cluster, seen, "provisioned, targets healthy", WAIT, |s| {
        is(s, PROVISIONED, ("True", "Provisioned"))
            && is(s, TARGETS_HEALTHY, ("True", "AllTargetsHealthy"))
    })
    .await;
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_service_is_pending_while_its_load_balancer_is_new_then_provisioned_and_healthy() {
    let account = account();
    account.set_activate_after_reads(1);
    account.add_droplet(FakeDroplet::new(6101, "node-1"));
    account.add_droplet(FakeDroplet::new(6102, "node-2"));
    let cluster = Cluster::start(account, 2).await;
    initialized(&cluster).await;
    let seen = Seen::default();
    cluster.create_service(SERVICE, &[]).await;

    // Created `new`: the provider looks again in 15 s, the Service waits.
    let pending = wait_until(
        &cluster,
        &seen,
        "Pending on a new load balancer",
        WAIT,
        |s| {
            is(s, PROVISIONED, ("False", "Pending"))
                && message(s, PROVISIONED).ends_with("is still being created")
        },
    )
    .await;
    let lbs = cluster.account.load_balancers();
    assert_eq!(lbs.len(), 1, "{lbs:?}");
    let id = lbs[0]["id"].as_str().expect("an ID");
    assert_eq!(
        message(&pending, PROVISIONED),
        format!("load balancer {id} is still being created")
    );
    assert!(ingress_ips(&pending).is_empty(), "{pending:?}");
    assert_eq!(
        condition(&pending, TARGETS_HEALTHY),
        None,
        "target health is not read before the ensure succeeds"
    );

    let ready = wait_until(&cluster, &seen, "Provisioned", WAIT, |s| {
        is(s, PROVISIONED, ("True", "Provisioned"))
    })
    .await;
    let ips = ingress_ips(&ready);
    assert_eq!(ips.len(), 1, "{ips:?}");
    assert_eq!(
        message(&ready, PROVISIONED),
        format!("load balancer ready at {}", ips[0])
    );
    assert_eq!(
        cluster.load_balancer(id).expect("the load balancer")["status"],
        "active"
    );
    // The health read follows the ingress write, answered from what the
    // ensure just read: no earlier, never instead of it.
    let healthy = wait_until(&cluster, &seen, "targets healthy", WAIT, |s| {
        condition(s, TARGETS_HEALTHY).is_some()
    })
    .await;
    assert_eq!(
        condition(&healthy, TARGETS_HEALTHY),
        Some((
            "True".into(),
            "AllTargetsHealthy".into(),
            "2 of 2 targets healthy".into()
        ))
    );
    assert_eq!(
        seen.of(PROVISIONED),
        states(&[("False", "Pending"), ("True", "Provisioned")])
    );
    assert_eq!(
        seen.of(TARGETS_HEALTHY),
        states(&[("True", "AllTargetsHealthy")])
    );
    cluster.assert_contract_clean();
}

/// A node's droplet powers off while the load balancer reads `new` again,
/// then comes back while the load balancer is `errored`: each shutdown
/// taint change makes the CCM read the health at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_health_follows_the_load_balancers_status_naming_every_node() {
    let seen = Seen::default();
    let cluster = provisioned(6201, &seen).await;

    {
        let mut accounts = cluster.account.harness.api.lock();
        let lb = accounts
            .get_mut(&cluster.account.token)
            .and_then(|a| a.load_balancers.values_mut().next())
            .expect("the load balancer");
        lb.status = "new".into();
        // Read `new` until the test sets its status.
        lb.reads_until_active = u32::MAX;
    }
    cluster.account.set_droplet_status(6201, "off");
    set_ready(&cluster, "node-1", false).await;
    let initializing = wait_until(
        &cluster,
        &seen,
        "targets initializing",
        AFTER_SHUTDOWN_WITHIN,
        |s| is(s, TARGETS_HEALTHY, ("Unknown", "TargetsInitializing")),
    )
    .await;
    assert_eq!(
        message(&initializing, TARGETS_HEALTHY),
        "0 of 2 targets healthy; initializing: node-1, node-2"
    );
    assert!(has_shutdown_taint(&cluster, "node-1").await);

    // Not all healthy: read again after the first backoff.
    cluster.account.set_load_balancer_status(0, "active");
    wait_until(
        &cluster,
        &seen,
        "targets healthy again",
        AFTER_SHUTDOWN_WITHIN,
        |s| is(s, TARGETS_HEALTHY, ("True", "AllTargetsHealthy")),
    )
    .await;

    cluster.account.set_load_balancer_status(0, "errored");
    cluster.account.set_droplet_status(6201, "active");
    set_ready(&cluster, "node-1", true).await;
    let unhealthy = wait_until(
        &cluster,
        &seen,
        "targets unhealthy",
        AFTER_SHUTDOWN_WITHIN,
        |s| is(s, TARGETS_HEALTHY, ("False", "TargetsUnhealthy")),
    )
    .await;
    assert_eq!(
        message(&unhealthy, TARGETS_HEALTHY),
        "0 of 2 targets healthy; unhealthy: node-1 (errored), node-2 (errored)"
    );
    assert!(
        !has_shutdown_taint(&cluster, "node-1").await,
        "the taint's removal made the CCM look"
    );
    assert!(
        is(&unhealthy, PROVISIONED, ("True", "Provisioned")),
        "health changes no ensure: {:?}",
        condition(&unhealthy, PROVISIONED)
    );
    assert_eq!(
        seen.of(TARGETS_HEALTHY),
        states(&[
            ("True", "AllTargetsHealthy"),
            ("Unknown", "TargetsInitializing"),
            ("True", "AllTargetsHealthy"),
            ("False", "TargetsUnhealthy"),
        ])
    );
    cluster.assert_contract_clean();
}
