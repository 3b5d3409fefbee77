//! What a Service asks of its Network Load Balancer, read and validated in
//! full before anything in AWS is touched.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use aws_sdk_elasticloadbalancingv2::types::{IpAddressType, ProtocolEnum};
use ccm_cloud_provider::ipnet::IpNet;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Service, ServiceSpec};
use ccm_cloud_provider::{CloudError, default_load_balancer_name};

mod common;

pub(crate) use common::{
    CLASSIC_ONLY, Kind, additional_tags, checked_spec, internal, kind, kind_of, owned_list,
    proxy_protocol, refuse_present,
};

use super::annotations::{self as key, Annotations, invalid};
use super::security_groups::asked::AskedGroups;
use crate::config::SharedHealthProbe;

/// Where health checks go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HealthCheckPort {
    /// The target's own port (the node port).
    TrafficPort,
    /// A fixed port, such as the `healthCheckNodePort`.
    Port(i32),
}

impl HealthCheckPort {
    /// The value ELBv2 takes: `traffic-port` or the number.
    pub(crate) fn as_aws(&self) -> String {
        match self {
            Self::TrafficPort => "traffic-port".to_owned(),
            Self::Port(p) => p.to_string(),
        }
    }
}

/// The target groups' health check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthCheck {
    pub(crate) protocol: ProtocolEnum,
    pub(crate) port: HealthCheckPort,
    /// Only for HTTP and HTTPS.
    pub(crate) path: Option<String>,
    pub(crate) interval: i32,
    /// AWS's default when unset.
    pub(crate) timeout: Option<i32>,
    pub(crate) healthy_threshold: i32,
    pub(crate) unhealthy_threshold: i32,
}

/// One Service port: a listener and its target group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PortMapping {
    pub(crate) port: i32,
    pub(crate) name: Option<String>,
    /// `TCP`, `UDP` or `TLS`.
    pub(crate) listener_protocol: ProtocolEnum,
    pub(crate) node_port: i32,
    /// `TCP` or `UDP`, or `TLS` for a TLS listener with `backend-protocol:
    /// ssl`.
    pub(crate) target_protocol: ProtocolEnum,
    pub(crate) certificate_arn: Option<String>,
    pub(crate) ssl_policy: Option<String>,
}

/// Which Service, and the name of its load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServiceRef {
    /// `namespace/name`, as the `kubernetes.io/service-name` tag says.
    pub(crate) key: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) uid: String,
    /// Upstream's name: `a` + the UID without dashes, cut to 32.
    pub(crate) load_balancer_name: String,
}

impl ServiceRef {
    /// Reads only names, never annotations: a Service with malformed
    /// annotations must still be deletable.
    pub(crate) fn of(service: &Service) -> Self {
        let namespace = service
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let name = service.metadata.name.clone().unwrap_or_default();
        Self {
            key: format!("{namespace}/{name}"),
            namespace,
            name,
            uid: service.metadata.uid.clone().unwrap_or_default(),
            load_balancer_name: default_load_balancer_name(service),
        }
    }
}

/// Everything the Service asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoadBalancerSpec {
    pub(crate) svc: ServiceRef,
    pub(crate) internal: bool,
    pub(crate) subnets: Option<Vec<String>>,
    pub(crate) eip_allocations: Option<Vec<String>>,
    pub(crate) private_ipv4_addresses: Option<Vec<Ipv4Addr>>,
    pub(crate) ip_address_type: IpAddressType,
    pub(crate) cross_zone: bool,
    pub(crate) proxy_protocol: bool,
    /// `aws-load-balancer-target-group-attributes`, checked.
    pub(crate) target_group_attributes: BTreeMap<String, String>,
    /// `aws-load-balancer-security-groups` and `-extra-security-groups`.
    pub(crate) security_groups: AskedGroups,
    pub(crate) additional_tags: BTreeMap<String, String>,
    pub(crate) target_node_labels: BTreeMap<String, String>,
    /// Client CIDRs; empty when the Service names none.
    pub(crate) source_ranges: Vec<IpNet>,
    pub(crate) health_check: HealthCheck,
    pub(crate) ports: Vec<PortMapping>,
}

/// Whether another controller owns the Service (`external` or `nlb-ip`).
pub(crate) fn is_external(service: &Service) -> bool {
    let empty = BTreeMap::new();
    let a = Annotations(service.metadata.annotations.as_ref().unwrap_or(&empty));
    matches!(a.get(key::TYPE), Some("external" | "nlb-ip"))
}

