//! Routes: ownership by cluster, idempotent create, blackholes.

use ccm_cloud_provider::ipnet::IpNet;
use ccm_cloud_provider::{CloudError, Route, Routes};
use ccm_provider_fake::{FakeCloud, InstanceState};

fn route(target: &str, cidr: &str) -> Route {
    Route {
        name: String::new(),
        target_node: target.into(),
        target_provider_id: None,
        destination_cidr: cidr.parse::<IpNet>().unwrap(),
        blackhole: false,
    }
}

#[tokio::test]
async fn routes_are_created_listed_and_deleted_per_cluster() {
    let cloud = FakeCloud::default();
    cloud.set_auto_instances(true);
    cloud
        .create_route("c1", "r1", &route("n1", "10.244.1.0/24"))
        .await
        .unwrap();
    cloud
        .create_route("c1", "r1", &route("n1", "10.244.1.0/24"))
        .await
        .unwrap();
    cloud.insert_route("other", route("x", "10.99.0.0/24"));

    let listed = cloud.list_routes("c1").await.unwrap();
    assert_eq!(
        listed.len(),
        1,
        "idempotent create, other clusters' routes hidden"
    );
    assert_eq!(listed[0].name, "r1");
    assert!(!listed[0].blackhole);

    let err = cloud
        .create_route("c1", "r2", &route("n2", "10.244.1.0/24"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");

    cloud.delete_route("c1", &listed[0]).await.unwrap();
    assert!(cloud.list_routes("c1").await.unwrap().is_empty());
    assert_eq!(
        cloud.routes().len(),
        1,
        "the other cluster's route is untouched"
    );
}

#[tokio::test]
async fn route_to_a_terminated_instance_is_a_blackhole() {
    let cloud = FakeCloud::default();
    cloud.set_auto_instances(true);
    cloud
        .create_route("c1", "r1", &route("n1", "10.244.1.0/24"))
        .await
        .unwrap();
    assert!(cloud.set_instance_state("n1", InstanceState::Terminated));
    assert!(cloud.list_routes("c1").await.unwrap()[0].blackhole);
}

#[tokio::test]
async fn route_to_a_node_without_instance_is_not_found() {
    let cloud = FakeCloud::default();
    let err = cloud
        .create_route("c1", "r1", &route("ghost", "10.244.9.0/24"))
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::InstanceNotFound), "{err:?}");
}
