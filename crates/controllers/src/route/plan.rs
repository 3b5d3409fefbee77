//! The pure half of a pass: which routes to create and which to delete,
//! given the nodes and the cloud's route table.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cloud_provider::Route;
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
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .filter(|id| !id.is_empty())
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
    let id = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|id| !id.is_empty());
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
mod tests {
    use k8s_openapi::api::core::v1::NodeSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn net(cidr: &str) -> IpNet {
        cidr.parse().unwrap()
    }

    fn node(name: &str, cidrs: &[&str]) -> Arc<Node> {
        Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                pod_cidrs: Some(cidrs.iter().map(|c| (*c).to_owned()).collect()),
                provider_id: Some(format!("fake://{name}")),
                ..NodeSpec::default()
            }),
            status: None,
        })
    }

    fn route(target: &str, cidr: &str) -> Route {
        Route {
            name: format!("r-{target}"),
            target_node: target.into(),
            target_provider_id: None,
            destination_cidr: net(cidr),
            blackhole: false,
        }
    }

    fn blackhole(target: &str, cidr: &str) -> Route {
        Route {
            blackhole: true,
            ..route(target, cidr)
        }
    }

    fn cluster() -> Vec<IpNet> {
        vec![net("10.244.0.0/16"), net("fd00:10:244::/56")]
    }

    fn created(plan: &Plan) -> Vec<(String, String)> {
        plan.nodes
            .iter()
            .flat_map(|n| &n.creates)
            .map(|c| {
                (
                    c.route.target_node.clone(),
                    c.route.destination_cidr.to_string(),
                )
            })
            .collect()
    }

    fn cidrs(routes: &[Route]) -> Vec<String> {
        routes
            .iter()
            .map(|r| r.destination_cidr.to_string())
            .collect()
    }

    #[test]
    fn missing_routes_are_created_with_upstreams_name_hint_and_the_provider_id() {
        let plan = plan(&[node("a", &["10.244.1.0/24"])], &[], &cluster());
        let create = &plan.nodes[0].creates[0];
        assert_eq!(create.name_hint, "uid-a");
        assert_eq!(create.route.target_node, "a");
        assert_eq!(create.route.target_provider_id.as_deref(), Some("fake://a"));
        assert_eq!(create.route.destination_cidr, net("10.244.1.0/24"));
        assert!(create.replaces.is_empty());
        assert!(plan.orphans.is_empty());
    }

    #[test]
    fn existing_routes_are_kept_and_nothing_is_deleted() {
        let plan = plan(
            &[node("a", &["10.244.1.0/24"])],
            &[route("a", "10.244.1.0/24")],
            &cluster(),
        );
        assert!(created(&plan).is_empty());
        assert!(plan.orphans.is_empty());
        assert_eq!(
            plan.nodes.len(),
            1,
            "the node is still planned, for its condition"
        );
    }

    #[test]
    fn dual_stack_nodes_get_one_route_per_family() {
        let plan = plan(
            &[node("a", &["10.244.1.0/24", "fd00:10:244:1::/64"])],
            &[route("a", "10.244.1.0/24")],
            &cluster(),
        );
        assert_eq!(
            created(&plan),
            [("a".to_owned(), "fd00:10:244:1::/64".to_owned())]
        );
    }

    #[test]
    fn routes_of_deleted_nodes_are_orphans() {
        let plan = plan(
            &[node("a", &["10.244.1.0/24"])],
            &[route("a", "10.244.1.0/24"), route("gone", "10.244.2.0/24")],
            &cluster(),
        );
        assert_eq!(cidrs(&plan.orphans), ["10.244.2.0/24"]);
    }

    #[test]
    fn blackholes_are_deleted_and_replaced_when_their_node_still_wants_the_cidr() {
        let routes = [
            blackhole("a", "10.244.1.0/24"),
            blackhole("gone", "10.244.2.0/24"),
        ];
        let plan = plan(&[node("a", &["10.244.1.0/24"])], &routes, &cluster());
        let create = &plan.nodes[0].creates[0];
        assert_eq!(
            cidrs(&create.replaces),
            ["10.244.1.0/24"],
            "the blackhole goes before its replacement"
        );
        assert_eq!(cidrs(&plan.orphans), ["10.244.2.0/24"]);
    }

    #[test]
    fn a_route_to_the_wrong_node_is_replaced() {
        let plan = plan(
            &[node("b", &["10.244.1.0/24"])],
            &[route("a", "10.244.1.0/24")],
            &cluster(),
        );
        assert_eq!(
            created(&plan),
            [("b".to_owned(), "10.244.1.0/24".to_owned())]
        );
        assert_eq!(plan.nodes[0].creates[0].replaces[0].target_node, "a");
        assert!(
            plan.orphans.is_empty(),
            "deleted once, as part of the replacement"
        );
    }

    #[test]
    fn a_route_listed_under_another_name_matches_by_provider_id() {
        // AWS lists routes by instance, under its private DNS name.
        let mut listed = route("ip-10-0-0-1.ec2.internal", "10.244.1.0/24");
        listed.target_provider_id = Some("fake://a".into());
        let plan = plan(&[node("a", &["10.244.1.0/24"])], &[listed], &cluster());
        assert!(created(&plan).is_empty(), "the route exists: {plan:?}");
        assert!(plan.orphans.is_empty());
    }

    #[test]
    fn routes_outside_the_cluster_cidrs_are_never_touched() {
        let routes = [
            route("gone", "192.168.5.0/24"),
            blackhole("gone", "172.16.0.0/24"),
            route("a", "10.99.0.0/24"),
        ];
        let plan = plan(&[node("a", &["10.244.1.0/24"])], &routes, &cluster());
        assert!(plan.orphans.is_empty());
        assert!(plan.nodes[0].creates[0].replaces.is_empty());
    }

    #[test]
    fn pod_cidrs_outside_the_cluster_cidrs_are_not_routed() {
        let plan = plan(
            &[node("a", &["10.244.1.0/24", "192.168.1.0/24"])],
            &[],
            &cluster(),
        );
        assert_eq!(
            created(&plan),
            [("a".to_owned(), "10.244.1.0/24".to_owned())]
        );
        assert_eq!(plan.nodes[0].unmanaged, [net("192.168.1.0/24")]);
    }

    #[test]
    fn a_cidr_claimed_by_two_nodes_never_flaps() {
        let nodes = [node("a", &["10.244.1.0/24"]), node("b", &["10.244.1.0/24"])];
        let plan = plan(&nodes, &[route("a", "10.244.1.0/24")], &cluster());
        assert_eq!(
            created(&plan),
            [("b".to_owned(), "10.244.1.0/24".to_owned())]
        );
        assert!(
            plan.nodes[1].creates[0].replaces.is_empty(),
            "a's route is wanted: never deleted"
        );
        assert!(plan.orphans.is_empty());
    }

    #[test]
    fn nodes_without_pod_cidrs_are_skipped_and_their_routes_deleted() {
        let plan = plan(
            &[node("a", &[])],
            &[route("a", "10.244.1.0/24")],
            &cluster(),
        );
        assert!(plan.nodes.is_empty());
        assert_eq!(cidrs(&plan.orphans), ["10.244.1.0/24"]);
    }

    #[test]
    fn the_singular_pod_cidr_is_used_when_the_list_is_empty() {
        let mut n = (*node("a", &[])).clone();
        n.spec.as_mut().unwrap().pod_cidr = Some("10.244.7.5/24".into());
        assert_eq!(pod_cidrs(&n), [net("10.244.7.0/24")], "host bits cleared");
        n.spec.as_mut().unwrap().pod_cidrs = Some(vec![
            "not-a-cidr".into(),
            "10.244.8.0/24".into(),
            "10.244.8.0/24".into(),
        ]);
        assert_eq!(
            pod_cidrs(&n),
            [net("10.244.8.0/24")],
            "the list wins; bad and duplicate entries dropped"
        );
    }

    #[test]
    fn a_blackhole_beside_a_working_route_is_an_orphan() {
        let routes = [route("a", "10.244.1.0/24"), blackhole("a", "10.244.1.0/24")];
        let plan = plan(&[node("a", &["10.244.1.0/24"])], &routes, &cluster());
        assert!(created(&plan).is_empty());
        assert_eq!(plan.orphans, [blackhole("a", "10.244.1.0/24")]);
    }

    #[test]
    fn a_large_cluster_in_sync_plans_nothing() {
        let cidr = |i: usize| format!("10.244.{}.{}/30", i / 64, (i % 64) * 4);
        let nodes: Vec<_> = (0..5000)
            .map(|i| node(&format!("n{i}"), &[&cidr(i)]))
            .collect();
        let routes: Vec<_> = (0..5000)
            .map(|i| route(&format!("n{i}"), &cidr(i)))
            .collect();
        let plan = plan(&nodes, &routes, &cluster());
        assert_eq!(plan.nodes.len(), 5000);
        assert!(created(&plan).is_empty());
        assert!(plan.orphans.is_empty());
    }

    #[test]
    fn managed_means_wholly_inside_a_cluster_cidr() {
        let cluster = cluster();
        assert!(is_managed(&net("10.244.3.0/24"), &cluster));
        assert!(
            !is_managed(&net("10.0.0.0/8"), &cluster),
            "a covering route (say, the VPC's) is not ours"
        );
        assert!(
            !is_managed(&net("10.244.0.0/15"), &cluster),
            "a route wider than the cluster CIDR is not ours, though it starts inside it"
        );
        assert!(is_managed(&net("10.244.0.0/16"), &cluster));
        assert!(is_managed(&net("fd00:10:244:9::/64"), &cluster));
        assert!(!is_managed(&net("10.245.0.0/24"), &cluster));
        assert!(!is_managed(&net("fd00:10:245::/64"), &cluster));
    }

    /// The route table after a pass carries out `plan`: its orphans and
    /// replaced routes deleted, its creates made.
    fn applied(routes: &[Route], plan: &Plan) -> Vec<Route> {
        let mut table = routes.to_vec();
        let deleted = plan.orphans.iter().chain(
            plan.nodes
                .iter()
                .flat_map(|n| n.creates.iter().flat_map(|c| &c.replaces)),
        );
        for route in deleted {
            let at = table
                .iter()
                .position(|r| r == route)
                .expect("the plan deletes only routes that exist");
            table.remove(at);
        }
        table.extend(
            plan.nodes
                .iter()
                .flat_map(|n| n.creates.iter().map(|c| c.route.clone())),
        );
        table
    }

    /// Eight managed /24s, then three outside the cluster CIDRs.
    const POOL: [&str; 11] = [
        "10.244.0.0/24",
        "10.244.1.0/24",
        "10.244.2.0/24",
        "10.244.3.0/24",
        "10.244.4.0/24",
        "10.244.5.0/24",
        "10.244.6.0/24",
        "10.244.7.0/24",
        "10.99.0.0/24",
        "10.99.1.0/24",
        "192.168.5.0/24",
    ];

    /// Nodes n0..n5 and, for each CIDR of the pool, the node that claims
    /// it, if any (so no two nodes claim one CIDR); and the cloud's routes:
    /// a CIDR of the pool, a target among the nodes or a gone one, maybe a
    /// blackhole.
    fn world() -> impl proptest::strategy::Strategy<Value = (Vec<Arc<Node>>, Vec<Route>)> {
        use proptest::prelude::*;
        let owners = proptest::collection::vec(proptest::option::of(0_usize..6), POOL.len());
        let routes = proptest::collection::vec((0..POOL.len(), 0_usize..7, any::<bool>()), 0..10);
        (owners, routes).prop_map(|(owners, routes)| {
            let nodes = (0..6)
                .map(|n| {
                    let cidrs: Vec<&str> = owners
                        .iter()
                        .zip(POOL)
                        .filter(|(owner, _)| **owner == Some(n))
                        .map(|(_, cidr)| cidr)
                        .collect();
                    node(&format!("n{n}"), &cidrs)
                })
                .collect();
            let routes = routes
                .into_iter()
                .map(|(cidr, target, is_blackhole)| {
                    let target = if target < 6 {
                        format!("n{target}")
                    } else {
                        "gone".to_owned()
                    };
                    if is_blackhole {
                        blackhole(&target, POOL[cidr])
                    } else {
                        route(&target, POOL[cidr])
                    }
                })
                .collect();
            (nodes, routes)
        })
    }

    proptest::proptest! {
        #[test]
        fn one_pass_converges_and_the_next_has_nothing_to_do((nodes, routes) in world()) {
            let cluster = cluster();
            let first = plan(&nodes, &routes, &cluster);
            // Routes outside the cluster CIDRs are never deleted.
            for gone in first.orphans.iter().chain(first.nodes.iter().flat_map(|n| n.creates.iter().flat_map(|c| &c.replaces))) {
                proptest::prop_assert!(is_managed(&gone.destination_cidr, &cluster), "{gone:?}");
            }
            let table = applied(&routes, &first);
            for unmanaged in routes.iter().filter(|r| !is_managed(&r.destination_cidr, &cluster)) {
                proptest::prop_assert!(table.contains(unmanaged), "{unmanaged:?} was touched");
            }
            // Every managed pod CIDR of every node has a live route to it;
            // every managed route left is live and wanted by its target.
            for node in &nodes {
                for cidr in pod_cidrs(node).into_iter().filter(|c| is_managed(c, &cluster)) {
                    proptest::prop_assert!(
                        table.iter().any(|r| r.destination_cidr == cidr && !r.blackhole && r.target_node == node.name_any()),
                        "{cidr} of {} has no route in {table:?}", node.name_any()
                    );
                }
            }
            for left in table.iter().filter(|r| is_managed(&r.destination_cidr, &cluster)) {
                proptest::prop_assert!(!left.blackhole, "{left:?}");
                let wanted = nodes.iter().any(|n| n.name_any() == left.target_node && pod_cidrs(n).contains(&left.destination_cidr));
                proptest::prop_assert!(wanted, "{left:?} is wanted by no node");
            }
            // The next pass over the table it left has nothing to do.
            let second = plan(&nodes, &table, &cluster);
            proptest::prop_assert!(second.orphans.is_empty(), "{:?}", second.orphans);
            proptest::prop_assert!(second.nodes.iter().all(|n| n.creates.is_empty()));
        }
    }
}
