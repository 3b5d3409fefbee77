//! How the emulator's objects look on the wire: the `cattle` types, with
//! the envelope a Cattle server adds (`type`, absolute `links`, the
//! `actions` valid in the current state, `state` and `transitioning`).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::state::{Host, Ip, Kind, Service, Stack, Store};
use super::transitions::{Action, Life};
use super::{LB_IMAGE, PROJECT};
use crate::cattle::{
    self, ExternalService, Lifecycle, LoadBalancerService, PublicEndpoint, Resource,
};

/// The one setting's ID, which is also its name.
pub(super) const LB_IMAGE_SETTING_ID: &str = cattle::LB_IMAGE_SETTING;

/// `value` as JSON. The `cattle` types are plain data, so this cannot fail;
/// were it to, the object would show as `null` rather than take the server
/// down.
fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

fn links(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(name, url)| ((*name).to_owned(), url.clone()))
        .collect()
}

fn lifecycle(life: &Life) -> Lifecycle {
    Lifecycle {
        state: life.phase().as_str().to_owned(),
        transitioning: Some(if life.transitioning() { "yes" } else { "no" }.to_owned()),
        transitioning_message: life
            .transitioning()
            .then(|| format!("In Progress: {}", life.phase().as_str())),
        removed: life.removed().map(str::to_owned),
    }
}

impl Store {
    /// The URL of `path` under the project, such as `/hosts/1h1`.
    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A service's own URL, under its own type's collection.
    pub(super) fn service_url(&self, service: &Service) -> String {
        self.url(&format!("/{}/{}", service.collection(), service.id))
    }

    /// The project itself: where a client finds the collections.
    pub(super) fn project_json(&self) -> Value {
        let collections = [
            ("hosts", "hosts"),
            ("ipAddresses", "ipaddresses"),
            ("settings", "settings"),
            ("stacks", "stacks"),
            ("services", "services"),
            ("loadBalancerServices", "loadbalancerservices"),
            ("externalServices", "externalservices"),
        ];
        let mut links: BTreeMap<String, String> = collections
            .iter()
            .map(|(name, path)| ((*name).to_owned(), self.url(&format!("/{path}"))))
            .collect();
        links.insert("self".to_owned(), self.base.clone());
        json!({
            "id": PROJECT, "type": "project", "name": "Default", "state": "active",
            "transitioning": "no", "links": links, "actions": {},
        })
    }

    /// A host, with its addresses inline when `with_ips` (`include`).
    pub(super) fn host_json(&self, host: &Host, with_ips: bool) -> Value {
        let url = self.url(&format!("/hosts/{}", host.id));
        let ip_addresses = with_ips.then(|| {
            host.ips
                .iter()
                .filter_map(|n| self.ips.get(n))
                .map(|ip| self.ip_address(ip))
                .collect()
        });
        to_json(&cattle::Host {
            resource: Resource {
                id: host.id.clone(),
                type_: "host".to_owned(),
                links: links(&[("ipAddresses", format!("{url}/ipaddresses")), ("self", url)]),
                actions: BTreeMap::new(),
            },
            lifecycle: Lifecycle {
                state: host.state.to_owned(),
                transitioning: Some("no".to_owned()),
                transitioning_message: None,
                removed: host.removed.clone(),
            },
            hostname: host.hostname.clone(),
            uuid: host.uuid.clone(),
            agent_state: Some(host.agent_state.to_owned()),
            ip_addresses,
        })
    }

    fn ip_address(&self, ip: &Ip) -> cattle::IpAddress {
        cattle::IpAddress {
            resource: Resource {
                id: ip.id.clone(),
                type_: "ipAddress".to_owned(),
                links: links(&[("self", self.url(&format!("/ipaddresses/{}", ip.id)))]),
                actions: BTreeMap::new(),
            },
            address: ip.address.clone(),
        }
    }

    /// An IP address.
    pub(super) fn ip_json(&self, ip: &Ip) -> Value {
        to_json(&self.ip_address(ip))
    }

    /// A stack. It offers no actions: the emulator serves none for stacks.
    pub(super) fn stack_json(&self, stack: &Stack) -> Value {
        to_json(&cattle::Stack {
            resource: Resource {
                id: stack.id.clone(),
                type_: "stack".to_owned(),
                links: links(&[("self", self.url(&format!("/stacks/{}", stack.id)))]),
                actions: BTreeMap::new(),
            },
            lifecycle: lifecycle(&stack.life),
            name: stack.name.clone(),
            external_id: stack.external_id.clone(),
        })
    }

    /// A service as its own type (`loadBalancerService` or
    /// `externalService`), as it is at `now`.
    pub(super) fn service_json(&self, service: &Service, now: Instant) -> Value {
        let url = self.service_url(service);
        let load_balancer = service.balancer().is_some();
        let actions = Action::offered(service.life.phase(), load_balancer)
            .into_iter()
            .map(|a| {
                (
                    a.as_str().to_owned(),
                    format!("{url}?action={}", a.as_str()),
                )
            })
            .collect();
        let related = if load_balancer {
            "consumedservices"
        } else {
            "consumedbyservices"
        };
        let resource = Resource {
            id: service.id.clone(),
            type_: service.type_name().to_owned(),
            links: links(&[(related, format!("{url}/{related}")), ("self", url)]),
            actions,
        };
        match &service.kind {
            Kind::LoadBalancer(b) => to_json(&LoadBalancerService {
                resource,
                lifecycle: lifecycle(&service.life),
                name: service.name.clone(),
                stack_id: service.stack_id.clone(),
                launch_config: b.launch_config.clone(),
                lb_config: b.lb_config.clone(),
                metadata: b.metadata.clone(),
                public_endpoints: self.public_endpoints(service, now),
            }),
            Kind::External { ips } => to_json(&ExternalService {
                resource,
                lifecycle: lifecycle(&service.life),
                name: service.name.clone(),
                stack_id: service.stack_id.clone(),
                external_ip_addresses: ips.clone(),
            }),
        }
    }

    /// Where a load balancer is reachable at `now`: one endpoint per
    /// `launchConfig.ports` entry on the host its container runs on, once
    /// it has been active for the endpoint delay; `None` before then, or
    /// when no host can run it.
    pub(super) fn public_endpoints(
        &self,
        service: &Service,
        now: Instant,
    ) -> Option<Vec<PublicEndpoint>> {
        let balancer = service.balancer()?;
        if !self.endpoints_showing(&service.life, now) {
            return None;
        }
        let (host_id, address) = self.balancer_host()?;
        let ports = balancer
            .launch_config
            .as_ref()
            .map(|c| c.ports.as_slice())
            .unwrap_or_default();
        let endpoints: Vec<PublicEndpoint> = ports
            .iter()
            .filter_map(|entry| super::state::public_port(entry))
            .map(|port| PublicEndpoint {
                ip_address: address.to_owned(),
                port,
                host_id: Some(host_id.to_owned()),
            })
            .collect();
        (!endpoints.is_empty()).then_some(endpoints)
    }

    /// The `lb.instance.image` setting.
    pub(super) fn setting_json(&self) -> Value {
        to_json(&cattle::Setting {
            resource: Resource {
                id: LB_IMAGE_SETTING_ID.to_owned(),
                type_: "setting".to_owned(),
                links: links(&[(
                    "self",
                    self.url(&format!("/settings/{LB_IMAGE_SETTING_ID}")),
                )]),
                actions: BTreeMap::new(),
            },
            name: cattle::LB_IMAGE_SETTING.to_owned(),
            value: LB_IMAGE.to_owned(),
        })
    }
}
