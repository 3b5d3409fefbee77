//! Firewalls as the fake API checks, stores and renders them: list, get,
//! create, update and delete (`/v2/firewalls`, `/v2/firewalls/{firewall_id}`).
//!
//! Bodies are checked against the spec's `firewall` schema: a name of
//! letters, digits, `.` and `-`; at least one rule list; each rule a
//! `tcp`, `udp` or `icmp` protocol with `ports` (a string) and its
//! `sources` or `destinations`; no `null`. As the real API, answers spell
//! "all ports" `0`.

use std::collections::HashMap;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{AccountState, not_found, paginate, parse_body, unprocessable};

const PROTOCOLS: &[&str] = &["tcp", "udp", "icmp"];

/// A stored firewall.
#[derive(Debug, Clone)]
pub struct FakeFirewall {
    /// A UUID.
    pub id: String,
    /// The last create or update body, checked.
    pub body: Value,
}

impl FakeFirewall {
    /// The API's representation.
    pub fn to_json(&self) -> Value {
        let mut v = self.body.clone();
        for list in ["inbound_rules", "outbound_rules"] {
            if let Some(rules) = v.get_mut(list).and_then(Value::as_array_mut) {
                for rule in rules {
                    if rule["ports"] == "all" || rule["protocol"] == "icmp" {
                        rule["ports"] = json!("0");
                    }
                }
            }
        }
        let Some(obj) = v.as_object_mut() else {
            return v;
        };
        for (k, d) in [
            ("inbound_rules", json!([])),
            ("outbound_rules", json!([])),
            ("tags", json!([])),
            ("droplet_ids", json!([])),
        ] {
            obj.entry(k).or_insert(d);
        }
        obj.insert("id".into(), json!(self.id));
        obj.insert("status".into(), json!("succeeded"));
        obj.insert("created_at".into(), json!("2024-01-15T10:00:00Z"));
        obj.insert("pending_changes".into(), json!([]));
        v
    }
}

/// `GET /v2/firewalls`.
pub(super) fn list(
    account: &AccountState,
    path: &str,
    query: &HashMap<String, String>,
) -> (StatusCode, Value) {
    let all = account
        .firewalls
        .values()
        .map(FakeFirewall::to_json)
        .collect();
    paginate(all, "firewalls", path, query)
}

/// `GET /v2/firewalls/{id}`.
pub(super) fn get(account: &AccountState, id: &str) -> (StatusCode, Value) {
    match account.firewalls.get(id) {
        Some(fw) => (StatusCode::OK, json!({"firewall": fw.to_json()})),
        None => not_found(),
    }
}

/// `POST /v2/firewalls`.
pub(super) fn create(account: &mut AccountState, body: &[u8]) -> (StatusCode, Value) {
    let body = match parse_body(body).and_then(check_body) {
        Ok(b) => b,
        Err(problems) => return unprocessable(&problems),
    };
    account.next_firewall += 1;
    let fw = FakeFirewall {
        id: format!("fb6045f1-cf1d-4ca3-bfac-{:012x}", account.next_firewall),
        body,
    };
    let rendered = fw.to_json();
    account.firewalls.insert(fw.id.clone(), fw);
    (StatusCode::ACCEPTED, json!({"firewall": rendered}))
}

/// `PUT /v2/firewalls/{id}`: the whole firewall is replaced.
pub(super) fn update(account: &mut AccountState, id: &str, body: &[u8]) -> (StatusCode, Value) {
    let body = match parse_body(body).and_then(check_body) {
        Ok(b) => b,
        Err(problems) => return unprocessable(&problems),
    };
    match account.firewalls.get_mut(id) {
        Some(fw) => {
            fw.body = body;
            (StatusCode::OK, json!({"firewall": fw.to_json()}))
        }
        None => not_found(),
    }
}

/// `DELETE /v2/firewalls/{id}`.
pub(super) fn delete(account: &mut AccountState, id: &str) -> (StatusCode, Value) {
    match account.firewalls.remove(id) {
        Some(_) => (StatusCode::NO_CONTENT, Value::Null),
        None => not_found(),
    }
}

fn check_body(raw: Value) -> Result<Value, Vec<String>> {
    let mut problems = Vec::new();
    super::load_balancers::find_nulls(&raw, "body", &mut problems);
    match raw.get("name").and_then(Value::as_str) {
        Some(name) if is_firewall_name(name) => {}
        Some(name) => problems.push(format!("body.name: `{name}` is not a firewall name")),
        None => problems.push("body.name: required string".into()),
    }
    if raw.get("inbound_rules").is_none() && raw.get("outbound_rules").is_none() {
        problems.push("body: inbound_rules or outbound_rules is required".into());
    }
    for (list, target) in [
        ("inbound_rules", "sources"),
        ("outbound_rules", "destinations"),
    ] {
        let Some(rules) = raw.get(list) else {
            continue;
        };
        let Some(rules) = rules.as_array() else {
            problems.push(format!("body.{list}: must be an array"));
            continue;
        };
        for (i, rule) in rules.iter().enumerate() {
            check_rule(rule, target, &format!("body.{list}[{i}]"), &mut problems);
        }
    }
    if !strings(raw.get("tags")) {
        problems.push("body.tags: must be an array of strings".into());
    }
    if problems.is_empty() {
        Ok(raw)
    } else {
        Err(problems)
    }
}

fn check_rule(rule: &Value, target: &str, at: &str, problems: &mut Vec<String>) {
    match rule.get("protocol").and_then(Value::as_str) {
        Some(p) if PROTOCOLS.contains(&p) => {}
        _ => problems.push(format!("{at}.protocol: required, one of tcp, udp, icmp")),
    }
    if !rule.get("ports").is_some_and(Value::is_string) {
        problems.push(format!("{at}.ports: required string"));
    }
    match rule.get(target) {
        Some(t) if t.is_object() => {
            for field in ["addresses", "load_balancer_uids", "tags"] {
                if !strings(t.get(field)) {
                    problems.push(format!(
                        "{at}.{target}.{field}: must be an array of strings"
                    ));
                }
            }
        }
        _ => problems.push(format!("{at}.{target}: required object")),
    }
}

/// Absent, or an array of strings.
fn strings(v: Option<&Value>) -> bool {
    v.is_none_or(|v| v.as_array().is_some_and(|a| a.iter().all(Value::is_string)))
}

fn is_firewall_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() >= 2
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
}
