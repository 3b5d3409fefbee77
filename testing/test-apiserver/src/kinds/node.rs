//! kube-apiserver's checks of a Node's spec, in its words: taints (a
//! qualified-name key, a known effect, unique by key and effect; reported
//! under `metadata.taints`, as kube-apiserver does) and pod CIDRs (valid,
//! at most one per IP family).

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde_json::Value;

use crate::validation::bad_value;
use crate::validation::metadata::qualified_name_problems;

const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Whether `s` is `address/prefix` with a prefix that fits the address.
fn is_cidr(s: &str) -> Option<IpAddr> {
    let (address, bits) = s.split_once('/')?;
    let address: IpAddr = address.parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some(address)
}

/// Every problem with the Node `obj`'s spec, as `(field, message)`.
pub(crate) fn check(obj: &Value) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    let taints = obj
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut seen = BTreeSet::new();
    for (i, taint) in taints.iter().enumerate() {
        let key = taint["key"].as_str().unwrap_or_default();
        let effect = taint["effect"].as_str().unwrap_or_default();
        for problem in qualified_name_problems(key) {
            causes.push((
                format!("metadata.taints[{i}].key"),
                format!("Invalid value: {key:?}: {problem}"),
            ));
        }
        if effect.is_empty() {
            causes.push((
                format!("metadata.taints[{i}].effect"),
                "Required value".into(),
            ));
        } else if !EFFECTS.contains(&effect) {
            causes.push((
                format!("metadata.taints[{i}].effect"),
                format!(
                    "Unsupported value: {effect:?}: supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
                ),
            ));
        }
        if !seen.insert((key, effect)) {
            let value = taint["value"].as_str().unwrap_or_default();
            causes.push((
                format!("metadata.taints[{i}]"),
                format!(
                    "Duplicate value: {}: taints must be unique by key and effect pair",
                    bad_value::internal_struct(&[
                        ("Key", Value::from(key)),
                        ("Value", Value::from(value)),
                        ("Effect", Value::from(effect)),
                        (
                            "TimeAdded",
                            taint.get("timeAdded").cloned().unwrap_or(Value::Null),
                        ),
                    ])
                ),
            ));
        }
    }
    let cidrs: Vec<&str> = obj
        .pointer("/spec/podCIDRs")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut families = BTreeSet::new();
    let mut per_family_ok = true;
    for (i, cidr) in cidrs.iter().enumerate() {
        match is_cidr(cidr) {
            Some(address) => per_family_ok &= families.insert(address.is_ipv4()),
            None => causes.push((
                format!("spec.podCIDRs[{i}]"),
                format!(
                    "Invalid value: {cidr:?}: must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
                ),
            )),
        }
    }
    if cidrs.len() > 1 && !per_family_ok {
        causes.push((
            "spec.podCIDRs".into(),
            format!(
                "Invalid value: {}: may specify no more than one CIDR for each IP family",
                bad_value::strings(&cidrs)
            ),
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn taints_need_a_known_effect_a_qualified_key_and_no_twin() {
        let node = json!({ "spec": { "taints": [
            { "key": "a", "effect": "Foo" },
            { "key": "bad key!", "effect": "NoSchedule" },
            { "key": "b", "effect": "NoSchedule" },
            { "key": "b", "effect": "NoSchedule", "value": "x" },
        ]}});
        let causes = check(&node);
        assert_eq!(causes.len(), 3, "{causes:?}");
        assert_eq!(causes[0].0, "metadata.taints[0].effect");
        assert_eq!(causes[1].0, "metadata.taints[1].key");
        assert_eq!(
            causes[2].1,
            "Duplicate value: {\"Key\":\"b\",\"Value\":\"x\",\"Effect\":\"NoSchedule\",\"TimeAdded\":null}: taints must be unique by key and effect pair"
        );
    }

    #[test]
    fn pod_cidrs_are_valid_and_one_per_family() {
        let bad = json!({ "spec": { "podCIDRs": ["x"] } });
        assert_eq!(check(&bad)[0].0, "spec.podCIDRs[0]");
        let two = json!({ "spec": { "podCIDRs": ["10.0.0.0/24", "10.0.1.0/24"] } });
        assert_eq!(
            check(&two)[0].1,
            "Invalid value: [\"10.0.0.0/24\",\"10.0.1.0/24\"]: may specify no more than one CIDR for each IP family"
        );
        let dual = json!({ "spec": { "podCIDRs": ["10.0.0.0/24", "fd00::/64"] } });
        assert!(check(&dual).is_empty());
    }
}
