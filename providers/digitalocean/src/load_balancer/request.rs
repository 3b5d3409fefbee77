//! The load balancer a Service asks for: forwarding rules from its ports,
//! the health check, sticky sessions, firewall and settings from its
//! annotations.

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::ipnet::IpNet;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Service, ServicePort};

use super::annotations as ann;
use super::options::Options;
use crate::api::types::{Firewall, ForwardingRule, HealthCheck, LoadBalancerRequest};
use crate::config::LoadBalancerType;

/// kube-proxy's health endpoint, checked for `externalTrafficPolicy: Cluster`.
pub(crate) const KUBE_PROXY_HEALTH_PORT: i32 = 10256;
const KUBE_PROXY_HEALTH_PATH: &str = "/healthz";
/// The port TLS goes to when a certificate or passthrough is set and no
/// tls-ports are named.
const DEFAULT_SECURE_PORT: i32 = 443;

/// Where the load balancer goes: known to the provider, not the Service.
#[derive(Debug, Clone)]
pub(crate) struct Placement<'a> {
    pub(crate) region: &'a str,
    pub(crate) vpc_uuid: Option<&'a str>,
}

/// What cannot change after creation, resolved against the existing load
/// balancer (see `shape`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) kind: LoadBalancerType,
    pub(crate) internal: bool,
    /// `IPV4` or `DUALSTACK`.
    pub(crate) network_stack: &'static str,
}

/// Everything about the load balancer except its backends, checked.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    name: String,
    shape: Shape,
    forwarding_rules: Vec<ForwardingRule>,
    health_check: HealthCheck,
    firewall: Firewall,
    options: Options,
}

impl Plan {
    /// Checks the Service and builds the parts of the request that depend
    /// on it alone.
    ///
    /// # Errors
    /// [`CloudError::InvalidInput`] naming the field or annotation at fault.
    pub(crate) fn new(
        service: &Service,
        name: String,
        options: Options,
        shape: Shape,
        certificate_id: Option<&str>,
    ) -> Result<Self, CloudError> {
        let ports = service
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_deref())
            .unwrap_or_default();
        if ports.is_empty() {
            return Err(CloudError::invalid(
                "spec.ports",
                "a LoadBalancer Service needs at least one port",
            ));
        }
        let forwarding_rules = match shape.kind {
            LoadBalancerType::Regional => forwarding_rules(ports, &options, certificate_id)?,
            LoadBalancerType::RegionalNetwork => network_forwarding_rules(ports)?,
        };
        Ok(Self {
            name,
            shape,
            forwarding_rules,
            health_check: health_check(service, ports, &options)?,
            firewall: firewall(service, &options)?,
            options,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The full create/update body, sending traffic to `droplet_ids` and
    /// carrying `tags`. The reserved IP goes only into a create (`create`).
    pub(crate) fn request(
        &self,
        droplet_ids: Vec<u64>,
        placement: &Placement<'_>,
        tags: Vec<String>,
        create: bool,
    ) -> LoadBalancerRequest {
        let o = &self.options;
        LoadBalancerRequest {
            name: self.name.clone(),
            region: placement.region.to_owned(),
            kind: self.shape.kind.as_str().to_owned(),
            network: Some(
                if self.shape.internal {
                    "INTERNAL"
                } else {
                    "EXTERNAL"
                }
                .to_owned(),
            ),
            network_stack: Some(self.shape.network_stack.to_owned()),
            subnet_uuid: o.subnet_uuid.clone(),
            ip: o.ip.filter(|_| create).map(|ip| ip.to_string()),
            size_unit: o.size_unit,
            size: o.size_slug.clone(),
            algorithm: o.algorithm.to_owned(),
            forwarding_rules: self.forwarding_rules.clone(),
            health_check: self.health_check.clone(),
            sticky_sessions: o.sticky_sessions.clone(),
            droplet_ids,
            redirect_http_to_https: o.redirect_http_to_https,
            enable_proxy_protocol: o.enable_proxy_protocol,
            enable_backend_keepalive: o.enable_backend_keepalive,
            http_idle_timeout_seconds: o.http_idle_timeout_seconds,
            disable_lets_encrypt_dns_records: o.disable_lets_encrypt_dns_records,
            firewall: self.firewall.clone(),
            tags,
            vpc_uuid: placement.vpc_uuid.map(str::to_owned),
        }
    }
}

fn port_field(i: usize, field: &str) -> String {
    format!("spec.ports[{i}].{field}")
}

/// A network load balancer forwards each service port as it is, TCP or
/// UDP, as upstream's `buildRegionalNetworkForwardingRule`.
fn network_forwarding_rules(ports: &[ServicePort]) -> Result<Vec<ForwardingRule>, CloudError> {
    ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let protocol = match port.protocol.as_deref().unwrap_or("TCP") {
                "TCP" => "tcp",
                "UDP" => "udp",
                other => {
                    return Err(CloudError::invalid(
                        port_field(i, "protocol"),
                        format!("`{other}` is not supported; DigitalOcean load balancers forward TCP and UDP"),
                    ));
                }
            };
            Ok(ForwardingRule {
                entry_protocol: protocol.to_owned(),
                entry_port: port.port,
                target_protocol: protocol.to_owned(),
                target_port: port.port,
                certificate_id: None,
                tls_passthrough: false,
            })
        })
        .collect()
}

