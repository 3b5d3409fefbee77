//! Making a load balancer, pointing it at nodes, and deleting it with the
//! external services only it used.
//!
//! Each step looks before it writes, so a call cut short anywhere is
//! finished by the next one: external services are found by name in the
//! stack, links and port rules are compared before they are set, and the
//! port rules are written after the links, so rules that match mean the
//! links were set too.

use std::collections::BTreeMap;
use std::sync::Arc;

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use serde_json::json;

use super::{PAUSES_MS, RETRY_AFTER, Wanted, owned_metadata, plan, recorded_cluster};
use crate::api::is_planned;
use crate::cattle::{
    self, ExternalService, LB_IMAGE_SETTING, LaunchConfig, LbConfig, LoadBalancerService,
    STACK_EXTERNAL_ID, STACK_NAME, ServiceLink, SetServiceLinksInput, Setting, Stack,
};
use crate::instances::{addresses, hostname_matches};
use crate::{PROVIDER_ID_PREFIX, RancherProvider, external_service_name};

/// A stand-in's lifecycle: where a new service settles once registered,
/// so that the plan holds the activation it is then given.
fn planned_lifecycle() -> cattle::Lifecycle {
    cattle::Lifecycle {
        state: "inactive".to_owned(),
        ..cattle::Lifecycle::default()
    }
}

/// Whether Rancher is in the middle of changing `lifecycle`.
fn transitioning(lifecycle: &cattle::Lifecycle) -> bool {
    lifecycle.transitioning.as_deref() == Some("yes")
        || matches!(
            lifecycle.state.as_str(),
            "registering" | "activating" | "deactivating" | "updating-active" | "updating-inactive"
        )
}

impl RancherProvider {
    /// Makes the load balancer `wanted` describes, in the stack, with no
    /// port rules yet.
    pub(super) async fn create(
        &self,
        cluster: &str,
        wanted: &Wanted,
    ) -> Result<LoadBalancerService, CloudError> {
        let image = self.image().await?;
        let stack = self.stack().await?;
        let body = LoadBalancerService {
            name: wanted.name.clone(),
            stack_id: stack.resource.id,
            launch_config: Some(LaunchConfig {
                ports: wanted.ports.clone(),
                image_uuid: Some(format!("docker:{image}")),
            }),
            lb_config: Some(LbConfig::default()),
            metadata: Some(owned_metadata(None, cluster, &wanted.owner)),
            ..LoadBalancerService::default()
        };
        tracing::info!(name = %wanted.name, "creating a Rancher load balancer");
        let made = self.client.create("loadbalancerservices", &body).await?;
        Ok(made.unwrap_or_else(|| LoadBalancerService {
            resource: self.client.stand_in(
                "loadbalancerservices",
                &wanted.name,
                &["setservicelinks", "activate"],
            ),
            lifecycle: planned_lifecycle(),
            ..body
        }))
    }

    /// The `lb.instance.image` setting: the image every load balancer runs.
    async fn image(&self) -> Result<String, CloudError> {
        let settings: Vec<Setting> = self
            .client
            .list("settings", &[("name", LB_IMAGE_SETTING)])
            .await?;
        settings
            .into_iter()
            .find(|s| s.name.eq_ignore_ascii_case(LB_IMAGE_SETTING) && !s.value.is_empty())
            .map(|s| s.value)
            .ok_or_else(|| {
                CloudError::msg(format!(
                    "Rancher has no {LB_IMAGE_SETTING} setting: it names the load balancers' image"
                ))
            })
    }

    /// The `kubernetes-loadbalancers` stack, made when missing.
    async fn stack(&self) -> Result<Stack, CloudError> {
        let stacks: Vec<Stack> = self
            .client
            .list(
                "stacks",
                &[
                    ("name", STACK_NAME),
                    ("removed_null", "1"),
                    ("externalId", STACK_EXTERNAL_ID),
                ],
            )
            .await?;
        if let Some(stack) = stacks.into_iter().find(|s| s.lifecycle.in_play()) {
            return Ok(stack);
        }
        let body = Stack {
            name: STACK_NAME.to_owned(),
            external_id: Some(STACK_EXTERNAL_ID.to_owned()),
            ..Stack::default()
        };
        let made = self.client.create("stacks", &body).await?;
        Ok(made.unwrap_or_else(|| Stack {
            resource: self.client.stand_in("stacks", STACK_NAME, &[]),
            ..body
        }))
    }

