//! Every Service annotation the AWS provider reads, described once for the
//! service controller's warnings and the admission webhook: a value here
//! is accepted whenever the provider's own parser ([`super::Annotations`]
//! and `spec.rs`) accepts it. Where the provider reads a key only in some
//! configurations, its entry is as loose as the laxest of them, and the
//! provider's `check_service` catches the rest.
//!
//! Each entry also says what upstream's cloud-controller-manager
//! (`kubernetes/cloud-provider-aws` v1.36, `pkg/providers/v1`) does when
//! the key is at fault: the admission webhook denies only where upstream
//! fails the Service (its `EnsureLoadBalancer` returns an error, or AWS
//! refuses the call it makes) and admits the rest with a warning.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use ccm_cloud_provider::annotations::{Annotation, AnnotationSchema, Value, parse_bool};
use ccm_cloud_provider::ipnet::IpNet;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;

use super::*;

/// The provider's own namespace; the source-ranges key is Kubernetes'.
const PREFIXES: &[&str] = &["service.beta.kubernetes.io/aws-load-balancer-"];

/// What to do about an annotation that is only read when the load balancer
/// is created.
const RECREATE: &str = "the load balancer's subnets and addresses are chosen when it is created; \
    delete and recreate the Service (or create a new one and move traffic to it) to change them";

/// What upstream does with a change of an annotation it reads only when it
/// creates the load balancer.
const CREATE_ONLY: &str = "upstream reads it only when it creates the load balancer";