impl LoadBalancerSpec {
    /// Reads and validates `service`.
    ///
    /// # Errors
    /// [`CloudError::ImplementedElsewhere`] for Services another controller
    /// owns; [`CloudError::InvalidInput`] naming the annotation or field at
    /// fault, and its expected form.
    pub(crate) fn from_service(service: &Service) -> Result<Self, CloudError> {
        Self::read(service)
    }

    /// [`LoadBalancerSpec::from_service`] under the cloud config's
    /// `ClusterServiceLoadBalancerHealthProbeMode`: in the shared mode
    /// (`probe`), a Service whose traffic policy is not `Local` is checked
    /// by HTTP at the probe's port and path on each node, whatever its
    /// health-check annotations say of protocol, port and path, as upstream
    /// (`buildNLBHealthCheckConfiguration`); its interval, timeout and
    /// thresholds stay as asked.
    ///
    /// # Errors
    /// As [`LoadBalancerSpec::from_service`].
    pub(crate) fn under(
        service: &Service,
        probe: Option<&SharedHealthProbe>,
    ) -> Result<Self, CloudError> {
        let mut spec = Self::read(service)?;
        let local = service
            .spec
            .as_ref()
            .and_then(|s| s.external_traffic_policy.as_deref())
            == Some("Local");
        if let Some(probe) = probe.filter(|_| !local) {
            spec.health_check.protocol = ProtocolEnum::Http;
            spec.health_check.port = HealthCheckPort::Port(probe.port);
            spec.health_check.path = Some(probe.path.clone());
        }
        Ok(spec)
    }

