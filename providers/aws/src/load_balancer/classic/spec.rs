//! What a Service asks of its classic ELB, read and validated in full
//! before anything in AWS is touched, with upstream's defaults
//! (`EnsureLoadBalancer`'s classic branch, `buildListener`,
//! `ensureLoadBalancerHealthCheck` and `getExpectedHealthCheck`).

use std::collections::BTreeMap;

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::ipnet::IpNet;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Service, ServiceSpec};

use crate::config::SharedHealthProbe;
use crate::load_balancer::annotations::{self as key, Annotations, invalid};
use crate::load_balancer::security_groups::asked::AskedGroups;
use crate::load_balancer::spec::{
    Kind, ServiceRef, additional_tags, checked_spec, internal, kind_of, owned_list, proxy_protocol,
    refuse_present, source_ranges,
};

/// Keys that only a Network Load Balancer has a use for: refused on a
/// classic ELB, where upstream ignores them.
pub(crate) const NETWORK_ONLY: &[&str] = &[
    key::EIP_ALLOCATIONS,
    key::PRIVATE_IPV4_ADDRESSES,
    key::IP_ADDRESS_TYPE,
    key::TARGET_GROUP_ATTRIBUTES,
];

/// One listener: a Service port on the load balancer, forwarded to the
/// node port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClassicListener {
    pub(crate) port: i32,
    pub(crate) instance_port: i32,
    /// `TCP`, `SSL`, `HTTP` or `HTTPS`.
    pub(crate) protocol: &'static str,
    /// What the instances speak: `TCP`, `SSL`, `HTTP` or `HTTPS`.
    pub(crate) instance_protocol: &'static str,
    /// For `SSL` and `HTTPS` listeners.
    pub(crate) certificate: Option<String>,
}

/// The load balancer's attributes, as upstream sets them on every ensure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClassicAttributes {
    pub(crate) access_log_enabled: bool,
    pub(crate) access_log_interval: Option<i32>,
    pub(crate) access_log_bucket: Option<String>,
    pub(crate) access_log_prefix: Option<String>,
    pub(crate) draining_enabled: bool,
    pub(crate) draining_timeout: Option<i32>,
    pub(crate) idle_timeout: i32,
    pub(crate) cross_zone: bool,
}

/// The health check: `PROTOCOL:port[/path]` and its timings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClassicHealthCheck {
    pub(crate) target: String,
    pub(crate) interval: i32,
    pub(crate) timeout: i32,
    pub(crate) healthy_threshold: i32,
    pub(crate) unhealthy_threshold: i32,
}

/// Everything the Service asks of its classic ELB.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClassicSpec {
    pub(crate) svc: ServiceRef,
    pub(crate) internal: bool,
    pub(crate) subnets: Option<Vec<String>>,
    pub(crate) listeners: Vec<ClassicListener>,
    /// `ssl-negotiation-policy`: an AWS predefined policy for the TLS
    /// listeners.
    pub(crate) ssl_negotiation_policy: Option<String>,
    pub(crate) proxy_protocol: bool,
    pub(crate) attributes: ClassicAttributes,
    pub(crate) health_check: ClassicHealthCheck,
    pub(crate) security_groups: AskedGroups,
    pub(crate) additional_tags: BTreeMap<String, String>,
    pub(crate) target_node_labels: BTreeMap<String, String>,
    /// Client CIDRs; `0.0.0.0/0` when the Service names none.
    pub(crate) source_ranges: Vec<IpNet>,
}

impl ClassicSpec {
    /// Reads and validates `service` under the config's shared health
    /// probe (`ClusterServiceLoadBalancerHealthProbeMode = Shared`).
    ///
    /// # Errors
    /// [`CloudError::InvalidInput`] naming the annotation or field at fault.
    pub(crate) fn under(
        service: &Service,
        probe: Option<&SharedHealthProbe>,
    ) -> Result<Self, CloudError> {
        let empty = BTreeMap::new();
        let a = Annotations(service.metadata.annotations.as_ref().unwrap_or(&empty));
        if kind_of(&a)? != Kind::Classic {
            return Err(invalid(
                key::TYPE,
                "the Service asks for a Network Load Balancer, not a classic ELB",
            ));
        }
        refuse_present(
            &a,
            NETWORK_ONLY,
            "applies to Network Load Balancers only (aws-load-balancer-type: nlb); this Service has a classic ELB",
        )?;
        let spec = checked_spec(service)?;
        let listeners = listeners(spec, &a)?;
        let mut ranges = source_ranges(spec, &a)?;
        if ranges.is_empty() {
            ranges.push(IpNet::V4(Default::default()));
        }
        Ok(Self {
            svc: ServiceRef::of(service),
            internal: internal(&a)?,
            subnets: owned_list(&a, key::SUBNETS)?,
            ssl_negotiation_policy: a
                .get(key::SSL_NEGOTIATION_POLICY)
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            proxy_protocol: proxy_protocol(&a)?,
            attributes: attributes(&a)?,
            health_check: health_check(spec, &a, listeners[0].instance_port, probe)?,
            listeners,
            security_groups: AskedGroups::from_annotations(&a)?,
            additional_tags: additional_tags(&a)?,
            target_node_labels: a.key_values(key::TARGET_NODE_LABELS)?,
            source_ranges: ranges,
        })
    }
}

