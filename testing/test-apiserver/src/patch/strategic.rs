//! Strategic merge patch: a JSON merge patch in which the list fields the
//! API types tag merge item by item, plus the directives `$patch`
//! (`replace`, `delete`, `merge`), `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`.

use serde_json::{Map, Value};

use super::schema::{ListStrategy, list_strategy};
use crate::resources::Kind;

const DELETE_FROM: &str = "$deleteFromPrimitiveList/";
const SET_ORDER: &str = "$setElementOrder/";

/// Whether a merged map stays or a `$patch: delete` removed it.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Keep,
    Delete,
}

/// Applies `patch` (a JSON object) to `doc`.
pub(super) fn apply(kind: Kind, doc: &mut Value, patch: &Value) -> Result<(), String> {
    let Some(patch) = patch.as_object() else {
        return Err("a strategic merge patch must be a JSON object".into());
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Value::Object(original) = doc else {
        unreachable!("made an object above")
    };
    if merge_map(kind, original, patch, "")? == Outcome::Delete {
        original.clear();
    }
    Ok(())
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn merge_map(
    kind: Kind,
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &str,
) -> Result<Outcome, String> {
    match patch.get("$patch").map(|d| d.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("replace")) => {
            *original = patch
                .iter()
                .filter(|(k, _)| k.as_str() != "$patch")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            return Ok(Outcome::Keep);
        }
        Some(Some("delete")) => return Ok(Outcome::Delete),
        Some(other) => return Err(format!("Unknown patch type: {other:?} at {path}")),
    }
    for (key, values) in patch
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(DELETE_FROM)?, v)))
    {
        let Some(values) = values.as_array() else {
            return Err(format!("{DELETE_FROM}{key} must be a list"));
        };
        if let Some(Value::Array(items)) = original.get_mut(key) {
            items.retain(|item| !values.contains(item));
        }
    }
    for (key, value) in patch.iter().filter(|(k, _)| !k.starts_with('$')) {
        let path = child_path(path, key);
        match value {
            Value::Null => {
                original.remove(key);
            }
            Value::Object(sub_patch) => {
                let entry = original
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !entry.is_object() {
                    *entry = Value::Object(Map::new());
                }
                let Value::Object(sub) = entry else {
                    unreachable!("made an object above")
                };
                if merge_map(kind, sub, sub_patch, &path)? == Outcome::Delete {
                    original.remove(key);
                }
            }
            Value::Array(items) => {
                let merged = match original.remove(key) {
                    Some(Value::Array(current)) => merge_list(
                        kind,
                        current,
                        items,
                        &path,
                        patch.get(&format!("{SET_ORDER}{key}")),
                    )?,
                    // A list the original lacks is taken as the patch has it
                    // (Go's `removeDirectives`): nothing is merged, so items
                    // repeating a merge key, or lacking it, all stay.
                    _ => items.iter().filter_map(without_directives).collect(),
                };
                original.insert(key.clone(), Value::Array(merged));
            }
            scalar => {
                original.insert(key.clone(), scalar.clone());
            }
        }
    }
    // An order directive for a list the patch does not otherwise touch.
    for (key, order) in patch
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(SET_ORDER)?, v)))
    {
        if patch.contains_key(key) {
            continue;
        }
        let strategy = list_strategy(kind, &child_path(path, key));
        if let (Some(strategy), Some(Value::Array(current))) = (strategy, original.get_mut(key)) {
            let server = current.clone();
            *current = reorder(std::mem::take(current), order, strategy, &server)?;
        }
    }
    if let Some(retain) = patch.get("$retainKeys") {
        let Some(retain) = retain.as_array() else {
            return Err(format!("$retainKeys at {path} must be a list"));
        };
        original.retain(|k, _| retain.iter().any(|r| r.as_str() == Some(k)));
    }
    Ok(Outcome::Keep)
}

/// `value` without the maps that carry `$patch`, or `None` when it is one.
fn without_directives(value: &Value) -> Option<Value> {
    match value {
        Value::Object(map) if map.contains_key("$patch") => None,
        Value::Object(map) => Some(Value::Object(
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), without_directives(v)?)))
                .collect(),
        )),
        Value::Array(items) => Some(Value::Array(
            items.iter().filter_map(without_directives).collect(),
        )),
        other => Some(other.clone()),
    }
}