    /// Points `lb` at `nodes`: their external services made and active,
    /// its links and port rules set, its owner recorded, those no longer
    /// used removed, and the load balancer activated. The external services
    /// `removed` were just deleted (a dry run only planned it): none is
    /// used again.
    pub(super) async fn converge(
        &self,
        cluster: &str,
        nodes: &[Arc<Node>],
        mut lb: LoadBalancerService,
        wanted: &Wanted,
        removed: &[String],
    ) -> Result<LoadBalancerService, CloudError> {
        let (targets, others) = self.targets(&lb.stack_id, nodes, removed).await?;
        let ids: Vec<String> = targets.iter().map(|t| t.resource.id.clone()).collect();
        let current = lb.lb_config.as_ref().map(|c| c.port_rules.as_slice());
        let recorded = recorded_cluster(&lb).is_some();
        let plan = plan::plan(
            current.unwrap_or_default(),
            recorded,
            &ids,
            &wanted.forwards,
        );
        if plan.update {
            if plan.set_links {
                lb = self.set_links(lb, &targets).await?;
            }
            let body = json!({
                "lbConfig": LbConfig { port_rules: plan.rules },
                "metadata": owned_metadata(Some(&lb), cluster, &wanted.owner),
            });
            if let Some(updated) = self.client.update(&lb.resource, &body).await? {
                lb = updated;
            }
        }
        for service in others
            .iter()
            .filter(|s| plan.dropped.contains(&s.resource.id))
        {
            self.remove_unused(&service.resource, &service.name, &lb.resource.id)
                .await?;
        }
        if lb.lifecycle.state == "inactive"
            && self
                .client
                .action(&lb.resource, "activate", None::<&()>)
                .await?
        {
            tracing::info!(name = %lb.name, "activating the Rancher load balancer");
            lb = self.reload(&lb).await?;
        }
        Ok(lb)
    }

    /// `lb` as it is now; a stand-in as it is.
    async fn reload(&self, lb: &LoadBalancerService) -> Result<LoadBalancerService, CloudError> {
        if is_planned(&lb.resource.id) {
            return Ok(lb.clone());
        }
        self.client
            .reload(&lb.resource)
            .await?
            .ok_or_else(|| CloudError::msg(format!("Rancher load balancer {} vanished", lb.name)))
    }

    /// `setservicelinks` to `targets`, once the load balancer allows it
    /// (not while it registers), waiting a few seconds at most.
    async fn set_links(
        &self,
        mut lb: LoadBalancerService,
        targets: &[ExternalService],
    ) -> Result<LoadBalancerService, CloudError> {
        let input = SetServiceLinksInput {
            service_links: targets
                .iter()
                .map(|t| ServiceLink {
                    service_id: t.resource.id.clone(),
                })
                .collect(),
        };
        for pause in PAUSES_MS {
            if self
                .client
                .action(&lb.resource, "setservicelinks", Some(&input))
                .await?
            {
                return Ok(lb);
            }
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            lb = self.reload(&lb).await?;
        }
        Err(CloudError::Retry {
            after: RETRY_AFTER,
            reason: format!(
                "Rancher load balancer {} is {}: its service links wait",
                lb.name, lb.lifecycle.state
            ),
        })
    }