/// `buildListener`: TCP to TCP, or with a certificate on the port (all
/// ports, or those `ssl-ports` names) SSL or HTTPS as `backend-protocol`
/// says; `backend-protocol: http` without a certificate makes HTTP.
fn listeners(spec: &ServiceSpec, a: &Annotations<'_>) -> Result<Vec<ClassicListener>, CloudError> {
    let ports = spec.ports.as_deref().unwrap_or_default();
    if ports.is_empty() {
        return Err(invalid(
            "spec.ports",
            "a LoadBalancer Service needs at least one port",
        ));
    }
    let certificate = a.get(key::SSL_CERT).filter(|c| !c.is_empty());
    let ssl_ports: Option<Vec<&str>> = match a.get(key::SSL_PORTS) {
        None | Some("" | "*") => None,
        Some(_) => a.list(key::SSL_PORTS)?,
    };
    let backend = a
        .get(key::BACKEND_PROTOCOL)
        .unwrap_or_default()
        .to_ascii_lowercase();
    let mut out = Vec::with_capacity(ports.len());
    for port in ports {
        let protocol = port.protocol.as_deref().unwrap_or("TCP");
        if protocol != "TCP" {
            return Err(invalid(
                "spec.ports",
                format!(
                    "protocol {protocol} is not supported by classic ELBs; use TCP, or aws-load-balancer-type: nlb for UDP"
                ),
            ));
        }
        let instance_port = port.node_port.filter(|p| *p > 0).ok_or_else(|| {
            invalid(
                "spec.allocateLoadBalancerNodePorts",
                format!(
                    "port {} has no node port; a classic ELB forwards to node ports",
                    port.port
                ),
            )
        })?;
        let tls = certificate.is_some()
            && ssl_ports.as_ref().is_none_or(|wanted| {
                wanted.iter().any(|w| {
                    *w == port.port.to_string()
                        || port
                            .name
                            .as_deref()
                            .is_some_and(|n| n.eq_ignore_ascii_case(w))
                })
            });
        let (protocol, instance_protocol) = match (tls, backend.as_str()) {
            (true, "" | "tcp") => ("SSL", "TCP"),
            (true, "ssl") => ("SSL", "SSL"),
            (true, "http") => ("HTTPS", "HTTP"),
            (true, "https") => ("HTTPS", "HTTPS"),
            (false, "http") => ("HTTP", "HTTP"),
            (false, "" | "tcp" | "ssl" | "https") => ("TCP", "TCP"),
            (_, other) => {
                return Err(invalid(
                    key::BACKEND_PROTOCOL,
                    format!("expected tcp, ssl, http or https, got `{other}`"),
                ));
            }
        };
        out.push(ClassicListener {
            port: port.port,
            instance_port,
            protocol,
            instance_protocol,
            certificate: tls.then(|| certificate.unwrap_or_default().to_owned()),
        });
    }
    if let Some(cert) = certificate.filter(|c| !c.starts_with("arn:")) {
        return Err(invalid(
            key::SSL_CERT,
            format!("expected a certificate ARN (ACM or IAM), got `{cert}`"),
        ));
    }
    Ok(out)
}

/// Upstream's attribute defaults (no access log, no draining, 60 s idle,
/// no cross-zone), each overridden by its annotation.
fn attributes(a: &Annotations<'_>) -> Result<ClassicAttributes, CloudError> {
    let access_log_interval = match a.get(key::ACCESS_LOG_EMIT_INTERVAL) {
        None | Some("") => None,
        Some("5") => Some(5),
        Some("60") => Some(60),
        Some(other) => {
            return Err(invalid(
                key::ACCESS_LOG_EMIT_INTERVAL,
                format!("expected 5 or 60 (minutes), got `{other}`"),
            ));
        }
    };
    let text = |k: &str| a.get(k).filter(|v| !v.is_empty()).map(str::to_owned);
    let access_log_enabled = a.bool(key::ACCESS_LOG_ENABLED)?.unwrap_or(false);
    let access_log_bucket = text(key::ACCESS_LOG_S3_BUCKET_NAME);
    if access_log_enabled && access_log_bucket.is_none() {
        return Err(invalid(
            key::ACCESS_LOG_ENABLED,
            format!(
                "access logs need a bucket: set {}",
                key::ACCESS_LOG_S3_BUCKET_NAME
            ),
        ));
    }
    Ok(ClassicAttributes {
        access_log_enabled,
        access_log_interval,
        access_log_bucket,
        access_log_prefix: text(key::ACCESS_LOG_S3_BUCKET_PREFIX),
        draining_enabled: a.bool(key::CONNECTION_DRAINING_ENABLED)?.unwrap_or(false),
        draining_timeout: a.int(key::CONNECTION_DRAINING_TIMEOUT, 1..=3600)?,
        idle_timeout: a.int(key::CONNECTION_IDLE_TIMEOUT, 1..=4000)?.unwrap_or(60),
        cross_zone: a
            .bool(key::CROSS_ZONE_LOAD_BALANCING_ENABLED)?
            .unwrap_or(false),
    })
}

