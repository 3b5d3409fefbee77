//! What the controller does to a Service's load balancer — claim the
//! Service, ensure, update the nodes, clean up — with upstream's events and
//! the provider's errors turned into the framework's retry rules.

use std::collections::BTreeMap;

use ccm_cloud_provider::annotations::FindingKind;
use ccm_cloud_provider::{CloudError, LoadBalancer};
use ccm_runtime::ReconcileError;
use k8s_openapi::api::core::v1::Service;
use kube::Resource;
use tokio::time::Instant;

use super::eligible::NodeSet;
use super::records::{Parked, Record, Synced, key_of};
use super::{ServiceController, conditions, spec, status};

/// The resource versions one reconcile read and wrote, so that the versions
/// it wrote over are recognized when the cache delivers them late.
#[derive(Debug)]
pub(super) struct Versions {
    seen: Vec<String>,
    read: usize,
}

impl Versions {
    pub(super) fn new(service: &Service) -> Self {
        let seen: Vec<String> = service.metadata.resource_version.iter().cloned().collect();
        let read = seen.len();
        Self { seen, read }
    }

    pub(super) fn wrote(&mut self, stored: &Service) {
        self.seen
            .extend(stored.metadata.resource_version.iter().cloned());
    }

    /// The version of the last write, if this reconcile wrote.
    pub(super) fn newest_written(&self) -> Option<String> {
        self.seen[self.read..].last().cloned()
    }

    /// Every version but the newest.
    pub(super) fn superseded(&self) -> Vec<String> {
        let newest = self.seen.last();
        self.seen
            .iter()
            .filter(|rv| Some(*rv) != newest)
            .cloned()
            .collect()
    }
}

/// Whether the provider asked to be called again after a delay: no event,
/// the framework retries after exactly that delay.
fn is_retry(err: &CloudError) -> bool {
    matches!(err, CloudError::Retry { .. } | CloudError::Throttled { .. })
}

impl ServiceController {
    /// Ensures the load balancer of a Service that wants one. A Service
    /// without our finalizer is claimed first; the finalizer's own watch
    /// event brings it back for the ensure, so the finalizer is stored
    /// before any creation and a failing ensure retries with backoff, not at
    /// once.
    pub(super) async fn ensure(
        &self,
        service: &Service,
        nodes: &NodeSet,
        fingerprint: u64,
        check_owner: bool,
    ) -> Result<(), ReconcileError> {
        if !spec::has_finalizer(service) {
            return self.claim(service, fingerprint, check_owner).await;
        }
        let reference = service.object_ref(&());
        self.events
            .normal(&reference, "EnsuringLoadBalancer", "Ensuring load balancer")
            .await;
        if nodes.nodes.is_empty() {
            self.events
                .warning(
                    &reference,
                    "UnAvailableLoadBalancer",
                    "There are no available nodes for LoadBalancer",
                )
                .await;
        }
        self.review_annotations(service, fingerprint, true).await?;
        // From here the load balancer may exist again: a later cleanup asks
        // the provider whatever the fingerprint.
        self.records().entry(service).deleted = None;
        self.metrics.syncs.inc();
        let ensured = match self
            .cloud
            .ensure_load_balancer(&self.cluster_name, service, &nodes.nodes)
            .await
        {
            Ok(ensured) => ensured,
            Err(err) => {
                if matches!(err, CloudError::ImplementedElsewhere) {
                    self.release(service).await?;
                }
                return self
                    .provider_failed(
                        service,
                        fingerprint,
                        err,
                        "SyncLoadBalancerFailed",
                        "Error syncing load balancer",
                    )
                    .await;
            }
        };
        tracing::info!(service = %key_of(service), nodes = nodes.nodes.len(), "ensured load balancer");
        // Published before the writes below, so a failed write cannot lose them.
        for warning in &ensured.warnings {
            self.events
                .warning(&reference, &warning.reason, warning.message.clone())
                .await;
        }
        let mut versions = Versions::new(service);
        let stored = self
            .writes
            .record_annotations(service, &ensured.service_annotations)
            .await?;
        versions.wrote(&stored);
        self.events
            .normal(&reference, "EnsuredLoadBalancer", "Ensured load balancer")
            .await;
        let ingress = status::ingress_of(&ensured.status);
        {
            let mut records = self.records();
            let record = records.entry(service);
            record.synced = Some(Synced {
                service: spec::fingerprint(&stored, &BTreeMap::new()),
                nodes: nodes.identity,
                ingress: ingress.clone(),
                annotations: stored.metadata.annotations.clone().unwrap_or_default(),
            });
            record.parked = None;
            record.ensure_next = false;
        }
        // The ingress first: the health read (several cloud calls on AWS)
        // follows at the end of the reconcile, not before the address.
        self.health_changed(service);
        let wanted = [conditions::provisioned(&ingress)];
        let written = self
            .write_status(&stored, Some(&ingress), &wanted, false, &mut versions)
            .await;
        self.records().entry(service).superseded = versions.superseded();
        written
    }