/// Every annotation the AWS provider honours.
pub static SCHEMA: AnnotationSchema = AnnotationSchema {
    prefixes: PREFIXES,
    annotations: &[
        // No value (or a name for it) means a classic ELB, as upstream.
        Annotation::new(
            TYPE,
            Value::Custom {
                expected: "`nlb`, `external`, `nlb-ip`, or none for a classic ELB",
                check: is_type,
            },
        )
        .upstream_accepts(
            "upstream makes a classic ELB of any value but `nlb`, `external` and `nlb-ip`",
        )
        .immutable(
            "a load balancer cannot become another kind or be handed to another controller in \
             place; delete and recreate the Service (or create a new one and move traffic to \
             it) to get a load balancer of the other kind",
        )
        // aws_validations.go: the ensure fails when the Service asks for
        // the other kind than its ingress hostname shows.
        .upstream_fails_change(
            "upstream (v1.36+) fails the ensure when the type asks for the other kind of load \
             balancer",
        )
        .meaning(kind_meaning),
        Annotation::new(
            INTERNAL,
            Value::Custom {
                expected: "true or false",
                check: is_internal_value,
            },
        )
        .upstream_accepts("upstream makes the load balancer internal for any value but `false`")
        .immutable(
            "AWS cannot switch a load balancer between internal and internet-facing; delete \
             and recreate the Service (or create a new one and move traffic to it) to get the \
             other scheme",
        )
        // "TODO: Sync internal vs non-internal" in both ensures.
        .upstream_accepts_change(
            "upstream keeps the scheme the load balancer was created with",
        )
        .meaning(internal_meaning),
        Annotation::new(
            SUBNETS,
            Value::List(&Value::Custom {
                expected: "subnet IDs or Name tags",
                check: is_anything,
            }),
        )
        .upstream_fails("upstream fails on an empty subnet list")
        .immutable(RECREATE)
        .upstream_accepts_change(
            "upstream keeps a Network Load Balancer's subnets (and moves a classic ELB's)",
        )
        .meaning(fixed_on_nlbs),
        Annotation::new(
            EIP_ALLOCATIONS,
            Value::List(&Value::Custom {
                expected: "Elastic IP allocation IDs such as eipalloc-0123456789abcdef0",
                check: is_allocation_id,
            }),
        )
        .upstream_fails("AWS refuses to create a load balancer with it")
        .immutable(RECREATE)
        .upstream_accepts_change(CREATE_ONLY),
        // Without `internal: "true"` the provider refuses private addresses.
        Annotation::new(
            PRIVATE_IPV4_ADDRESSES,
            Value::List(&Value::Custom {
                expected: "IPv4 addresses",
                check: is_ipv4,
            }),
        )
        .requires(&[INTERNAL])
        .upstream_fails(
            "AWS refuses to create a load balancer with it, or with private addresses on an \
             internet-facing one",
        )
        .immutable(RECREATE)
        .upstream_accepts_change(CREATE_ONLY),
        Annotation::new(
            HEALTHCHECK_PROTOCOL,
            // SSL only for classic ELBs.
            Value::OneOfIgnoreCase(&["TCP", "HTTP", "HTTPS", "SSL"]),
        )
        .upstream_fails(
            "upstream fails a Network Load Balancer on any but TCP, HTTP and HTTPS, and AWS a \
             classic ELB's health check on any but those and SSL",
        ),
        Annotation::new(
            HEALTHCHECK_PORT,
            Value::Custom {
                expected: "traffic-port or a port number from 1 to 65535",
                check: is_health_check_port,
            },
        )
        .upstream_fails(
            "upstream fails on a value that is neither traffic-port nor a number, and AWS on a \
             port outside 1 to 65535",
        ),
        // Checked for a leading `/` only when the health check is HTTP(S);
        // a TCP check ignores it.
        Annotation::new(HEALTHCHECK_PATH, Value::Text)
            .upstream_fails("AWS refuses an HTTP health check whose path is not absolute"),
        Annotation::new(HEALTHCHECK_INTERVAL, Value::Int { min: 5, max: 300 }).upstream_fails(
            "upstream fails on a value that is not a number, and AWS on one outside 5 to 300",
        ),
        Annotation::new(HEALTHCHECK_TIMEOUT, Value::Int { min: 2, max: 120 }).upstream_fails(
            "upstream fails on a value that is not a number, and AWS on one outside 2 to 120 \
             or not below the interval",
        ),
        Annotation::new(
            HEALTHCHECK_HEALTHY_THRESHOLD,
            Value::Int { min: 2, max: 10 },
        )
        .upstream_fails(THRESHOLD_REFUSED),
        Annotation::new(
            HEALTHCHECK_UNHEALTHY_THRESHOLD,
            Value::Int { min: 2, max: 10 },
        )
        .upstream_fails(THRESHOLD_REFUSED),
        Annotation::new(
            PROXY_PROTOCOL,
            Value::Custom {
                expected: "`*` (every target)",
                check: is_blank_or_star,
            },
        )
        .upstream_fails_when(
            is_classic,
            "upstream fails a classic ELB on any value but `*` and ignores the key on a Network \
             Load Balancer",
        ),
        Annotation::new(
            TARGET_NODE_LABELS,
            Value::Custom {
                expected: "key=value pairs separated by commas",
                check: is_key_values,
            },
        )
        .upstream_accepts("upstream skips an item without a key"),
        Annotation::new(
            ADDITIONAL_RESOURCE_TAGS,
            Value::Custom {
                expected: "key=value pairs separated by commas",
                check: is_key_values,
            },
        )
        .upstream_accepts("upstream skips an item without a key"),
        // aws_validations.go, also for the key on a classic ELB.
        Annotation::new(
            TARGET_GROUP_ATTRIBUTES,
            Value::Custom {
                expected: "key=value target group attributes of a Network Load Balancer, such as \
                    preserve_client_ip.enabled=false",
                check: attributes::is_valid_annotation,
            },
        )
        .upstream_fails(
            "upstream (v1.36+) fails on an attribute it does not support, a malformed value, or \
             the key on a classic ELB",
        ),
        Annotation::new(CROSS_ZONE_LOAD_BALANCING_ENABLED, Value::Bool)
            .upstream_fails("upstream fails on a value Go's strconv.ParseBool refuses"),
        Annotation::new(
            SSL_CERT,
            Value::Custom {
                expected: "a certificate ARN such as arn:aws:acm:us-east-1:123456789012:certificate/...",
                check: is_certificate_arn,
            },
        )
        .upstream_fails("AWS refuses a TLS listener whose certificate is not an ARN"),
        // Without a certificate the provider ignores the ports and policy,
        // so neither requires one.
        Annotation::new(
            SSL_PORTS,
            Value::Custom {
                expected: "`*` or comma-separated port numbers or names",
                check: is_ssl_ports,
            },
        )
        .upstream_accepts("upstream reads blank items as names no port has"),
        Annotation::new(SSL_NEGOTIATION_POLICY, Value::Text)
            .upstream_fails("AWS refuses a security policy it does not know"),
        // Not one of upstream's keys: the AWS Load Balancer Controller's.
        Annotation::new(
            IP_ADDRESS_TYPE,
            Value::Custom {
                expected: "`ipv4` or `dualstack`",
                check: is_ip_address_type,
            },
        )
        .upstream_accepts("upstream does not read the key"),
        // Read only when `spec.loadBalancerSourceRanges` is empty; the API
        // server checks the same CIDRs on every LoadBalancer Service.
        Annotation::new(
            SOURCE_RANGES,
            Value::Custom {
                expected: "comma-separated CIDRs such as 203.0.113.0/24",
                check: is_cidr_list,
            },
        )
        .deprecated("set spec.loadBalancerSourceRanges instead")
        .upstream_fails("upstream fails on a CIDR it cannot parse"),
        // Classic ELBs only; a Network Load Balancer's `check_service`
        // refuses them. Upstream reads access-log-enabled (and the bucket)
        // on both kinds, the rest on classic ELBs only.
        Annotation::new(ACCESS_LOG_EMIT_INTERVAL, Value::OneOf(&["5", "60"])).upstream_fails_when(
            is_classic,
            "upstream fails a classic ELB on a value that is not a number, and AWS on one but 5 \
             and 60; it ignores the key on a Network Load Balancer",
        ),
        Annotation::new(ACCESS_LOG_ENABLED, Value::Bool).upstream_fails(
            "upstream fails on a value Go's strconv.ParseBool refuses, and AWS on access logs \
             without a bucket",
        ),
        Annotation::new(ACCESS_LOG_S3_BUCKET_NAME, Value::Text),
        Annotation::new(ACCESS_LOG_S3_BUCKET_PREFIX, Value::Text),
        Annotation::new(CONNECTION_DRAINING_ENABLED, Value::Bool).upstream_fails_when(
            is_classic,
            "upstream fails a classic ELB on a value Go's strconv.ParseBool refuses and ignores \
             the key on a Network Load Balancer",
        ),
        Annotation::new(
            CONNECTION_DRAINING_TIMEOUT,
            Value::Int { min: 1, max: 3600 },
        )
        .upstream_fails_when(is_classic, CLASSIC_NUMBER_REFUSED),
        Annotation::new(CONNECTION_IDLE_TIMEOUT, Value::Int { min: 1, max: 4000 })
            .upstream_fails_when(is_classic, CLASSIC_NUMBER_REFUSED),
        // `ssl` also needs a certificate, which `check_service` checks.
        Annotation::new(
            BACKEND_PROTOCOL,
            Value::Custom {
                expected: "`tcp` or `ssl`, or for classic ELBs also `http` or `https`",
                check: is_backend_protocol,
            },
        )
        .upstream_fails_when(
            is_classic_with_certificate,
            "upstream fails a classic ELB with a certificate on a protocol it does not know, and \
             ignores the key otherwise",
        ),
        // Whether the load balancer can have security groups at all (the
        // config's mode; one made without cannot gain them) is
        // `check_service`'s and the ensure's to say.
        Annotation::new(
            SECURITY_GROUPS,
            Value::Custom {
                expected: "comma-separated security group IDs such as sg-0123456789abcdef0",
                check: is_security_group_list,
            },
        )
        .upstream_fails_when(
            is_classic,
            "AWS refuses a classic ELB's group that is not an ID; upstream gives a Network Load \
             Balancer the groups only in the managed security group mode",
        ),
        Annotation::new(
            EXTRA_SECURITY_GROUPS,
            Value::Custom {
                expected: "comma-separated security group IDs such as sg-0123456789abcdef0",
                check: is_security_group_list,
            },
        )
        .upstream_fails(
            "AWS refuses a classic ELB's group that is not an ID, and upstream (v1.36+) fails a \
             Network Load Balancer with the key at all",
        ),
    ],
};

