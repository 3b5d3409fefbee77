//! The public-access firewall (`PUBLIC_ACCESS_FIREWALL_NAME` and `_TAGS`):
//! one DigitalOcean firewall on the worker droplets' tags, kept open to the
//! ports the Services need from outside, as upstream's firewall controller
//! keeps it.
//!
//! # API calls
//! A sync reads the firewall once: by the ID remembered from the last sync
//! (`GET /v2/firewalls/{id}`), or, the first time and after it vanished, by
//! listing firewalls and matching the name. It writes only when the rules,
//! name or tags differ (compared in any order): `PUT` the whole firewall,
//! or `POST` it when there is none (or the `PUT` finds it gone). A steady
//! state costs that one GET per sync; upstream skips even that between its
//! five-minute refreshes, at the price of not noticing a firewall changed
//! by hand until then.

pub(crate) mod rules;

use std::sync::Arc;

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use parking_lot::Mutex;

use crate::DigitalOceanProvider;
use crate::api::ApiError;
use crate::config::PublicAccessFirewall;
use rules::{Firewall, FirewallEnvelope, FirewallSpec};

/// The firewall last read or written, whose ID makes the next read one GET.
#[derive(Debug, Default)]
pub(crate) struct FirewallCache(Mutex<Option<Firewall>>);

impl FirewallCache {
    fn id(&self) -> Option<String> {
        self.0.lock().as_ref().map(|fw| fw.id.clone())
    }

    fn set(&self, firewall: Option<Firewall>) {
        *self.0.lock() = firewall;
    }
}

impl DigitalOceanProvider {
    /// Brings the public-access firewall in step with `services`.
    ///
    /// # Errors
    /// [`CloudError::InvalidInput`] when a LoadBalancer Service's type or
    /// network annotation is invalid (the firewall is left as it is), or
    /// the API's error.
    pub(crate) async fn sync_firewall(
        &self,
        firewall: &PublicAccessFirewall,
        services: &[Arc<Service>],
    ) -> Result<(), CloudError> {
        let wanted = rules::wanted(firewall, self.settings.default_lb_type, services)?;
        let current = self.current_firewall(&firewall.name).await?;
        let cache = &self.observed.firewall;
        let written = match current {
            Some(fw) if rules::matches(&fw.spec, &wanted) => {
                tracing::debug!(firewall = %fw.spec.name, "public-access firewall up to date");
                cache.set(Some(fw));
                return Ok(());
            }
            Some(fw) => {
                tracing::info!(
                    firewall = %wanted.name,
                    id = %fw.id,
                    inbound_rules = wanted.inbound_rules.len(),
                    "updating the public-access firewall"
                );
                match self
                    .api
                    .put::<_, FirewallEnvelope>(&format!("/v2/firewalls/{}", fw.id), &wanted)
                    .await
                {
                    Err(e) if e.is_not_found() => self.create_firewall(&wanted).await,
                    other => other,
                }
            }
            None => self.create_firewall(&wanted).await,
        };
        match written {
            Ok(envelope) => {
                cache.set(Some(envelope.firewall));
                Ok(())
            }
            Err(e) => {
                // Read it afresh next time.
                cache.set(None);
                Err(e.into())
            }
        }
    }

    async fn create_firewall(&self, wanted: &FirewallSpec) -> Result<FirewallEnvelope, ApiError> {
        tracing::info!(
            firewall = %wanted.name,
            inbound_rules = wanted.inbound_rules.len(),
            "creating the public-access firewall"
        );
        self.api.post("/v2/firewalls", wanted).await
    }

    /// Deletes firewall `id`; one already gone is no error.
    pub(crate) async fn delete_firewall(&self, id: &str) -> Result<(), ApiError> {
        tracing::info!(id = %id, "deleting the public-access firewall");
        let deleted = match self
            .api
            .delete::<()>(&format!("/v2/firewalls/{id}"), None)
            .await
        {
            Err(e) if e.is_not_found() => Ok(()),
            other => other,
        };
        if self.observed.firewall.id().as_deref() == Some(id) {
            self.observed.firewall.set(None);
        }
        deleted
    }

    /// Firewall `id`, `None` when there is none.
    pub(crate) async fn firewall_by_id(&self, id: &str) -> Result<Option<Firewall>, ApiError> {
        match self
            .api
            .get::<FirewallEnvelope>(&format!("/v2/firewalls/{id}"), &[])
            .await
        {
            Ok(found) => Ok(Some(found.firewall)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The firewall: by the remembered ID, else the one named `name`.
    pub(crate) async fn current_firewall(&self, name: &str) -> Result<Option<Firewall>, ApiError> {
        if let Some(id) = self.observed.firewall.id() {
            if let Some(found) = self.firewall_by_id(&id).await? {
                return Ok(Some(found));
            }
            tracing::warn!(id = %id, "the public-access firewall no longer exists");
            self.observed.firewall.set(None);
        }
        let all: Vec<Firewall> = self.api.list_all("/v2/firewalls", &[]).await?;
        Ok(all.into_iter().find(|fw| fw.spec.name == name))
    }
}
