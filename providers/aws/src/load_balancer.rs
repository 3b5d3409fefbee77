//! Services of type `LoadBalancer` as Network Load Balancers.
//!
//! Per Service: the load balancer (named as upstream names it), a target
//! group per port with the nodes' instances as targets on the node port, a
//! listener per port, rules in the nodes' security groups, and with
//! `NLBSecurityGroupMode = Managed` a security group of the load balancer's
//! own; all tagged `kubernetes.io/cluster/<id>=owned` and
//! `kubernetes.io/service-name=<namespace>/<name>`.
//!
//! # Guarantees
//! - The Service is validated in full ([`spec`]) and every lookup that can
//!   refuse it is made before the first change: a bad annotation changes
//!   nothing.
//! - Everything is looked up by name and checked for this cluster's and
//!   Service's tags before it is created; a resource with the name but not
//!   the tags is never adopted, changed or deleted. (The load balancer's
//!   own security group, which upstream tags with the cluster alone, needs
//!   the cluster's tag and no other Service's.)
//! - Deletion removes the load balancer, its target groups (also those a
//!   crash left unattached), its node rules and any security group made
//!   for it.

pub mod annotations;
mod classic;
mod health;
mod kind_change;
mod listeners;
mod naming;
mod nlb;
pub(crate) mod recent;
mod security_groups;
pub(crate) mod service_check;
mod spec;
mod subnets;
mod target_groups;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_ec2::types::{Instance, InstanceStateName};
use aws_sdk_elasticloadbalancingv2::types::{LoadBalancer as Nlb, Tag};
use ccm_cloud_provider::annotations::AnnotationSchema;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::{
    CloudError, EnsuredLoadBalancer, LoadBalancer, LoadBalancerHealth, LoadBalancerStatus,
};

use crate::instances::lookup::{NodeKey, node_key, state};
use crate::provider::{AwsProvider, Cloud};
use crate::tagging::elbv2_tags;
use annotations::labels_match;
use classic::ClassicSpec;
use health::NodeNames;
use listeners::forward_target;
use nlb::{AttachedGroups, status};
use security_groups::asked::AskedGroups;
use security_groups::node_rules::needs_health_rule;
use spec::{Kind, LoadBalancerSpec, ServiceRef, is_external, kind};

impl Cloud {
    /// The running instances of the nodes the Service targets.
    async fn target_instances(
        &self,
        target_node_labels: &BTreeMap<String, String>,
        nodes: &[Arc<Node>],
    ) -> Result<Vec<Instance>, CloudError> {
        let targets: Vec<&Node> = nodes
            .iter()
            .map(AsRef::as_ref)
            .filter(|n| labels_match(target_node_labels, n.metadata.labels.as_ref()))
            .collect();
        let found = self.find_targets(&targets).await?;
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for (node, result) in targets.iter().zip(found) {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            match result {
                Ok(Some(i)) if state(&i) == InstanceStateName::Running => {
                    if seen.insert(i.instance_id().unwrap_or_default().to_owned()) {
                        out.push(i);
                    }
                }
                Ok(_) => tracing::debug!(node = name, "node has no running instance; not a target"),
                Err(e) => {
                    tracing::warn!(node = name, error = %e, "node cannot be a load balancer target");
                }
            }
        }
        Ok(out)
    }

    /// The instances behind `targets`, from the recent snapshot when it
    /// holds them all ([`recent`]), else described and remembered.
    async fn find_targets(
        &self,
        targets: &[&Node],
    ) -> Result<Vec<Result<Option<Instance>, CloudError>>, CloudError> {
        let ids: Option<Vec<&str>> = targets
            .iter()
            .map(|n| match node_key(n) {
                Ok(NodeKey::Id(id)) => Some(id),
                _ => None,
            })
            .collect();
        if let Some(cached) = ids.and_then(|ids| self.recent.instances(&ids)) {
            return Ok(cached.into_iter().map(|i| Ok(Some(i))).collect());
        }
        let found = self.find_instances(targets).await?;
        self.recent.remember_instances(
            found
                .iter()
                .filter_map(|r| r.as_ref().ok().and_then(Clone::clone)),
        );
        Ok(found)
    }

