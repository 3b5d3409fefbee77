//! The route controller against the test API server and the fake cloud.
//!
//! `route/table.rs`: what the route table becomes (create, delete, stale,
//! blackhole, dual-stack, never touched) and when the controller is off.
//! `route/triggers.rs`: when passes run, what they cost, and how often the
//! node condition is written.

use crate::support;
#[path = "route/table.rs"]
mod table;
#[path = "route/triggers.rs"]
mod triggers;

use std::collections::BTreeSet;
use std::time::Duration;

use ccm_cloud_provider::{Route, Routes};
use ccm_controllers::ControllerSettings;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use support::{Harness, eventually, fast_settings, ready_node};

/// The harness's `--cluster-name`.
pub(crate) const CLUSTER: &str = "test-cluster";
/// A period no test waits for: passes within a test come from triggers.
pub(crate) const HOUR: Duration = Duration::from_secs(3600);
/// How long a test waits for an outcome.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// The route controller on, dual-stack cluster CIDRs, a pass every `period`.
pub(crate) fn route_settings(period: Duration) -> ControllerSettings {
    ControllerSettings {
        configure_cloud_routes: true,
        cluster_cidrs: vec![
            "10.244.0.0/16".parse().unwrap(),
            "fd00:10:244::/56".parse().unwrap(),
        ],
        route_reconciliation_period: period,
        ..fast_settings()
    }
}

/// A Ready, initialized node with `pod_cidrs`.
pub(crate) fn node(name: &str, pod_cidrs: &[&str]) -> Node {
    let mut node = ready_node(name);
    let spec = node.spec.get_or_insert_with(Default::default);
    spec.pod_cidrs = Some(pod_cidrs.iter().map(|c| (*c).to_owned()).collect());
    spec.pod_cidr = pod_cidrs.first().map(|c| (*c).to_owned());
    node
}

pub(crate) fn route(target: &str, cidr: &str, blackhole: bool) -> Route {
    Route {
        name: format!("planted-{target}"),
        target_node: target.into(),
        target_provider_id: None,
        destination_cidr: cidr.parse().unwrap(),
        blackhole,
    }
}

/// Plants a working route to `target` (its instance is synthesized), as an
/// earlier CCM would have left it.
pub(crate) async fn plant(h: &Harness, target: &str, cidr: &str) {
    h.cloud
        .create_route(
            CLUSTER,
            &format!("planted-{target}"),
            &route(target, cidr, false),
        )
        .await
        .expect("route planted");
}

/// This cluster's routes as stored: (CIDR, target, blackhole).
pub(crate) fn table(h: &Harness) -> BTreeSet<(String, String, bool)> {
    h.cloud
        .routes()
        .into_iter()
        .filter(|r| r.cluster_name == CLUSTER)
        .map(|r| {
            (
                r.route.destination_cidr.to_string(),
                r.route.target_node,
                r.route.blackhole,
            )
        })
        .collect()
}

pub(crate) async fn wait_for_table(h: &Harness, expected: &[(&str, &str, bool)]) {
    let expected: BTreeSet<_> = expected
        .iter()
        .map(|(c, t, b)| ((*c).to_owned(), (*t).to_owned(), *b))
        .collect();
    let what = format!("route table {expected:?}");
    eventually(&what, WAIT, || async {
        (table(h) == expected).then_some(())
    })
    .await
    .expect("a bounded wait");
}

pub(crate) fn condition(node: &Node, type_: &str) -> Option<NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

/// Waits until node `name` has `NetworkUnavailable` with `status`.
pub(crate) async fn wait_for_condition(h: &Harness, name: &str, status: &str) -> NodeCondition {
    eventually(
        &format!("{name} NetworkUnavailable={status}"),
        WAIT,
        || async {
            let node = h.nodes().get(name).await.ok()?;
            condition(&node, "NetworkUnavailable").filter(|c| c.status == status)
        },
    )
    .await
    .expect("a bounded wait")
}

/// Passes run so far: upstream's `route_controller_route_sync_total`,
/// summed over its `outcome` and `trigger` labels (it has no sample
/// before the first pass ends).
pub(crate) fn passes(h: &Harness) -> u64 {
    h.metrics
        .encode(None)
        .lines()
        .filter_map(|line| line.strip_prefix("route_controller_route_sync_total{"))
        .filter_map(|rest| rest.rsplit_once("} "))
        .map(|(_, n)| n.trim().parse::<u64>().expect("a counter value"))
        .sum()
}

/// Passes that ended with `outcome` (`changed`, `noop`, `error`) and had
/// `trigger` (`node_change`, `periodic`).
pub(crate) fn syncs(h: &Harness, outcome: &str, trigger: &str) -> u64 {
    let prefix = format!(
        "route_controller_route_sync_total{{outcome=\"{outcome}\",trigger=\"{trigger}\"}} "
    );
    h.metrics
        .encode(None)
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .map_or(0, |n| n.trim().parse().expect("a counter value"))
}
