//! Whether a load balancer already is what a Service asks for, so an
//! unchanged Service costs one GET instead of a full PUT.

use std::collections::BTreeSet;

use crate::api::types::{Firewall, ForwardingRule, HealthCheck, LoadBalancer, LoadBalancerRequest};

/// The API's default idle timeout, which an absent setting means.
const DEFAULT_HTTP_IDLE_TIMEOUT_SECONDS: u32 = 60;

/// The fields of `current` that differ from `desired`, by name; empty when
/// no update is needed. Settings the request leaves to the API's defaults
/// (size) are not compared.
pub(crate) fn differences(
    current: &LoadBalancer,
    desired: &LoadBalancerRequest,
) -> Vec<&'static str> {
    let mut diff = Vec::new();
    let mut check = |field: &'static str, same: bool| {
        if !same {
            diff.push(field);
        }
    };
    check("name", current.name == desired.name);
    check(
        "forwarding_rules",
        rules(&current.forwarding_rules) == rules(&desired.forwarding_rules),
    );
    check(
        "health_check",
        current
            .health_check
            .clone()
            .map(|h| normalized(h, &desired.health_check))
            == Some(normalized(
                desired.health_check.clone(),
                &desired.health_check,
            )),
    );
    check(
        "sticky_sessions",
        current.sticky_sessions.as_ref() == Some(&desired.sticky_sessions),
    );
    check(
        "droplet_ids",
        set(&current.droplet_ids) == set(&desired.droplet_ids),
    );
    check(
        "redirect_http_to_https",
        current.redirect_http_to_https == desired.redirect_http_to_https,
    );
    check(
        "enable_proxy_protocol",
        current.enable_proxy_protocol == desired.enable_proxy_protocol,
    );
    check(
        "enable_backend_keepalive",
        current.enable_backend_keepalive == desired.enable_backend_keepalive,
    );
    check(
        "http_idle_timeout_seconds",
        current
            .http_idle_timeout_seconds
            .unwrap_or(DEFAULT_HTTP_IDLE_TIMEOUT_SECONDS)
            == desired
                .http_idle_timeout_seconds
                .unwrap_or(DEFAULT_HTTP_IDLE_TIMEOUT_SECONDS),
    );
    check(
        "disable_lets_encrypt_dns_records",
        current.disable_lets_encrypt_dns_records == desired.disable_lets_encrypt_dns_records,
    );
    check(
        "firewall",
        firewall(current.firewall.as_ref()) == firewall(Some(&desired.firewall)),
    );
    check(
        "tags",
        desired.tags.iter().all(|t| current.tags.contains(t)),
    );
    if let Some(unit) = desired.size_unit {
        check("size_unit", current.size_unit == Some(unit));
    }
    if let Some(slug) = &desired.size {
        check("size", current.size.as_ref() == Some(slug));
    }
    if let Some(vpc) = &desired.vpc_uuid {
        check("vpc_uuid", current.vpc_uuid.as_ref() == Some(vpc));
    }
    diff
}

/// Rules as a set, with an empty certificate ID read as none.
fn rules(rules: &[ForwardingRule]) -> BTreeSet<(String, i32, String, i32, String, bool)> {
    rules
        .iter()
        .map(|r| {
            (
                r.entry_protocol.clone(),
                r.entry_port,
                r.target_protocol.clone(),
                r.target_port,
                r.certificate_id.clone().unwrap_or_default(),
                r.tls_passthrough,
            )
        })
        .collect()
}

/// `h` with an empty path read as none, and a PROXY-protocol setting the
/// API leaves out read as the one `desired` asks for.
fn normalized(mut h: HealthCheck, desired: &HealthCheck) -> HealthCheck {
    h.path = h.path.filter(|p| !p.is_empty());
    if h.proxy_protocol.is_none() {
        h.proxy_protocol = desired.proxy_protocol;
    }
    h
}

fn set(ids: &[u64]) -> BTreeSet<u64> {
    ids.iter().copied().collect()
}

fn firewall(f: Option<&Firewall>) -> (BTreeSet<&str>, BTreeSet<&str>) {
    let f = f.map(|f| (&f.allow[..], &f.deny[..])).unwrap_or_default();
    (
        f.0.iter().map(String::as_str).collect(),
        f.1.iter().map(String::as_str).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::types::{HealthCheck, StickySessions};

    fn desired() -> LoadBalancerRequest {
        LoadBalancerRequest {
            name: "a1".into(),
            region: "nyc3".into(),
            kind: "REGIONAL".into(),
            network: Some("EXTERNAL".into()),
            network_stack: Some("IPV4".into()),
            subnet_uuid: None,
            ip: None,
            size_unit: None,
            size: None,
            algorithm: "round_robin".into(),
            forwarding_rules: vec![ForwardingRule {
                entry_protocol: "tcp".into(),
                entry_port: 80,
                target_protocol: "tcp".into(),
                target_port: 30080,
                certificate_id: None,
                tls_passthrough: false,
            }],
            health_check: HealthCheck {
                protocol: "tcp".into(),
                port: 30080,
                path: None,
                check_interval_seconds: 3,
                response_timeout_seconds: 5,
                unhealthy_threshold: 3,
                healthy_threshold: 5,
                proxy_protocol: Some(false),
            },
            sticky_sessions: StickySessions {
                kind: "none".into(),
                cookie_name: None,
                cookie_ttl_seconds: None,
            },
            droplet_ids: vec![2, 1],
            redirect_http_to_https: false,
            enable_proxy_protocol: false,
            enable_backend_keepalive: false,
            http_idle_timeout_seconds: None,
            disable_lets_encrypt_dns_records: false,
            firewall: Firewall::default(),
            tags: vec![],
            vpc_uuid: None,
        }
    }

    /// The same load balancer as the API may spell it: empty strings for
    /// absent values, defaults filled in, no firewall, another order.
    fn as_returned() -> LoadBalancer {
        serde_json::from_value(serde_json::json!({
            "id": "x", "name": "a1", "status": "active", "size_unit": 1,
            "forwarding_rules": [{"entry_protocol": "tcp", "entry_port": 80, "target_protocol": "tcp",
                "target_port": 30080, "certificate_id": "", "tls_passthrough": false}],
            "health_check": {"protocol": "tcp", "port": 30080, "path": "", "check_interval_seconds": 3,
                "response_timeout_seconds": 5, "unhealthy_threshold": 3, "healthy_threshold": 5},
            "sticky_sessions": {"type": "none"},
            "droplet_ids": [1, 2],
            "http_idle_timeout_seconds": 60,
            "tags": ["other"]
        }))
        .unwrap()
    }

    #[test]
    fn the_apis_spelling_of_the_same_settings_is_no_change() {
        assert_eq!(differences(&as_returned(), &desired()), Vec::<&str>::new());
    }

    #[test]
    fn changed_settings_are_named() {
        let mut want = desired();
        want.droplet_ids.push(3);
        want.enable_proxy_protocol = true;
        want.tags = vec!["k8s:c1".into()];
        assert_eq!(
            differences(&as_returned(), &want),
            ["droplet_ids", "enable_proxy_protocol", "tags"]
        );
    }
}