    async fn ensure(
        &self,
        cluster_name: &str,
        spec: &LoadBalancerSpec,
        nodes: &[Arc<Node>],
        found: Option<(Nlb, Vec<Tag>, AttachedGroups)>,
    ) -> Result<EnsuredLoadBalancer, CloudError> {
        // Everything that can refuse the Service happens before any change.
        let (existing, groups) = match found {
            Some((lb, tags, groups)) => (Some((lb, tags)), Some(groups)),
            None => (None, None),
        };
        if let Some((lb, tags)) = &existing {
            self.check_existing(spec, lb, tags)?;
        }
        let may_have_groups = match &existing {
            Some((lb, _)) => !lb.security_groups().is_empty(),
            None => self.config.nlb_security_group_managed,
        };
        spec.security_groups
            .check(existing.is_some(), may_have_groups)?;
        let subnets = self.load_balancer_subnets(spec).await?;
        let vpc_id = existing
            .as_ref()
            .and_then(|(lb, _)| lb.vpc_id())
            .or_else(|| subnets.first().and_then(|s| s.vpc_id()))
            .ok_or_else(|| CloudError::msg("cannot tell the load balancer's VPC"))?
            .to_owned();
        let instances = self
            .target_instances(&spec.target_node_labels, nodes)
            .await?;
        let vpc_cidrs = self.vpc_cidrs(&vpc_id).await?;
        let tags = self
            .tags
            .owned_for_service(&spec.svc.key, &spec.additional_tags);

        let attached: Option<Vec<String>> = existing
            .as_ref()
            .map(|(lb, _)| lb.security_groups().to_vec());
        let chosen = self
            .chosen_security_groups(cluster_name, spec, attached.as_deref(), &vpc_id, &tags)
            .await?;
        let security_groups = spec.security_groups.apply(chosen);
        let attached = attached.unwrap_or_default();
        let lb = match existing {
            Some((lb, current)) => {
                self.update_load_balancer_settings(spec, &lb, &current, &tags, &security_groups)
                    .await?;
                lb
            }
            None => {
                let ids: Vec<String> = subnets
                    .iter()
                    .filter_map(|s| s.subnet_id().map(str::to_owned))
                    .collect();
                self.create_load_balancer(spec, (&ids, &vpc_id), &security_groups, &tags)
                    .await?
            }
        };
        let detached: Vec<&str> = attached
            .iter()
            .filter(|g| !security_groups.contains(g))
            .map(String::as_str)
            .collect();
        self.delete_detached_groups(cluster_name, &spec.svc, &detached)
            .await;
        let arn = lb.load_balancer_arn().unwrap_or_default();
        self.ensure_load_balancer_attributes(spec, arn).await?;
        self.ensure_listeners(spec, &lb, groups.as_ref(), &instance_ids(&instances), &tags)
            .await?;
        let subnet_cidrs = if needs_health_rule(spec, &vpc_cidrs) {
            self.load_balancer_subnet_cidrs(&lb, &subnets).await?
        } else {
            Vec::new()
        };
        self.ensure_node_rules(spec, &vpc_id, &vpc_cidrs, &subnet_cidrs, &instances)
            .await?;
        Ok(status(&lb).into())
    }

    async fn update(
        &self,
        spec: &LoadBalancerSpec,
        nodes: &[Arc<Node>],
        found: Option<(Nlb, Vec<Tag>)>,
    ) -> Result<(), CloudError> {
        let instances = self
            .target_instances(&spec.target_node_labels, nodes)
            .await?;
        let (lb, tags) = found.ok_or_else(|| {
            CloudError::msg(format!(
                "load balancer {} for Service {} does not exist",
                spec.svc.load_balancer_name, spec.svc.key
            ))
        })?;
        self.check_existing(spec, &lb, &tags)?;
        let ids = instance_ids(&instances);
        let listeners = self
            .listeners(lb.load_balancer_arn().unwrap_or_default())
            .await?;
        for port in &spec.ports {
            let target_group = listeners
                .iter()
                .find(|l| l.port() == Some(port.port))
                .and_then(forward_target);
            // A port without a listener yet is the next ensure's to create.
            if let Some(tg) = target_group {
                self.ensure_targets(tg, &ids, port.node_port, false).await?;
            }
        }
        let vpc_id = lb.vpc_id().unwrap_or_default();
        let vpc_cidrs = self.vpc_cidrs(vpc_id).await?;
        let subnet_cidrs = if needs_health_rule(spec, &vpc_cidrs) {
            self.load_balancer_subnet_cidrs(&lb, &[]).await?
        } else {
            Vec::new()
        };
        self.ensure_node_rules(spec, vpc_id, &vpc_cidrs, &subnet_cidrs, &instances)
            .await
    }

