//! Pod-CIDR routes against moto: created in the cluster's route table to
//! the node's instance (whose source/destination check goes off), listed
//! with their node, and deleted.

use aws_sdk_ec2::Client;
use cloud_provider::{CloudError, Route};
use provider_aws::test_util::seed::{self, Seeded};
use provider_aws::test_util::{CLUSTER, ec2, moto, provider};

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