    /// Removes the finalizer of a Service the provider says another
    /// controller implements, when nothing shows that this controller ever
    /// made it a load balancer (no success recorded, no ingress): the
    /// Service is then left entirely alone.
    async fn release(&self, service: &Service) -> Result<(), ReconcileError> {
        let ever_synced = self
            .records()
            .get(&key_of(service))
            .is_some_and(|r| r.synced.is_some());
        if ever_synced || !status::current_ingress(service).is_empty() {
            return Ok(());
        }
        let mut versions = Versions::new(service);
        self.cloud.check_leadership()?;
        if let Some(stored) = self.writes.remove_finalizer(service).await? {
            versions.wrote(&stored);
        }
        self.records().entry(service).superseded = versions.superseded();
        Ok(())
    }

    /// Asks, when `check_owner`, whether another controller implements the
    /// Service and whether it is well-formed (from the Service alone when
    /// the provider can tell, else read-only with `get_load_balancer`), then
    /// stores our finalizer.
    async fn claim(
        &self,
        service: &Service,
        fingerprint: u64,
        check_owner: bool,
    ) -> Result<(), ReconcileError> {
        self.review_annotations(service, fingerprint, false).await?;
        if check_owner {
            let checked = match self.cloud.check_service(service) {
                Some(answer) => answer,
                None => self
                    .cloud
                    .get_load_balancer(&self.cluster_name, service)
                    .await
                    .map(drop),
            };
            if let Err(err) = checked {
                return self
                    .provider_failed(
                        service,
                        fingerprint,
                        err,
                        "SyncLoadBalancerFailed",
                        "Error syncing load balancer",
                    )
                    .await;
            }
        }
        let stored = self.writes.add_finalizer(service).await?;
        let mut versions = Versions::new(service);
        versions.wrote(&stored);
        let pending = conditions::pending("waiting for the cloud load balancer");
        self.write_status(&stored, None, &[pending], false, &mut versions)
            .await?;
        let mut records = self.records();
        let record = records.entry(service);
        record.parked = None;
        record.superseded = versions.superseded();
        Ok(())
    }

    /// Checks the Service's annotations against the provider's schema, the
    /// same description the admission webhook judges from, so the events
    /// say word for word what admission would have said (and a Service
    /// admitted with a warning, or past an unreachable webhook, still gets
    /// its event). A malformed one is published as a Warning event and
    /// refused: no cloud change, and no retry until the Service changes.
    /// With `publish_all`, unknown and deprecated keys are published too
    /// (the ensure goes on without them), and so are changes, since the
    /// last success in this process, to annotations that cannot change on
    /// an existing load balancer (the provider decides what to do about
    /// those). A Service the provider says another controller implements
    /// is not checked: that controller's annotations are not ours to judge.
    async fn review_annotations(
        &self,
        service: &Service,
        fingerprint: u64,
        publish_all: bool,
    ) -> Result<(), ReconcileError> {
        let Some(schema) = self.cloud.annotation_schema() else {
            return Ok(());
        };
        if matches!(
            self.cloud.check_service(service),
            Some(Err(CloudError::ImplementedElsewhere))
        ) {
            return Ok(());
        }
        let mut findings = schema.review(None, service);
        if publish_all {
            let last = self
                .records()
                .get(&key_of(service))
                .and_then(|r| r.synced.as_ref())
                .map(|synced| synced.annotations.clone());
            if let Some(annotations) = last {
                let mut before = service.clone();
                before.metadata.annotations = Some(annotations);
                findings.extend(
                    schema
                        .review(Some(&before), service)
                        .into_iter()
                        .filter(|f| f.kind == FindingKind::Immutable),
                );
            }
        }
        let reference = service.object_ref(&());
        let mut refused = None;
        for finding in &findings {
            let invalid = finding.kind == FindingKind::Invalid;
            if invalid || publish_all {
                self.events
                    .warning(&reference, finding.kind.reason(), finding.message.clone())
                    .await;
            }
            if invalid && refused.is_none() {
                refused = Some(finding.to_error());
            }
        }
        let Some(err) = refused else { return Ok(()) };
        tracing::info!(service = %key_of(service), error = %err, "refused: a malformed annotation");
        self.records().entry(service).parked = Some((fingerprint, Parked::Refused));
        self.report_failure(service, &err).await;
        Err(err.into())
    }

