//! Pod-CIDR routes against moto: created in the cluster's route table to
//! the node's instance (whose source/destination check goes off), listed
//! with their node, and deleted.

use std::time::Instant;

use aws_sdk_ec2::Client;
use ccm_cloud_provider::{CloudError, Route, RouteCreate};
use ccm_provider_aws::test_util::proxy::Proxy;
use ccm_provider_aws::test_util::seed::{self, Seeded};
use ccm_provider_aws::test_util::{CLUSTER, ec2, moto, provider, provider_at};

fn route(to: &Seeded, cidr: &str) -> Route {
    Route {
        name: String::new(),
        target_node: to.private_dns_name.clone(),
        target_provider_id: Some(to.provider_id()),
        destination_cidr: cidr.parse().expect("cidr"),
        blackhole: false,
    }
}

/// `(cidr, instance)` of the table's routes to instances.
async fn instance_routes(ec2: &Client, table: &str) -> Vec<(String, String)> {
    let out = ec2
        .describe_route_tables()
        .route_table_ids(table)
        .send()
        .await
        .expect("described");
    let mut routes: Vec<(String, String)> = out
        .route_tables()
        .iter()
        .flat_map(|t| t.routes())
        .filter_map(|r| {
            Some((
                r.destination_cidr_block()?.to_owned(),
                r.instance_id()?.to_owned(),
            ))
        })
        .collect();
    routes.sort();
    routes
}

async fn source_dest_check(ec2: &Client, instance: &str) -> Option<bool> {
    let out = ec2
        .describe_instances()
        .instance_ids(instance)
        .send()
        .await
        .expect("described");
    out.reservations()[0].instances()[0].source_dest_check()
}

#[tokio::test]
async fn routes_are_created_listed_and_deleted_in_the_clusters_table() {
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, 2).await.expect("seeded");
    let provider = provider(&moto, "").await;
    let routes = provider.routes().expect("AWS has routes");
    let [a, b] = [&estate.instances[0], &estate.instances[1]];

    routes
        .create_route(CLUSTER, "a", &route(a, "100.64.0.0/24"))
        .await
        .expect("created");
    // The route controller may not know the provider ID: the node name finds it.
    let mut by_name = route(b, "100.64.1.0/24");
    by_name.target_provider_id = None;
    routes
        .create_route(CLUSTER, "b", &by_name)
        .await
        .expect("created");
    assert_eq!(
        instance_routes(&ec2, &estate.route_table).await,
        [
            ("100.64.0.0/24".to_owned(), a.id.clone()),
            ("100.64.1.0/24".to_owned(), b.id.clone())
        ]
    );
    assert_eq!(source_dest_check(&ec2, &a.id).await, Some(false));
    assert_eq!(source_dest_check(&ec2, &b.id).await, Some(false));

    // Creating an existing route again changes nothing.
    routes
        .create_route(CLUSTER, "a", &route(a, "100.64.0.0/24"))
        .await
        .expect("idempotent");

    let listed = routes.list_routes(CLUSTER).await.expect("listed");
    let summary: Vec<(String, String, Option<String>, bool)> = listed
        .iter()
        .map(|r| {
            (
                r.destination_cidr.to_string(),
                r.target_node.clone(),
                r.target_provider_id.clone(),
                r.blackhole,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "100.64.0.0/24".to_owned(),
                a.private_dns_name.clone(),
                Some(a.provider_id()),
                false
            ),
            (
                "100.64.1.0/24".to_owned(),
                b.private_dns_name.clone(),
                Some(b.provider_id()),
                false
            ),
        ],
        "the gateway and local routes are not the cluster's"
    );

    routes
        .delete_route(CLUSTER, &listed[0])
        .await
        .expect("deleted");
    assert_eq!(
        instance_routes(&ec2, &estate.route_table).await,
        [("100.64.1.0/24".to_owned(), b.id.clone())]
    );
    routes
        .delete_route(CLUSTER, &listed[0])
        .await
        .expect("deleting again is fine");
}

#[tokio::test]
async fn a_route_to_another_instance_is_moved_to_the_new_target() {
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, 2).await.expect("seeded");
    let provider = provider(&moto, "").await;
    let routes = provider.routes().expect("AWS has routes");
    let [a, b] = [&estate.instances[0], &estate.instances[1]];
    routes
        .create_route(CLUSTER, "x", &route(a, "100.64.9.0/24"))
        .await
        .expect("created");
    routes
        .create_route(CLUSTER, "x", &route(b, "100.64.9.0/24"))
        .await
        .expect("replaced");
    assert_eq!(
        instance_routes(&ec2, &estate.route_table).await,
        [("100.64.9.0/24".to_owned(), b.id.clone())]
    );
}

#[tokio::test]
async fn route_table_id_selects_the_table() {
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, 1).await.expect("seeded");
    let untagged = ec2
        .create_route_table()
        .vpc_id(&estate.vpc)
        .send()
        .await
        .expect("created");
    let untagged = untagged
        .route_table()
        .and_then(|t| t.route_table_id())
        .unwrap_or_default()
        .to_owned();
    let provider = provider(&moto, &format!("RouteTableID = {untagged}")).await;
    let routes = provider.routes().expect("AWS has routes");
    routes
        .create_route(CLUSTER, "a", &route(&estate.instances[0], "100.64.3.0/24"))
        .await
        .expect("created");
    assert_eq!(instance_routes(&ec2, &untagged).await.len(), 1);
    assert!(instance_routes(&ec2, &estate.route_table).await.is_empty());
}

