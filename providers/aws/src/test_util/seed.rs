//! A small AWS estate in moto, made with the SDK as an operator would:
//! a VPC with an internet gateway, two public subnets tagged for the
//! cluster's internet-facing load balancers, one private subnet for
//! internal ones, a subnet of another cluster, the cluster's route table, a
//! node security group and instances.

use std::sync::Arc;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;

use super::{CLUSTER, Error, node};

/// The seeded VPC's CIDR.
pub const VPC_CIDR: &str = "10.0.0.0/16";
/// The seeded instances' type.
pub const INSTANCE_TYPE: &str = "m5.large";

/// What was seeded.
#[derive(Debug, Clone)]
pub struct Estate {
    /// The VPC.
    pub vpc: String,
    /// Public subnets, in us-east-1a and us-east-1b.
    pub public_subnets: Vec<String>,
    /// A private subnet in us-east-1a, tagged for internal load balancers
    /// and named `private-a`.
    pub private_subnet: String,
    /// Another cluster's public subnet, which must never be used.
    pub foreign_subnet: String,
    /// The cluster's route table, which the public subnets use.
    pub route_table: String,
    /// The security group of every seeded instance.
    pub node_security_group: String,
    /// The instances, alternating between the public subnets.
    pub instances: Vec<Seeded>,
}

/// One instance.
#[derive(Debug, Clone)]
pub struct Seeded {
    /// `i-...`.
    pub id: String,
    /// Its private DNS name: the name of its node.
    pub private_dns_name: String,
    /// Its private IPv4 address.
    pub private_ip: String,
    /// Its availability zone.
    pub zone: String,
}

impl Seeded {
    /// `aws:///<zone>/<instance-id>`.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.id)
    }

    /// The node for this instance, with its provider ID set.
    pub fn node(&self) -> Arc<Node> {
        node(&self.private_dns_name, Some(&self.provider_id()))
    }
}

fn tag(key: &str, value: &str) -> Tag {
    Tag::builder().key(key).value(value).build()
}

fn tags(kind: ResourceType, tags: &[(&str, &str)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .set_tags(Some(tags.iter().map(|(k, v)| tag(k, v)).collect()))
        .build()
}

/// `kubernetes.io/cluster/<CLUSTER>`.
pub fn cluster_tag() -> String {
    format!("kubernetes.io/cluster/{CLUSTER}")
}

fn failed<E: std::error::Error + Send + Sync + 'static>(
    call: &'static str,
) -> impl FnOnce(E) -> Error {
    move |e| Error::Seed {
        call,
        source: Box::new(e),
    }
}

fn created(call: &'static str, what: &'static str, id: Option<&str>) -> Result<String, Error> {
    id.map(str::to_owned)
        .ok_or(Error::SeedAnswer { call, what })
}

