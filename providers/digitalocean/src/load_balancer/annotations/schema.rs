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
//!
//! Each entry also says what upstream's cloud-controller-manager
//! (`digitalocean-cloud-controller-manager`, `do/loadbalancers.go`) does
//! when the key is at fault: the admission webhook denies only where
//! upstream fails the Service (its parser, or DigitalOcean's API on the
//! request it sends) and admits the rest with a warning.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ccm_cloud_provider::annotations::{Annotation, AnnotationSchema, Value, parse_bool};
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;

use super::*;
use crate::config::is_uuid;

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

/// What DigitalOcean's API does with a change of what it fixes at
/// creation, which upstream sends with every update.
const CHANGE_REFUSED: &str =
    "DigitalOcean's API refuses to change it, and upstream sends it with every update";

/// Where a malformed boolean fails.
const BOOL_REFUSED: &str = "upstream fails on a value Go's strconv.ParseBool refuses";

/// Where a malformed port list fails.
const PORTS_REFUSED: &str = "upstream fails on an item that is not a number";

/// Where a malformed health check setting fails.
const HEALTH_CHECK_REFUSED: &str = "upstream fails on a value that is not a number, and \
    DigitalOcean's API on one out of range";

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
        )
        .upstream_accepts(
            "upstream looks the load balancer up by it and, finding none, creates one",
        ),
        // Read on NodePort Services; a malformed value is logged and read
        // as managed, so none is refused.
        Annotation::new(FIREWALL_MANAGED, Value::Text),
        Annotation::new(DISOWN, BOOL).upstream_fails(BOOL_REFUSED),
        Annotation::new(
            NAME,
            or_blank!(
                "at most 255 letters, digits, `.` and `-`, starting with a letter or digit",
                is_load_balancer_name
            ),
        )
        .upstream_fails("DigitalOcean's API refuses such a name"),
        // The type cannot change either, but the provider records it on the
        // Service after creating the load balancer (as upstream does), which
        // an immutable entry would refuse; the ensure refuses a change.
        Annotation::new(
            TYPE,
            or_blank!("`REGIONAL` or `REGIONAL_NETWORK`", |v| {
                LoadBalancerType::parse(v).is_some()
            }),
        )
        .upstream_fails("upstream fails on any value but REGIONAL and REGIONAL_NETWORK"),
        Annotation::new(
            NETWORK,
            or_blank!("`EXTERNAL` or `INTERNAL`", |v| NETWORKS.contains(&v)),
        )
        .upstream_fails("upstream fails on any value but EXTERNAL and INTERNAL")
        .immutable(RECREATE)
        .upstream_fails_change(CHANGE_REFUSED)
        .meaning(network_meaning),
        Annotation::new(
            NETWORK_STACK,
            or_blank!("`IPV4` or `DUALSTACK`", |v| NETWORK_STACKS.contains(&v)),
        )
        .upstream_fails(
            "upstream fails on any value but IPV4 and DUALSTACK, and on DUALSTACK for an internal \
             load balancer",
        )
        .immutable(RECREATE)
        .upstream_fails_change(CHANGE_REFUSED)
        .meaning(network_stack_meaning),
        // Sent only when the load balancer is created.
        Annotation::new(
            IP,
            or_blank!("an IP address", |v: &str| v.parse::<IpAddr>().is_ok()),
        )
        .upstream_fails("DigitalOcean's API refuses to create a load balancer with it")
        .immutable(RECREATE)
        .upstream_accepts_change("upstream sends it only when it creates the load balancer")
        .meaning(blank_is_unset),
        // Sent on create, never compared after: a change would not move it.
        Annotation::new(SUBNET_UUID, or_blank!("a subnet UUID", is_uuid))
            .upstream_fails("DigitalOcean's API refuses it")
            .immutable(RECREATE)
            .upstream_accepts_change(
                "upstream does not compare it with the subnet the load balancer is in",
            )
            .meaning(blank_is_unset),
        Annotation::new(CERTIFICATE_NAME, Value::Text)
            .upstream_fails("upstream fails when no certificate has the name"),
        Annotation::new(
            HTTP3_PORT,
            or_blank!("a single service port", |v| port(v).is_some()),
        )
        .upstream_fails(
            "upstream fails on a value that is not a number, and on HTTP/3 without a certificate",
        ),
        Annotation::new(
            PROTOCOL,
            or_blank!("one of `tcp`, `http`, `https` or `http2`", |v| {
                PROTOCOLS.contains(&v)
            }),
        )
        .upstream_fails("upstream fails on a protocol it does not know"),
        Annotation::new(HTTP_PORTS, PORTS).upstream_fails(PORTS_REFUSED),
        Annotation::new(TLS_PORTS, PORTS).upstream_fails(PORTS_REFUSED),
        Annotation::new(HTTP2_PORTS, PORTS).upstream_fails(PORTS_REFUSED),
        // Recorded by the provider when it chose the certificate by name.
        Annotation::new(CERTIFICATE_ID, Value::Text)
            .upstream_fails("upstream fails on a certificate together with TLS passthrough"),
        Annotation::new(TLS_PASSTHROUGH, BOOL)
            .upstream_accepts("upstream reads a value Go's strconv.ParseBool refuses as false"),
        Annotation::new(REDIRECT_HTTP_TO_HTTPS, BOOL).upstream_fails(BOOL_REFUSED),
        Annotation::new(ENABLE_PROXY_PROTOCOL, BOOL).upstream_fails(BOOL_REFUSED),
        Annotation::new(ENABLE_BACKEND_KEEPALIVE, BOOL).upstream_fails(BOOL_REFUSED),
        Annotation::new(DISABLE_LETS_ENCRYPT_DNS_RECORDS, BOOL).upstream_fails(BOOL_REFUSED),
        Annotation::new(HTTP_IDLE_TIMEOUT_SECONDS, int_or_blank!(30, 600)).upstream_fails(
            "upstream fails on a value that is not a number, and DigitalOcean's API on one \
             outside 30 to 600",
        ),
        Annotation::new(HOSTNAME, Value::Text),
        Annotation::new(
            ALGORITHM,
            or_blank!("`round_robin` or `least_connections`", |v| {
                ALGORITHMS.contains(&v)
            }),
        )
        .deprecated("DigitalOcean ignores the algorithm; remove the annotation")
        .upstream_accepts("upstream reads any value but least_connections as round_robin"),
        Annotation::new(
            SIZE_SLUG,
            or_blank!("one of `lb-small`, `lb-medium` or `lb-large`", |v| {
                SIZE_SLUGS.contains(&v)
            }),
        )
        .deprecated("use service.beta.kubernetes.io/do-loadbalancer-size-unit instead")
        .upstream_fails("upstream fails on another slug, and on a slug with a size unit"),
        Annotation::new(SIZE_UNIT, int_or_blank!(1, 100)).upstream_fails(
            "upstream fails on a value that is not a number, and DigitalOcean's API on a size \
             outside 1 to 100",
        ),
        Annotation::new(
            STICKY_SESSIONS_TYPE,
            or_blank!("`none` or `cookies`", |v| STICKY_SESSIONS_TYPES
                .contains(&v)),
        )
        .upstream_accepts("upstream reads any value but cookies as none"),
        Annotation::new(STICKY_SESSIONS_COOKIE_NAME, Value::Text)
            .upstream_fails("upstream fails cookie sticky sessions without a cookie name"),
        // Read only with sticky-sessions-type `cookies`.
        Annotation::new(STICKY_SESSIONS_COOKIE_TTL, Value::Text)
            .upstream_fails("upstream fails cookie sticky sessions without a TTL that is a number"),
        // Present, whatever its value: the three after it take effect.
        Annotation::new(OVERRIDE_HEALTH_CHECK, Value::Text),
        // Read only with override-health-check.
        Annotation::new(HEALTHCHECK_PROTOCOL, Value::Text).upstream_fails(
            "upstream fails an overridden health check on a protocol it does not know",
        ),
        Annotation::new(HEALTHCHECK_PORT, Value::Text).upstream_fails(
            "upstream fails an overridden health check on a port the Service does not have",
        ),
        Annotation::new(HEALTHCHECK_PATH, Value::Text),
        Annotation::new(HEALTHCHECK_CHECK_INTERVAL_SECONDS, int_or_blank!(3, 300))
            .upstream_fails(HEALTH_CHECK_REFUSED),
        Annotation::new(HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS, int_or_blank!(3, 300))
            .upstream_fails(HEALTH_CHECK_REFUSED),
        Annotation::new(HEALTHCHECK_UNHEALTHY_THRESHOLD, int_or_blank!(2, 10))
            .upstream_fails(HEALTH_CHECK_REFUSED),
        Annotation::new(HEALTHCHECK_HEALTHY_THRESHOLD, int_or_blank!(2, 10))
            .upstream_fails(HEALTH_CHECK_REFUSED),
        // Ignored when spec.loadBalancerSourceRanges is set.
        Annotation::new(ALLOW_RULES, FIREWALL_RULES)
            .deprecated("set spec.loadBalancerSourceRanges instead")
            .upstream_fails_when(
                without_source_ranges,
                "DigitalOcean's API refuses a malformed rule, which upstream sends unless \
                 spec.loadBalancerSourceRanges is set",
            ),
        Annotation::new(DENY_RULES, FIREWALL_RULES)
            .upstream_fails("DigitalOcean's API refuses a malformed rule"),
    ],
};