/// Where a bad health check threshold fails.
const THRESHOLD_REFUSED: &str =
    "upstream fails on a value that is not a number, and AWS on one outside 2 to 10";

/// Where a classic ELB's bad connection setting fails.
const CLASSIC_NUMBER_REFUSED: &str = "upstream fails a classic ELB on a value that is not a \
    number, and AWS on one out of range; it ignores the key on a Network Load Balancer";

/// The type annotation's value, as upstream reads it (`isNLB`: exactly
/// `nlb`), trimmed.
fn type_of(service: &Service) -> &str {
    service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TYPE))
        .map_or("", |t| t.trim())
}

/// Upstream makes a classic ELB of the Service.
fn is_classic(service: &Service) -> bool {
    type_of(service) != "nlb"
}

/// A classic ELB whose listeners terminate TLS.
fn is_classic_with_certificate(service: &Service) -> bool {
    is_classic(service)
        && service
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SSL_CERT))
            .is_some_and(|c| !c.trim().is_empty())
}

/// The kind of load balancer a type asks for, as upstream tells them apart
/// on a change: an NLB (the AWS Load Balancer Controller's too) or a
/// classic ELB (none, a name for it, or any other value).
fn kind_meaning<'a>(value: Option<&'a str>, _: &'a BTreeMap<String, String>) -> Option<&'a str> {
    Some(match value.unwrap_or_default() {
        "nlb" | "external" | "nlb-ip" => "nlb",
        _ => "classic",
    })
}

