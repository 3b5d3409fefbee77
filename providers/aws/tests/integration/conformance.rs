//! The provider conformance suite against moto: the AWS provider for
//! cluster `c1`, and a neighbour for cluster `another` in the same account
//! and VPC, both talking to moto through the harness's counting, throttling
//! proxy.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::proxy::Proxy;
use ccm_provider_aws::test_util::seed::{self, Estate};
use ccm_provider_aws::test_util::{
    CLUSTER, Moto, ec2, elbv2, moto, nlb_service, node, provider_at,
};
use ccm_provider_conformance::{Emulator, Resources, Subject};

/// The neighbour's cluster ID: the one the seeded foreign subnet is tagged
/// for, so its load balancers have a subnet of their own.
const NEIGHBOUR: &str = "another";

/// The first node port given to a Service.
const FIRST_NODE_PORT: i32 = 30000;

/// The description of a load balancer's client rules in node security
/// groups (then the load balancer's name).
const CLIENT_RULE: &str = "kubernetes.io/rule/nlb/client=";
/// The description of the ICMP rules for path MTU discovery.
const MTU_RULE: &str = "kubernetes.io/rule/nlb/mtu";

/// moto behind the proxy, with the seeded estate.
///
/// moto never marks a route as a blackhole, but the blackhole check runs
/// all the same: moto goes on describing a terminated instance, as EC2 does
/// for a while, and the provider lists a route to a terminated instance as
/// a blackhole whatever the route's state.
#[derive(Debug)]
struct MotoEmulator {
    moto: Moto,
    proxy: Proxy,
    estate: Estate,
    /// Instances started so far: they alternate between the public subnets.
    started: AtomicUsize,
    /// The node port of each Service, by UID: as the API server allocates
    /// them, one per Service and never two Services the same, since node
    /// rules with the same port and range are one rule in EC2.
    node_ports: Mutex<BTreeMap<String, i32>>,
}

fn instance_id(node: &Node) -> String {
    let provider_id = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default();
    provider_id
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[async_trait]
impl Emulator for MotoEmulator {
    async fn add_instance(&self, name: &str) -> Node {
        let n = self.started.fetch_add(1, Ordering::SeqCst);
        let (subnet, zone) = [
            (&self.estate.public_subnets[0], "us-east-1a"),
            (&self.estate.public_subnets[1], "us-east-1b"),
        ][n % 2];
        let ec2 = ec2(&self.moto);
        let seeded = seed::run_instance(&ec2, subnet, zone, &self.estate.node_security_group)
            .await
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        ec2.create_tags()
            .resources(&seeded.id)
            .tags(Tag::builder().key("Name").value(name).build())
            .send()
            .await
            .expect("named");
        // A kubelet on EC2 registers under its private DNS name.
        Arc::unwrap_or_clone(seeded.node())
    }

    fn missing_node(&self, name: &str) -> Node {
        Arc::unwrap_or_clone(node(name, Some("aws:///us-east-1a/i-0000000000000dead")))
    }

    async fn stop_instance(&self, node: &Node) {
        ec2(&self.moto)
            .stop_instances()
            .instance_ids(instance_id(node))
            .send()
            .await
            .expect("stopped");
    }

    async fn remove_instance(&self, node: &Node) {
        ec2(&self.moto)
            .terminate_instances()
            .instance_ids(instance_id(node))
            .send()
            .await
            .expect("terminated");
    }

    fn service(&self, name: &str, uid: &str) -> Service {
        let node_port = {
            let mut ports = self.node_ports.lock().expect("not poisoned");
            let next = FIRST_NODE_PORT + ports.len() as i32;
            *ports.entry(uid.to_owned()).or_insert(next)
        };
        let mut service = nlb_service(uid, &[], &[(80, node_port)]);
        service.metadata.name = Some(name.to_owned());
        service.metadata.namespace = Some("default".to_owned());
        service
    }

    fn foreign_service(&self, name: &str, uid: &str) -> Option<Service> {
        let mut service = self.service(name, uid);
        service
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key::TYPE.to_owned(), "external".to_owned());
        Some(service)
    }

    async fn resources(&self) -> Resources {
        let mut counts = load_balancer_resources(&self.moto).await;
        counts.extend(ec2_resources(&self.moto).await);
        counts
    }

    fn requests(&self) -> u64 {
        self.proxy.requests()
    }

    async fn set_throttled(&self, on: bool) {
        self.proxy.set_throttled(on);
    }
}

/// The most pages a listing reads: far more than the suite ever makes.
const MAX_PAGES: usize = 100;

