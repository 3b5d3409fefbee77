//! What the emulated Cattle environment holds: hosts and their addresses,
//! stacks, and services (load balancers and external services, which share
//! one ID counter as Cattle's `service` table does), with their IDs.
//!
//! Objects are kept by the number in their ID (`1s7` is service 7), so
//! lists come out in creation order, which is Cattle's default sort.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::transitions::{Life, Phase};
use crate::cattle::{LaunchConfig, LbConfig};

/// A host's ID prefix: `1h3`.
pub(super) const HOST_PREFIX: &str = "1h";
/// An IP address's ID prefix: `1i3`.
pub(super) const IP_PREFIX: &str = "1i";
/// A stack's ID prefix: `1st3`.
pub(super) const STACK_PREFIX: &str = "1st";
/// A service's ID prefix: `1s3`.
pub(super) const SERVICE_PREFIX: &str = "1s";

/// The number in `id` if it is `prefix` followed by a positive decimal
/// number written the way this emulator writes it.
pub(super) fn parse_id(prefix: &str, id: &str) -> Option<u64> {
    let digits = id.strip_prefix(prefix)?;
    let n: u64 = digits.parse().ok()?;
    (n > 0 && format!("{n}") == digits).then_some(n)
}

/// A machine with a Rancher agent.
#[derive(Debug, Clone)]
pub(super) struct Host {
    pub(super) id: String,
    pub(super) uuid: String,
    pub(super) hostname: String,
    /// `active`, `inactive` or `removed`: hosts change only at the test's
    /// hand, so they have no transitions.
    pub(super) state: &'static str,
    pub(super) agent_state: &'static str,
    pub(super) removed: Option<String>,
    /// Its addresses' numbers, in order.
    pub(super) ips: Vec<u64>,
}

impl Host {
    /// Whether load balancer containers can run on it.
    fn can_run_containers(&self) -> bool {
        self.state == "active" && self.agent_state == "active" && self.removed.is_none()
    }
}

/// One address of a host.
#[derive(Debug, Clone)]
pub(super) struct Ip {
    pub(super) id: String,
    pub(super) address: String,
}

/// A stack.
#[derive(Debug, Clone)]
pub(super) struct Stack {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) external_id: Option<String>,
    pub(super) life: Life,
}

/// A service: a load balancer or an external service.
#[derive(Debug, Clone)]
pub(super) struct Service {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) stack_id: String,
    pub(super) life: Life,
    pub(super) kind: Kind,
}

impl Service {
    /// The balancer behind it, if it is a load balancer.
    pub(super) fn balancer(&self) -> Option<&Balancer> {
        match &self.kind {
            Kind::LoadBalancer(b) => Some(b),
            Kind::External { .. } => None,
        }
    }

    /// Its schema type.
    pub(super) fn type_name(&self) -> &'static str {
        match self.kind {
            Kind::LoadBalancer(_) => "loadBalancerService",
            Kind::External { .. } => "externalService",
        }
    }

    /// Its collection's path segment.
    pub(super) fn collection(&self) -> &'static str {
        match self.kind {
            Kind::LoadBalancer(_) => "loadbalancerservices",
            Kind::External { .. } => "externalservices",
        }
    }
}

/// What kind of service it is, with the fields only that kind has.
#[derive(Debug, Clone)]
pub(super) enum Kind {
    /// A load balancer.
    LoadBalancer(Balancer),
    /// An external service: addresses outside Rancher.
    External { ips: Vec<String> },
}

/// A load balancer's own fields.
#[derive(Debug, Clone, Default)]
pub(super) struct Balancer {
    pub(super) launch_config: Option<LaunchConfig>,
    pub(super) lb_config: Option<LbConfig>,
    pub(super) metadata: Option<BTreeMap<String, Value>>,
    /// The services it links to (`setservicelinks`), in the order given.
    pub(super) links: Vec<String>,
}