    async fn delete(&self, cluster_name: &str, svc: &ServiceRef) -> Result<(), CloudError> {
        let mut vpc_id = self.config.vpc.clone();
        let mut attached_groups = Vec::new();
        // Those deleted with the load balancer are not swept again (in a
        // dry run they are still there to be found).
        let mut deleted_groups = BTreeSet::new();
        if let Some((lb, tags, groups)) = self.find_with_groups(&svc.load_balancer_name).await? {
            if self.tags.is_owned_for_service(elbv2_tags(&tags), &svc.key) {
                let arn = lb.load_balancer_arn().unwrap_or_default();
                tracing::info!(service = %svc.key, name = %svc.load_balancer_name, "deleting network load balancer");
                self.delete_network_load_balancer(arn).await?;
                vpc_id = lb.vpc_id().map(str::to_owned).or(vpc_id);
                attached_groups = lb.security_groups().to_vec();
                let arns: Vec<&str> = groups
                    .groups
                    .iter()
                    .filter_map(|tg| tg.target_group_arn())
                    .collect();
                for arn in arns {
                    if groups
                        .tags
                        .get(arn)
                        .is_some_and(|t| self.tags.is_owned_for_service(elbv2_tags(t), &svc.key))
                    {
                        self.delete_target_group(arn).await?;
                        deleted_groups.insert(arn.to_owned());
                    }
                }
            } else {
                tracing::warn!(service = %svc.key, name = %svc.load_balancer_name, "a load balancer with the Service's name is not this cluster's; leaving it");
            }
        }
        let prefix = naming::target_group_prefix(svc);
        for tg in self.owned_target_groups(&prefix, &svc.key).await? {
            let arn = tg.target_group_arn().unwrap_or_default();
            if !deleted_groups.contains(arn) {
                self.delete_target_group(arn).await?;
            }
        }
        self.remove_node_rules(&svc.load_balancer_name, vpc_id.as_deref())
            .await?;
        self.delete_frontend_security_groups(cluster_name, svc, &attached_groups)
            .await
    }

    async fn status(&self, service: &Service) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let svc = ServiceRef::of(service);
        Ok(self
            .find_load_balancer(&svc.load_balancer_name)
            .await?
            .filter(|(_, tags)| self.tags.is_owned_for_service(elbv2_tags(tags), &svc.key))
            .map(|(lb, _)| status(&lb)))
    }
}

fn instance_ids(instances: &[Instance]) -> Vec<String> {
    instances
        .iter()
        .filter_map(|i| i.instance_id().map(str::to_owned))
        .collect()
}

#[async_trait]
impl LoadBalancer for AwsProvider {
    /// The load balancer of the kind the Service asks for, or, when there
    /// is none and the Service had one, of the other kind ([`kind_change`]).
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        if is_external(service) {
            return Err(CloudError::ImplementedElsewhere);
        }
        let cloud = self.cloud()?;
        let asked = kind(service)?;
        let status = cloud.status_of(service, asked).await?;
        if status.is_some() || !kind_change::had_load_balancer(service) {
            return Ok(status);
        }
        cloud.status_of(service, kind_change::other(asked)).await
    }

    /// Ownership and every annotation are read from the Service alone, so
    /// a new Service costs no `DescribeLoadBalancers` before its ensure.
    fn check_service(&self, service: &Service) -> Option<Result<(), CloudError>> {
        Some(service_check::check_service(service))
    }

    fn annotation_schema(&self) -> Option<&'static AnnotationSchema> {
        Some(&annotations::SCHEMA)
    }

    /// A Service whose type annotation changed keeps the load balancer it
    /// has, with a Warning ([`kind_change`]).
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<EnsuredLoadBalancer, CloudError> {
        let cloud = self.cloud()?;
        let asked = kind(service)?;
        if let Some(ensured) = cloud
            .ensure_as(cluster_name, service, asked, nodes, true)
            .await?
        {
            return Ok(ensured);
        }
        let built = kind_change::other(asked);
        let (as_built, dropped) = kind_change::as_built(service, built);
        let mut ensured = cloud
            .ensure_as(cluster_name, &as_built, built, nodes, false)
            .await?
            .ok_or_else(|| CloudError::msg("the load balancer disappeared while it was ensured"))?;
        let name = ServiceRef::of(service).load_balancer_name;
        ensured
            .warnings
            .push(kind_change::warning(asked, &name, &dropped));
        Ok(ensured)
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        let cloud = self.cloud()?;
        let asked = kind(service)?;
        if cloud.update_as(service, asked, nodes, true).await? {
            return Ok(());
        }
        let built = kind_change::other(asked);
        let (as_built, _) = kind_change::as_built(service, built);
        cloud
            .update_as(&as_built, built, nodes, false)
            .await
            .map(drop)
    }

    /// The targets of the load balancer of the kind the Service asks for,
    /// or, when there is none and the Service had one, of the other kind
    /// ([`kind_change`]); see [`health`] for what each costs and how
    /// targets are named.
    ///
    /// No load balancer (not made yet, or already deleted) is a load
    /// balancer without targets: `Ok(Some)` with none, since AWS did answer.
    async fn load_balancer_health(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Option<LoadBalancerHealth>, CloudError> {
        if is_external(service) {
            return Err(CloudError::ImplementedElsewhere);
        }
        let cloud = self.cloud()?;
        let asked = kind(service)?;
        let name = ServiceRef::of(service).load_balancer_name;
        let names = NodeNames::of(nodes);
        let mut health = cloud.health_of(&name, asked, &names).await?;
        if health.is_none() && kind_change::had_load_balancer(service) {
            health = cloud
                .health_of(&name, kind_change::other(asked), &names)
                .await?;
        }
        Ok(Some(health.unwrap_or_default()))
    }

    /// Needs only the Service's names and type: a Service whose
    /// annotations became malformed can still be deleted (with a type
    /// nobody knows, both kinds are looked for). A load balancer of the
    /// other kind (left by a type change, [`kind_change`]) goes too.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        if is_external(service) {
            return Err(CloudError::ImplementedElsewhere);
        }
        let cloud = self.cloud()?;
        let svc = ServiceRef::of(service);
        let empty = BTreeMap::new();
        let a = annotations::Annotations(service.metadata.annotations.as_ref().unwrap_or(&empty));
        let asked = AskedGroups::from_annotations(&a).unwrap_or_default();
        match kind(service) {
            Ok(Kind::Network) => {
                cloud.delete(cluster_name, &svc).await?;
                if cloud.holds(&svc, Kind::Classic).await? {
                    cloud.delete_classic(&svc, &asked).await?;
                }
                Ok(())
            }
            Ok(Kind::Classic) => {
                cloud.delete_classic(&svc, &asked).await?;
                if cloud.holds(&svc, Kind::Network).await? {
                    cloud.delete(cluster_name, &svc).await?;
                }
                Ok(())
            }
            Err(_) => {
                cloud.delete_classic(&svc, &asked).await?;
                cloud.delete(cluster_name, &svc).await
            }
        }
    }
}

