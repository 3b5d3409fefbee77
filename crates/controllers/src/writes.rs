//! Writes to Nodes that never clobber another writer.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeAddress, Taint};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// Attempts at a conflicting node write before the reconcile fails (and is
/// retried by the controller).
const CONFLICT_ATTEMPTS: usize = 3;

/// Changes to a Node's metadata and spec, applied in one write.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NodeChange {
    /// Labels to add or update; other labels are left alone.
    pub(crate) labels: BTreeMap<String, String>,
    /// `spec.providerID` to set.
    pub(crate) provider_id: Option<String>,
    /// The complete new `spec.taints`.
    pub(crate) taints: Option<Vec<Taint>>,
}

impl NodeChange {
    fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.provider_id.is_none() && self.taints.is_none()
    }

    /// A JSON patch (RFC 6902) making this change to `current`: each label
    /// added or updated on its own, the provider ID and the taints written
    /// only while they are still `current`'s (a `test` before each), so a
    /// taint another writer added or removed meanwhile is never undone.
    /// Nothing else is a precondition: writes to other fields meanwhile
    /// (the status above all, which the route controller writes while
    /// nodes are initialized) never make this one fail, as a
    /// `resourceVersion` precondition did — for a hundred new nodes, a
    /// hundred refused writes and re-reads.
    fn to_patch(&self, current: &Node) -> Value {
        let mut ops = Vec::new();
        if !self.labels.is_empty() {
            if current.metadata.labels.is_some() {
                for (key, value) in &self.labels {
                    ops.push(op(
                        "add",
                        &format!("/metadata/labels/{}", escape(key)),
                        json!(value),
                    ));
                }
            } else {
                ops.push(op("test", "/metadata/labels", Value::Null));
                ops.push(op("add", "/metadata/labels", json!(self.labels)));
            }
        }
        let spec = current.spec.as_ref();
        if spec.is_none() && (self.provider_id.is_some() || self.taints.is_some()) {
            ops.push(op("test", "/spec", Value::Null));
            ops.push(op("add", "/spec", json!({})));
        }
        if let Some(id) = &self.provider_id {
            let have = spec.and_then(|s| s.provider_id.as_ref());
            ops.push(op("test", "/spec/providerID", json!(have)));
            ops.push(op("add", "/spec/providerID", json!(id)));
        }
        if let Some(taints) = &self.taints {
            let have = spec.and_then(|s| s.taints.as_ref());
            ops.push(op("test", "/spec/taints", json!(have)));
            if !taints.is_empty() {
                ops.push(op("add", "/spec/taints", json!(taints)));
            } else if have.is_some() {
                ops.push(op("remove", "/spec/taints", Value::Null));
            }
        }
        Value::Array(ops)
    }
}

/// One JSON patch operation (`value` left out of a `remove`).
fn op(name: &str, path: &str, value: Value) -> Value {
    let mut op = json!({ "op": name, "path": path });
    if name != "remove" {
        op["value"] = value;
    }
    op
}

/// A map key as one JSON pointer token (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Whether the API server refused a write because the node changed
/// meanwhile: 409, or a JSON patch that no longer applies — 422 without
/// field causes, all kube-apiserver says of a failed `test` (a field
/// kube-apiserver found invalid comes with its cause, and is no conflict).
fn changed_meanwhile(status: &kube::core::Status) -> bool {
    status.code == 409
        || (status.code == 422
            && status
                .details
                .as_ref()
                .is_none_or(|details| details.causes.is_empty()))
}

/// Applies the change `decide` computes from the node, starting from `base`
/// (usually the cached node). When the fields it changes changed meanwhile
/// the node is read again and `decide` recomputes the change from the
/// fresh copy.
///
/// Returns the updated node, or `None` when `decide` found nothing to change.
///
/// # Errors
/// The last API error once the attempts are used up, or any other error.
pub(crate) async fn patch_node(
    api: &Api<Node>,
    base: &Node,
    decide: impl Fn(&Node) -> Option<NodeChange>,
) -> Result<Option<Node>, kube::Error> {
    let name = base.metadata.name.clone().unwrap_or_default();
    let mut current = base.clone();
    let mut attempt = 0;
    loop {
        let Some(change) = decide(&current).filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let patch: json_patch::Patch =
            serde_json::from_value(change.to_patch(&current)).map_err(kube::Error::SerdeError)?;
        match api
            .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(node) => return Ok(Some(node)),
            Err(kube::Error::Api(status))
                if changed_meanwhile(&status) && attempt + 1 < CONFLICT_ATTEMPTS =>
            {
                attempt += 1;
                tracing::debug!(node = %name, attempt, "node changed meanwhile; re-reading it");
                current = fresh(api, &name).await?;
            }
            Err(err) => return Err(err),
        }
    }
}