fn merge_list(
    kind: Kind,
    current: Vec<Value>,
    patch: &[Value],
    path: &str,
    order: Option<&Value>,
) -> Result<Vec<Value>, String> {
    let Some(strategy) = list_strategy(kind, path) else {
        return Ok(patch.to_vec());
    };
    let server = current.clone();
    let merged = match strategy {
        ListStrategy::MergeScalars => {
            let mut merged: Vec<Value> = Vec::with_capacity(current.len() + patch.len());
            for item in current.into_iter().chain(patch.iter().cloned()) {
                if !merged.contains(&item) {
                    merged.push(item);
                }
            }
            merged
        }
        ListStrategy::MergeByKey(merge_key) => merge_keyed(kind, current, patch, merge_key, path)?,
    };
    // Kubernetes orders every merged list: the patch's items in the order of
    // `$setElementOrder` or else of the patch itself, with the server-only
    // items interleaved by the server's order (pinned by the contract suite
    // against kube-apiserver).
    let patch_order;
    let order = match order {
        Some(order) => order,
        None => {
            patch_order = Value::Array(
                patch
                    .iter()
                    .filter(|v| v.get("$patch").is_none())
                    .cloned()
                    .collect(),
            );
            &patch_order
        }
    };
    reorder(merged, order, strategy, &server)
}

fn merge_keyed(
    kind: Kind,
    mut merged: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    path: &str,
) -> Result<Vec<Value>, String> {
    let is_replace = |v: &Value| v.get("$patch").and_then(Value::as_str) == Some("replace");
    if patch.iter().any(is_replace) {
        return Ok(patch.iter().filter(|v| !is_replace(v)).cloned().collect());
    }
    let item_path = format!("{path}[]");
    for item in patch {
        let Some(fields) = item.as_object() else {
            return Err(format!(
                "{path}: list items must be maps with merge key {merge_key:?}"
            ));
        };
        let Some(key) = fields.get(merge_key) else {
            return Err(format!(
                "map: {item} does not contain declared merge key: {merge_key}"
            ));
        };
        let position = merged.iter().position(|m| m.get(merge_key) == Some(key));
        if fields.get("$patch").and_then(Value::as_str) == Some("delete") {
            merged.retain(|m| m.get(merge_key) != Some(key));
            continue;
        }
        match position {
            Some(i) => {
                let Value::Object(existing) = &mut merged[i] else {
                    return Err(format!("{path}: list items must be maps"));
                };
                if merge_map(kind, existing, fields, &item_path)? == Outcome::Delete {
                    merged.remove(i);
                }
            }
            None => {
                let mut fresh = Map::new();
                if merge_map(kind, &mut fresh, fields, &item_path)? == Outcome::Keep {
                    merged.push(Value::Object(fresh));
                }
            }
        }
    }
    Ok(merged)
}

