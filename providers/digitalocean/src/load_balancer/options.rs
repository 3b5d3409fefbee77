//! A Service's annotations, parsed and checked before any cloud call.

use std::net::IpAddr;

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;

use super::annotations::{self as ann, Reader, invalid, is_firewall_rule, is_load_balancer_name};
use crate::api::types::StickySessions;
use crate::config::{LoadBalancerType, is_uuid};

/// What the annotations ask of the load balancer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Options {
    pub(crate) identity: Identity,
    /// The type annotation, when set.
    pub(crate) kind: Option<LoadBalancerType>,
    /// `INTERNAL` when asked; `EXTERNAL` otherwise.
    pub(crate) internal: bool,
    /// The network-stack annotation (`IPV4` or `DUALSTACK`), when set.
    pub(crate) network_stack: Option<&'static str>,
    /// The reserved IP to create the load balancer with.
    pub(crate) ip: Option<IpAddr>,
    pub(crate) subnet_uuid: Option<String>,
    pub(crate) certificate_name: Option<String>,
    pub(crate) http3_port: Option<i32>,
    pub(crate) protocol: &'static str,
    pub(crate) http_ports: Vec<i32>,
    pub(crate) tls_ports: Vec<i32>,
    pub(crate) http2_ports: Vec<i32>,
    pub(crate) certificate_id: Option<String>,
    pub(crate) tls_passthrough: bool,
    pub(crate) redirect_http_to_https: bool,
    pub(crate) enable_proxy_protocol: bool,
    pub(crate) enable_backend_keepalive: bool,
    pub(crate) disable_lets_encrypt_dns_records: bool,
    pub(crate) http_idle_timeout_seconds: Option<u32>,
    pub(crate) algorithm: &'static str,
    pub(crate) size_slug: Option<String>,
    pub(crate) size_unit: Option<u32>,
    pub(crate) sticky_sessions: StickySessions,
    pub(crate) health: HealthOptions,
    pub(crate) allow_rules: Vec<String>,
    pub(crate) deny_rules: Vec<String>,
}

/// How the provider finds the Service's load balancer, and what it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// `kubernetes.digitalocean.com/load-balancer-id`, when recorded.
    pub(crate) id: Option<String>,
    /// The custom name annotation, when set.
    pub(crate) custom_name: Option<String>,
    /// The hostname to report instead of the IP, lowercased.
    pub(crate) hostname: Option<String>,
}

/// The health-check annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthOptions {
    /// `override-health-check` is present: protocol, port and path apply.
    pub(crate) overridden: bool,
    pub(crate) protocol: Option<&'static str>,
    pub(crate) port: Option<i32>,
    pub(crate) path: Option<String>,
    pub(crate) check_interval_seconds: u32,
    pub(crate) response_timeout_seconds: u32,
    pub(crate) unhealthy_threshold: u32,
    pub(crate) healthy_threshold: u32,
}

/// Whether the Service disowned its load balancer.
pub(crate) fn is_disowned(service: &Service) -> Result<bool, CloudError> {
    Reader::new(service.metadata.annotations.as_ref()).bool(ann::DISOWN)
}

/// The annotations that locate the load balancer; enough for lookups,
/// backend updates and deletion.
pub(crate) fn identity(service: &Service) -> Result<Identity, CloudError> {
    let a = Reader::new(service.metadata.annotations.as_ref());
    let id = a.get(ann::LOAD_BALANCER_ID).map(str::to_owned);
    if let Some(id) = &id
        && !is_uuid(id)
    {
        return Err(invalid(
            ann::LOAD_BALANCER_ID,
            id,
            "the load balancer's UUID",
        ));
    }
    let custom_name = a.get(ann::NAME).map(str::to_owned);
    if let Some(name) = &custom_name
        && !is_load_balancer_name(name)
    {
        return Err(invalid(
            ann::NAME,
            name,
            "at most 255 letters, digits, `.` and `-`, starting with a letter or digit",
        ));
    }
    Ok(Identity {
        id,
        custom_name,
        hostname: a.get(ann::HOSTNAME).map(str::to_lowercase),
    })
}