impl Cloud {
    async fn status_of(
        &self,
        service: &Service,
        kind: Kind,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        match kind {
            Kind::Network => self.status(service).await,
            Kind::Classic => self.classic_status(&ServiceRef::of(service)).await,
        }
    }

    /// Ensures `service`'s load balancer as `kind`. `None` when `guarded`
    /// and the Service's load balancer is of the other kind
    /// ([`Cloud::built_kind`]): nothing was changed.
    async fn ensure_as(
        &self,
        cluster_name: &str,
        service: &Service,
        kind: Kind,
        nodes: &[Arc<Node>],
        guarded: bool,
    ) -> Result<Option<EnsuredLoadBalancer>, CloudError> {
        let probe = self.config.shared_health_probe.as_ref();
        let name = ServiceRef::of(service).load_balancer_name;
        match kind {
            Kind::Network => {
                let spec = LoadBalancerSpec::under(service, probe)?;
                let found = self.find_with_groups(&name).await?;
                if guarded && self.built_kind(service, kind, found.is_some()).await? != kind {
                    return Ok(None);
                }
                self.ensure(cluster_name, &spec, nodes, found)
                    .await
                    .map(Some)
            }
            Kind::Classic => {
                let spec = ClassicSpec::under(service, probe)?;
                let found = self.find_classic(&name).await?;
                if guarded && self.built_kind(service, kind, found.is_some()).await? != kind {
                    return Ok(None);
                }
                self.ensure_classic(&spec, nodes, found).await.map(Some)
            }
        }
    }

    /// Updates `service`'s load balancer as `kind`. `false` when `guarded`
    /// and the Service's load balancer is of the other kind: nothing was
    /// changed.
    async fn update_as(
        &self,
        service: &Service,
        kind: Kind,
        nodes: &[Arc<Node>],
        guarded: bool,
    ) -> Result<bool, CloudError> {
        let probe = self.config.shared_health_probe.as_ref();
        let name = ServiceRef::of(service).load_balancer_name;
        match kind {
            Kind::Network => {
                let spec = LoadBalancerSpec::under(service, probe)?;
                let found = self.find_load_balancer(&name).await?;
                if guarded && self.built_kind(service, kind, found.is_some()).await? != kind {
                    return Ok(false);
                }
                self.update(&spec, nodes, found).await?;
            }
            Kind::Classic => {
                let spec = ClassicSpec::under(service, probe)?;
                let found = self.find_classic(&name).await?;
                if guarded && self.built_kind(service, kind, found.is_some()).await? != kind {
                    return Ok(false);
                }
                self.update_classic(&spec, nodes, found).await?;
            }
        }
        Ok(true)
    }
}
