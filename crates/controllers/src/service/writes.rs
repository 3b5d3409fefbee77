//! Writes to Services, each one touching only what this controller owns, so
//! none needs a resourceVersion precondition or can undo another writer.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::spec::{CLEANUP_FINALIZER, has_finalizer};

/// The patch adding our finalizer: `metadata.finalizers` merges as a set in
/// a strategic merge patch, so other finalizers are kept even if they were
/// added since we read the Service.
fn add_finalizer_patch() -> Value {
    json!({ "metadata": { "finalizers": [CLEANUP_FINALIZER] } })
}

/// The patch removing our finalizer and no other.
fn remove_finalizer_patch() -> Value {
    json!({ "metadata": { "$deleteFromPrimitiveList/finalizers": [CLEANUP_FINALIZER] } })
}

/// The annotations of `wanted` the Service does not already carry with the
/// same value.
pub(crate) fn missing_annotations(
    service: &Service,
    wanted: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let current = service.annotations();
    wanted
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The status patch setting `status.loadBalancer.ingress` when given
/// (removed when empty), the given conditions, and removing the condition
/// types in `remove`. A strategic merge patch: the ingress list is atomic in
/// Kubernetes and is replaced whole, while `status.conditions` merges by
/// `type`, so conditions other writers own are kept.
fn status_patch(
    ingress: Option<&[LoadBalancerIngress]>,
    conditions: &[Condition],
    remove: &[&str],
) -> Value {
    let mut status = serde_json::Map::new();
    if let Some(ingress) = ingress {
        let ingress = if ingress.is_empty() {
            Value::Null
        } else {
            json!(ingress)
        };
        status.insert("loadBalancer".into(), json!({ "ingress": ingress }));
    }
    let mut items: Vec<Value> = conditions.iter().map(|c| json!(c)).collect();
    items.extend(
        remove
            .iter()
            .map(|type_| json!({ "type": type_, "$patch": "delete" })),
    );
    if !items.is_empty() {
        status.insert("conditions".into(), Value::Array(items));
    }
    json!({ "status": status })
}

/// A write to a Service that no longer exists needs no retry: it can only
/// have been deleted after its finalizer was removed.
fn gone_is_fine(result: Result<Service, kube::Error>) -> Result<Option<Service>, kube::Error> {
    match result {
        Ok(stored) => Ok(Some(stored)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(err) => Err(err),
    }
}

/// Writes to Services of every namespace.
#[derive(Clone)]
pub(crate) struct ServiceWrites {
    client: kube::Client,
}

impl std::fmt::Debug for ServiceWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceWrites").finish_non_exhaustive()
    }
}

impl ServiceWrites {
    pub(crate) fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, service: &Service) -> Api<Service> {
        Api::namespaced(
            self.client.clone(),
            service.namespace().as_deref().unwrap_or("default"),
        )
    }

    /// Adds our finalizer unless present; returns the Service as stored.
    ///
    /// # Errors
    /// The API error.
    pub(crate) async fn add_finalizer(&self, service: &Service) -> Result<Service, kube::Error> {
        if has_finalizer(service) {
            return Ok(service.clone());
        }
        let patch = add_finalizer_patch();
        self.api(service)
            .patch(
                &service.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
    }

    /// Removes our finalizer if present; returns the Service as stored, or
    /// `None` when there was nothing to do or it is already gone.
    ///
    /// # Errors
    /// Any API error but 404.
    pub(crate) async fn remove_finalizer(
        &self,
        service: &Service,
    ) -> Result<Option<Service>, kube::Error> {
        if !has_finalizer(service) {
            return Ok(None);
        }
        let patch = remove_finalizer_patch();
        gone_is_fine(
            self.api(service)
                .patch(
                    &service.name_any(),
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await,
        )
    }

    /// Records the annotations the provider asked for, writing only those
    /// that differ; returns the Service as stored.
    ///
    /// # Errors
    /// The API error.
    pub(crate) async fn record_annotations(
        &self,
        service: &Service,
        wanted: &BTreeMap<String, String>,
    ) -> Result<Service, kube::Error> {
        let missing = missing_annotations(service, wanted);
        if missing.is_empty() {
            return Ok(service.clone());
        }
        let patch = json!({ "metadata": { "annotations": missing } });
        self.api(service)
            .patch(
                &service.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
    }

    /// Writes through `/status` the ingress when given, `conditions`, and
    /// the removal of the condition types in `remove`; returns the Service
    /// as stored, or `None` when it is already gone.
    ///
    /// # Errors
    /// Any API error but 404.
    pub(crate) async fn set_status(
        &self,
        service: &Service,
        ingress: Option<&[LoadBalancerIngress]>,
        conditions: &[Condition],
        remove: &[&str],
    ) -> Result<Option<Service>, kube::Error> {
        let patch = status_patch(ingress, conditions, remove);
        gone_is_fine(
            self.api(service)
                .patch_status(
                    &service.name_any(),
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await,
        )
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    #[test]
    fn finalizer_patches_name_only_our_finalizer() {
        assert_eq!(
            add_finalizer_patch(),
            json!({ "metadata": { "finalizers": [CLEANUP_FINALIZER] } })
        );
        assert_eq!(
            remove_finalizer_patch(),
            json!({ "metadata": { "$deleteFromPrimitiveList/finalizers": ["service.kubernetes.io/load-balancer-cleanup"] } })
        );
    }

    #[test]
    fn only_differing_annotations_are_written() {
        let service = Service {
            metadata: ObjectMeta {
                annotations: Some(BTreeMap::from([
                    ("lb-id".to_owned(), "x1".to_owned()),
                    ("user".to_owned(), "kept".to_owned()),
                ])),
                ..ObjectMeta::default()
            },
            ..Service::default()
        };
        let same = BTreeMap::from([("lb-id".to_owned(), "x1".to_owned())]);
        assert!(missing_annotations(&service, &same).is_empty());
        let changed = BTreeMap::from([
            ("lb-id".to_owned(), "x2".to_owned()),
            ("zone".to_owned(), "a".to_owned()),
        ]);
        assert_eq!(missing_annotations(&service, &changed), changed);
    }

    #[test]
    fn empty_ingress_removes_the_list() {
        assert_eq!(
            status_patch(Some(&[]), &[], &[]),
            json!({ "status": { "loadBalancer": { "ingress": null } } })
        );
        let one = [LoadBalancerIngress {
            ip: Some("203.0.113.7".into()),
            ..LoadBalancerIngress::default()
        }];
        assert_eq!(
            status_patch(Some(&one), &[], &[]),
            json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "203.0.113.7" }] } } })
        );
    }

    #[test]
    fn conditions_merge_by_type_and_ours_can_be_removed_alone() {
        let condition = Condition {
            type_: "LoadBalancerProvisioned".into(),
            status: "True".into(),
            reason: "Provisioned".into(),
            message: "load balancer ready".into(),
            last_transition_time: Time(jiff::Timestamp::from_second(1_700_000_000).unwrap()),
            observed_generation: Some(2),
        };
        assert_eq!(
            status_patch(None, &[condition], &["LoadBalancerTargetsHealthy"]),
            json!({ "status": { "conditions": [
                {
                    "type": "LoadBalancerProvisioned",
                    "status": "True",
                    "reason": "Provisioned",
                    "message": "load balancer ready",
                    "lastTransitionTime": "2023-11-14T22:13:20Z",
                    "observedGeneration": 2
                },
                { "type": "LoadBalancerTargetsHealthy", "$patch": "delete" }
            ] } })
        );
    }
}