fn forwarding_rules(
    ports: &[ServicePort],
    o: &Options,
    certificate_id: Option<&str>,
) -> Result<Vec<ForwardingRule>, CloudError> {
    let secure = certificate_id.is_some() || o.tls_passthrough;
    let mut tls_ports = o.tls_ports.clone();
    if secure && tls_ports.is_empty() && !o.http2_ports.contains(&DEFAULT_SECURE_PORT) {
        tls_ports.push(DEFAULT_SECURE_PORT);
    }
    let mut rules = Vec::with_capacity(ports.len());
    for (i, port) in ports.iter().enumerate() {
        let mut protocol = o.protocol;
        if o.http_ports.contains(&port.port) {
            protocol = "http";
        }
        if tls_ports.contains(&port.port) {
            protocol = "https";
        }
        if o.http2_ports.contains(&port.port) {
            protocol = "http2";
        }
        match port.protocol.as_deref().unwrap_or("TCP") {
            "TCP" => {}
            "UDP" => protocol = "udp",
            other => {
                return Err(CloudError::invalid(
                    port_field(i, "protocol"),
                    format!(
                        "`{other}` is not supported; DigitalOcean load balancers forward TCP and UDP"
                    ),
                ));
            }
        }
        let node_port = port.node_port.filter(|p| *p > 0).ok_or_else(|| {
            CloudError::invalid(
                port_field(i, "nodePort"),
                "the load balancer forwards to node ports; leave spec.allocateLoadBalancerNodePorts at true",
            )
        })?;
        let mut rule = ForwardingRule {
            entry_protocol: protocol.to_owned(),
            entry_port: port.port,
            target_protocol: protocol.to_owned(),
            target_port: node_port,
            certificate_id: None,
            tls_passthrough: false,
        };
        if matches!(protocol, "https" | "http2") {
            match (certificate_id, o.tls_passthrough) {
                (Some(cert), _) => {
                    rule.certificate_id = Some(cert.to_owned());
                    rule.target_protocol = "http".to_owned();
                }
                (None, true) => rule.tls_passthrough = true,
                (None, false) => {
                    return Err(CloudError::invalid(
                        ann::CERTIFICATE_ID,
                        format!(
                            "port {} uses {protocol}: set {} or {}",
                            port.port,
                            ann::CERTIFICATE_ID,
                            ann::TLS_PASSTHROUGH
                        ),
                    ));
                }
            }
        }
        rules.push(rule);
    }
    if let Some(wanted) = o.http3_port {
        rules.push(http3_rule(ports, wanted, certificate_id)?);
    }
    Ok(rules)
}

