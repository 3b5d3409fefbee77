//! The pure half of a pass: which routes to create and which to delete,
//! given the nodes and the cloud's route table.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ccm_cloud_provider::Route;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

/// What one pass does.
#[derive(Debug, Default)]
pub(super) struct Plan {
    /// Every node with a pod CIDR: its missing routes, and its condition.
    pub(super) nodes: Vec<NodePlan>,
    /// Managed routes no node wants: to delete.
    pub(super) orphans: Vec<Route>,
}

/// One node's part of a pass.
#[derive(Debug)]
pub(super) struct NodePlan {
    /// The node.
    pub(super) node: Arc<Node>,
    /// Its pod CIDRs that have no route yet.
    pub(super) creates: Vec<Create>,
    /// Its pod CIDRs outside every cluster CIDR: never routed, since the
    /// controller could never delete such a route again.
    pub(super) unmanaged: Vec<IpNet>,
}

/// A route to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Create {
    /// The route, targeting its node.
    pub(super) route: Route,
    /// Upstream's name hint: the node's UID.
    pub(super) name_hint: String,
    /// Routes for the same CIDR that must go first: blackholes, or routes
    /// to a node that no longer has this CIDR.
    pub(super) replaces: Vec<Route>,
}

/// Whether the controller manages `cidr`: it falls wholly inside a cluster
/// CIDR. Other routes are never created nor deleted. Stricter than
/// upstream's `isResponsibleForRoute` (first or last address inside), which
/// would delete a wider route such as a /15 holding a /16 cluster CIDR.
pub(super) fn is_managed(cidr: &IpNet, cluster_cidrs: &[IpNet]) -> bool {
    cluster_cidrs.iter().any(|cluster| cluster.contains(cidr))
}

/// The node's pod CIDRs: `spec.podCIDRs`, or `spec.podCIDR` when the list
/// is empty; normalised (host bits cleared) and without duplicates. A value
/// that is not a CIDR is logged and skipped.
pub(super) fn pod_cidrs(node: &Node) -> Vec<IpNet> {
    let Some(spec) = node.spec.as_ref() else {
        return Vec::new();
    };
    let listed = spec.pod_cidrs.as_deref().unwrap_or_default();
    let texts: Vec<&str> = if listed.is_empty() {
        spec.pod_cidr.iter().map(String::as_str).collect()
    } else {
        listed.iter().map(String::as_str).collect()
    };
    let mut cidrs = Vec::new();
    for text in texts {
        match text.trim().parse::<IpNet>() {
            Ok(cidr) if !cidrs.contains(&cidr.trunc()) => cidrs.push(cidr.trunc()),
            Ok(_) => {}
            Err(_) => {
                tracing::warn!(node = %node.name_any(), pod_cidr = text, "ignoring a pod CIDR that is not a CIDR");
            }
        }
    }
    cidrs
}

fn provider_id(node: &Node) -> Option<String> {
    ccm_cloud_provider::provider_id(node).map(str::to_owned)
}

/// Whether `route` goes to the node named `name` with provider ID `id`
/// ([`goes_to`]).
fn targets(route: &Route, name: &str, id: Option<&str>) -> bool {
    goes_to(
        &route.target_node,
        route.target_provider_id.as_deref(),
        (name, id),
    )
}

/// Whether a route to `target_node` (with the target's provider ID
/// `target_provider_id`, when the cloud knows it) goes to the node `(name,
/// provider ID)`: by name, or by provider ID when both sides know it (a
/// cloud may list routes by instance, under a name that is not the
/// node's). The route controller and `audit` decide alike through it.
fn goes_to(
    target_node: &str,
    target_provider_id: Option<&str>,
    (name, id): (&str, Option<&str>),
) -> bool {
    target_node == name || (id.is_some() && target_provider_id == id)
}

/// [`goes_to`] for a Node object.
pub fn route_goes_to_node(
    target_node: &str,
    target_provider_id: Option<&str>,
    node: &Node,
) -> bool {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let id = ccm_cloud_provider::provider_id(node);
    goes_to(target_node, target_provider_id, (name, id))
}

