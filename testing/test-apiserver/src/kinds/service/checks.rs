//! kube-apiserver's `ValidateService` checks of a Service's spec, in its
//! words: ports (range, protocol, names, (protocol, port) pairs), the type,
//! `externalTrafficPolicy` and `loadBalancerClass`.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Causes;
use crate::validation::bad_value;

/// The types a Service may have, as the refusal lists them.
const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

/// `spec.type` before defaulting: absent, or one kube-apiserver knows.
pub(super) fn check_type(spec: &Value, causes: &mut Causes) {
    if let Some(t) = spec.get("type").and_then(Value::as_str)
        && !t.is_empty()
        && !TYPES.contains(&t)
    {
        causes.push((
            "spec.type".into(),
            format!(
                "Unsupported value: {t:?}: supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
            ),
        ));
    }
}

/// The defaulted spec's ports: numbers and numeric target ports within
/// 1-65535, a supported protocol, names (each required once there are
/// several, and unique), and no (protocol, port) pair twice.
pub(super) fn check_ports(spec: &Value, causes: &mut Causes) {
    let Some(ports) = spec.get("ports").and_then(Value::as_array) else {
        return;
    };
    let in_range = |n: i64| (1..=65535).contains(&n);
    let mut names = BTreeSet::new();
    let mut pairs = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let name = port.get("name").and_then(Value::as_str).unwrap_or("");
        if ports.len() > 1 && name.is_empty() {
            causes.push((format!("spec.ports[{i}].name"), "Required value".into()));
        } else if !name.is_empty() && !names.insert(name) {
            causes.push((
                format!("spec.ports[{i}].name"),
                format!("Duplicate value: {name:?}"),
            ));
        }
        let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !in_range(number) {
            causes.push((
                format!("spec.ports[{i}].port"),
                format!("Invalid value: {number}: must be between 1 and 65535, inclusive"),
            ));
        }
        let protocol = port.get("protocol").and_then(Value::as_str);
        if let Some(protocol) = protocol
            && !["TCP", "UDP", "SCTP"].contains(&protocol)
        {
            causes.push((
                format!("spec.ports[{i}].protocol"),
                format!(
                    "Unsupported value: {protocol:?}: supported values: \"SCTP\", \"TCP\", \"UDP\""
                ),
            ));
        }
        if let Some(target) = port.get("targetPort").and_then(Value::as_i64)
            && !in_range(target)
        {
            causes.push((
                format!("spec.ports[{i}].targetPort"),
                format!("Invalid value: {target}: must be between 1 and 65535, inclusive"),
            ));
        }
        let protocol = protocol.unwrap_or("");
        if !pairs.insert((protocol.to_owned(), number)) {
            // kube-apiserver shows the (protocol, port) key as the Go struct
            // it looked it up by (`TargetPort` is an IntOrString's 0).
            let key = bad_value::internal_struct(&[
                ("Name", Value::from("")),
                ("Protocol", Value::from(protocol)),
                ("AppProtocol", Value::Null),
                ("Port", Value::from(number)),
                ("TargetPort", Value::from(0)),
                ("NodePort", Value::from(0)),
            ]);
            causes.push((
                format!("spec.ports[{i}]"),
                format!("Duplicate value: {key}"),
            ));
        }
    }
}

/// Whether traffic from outside the cluster reaches the Service.
fn externally_accessible(spec: &Value) -> bool {
    match spec.get("type").and_then(Value::as_str) {
        Some("LoadBalancer" | "NodePort") => true,
        Some("ClusterIP") => spec
            .get("externalIPs")
            .and_then(Value::as_array)
            .is_some_and(|ips| !ips.is_empty()),
        _ => false,
    }
}

/// `externalTrafficPolicy`: `Cluster` or `Local`, and only on a Service
/// reached from outside.
pub(super) fn check_traffic_policy(spec: &Value, causes: &mut Causes) {
    let Some(policy) = spec
        .get("externalTrafficPolicy")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
    else {
        return;
    };
    if !externally_accessible(spec) {
        causes.push((
            "spec.externalTrafficPolicy".into(),
            format!(
                "Invalid value: {policy:?}: may only be set for externally-accessible services"
            ),
        ));
    } else if !["Cluster", "Local"].contains(&policy) {
        causes.push((
            "spec.externalTrafficPolicy".into(),
            format!("Unsupported value: {policy:?}: supported values: \"Cluster\", \"Local\""),
        ));
    }
}

