//! The slices of DigitalOcean's API objects the provider reads and writes.
//!
//! Optional fields are left out when absent (`skip_serializing_if`): the API
//! rejects `null` for most of them.

use serde::{Deserialize, Serialize};

/// A droplet (`GET /v2/droplets`, `GET /v2/droplets/{id}`).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Droplet {
    pub(crate) id: u64,
    pub(crate) name: String,
    /// `new`, `active`, `off` or `archive`.
    pub(crate) status: String,
    pub(crate) size_slug: String,
    pub(crate) region: RegionRef,
    #[serde(default)]
    pub(crate) networks: Networks,
}

impl Droplet {
    fn address(&self, v6: bool, kind: &str) -> Option<&str> {
        let list = if v6 {
            &self.networks.v6
        } else {
            &self.networks.v4
        };
        list.iter()
            .find(|n| n.kind == kind)
            .map(|n| n.ip_address.as_str())
    }

    pub(crate) fn private_ipv4(&self) -> Option<&str> {
        self.address(false, "private")
    }

    pub(crate) fn public_ipv4(&self) -> Option<&str> {
        self.address(false, "public")
    }

    pub(crate) fn public_ipv6(&self) -> Option<&str> {
        self.address(true, "public")
    }
}

/// The region a resource lives in, as embedded in it.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RegionRef {
    #[serde(default)]
    pub(crate) slug: String,
}

/// A region (`GET /v2/regions`).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Region {
    pub(crate) slug: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Networks {
    #[serde(default)]
    pub(crate) v4: Vec<NetworkAddress>,
    #[serde(default)]
    pub(crate) v6: Vec<NetworkAddress>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct NetworkAddress {
    pub(crate) ip_address: String,
    /// `public` or `private`.
    #[serde(rename = "type")]
    pub(crate) kind: String,
}

/// One forwarding rule, as sent and as returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ForwardingRule {
    pub(crate) entry_protocol: String,
    pub(crate) entry_port: i32,
    pub(crate) target_protocol: String,
    pub(crate) target_port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) certificate_id: Option<String>,
    #[serde(default)]
    pub(crate) tls_passthrough: bool,
}

/// Health-check settings, as sent and as returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HealthCheck {
    pub(crate) protocol: String,
    pub(crate) port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
    pub(crate) check_interval_seconds: u32,
    pub(crate) response_timeout_seconds: u32,
    pub(crate) unhealthy_threshold: u32,
    pub(crate) healthy_threshold: u32,
    /// Upstream's `proxy_protocol: false` when checking kube-proxy or the
    /// node's health port, which speak no PROXY protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) proxy_protocol: Option<bool>,
}

/// Sticky-session settings, as sent and as returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StickySessions {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cookie_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cookie_ttl_seconds: Option<u32>,
}

/// Allow and deny rules (`ip:1.2.3.4`, `cidr:10.0.0.0/8`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Firewall {
    #[serde(default)]
    pub(crate) allow: Vec<String>,
    #[serde(default)]
    pub(crate) deny: Vec<String>,
}

/// The body of `POST /v2/load_balancers` and `PUT /v2/load_balancers/{id}`:
/// a full description, since the API resets whatever a PUT leaves out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LoadBalancerRequest {
    pub(crate) name: String,
    pub(crate) region: String,
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// `EXTERNAL` or `INTERNAL`; fixed at creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) network: Option<String>,
    /// `IPV4` or `DUALSTACK`; fixed at creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) network_stack: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) subnet_uuid: Option<String>,
    /// A reserved IP; sent on create only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) size_unit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) size: Option<String>,
    pub(crate) algorithm: String,
    pub(crate) forwarding_rules: Vec<ForwardingRule>,
    pub(crate) health_check: HealthCheck,
    pub(crate) sticky_sessions: StickySessions,
    pub(crate) droplet_ids: Vec<u64>,
    pub(crate) redirect_http_to_https: bool,
    pub(crate) enable_proxy_protocol: bool,
    pub(crate) enable_backend_keepalive: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) http_idle_timeout_seconds: Option<u32>,
    pub(crate) disable_lets_encrypt_dns_records: bool,
    pub(crate) firewall: Firewall,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) vpc_uuid: Option<String>,
}

