//! The Kubernetes side of a suite: nodes with pod CIDRs coming and going,
//! LoadBalancer Services created, changed, turned into ClusterIP Services
//! and deleted, as an operator's cluster sees them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use ccm_test_support::ready_condition;

/// The namespace the suites' Services live in.
pub(crate) const NAMESPACE: &str = "default";

/// The objects a suite made, for its driver to pick from.
#[derive(Debug)]
pub(crate) struct World {
    nodes: Api<Node>,
    services: Api<Service>,
    pub(crate) node_ids: BTreeSet<u32>,
    /// The third octet of each node's pod CIDR: allocated from a free pool
    /// inside the cluster CIDR (a /16 holds 256 of them, node numbers grow
    /// past that), and reused once a node is gone, as a node IPAM does.
    pod_subnets: BTreeMap<u32, u8>,
    /// LoadBalancer Services by number.
    pub(crate) load_balancers: BTreeSet<u32>,
    /// Services turned into ClusterIP.
    pub(crate) cluster_ips: BTreeSet<u32>,
    next_port: i32,
}

pub(crate) fn node_name(id: u32) -> String {
    format!("node-{id}")
}

pub(crate) fn service_name(id: u32) -> String {
    format!("svc-{id}")
}

fn node(id: u32, subnet: u8) -> Node {
    let name = node_name(id);
    let cidr = format!("10.244.{subnet}.0/24");
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some(cidr.clone()),
            pod_cidrs: Some(vec![cidr]),
            provider_id: Some(format!("fake://{name}")),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            conditions: Some(vec![ready_condition(true)]),
            ..NodeStatus::default()
        }),
    }
}

fn load_balancer(id: u32, port: i32) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(service_name(id)),
            namespace: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            selector: Some([("app".to_owned(), service_name(id))].into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port,
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The lowest third octet no node in `held` has (0 is left out, as the
/// first /24 of a cluster CIDR often is).
fn free_subnet(held: &BTreeMap<u32, u8>) -> anyhow::Result<u8> {
    let taken: BTreeSet<u8> = held.values().copied().collect();
    (1..=u8::MAX)
        .find(|s| !taken.contains(s))
        .ok_or_else(|| anyhow::anyhow!("every /24 of {} is taken", crate::env::CLUSTER_CIDR))
}

impl World {
    pub(crate) fn new(client: &kube::Client) -> Self {
        Self {
            nodes: Api::all(client.clone()),
            services: Api::namespaced(client.clone(), NAMESPACE),
            node_ids: BTreeSet::new(),
            pod_subnets: BTreeMap::new(),
            load_balancers: BTreeSet::new(),
            cluster_ips: BTreeSet::new(),
            next_port: 80,
        }
    }

    pub(crate) async fn add_node(&mut self, id: u32) -> anyhow::Result<()> {
        let subnet = free_subnet(&self.pod_subnets)?;
        self.nodes
            .create(&PostParams::default(), &node(id, subnet))
            .await?;
        self.node_ids.insert(id);
        self.pod_subnets.insert(id, subnet);
        Ok(())
    }

    pub(crate) async fn delete_node(&mut self, id: u32) -> anyhow::Result<()> {
        self.nodes
            .delete(&node_name(id), &DeleteParams::default())
            .await?;
        self.node_ids.remove(&id);
        self.pod_subnets.remove(&id);
        Ok(())
    }

    pub(crate) async fn create_service(&mut self, id: u32) -> anyhow::Result<()> {
        self.services
            .create(&PostParams::default(), &load_balancer(id, 80))
            .await?;
        self.load_balancers.insert(id);
        Ok(())
    }

    /// Changes the Service's port: the load balancer must follow.
    pub(crate) async fn change_port(&mut self, id: u32) -> anyhow::Result<()> {
        self.next_port = if self.next_port >= 9000 {
            81
        } else {
            self.next_port + 1
        };
        let patch = json!({ "spec": { "ports": [{ "name": "http", "port": self.next_port, "protocol": "TCP" }] } });
        self.services
            .patch(
                &service_name(id),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await?;
        Ok(())
    }

    /// Turns a LoadBalancer Service into a ClusterIP one (its load balancer
    /// must go) or back.
    pub(crate) async fn set_load_balancer(&mut self, id: u32, on: bool) -> anyhow::Result<()> {
        let patch = if on {
            json!({ "spec": { "type": "LoadBalancer" } })
        } else {
            json!({ "spec": { "type": "ClusterIP", "ports": [{ "name": "http", "port": 80, "protocol": "TCP", "nodePort": null }] } })
        };
        self.services
            .patch(
                &service_name(id),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await?;
        if on {
            self.cluster_ips.remove(&id);
            self.load_balancers.insert(id);
        } else {
            self.load_balancers.remove(&id);
            self.cluster_ips.insert(id);
        }
        Ok(())
    }

    pub(crate) async fn delete_service(&mut self, id: u32) -> anyhow::Result<()> {
        self.services
            .delete(&service_name(id), &DeleteParams::default())
            .await?;
        self.load_balancers.remove(&id);
        self.cluster_ips.remove(&id);
        Ok(())
    }

    /// One random change, keeping between 3 and 8 nodes and at most 12
    /// Services: what the failover and fault suites run continuously.
    pub(crate) async fn churn(
        &mut self,
        rng: &mut fastrand::Rng,
        next_id: &mut u32,
    ) -> anyhow::Result<()> {
        let pick = |set: &BTreeSet<u32>, rng: &mut fastrand::Rng| {
            let items: Vec<u32> = set.iter().copied().collect();
            (!items.is_empty()).then(|| items[rng.usize(..items.len())])
        };
        match rng.u8(0..6) {
            0 if self.node_ids.len() < 8 => {
                *next_id += 1;
                self.add_node(*next_id).await
            }
            1 if self.node_ids.len() > 3 => match pick(&self.node_ids, rng) {
                Some(id) => self.delete_node(id).await,
                None => Ok(()),
            },
            2 if self.load_balancers.len() + self.cluster_ips.len() < 12 => {
                *next_id += 1;
                self.create_service(*next_id).await
            }
            3 => match pick(&self.load_balancers, rng) {
                Some(id) => self.change_port(id).await,
                None => Ok(()),
            },
            4 => match pick(&self.load_balancers, rng) {
                Some(id) if rng.bool() => self.set_load_balancer(id, false).await,
                Some(id) => self.delete_service(id).await,
                None => Ok(()),
            },
            _ => match pick(&self.cluster_ips, rng) {
                Some(id) => self.set_load_balancer(id, true).await,
                None => Ok(()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_subnets_stay_inside_the_cluster_cidr_however_high_node_numbers_go() {
        let mut held = BTreeMap::new();
        for id in 300..303 {
            let subnet = free_subnet(&held).unwrap();
            held.insert(id, subnet);
        }
        assert_eq!(held.values().copied().collect::<Vec<_>>(), [1, 2, 3]);
        held.remove(&301);
        assert_eq!(
            free_subnet(&held).unwrap(),
            2,
            "a departed node's /24 is reused"
        );
        let full: BTreeMap<u32, u8> = (1..=u8::MAX).map(|s| (u32::from(s), s)).collect();
        assert!(free_subnet(&full).is_err());
    }
}
