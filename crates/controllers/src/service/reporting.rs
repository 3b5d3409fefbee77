//! What the service controller reports on a Service besides its load
//! balancer: the ingress and the `LoadBalancerProvisioned` and
//! `LoadBalancerTargetsHealthy` conditions in one status write (or none
//! when nothing changed), the target-health asks, and their metrics.

use std::time::Duration;

use ccm_cloud_provider::{CloudError, LoadBalancer};
use ccm_runtime::ReconcileError;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::time::Instant;

use super::conditions::{self, OURS, Wanted};
use super::eligible::NodeSet;
use super::load_balancer::Versions;
use super::records::key_of;
use super::{ServiceController, status};

impl ServiceController {
    /// Writes through `/status` what differs from the Service: the ingress
    /// when given, each wanted condition that changed, and, with
    /// `remove_ours`, the removal of our conditions present. One write or
    /// none.
    pub(super) async fn write_status(
        &self,
        service: &Service,
        ingress: Option<&[LoadBalancerIngress]>,
        wanted: &[Wanted],
        remove_ours: bool,
        versions: &mut Versions,
    ) -> Result<(), ReconcileError> {
        let shown = status::current_ingress(service);
        let ingress = ingress.filter(|i| !status::same_ingress(shown, i));
        let now = Time(jiff::Timestamp::now());
        let current = conditions::current(service);
        let changed = conditions::changes(current, wanted, service.metadata.generation, &now);
        let removed: Vec<&str> = if remove_ours {
            OURS.into_iter()
                .filter(|t| current.iter().any(|c| c.type_ == *t))
                .collect()
        } else {
            Vec::new()
        };
        if ingress.is_none() && changed.is_empty() && removed.is_empty() {
            return Ok(());
        }
        let first_ingress = shown.is_empty() && ingress.is_some_and(|i| !i.is_empty());
        let Some(stored) = self
            .writes
            .set_status(service, ingress, &changed, &removed)
            .await?
        else {
            return Ok(());
        };
        versions.wrote(&stored);
        if first_ingress && let Some(created) = &service.metadata.creation_timestamp {
            let took = Duration::try_from(now.0.duration_since(created.0)).unwrap_or_default();
            self.conditions.time_to_ingress.observe(took.as_secs_f64());
        }
        if remove_ours {
            self.conditions.unhealthy.forget(service);
        }
        Ok(())
    }

    /// Reports a failed provider call in `LoadBalancerProvisioned` (not in
    /// a dry run, whose refused mutations are its plan). A
    /// write failure is logged, not returned: the provider's error is the
    /// one that counts. The version written is remembered, so that its own
    /// watch event does not retry the provider before the backoff ends.
    pub(super) async fn report_failure(&self, service: &Service, err: &CloudError) {
        // A dry run's refusals are its plan, not the Service's state.
        if self.cloud.plan().is_some() {
            return;
        }
        let Some(wanted) = conditions::failed(err) else {
            return;
        };
        let mut versions = Versions::new(service);
        if let Err(write) = self
            .write_status(service, None, &[wanted], false, &mut versions)
            .await
        {
            tracing::info!(service = %key_of(service), error = %write, "could not report the failure in the Service's conditions");
            return;
        }
        if let Some(rv) = versions.newest_written() {
            self.records().entry(service).failure_report = Some(rv);
        }
    }

    /// Asks the provider for its targets' health when due, and writes a
    /// changed `LoadBalancerTargetsHealthy`; returns how long until the next
    /// ask, `None` when none is due.
    pub(super) async fn follow_health(
        &self,
        service: &Service,
        nodes: &NodeSet,
    ) -> Result<Option<Duration>, ReconcileError> {
        let now = Instant::now();
        let readiness = *self.readiness.borrow();
        let due = {
            let mut records = self.records();
            let watch = &mut records.entry(service).health;
            watch.signals(readiness, now);
            watch.next(now)
        };
        if due == Some(Duration::ZERO)
            && let Some(wanted) = self.ask_health(service, nodes).await
        {
            let mut versions = Versions::new(service);
            self.write_status(service, None, &[wanted], false, &mut versions)
                .await?;
            if versions.newest_written().is_some() {
                self.records().entry(service).superseded = versions.superseded();
            }
        }
        Ok(self.records().health_wait(&key_of(service), Instant::now()))
    }

    /// The load balancer of `service` changed: its health is asked next
    /// (unless `--load-balancer-target-health=false`: then never).
    pub(super) fn health_changed(&self, service: &Service) {
        if !self.target_health {
            return;
        }
        self.records().entry(service).health.changed(Instant::now());
    }

    /// One ask; the condition to write when the provider could tell.
    pub(super) async fn ask_health(&self, service: &Service, nodes: &NodeSet) -> Option<Wanted> {
        let answer = self
            .cloud
            .load_balancer_health(&self.cluster_name, service, &nodes.nodes)
            .await;
        let now = Instant::now();
        let mut records = self.records();
        let watch = &mut records.entry(service).health;
        match answer {
            Ok(None) => {
                watch.answered(None, now);
                self.conditions.unhealthy.forget(service);
                None
            }
            Ok(Some(health)) => {
                let wanted = conditions::targets(&health);
                if let Some(took) = watch.answered(Some(wanted.all_healthy()), now) {
                    self.conditions.time_to_healthy.observe(took.as_secs_f64());
                }
                self.conditions
                    .unhealthy
                    .set(service, conditions::not_healthy(&health));
                Some(wanted)
            }
            Err(err) => {
                tracing::info!(service = %key_of(service), error = %err, "could not read the load balancer's target health");
                watch.failed(now);
                None
            }
        }
    }
}