/// Every annotation, checked.
///
/// # Errors
/// [`CloudError::InvalidInput`] naming the first malformed annotation.
pub(crate) fn parse(service: &Service) -> Result<Options, CloudError> {
    let a = Reader::new(service.metadata.annotations.as_ref());
    let kind = match a.get(ann::TYPE) {
        None => None,
        Some(v) => Some(
            LoadBalancerType::parse(v)
                .ok_or_else(|| invalid(ann::TYPE, v, "REGIONAL or REGIONAL_NETWORK"))?,
        ),
    };
    let internal = a.one_of(ann::NETWORK, ann::NETWORKS, "EXTERNAL")? == "INTERNAL";
    let network_stack = a
        .get(ann::NETWORK_STACK)
        .map(|_| a.one_of(ann::NETWORK_STACK, ann::NETWORK_STACKS, "IPV4"))
        .transpose()?;
    if internal && network_stack == Some("DUALSTACK") {
        return Err(CloudError::invalid(
            ann::NETWORK_STACK,
            "DUALSTACK is not available for INTERNAL load balancers",
        ));
    }
    let ip = a
        .get(ann::IP)
        .map(|v| {
            v.parse::<IpAddr>()
                .map_err(|_| invalid(ann::IP, v, "an IP address"))
        })
        .transpose()?;
    let subnet_uuid = a.get(ann::SUBNET_UUID).map(str::to_owned);
    if let Some(subnet) = &subnet_uuid
        && !is_uuid(subnet)
    {
        return Err(invalid(ann::SUBNET_UUID, subnet, "a subnet UUID"));
    }
    let http3_port = match a.ports(ann::HTTP3_PORT)?.as_slice() {
        [] => None,
        [one] => Some(*one),
        _ => {
            let v = a.get(ann::HTTP3_PORT).unwrap_or_default();
            return Err(invalid(ann::HTTP3_PORT, v, "a single service port"));
        }
    };
    let size_slug = a
        .get(ann::SIZE_SLUG)
        .map(|_| a.one_of(ann::SIZE_SLUG, ann::SIZE_SLUGS, "lb-small"))
        .transpose()?
        .map(str::to_owned);
    let size_unit = a.opt_int_in(ann::SIZE_UNIT, 1..=100)?;
    if size_slug.is_some() && size_unit.is_some() {
        return Err(CloudError::invalid(
            ann::SIZE_UNIT,
            format!(
                "only one of {} and {} may be set",
                ann::SIZE_SLUG,
                ann::SIZE_UNIT
            ),
        ));
    }
    let options = Options {
        identity: identity(service)?,
        kind,
        internal,
        network_stack,
        ip,
        subnet_uuid,
        certificate_name: a.get(ann::CERTIFICATE_NAME).map(str::to_owned),
        http3_port,
        protocol: a.one_of(ann::PROTOCOL, ann::PROTOCOLS, "tcp")?,
        http_ports: a.ports(ann::HTTP_PORTS)?,
        tls_ports: a.ports(ann::TLS_PORTS)?,
        http2_ports: a.ports(ann::HTTP2_PORTS)?,
        certificate_id: a.get(ann::CERTIFICATE_ID).map(str::to_owned),
        tls_passthrough: a.bool(ann::TLS_PASSTHROUGH)?,
        redirect_http_to_https: a.bool(ann::REDIRECT_HTTP_TO_HTTPS)?,
        enable_proxy_protocol: a.bool(ann::ENABLE_PROXY_PROTOCOL)?,
        enable_backend_keepalive: a.bool(ann::ENABLE_BACKEND_KEEPALIVE)?,
        disable_lets_encrypt_dns_records: a.bool(ann::DISABLE_LETS_ENCRYPT_DNS_RECORDS)?,
        http_idle_timeout_seconds: a.opt_int_in(ann::HTTP_IDLE_TIMEOUT_SECONDS, 30..=600)?,
        algorithm: a.one_of(ann::ALGORITHM, ann::ALGORITHMS, "round_robin")?,
        size_slug,
        size_unit,
        sticky_sessions: sticky_sessions(a)?,
        health: health(a)?,
        allow_rules: firewall_rules(a, ann::ALLOW_RULES)?,
        deny_rules: firewall_rules(a, ann::DENY_RULES)?,
    };
    check_port_sets(&options)?;
    if options.http3_port.is_some() && options.tls_passthrough {
        return Err(CloudError::invalid(
            ann::HTTP3_PORT,
            format!(
                "HTTP/3 needs a certificate; it cannot be used with {}",
                ann::TLS_PASSTHROUGH
            ),
        ));
    }
    if options.http3_port.is_some()
        && options.certificate_id.is_none()
        && options.certificate_name.is_none()
    {
        return Err(CloudError::invalid(
            ann::HTTP3_PORT,
            format!(
                "HTTP/3 needs a certificate: set {} or {}",
                ann::CERTIFICATE_ID,
                ann::CERTIFICATE_NAME
            ),
        ));
    }
    if (options.certificate_id.is_some() || options.certificate_name.is_some())
        && options.tls_passthrough
    {
        return Err(CloudError::invalid(
            ann::CERTIFICATE_ID,
            format!(
                "set either {} or {}, not both",
                ann::CERTIFICATE_ID,
                ann::TLS_PASSTHROUGH
            ),
        ));
    }
    Ok(options)
}