/// Compares the nodes' pod CIDRs with the cloud's routes.
///
/// # Guarantees
/// - A node's pod CIDR inside the cluster CIDRs is satisfied by a
///   non-blackhole route for that CIDR to that node, or gets a [`Create`].
/// - A route inside the cluster CIDRs that is a blackhole, or whose
///   (CIDR, node) no node wants, is deleted: as part of the create for its
///   CIDR when there is one (so the old route goes first), as an orphan
///   otherwise.
/// - A route outside the cluster CIDRs is never touched.
/// - When two nodes claim one CIDR, the route to either is kept: the plan
///   never deletes a route some node wants.
pub(super) fn plan(nodes: &[Arc<Node>], routes: &[Route], cluster_cidrs: &[IpNet]) -> Plan {
    let with_cidrs: Vec<(&Arc<Node>, Vec<IpNet>)> = nodes
        .iter()
        .map(|node| (node, pod_cidrs(node)))
        .filter(|(_, cidrs)| !cidrs.is_empty())
        .collect();
    // CIDR → the nodes that want it (name, provider ID).
    let mut wanted: HashMap<IpNet, Vec<(String, Option<String>)>> = HashMap::new();
    for (node, cidrs) in &with_cidrs {
        for cidr in cidrs.iter().filter(|c| is_managed(c, cluster_cidrs)) {
            wanted
                .entry(*cidr)
                .or_default()
                .push((node.name_any(), provider_id(node)));
        }
    }
    // Managed routes by CIDR, each with whether it must go; indexed so a
    // pass stays linear in nodes and routes.
    let mut by_cidr: HashMap<IpNet, Vec<(usize, &Route, bool)>> = HashMap::new();
    for (i, route) in routes
        .iter()
        .enumerate()
        .filter(|(_, r)| is_managed(&r.destination_cidr, cluster_cidrs))
    {
        let cidr = route.destination_cidr.trunc();
        let unwanted = route.blackhole
            || !wanted.get(&cidr).is_some_and(|nodes| {
                nodes
                    .iter()
                    .any(|(name, id)| targets(route, name, id.as_deref()))
            });
        by_cidr.entry(cidr).or_default().push((i, route, unwanted));
    }

    let mut replaced: HashSet<usize> = HashSet::new();
    let mut plan = Plan::default();
    for (node, cidrs) in with_cidrs {
        let name = node.name_any();
        let id = provider_id(node);
        let (managed, unmanaged): (Vec<IpNet>, Vec<IpNet>) = cidrs
            .into_iter()
            .partition(|c| is_managed(c, cluster_cidrs));
        let mut creates = Vec::new();
        for cidr in managed {
            let existing = by_cidr.get(&cidr).map(Vec::as_slice).unwrap_or_default();
            if existing
                .iter()
                .any(|(_, r, _)| !r.blackhole && targets(r, &name, id.as_deref()))
            {
                continue;
            }
            let replaces = existing
                .iter()
                .filter(|(i, _, unwanted)| *unwanted && replaced.insert(*i))
                .map(|(_, r, _)| (*r).clone())
                .collect();
            let name_hint = node
                .metadata
                .uid
                .clone()
                .filter(|uid| !uid.is_empty())
                .unwrap_or_else(|| name.clone());
            let route = Route {
                name: name_hint.clone(),
                target_node: name.clone(),
                target_provider_id: provider_id(node),
                destination_cidr: cidr,
                blackhole: false,
            };
            creates.push(Create {
                route,
                name_hint,
                replaces,
            });
        }
        plan.nodes.push(NodePlan {
            node: node.clone(),
            creates,
            unmanaged,
        });
    }
    let mut orphans: Vec<(usize, &Route)> = by_cidr
        .into_values()
        .flatten()
        .filter(|(i, _, unwanted)| *unwanted && !replaced.contains(i))
        .map(|(i, r, _)| (i, r))
        .collect();
    orphans.sort_by_key(|(i, _)| *i);
    plan.orphans = orphans.into_iter().map(|(_, r)| r.clone()).collect();
    plan
}

#[cfg(test)]
mod tests;