/// The extra HTTP/3 rule on `wanted`, as upstream's
/// `buildHTTP3ForwardingRule`, except that a port the Service lacks is
/// refused rather than skipped.
fn http3_rule(
    ports: &[ServicePort],
    wanted: i32,
    certificate_id: Option<&str>,
) -> Result<ForwardingRule, CloudError> {
    let port = ports
        .iter()
        .find(|p| p.port == wanted && p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .ok_or_else(|| {
            CloudError::invalid(
                ann::HTTP3_PORT,
                format!("port {wanted} is not a TCP port of this Service"),
            )
        })?;
    let cert = certificate_id.ok_or_else(|| {
        CloudError::invalid(
            ann::HTTP3_PORT,
            format!(
                "HTTP/3 needs {} or {}",
                ann::CERTIFICATE_ID,
                ann::CERTIFICATE_NAME
            ),
        )
    })?;
    Ok(ForwardingRule {
        entry_protocol: "http3".to_owned(),
        entry_port: wanted,
        target_protocol: "http".to_owned(),
        target_port: port.node_port.unwrap_or_default(),
        certificate_id: Some(cert.to_owned()),
        tls_passthrough: false,
    })
}

fn health_check(
    service: &Service,
    ports: &[ServicePort],
    o: &Options,
) -> Result<HealthCheck, CloudError> {
    let h = &o.health;
    let (protocol, port, path) = if h.overridden {
        let port = match h.port {
            Some(wanted) => {
                let found = ports.iter().find(|p| p.port == wanted).ok_or_else(|| {
                    CloudError::invalid(
                        ann::HEALTHCHECK_PORT,
                        format!("port {wanted} is not a port of this Service"),
                    )
                })?;
                if found.protocol.as_deref() == Some("UDP") {
                    return Err(CloudError::invalid(
                        ann::HEALTHCHECK_PORT,
                        format!("port {wanted} is UDP; health checks need a TCP port"),
                    ));
                }
                found.node_port
            }
            None => {
                ports
                    .iter()
                    .find(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
                    .ok_or_else(|| {
                        CloudError::invalid("spec.ports", "health checks need a TCP port")
                    })?
                    .node_port
            }
        }
        .unwrap_or_default();
        let protocol = h
            .protocol
            .unwrap_or(if h.path.is_some() { "http" } else { "tcp" });
        (protocol, port, h.path.clone())
    } else {
        // Local traffic policy: only nodes with a ready endpoint pass the
        // node's own health check; otherwise any node with kube-proxy does.
        let spec = service.spec.as_ref();
        let local = spec.and_then(|s| s.external_traffic_policy.as_deref()) == Some("Local");
        let port = match spec.and_then(|s| s.health_check_node_port) {
            Some(p) if local && p > 0 => p,
            _ => KUBE_PROXY_HEALTH_PORT,
        };
        ("http", port, Some(KUBE_PROXY_HEALTH_PATH.to_owned()))
    };
    Ok(HealthCheck {
        // kube-proxy's and the node's health endpoints speak no PROXY
        // protocol; with the override, the load balancer's setting applies.
        proxy_protocol: (!h.overridden).then_some(false),
        protocol: protocol.to_owned(),
        port,
        // tcp checks have no path.
        path: path.filter(|_| protocol != "tcp"),
        check_interval_seconds: h.check_interval_seconds,
        response_timeout_seconds: h.response_timeout_seconds,
        unhealthy_threshold: h.unhealthy_threshold,
        healthy_threshold: h.healthy_threshold,
    })
}

/// `spec.loadBalancerSourceRanges` wins over the allow-rules annotation.
fn firewall(service: &Service, o: &Options) -> Result<Firewall, CloudError> {
    let ranges = service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_source_ranges.as_deref())
        .unwrap_or_default();
    let mut allow = Vec::with_capacity(ranges.len());
    for range in ranges {
        let net: IpNet = range.trim().parse().map_err(|_| {
            CloudError::invalid(
                "spec.loadBalancerSourceRanges",
                format!("`{range}` is not a CIDR such as 10.0.0.0/24"),
            )
        })?;
        allow.push(format!("cidr:{}", net.trunc()));
    }
    if allow.is_empty() {
        allow = o.allow_rules.clone();
    }
    Ok(Firewall {
        allow,
        deny: o.deny_rules.clone(),
    })
}
