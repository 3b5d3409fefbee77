//! Services of type `LoadBalancer` without `aws-load-balancer-type`: classic
//! ELBs, as upstream makes them (`EnsureLoadBalancer`'s classic branch and
//! `ensureLoadBalancer` in cloud-provider-aws).
//!
//! Per Service: the ELB named `a` + the UID (cut to 32), with a listener
//! per port to the node port, the nodes' instances registered, a health
//! check, attributes, proxy-protocol and SSL negotiation policies; a
//! security group of its own (`k8s-elb-<name>`) unless the Service or the
//! config names one; and a rule in each node security group letting that
//! group in. All tagged `kubernetes.io/cluster/<id>=owned`, the ELB also
//! `kubernetes.io/service-name`.
//!
//! # Guarantees
//! - The Service is validated in full ([`spec`]) before the first change.
//! - An ELB with the name but not this cluster's and Service's tags, or a
//!   group named for it without this cluster's tag, is never adopted,
//!   changed or deleted.
//! - Only what differs is changed: an ELB made by upstream and asking
//!   nothing new costs reads only (upstream re-creates its proxy-protocol
//!   policy, re-adds tags and re-sets attributes on every ensure).
//! - Deletion removes the ELB, its node rules and its own group; the group
//!   and its rules also when a crash left them without their ELB.

mod elb;
mod security;
mod settings;
mod spec;

use std::sync::Arc;

use aws_sdk_elasticloadbalancing::types::{LoadBalancerDescription, Tag};
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{
    CloudError, EnsuredLoadBalancer, LoadBalancerIngress, LoadBalancerStatus,
};

pub(crate) use spec::{ClassicSpec, NETWORK_ONLY};

use super::instance_ids;
use super::security_groups::asked::AskedGroups;
use super::spec::ServiceRef;
use crate::provider::Cloud;
use crate::tagging::elb_tags;

/// What `status.loadBalancer` says: the DNS name, as upstream's `toStatus`.
pub(crate) fn status(lb: &LoadBalancerDescription) -> LoadBalancerStatus {
    let ingress = lb
        .dns_name()
        .filter(|name| !name.is_empty())
        .map(|name| LoadBalancerIngress {
            hostname: Some(name.to_owned()),
            ..LoadBalancerIngress::default()
        });
    LoadBalancerStatus {
        ingress: ingress.into_iter().collect(),
    }
}

impl Cloud {
    /// Refuses an ELB that is not this cluster's for this Service, or
    /// whose scheme the Service no longer asks for.
    fn check_classic(
        &self,
        spec: &ClassicSpec,
        lb: &LoadBalancerDescription,
        tags: &[Tag],
    ) -> Result<(), CloudError> {
        self.check_adoptable(
            "classic ELB",
            &spec.svc,
            self.tags
                .is_owned_for_service(elb_tags(tags), &spec.svc.key),
            (lb.scheme() == Some("internal"), spec.internal),
        )
    }

    pub(crate) async fn ensure_classic(
        &self,
        spec: &ClassicSpec,
        nodes: &[Arc<Node>],
        existing: Option<(LoadBalancerDescription, Vec<Tag>)>,
    ) -> Result<EnsuredLoadBalancer, CloudError> {
        let name = &spec.svc.load_balancer_name;
        if let Some((lb, tags)) = &existing {
            self.check_classic(spec, lb, tags)?;
        }
        let subnets = self
            .subnets_for(spec.internal, spec.subnets.as_deref())
            .await?;
        let vpc_id = existing
            .as_ref()
            .and_then(|(lb, _)| lb.vpc_id())
            .or_else(|| subnets.first().and_then(|s| s.vpc_id()))
            .ok_or_else(|| CloudError::msg("cannot tell the ELB's VPC"))?
            .to_owned();
        let subnet_ids: Vec<String> = subnets
            .iter()
            .filter_map(|s| s.subnet_id().map(str::to_owned))
            .collect();
        let instances = self
            .target_instances(&spec.target_node_labels, nodes)
            .await?;
        let tags = self
            .tags
            .owned_for_service(&spec.svc.key, &spec.additional_tags);
        let groups = self.classic_security_groups(spec, &vpc_id).await?;

        // A new or changed ELB is described once, after its attributes.
        // A dry run goes on with the ELB it planned to create.
        let (existing, planned, mut dirty) = match existing {
            None => {
                let planned = self
                    .create_classic(spec, &subnet_ids, &groups.attached, &tags)
                    .await?;
                self.set_proxy_protocol(spec, None).await?;
                (None, planned, true)
            }
            Some((lb, current_tags)) => {
                let changed = self
                    .update_classic_settings(spec, &lb, &current_tags, &tags, &subnet_ids, &groups)
                    .await?;
                (Some(lb), None, changed)
            }
        };
        dirty |= self
            .sync_classic_attributes(spec, planned.is_some())
            .await?;
        let lb = match (existing, planned) {
            (_, Some(planned)) => planned,
            (Some(lb), None) if !dirty => lb,
            // A dry run made no change to describe: the ELB as the planned
            // listener changes leave it.
            (Some(lb), None) if ccm_cloud_provider::fence::dry_run() => {
                elb::with_listeners(lb, &spec.listeners)?
            }
            _ => self.describe_classic(name).await?,
        };
        self.sync_ssl_policy(spec, &lb).await?;
        self.sync_health_check(spec, &lb).await?;
        self.sync_classic_node_rules(&groups, &vpc_id, &instances)
            .await?;
        self.sync_registered(name, &lb, &instance_ids(&instances))
            .await?;
        Ok(status(&lb).into())
    }