    /// Points the load balancer at the current eligible nodes.
    pub(super) async fn update_hosts(
        &self,
        service: &Service,
        nodes: &NodeSet,
        fingerprint: u64,
    ) -> Result<(), ReconcileError> {
        let reference = service.object_ref(&());
        self.metrics.syncs.inc();
        let start = Instant::now();
        let result = self
            .cloud
            .update_load_balancer(&self.cluster_name, service, &nodes.nodes)
            .await;
        self.metrics
            .update_latency
            .observe(start.elapsed().as_secs_f64());
        match result {
            Ok(()) => {
                if let Some(synced) = self.records().entry(service).synced.as_mut() {
                    synced.nodes = nodes.identity;
                }
                tracing::info!(service = %key_of(service), nodes = nodes.nodes.len(), "updated load balancer hosts");
                if nodes.nodes.is_empty() {
                    self.events
                        .warning(
                            &reference,
                            "UnAvailableLoadBalancer",
                            "There are no available nodes for LoadBalancer",
                        )
                        .await;
                } else {
                    self.events
                        .normal(
                            &reference,
                            "UpdatedLoadBalancer",
                            "Updated load balancer with new hosts",
                        )
                        .await;
                }
                Ok(())
            }
            Err(err) => {
                self.metrics.node_sync_errors.inc();
                if matches!(
                    err,
                    CloudError::Other { .. }
                        | CloudError::QuotaExceeded { .. }
                        | CloudError::InstanceNotFound
                ) {
                    // The load balancer may be gone: the retry recreates it.
                    self.records().entry(service).ensure_next = true;
                }
                let what = format!(
                    "Error updating load balancer with new hosts [{}] [node names limited, total number of nodes: {}], error",
                    nodes.loggable_names(),
                    nodes.nodes.len()
                );
                self.provider_failed(service, fingerprint, err, "UpdateLoadBalancerFailed", &what)
                    .await
            }
        }
    }

    /// Deletes the load balancer, clears the status, then removes the
    /// finalizer — in that order, so a failure at any step keeps the
    /// finalizer and the next attempt finishes the job. An attempt after a
    /// failed write, with the Service unchanged since the provider confirmed
    /// the deletion, does not ask the provider again.
    pub(super) async fn cleanup(
        &self,
        service: &Service,
        fingerprint: u64,
    ) -> Result<(), ReconcileError> {
        let reference = service.object_ref(&());
        self.events
            .normal(&reference, "DeletingLoadBalancer", "Deleting load balancer")
            .await;
        if self.records().deleted_at(service, fingerprint) {
            tracing::debug!(service = %key_of(service), "load balancer already deleted; finishing the writes");
        } else {
            self.delete_load_balancer(service).await?;
        }
        let mut versions = Versions::new(service);
        let written = async {
            self.write_status(service, Some(&[]), &[], true, &mut versions)
                .await?;
            // Fenced at the moment it leaves: once the finalizer is gone
            // nothing guards the load balancer's deletion any more.
            self.cloud.check_leadership()?;
            if let Some(stored) = self.writes.remove_finalizer(service).await? {
                versions.wrote(&stored);
            }
            Ok::<_, ReconcileError>(())
        }
        .await;
        // Kept whether or not the writes succeeded: a retry skips the provider.
        let uid = service.metadata.uid.clone().unwrap_or_default();
        *self.records().entry(service) = Record {
            uid,
            superseded: versions.superseded(),
            deleted: Some(fingerprint),
            ..Record::default()
        };
        written?;
        tracing::info!(service = %key_of(service), "deleted load balancer");
        self.events
            .normal(&reference, "DeletedLoadBalancer", "Deleted load balancer")
            .await;
        Ok(())
    }