/// Load balancers, their listeners and target groups, in the whole account.
async fn load_balancer_resources(moto: &Moto) -> Resources {
    let elbv2 = elbv2(moto);
    let mut arns = Vec::new();
    let mut marker = None;
    for _page in 0..MAX_PAGES {
        let page = elbv2
            .describe_load_balancers()
            .set_marker(marker)
            .send()
            .await
            .expect("load balancers described");
        arns.extend(
            page.load_balancers()
                .iter()
                .filter_map(|lb| lb.load_balancer_arn().map(str::to_owned)),
        );
        marker = page
            .next_marker()
            .filter(|m| !m.is_empty())
            .map(str::to_owned);
        if marker.is_none() {
            break;
        }
    }
    let mut listeners = 0;
    for arn in &arns {
        let page = elbv2
            .describe_listeners()
            .load_balancer_arn(arn)
            .send()
            .await
            .expect("listeners described");
        listeners += page.listeners().len();
    }
    let mut target_groups = 0;
    let mut marker = None;
    for _page in 0..MAX_PAGES {
        let page = elbv2
            .describe_target_groups()
            .set_marker(marker)
            .send()
            .await
            .expect("target groups described");
        target_groups += page.target_groups().len();
        marker = page
            .next_marker()
            .filter(|m| !m.is_empty())
            .map(str::to_owned);
        if marker.is_none() {
            break;
        }
    }
    Resources::from([
        ("load-balancers".to_owned(), arns.len()),
        ("listeners".to_owned(), listeners),
        ("target-groups".to_owned(), target_groups),
    ])
}

/// Security groups, their rules and the routes of every route table.
///
/// The ICMP rule for path MTU discovery is one per client range and group,
/// shared by every load balancer with that range: it is counted only when
/// no load balancer's client rule in its group still needs it, which is
/// when it has leaked.
async fn ec2_resources(moto: &Moto) -> Resources {
    let ec2 = ec2(moto);
    let groups = ec2
        .describe_security_groups()
        .send()
        .await
        .expect("security groups described");
    let mut rules = 0;
    let mut stray_mtu = 0;
    for group in groups.security_groups() {
        let ranges: Vec<(&str, &str)> = group
            .ip_permissions()
            .iter()
            .flat_map(|p| {
                let v4 = p.ip_ranges().iter().map(|r| {
                    (
                        r.cidr_ip().unwrap_or_default(),
                        r.description().unwrap_or_default(),
                    )
                });
                let v6 = p.ipv6_ranges().iter().map(|r| {
                    (
                        r.cidr_ipv6().unwrap_or_default(),
                        r.description().unwrap_or_default(),
                    )
                });
                v4.chain(v6)
            })
            .collect();
        for (cidr, description) in &ranges {
            if *description != MTU_RULE {
                rules += 1;
            } else if !ranges
                .iter()
                .any(|(c, d)| c == cidr && d.starts_with(CLIENT_RULE))
            {
                stray_mtu += 1;
            }
        }
    }
    let tables = ec2
        .describe_route_tables()
        .send()
        .await
        .expect("route tables described");
    let routes = tables.route_tables().iter().map(|t| t.routes().len()).sum();
    Resources::from([
        ("security-groups".to_owned(), groups.security_groups().len()),
        ("security-group-rules".to_owned(), rules),
        ("stray-mtu-rules".to_owned(), stray_mtu),
        ("routes".to_owned(), routes),
    ])
}

/// A route table of the neighbour cluster's in the seeded VPC.
async fn neighbour_route_table(moto: &Moto, vpc: &str) {
    let tag = Tag::builder()
        .key(format!("kubernetes.io/cluster/{NEIGHBOUR}"))
        .value("owned")
        .build();
    ec2(moto)
        .create_route_table()
        .vpc_id(vpc)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::RouteTable)
                .tags(tag)
                .build(),
        )
        .send()
        .await
        .expect("the neighbour's route table created");
}

#[tokio::test]
async fn the_aws_provider_conforms_against_moto() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 0).await.expect("seeded");
    neighbour_route_table(&moto, &estate.vpc).await;
    let proxy = Proxy::start(&moto.endpoint).await.expect("proxy started");
    let global = format!("VPC = {}", estate.vpc);
    let provider = provider_at(&proxy.endpoint, CLUSTER, &global).await;
    let neighbour = provider_at(&proxy.endpoint, NEIGHBOUR, &global).await;
    let subject = Subject {
        provider,
        cluster: CLUSTER.to_owned(),
        neighbour,
        neighbour_cluster: NEIGHBOUR.to_owned(),
        emulator: Arc::new(MotoEmulator {
            moto,
            proxy,
            estate,
            started: AtomicUsize::new(0),
            node_ports: Mutex::default(),
        }),
    };
    let report = ccm_provider_conformance::run(&subject).await;
    println!("{report}");
    assert!(
        report.failures().is_empty(),
        "the AWS provider does not conform:\n{report}"
    );
    assert!(report.passed() > 0, "the suite checked nothing:\n{report}");
}
