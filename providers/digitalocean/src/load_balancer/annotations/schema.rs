//! Every Service annotation the DigitalOcean provider reads, described
//! once for the service controller's warnings and the admission webhook: a
//! value here is accepted whenever the provider's own parser
//! ([`super::Reader`] and `options.rs`) accepts it.
//!
//! The provider reads a blank value as no value, so every entry accepts
//! blank. Where it reads a key only with another one (the health-check
//! override, cookie sticky sessions), the entry accepts anything: the
//! provider ignores the key unread otherwise. No entry declares a
//! requirement or conflict: each of the provider's (a certificate for
//! HTTP/3, size-slug or size-unit, cookie settings) depends on values or
//! treats blank as absent, so `check_service` judges them.

use std::net::IpAddr;

use cloud_provider::annotations::{Annotation, AnnotationSchema, Value, parse_bool};

use super::*;
use crate::config::is_uuid;
use crate::load_balancer::options::{is_firewall_rule, is_load_balancer_name};

/// Upstream's namespaces: its annotations, the keys it records on a
/// Service, and the disown key's.
const PREFIXES: &[&str] = &[
    PREFIX,
    RECORD_PREFIX,
    "service.kubernetes.io/do-loadbalancer-",
];

/// What to do about a setting DigitalOcean fixes when it creates the load
/// balancer.
const RECREATE: &str = "DigitalOcean fixes it when the load balancer is created; delete and \
    recreate the Service (or create a new one and move traffic to it) to change it";

/// A value `check` accepts, or blank.
macro_rules! or_blank {
    ($expected:expr, $check:expr) => {
        Value::Custom {
            expected: $expected,
            check: {
                fn check(v: &str) -> bool {
                    v.is_empty() || $check(v)
                }
                check
            },
        }
    };
}

/// A whole number from `$min` to `$max`, or blank.
macro_rules! int_or_blank {
    ($min:literal, $max:literal) => {
        Value::Custom {
            expected: concat!("a whole number from ", $min, " to ", $max),
            check: is_int_or_blank::<$min, $max>,
        }
    };
}

const BOOL: Value = or_blank!("true or false", |v| parse_bool(v).is_some());

const PORTS: Value = or_blank!(
    "comma-separated port numbers, such as 443,8443",
    |v: &str| v.split(',').all(|p| port(p.trim()).is_some())
);

const FIREWALL_RULES: Value = or_blank!(
    "comma-separated `ip:<address>` or `cidr:<network>` rules",
    |v: &str| {
        v.split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .all(is_firewall_rule)
    }
);