/// The scheme, as the provider reads it: unset, blank or false are
/// internet-facing.
fn internal_meaning<'a>(
    value: Option<&'a str>,
    _: &'a BTreeMap<String, String>,
) -> Option<&'a str> {
    Some(match value.unwrap_or_default() {
        "" => "false",
        "0.0.0.0/0" => "true",
        other => match parse_bool(other) {
            Some(true) => "true",
            Some(false) => "false",
            None => other,
        },
    })
}

/// The value on a Network Load Balancer, which keeps it as created; one
/// value for every other Service, whose classic ELB follows a change.
fn fixed_on_nlbs<'a>(
    value: Option<&'a str>,
    annotations: &'a BTreeMap<String, String>,
) -> Option<&'a str> {
    let nlb = annotations.get(TYPE).is_some_and(|t| t.trim() == "nlb");
    if nlb {
        Some(value.unwrap_or_default())
    } else {
        Some("")
    }
}

fn is_anything(_: &str) -> bool {
    true
}

/// Unset when blank; upstream's old documented `0.0.0.0/0` means internal.
fn is_type(v: &str) -> bool {
    matches!(
        v.trim(),
        "" | "nlb" | "external" | "nlb-ip" | "classic" | "clb" | "elb"
    )
}

fn is_internal_value(v: &str) -> bool {
    v.is_empty() || v == "0.0.0.0/0" || parse_bool(v).is_some()
}

fn is_allocation_id(v: &str) -> bool {
    v.starts_with("eipalloc-")
}

fn is_ipv4(v: &str) -> bool {
    v.parse::<Ipv4Addr>().is_ok()
}

fn is_health_check_port(v: &str) -> bool {
    v == "traffic-port" || v.parse::<i32>().is_ok_and(|p| (1..=65535).contains(&p))
}

fn is_blank_or_star(v: &str) -> bool {
    v.is_empty() || v == "*"
}

fn is_key_values(v: &str) -> bool {
    key_value_pairs(v).is_ok()
}

/// Blank is no certificate.
fn is_certificate_arn(v: &str) -> bool {
    v.is_empty() || v.starts_with("arn:")
}

/// Blank and `*` are every port; otherwise a list with at least one item.
fn is_ssl_ports(v: &str) -> bool {
    v.is_empty() || v == "*" || v.split(',').any(|p| !p.trim().is_empty())
}

/// Blank items are dropped, as upstream's `getSGListFromAnnotation` does.
fn is_security_group_list(v: &str) -> bool {
    v.split(',')
        .map(str::trim)
        .all(|id| id.is_empty() || id.starts_with("sg-"))
}

fn is_backend_protocol(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "" | "tcp" | "ssl" | "http" | "https"
    )
}

fn is_ip_address_type(v: &str) -> bool {
    matches!(v, "" | "ipv4" | "dualstack")
}

/// Blank items are dropped, and a blank value is refused only when the
/// provider reads it (no `spec.loadBalancerSourceRanges`).
fn is_cidr_list(v: &str) -> bool {
    v.split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .all(|r| r.parse::<IpNet>().is_ok())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod upstream_tests;