/// The network, as upstream reads it: blank or unset is `EXTERNAL`.
fn network_meaning<'a>(value: Option<&'a str>, _: &'a BTreeMap<String, String>) -> Option<&'a str> {
    Some(value.filter(|v| !v.is_empty()).unwrap_or("EXTERNAL"))
}

/// The network stack, as upstream reads it: unset is `IPV4` on an
/// internal load balancer and `DUALSTACK` on a `REGIONAL` one; on a
/// `REGIONAL_NETWORK` one it depends on the nodes, and without a type on
/// `DEFAULT_LB_TYPE`, which the Service does not tell.
fn network_stack_meaning<'a>(
    value: Option<&'a str>,
    annotations: &'a BTreeMap<String, String>,
) -> Option<&'a str> {
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        return Some(v);
    }
    let network = network_meaning(annotations.get(NETWORK).map(|v| v.trim()), annotations);
    if network == Some("INTERNAL") {
        return Some("IPV4");
    }
    match annotations.get(TYPE).map(|t| t.trim()) {
        Some("REGIONAL") => Some("DUALSTACK"),
        _ => None,
    }
}

/// Blank is unset, as the provider reads every key.
fn blank_is_unset<'a>(value: Option<&'a str>, _: &'a BTreeMap<String, String>) -> Option<&'a str> {
    Some(value.unwrap_or_default())
}

/// The Service's allow rules are read: it sets no
/// `spec.loadBalancerSourceRanges`.
fn without_source_ranges(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_source_ranges.as_ref())
        .is_none_or(Vec::is_empty)
}

fn is_int_or_blank<const MIN: u32, const MAX: u32>(v: &str) -> bool {
    v.is_empty() || v.parse::<u32>().is_ok_and(|n| (MIN..=MAX).contains(&n))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod upstream_tests;