/// Every annotation the DigitalOcean provider honours.
pub static SCHEMA: AnnotationSchema = AnnotationSchema {
    prefixes: PREFIXES,
    annotations: &[
        // Recorded by the provider on every ensure.
        Annotation::new(
            LOAD_BALANCER_ID,
            or_blank!("the load balancer's UUID", is_uuid),
        ),
        // Read on NodePort Services; a malformed value is logged and read
        // as managed, so none is refused.
        Annotation::new(FIREWALL_MANAGED, Value::Text),
        Annotation::new(DISOWN, BOOL),
        Annotation::new(
            NAME,
            or_blank!(
                "at most 255 letters, digits, `.` and `-`, starting with a letter or digit",
                is_load_balancer_name
            ),
        ),
        // The type cannot change either, but the provider records it on the
        // Service after creating the load balancer (as upstream does), which
        // an immutable entry would refuse; the ensure refuses a change.
        Annotation::new(
            TYPE,
            or_blank!("`REGIONAL` or `REGIONAL_NETWORK`", |v| {
                LoadBalancerType::parse(v).is_some()
            }),
        ),
        Annotation::new(
            NETWORK,
            or_blank!("`EXTERNAL` or `INTERNAL`", |v| NETWORKS.contains(&v)),
        )
        .immutable(RECREATE),
        Annotation::new(
            NETWORK_STACK,
            or_blank!("`IPV4` or `DUALSTACK`", |v| NETWORK_STACKS.contains(&v)),
        )
        .immutable(RECREATE),
        // Sent only when the load balancer is created.
        Annotation::new(
            IP,
            or_blank!("an IP address", |v: &str| v.parse::<IpAddr>().is_ok()),
        )
        .immutable(RECREATE),
        // Sent on create, never compared after: a change would not move it.
        Annotation::new(SUBNET_UUID, or_blank!("a subnet UUID", is_uuid)).immutable(RECREATE),
        Annotation::new(CERTIFICATE_NAME, Value::Text),
        Annotation::new(
            HTTP3_PORT,
            or_blank!("a single service port", |v| port(v).is_some()),
        ),
        Annotation::new(
            PROTOCOL,
            or_blank!("one of `tcp`, `http`, `https` or `http2`", |v| {
                PROTOCOLS.contains(&v)
            }),
        ),
        Annotation::new(HTTP_PORTS, PORTS),
        Annotation::new(TLS_PORTS, PORTS),
        Annotation::new(HTTP2_PORTS, PORTS),
        // Recorded by the provider when it chose the certificate by name.
        Annotation::new(CERTIFICATE_ID, Value::Text),
        Annotation::new(TLS_PASSTHROUGH, BOOL),
        Annotation::new(REDIRECT_HTTP_TO_HTTPS, BOOL),
        Annotation::new(ENABLE_PROXY_PROTOCOL, BOOL),
        Annotation::new(ENABLE_BACKEND_KEEPALIVE, BOOL),
        Annotation::new(DISABLE_LETS_ENCRYPT_DNS_RECORDS, BOOL),
        Annotation::new(HTTP_IDLE_TIMEOUT_SECONDS, int_or_blank!(30, 600)),
        Annotation::new(HOSTNAME, Value::Text),
        Annotation::new(
            ALGORITHM,
            or_blank!("`round_robin` or `least_connections`", |v| {
                ALGORITHMS.contains(&v)
            }),
        )
        .deprecated("DigitalOcean ignores the algorithm; remove the annotation"),
        Annotation::new(
            SIZE_SLUG,
            or_blank!("one of `lb-small`, `lb-medium` or `lb-large`", |v| {
                SIZE_SLUGS.contains(&v)
            }),
        )
        .deprecated("use service.beta.kubernetes.io/do-loadbalancer-size-unit instead"),
        Annotation::new(SIZE_UNIT, int_or_blank!(1, 100)),
        Annotation::new(
            STICKY_SESSIONS_TYPE,
            or_blank!("`none` or `cookies`", |v| STICKY_SESSIONS_TYPES
                .contains(&v)),
        ),
        Annotation::new(STICKY_SESSIONS_COOKIE_NAME, Value::Text),
        // Read only with sticky-sessions-type `cookies`.
        Annotation::new(STICKY_SESSIONS_COOKIE_TTL, Value::Text),
        // Present, whatever its value: the three after it take effect.
        Annotation::new(OVERRIDE_HEALTH_CHECK, Value::Text),
        // Read only with override-health-check.
        Annotation::new(HEALTHCHECK_PROTOCOL, Value::Text),
        Annotation::new(HEALTHCHECK_PORT, Value::Text),
        Annotation::new(HEALTHCHECK_PATH, Value::Text),
        Annotation::new(HEALTHCHECK_CHECK_INTERVAL_SECONDS, int_or_blank!(3, 300)),
        Annotation::new(HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS, int_or_blank!(3, 300)),
        Annotation::new(HEALTHCHECK_UNHEALTHY_THRESHOLD, int_or_blank!(2, 10)),
        Annotation::new(HEALTHCHECK_HEALTHY_THRESHOLD, int_or_blank!(2, 10)),
        // Ignored when spec.loadBalancerSourceRanges is set.
        Annotation::new(ALLOW_RULES, FIREWALL_RULES)
            .deprecated("set spec.loadBalancerSourceRanges instead"),
        Annotation::new(DENY_RULES, FIREWALL_RULES),
    ],
};

fn is_int_or_blank<const MIN: u32, const MAX: u32>(v: &str) -> bool {
    v.is_empty() || v.parse::<u32>().is_ok_and(|n| (MIN..=MAX).contains(&n))
}

#[cfg(test)]
mod tests;