/// The whole environment, and the delays its transitions take.
#[derive(Debug)]
pub(super) struct Store {
    /// The project's base URL, which every link starts with.
    pub(super) base: String,
    pub(super) transition_delay: Duration,
    pub(super) endpoint_delay: Duration,
    /// Whether `include=ipAddresses` inlines hosts' addresses (a server
    /// that ignores it is answered through the `ipAddresses` link).
    pub(super) honours_include: bool,
    pub(super) hosts: BTreeMap<u64, Host>,
    pub(super) ips: BTreeMap<u64, Ip>,
    pub(super) stacks: BTreeMap<u64, Stack>,
    pub(super) services: BTreeMap<u64, Service>,
    next_host: u64,
    next_ip: u64,
    next_stack: u64,
    next_service: u64,
}

impl Store {
    /// An empty environment served at `base`.
    pub(super) fn new(base: String, default_delay: Duration) -> Self {
        Self {
            base,
            transition_delay: default_delay,
            endpoint_delay: default_delay,
            honours_include: true,
            hosts: BTreeMap::new(),
            ips: BTreeMap::new(),
            stacks: BTreeMap::new(),
            services: BTreeMap::new(),
            next_host: 0,
            next_ip: 0,
            next_stack: 0,
            next_service: 0,
        }
    }

    /// Settles every transition due at `now`.
    pub(super) fn settle(&mut self, now: Instant) {
        for stack in self.stacks.values_mut() {
            stack.life.settle(now);
        }
        for service in self.services.values_mut() {
            service.life.settle(now);
        }
    }

    /// Adds an active host with one address; returns its number.
    pub(super) fn add_host(&mut self, hostname: &str, address: &str) -> u64 {
        self.next_ip += 1;
        let ip = self.next_ip;
        self.ips.insert(
            ip,
            Ip {
                id: format!("{IP_PREFIX}{ip}"),
                address: address.to_owned(),
            },
        );
        self.next_host += 1;
        let n = self.next_host;
        let uuid = format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{n:012x}",
            fastrand::u32(..),
            fastrand::u16(..),
            fastrand::u16(..0x1000),
            fastrand::u16(..0x1000),
        );
        self.hosts.insert(
            n,
            Host {
                id: format!("{HOST_PREFIX}{n}"),
                uuid,
                hostname: hostname.to_owned(),
                state: "active",
                agent_state: "active",
                removed: None,
                ips: vec![ip],
            },
        );
        n
    }

    /// The host whose UUID is `uuid`.
    pub(super) fn host_by_uuid(&mut self, uuid: &str) -> Option<&mut Host> {
        self.hosts.values_mut().find(|h| h.uuid == uuid)
    }

    /// Adds a stack, active at once; returns its ID.
    pub(super) fn add_stack(
        &mut self,
        name: &str,
        external_id: Option<String>,
        now: Instant,
    ) -> String {
        self.next_stack += 1;
        let n = self.next_stack;
        let id = format!("{STACK_PREFIX}{n}");
        self.stacks.insert(
            n,
            Stack {
                id: id.clone(),
                name: name.to_owned(),
                external_id,
                life: Life::settled(Phase::Active, now),
            },
        );
        id
    }

    /// The stack `id`, if it exists (removed or not).
    pub(super) fn stack(&self, id: &str) -> Option<&Stack> {
        self.stacks.get(&parse_id(STACK_PREFIX, id)?)
    }

    /// The live stack called `name`, if any.
    pub(super) fn live_stack_named(&self, name: &str) -> Option<&Stack> {
        self.stacks
            .values()
            .find(|s| s.name == name && s.life.phase().is_live())
    }

    /// Adds a service; returns its ID.
    pub(super) fn add_service(
        &mut self,
        name: &str,
        stack_id: &str,
        life: Life,
        kind: Kind,
    ) -> String {
        self.next_service += 1;
        let n = self.next_service;
        let id = format!("{SERVICE_PREFIX}{n}");
        self.services.insert(
            n,
            Service {
                id: id.clone(),
                name: name.to_owned(),
                stack_id: stack_id.to_owned(),
                life,
                kind,
            },
        );
        id
    }

    /// The service `id`, if it exists (removed or not).
    pub(super) fn service(&self, id: &str) -> Option<&Service> {
        self.services.get(&parse_id(SERVICE_PREFIX, id)?)
    }

    /// The service `id`, to change.
    pub(super) fn service_mut(&mut self, id: &str) -> Option<&mut Service> {
        self.services.get_mut(&parse_id(SERVICE_PREFIX, id)?)
    }

    /// The live service called `name` in stack `stack_id`, if any.
    pub(super) fn live_service_named(&self, stack_id: &str, name: &str) -> Option<&Service> {
        self.services
            .values()
            .find(|s| s.stack_id == stack_id && s.name == name && s.life.phase().is_live())
    }

    /// Starts removing service `id`: `removing` now, `removed` after the
    /// delay. Its links, and every load balancer's link to it, go at once,
    /// as Cattle drops a removed service's consume maps.
    pub(super) fn start_removing_service(&mut self, id: &str, now: Instant) {
        let delay = self.transition_delay;
        for service in self.services.values_mut() {
            if let Kind::LoadBalancer(b) = &mut service.kind {
                b.links.retain(|l| l != id);
                if service.id == id {
                    b.links.clear();
                }
            }
            if service.id == id {
                service.life.enter(Phase::Removing, now, delay);
            }
        }
    }

    /// Starts removing stack `id` and, as Cattle does, every live service
    /// in it.
    pub(super) fn start_removing_stack(&mut self, id: &str, now: Instant) {
        let delay = self.transition_delay;
        if let Some(stack) = self.stacks.values_mut().find(|s| s.id == id) {
            stack.life.enter(Phase::Removing, now, delay);
        }
        let doomed: Vec<String> = self
            .services
            .values()
            .filter(|s| s.stack_id == id && s.life.phase().is_live())
            .map(|s| s.id.clone())
            .collect();
        for service in doomed {
            self.start_removing_service(&service, now);
        }
    }

    /// The host a load balancer's containers run on: the first (by ID)
    /// active host with a connected agent and an address; its ID and
    /// address.
    pub(super) fn balancer_host(&self) -> Option<(&str, &str)> {
        self.hosts
            .values()
            .filter(|h| h.can_run_containers())
            .find_map(|h| {
                let ip = h.ips.first().and_then(|n| self.ips.get(n))?;
                Some((h.id.as_str(), ip.address.as_str()))
            })
    }

    /// Whether a service's public endpoints show at `now`: active for at
    /// least the endpoint delay.
    pub(super) fn endpoints_showing(&self, life: &Life, now: Instant) -> bool {
        life.phase() == Phase::Active
            && life
                .active_since()
                .is_some_and(|since| since + self.endpoint_delay <= now)
    }
}

