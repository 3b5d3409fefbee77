//! Every Service annotation the AWS provider reads, described once for the
//! service controller's warnings and the admission webhook: a value here
//! is accepted whenever the provider's own parser ([`super::Annotations`]
//! and `spec.rs`) accepts it. Where the provider reads a key only in some
//! configurations, its entry is as loose as the laxest of them, and the
//! provider's `check_service` catches the rest.

use std::net::Ipv4Addr;

use cloud_provider::annotations::{Annotation, AnnotationSchema, Value, parse_bool};
use cloud_provider::ipnet::IpNet;

use super::*;

/// The provider's own namespace; the source-ranges key is Kubernetes'.
const PREFIXES: &[&str] = &["service.beta.kubernetes.io/aws-load-balancer-"];

/// What to do about an annotation that is only read when the load balancer
/// is created.
const RECREATE: &str = "the load balancer's subnets and addresses are chosen when it is created; \
    delete and recreate the Service (or create a new one and move traffic to it) to change them";

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
        .immutable(
            "a load balancer cannot become another kind or be handed to another controller in \
             place; delete and recreate the Service (or create a new one and move traffic to \
             it) to get a load balancer of the other kind",
        ),
        Annotation::new(
            INTERNAL,
            Value::Custom {
                expected: "true or false",
                check: is_internal_value,
            },
        )
        .immutable(
            "AWS cannot switch a load balancer between internal and internet-facing; delete \
             and recreate the Service (or create a new one and move traffic to it) to get the \
             other scheme",
        ),
        Annotation::new(
            SUBNETS,
            Value::List(&Value::Custom {
                expected: "subnet IDs or Name tags",
                check: is_anything,
            }),
        )
        .immutable(RECREATE),
        Annotation::new(
            EIP_ALLOCATIONS,
            Value::List(&Value::Custom {
                expected: "Elastic IP allocation IDs such as eipalloc-0123456789abcdef0",
                check: is_allocation_id,
            }),
        )
        .immutable(RECREATE),
        // Without `internal: "true"` the provider refuses private addresses.
        Annotation::new(
            PRIVATE_IPV4_ADDRESSES,
            Value::List(&Value::Custom {
                expected: "IPv4 addresses",
                check: is_ipv4,
            }),
        )
        .requires(&[INTERNAL])
        .immutable(RECREATE),
        Annotation::new(
            HEALTHCHECK_PROTOCOL,
            // SSL only for classic ELBs.
            Value::OneOfIgnoreCase(&["TCP", "HTTP", "HTTPS", "SSL"]),
        ),
        Annotation::new(
            HEALTHCHECK_PORT,
            Value::Custom {
                expected: "traffic-port or a port number from 1 to 65535",
                check: is_health_check_port,
            },
        ),
        // Checked for a leading `/` only when the health check is HTTP(S);
        // a TCP check ignores it.
        Annotation::new(HEALTHCHECK_PATH, Value::Text),
        Annotation::new(HEALTHCHECK_INTERVAL, Value::Int { min: 5, max: 300 }),
        Annotation::new(HEALTHCHECK_TIMEOUT, Value::Int { min: 2, max: 120 }),
        Annotation::new(
            HEALTHCHECK_HEALTHY_THRESHOLD,
            Value::Int { min: 2, max: 10 },
        ),
        Annotation::new(
            HEALTHCHECK_UNHEALTHY_THRESHOLD,
            Value::Int { min: 2, max: 10 },
        ),
        Annotation::new(
            PROXY_PROTOCOL,
            Value::Custom {
                expected: "`*` (every target)",
                check: is_blank_or_star,
            },
        ),
        Annotation::new(
            TARGET_NODE_LABELS,
            Value::Custom {
                expected: "key=value pairs separated by commas",
                check: is_key_values,
            },
        ),
        Annotation::new(
            ADDITIONAL_RESOURCE_TAGS,
            Value::Custom {
                expected: "key=value pairs separated by commas",
                check: is_key_values,
            },
        ),
        Annotation::new(
            TARGET_GROUP_ATTRIBUTES,
            Value::Custom {
                expected: "key=value target group attributes of a Network Load Balancer, such as \
                    preserve_client_ip.enabled=false",
                check: crate::load_balancer::attributes::is_valid_annotation,
            },
        ),
        Annotation::new(CROSS_ZONE_LOAD_BALANCING_ENABLED, Value::Bool),
        Annotation::new(
            SSL_CERT,
            Value::Custom {
                expected: "a certificate ARN such as arn:aws:acm:us-east-1:123456789012:certificate/...",
                check: is_certificate_arn,
            },
        ),
        // Without a certificate the provider ignores the ports and policy,
        // so neither requires one.
        Annotation::new(
            SSL_PORTS,
            Value::Custom {
                expected: "`*` or comma-separated port numbers or names",
                check: is_ssl_ports,
            },
        ),
        Annotation::new(SSL_NEGOTIATION_POLICY, Value::Text),
        Annotation::new(
            IP_ADDRESS_TYPE,
            Value::Custom {
                expected: "`ipv4` or `dualstack`",
                check: is_ip_address_type,
            },
        ),
        // Read only when `spec.loadBalancerSourceRanges` is empty; the API
        // server checks the same CIDRs on every LoadBalancer Service.
        Annotation::new(
            SOURCE_RANGES,
            Value::Custom {
                expected: "comma-separated CIDRs such as 203.0.113.0/24",
                check: is_cidr_list,
            },
        )
        .deprecated("set spec.loadBalancerSourceRanges instead"),
        // Classic ELBs only; a Network Load Balancer's `check_service`
        // refuses them.
        Annotation::new(ACCESS_LOG_EMIT_INTERVAL, Value::OneOf(&["5", "60"])),
        Annotation::new(ACCESS_LOG_ENABLED, Value::Bool),
        Annotation::new(ACCESS_LOG_S3_BUCKET_NAME, Value::Text),
        Annotation::new(ACCESS_LOG_S3_BUCKET_PREFIX, Value::Text),
        Annotation::new(CONNECTION_DRAINING_ENABLED, Value::Bool),
        Annotation::new(
            CONNECTION_DRAINING_TIMEOUT,
            Value::Int { min: 1, max: 3600 },
        ),
        Annotation::new(CONNECTION_IDLE_TIMEOUT, Value::Int { min: 1, max: 4000 }),
        // `ssl` also needs a certificate, which `check_service` checks.
        Annotation::new(
            BACKEND_PROTOCOL,
            Value::Custom {
                expected: "`tcp` or `ssl`, or for classic ELBs also `http` or `https`",
                check: is_backend_protocol,
            },
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
        ),
        Annotation::new(
            EXTRA_SECURITY_GROUPS,
            Value::Custom {
                expected: "comma-separated security group IDs such as sg-0123456789abcdef0",
                check: is_security_group_list,
            },
        ),
    ],
};

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