/// Upstream's health check: HTTP to the health check node port at
/// `/healthz` for `externalTrafficPolicy: Local`; otherwise TCP (SSL when
/// the backend speaks TLS) to the first listener's node port, or the shared
/// probe; then the `healthcheck-*` annotations; thresholds 2 and 6,
/// timeout 5, interval 10 unless annotated.
fn health_check(
    spec: &ServiceSpec,
    a: &Annotations<'_>,
    first_node_port: i32,
    probe: Option<&SharedHealthProbe>,
) -> Result<ClassicHealthCheck, CloudError> {
    let local = spec.external_traffic_policy.as_deref() == Some("Local");
    let (mut protocol, mut port, mut path) = if local {
        let port = spec
            .health_check_node_port
            .filter(|p| *p > 0)
            .ok_or_else(|| {
                invalid(
                    "spec.healthCheckNodePort",
                    "externalTrafficPolicy: Local needs a health check node port",
                )
            })?;
        ("HTTP".to_owned(), port, "/healthz".to_owned())
    } else if let Some(probe) = probe {
        ("HTTP".to_owned(), probe.port, probe.path.clone())
    } else {
        let backend = a.get(key::BACKEND_PROTOCOL).unwrap_or_default();
        let tls = backend.eq_ignore_ascii_case("https") || backend.eq_ignore_ascii_case("ssl");
        let protocol = if tls { "SSL" } else { "TCP" };
        (protocol.to_owned(), first_node_port, String::new())
    };
    if let Some(p) = a.get(key::HEALTHCHECK_PROTOCOL) {
        protocol = p.to_ascii_uppercase();
        if !matches!(protocol.as_str(), "TCP" | "SSL" | "HTTP" | "HTTPS") {
            return Err(invalid(
                key::HEALTHCHECK_PROTOCOL,
                format!("expected TCP, SSL, HTTP or HTTPS, got `{p}`"),
            ));
        }
    }
    match a.get(key::HEALTHCHECK_PORT) {
        // `traffic-port` on a Local Service: the first node port.
        Some("traffic-port") if local => port = first_node_port,
        None | Some("traffic-port") => {}
        Some(_) => port = a.int(key::HEALTHCHECK_PORT, 1..=65535)?.unwrap_or(port),
    }
    if matches!(protocol.as_str(), "HTTP" | "HTTPS") {
        if path.is_empty() {
            "/".clone_into(&mut path);
        }
        if let Some(asked) = a.get(key::HEALTHCHECK_PATH).filter(|p| !p.is_empty()) {
            if !asked.starts_with('/') {
                return Err(invalid(
                    key::HEALTHCHECK_PATH,
                    format!("expected a path starting with /, got `{asked}`"),
                ));
            }
            asked.clone_into(&mut path);
        }
    } else {
        path.clear();
    }
    let interval = a.int(key::HEALTHCHECK_INTERVAL, 5..=300)?.unwrap_or(10);
    let timeout = a.int(key::HEALTHCHECK_TIMEOUT, 2..=60)?.unwrap_or(5);
    if timeout >= interval {
        return Err(invalid(
            key::HEALTHCHECK_TIMEOUT,
            format!(
                "a classic ELB needs the timeout ({timeout} s) below the interval ({interval} s)"
            ),
        ));
    }
    Ok(ClassicHealthCheck {
        target: format!("{protocol}:{port}{path}"),
        interval,
        timeout,
        healthy_threshold: a
            .int(key::HEALTHCHECK_HEALTHY_THRESHOLD, 2..=10)?
            .unwrap_or(2),
        unhealthy_threshold: a
            .int(key::HEALTHCHECK_UNHEALTHY_THRESHOLD, 2..=10)?
            .unwrap_or(6),
    })
}

#[cfg(test)]
mod tests;