#[tokio::test]
async fn a_route_to_a_node_without_an_instance_is_instance_not_found() {
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, 1).await.expect("seeded");
    let provider = provider(&moto, "").await;
    let routes = provider.routes().expect("AWS has routes");
    let ghost = Route {
        name: String::new(),
        target_node: "ip-10-0-9-9.ec2.internal".into(),
        target_provider_id: None,
        destination_cidr: "100.64.5.0/24".parse().expect("cidr"),
        blackhole: false,
    };
    let err = routes.create_route(CLUSTER, "g", &ghost).await.unwrap_err();
    assert!(matches!(err, CloudError::InstanceNotFound), "{err:?}");
    assert!(instance_routes(&ec2, &estate.route_table).await.is_empty());
}

/// A route pass at 100 nodes: one list, then every create in one batch.
/// Upstream pays a `DescribeInstances` and a `DescribeRouteTables` per
/// create (200 describes for 100 routes); the batch pays one of each.
#[tokio::test]
async fn a_pass_creating_n_routes_reads_tables_and_instances_once() {
    const N: usize = 100;
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, N).await.expect("seeded");
    let proxy = Proxy::start(&moto.endpoint).await.expect("proxy");
    let provider = provider_at(&proxy.endpoint, CLUSTER, "").await;
    let routes = provider.routes().expect("AWS has routes");
    assert!(routes.batches_route_creates());
    let before = proxy.actions();

    let start = Instant::now();
    assert!(
        routes
            .list_routes(CLUSTER)
            .await
            .expect("listed")
            .is_empty()
    );
    let creates: Vec<RouteCreate> = estate
        .instances
        .iter()
        .enumerate()
        .map(|(n, instance)| RouteCreate {
            name_hint: format!("uid-{n}"),
            route: route(instance, &format!("100.64.{n}.0/24")),
        })
        .collect();
    let results = routes
        .create_routes(CLUSTER, &creates)
        .await
        .expect("tables read");
    let elapsed = start.elapsed();
    assert!(results.iter().all(Result::is_ok), "{results:?}");

    let after = proxy.actions();
    let made = |action: &str| {
        after.get(action).copied().unwrap_or(0) - before.get(action).copied().unwrap_or(0)
    };
    let total: u64 = after.values().sum::<u64>() - before.values().sum::<u64>();
    eprintln!("{N} routes in {elapsed:?}: {total} calls, {after:?}");
    assert_eq!(made("CreateRoute"), N as u64);
    assert_eq!(
        made("ModifyInstanceAttribute"),
        N as u64,
        "each instance's check once"
    );
    assert_eq!(
        made("DescribeRouteTables"),
        2,
        "the list's, and the batch's"
    );
    // The list has no targets to look up; the batch one call per 200.
    assert_eq!(made("DescribeInstances"), 1);
    assert_eq!(total, 2 * N as u64 + 3);
    assert_eq!(instance_routes(&ec2, &estate.route_table).await.len(), N);

    // The next pass has nothing to create: its list is the whole cost.
    let listed = routes.list_routes(CLUSTER).await.expect("listed");
    assert_eq!(listed.len(), N);
    assert!(
        listed
            .iter()
            .all(|r| !r.blackhole && !r.target_node.is_empty())
    );
}

/// A batch keeps every guarantee of a single create: an identical route is
/// left alone, a route to another instance is replaced, and a target
/// without an instance fails alone.
#[tokio::test]
async fn a_batch_replaces_moved_routes_and_fails_only_missing_targets() {
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, 3).await.expect("seeded");
    let provider = provider(&moto, "").await;
    let routes = provider.routes().expect("AWS has routes");
    let [a, b, c] = [
        &estate.instances[0],
        &estate.instances[1],
        &estate.instances[2],
    ];
    routes
        .create_route(CLUSTER, "a", &route(a, "100.64.0.0/24"))
        .await
        .expect("created");
    routes
        .create_route(CLUSTER, "b", &route(b, "100.64.1.0/24"))
        .await
        .expect("created");
    let mut ghost = route(c, "100.64.9.0/24");
    ghost.target_node = "ip-10-0-9-9.ec2.internal".into();
    ghost.target_provider_id = None;
    let batch = [
        ("a", route(a, "100.64.0.0/24")),
        ("b", route(c, "100.64.1.0/24")),
        ("c", route(c, "100.64.2.0/24")),
        ("g", ghost),
    ]
    .map(|(name, route)| RouteCreate {
        name_hint: name.into(),
        route,
    });
    let results = routes
        .create_routes(CLUSTER, &batch)
        .await
        .expect("tables read");
    assert!(results[..3].iter().all(Result::is_ok), "{results:?}");
    assert!(
        matches!(results[3], Err(CloudError::InstanceNotFound)),
        "{results:?}"
    );
    assert_eq!(
        instance_routes(&ec2, &estate.route_table).await,
        [
            ("100.64.0.0/24".to_owned(), a.id.clone()),
            ("100.64.1.0/24".to_owned(), c.id.clone()),
            ("100.64.2.0/24".to_owned(), c.id.clone()),
        ]
    );
    assert_eq!(source_dest_check(&ec2, &c.id).await, Some(false));
}
