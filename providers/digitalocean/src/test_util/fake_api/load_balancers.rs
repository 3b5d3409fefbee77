//! Load balancers as the fake API checks, stores and renders them.
//!
//! Request bodies are checked against the spec's `load_balancer_create`
//! schema (required fields, enums, ranges, no `null`), so the fake refuses
//! what DigitalOcean's API refuses even without Prism in front of it.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::droplets::region_json;

const REGIONS: &[&str] = &[
    "ams1", "ams2", "ams3", "blr1", "fra1", "lon1", "nyc1", "nyc2", "nyc3", "sfo1", "sfo2", "sfo3",
    "sgp1", "tor1", "syd1",
];
const ENTRY_PROTOCOLS: &[&str] = &["http", "https", "http2", "http3", "tcp", "udp"];
const TARGET_PROTOCOLS: &[&str] = &["http", "https", "http2", "tcp", "udp"];

/// The create/update body, as the spec describes it: what the provider
/// sent, stored as is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadBalancerBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub droplet_ids: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_unit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    pub forwarding_rules: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticky_sessions: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_http_to_https: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_proxy_protocol: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_backend_keepalive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_idle_timeout_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_lets_encrypt_dns_records: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpc_uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_stack: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_uuid: Option<String>,
    /// A reserved IP, on create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
}

/// A stored load balancer.
#[derive(Debug, Clone)]
pub struct FakeLoadBalancer {
    /// A UUID.
    pub id: String,
    /// The last create or update body, with droplets added and removed.
    pub body: LoadBalancerBody,
    /// `new` until read enough times, then `active`.
    pub status: String,
    /// Empty until active.
    pub ip: String,
    /// Reads left before a `new` load balancer turns `active`.
    pub reads_until_active: u32,
}

impl FakeLoadBalancer {
    /// A read, as a poller's GET: a `new` load balancer turns `active`
    /// after its configured number of reads, and gets its address then.
    pub fn observe(&mut self, ip: impl FnOnce() -> String) {
        if self.status != "new" {
            return;
        }
        self.reads_until_active = self.reads_until_active.saturating_sub(1);
        if self.reads_until_active == 0 {
            self.status = "active".into();
            self.ip = ip();
        }
    }

    /// The API's representation, with its defaults filled in.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(&self.body).unwrap_or_else(|_| json!({}));
        if let Some(obj) = v.as_object_mut() {
            // A create-only input, not part of the representation.
            obj.remove("ip");
        }
        let region = self.body.region.clone().unwrap_or_else(|| "nyc3".into());
        let defaults = json!({
            "algorithm": "round_robin",
            "health_check": {"protocol": "http", "port": 80, "path": "/", "check_interval_seconds": 10,
                "response_timeout_seconds": 5, "unhealthy_threshold": 5, "healthy_threshold": 3},
            "sticky_sessions": {"type": "none"},
            "redirect_http_to_https": false,
            "enable_proxy_protocol": false,
            "enable_backend_keepalive": false,
            "http_idle_timeout_seconds": 60,
            "disable_lets_encrypt_dns_records": false,
            "firewall": {"allow": [], "deny": []},
            "droplet_ids": [],
            "tags": [],
            "type": "REGIONAL",
            "network": "EXTERNAL",
            "network_stack": "IPV4",
        });
        let (Some(obj), Some(defaults)) = (v.as_object_mut(), defaults.as_object()) else {
            return v;
        };
        for (k, d) in defaults {
            obj.entry(k.clone()).or_insert_with(|| d.clone());
        }
        if self.body.size.is_none() && self.body.size_unit.is_none() {
            obj.insert("size_unit".into(), json!(1));
        }
        obj.insert("id".into(), json!(self.id));
        obj.insert("ip".into(), json!(self.ip));
        obj.insert("status".into(), json!(self.status));
        obj.insert("created_at".into(), json!("2024-01-15T10:00:00Z"));
        obj.insert("region".into(), region_json(&region));
        v
    }
}