    fn read(service: &Service) -> Result<Self, CloudError> {
        let empty = BTreeMap::new();
        let a = Annotations(service.metadata.annotations.as_ref().unwrap_or(&empty));
        if kind_of(&a)? == Kind::Classic {
            return Err(invalid(
                key::TYPE,
                "the Service asks for a classic ELB, not a Network Load Balancer",
            ));
        }
        refuse_present(
            &a,
            CLASSIC_ONLY,
            "applies to classic ELBs only; this Service has a Network Load Balancer (aws-load-balancer-type: nlb)",
        )?;
        let spec = checked_spec(service)?;
        let internal = internal(&a)?;
        let eip_allocations = owned_list(&a, key::EIP_ALLOCATIONS)?;
        if let Some(eips) = &eip_allocations {
            if internal {
                return Err(invalid(
                    key::EIP_ALLOCATIONS,
                    "Elastic IPs only apply to internet-facing load balancers, and this one is internal",
                ));
            }
            if let Some(bad) = eips.iter().find(|e| !e.starts_with("eipalloc-")) {
                return Err(invalid(
                    key::EIP_ALLOCATIONS,
                    format!(
                        "expected allocation IDs such as eipalloc-0123456789abcdef0, got `{bad}`"
                    ),
                ));
            }
        }
        let private_ipv4_addresses = match a.list(key::PRIVATE_IPV4_ADDRESSES)? {
            None => None,
            Some(_) if !internal => {
                return Err(invalid(
                    key::PRIVATE_IPV4_ADDRESSES,
                    "private addresses only apply to internal load balancers; set service.beta.kubernetes.io/aws-load-balancer-internal: \"true\"",
                ));
            }
            Some(items) => Some(
                items
                    .iter()
                    .map(|ip| {
                        ip.parse::<Ipv4Addr>().map_err(|_| {
                            invalid(
                                key::PRIVATE_IPV4_ADDRESSES,
                                format!("expected IPv4 addresses, got `{ip}`"),
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let ip_address_type = match a.get(key::IP_ADDRESS_TYPE) {
            None | Some("" | "ipv4") => IpAddressType::Ipv4,
            Some("dualstack") => IpAddressType::Dualstack,
            Some(other) => {
                return Err(invalid(
                    key::IP_ADDRESS_TYPE,
                    format!("expected ipv4 or dualstack, got `{other}`"),
                ));
            }
        };
        let proxy_protocol = proxy_protocol(&a)?;
        let additional_tags = additional_tags(&a)?;
        Ok(Self {
            svc: ServiceRef::of(service),
            internal,
            subnets: owned_list(&a, key::SUBNETS)?,
            eip_allocations,
            private_ipv4_addresses,
            ip_address_type,
            cross_zone: a
                .bool(key::CROSS_ZONE_LOAD_BALANCING_ENABLED)?
                .unwrap_or(false),
            proxy_protocol,
            target_group_attributes: super::annotations::attributes::from_annotation(&a)?,
            security_groups: AskedGroups::from_annotations(&a)?,
            additional_tags,
            target_node_labels: a.key_values(key::TARGET_NODE_LABELS)?,
            source_ranges: source_ranges(spec, &a)?,
            health_check: health_check(spec, &a)?,
            ports: port_mappings(spec, &a)?,
        })
    }
}

pub(super) fn source_ranges(
    spec: &ServiceSpec,
    a: &Annotations<'_>,
) -> Result<Vec<IpNet>, CloudError> {
    let (field, raw): (&str, Vec<&str>) = match spec.load_balancer_source_ranges.as_deref() {
        Some(ranges) if !ranges.is_empty() => (
            "spec.loadBalancerSourceRanges",
            ranges.iter().map(|r| r.trim()).collect(),
        ),
        _ => (
            key::SOURCE_RANGES,
            a.list(key::SOURCE_RANGES)?.unwrap_or_default(),
        ),
    };
    raw.into_iter()
        .map(|r| {
            r.parse::<IpNet>().map(|n| n.trunc()).map_err(|_| {
                invalid(
                    field,
                    format!("expected CIDRs such as 203.0.113.0/24, got `{r}`"),
                )
            })
        })
        .collect()
}

fn health_check(spec: &ServiceSpec, a: &Annotations<'_>) -> Result<HealthCheck, CloudError> {
    let mut hc = if spec.external_traffic_policy.as_deref() == Some("Local") {
        let port = spec
            .health_check_node_port
            .filter(|p| *p > 0)
            .ok_or_else(|| {
                invalid(
                    "spec.healthCheckNodePort",
                    "externalTrafficPolicy: Local needs a health check node port",
                )
            })?;
        HealthCheck {
            protocol: ProtocolEnum::Http,
            port: HealthCheckPort::Port(port),
            path: Some("/healthz".to_owned()),
            interval: 10,
            timeout: None,
            healthy_threshold: 2,
            unhealthy_threshold: 2,
        }
    } else {
        HealthCheck {
            protocol: ProtocolEnum::Tcp,
            port: HealthCheckPort::TrafficPort,
            path: None,
            interval: 30,
            timeout: None,
            healthy_threshold: 3,
            unhealthy_threshold: 3,
        }
    };
    if let Some(p) = a.get(key::HEALTHCHECK_PROTOCOL) {
        hc.protocol = match p.to_ascii_uppercase().as_str() {
            "TCP" => ProtocolEnum::Tcp,
            "HTTP" => ProtocolEnum::Http,
            "HTTPS" => ProtocolEnum::Https,
            _ => {
                return Err(invalid(
                    key::HEALTHCHECK_PROTOCOL,
                    format!("expected TCP, HTTP or HTTPS, got `{p}`"),
                ));
            }
        };
    }
    hc.path = match hc.protocol {
        ProtocolEnum::Tcp => None,
        _ => {
            let path = a
                .get(key::HEALTHCHECK_PATH)
                .map(str::to_owned)
                .or(hc.path)
                .unwrap_or_else(|| "/".to_owned());
            if !path.starts_with('/') {
                return Err(invalid(
                    key::HEALTHCHECK_PATH,
                    format!("expected a path starting with /, got `{path}`"),
                ));
            }
            Some(path)
        }
    };
    if let Some(p) = a.get(key::HEALTHCHECK_PORT) {
        hc.port = if p == "traffic-port" {
            HealthCheckPort::TrafficPort
        } else {
            HealthCheckPort::Port(
                a.int(key::HEALTHCHECK_PORT, 1..=65535)
                    .map_err(|_| {
                        invalid(
                            key::HEALTHCHECK_PORT,
                            format!(
                                "expected traffic-port or a port number from 1 to 65535, got `{p}`"
                            ),
                        )
                    })?
                    .unwrap_or_default(),
            )
        };
    }
    if let Some(interval) = a.int(key::HEALTHCHECK_INTERVAL, 5..=300)? {
        hc.interval = interval;
    }
    hc.timeout = a.int(key::HEALTHCHECK_TIMEOUT, 2..=120)?.or(hc.timeout);
    if let Some(n) = a.int(key::HEALTHCHECK_HEALTHY_THRESHOLD, 2..=10)? {
        hc.healthy_threshold = n;
    }
    if let Some(n) = a.int(key::HEALTHCHECK_UNHEALTHY_THRESHOLD, 2..=10)? {
        hc.unhealthy_threshold = n;
    }
    Ok(hc)
}

fn port_mappings(spec: &ServiceSpec, a: &Annotations<'_>) -> Result<Vec<PortMapping>, CloudError> {
    let ports = spec.ports.as_deref().unwrap_or_default();
    if ports.is_empty() {
        return Err(invalid(
            "spec.ports",
            "a LoadBalancer Service needs at least one port",
        ));
    }
    let certificate = a.get(key::SSL_CERT).filter(|c| !c.is_empty());
    if let Some(cert) = certificate.filter(|c| !c.starts_with("arn:")) {
        return Err(invalid(
            key::SSL_CERT,
            format!(
                "expected a certificate ARN such as arn:aws:acm:us-east-1:123456789012:certificate/0123abcd-..., got `{cert}`"
            ),
        ));
    }
    let ssl_ports: Option<Vec<&str>> = match a.get(key::SSL_PORTS) {
        None | Some("" | "*") => None,
        Some(_) => a.list(key::SSL_PORTS)?,
    };
    let policy = a.get(key::SSL_NEGOTIATION_POLICY).filter(|p| !p.is_empty());
    let tls_to_targets = tls_to_targets(a, certificate.is_some())?;
    let mut protocols = Vec::new();
    let mut out = Vec::with_capacity(ports.len());
    for port in ports {
        let protocol = match port.protocol.as_deref().unwrap_or("TCP") {
            "TCP" => ProtocolEnum::Tcp,
            "UDP" => ProtocolEnum::Udp,
            other => {
                return Err(invalid(
                    "spec.ports",
                    format!(
                        "protocol {other} is not supported by Network Load Balancers; use TCP or UDP"
                    ),
                ));
            }
        };
        if !protocols.contains(&protocol) {
            protocols.push(protocol.clone());
        }
        let node_port = port.node_port.filter(|p| *p > 0).ok_or_else(|| {
            invalid("spec.allocateLoadBalancerNodePorts", format!("port {} has no node port; Network Load Balancer instance targets need one for every port", port.port))
        })?;
        let tls = protocol == ProtocolEnum::Tcp
            && certificate.is_some()
            && ssl_ports.as_ref().is_none_or(|wanted| {
                wanted
                    .iter()
                    .any(|w| *w == port.port.to_string() || Some(*w) == port.name.as_deref())
            });
        out.push(PortMapping {
            port: port.port,
            name: port.name.clone(),
            listener_protocol: if tls {
                ProtocolEnum::Tls
            } else {
                protocol.clone()
            },
            node_port,
            target_protocol: if tls && tls_to_targets {
                ProtocolEnum::Tls
            } else {
                protocol
            },
            certificate_arn: tls.then(|| certificate.unwrap_or_default().to_owned()),
            ssl_policy: if tls { policy.map(str::to_owned) } else { None },
        });
    }
    if protocols.len() > 1 {
        return Err(invalid(
            "spec.ports",
            "mixed protocols (TCP and UDP) in one LoadBalancer Service are not supported",
        ));
    }
    Ok(out)
}

/// Whether the TLS listeners' targets get TLS (`backend-protocol: ssl`),
/// as upstream; a value a Network Load Balancer cannot honour is refused.
fn tls_to_targets(a: &Annotations<'_>, certificate: bool) -> Result<bool, CloudError> {
    let Some(asked) = a.get(key::BACKEND_PROTOCOL) else {
        return Ok(false);
    };
    match asked.trim().to_ascii_lowercase().as_str() {
        "" | "tcp" => Ok(false),
        "ssl" if certificate => Ok(true),
        "ssl" => Err(invalid(
            key::BACKEND_PROTOCOL,
            format!(
                "`ssl` means TLS to the targets of the TLS listeners, and there are none: set {} too",
                key::SSL_CERT
            ),
        )),
        _ => Err(invalid(
            key::BACKEND_PROTOCOL,
            format!(
                "a Network Load Balancer sends its targets TCP (`tcp`) or TLS (`ssl`), not `{asked}`; \
                 `http` and `https` are for classic ELBs"
            ),
        )),
    }
}

#[cfg(test)]
mod tests;