/// The node as the API server holds it now, read with a list by name: the
/// chart grants the CCM list on nodes, not get (a get here, after a
/// conflict, was refused under the chart's RBAC).
async fn fresh(api: &Api<Node>, name: &str) -> Result<Node, kube::Error> {
    let params = ListParams::default().fields(&format!("metadata.name={name}"));
    api.list(&params)
        .await?
        .items
        .into_iter()
        .next()
        .ok_or_else(|| {
            let status =
                kube::core::Status::failure(&format!("nodes \"{name}\" not found"), "NotFound")
                    .with_code(404);
            kube::Error::Api(Box::new(status))
        })
}

/// Replaces `status.addresses` (a merge patch replaces the whole list, which
/// keeps dual-stack order; a strategic merge by type would not).
///
/// # Errors
/// The API error.
pub(crate) async fn set_addresses(
    api: &Api<Node>,
    name: &str,
    addresses: &[NodeAddress],
) -> Result<Node, kube::Error> {
    let patch = json!({ "status": { "addresses": addresses } });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_tests_only_what_it_overwrites() {
        let current: Node = serde_json::from_value(json!({
            "metadata": { "name": "n1", "resourceVersion": "42", "labels": { "a/b": "0" } },
            "spec": { "taints": [{ "key": "t", "effect": "NoSchedule" }] }
        }))
        .unwrap();
        let change = NodeChange {
            labels: BTreeMap::from([("a/b".to_owned(), "1".to_owned())]),
            provider_id: Some("fake://n1".to_owned()),
            taints: Some(Vec::new()),
        };
        assert_eq!(
            change.to_patch(&current),
            json!([
                { "op": "add", "path": "/metadata/labels/a~1b", "value": "1" },
                { "op": "test", "path": "/spec/providerID", "value": null },
                { "op": "add", "path": "/spec/providerID", "value": "fake://n1" },
                { "op": "test", "path": "/spec/taints", "value": [{ "key": "t", "effect": "NoSchedule" }] },
                { "op": "remove", "path": "/spec/taints" }
            ])
        );
        // No resourceVersion: a status write meanwhile is no conflict.
        assert!(
            !change
                .to_patch(&current)
                .to_string()
                .contains("resourceVersion")
        );
    }

    #[test]
    fn a_node_without_labels_or_spec_gets_them_whole_while_still_without() {
        let bare: Node = serde_json::from_value(json!({ "metadata": { "name": "n1" } })).unwrap();
        let change = NodeChange {
            labels: BTreeMap::from([("a".to_owned(), "1".to_owned())]),
            provider_id: None,
            taints: Some(vec![Taint {
                key: "t".into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            }]),
        };
        assert_eq!(
            change.to_patch(&bare),
            json!([
                { "op": "test", "path": "/metadata/labels", "value": null },
                { "op": "add", "path": "/metadata/labels", "value": { "a": "1" } },
                { "op": "test", "path": "/spec", "value": null },
                { "op": "add", "path": "/spec", "value": {} },
                { "op": "test", "path": "/spec/taints", "value": null },
                { "op": "add", "path": "/spec/taints", "value": [{ "key": "t", "effect": "NoSchedule" }] }
            ])
        );
    }

    #[test]
    fn a_patch_that_no_longer_applies_is_a_conflict_and_an_invalid_field_is_not() {
        let status =
            |value: Value| -> kube::core::Status { serde_json::from_value(value).unwrap() };
        let refused = "the server rejected our request due to an error in our request";
        assert!(changed_meanwhile(&status(
            json!({ "code": 409, "reason": "Conflict" })
        )));
        assert!(changed_meanwhile(&status(
            json!({ "code": 422, "reason": "Invalid", "message": refused, "details": {} })
        )));
        assert!(!changed_meanwhile(&status(json!({
            "code": 422, "reason": "Invalid", "message": "Node \"n1\" is invalid",
            "details": { "causes": [{ "reason": "FieldValueInvalid", "field": "metadata.labels" }] }
        }))));
    }
}