    /// Asks the provider to delete the Service's load balancer; another
    /// controller's load balancer is nothing to delete.
    async fn delete_load_balancer(&self, service: &Service) -> Result<(), ReconcileError> {
        match self
            .cloud
            .ensure_load_balancer_deleted(&self.cluster_name, service)
            .await
        {
            Ok(()) => Ok(()),
            Err(CloudError::ImplementedElsewhere) => {
                tracing::debug!(service = %key_of(service), "implemented by another controller; nothing to delete");
                Ok(())
            }
            Err(err) => {
                if !is_retry(&err) {
                    self.events
                        .warning(
                            &service.object_ref(&()),
                            "DeleteLoadBalancerFailed",
                            format!("Error deleting load balancer: {err}"),
                        )
                        .await;
                }
                Err(err.into())
            }
        }
    }

    /// Rewrites the ingress of an up-to-date load balancer when the Service
    /// no longer shows it.
    pub(super) async fn restore_ingress(&self, service: &Service) -> Result<(), ReconcileError> {
        let (synced, settled) = {
            let records = self.records();
            let record = records.get(&key_of(service));
            (
                record
                    .and_then(|r| r.synced.as_ref())
                    .map(|s| s.ingress.clone()),
                record.is_some_and(|r| r.parked.is_none() && r.failure.is_none()),
            )
        };
        let Some(ingress) = synced else { return Ok(()) };
        let mut versions = Versions::new(service);
        // A parked or failing Service keeps the failure its condition says.
        let wanted: Vec<_> = settled
            .then(|| conditions::provisioned(&ingress))
            .into_iter()
            .collect();
        let written = self
            .write_status(service, Some(&ingress), &wanted, false, &mut versions)
            .await;
        if versions.newest_written().is_some() {
            self.records().entry(service).superseded = versions.superseded();
        }
        written
    }

    /// Reports a failed provider call and says what happens next.
    async fn provider_failed(
        &self,
        service: &Service,
        fingerprint: u64,
        err: CloudError,
        reason: &str,
        what: &str,
    ) -> Result<(), ReconcileError> {
        let reference = service.object_ref(&());
        let park = |why| self.records().entry(service).parked = Some((fingerprint, why));
        match &err {
            CloudError::ImplementedElsewhere => {
                tracing::debug!(service = %key_of(service), "implemented by another controller; leaving it alone");
                park(Parked::ImplementedElsewhere);
                return Ok(());
            }
            err if is_retry(err) => {
                tracing::info!(service = %key_of(service), error = %err, "the provider asked to retry later");
            }
            CloudError::InvalidInput { .. } | CloudError::NotImplemented => {
                let note = format!(
                    "{what}: {err}; nothing was changed in the cloud, and this is not retried until the Service changes"
                );
                self.events.warning(&reference, reason, note).await;
                park(Parked::Refused);
            }
            _ => {
                self.events
                    .warning(&reference, reason, format!("{what}: {err}"))
                    .await;
            }
        }
        self.report_failure(service, &err).await;
        Err(err.into())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn at(rv: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            ..Service::default()
        }
    }

    #[test]
    fn every_version_but_the_newest_is_superseded() {
        let mut versions = Versions::new(&at("1"));
        assert!(versions.superseded().is_empty(), "nothing written");
        versions.wrote(&at("2"));
        versions.wrote(&at("3"));
        assert_eq!(versions.superseded(), ["1", "2"]);
    }

    #[test]
    fn a_write_that_changed_nothing_supersedes_nothing() {
        let mut versions = Versions::new(&at("7"));
        versions.wrote(&at("7"));
        assert!(
            versions.superseded().is_empty(),
            "the server kept version 7: it is current"
        );
    }
}