/// `loadBalancerClass`: only on a LoadBalancer Service, and never changed
/// while it stays one.
pub(super) fn check_load_balancer_class(spec: &Value, old: Option<&Value>, causes: &mut Causes) {
    let is_lb = |s: &Value| s.get("type").and_then(Value::as_str) == Some("LoadBalancer");
    let class = |s: &Value| s.get("loadBalancerClass").filter(|c| !c.is_null()).cloned();
    let new = class(spec);
    if let Some(old) = old
        && is_lb(old)
        && is_lb(spec)
        && class(old) != new
    {
        let shown = new
            .as_ref()
            .and_then(Value::as_str)
            .map_or_else(|| "null".to_owned(), |c| format!("{c:?}"));
        causes.push((
            "spec.loadBalancerClass".into(),
            format!("Invalid value: {shown}: may not change once set"),
        ));
    }
    if new.is_some() && !is_lb(spec) {
        causes.push((
            "spec.loadBalancerClass".into(),
            "Forbidden: may only be used when `type` is 'LoadBalancer'".into(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn causes(check: impl Fn(&mut Causes)) -> Vec<String> {
        let mut causes = Causes::new();
        check(&mut causes);
        causes
            .into_iter()
            .map(|(f, m)| format!("{f}: {m}"))
            .collect()
    }

    #[test]
    fn several_ports_need_unique_names_and_distinct_protocol_port_pairs() {
        let spec = json!({ "ports": [
            { "name": "http", "port": 80, "protocol": "TCP" },
            { "name": "http", "port": 81, "protocol": "TCP" },
            { "port": 80, "protocol": "TCP" },
            { "name": "dns", "port": 80, "protocol": "UDP" },
        ]});
        let found = causes(|c| check_ports(&spec, c));
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0], "spec.ports[1].name: Duplicate value: \"http\"");
        assert_eq!(found[1], "spec.ports[2].name: Required value");
        assert!(
            found[2].starts_with("spec.ports[2]: Duplicate value: {\"Name\""),
            "{found:?}"
        );
        let one = json!({ "ports": [{ "port": 80, "protocol": "TCP" }] });
        assert!(
            causes(|c| check_ports(&one, c)).is_empty(),
            "one port needs no name"
        );
    }

    #[test]
    fn a_traffic_policy_needs_a_service_reached_from_outside() {
        let internal = json!({ "type": "ClusterIP", "externalTrafficPolicy": "Local" });
        assert_eq!(
            causes(|c| check_traffic_policy(&internal, c)),
            [
                "spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services"
            ]
        );
        let external = json!({ "type": "ClusterIP", "externalIPs": ["1.2.3.4"], "externalTrafficPolicy": "Local" });
        assert!(causes(|c| check_traffic_policy(&external, c)).is_empty());
        let odd = json!({ "type": "NodePort", "externalTrafficPolicy": "Nearest" });
        assert_eq!(causes(|c| check_traffic_policy(&odd, c)).len(), 1);
    }

    #[test]
    fn a_load_balancer_class_is_for_load_balancers_and_fixed_once_set() {
        let old = json!({ "type": "LoadBalancer", "loadBalancerClass": "a.example/lb" });
        let changed = json!({ "type": "LoadBalancer", "loadBalancerClass": "b.example/lb" });
        assert_eq!(
            causes(|c| check_load_balancer_class(&changed, Some(&old), c)),
            ["spec.loadBalancerClass: Invalid value: \"b.example/lb\": may not change once set"]
        );
        let cluster_ip = json!({ "type": "ClusterIP", "loadBalancerClass": "a.example/lb" });
        assert_eq!(
            causes(|c| check_load_balancer_class(&cluster_ip, None, c)).len(),
            1
        );
        assert!(causes(|c| check_load_balancer_class(&old, Some(&old), c)).is_empty());
    }

    #[test]
    fn an_unknown_type_is_refused_with_the_known_ones() {
        assert_eq!(
            causes(|c| check_type(&json!({ "type": "Foo" }), c)),
            [
                "spec.type: Unsupported value: \"Foo\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
            ]
        );
        assert!(causes(|c| check_type(&json!({}), c)).is_empty());
    }
}