fn sticky_sessions(a: Reader<'_>) -> Result<StickySessions, CloudError> {
    let kind = a.one_of(
        ann::STICKY_SESSIONS_TYPE,
        ann::STICKY_SESSIONS_TYPES,
        "none",
    )?;
    if kind == "none" {
        return Ok(StickySessions {
            kind: kind.to_owned(),
            cookie_name: None,
            cookie_ttl_seconds: None,
        });
    }
    let name = a.get(ann::STICKY_SESSIONS_COOKIE_NAME).ok_or_else(|| {
        CloudError::invalid(
            ann::STICKY_SESSIONS_COOKIE_NAME,
            "required when sticky-sessions-type is `cookies`",
        )
    })?;
    let ttl = a
        .opt_int_in(ann::STICKY_SESSIONS_COOKIE_TTL, 1..=u32::MAX)?
        .ok_or_else(|| {
            CloudError::invalid(
                ann::STICKY_SESSIONS_COOKIE_TTL,
                "required when sticky-sessions-type is `cookies`: a number of seconds",
            )
        })?;
    Ok(StickySessions {
        kind: kind.to_owned(),
        cookie_name: Some(name.to_owned()),
        cookie_ttl_seconds: Some(ttl),
    })
}

fn health(a: Reader<'_>) -> Result<HealthOptions, CloudError> {
    // Upstream reads protocol, port and path only with the override
    // annotation; without it they are ignored, not checked.
    let overridden = a.raw(ann::OVERRIDE_HEALTH_CHECK).is_some();
    let (protocol, port, path) = if overridden {
        let port = match a.ports(ann::HEALTHCHECK_PORT)?.as_slice() {
            [] => None,
            [one] => Some(*one),
            _ => {
                let v = a.get(ann::HEALTHCHECK_PORT).unwrap_or_default();
                return Err(invalid(ann::HEALTHCHECK_PORT, v, "a single service port"));
            }
        };
        let protocol = a
            .get(ann::HEALTHCHECK_PROTOCOL)
            .map(|_| a.one_of(ann::HEALTHCHECK_PROTOCOL, ann::HEALTHCHECK_PROTOCOLS, "tcp"))
            .transpose()?;
        (
            protocol,
            port,
            a.get(ann::HEALTHCHECK_PATH).map(str::to_owned),
        )
    } else {
        (None, None, None)
    };
    Ok(HealthOptions {
        overridden,
        protocol,
        port,
        path,
        check_interval_seconds: a.int_in(ann::HEALTHCHECK_CHECK_INTERVAL_SECONDS, 3..=300, 3)?,
        response_timeout_seconds: a.int_in(
            ann::HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS,
            3..=300,
            5,
        )?,
        unhealthy_threshold: a.int_in(ann::HEALTHCHECK_UNHEALTHY_THRESHOLD, 2..=10, 3)?,
        healthy_threshold: a.int_in(ann::HEALTHCHECK_HEALTHY_THRESHOLD, 2..=10, 5)?,
    })
}

fn firewall_rules(a: Reader<'_>, key: &str) -> Result<Vec<String>, CloudError> {
    let rules = a.list(key);
    for rule in &rules {
        if !is_firewall_rule(rule) {
            return Err(invalid(
                key,
                rule,
                "comma-separated `ip:<address>` or `cidr:<network>` rules",
            ));
        }
    }
    Ok(rules)
}

/// A port may be in one of the http, tls and http2 lists only.
fn check_port_sets(o: &Options) -> Result<(), CloudError> {
    let mut seen = std::collections::BTreeSet::new();
    for port in o
        .http_ports
        .iter()
        .chain(&o.tls_ports)
        .chain(&o.http2_ports)
    {
        if !seen.insert(*port) {
            return Err(CloudError::invalid(
                ann::TLS_PORTS,
                format!(
                    "port {port} is listed more than once across {}, {} and {}",
                    ann::HTTP_PORTS,
                    ann::TLS_PORTS,
                    ann::HTTP2_PORTS
                ),
            ));
        }
    }
    Ok(())
}