    /// The nodes changed: registered instances and node rules follow.
    pub(crate) async fn update_classic(
        &self,
        spec: &ClassicSpec,
        nodes: &[Arc<Node>],
        found: Option<(LoadBalancerDescription, Vec<Tag>)>,
    ) -> Result<(), CloudError> {
        let name = &spec.svc.load_balancer_name;
        let (lb, tags) = found.ok_or_else(|| {
            CloudError::msg(format!(
                "classic ELB {name} for Service {} does not exist",
                spec.svc.key
            ))
        })?;
        self.check_classic(spec, &lb, &tags)?;
        let instances = self
            .target_instances(&spec.target_node_labels, nodes)
            .await?;
        let vpc_id = lb.vpc_id().unwrap_or_default().to_owned();
        let groups = self.attached_groups(spec, &lb);
        self.sync_classic_node_rules(&groups, &vpc_id, &instances)
            .await?;
        self.sync_registered(name, &lb, &instance_ids(&instances))
            .await
    }

    /// Deletes the Service's ELB, its node rules and its own group.
    /// `asked` are the groups the Service names, never deleted.
    pub(crate) async fn delete_classic(
        &self,
        svc: &ServiceRef,
        asked: &AskedGroups,
    ) -> Result<(), CloudError> {
        let name = &svc.load_balancer_name;
        let found = self.find_classic(name).await?;
        let mut vpc_id = self.config.vpc.clone();
        let mut attached = Vec::new();
        if let Some((lb, tags)) = &found {
            if !self.tags.is_owned_for_service(elb_tags(tags), &svc.key) {
                tracing::warn!(service = %svc.key, name = %name, "a classic ELB with the Service's name is not this cluster's; leaving it");
                return Ok(());
            }
            vpc_id = lb.vpc_id().map(str::to_owned).or(vpc_id);
            attached = lb.security_groups().to_vec();
        }
        let own = self.own_classic_group(name, vpc_id.as_deref()).await?;
        if let Some(own) = &own {
            self.revoke_references(own, true).await?;
        }
        // A group the config or the Service names may be shared: its node
        // rules go only once no other ELB uses it.
        let shared = attached
            .iter()
            .find(|g| own.as_deref() != Some(g.as_str()) && !asked.extra.contains(g));
        if found.is_some() {
            if let Some(group) = shared
                && !self.used_by_another_classic(group, name).await?
            {
                self.revoke_references(group, false).await?;
            }
            tracing::info!(service = %svc.key, name = %name, "deleting classic ELB");
            self.delete_classic_elb(name).await?;
        }
        if let Some(own) = own {
            self.delete_security_group(&own).await?;
            tracing::info!(group = %own, service = %svc.key, "deleted classic ELB security group");
        }
        Ok(())
    }

    /// Deletes the ELB named `name`; gone already is fine.
    pub(crate) async fn delete_classic_elb(&self, name: &str) -> Result<(), CloudError> {
        let deleted = self
            .api
            .change("DeleteLoadBalancer", || {
                self.api
                    .elb
                    .delete_load_balancer()
                    .load_balancer_name(name)
                    .send()
            })
            .await;
        match deleted {
            Err(e) if e.is("LoadBalancerNotFound") => Ok(()),
            other => Ok(other.map(drop)?),
        }
    }

    pub(crate) async fn classic_status(
        &self,
        svc: &ServiceRef,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        Ok(self
            .find_classic(&svc.load_balancer_name)
            .await?
            .filter(|(_, tags)| self.tags.is_owned_for_service(elb_tags(tags), &svc.key))
            .map(|(lb, _)| status(&lb)))
    }
}
