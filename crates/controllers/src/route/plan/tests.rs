//! The route plan's decisions: what is created, deleted and kept.

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