/// What an update may not change: the spec says `network` and
/// `network_stack` cannot be updated after creation (nor, in practice, the
/// type). An update leaving them out keeps them.
pub(crate) fn check_update(
    old: &LoadBalancerBody,
    new: &LoadBalancerBody,
) -> Result<(), Vec<String>> {
    let fixed = [
        ("type", &old.kind, &new.kind, "REGIONAL"),
        ("network", &old.network, &new.network, "EXTERNAL"),
        (
            "network_stack",
            &old.network_stack,
            &new.network_stack,
            "IPV4",
        ),
    ];
    let problems: Vec<String> = fixed
        .iter()
        .filter(|(_, was, now, default)| {
            now.is_some() && now.as_deref() != Some(was.as_deref().unwrap_or(default))
        })
        .map(|(field, ..)| {
            format!("body.{field}: cannot be updated after creating the load balancer")
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// The body when it is valid, else every problem with it.
pub(crate) fn check_body(raw: &Value) -> Result<LoadBalancerBody, Vec<String>> {
    let mut problems = Vec::new();
    find_nulls(raw, "body", &mut problems);
    let body: LoadBalancerBody = match serde_json::from_value(raw.clone()) {
        Ok(b) => b,
        Err(e) => {
            problems.push(format!("body: {e}"));
            return Err(problems);
        }
    };
    match (&body.droplet_ids, &body.tag) {
        (Some(_), None) | (None, Some(_)) => {}
        _ => problems.push("body: exactly one of droplet_ids and tag is required".into()),
    }
    match &body.region {
        Some(r) if REGIONS.contains(&r.as_str()) => {}
        Some(r) => problems.push(format!("body.region: `{r}` is not a region slug")),
        None => problems.push("body.region: required".into()),
    }
    if body.forwarding_rules.is_empty() {
        problems.push("body.forwarding_rules: at least one rule is required".into());
    }
    for (i, rule) in body.forwarding_rules.iter().enumerate() {
        check_rule(rule, &format!("body.forwarding_rules[{i}]"), &mut problems);
    }
    if let Some(hc) = &body.health_check {
        one_of(
            hc.get("protocol"),
            &["http", "https", "tcp"],
            "body.health_check.protocol",
            &mut problems,
        );
        for field in [
            "port",
            "check_interval_seconds",
            "response_timeout_seconds",
            "unhealthy_threshold",
            "healthy_threshold",
        ] {
            if hc.get(field).is_some_and(|v| !v.is_u64()) {
                problems.push(format!("body.health_check.{field}: must be an integer"));
            }
        }
    }
    if let Some(s) = &body.sticky_sessions {
        one_of(
            s.get("type"),
            &["cookies", "none"],
            "body.sticky_sessions.type",
            &mut problems,
        );
    }
    if let Some(fw) = &body.firewall {
        for field in ["allow", "deny"] {
            if fw
                .get(field)
                .is_some_and(|v| !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)))
            {
                problems.push(format!(
                    "body.firewall.{field}: must be an array of strings"
                ));
            }
        }
    }
    range(body.size_unit, 1..=100, "body.size_unit", &mut problems);
    range(
        body.http_idle_timeout_seconds,
        30..=600,
        "body.http_idle_timeout_seconds",
        &mut problems,
    );
    let enums: [(&Option<String>, &[&str], &str); 5] = [
        (
            &body.size,
            &["lb-small", "lb-medium", "lb-large"],
            "body.size",
        ),
        (
            &body.algorithm,
            &["round_robin", "least_connections"],
            "body.algorithm",
        ),
        (
            &body.kind,
            &["REGIONAL", "REGIONAL_NETWORK", "GLOBAL"],
            "body.type",
        ),
        (&body.network, &["EXTERNAL", "INTERNAL"], "body.network"),
        (
            &body.network_stack,
            &["IPV4", "DUALSTACK"],
            "body.network_stack",
        ),
    ];
    for (value, allowed, at) in enums {
        if let Some(v) = value
            && !allowed.contains(&v.as_str())
        {
            problems.push(format!("{at}: `{v}` is not one of {}", allowed.join(", ")));
        }
    }
    if let Some(vpc) = &body.vpc_uuid
        && !is_uuid(vpc)
    {
        problems.push(format!("body.vpc_uuid: `{vpc}` is not a UUID"));
    }
    if problems.is_empty() {
        Ok(body)
    } else {
        Err(problems)
    }
}

fn check_rule(rule: &Value, at: &str, problems: &mut Vec<String>) {
    required_one_of(
        rule.get("entry_protocol"),
        ENTRY_PROTOCOLS,
        &format!("{at}.entry_protocol"),
        problems,
    );
    required_one_of(
        rule.get("target_protocol"),
        TARGET_PROTOCOLS,
        &format!("{at}.target_protocol"),
        problems,
    );
    for field in ["entry_port", "target_port"] {
        if !rule.get(field).is_some_and(Value::is_i64) {
            problems.push(format!("{at}.{field}: required integer"));
        }
    }
    if rule.get("certificate_id").is_some_and(|v| !v.is_string()) {
        problems.push(format!("{at}.certificate_id: must be a string"));
    }
    if rule.get("tls_passthrough").is_some_and(|v| !v.is_boolean()) {
        problems.push(format!("{at}.tls_passthrough: must be a boolean"));
    }
}

/// An optional string field that must be one of `allowed` when present.
fn one_of(value: Option<&Value>, allowed: &[&str], at: &str, problems: &mut Vec<String>) {
    if let Some(value) = value {
        required_one_of(Some(value), allowed, at, problems);
    }
}

fn required_one_of(value: Option<&Value>, allowed: &[&str], at: &str, problems: &mut Vec<String>) {
    match value.and_then(Value::as_str) {
        Some(v) if allowed.contains(&v) => {}
        Some(v) => problems.push(format!("{at}: `{v}` is not one of {}", allowed.join(", "))),
        None => problems.push(format!("{at}: required string")),
    }
}

fn range(
    value: Option<u32>,
    allowed: std::ops::RangeInclusive<u32>,
    at: &str,
    problems: &mut Vec<String>,
) {
    if let Some(v) = value
        && !allowed.contains(&v)
    {
        problems.push(format!(
            "{at}: {v} is outside {}..={}",
            allowed.start(),
            allowed.end()
        ));
    }
}

pub(super) fn find_nulls(v: &Value, at: &str, problems: &mut Vec<String>) {
    match v {
        Value::Null => problems.push(format!("{at}: null is not allowed")),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, x)| find_nulls(x, &format!("{at}[{i}]"), problems)),
        Value::Object(map) => map
            .iter()
            .for_each(|(k, x)| find_nulls(x, &format!("{at}.{k}"), problems)),
        _ => {}
    }
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.chars().all(|c| c.is_ascii_hexdigit()))
}
