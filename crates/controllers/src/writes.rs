//! Writes to Nodes that never clobber another writer.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeAddress, Taint};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Map, Value, json};

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

    /// A JSON merge patch carrying `resource_version` as a precondition: the
    /// API server refuses it with 409 Conflict if the node changed since, so
    /// a taint another writer added or removed meanwhile is never undone.
    fn to_patch(&self, resource_version: Option<&str>) -> Value {
        let mut metadata = Map::new();
        if let Some(rv) = resource_version {
            metadata.insert("resourceVersion".into(), json!(rv));
        }
        if !self.labels.is_empty() {
            metadata.insert("labels".into(), json!(self.labels));
        }
        let mut spec = Map::new();
        if let Some(id) = &self.provider_id {
            spec.insert("providerID".into(), json!(id));
        }
        if let Some(taints) = &self.taints {
            // null removes the field; an empty list would be stored as such.
            spec.insert(
                "taints".into(),
                if taints.is_empty() {
                    Value::Null
                } else {
                    json!(taints)
                },
            );
        }
        let mut patch = Map::new();
        patch.insert("metadata".into(), Value::Object(metadata));
        if !spec.is_empty() {
            patch.insert("spec".into(), Value::Object(spec));
        }
        Value::Object(patch)
    }
}

/// Applies the change `decide` computes from the node, starting from `base`
/// (usually the cached node). On a conflict the node is read again and
/// `decide` recomputes the change from the fresh copy.
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
        let patch = change.to_patch(current.metadata.resource_version.as_deref());
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(node) => return Ok(Some(node)),
            Err(kube::Error::Api(status))
                if status.code == 409 && attempt + 1 < CONFLICT_ATTEMPTS =>
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
    fn patch_carries_the_resource_version_and_only_what_changes() {
        let change = NodeChange {
            labels: BTreeMap::from([("a".to_owned(), "1".to_owned())]),
            provider_id: None,
            taints: Some(Vec::new()),
        };
        assert_eq!(
            change.to_patch(Some("42")),
            json!({ "metadata": { "resourceVersion": "42", "labels": { "a": "1" } }, "spec": { "taints": null } })
        );
        let labels_only = NodeChange {
            labels: change.labels,
            ..NodeChange::default()
        };
        assert_eq!(
            labels_only.to_patch(Some("42")),
            json!({ "metadata": { "resourceVersion": "42", "labels": { "a": "1" } } })
        );
    }
}
