//! Target groups: one per Service port, with instance targets on the port's
//! node port, the Service's health check and PROXY protocol setting.
//!
//! A target group is found by its deterministic name before one is created,
//! so a create retried after a crash reuses it; one found by name must carry
//! this cluster's and Service's tags, or the provider refuses to touch it.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_elasticloadbalancingv2::types::{
    TargetDescription, TargetGroup, TargetGroupAttribute, TargetHealthReasonEnum,
    TargetHealthStateEnum, TargetTypeEnum,
};
use ccm_cloud_provider::CloudError;

use super::annotations::attributes::{self, PROXY_PROTOCOL_V2};
use super::naming;
use super::nlb::elbv2_tag_list;
use super::spec::{LoadBalancerSpec, PortMapping};
use crate::api::{ApiError, planned_id};
use crate::provider::Cloud;
use crate::tagging::elbv2_tags;

/// Most targets one Register/DeregisterTargets call takes, as upstream.
const TARGETS_PER_CALL: usize = 100;

/// The (instance, port) pairs to register and deregister.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TargetChanges {
    pub(crate) register: Vec<(String, i32)>,
    pub(crate) deregister: Vec<(String, i32)>,
}

/// What to change so that `actual` becomes `desired`.
pub(crate) fn target_changes(
    desired: &BTreeSet<(String, i32)>,
    actual: &BTreeSet<(String, i32)>,
) -> TargetChanges {
    TargetChanges {
        register: desired.difference(actual).cloned().collect(),
        deregister: actual.difference(desired).cloned().collect(),
    }
}

impl Cloud {
    /// The target groups a load balancer's listeners forward to.
    pub(crate) async fn load_balancer_target_groups(
        &self,
        lb_arn: &str,
    ) -> Result<Vec<TargetGroup>, ApiError> {
        self.describe_target_groups(Some(lb_arn), None).await
    }

    /// Target groups, of one load balancer or by name, or all of them.
    pub(crate) async fn describe_target_groups(
        &self,
        lb_arn: Option<&str>,
        name: Option<&str>,
    ) -> Result<Vec<TargetGroup>, ApiError> {
        let found = self
            .api
            .paged(
                "DescribeTargetGroups",
                |marker| {
                    let request = self.api.elbv2.describe_target_groups();
                    request
                        .set_load_balancer_arn(lb_arn.map(str::to_owned))
                        .set_names(name.map(|n| vec![n.to_owned()]))
                        .set_marker(marker)
                        .send()
                },
                |page| {
                    (
                        page.target_groups().to_vec(),
                        page.next_marker().map(str::to_owned),
                    )
                },
            )
            .await;
        match found {
            // Asked by name, a missing group is an error rather than nothing.
            Err(e) if e.is("TargetGroupNotFound") => Ok(Vec::new()),
            other => other,
        }
    }

    /// The target group for `port`, found or created, with its health check
    /// and attributes as the Service asks; and whether it was created now
    /// (so it has AWS's defaults and no targets, and neither needs reading).
    pub(crate) async fn ensure_target_group(
        &self,
        spec: &LoadBalancerSpec,
        port: &PortMapping,
        vpc_id: &str,
        attached: &[TargetGroup],
        tags: &BTreeMap<String, String>,
    ) -> Result<(TargetGroup, bool), CloudError> {
        let name = naming::target_group_name(self.tags.id(), spec, port, &spec.health_check);
        let found = match attached
            .iter()
            .find(|tg| tg.target_group_name() == Some(&name))
        {
            Some(tg) => Some(tg.clone()),
            None => self.find_owned_target_group(spec, &name).await?,
        };
        match found {
            Some(tg) => {
                self.ensure_health_check(spec, &tg).await?;
                self.ensure_target_group_attributes(spec, &tg, false)
                    .await?;
                Ok((tg, false))
            }
            None => {
                let tg = self
                    .create_target_group(spec, port, &name, vpc_id, tags)
                    .await?;
                self.ensure_target_group_attributes(spec, &tg, true).await?;
                Ok((tg, true))
            }
        }
    }