/// Seeds the estate with `instances` instances, alternating zones.
///
/// # Errors
/// [`Error::Seed`] naming the AWS call that failed.
pub async fn estate(ec2: &Client, instances: usize) -> Result<Estate, Error> {
    let cluster = cluster_tag();
    let out = ec2
        .create_vpc()
        .cidr_block(VPC_CIDR)
        .send()
        .await
        .map_err(failed("CreateVpc"))?;
    let vpc = created("CreateVpc", "a VPC ID", out.vpc().and_then(|v| v.vpc_id()))?;
    let out = ec2
        .create_internet_gateway()
        .send()
        .await
        .map_err(failed("CreateInternetGateway"))?;
    let igw = created(
        "CreateInternetGateway",
        "a gateway ID",
        out.internet_gateway().and_then(|g| g.internet_gateway_id()),
    )?;
    ec2.attach_internet_gateway()
        .internet_gateway_id(&igw)
        .vpc_id(&vpc)
        .send()
        .await
        .map_err(failed("AttachInternetGateway"))?;

    let subnet = |cidr: &'static str, zone: &'static str, tags_: Vec<(String, String)>| {
        let vpc = vpc.clone();
        async move {
            let t: Vec<(&str, &str)> = tags_
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let out = ec2
                .create_subnet()
                .vpc_id(&vpc)
                .cidr_block(cidr)
                .availability_zone(zone)
                .tag_specifications(tags(ResourceType::Subnet, &t))
                .send()
                .await
                .map_err(failed("CreateSubnet"))?;
            created(
                "CreateSubnet",
                "a subnet ID",
                out.subnet().and_then(|s| s.subnet_id()),
            )
        }
    };
    let public_tags = |name: &str| {
        vec![
            (cluster.clone(), "shared".to_owned()),
            ("kubernetes.io/role/elb".to_owned(), "1".to_owned()),
            ("Name".to_owned(), name.to_owned()),
        ]
    };
    let public_a = subnet("10.0.1.0/24", "us-east-1a", public_tags("public-a")).await?;
    let public_b = subnet("10.0.2.0/24", "us-east-1b", public_tags("public-b")).await?;
    let private_subnet = subnet(
        "10.0.3.0/24",
        "us-east-1a",
        vec![
            (cluster.clone(), "shared".to_owned()),
            ("kubernetes.io/role/internal-elb".to_owned(), "1".to_owned()),
            ("Name".to_owned(), "private-a".to_owned()),
        ],
    )
    .await?;
    let foreign_subnet = subnet(
        "10.0.4.0/24",
        "us-east-1c",
        vec![
            (
                "kubernetes.io/cluster/another".to_owned(),
                "owned".to_owned(),
            ),
            ("kubernetes.io/role/elb".to_owned(), "1".to_owned()),
        ],
    )
    .await?;

    let out = ec2
        .create_route_table()
        .vpc_id(&vpc)
        .tag_specifications(tags(ResourceType::RouteTable, &[(&cluster, "owned")]))
        .send()
        .await
        .map_err(failed("CreateRouteTable"))?;
    let route_table = created(
        "CreateRouteTable",
        "a route table ID",
        out.route_table().and_then(|t| t.route_table_id()),
    )?;
    ec2.create_route()
        .route_table_id(&route_table)
        .destination_cidr_block("0.0.0.0/0")
        .gateway_id(&igw)
        .send()
        .await
        .map_err(failed("CreateRoute"))?;
    for s in [&public_a, &public_b, &foreign_subnet] {
        ec2.associate_route_table()
            .route_table_id(&route_table)
            .subnet_id(s)
            .send()
            .await
            .map_err(failed("AssociateRouteTable"))?;
    }

    let out = ec2
        .create_security_group()
        .group_name("nodes")
        .description("cluster nodes")
        .vpc_id(&vpc)
        .tag_specifications(tags(ResourceType::SecurityGroup, &[(&cluster, "owned")]))
        .send()
        .await
        .map_err(failed("CreateSecurityGroup"))?;
    let node_security_group = created("CreateSecurityGroup", "a group ID", out.group_id())?;

    let mut seeded = Vec::new();
    for i in 0..instances {
        let (subnet, zone) = if i % 2 == 0 {
            (&public_a, "us-east-1a")
        } else {
            (&public_b, "us-east-1b")
        };
        seeded.push(run_instance(ec2, subnet, zone, &node_security_group).await?);
    }
    Ok(Estate {
        vpc,
        public_subnets: vec![public_a, public_b],
        private_subnet,
        foreign_subnet,
        route_table,
        node_security_group,
        instances: seeded,
    })
}

/// Runs one cluster instance of [`INSTANCE_TYPE`] in `subnet` (in `zone`),
/// with security group `group`.
///
/// # Errors
/// [`Error::Seed`] when `RunInstances` fails.
pub async fn run_instance(
    ec2: &Client,
    subnet: &str,
    zone: &str,
    group: &str,
) -> Result<Seeded, Error> {
    let out = ec2
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_type(InstanceType::from(INSTANCE_TYPE))
        .min_count(1)
        .max_count(1)
        .subnet_id(subnet)
        .security_group_ids(group)
        .tag_specifications(tags(ResourceType::Instance, &[(&cluster_tag(), "owned")]))
        .send()
        .await
        .map_err(failed("RunInstances"))?;
    let instance = out.instances().first().ok_or(Error::SeedAnswer {
        call: "RunInstances",
        what: "an instance",
    })?;
    Ok(Seeded {
        id: created("RunInstances", "an instance ID", instance.instance_id())?,
        private_dns_name: created(
            "RunInstances",
            "a private DNS name",
            instance.private_dns_name(),
        )?,
        private_ip: created(
            "RunInstances",
            "a private IP",
            instance.private_ip_address(),
        )?,
        zone: zone.to_owned(),
    })
}