/// A load balancer as the API returns it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct LoadBalancer {
    pub(crate) id: String,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) ip: String,
    #[serde(default)]
    pub(crate) ipv6: String,
    /// `new`, `active` or `errored`.
    #[serde(default)]
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) forwarding_rules: Vec<ForwardingRule>,
    pub(crate) health_check: Option<HealthCheck>,
    pub(crate) sticky_sessions: Option<StickySessions>,
    #[serde(default)]
    pub(crate) droplet_ids: Vec<u64>,
    #[serde(default)]
    pub(crate) redirect_http_to_https: bool,
    #[serde(default)]
    pub(crate) enable_proxy_protocol: bool,
    #[serde(default)]
    pub(crate) enable_backend_keepalive: bool,
    pub(crate) http_idle_timeout_seconds: Option<u32>,
    #[serde(default)]
    pub(crate) disable_lets_encrypt_dns_records: bool,
    pub(crate) size_unit: Option<u32>,
    pub(crate) size: Option<String>,
    pub(crate) firewall: Option<Firewall>,
    #[serde(default)]
    pub(crate) tags: Vec<String>,
    pub(crate) vpc_uuid: Option<String>,
    /// `REGIONAL`, `REGIONAL_NETWORK` or `GLOBAL`; absent means `REGIONAL`.
    #[serde(rename = "type", default)]
    pub(crate) kind: Option<String>,
    /// Absent means `EXTERNAL`.
    #[serde(default)]
    pub(crate) network: Option<String>,
    /// Absent means `IPV4`.
    #[serde(default)]
    pub(crate) network_stack: Option<String>,
}

/// `{"droplet_ids": [...]}`, for adding and removing backends.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DropletIds {
    pub(crate) droplet_ids: Vec<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DropletEnvelope {
    pub(crate) droplet: Droplet,
}

/// A block storage volume (`GET /v2/volumes/{id}`).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Volume {
    pub(crate) region: RegionRef,
}

#[derive(Debug, Deserialize)]
pub(crate) struct VolumeEnvelope {
    pub(crate) volume: Volume,
}

#[derive(Debug, Deserialize)]
pub(crate) struct LoadBalancerEnvelope {
    pub(crate) load_balancer: LoadBalancer,
}

/// One page of a list: the items under their collection's key, the links
/// to further pages and the total count.
#[derive(Debug, Deserialize)]
pub(crate) struct Page<T> {
    #[serde(
        alias = "droplets",
        alias = "load_balancers",
        alias = "regions",
        alias = "certificates",
        alias = "firewalls"
    )]
    pub(crate) items: Vec<T>,
    #[serde(default)]
    pub(crate) links: Links,
    #[serde(default)]
    pub(crate) meta: Option<Meta>,
}

impl<T> Page<T> {
    /// Whether page number `page` is the last, `read` items having been
    /// read so far including this page's.
    pub(crate) fn is_last(&self, page: u32, read: usize) -> bool {
        let pages = self.links.pages.as_ref();
        let no_next = pages.is_none_or(|p| p.next.is_none());
        let last_named = pages
            .and_then(|p| p.last.as_deref())
            .and_then(page_number)
            .is_some_and(|last| page >= last);
        let total_read = self
            .meta
            .as_ref()
            .and_then(|m| m.total)
            .is_some_and(|total| read >= total);
        no_next || last_named || total_read || self.items.is_empty()
    }
}

/// The `page` query parameter of a page link.
fn page_number(link: &str) -> Option<u32> {
    let query = link.split_once('?')?.1;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("page="))
        .and_then(|n| n.parse().ok())
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Links {
    #[serde(default)]
    pub(crate) pages: Option<PageLinks>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct PageLinks {
    pub(crate) next: Option<String>,
    pub(crate) last: Option<String>,
}

/// A list's `meta`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Meta {
    pub(crate) total: Option<usize>,
}

/// The API's error body, `{"id": "not_found", "message": "..."}`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(default)]
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) message: String,
}
