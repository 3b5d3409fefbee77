//! What the fake cloud holds: instances, load balancers, routes and volumes, and
//! the lookups and allocations the provider's calls make on them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ccm_cloud_provider::Route;

use crate::config::Settings;
use crate::instance::{Instance, default_provider_id};
use crate::volumes::FakeVolume;

/// One port a fake load balancer forwards.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ForwardedPort {
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// The Service port.
    pub port: i32,
    /// The NodePort traffic goes to.
    pub node_port: i32,
}

/// A fake load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeLoadBalancer {
    /// Its cloud name.
    pub name: String,
    /// The cluster that owns it.
    pub cluster_name: String,
    /// `namespace/name` of its Service.
    pub service: String,
    /// The ports it forwards.
    pub ports: Vec<ForwardedPort>,
    /// Names of the nodes it sends traffic to, sorted; shared with the other
    /// load balancers that have the same nodes.
    pub nodes: Arc<[String]>,
    /// `spec.loadBalancerSourceRanges`.
    pub source_ranges: Vec<String>,
    /// `spec.externalTrafficPolicy`.
    pub external_traffic_policy: Option<String>,
    /// `spec.healthCheckNodePort`.
    pub health_check_node_port: Option<i32>,
    /// Its ingress IP.
    pub ip: String,
    /// Its ingress hostname, when the Service asked for one.
    pub hostname: Option<String>,
}

/// A route and the cluster that owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRoute {
    /// The owning cluster.
    pub cluster_name: String,
    /// The route.
    pub route: Route,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) instances: BTreeMap<String, Instance>,
    pub(crate) by_provider_id: HashMap<String, String>,
    pub(crate) load_balancers: BTreeMap<String, FakeLoadBalancer>,
    pub(crate) routes: Vec<OwnedRoute>,
    pub(crate) volumes: BTreeMap<String, FakeVolume>,
    pub(crate) next_ip: u32,
    /// The node list given last, reused while load balancers get the same
    /// one: 1,000 load balancers over 5,000 nodes hold one list, not 1,000
    /// (the fake runs inside the CCM, whose memory the benchmark measures).
    pub(crate) last_nodes: Option<Arc<[String]>>,
    /// Target health set by a test, by node name, over what the instance's
    /// state says.
    pub(crate) target_health: BTreeMap<String, ccm_cloud_provider::TargetState>,
    /// Instance tags, by provider ID.
    pub(crate) tags: HashMap<String, BTreeMap<String, String>>,
    /// Pod-CIDR prefixes delegated to instances, by provider ID.
    pub(crate) prefixes: HashMap<String, ccm_cloud_provider::ipnet::IpNet>,
    /// Serverless nodes' provider IDs, and why they are neither tagged nor
    /// given a prefix.
    pub(crate) serverless: HashMap<String, String>,
}

impl State {
    /// `names`, as a list shared with the previous load balancer's when equal.
    pub(crate) fn shared_node_list(&mut self, names: Vec<String>) -> Arc<[String]> {
        match &self.last_nodes {
            Some(last) if **last == *names => last.clone(),
            _ => {
                let list: Arc<[String]> = names.into();
                self.last_nodes = Some(list.clone());
                list
            }
        }
    }

    pub(crate) fn insert_instance(&mut self, instance: Instance) {
        if let Some(old) = self.instances.get(&instance.name) {
            self.by_provider_id.remove(&old.provider_id);
        }
        self.by_provider_id
            .insert(instance.provider_id.clone(), instance.name.clone());
        self.instances.insert(instance.name.clone(), instance);
    }

    pub(crate) fn remove_instance(&mut self, name: &str) -> Option<Instance> {
        let instance = self.instances.remove(name)?;
        self.by_provider_id.remove(&instance.provider_id);
        Some(instance)
    }

    /// The instance for a node: by provider ID when the node has one,
    /// otherwise by name; synthesized when `auto` allows it.
    pub(crate) fn lookup(
        &mut self,
        node_name: &str,
        provider_id: Option<&str>,
        auto: Option<&Settings>,
    ) -> Option<&Instance> {
        let name = match provider_id {
            Some(id) => self.by_provider_id.get(id).cloned(),
            None => self
                .instances
                .contains_key(node_name)
                .then(|| node_name.to_owned()),
        };
        let name = match (name, auto) {
            (Some(name), _) => name,
            (None, Some(settings))
                if provider_id.is_none_or(|id| id == default_provider_id(node_name)) =>
            {
                self.insert_instance(settings.synthesized_instance(node_name));
                node_name.to_owned()
            }
            (None, _) => return None,
        };
        self.instances.get(&name)
    }

    pub(crate) fn allocate_ip(&mut self) -> String {
        self.next_ip += 1;
        // 100.64.0.0/10 (shared address space) holds four million addresses.
        let n = self.next_ip;
        format!(
            "100.{}.{}.{}",
            64 + ((n >> 16) & 0x3f),
            (n >> 8) & 0xff,
            n & 0xff
        )
    }
}