    async fn find_owned_target_group(
        &self,
        spec: &LoadBalancerSpec,
        name: &str,
    ) -> Result<Option<TargetGroup>, CloudError> {
        let Some(tg) = self
            .describe_target_groups(None, Some(name))
            .await?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        let arn = tg.target_group_arn().unwrap_or_default();
        let tags = self.tags_of(&[arn]).await?.remove(arn).unwrap_or_default();
        if !self
            .tags
            .is_owned_for_service(elbv2_tags(&tags), &spec.svc.key)
        {
            return Err(CloudError::msg(format!(
                "target group {name} exists but is not tagged as cluster {}'s for Service {}; refusing to adopt it",
                self.tags.id(),
                spec.svc.key
            )));
        }
        Ok(Some(tg))
    }

    async fn create_target_group(
        &self,
        spec: &LoadBalancerSpec,
        port: &PortMapping,
        name: &str,
        vpc_id: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<TargetGroup, CloudError> {
        let hc = &spec.health_check;
        tracing::info!(service = %spec.svc.key, name, "creating target group");
        let created = self
            .api
            .change("CreateTargetGroup", || {
                self.api
                    .elbv2
                    .create_target_group()
                    .name(name)
                    .vpc_id(vpc_id)
                    .port(port.node_port)
                    .protocol(port.target_protocol.clone())
                    .target_type(TargetTypeEnum::Instance)
                    .health_check_protocol(hc.protocol.clone())
                    .health_check_port(hc.port.as_aws())
                    .set_health_check_path(hc.path.clone())
                    .health_check_interval_seconds(hc.interval)
                    .set_health_check_timeout_seconds(hc.timeout)
                    .healthy_threshold_count(hc.healthy_threshold)
                    .unhealthy_threshold_count(hc.unhealthy_threshold)
                    .set_tags(Some(elbv2_tag_list(tags)))
                    .send()
            })
            .await?;
        let Some(created) = created else {
            return Ok(planned_target_group(port, name, vpc_id));
        };
        created
            .target_groups()
            .first()
            .cloned()
            .ok_or_else(|| CloudError::msg("CreateTargetGroup answered without a target group"))
    }

    /// Health-check settings that can change in place (protocol and interval
    /// are in the name, so they never differ here).
    async fn ensure_health_check(
        &self,
        spec: &LoadBalancerSpec,
        tg: &TargetGroup,
    ) -> Result<(), CloudError> {
        let hc = &spec.health_check;
        let port = hc.port.as_aws();
        let path_differs = hc.path.is_some() && tg.health_check_path() != hc.path.as_deref();
        let timeout_differs =
            hc.timeout.is_some() && tg.health_check_timeout_seconds() != hc.timeout;
        let differs = tg.health_check_port() != Some(port.as_str())
            || tg.healthy_threshold_count() != Some(hc.healthy_threshold)
            || tg.unhealthy_threshold_count() != Some(hc.unhealthy_threshold)
            || path_differs
            || timeout_differs;
        if !differs {
            return Ok(());
        }
        let arn = tg.target_group_arn().unwrap_or_default();
        self.api
            .change("ModifyTargetGroup", || {
                self.api
                    .elbv2
                    .modify_target_group()
                    .target_group_arn(arn)
                    .health_check_port(&port)
                    .set_health_check_path(hc.path.clone())
                    .set_health_check_timeout_seconds(hc.timeout)
                    .healthy_threshold_count(hc.healthy_threshold)
                    .unhealthy_threshold_count(hc.unhealthy_threshold)
                    .send()
            })
            .await?;
        Ok(())
    }

    /// PROXY protocol v2 as the Service asks, and the attributes its
    /// target-group-attributes annotation names, in one
    /// `ModifyTargetGroupAttributes` of what differs. A group `created` now
    /// is not read: it has AWS's defaults (PROXY protocol off), and the
    /// annotation's attributes are all sent.
    async fn ensure_target_group_attributes(
        &self,
        spec: &LoadBalancerSpec,
        tg: &TargetGroup,
        created: bool,
    ) -> Result<(), CloudError> {
        let arn = tg.target_group_arn().unwrap_or_default();
        let have: BTreeMap<String, String> = if created {
            BTreeMap::from([(PROXY_PROTOCOL_V2.to_owned(), "false".to_owned())])
        } else {
            let current = self
                .api
                .call("DescribeTargetGroupAttributes", || {
                    self.api
                        .elbv2
                        .describe_target_group_attributes()
                        .target_group_arn(arn)
                        .send()
                })
                .await?;
            let mut have: BTreeMap<String, String> = current
                .attributes()
                .iter()
                .filter_map(|a| Some((a.key()?.to_owned(), a.value()?.to_owned())))
                .collect();
            // An attribute AWS leaves unlisted has its default.
            have.entry(PROXY_PROTOCOL_V2.to_owned())
                .or_insert_with(|| "false".to_owned());
            have
        };
        let want = attributes::desired(spec.proxy_protocol, &spec.target_group_attributes);
        let changes: Vec<TargetGroupAttribute> = want
            .iter()
            .filter(|(k, v)| have.get(*k) != Some(*v))
            .map(|(k, v)| TargetGroupAttribute::builder().key(k).value(v).build())
            .collect();
        if !changes.is_empty() {
            self.api
                .change("ModifyTargetGroupAttributes", || {
                    self.api
                        .elbv2
                        .modify_target_group_attributes()
                        .target_group_arn(arn)
                        .set_attributes(Some(changes.clone()))
                        .send()
                })
                .await?;
        }
        Ok(())
    }

    /// Registers exactly `instances` on `port`: deregisters the others first
    /// (so a full target group can swap instances), ignoring targets already
    /// draining. A group `created` in this ensure has no targets to read.
    pub(crate) async fn ensure_targets(
        &self,
        tg_arn: &str,
        instances: &[String],
        port: i32,
        created: bool,
    ) -> Result<(), CloudError> {
        let actual = if created {
            BTreeSet::new()
        } else {
            self.registered_targets(tg_arn, port).await?
        };
        let desired: BTreeSet<(String, i32)> =
            instances.iter().map(|id| (id.clone(), port)).collect();
        let changes = target_changes(&desired, &actual);
        for chunk in changes.deregister.chunks(TARGETS_PER_CALL) {
            let targets = descriptions(chunk);
            self.api
                .change("DeregisterTargets", || {
                    self.api
                        .elbv2
                        .deregister_targets()
                        .target_group_arn(tg_arn)
                        .set_targets(Some(targets.clone()))
                        .send()
                })
                .await?;
        }
        for chunk in changes.register.chunks(TARGETS_PER_CALL) {
            let targets = descriptions(chunk);
            self.api
                .change("RegisterTargets", || {
                    self.api
                        .elbv2
                        .register_targets()
                        .target_group_arn(tg_arn)
                        .set_targets(Some(targets.clone()))
                        .send()
                })
                .await?;
        }
        Ok(())
    }

    /// The (instance, port) pairs registered and not draining.
    async fn registered_targets(
        &self,
        tg_arn: &str,
        port: i32,
    ) -> Result<BTreeSet<(String, i32)>, CloudError> {
        let health = self
            .api
            .call("DescribeTargetHealth", || {
                self.api
                    .elbv2
                    .describe_target_health()
                    .target_group_arn(tg_arn)
                    .send()
            })
            .await?;
        Ok(health
            .target_health_descriptions()
            .iter()
            .filter(|d| {
                let h = d.target_health();
                h.and_then(|h| h.state()) != Some(&TargetHealthStateEnum::Draining)
                    && h.and_then(|h| h.reason())
                        != Some(&TargetHealthReasonEnum::DeregistrationInProgress)
            })
            .filter_map(|d| d.target())
            .filter_map(|t| Some((t.id()?.to_owned(), t.port().unwrap_or(port))))
            .collect())
    }

    /// Deletes a target group; gone already is fine, still in use (AWS
    /// detaches it from a deleted load balancer a little later) is a retry.
    pub(crate) async fn delete_target_group(&self, arn: &str) -> Result<(), CloudError> {
        let deleted = self
            .api
            .change("DeleteTargetGroup", || {
                self.api
                    .elbv2
                    .delete_target_group()
                    .target_group_arn(arn)
                    .send()
            })
            .await;
        match deleted {
            Ok(_) => Ok(()),
            Err(e) if e.is("TargetGroupNotFound") => Ok(()),
            Err(e) if e.is("ResourceInUse") => Err(CloudError::Retry {
                after: std::time::Duration::from_secs(5),
                reason: format!("target group {arn} is still in use: {e}"),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Every target group of this cluster for the Service, attached or not:
    /// those named with its prefix and tagged as its own.
    pub(crate) async fn owned_target_groups(
        &self,
        spec_prefix: &str,
        service: &str,
    ) -> Result<Vec<TargetGroup>, CloudError> {
        let candidates: Vec<TargetGroup> = self
            .describe_target_groups(None, None)
            .await?
            .into_iter()
            .filter(|tg| {
                tg.target_group_name()
                    .is_some_and(|n| n.starts_with(spec_prefix))
            })
            .collect();
        let arns: Vec<&str> = candidates
            .iter()
            .filter_map(|tg| tg.target_group_arn())
            .collect();
        let tags = self.tags_of(&arns).await?;
        Ok(candidates
            .iter()
            .filter(|tg| {
                tg.target_group_arn()
                    .and_then(|arn| tags.get(arn))
                    .is_some_and(|t| self.tags.is_owned_for_service(elbv2_tags(t), service))
            })
            .cloned()
            .collect())
    }
}

/// The target group a dry run plans to create, standing in for it in the
/// rest of the plan.
fn planned_target_group(port: &PortMapping, name: &str, vpc_id: &str) -> TargetGroup {
    TargetGroup::builder()
        .target_group_arn(planned_id("target-group", name))
        .target_group_name(name)
        .port(port.node_port)
        .protocol(port.target_protocol.clone())
        .vpc_id(vpc_id)
        .build()
}

fn descriptions(targets: &[(String, i32)]) -> Vec<TargetDescription> {
    targets
        .iter()
        .map(|(id, port)| TargetDescription::builder().id(id).port(*port).build())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, i32)]) -> BTreeSet<(String, i32)> {
        pairs.iter().map(|(id, p)| ((*id).to_owned(), *p)).collect()
    }

    #[test]
    fn targets_follow_nodes_in_both_directions() {
        let changes = target_changes(
            &set(&[("i-1", 30080), ("i-3", 30080)]),
            &set(&[("i-1", 30080), ("i-2", 30080)]),
        );
        assert_eq!(changes.register, [("i-3".to_owned(), 30080)]);
        assert_eq!(changes.deregister, [("i-2".to_owned(), 30080)]);
    }

    #[test]
    fn a_changed_node_port_moves_every_target() {
        let changes = target_changes(&set(&[("i-1", 30081)]), &set(&[("i-1", 30080)]));
        assert_eq!(changes.register, [("i-1".to_owned(), 30081)]);
        assert_eq!(changes.deregister, [("i-1".to_owned(), 30080)]);
    }

    #[test]
    fn nothing_changes_when_targets_already_match() {
        let same = set(&[("i-1", 30080)]);
        assert_eq!(target_changes(&same, &same), TargetChanges::default());
    }

    fn targets() -> impl proptest::strategy::Strategy<Value = BTreeSet<(String, i32)>> {
        use proptest::prelude::*;
        prop::collection::btree_set(
            (0..6u8, prop_oneof![Just(30080), Just(30081)])
                .prop_map(|(i, port)| (format!("i-{i}"), port)),
            0..8,
        )
    }

    proptest::proptest! {
        /// Carried out, the changes make the targets the desired ones, with
        /// no target both registered and deregistered, and none registered
        /// that was there already.
        #[test]
        fn carried_out_the_changes_leave_exactly_the_desired_targets(
            desired in targets(),
            actual in targets(),
        ) {
            let changes = target_changes(&desired, &actual);
            let mut after = actual;
            for t in &changes.deregister {
                proptest::prop_assert!(after.remove(t));
            }
            for t in &changes.register {
                proptest::prop_assert!(after.insert(t.clone()), "{t:?} registered twice");
            }
            proptest::prop_assert_eq!(&after, &desired);
            proptest::prop_assert_eq!(target_changes(&desired, &after), TargetChanges::default());
        }
    }
}
