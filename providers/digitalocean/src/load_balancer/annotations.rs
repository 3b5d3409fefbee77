//! Upstream's Service annotations, with their keys, value formats and
//! defaults, a reader that turns a malformed value into
//! [`CloudError::InvalidInput`] naming the annotation and the expected form,
//! the value checks the reader's callers and the schema share, and their
//! [`SCHEMA`], which every read is checked against in tests.

mod schema;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::ops::RangeInclusive;

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::ipnet::IpNet;

use crate::config::LoadBalancerType;

pub use schema::SCHEMA;

/// The load balancer's ID, recorded on the Service by the provider (through
/// `EnsuredLoadBalancer::service_annotations`) so later calls find it by ID.
pub const LOAD_BALANCER_ID: &str = "kubernetes.digitalocean.com/load-balancer-id";
/// `"false"` leaves the Service's NodePorts out of the public-access
/// firewall (any other value, or none, keeps them in).
pub const FIREWALL_MANAGED: &str = "kubernetes.digitalocean.com/firewall-managed";
/// `"true"` hands the load balancer over: the provider no longer creates,
/// updates or deletes it.
pub const DISOWN: &str = "service.kubernetes.io/do-loadbalancer-disown";

macro_rules! annotations {
    ($($(#[$doc:meta])* $name:ident = $suffix:literal;)*) => {
        $($(#[$doc])* pub const $name: &str = concat!("service.beta.kubernetes.io/do-loadbalancer-", $suffix);)*
    };
}

annotations! {
    /// A custom load-balancer name (at most 255 characters: alphanumerics,
    /// `.` and `-`, starting alphanumeric). Defaults to `a` + the Service UID.
    NAME = "name";
    /// `REGIONAL` or `REGIONAL_NETWORK`; when absent, the existing load
    /// balancer's type, else `DEFAULT_LB_TYPE`. Recorded on the Service.
    TYPE = "type";
    /// `EXTERNAL` (default) or `INTERNAL` (no public IP). Fixed at creation.
    NETWORK = "network";
    /// `IPV4` or `DUALSTACK`; upstream's default is `DUALSTACK` for
    /// `REGIONAL`, `IPV4` for `INTERNAL`, and for `REGIONAL_NETWORK`
    /// `DUALSTACK` only when every node has an IPv6 address. Fixed at creation.
    NETWORK_STACK = "network-stack";
    /// A reserved IP (BYOIP) the load balancer is created with. Create-only.
    IP = "ip";
    /// The VPC subnet the load balancer is created in.
    SUBNET_UUID = "subnet-uuid";
    /// The name of the certificate terminating TLS, looked up by name when
    /// `certificate-id` is not set.
    CERTIFICATE_NAME = "certificate-name";
    /// A service port also served as HTTP/3 (needs a certificate).
    HTTP3_PORT = "http3-port";
    /// Default protocol of the forwarding rules: `tcp` (default), `http`,
    /// `https` or `http2`.
    PROTOCOL = "protocol";
    /// Comma-separated service ports forwarded as `http`.
    HTTP_PORTS = "http-ports";
    /// Comma-separated service ports forwarded as `https`; defaults to `443`
    /// when a certificate or TLS passthrough is set.
    TLS_PORTS = "tls-ports";
    /// Comma-separated service ports forwarded as `http2`.
    HTTP2_PORTS = "http2-ports";
    /// The certificate terminating TLS on the `https`/`http2` ports.
    CERTIFICATE_ID = "certificate-id";
    /// `"true"` passes TLS through to the nodes instead of terminating it.
    TLS_PASSTHROUGH = "tls-passthrough";
    /// `"true"` redirects HTTP on port 80 to HTTPS on 443.
    REDIRECT_HTTP_TO_HTTPS = "redirect-http-to-https";
    /// `"true"` enables the PROXY protocol towards the nodes.
    ENABLE_PROXY_PROTOCOL = "enable-proxy-protocol";
    /// `"true"` keeps HTTP connections to the nodes alive.
    ENABLE_BACKEND_KEEPALIVE = "enable-backend-keepalive";
    /// `"true"` stops DNS records being created for Let's Encrypt certificates.
    DISABLE_LETS_ENCRYPT_DNS_RECORDS = "disable-lets-encrypt-dns-records";
    /// HTTP idle timeout, 30 to 600 seconds (API default 60).
    HTTP_IDLE_TIMEOUT_SECONDS = "http-idle-timeout-seconds";
    /// Report this hostname as the Service's ingress instead of the IP.
    HOSTNAME = "hostname";
    /// `round_robin` (default) or `least_connections` (deprecated by the API).
    ALGORITHM = "algorithm";
    /// `lb-small`, `lb-medium` or `lb-large` (deprecated; exclusive with size-unit).
    SIZE_SLUG = "size-slug";
    /// Number of load-balancer nodes, 1 to 100.
    SIZE_UNIT = "size-unit";
    /// `none` (default) or `cookies`.
    STICKY_SESSIONS_TYPE = "sticky-sessions-type";
    /// The cookie name; required with `cookies`.
    STICKY_SESSIONS_COOKIE_NAME = "sticky-sessions-cookie-name";
    /// The cookie lifetime in seconds; required with `cookies`.
    STICKY_SESSIONS_COOKIE_TTL = "sticky-sessions-cookie-ttl";
    /// Present (any value): the health-check protocol, port and path
    /// annotations take effect instead of the kube-proxy / node health check.
    OVERRIDE_HEALTH_CHECK = "override-health-check";
    /// `tcp`, `http` or `https` (with override; default `http` when a path
    /// is set, `tcp` otherwise).
    HEALTHCHECK_PROTOCOL = "healthcheck-protocol";
    /// The service port whose node port is health-checked (with override;
    /// default the first TCP port).
    HEALTHCHECK_PORT = "healthcheck-port";
    /// The health-check path (with override).
    HEALTHCHECK_PATH = "healthcheck-path";
    /// Seconds between checks, 3 to 300 (default 3).
    HEALTHCHECK_CHECK_INTERVAL_SECONDS = "healthcheck-check-interval-seconds";
    /// Seconds to wait for an answer, 3 to 300 (default 5).
    HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS = "healthcheck-response-timeout-seconds";
    /// Failures before a node is unhealthy, 2 to 10 (default 3).
    HEALTHCHECK_UNHEALTHY_THRESHOLD = "healthcheck-unhealthy-threshold";
    /// Successes before a node is healthy again, 2 to 10 (default 5).
    HEALTHCHECK_HEALTHY_THRESHOLD = "healthcheck-healthy-threshold";
    /// Comma-separated firewall allow rules (`ip:1.2.3.4`, `cidr:10.0.0.0/8`);
    /// ignored when `spec.loadBalancerSourceRanges` is set.
    ALLOW_RULES = "allow-rules";
    /// Comma-separated firewall deny rules, in the same form.
    DENY_RULES = "deny-rules";
}

/// The prefix of upstream's load-balancer annotations.
pub const PREFIX: &str = "service.beta.kubernetes.io/do-loadbalancer-";
/// The prefix of the keys upstream records on a Service.
pub const RECORD_PREFIX: &str = "kubernetes.digitalocean.com/";

/// The values of [`NETWORK`].
pub(crate) const NETWORKS: &[&str] = &["EXTERNAL", "INTERNAL"];
/// The values of [`NETWORK_STACK`].
pub(crate) const NETWORK_STACKS: &[&str] = &["IPV4", "DUALSTACK"];
/// The values of [`PROTOCOL`].
pub(crate) const PROTOCOLS: &[&str] = &["tcp", "http", "https", "http2"];
/// The values of [`HEALTHCHECK_PROTOCOL`].
pub(crate) const HEALTHCHECK_PROTOCOLS: &[&str] = &["tcp", "http", "https"];
/// The values of [`ALGORITHM`].
pub(crate) const ALGORITHMS: &[&str] = &["round_robin", "least_connections"];
/// The values of [`SIZE_SLUG`].
pub(crate) const SIZE_SLUGS: &[&str] = &["lb-small", "lb-medium", "lb-large"];
/// The values of [`STICKY_SESSIONS_TYPE`].
pub(crate) const STICKY_SESSIONS_TYPES: &[&str] = &["none", "cookies"];

/// Reads a Service's annotations, answering `InvalidInput` for bad values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'a>(Option<&'a BTreeMap<String, String>>);

impl<'a> Reader<'a> {
    pub(crate) fn new(annotations: Option<&'a BTreeMap<String, String>>) -> Self {
        Self(annotations)
    }

    /// The raw value, present even when empty. Every read goes through
    /// here, so a key the provider reads must be in [`SCHEMA`].
    pub(crate) fn raw(&self, key: &str) -> Option<&'a str> {
        debug_assert!(
            SCHEMA.get(key).is_some(),
            "annotation {key} is read but has no entry in the schema"
        );
        self.0?.get(key).map(String::as_str)
    }

    /// The trimmed value, `None` when absent or blank.
    pub(crate) fn get(&self, key: &str) -> Option<&'a str> {
        self.raw(key).map(str::trim).filter(|v| !v.is_empty())
    }

    /// A boolean in Go's `strconv.ParseBool` spellings, as upstream accepts.
    pub(crate) fn bool(&self, key: &str) -> Result<bool, CloudError> {
        match self.get(key) {
            None => Ok(false),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
            Some(other) => Err(invalid(key, other, "\"true\" or \"false\"")),
        }
    }

    /// An integer in `range`, `default` when absent.
    pub(crate) fn int_in(
        &self,
        key: &str,
        range: RangeInclusive<u32>,
        default: u32,
    ) -> Result<u32, CloudError> {
        Ok(self.opt_int_in(key, range)?.unwrap_or(default))
    }

    /// An integer in `range`, `None` when absent.
    pub(crate) fn opt_int_in(
        &self,
        key: &str,
        range: RangeInclusive<u32>,
    ) -> Result<Option<u32>, CloudError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        match v.parse::<u32>() {
            Ok(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(invalid(
                key,
                v,
                &format!("an integer from {} to {}", range.start(), range.end()),
            )),
        }
    }

    /// One of `allowed`, `default` when absent.
    pub(crate) fn one_of(
        &self,
        key: &str,
        allowed: &[&'static str],
        default: &'static str,
    ) -> Result<&'static str, CloudError> {
        let Some(v) = self.get(key) else {
            return Ok(default);
        };
        allowed
            .iter()
            .find(|a| **a == v)
            .copied()
            .ok_or_else(|| invalid(key, v, &format!("one of {}", allowed.join(", "))))
    }

    /// A comma-separated list of port numbers.
    pub(crate) fn ports(&self, key: &str) -> Result<Vec<i32>, CloudError> {
        let Some(v) = self.get(key) else {
            return Ok(Vec::new());
        };
        v.split(',')
            .map(|p| {
                port(p.trim()).ok_or_else(|| {
                    invalid(key, v, "comma-separated port numbers, such as 443,8443")
                })
            })
            .collect()
    }

    /// A comma-separated list of strings, blanks dropped.
    pub(crate) fn list(&self, key: &str) -> Vec<String> {
        self.get(key)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A port number from 1 to 65535, as the port annotations spell one.
pub(crate) fn port(s: &str) -> Option<i32> {
    s.parse::<u16>().ok().filter(|n| *n > 0).map(i32::from)
}

/// `InvalidInput` for annotation `key` holding `value`, expecting `expected`.
pub(crate) fn invalid(key: &str, value: &str, expected: &str) -> CloudError {
    CloudError::invalid(key, format!("`{value}` is not valid; expected {expected}"))
}

/// `ip:<address>` or `cidr:<network>`, as the firewall rule annotations
/// spell one.
pub(crate) fn is_firewall_rule(rule: &str) -> bool {
    match rule.split_once(':') {
        Some(("ip", ip)) => ip.parse::<IpAddr>().is_ok(),
        Some(("cidr", net)) => net.parse::<IpNet>().is_ok(),
        _ => false,
    }
}

/// At most 255 letters, digits, `.` and `-`, starting with a letter or digit.
pub(crate) fn is_load_balancer_name(s: &str) -> bool {
    s.len() <= 255
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
}
