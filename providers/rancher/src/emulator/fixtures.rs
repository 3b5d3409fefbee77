//! The test side's view of the environment: the [`Snapshot`] of what
//! exists, and [`Store::seed_upstream`], which builds what upstream's Go
//! CCM leaves behind for a Service, for tests of taking it over.

use tokio::time::Instant;

use super::state::{Balancer, Kind, Service, Store};
use super::transitions::{Life, Phase};
use super::{ExternalServiceView, LB_IMAGE, LoadBalancerView, Snapshot, StackView};
use crate::cattle::{LaunchConfig, LbConfig, PortRule, STACK_EXTERNAL_ID, STACK_NAME};
use crate::external_service_name;

impl Store {
    /// What exists at `now`: live stacks and services only.
    pub(super) fn snapshot(&self, now: Instant) -> Snapshot {
        let live = |life: &Life| life.phase().is_live();
        let stacks = self
            .stacks
            .values()
            .filter(|s| live(&s.life))
            .map(|s| StackView {
                id: s.id.clone(),
                name: s.name.clone(),
                external_id: s.external_id.clone(),
            })
            .collect();
        let mut load_balancers = Vec::new();
        let mut external_services = Vec::new();
        for service in self.services.values().filter(|s| live(&s.life)) {
            match &service.kind {
                Kind::LoadBalancer(b) => load_balancers.push(self.balancer_view(service, b, now)),
                Kind::External { ips } => external_services.push(ExternalServiceView {
                    id: service.id.clone(),
                    name: service.name.clone(),
                    state: service.life.phase().as_str().to_owned(),
                    stack_id: service.stack_id.clone(),
                    ips: ips.clone(),
                }),
            }
        }
        Snapshot {
            stacks,
            load_balancers,
            external_services,
        }
    }

    fn balancer_view(&self, service: &Service, b: &Balancer, now: Instant) -> LoadBalancerView {
        let mut linked = b.links.clone();
        linked.sort();
        LoadBalancerView {
            id: service.id.clone(),
            name: service.name.clone(),
            state: service.life.phase().as_str().to_owned(),
            stack_id: service.stack_id.clone(),
            ports: b
                .launch_config
                .as_ref()
                .map(|c| c.ports.clone())
                .unwrap_or_default(),
            port_rules: b
                .lb_config
                .as_ref()
                .map(|c| c.port_rules.clone())
                .unwrap_or_default(),
            linked,
            metadata: b.metadata.clone().unwrap_or_default(),
            public_endpoints: self
                .public_endpoints(service, now)
                .unwrap_or_default()
                .into_iter()
                .map(|e| format!("{}:{}", e.ip_address, e.port))
                .collect(),
        }
    }

    /// Builds what upstream's CCM leaves for a Service whose load balancer
    /// is `lb_name`, with `ports` (port, node port) and nodes `hostnames`;
    /// returns the load balancer's ID. See
    /// [`CattleEmulator::seed_upstream`](super::CattleEmulator::seed_upstream).
    ///
    /// # Panics
    ///
    /// When a hostname names no live host with an address, or a live
    /// service called `lb_name` is already in the stack.
    pub(super) fn seed_upstream(
        &mut self,
        lb_name: &str,
        ports: &[(i64, i64)],
        hostnames: &[&str],
        now: Instant,
    ) -> String {
        let stack_id = match self.live_stack_named(STACK_NAME) {
            Some(stack) => stack.id.clone(),
            None => self.add_stack(STACK_NAME, Some(STACK_EXTERNAL_ID.to_owned()), now),
        };
        let mut targets: Vec<String> = Vec::new();
        for hostname in hostnames {
            let id = self.seed_external(&stack_id, hostname, now);
            if !targets.contains(&id) {
                targets.push(id);
            }
        }
        assert!(
            self.live_service_named(&stack_id, lb_name).is_none(),
            "seed_upstream: a service called {lb_name} already exists"
        );
        let port_rules = targets
            .iter()
            .flat_map(|service_id| {
                ports.iter().map(|&(port, node_port)| PortRule {
                    source_port: port,
                    target_port: node_port,
                    service_id: service_id.clone(),
                    protocol: "tcp".to_owned(),
                })
            })
            .collect();
        let balancer = Balancer {
            launch_config: Some(LaunchConfig {
                ports: ports.iter().map(|(p, _)| format!("{p}:{p}/tcp")).collect(),
                image_uuid: Some(format!("docker:{LB_IMAGE}")),
            }),
            lb_config: Some(LbConfig { port_rules }),
            metadata: None,
            links: targets,
        };
        // Active for as long as the endpoint delay: its endpoints show now.
        let since = now.checked_sub(self.endpoint_delay).unwrap_or(now);
        let life = Life::settled(Phase::Active, since);
        self.add_service(lb_name, &stack_id, life, Kind::LoadBalancer(balancer))
    }

    /// The active external service upstream makes for `hostname`, reused
    /// if it exists; its ID.
    fn seed_external(&mut self, stack_id: &str, hostname: &str, now: Instant) -> String {
        let name = external_service_name(hostname);
        if let Some(existing) = self.live_service_named(stack_id, &name) {
            return existing.id.clone();
        }
        let address = self
            .hosts
            .values()
            .filter(|h| h.hostname == hostname && h.removed.is_none())
            .find_map(|h| h.ips.first().and_then(|n| self.ips.get(n)))
            .map(|ip| ip.address.clone());
        let Some(address) = address else {
            panic!("seed_upstream: no live host {hostname} with an address");
        };
        let life = Life::settled(Phase::Active, now);
        self.add_service(&name, stack_id, life, Kind::External { ips: vec![address] })
    }
}
