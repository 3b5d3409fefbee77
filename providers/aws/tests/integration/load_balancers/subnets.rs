//! Subnets named by the `subnets` annotation: used as named, and only
//! those of the cluster's VPC (upstream v1.34+).

use ccm_cloud_provider::CloudError;
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::{CLUSTER, ec2};

use super::fixture::*;

#[tokio::test]
async fn subnets_named_by_annotation_are_used_as_named() {
    let f = Fixture::new(1).await;
    let by_name = service(&[(key::SUBNETS, "public-b")], &[(80, 30080)]);
    f.lb()
        .ensure_load_balancer(CLUSTER, &by_name, &f.nodes(&[0]))
        .await
        .expect("ensured");
    let nlb = &f.load_balancers().await[0];
    let subnets: Vec<&str> = nlb
        .availability_zones()
        .iter()
        .filter_map(|z| z.subnet_id())
        .collect();
    assert_eq!(subnets, [f.estate.public_subnets[1].as_str()]);
}

#[tokio::test]
async fn a_subnet_id_of_another_vpc_is_not_found_and_nothing_is_created() {
    let f = Fixture::new(1).await;
    let ec2 = ec2(&f.moto);
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.9.0.0/16")
        .send()
        .await
        .expect("VPC created");
    let vpc = vpc.vpc().and_then(|v| v.vpc_id()).expect("a VPC ID");
    let other = ec2
        .create_subnet()
        .vpc_id(vpc)
        .cidr_block("10.9.1.0/24")
        .availability_zone("us-east-1a")
        .send()
        .await
        .expect("subnet created");
    let other = other
        .subnet()
        .and_then(|s| s.subnet_id())
        .expect("a subnet ID");

    let named = format!("{},{other}", f.estate.public_subnets[1]);
    let svc = service(&[(key::SUBNETS, &named)], &[(80, 30080)]);
    let err = f
        .lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::InvalidInput { field, message }
            if field == key::SUBNETS && message.contains("expected to find 2, but found 1 subnets")),
        "{err:?}"
    );
    assert!(f.load_balancers().await.is_empty(), "no load balancer made");
}