/// The public port of a `launchConfig.ports` entry: `80` of `80:8080/tcp`,
/// `80:8080`, `80/tcp` or `80`.
pub(super) fn public_port(entry: &str) -> Option<i64> {
    let without_protocol = entry.split('/').next().unwrap_or(entry);
    let public = without_protocol
        .split(':')
        .next()
        .unwrap_or(without_protocol);
    public.parse().ok().filter(|p| (1..=65_535).contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_only_in_their_own_form() {
        assert_eq!(parse_id(SERVICE_PREFIX, "1s12"), Some(12));
        assert_eq!(parse_id(SERVICE_PREFIX, "1st12"), None);
        assert_eq!(parse_id(SERVICE_PREFIX, "1s012"), None);
        assert_eq!(parse_id(SERVICE_PREFIX, "1s+3"), None);
        assert_eq!(parse_id(STACK_PREFIX, "1st1"), Some(1));
        assert_eq!(parse_id(HOST_PREFIX, "1h0"), None);
    }

    #[test]
    fn public_ports_read_every_port_form() {
        assert_eq!(public_port("80:30080/tcp"), Some(80));
        assert_eq!(public_port("443:443"), Some(443));
        assert_eq!(public_port("53/udp"), Some(53));
        assert_eq!(public_port("8080"), Some(8080));
        assert_eq!(public_port("http"), None);
        assert_eq!(public_port("70000:1/tcp"), None);
    }
}
