//! Periodic re-tagging, as upstream's tags syncer: every LoadBalancer
//! Service's load balancer carries the cluster tag `k8s:<DO_CLUSTER_ID>`,
//! including those created before the cluster ID was set.
//!
//! # API calls
//! One load-balancer list finds every Service's load balancer (by the
//! recorded ID, else its tag, else its name), and one
//! `POST /v2/tags/{tag}/resources` tags all of those lacking the tag; none
//! when none lacks it. A 404 there means the tag does not exist yet: it is
//! created (`POST /v2/tags`) and the tagging retried once. A dry run, which
//! sends no tagging, asks whether the tag exists (`GET /v2/tags/{tag}`)
//! and plans its creation when it does not.
//!
//! Only a load balancer the Service owns (see `load_balancer::ownership`)
//! is tagged: never one tagged for another Service or cluster.

use std::collections::BTreeSet;
use std::sync::Arc;

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use serde::Serialize;
use serde_json::Value;

use crate::DigitalOceanProvider;
use crate::api::{self, types};
use crate::load_balancer::ownership;

/// The type upstream's godo sends for load balancers. DigitalOcean's
/// published spec does not list it among `resource_type`'s values.
const LOAD_BALANCER_RESOURCE: &str = "load_balancer";

#[derive(Debug, Serialize)]
struct TagResources<'a> {
    resources: Vec<Resource<'a>>,
}

#[derive(Debug, Serialize)]
struct Resource<'a> {
    resource_id: &'a str,
    resource_type: &'static str,
}

#[derive(Debug, Serialize)]
struct TagCreate<'a> {
    name: &'a str,
}

impl DigitalOceanProvider {
    /// Tags the load balancers of `services` lacking `cluster_tag`.
    ///
    /// # Errors
    /// The API's error.
    pub(crate) async fn retag_load_balancers(
        &self,
        cluster_tag: &str,
        services: &[Arc<Service>],
    ) -> Result<(), CloudError> {
        let lb_services: Vec<&Service> = services
            .iter()
            .map(Arc::as_ref)
            .filter(|s| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer"))
            .collect();
        if lb_services.is_empty() {
            return Ok(());
        }
        let all: Vec<types::LoadBalancer> = self.api.list_all("/v2/load_balancers", &[]).await?;
        let untagged: BTreeSet<&str> = lb_services
            .iter()
            .filter_map(|s| Some((s, self.owned_load_balancer(s, &all)?)))
            .filter(|(s, lb)| {
                let uid = s.metadata.uid.as_deref().unwrap_or_default();
                ownership::missing_tags(lb, uid, Some(cluster_tag))
                    .iter()
                    .any(|t| t == cluster_tag)
            })
            .map(|(_, lb)| lb.id.as_str())
            .collect();
        if untagged.is_empty() {
            return Ok(());
        }
        tracing::info!(tag = cluster_tag, load_balancers = ?untagged, "tagging load balancers with the cluster tag");
        let body = TagResources {
            resources: untagged
                .into_iter()
                .map(|id| Resource {
                    resource_id: id,
                    resource_type: LOAD_BALANCER_RESOURCE,
                })
                .collect(),
        };
        let path = format!("/v2/tags/{cluster_tag}/resources");
        if ccm_cloud_provider::fence::dry_run() && !self.tag_exists(cluster_tag).await? {
            // A dry run never sends the tagging whose 404 would tell: it
            // asks, and plans the tag's creation before the tagging.
            let tag = TagCreate { name: cluster_tag };
            let created = self.api.post::<_, Value>("/v2/tags", &tag).await;
            api::planned(created.map(drop))?;
        }
        match self.api.post_no_content(&path, &body).await {
            Err(e) if e.is_not_found() => {
                // Load balancers created before the cluster ID was set: the
                // tag may not exist yet.
                tracing::info!(tag = cluster_tag, "creating the cluster tag");
                self.api
                    .post::<_, Value>("/v2/tags", &TagCreate { name: cluster_tag })
                    .await?;
                Ok(self.api.post_no_content(&path, &body).await?)
            }
            other => Ok(other?),
        }
    }

    /// Whether `tag` exists (`GET /v2/tags/{tag}`).
    async fn tag_exists(&self, tag: &str) -> Result<bool, CloudError> {
        match self.api.get::<Value>(&format!("/v2/tags/{tag}"), &[]).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}