    /// The external services for `nodes`, made where missing and activated
    /// where inactive, and the stack's other live external services. Hosts
    /// are listed only when one is missing.
    async fn targets(
        &self,
        stack_id: &str,
        nodes: &[Arc<Node>],
        removed: &[String],
    ) -> Result<(Vec<ExternalService>, Vec<ExternalService>), CloudError> {
        // A stack a dry run planned holds nothing yet.
        let listed = if is_planned(stack_id) {
            Vec::new()
        } else {
            self.client
                .list::<ExternalService>(
                    "externalservices",
                    &[("stackId", stack_id), ("removed_null", "1")],
                )
                .await?
        };
        let mut existing: BTreeMap<String, ExternalService> = listed
            .into_iter()
            .filter(|s| s.lifecycle.in_play() && !removed.contains(&s.resource.id))
            .map(|s| (s.name.clone(), s))
            .collect();
        let wanted: BTreeMap<String, &Node> = nodes
            .iter()
            .map(|n| {
                let name = n.metadata.name.as_deref().unwrap_or_default();
                (external_service_name(name), n.as_ref())
            })
            .filter(|(name, _)| !name.is_empty())
            .collect();
        let missing: Vec<(&String, &&Node)> = wanted
            .iter()
            .filter(|(name, _)| !existing.contains_key(*name))
            .collect();
        if !missing.is_empty() {
            let hosts = self.hosts().await?;
            for (name, node) in missing {
                let Some(ip) = host_address(&hosts, node) else {
                    // As upstream: a node whose host has no address yet is
                    // left out until it has one.
                    tracing::debug!(
                        node = name.as_str(),
                        "no Rancher host address; not a target yet"
                    );
                    continue;
                };
                let body = ExternalService {
                    name: name.clone(),
                    stack_id: stack_id.to_owned(),
                    external_ip_addresses: vec![ip],
                    ..ExternalService::default()
                };
                let made = self.client.create("externalservices", &body).await?;
                let made = made.unwrap_or_else(|| ExternalService {
                    resource: self
                        .client
                        .stand_in("externalservices", name, &["activate"]),
                    lifecycle: planned_lifecycle(),
                    ..body
                });
                existing.insert(name.clone(), made);
            }
        }
        let mut targets = Vec::with_capacity(wanted.len());
        for name in wanted.keys() {
            let Some(mut service) = existing.remove(name) else {
                continue;
            };
            service = self.activate(service).await?;
            targets.push(service);
        }
        targets.sort_by(|a, b| a.resource.id.cmp(&b.resource.id));
        Ok((targets, existing.into_values().collect()))
    }

    /// Activates an inactive external service, waiting out a registration
    /// for a few seconds at most.
    async fn activate(&self, mut service: ExternalService) -> Result<ExternalService, CloudError> {
        for pause in PAUSES_MS {
            if service.lifecycle.state == "inactive"
                && self
                    .client
                    .action(&service.resource, "activate", None::<&()>)
                    .await?
            {
                return Ok(service);
            }
            if !transitioning(&service.lifecycle) {
                return Ok(service);
            }
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            service = self
                .client
                .reload(&service.resource)
                .await?
                .ok_or_else(|| {
                    CloudError::msg(format!(
                        "Rancher external service {} vanished",
                        service.name
                    ))
                })?;
        }
        Err(CloudError::Retry {
            after: RETRY_AFTER,
            reason: format!(
                "Rancher external service {} is {}",
                service.name, service.lifecycle.state
            ),
        })
    }

    /// Deletes `lb` and the external services no other load balancer uses,
    /// those first (as upstream), so that a delete cut short leaves the
    /// load balancer for the next one to find. The IDs of the external
    /// services deleted (or, in a dry run, planned to be).
    pub(super) async fn delete(&self, lb: &LoadBalancerService) -> Result<Vec<String>, CloudError> {
        let consumed: Vec<cattle::Service> =
            self.client.link(&lb.resource, "consumedservices").await?;
        let mut removed = Vec::new();
        for service in consumed.iter().filter(|s| s.lifecycle.in_play()) {
            if self
                .remove_unused(&service.resource, &service.name, &lb.resource.id)
                .await?
            {
                removed.push(service.resource.id.clone());
            }
        }
        tracing::info!(name = %lb.name, "deleting the Rancher load balancer");
        self.client.delete(&lb.resource).await?;
        Ok(removed)
    }

    /// Deletes the external service `resource` (called `name`) if no load
    /// balancer but `except` uses it; whether it did.
    async fn remove_unused(
        &self,
        resource: &cattle::Resource,
        name: &str,
        except: &str,
    ) -> Result<bool, CloudError> {
        let users: Vec<cattle::Service> = self.client.link(resource, "consumedbyservices").await?;
        if users
            .iter()
            .any(|u| u.resource.id != except && u.lifecycle.in_play())
        {
            tracing::debug!(service = name, "external service still used; kept");
            return Ok(false);
        }
        tracing::info!(
            service = name,
            "removing an external service no load balancer uses"
        );
        self.client.delete(resource).await?;
        Ok(true)
    }
}

/// The first address of `node`'s host, by provider ID or name.
fn host_address(hosts: &[cattle::Host], node: &Node) -> Option<String> {
    let uuid = ccm_cloud_provider::provider_id(node)
        .and_then(|id| id.strip_prefix(PROVIDER_ID_PREFIX))
        .filter(|id| !id.is_empty());
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let host = match uuid {
        Some(uuid) => hosts.iter().find(|h| h.uuid == uuid),
        None => hosts.iter().find(|h| hostname_matches(&h.hostname, name)),
    }?;
    addresses(host).first().map(|a| (*a).to_owned())
}