/// `$setElementOrder`: items the directive names come in its order; items
/// only the server had keep their place relative to the server's order,
/// interleaved as Kubernetes' `mergeSortedSlice` does.
fn reorder(
    merged: Vec<Value>,
    order: &Value,
    strategy: ListStrategy,
    server: &[Value],
) -> Result<Vec<Value>, String> {
    let Some(order) = order.as_array() else {
        return Err("$setElementOrder must be a list".into());
    };
    let key_of = |v: &Value| -> Option<Value> {
        match strategy {
            ListStrategy::MergeScalars => Some(v.clone()),
            ListStrategy::MergeByKey(k) => v.get(k).cloned(),
        }
    };
    let order_keys: Vec<Option<Value>> = order.iter().map(key_of).collect();
    let server_keys: Vec<Option<Value>> = server.iter().map(key_of).collect();
    let index_in = |keys: &[Option<Value>], v: &Value| {
        let k = key_of(v);
        keys.iter().position(|o| k.is_some() && *o == k)
    };
    let (mut named, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| index_in(&order_keys, v).is_some());
    named.sort_by_key(|v| index_in(&order_keys, v));
    let mut result = Vec::with_capacity(named.len() + server_only.len());
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        named.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => match (index_in(&server_keys, l), index_in(&server_keys, r)) {
                (Some(li), Some(ri)) => li < ri,
                _ => false,
            },
        };
        let next = if take_left { left.next() } else { right.next() };
        result.extend(next);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn smp(kind: Kind, mut doc: Value, patch: &Value) -> Value {
        apply(kind, &mut doc, patch).expect("applies");
        doc
    }

    #[test]
    fn node_conditions_merge_by_type() {
        let doc = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "MemoryPressure", "status": "False"}
        ]}});
        let out = smp(
            Kind::Node,
            doc,
            &json!({"status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "NetworkUnavailable", "status": "False"}
            ]}}),
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([
                {"type": "Ready", "status": "True"},
                {"type": "NetworkUnavailable", "status": "False"},
                {"type": "MemoryPressure", "status": "False"}
            ]),
            "the patch's items in its order; a server-only item after a patch item \
             the server does not know"
        );
    }

    #[test]
    fn node_taints_are_replaced_whole_as_in_kubernetes() {
        let doc = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]}});
        let out = smp(
            Kind::Node,
            doc,
            &json!({"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]}}),
        );
        assert_eq!(
            out["spec"]["taints"],
            json!([{"key": "b", "effect": "NoSchedule"}])
        );
    }

    #[test]
    fn finalizers_union_and_delete_from_primitive_list() {
        let doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        let out = smp(
            Kind::Service,
            doc,
            &json!({"metadata": {
                "finalizers": ["c", "a"],
                "$deleteFromPrimitiveList/finalizers": ["b"]
            }}),
        );
        assert_eq!(
            out["metadata"]["finalizers"],
            json!(["c", "a"]),
            "in the patch's order, as Kubernetes' normalizeElementOrder"
        );
    }

    #[test]
    fn patch_delete_directive_removes_one_item() {
        let doc = json!({"status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.1"},
            {"type": "Hostname", "address": "n1"}
        ]}});
        let out = smp(
            Kind::Node,
            doc,
            &json!({"status": {"addresses": [{"type": "Hostname", "$patch": "delete"}]}}),
        );
        assert_eq!(
            out["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "10.0.0.1"}])
        );
    }

    #[test]
    fn a_list_the_original_lacks_is_taken_without_merging() {
        let out = smp(
            Kind::Service,
            json!({"status": {"loadBalancer": {}}}),
            &json!({"status": {"conditions": [
                {"type": "A", "status": "True"},
                {"type": "A", "status": "False"},
                {"type": "B", "$patch": "delete"},
                {"status": "Unknown"}
            ]}}),
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "A", "status": "True"}, {"type": "A", "status": "False"}, {"status": "Unknown"}])
        );
    }

    #[test]
    fn replace_directives_on_maps_and_lists() {
        let doc =
            json!({"metadata": {"labels": {"a": "1"}}, "status": {"conditions": [{"type": "A"}]}});
        let out = smp(
            Kind::Node,
            doc,
            &json!({
                "metadata": {"labels": {"b": "2", "$patch": "replace"}},
                "status": {"conditions": [{"$patch": "replace"}, {"type": "B"}]}
            }),
        );
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(out["status"]["conditions"], json!([{"type": "B"}]));
    }

    fn condition_types(doc: &Value) -> Vec<String> {
        doc["status"]["conditions"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|c| c["type"].as_str().map(str::to_owned))
            .collect()
    }

    #[test]
    fn set_element_order_keeps_server_only_items_in_their_server_place() {
        let doc = json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}, {"type": "C"}]}});
        let out = smp(
            Kind::Node,
            doc,
            &json!({"status": {
                "$setElementOrder/conditions": [{"type": "A"}, {"type": "C"}, {"type": "D"}],
                "conditions": [{"type": "D"}]
            }}),
        );
        assert_eq!(condition_types(&out), ["A", "B", "C", "D"]);
    }

    #[test]
    fn set_element_order_interleaves_as_kubernetes_merge_sorted_slice() {
        let doc = json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}, {"type": "C"}]}});
        let out = smp(
            Kind::Node,
            doc,
            &json!({"status": {
                "$setElementOrder/conditions": [{"type": "C"}, {"type": "A"}],
                "conditions": [{"type": "C", "status": "True"}]
            }}),
        );
        assert_eq!(condition_types(&out), ["B", "C", "A"]);
    }

    #[test]
    fn missing_merge_key_is_an_error_when_there_is_a_list_to_merge_with() {
        let mut doc = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        let err = apply(
            Kind::Node,
            &mut doc,
            &json!({"status": {"conditions": [{"status": "True"}]}}),
        );
        assert!(err.is_err());
    }

    #[test]
    fn retain_keys_drops_unlisted_fields() {
        let doc = json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}, "hostPath": {"path": "/x"}}]}});
        let out = smp(
            Kind::Pod,
            doc,
            &json!({"spec": {"volumes": [
                {"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/y"}}
            ]}}),
        );
        assert_eq!(
            out["spec"]["volumes"],
            json!([{"name": "v", "hostPath": {"path": "/y"}}])
        );
    }
}
