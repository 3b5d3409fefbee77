//! Listeners: one per Service port, forwarding to the port's target group.
//!
//! A listener is keyed by its port (a Network Load Balancer has one per
//! port): one whose protocol, certificate, policy or target group differ is
//! modified in place, one for a port the Service dropped is deleted, and a
//! target group no listener forwards to any more is deleted after it.
//!
//! The target groups are made first, each port's with its targets; what
//! the listeners then need is a [`plan`] of typed operations, pure and
//! property-tested, which [`Cloud::apply_listener_op`] carries out one by
//! one.

mod plan;

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2::types::{
    Action, ActionTypeEnum, Certificate, Listener, LoadBalancer,
};
use ccm_cloud_provider::CloudError;

use super::nlb::{AttachedGroups, elbv2_tag_list};
use super::spec::{LoadBalancerSpec, PortMapping};
use crate::api::ApiError;
use crate::provider::Cloud;
use crate::tagging::elbv2_tags;
use plan::ListenerOp;

/// The target group a listener forwards to.
pub(crate) fn forward_target(listener: &Listener) -> Option<&str> {
    listener
        .default_actions()
        .iter()
        .find(|a| a.r#type() == Some(&ActionTypeEnum::Forward))
        .and_then(Action::target_group_arn)
}

impl Cloud {
    /// The load balancer's listeners.
    pub(crate) async fn listeners(&self, lb_arn: &str) -> Result<Vec<Listener>, ApiError> {
        self.api
            .paged(
                "DescribeListeners",
                |marker| {
                    self.api
                        .elbv2
                        .describe_listeners()
                        .load_balancer_arn(lb_arn)
                        .set_marker(marker)
                        .send()
                },
                |page| {
                    (
                        page.listeners().to_vec(),
                        page.next_marker().map(str::to_owned),
                    )
                },
            )
            .await
    }

    /// Listeners and target groups for every Service port, with `instances`
    /// as targets; what the Service no longer asks for is removed.
    /// `attached` is the existing load balancer's target groups; a load
    /// balancer created in this ensure (`None`) has no listeners or target
    /// groups to read.
    pub(crate) async fn ensure_listeners(
        &self,
        spec: &LoadBalancerSpec,
        lb: &LoadBalancer,
        attached: Option<&AttachedGroups>,
        instances: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), CloudError> {
        let lb_arn = lb.load_balancer_arn().unwrap_or_default();
        let vpc_id = lb.vpc_id().unwrap_or_default();
        let none = AttachedGroups::default();
        let (listeners, attached) = match attached {
            None => (Vec::new(), &none),
            Some(attached) => (self.listeners(lb_arn).await?, attached),
        };
        let mut wanted = Vec::with_capacity(spec.ports.len());
        for port in &spec.ports {
            let (tg, tg_created) = self
                .ensure_target_group(spec, port, vpc_id, &attached.groups, tags)
                .await?;
            let tg_arn = tg.target_group_arn().unwrap_or_default().to_owned();
            self.ensure_targets(&tg_arn, instances, port.node_port, tg_created)
                .await?;
            wanted.push((port, tg_arn));
        }
        let owned: Vec<&str> = attached
            .groups
            .iter()
            .filter_map(|tg| tg.target_group_arn())
            .filter(|arn| {
                attached
                    .tags
                    .get(*arn)
                    .is_some_and(|t| self.tags.is_owned_for_service(elbv2_tags(t), &spec.svc.key))
            })
            .collect();
        for op in plan::plan(&listeners, &wanted, &owned) {
            self.apply_listener_op(spec, lb_arn, op, tags).await?;
        }
        Ok(())
    }

    /// Carries out one operation of the listeners' [`plan`].
    async fn apply_listener_op(
        &self,
        spec: &LoadBalancerSpec,
        lb_arn: &str,
        op: ListenerOp<'_>,
        tags: &BTreeMap<String, String>,
    ) -> Result<(), CloudError> {
        match op {
            ListenerOp::Create { port, target_group } => {
                self.create_listener(lb_arn, port, target_group, tags).await
            }
            ListenerOp::Modify {
                listener,
                port,
                target_group,
            } => self.modify_listener(listener, port, target_group).await,
            ListenerOp::Delete { listener } => {
                let arn = listener.listener_arn().unwrap_or_default();
                tracing::info!(service = %spec.svc.key, port = ?listener.port(), "deleting listener");
                let deleted = self
                    .api
                    .change("DeleteListener", || {
                        self.api.elbv2.delete_listener().listener_arn(arn).send()
                    })
                    .await;
                match deleted {
                    Err(e) if e.is("ListenerNotFound") => Ok(()),
                    other => other.map(drop).map_err(Into::into),
                }
            }
            ListenerOp::DeleteTargetGroup { arn } => self.delete_target_group(arn).await,
        }
    }

    async fn create_listener(
        &self,
        lb_arn: &str,
        port: &PortMapping,
        tg_arn: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<(), CloudError> {
        let created = self
            .api
            .change("CreateListener", || {
                self.api
                    .elbv2
                    .create_listener()
                    .load_balancer_arn(lb_arn)
                    .port(port.port)
                    .protocol(port.listener_protocol.clone())
                    .default_actions(forward(tg_arn))
                    .set_certificates(certificates(port))
                    .set_ssl_policy(port.ssl_policy.clone())
                    .set_tags(Some(elbv2_tag_list(tags)))
                    .send()
            })
            .await;
        match created {
            // A listener on the port appeared since we looked; the next
            // reconcile modifies it if it differs.
            Err(e) if e.is("DuplicateListener") => Ok(()),
            other => {
                other?;
                Ok(())
            }
        }
    }

    async fn modify_listener(
        &self,
        listener: &Listener,
        port: &PortMapping,
        tg_arn: &str,
    ) -> Result<(), CloudError> {
        let arn = listener.listener_arn().unwrap_or_default();
        self.api
            .change("ModifyListener", || {
                self.api
                    .elbv2
                    .modify_listener()
                    .listener_arn(arn)
                    .port(port.port)
                    .protocol(port.listener_protocol.clone())
                    .default_actions(forward(tg_arn))
                    .set_certificates(certificates(port))
                    .set_ssl_policy(port.ssl_policy.clone())
                    .send()
            })
            .await?;
        Ok(())
    }
}

fn forward(tg_arn: &str) -> Action {
    Action::builder()
        .r#type(ActionTypeEnum::Forward)
        .target_group_arn(tg_arn)
        .build()
}

fn certificates(port: &PortMapping) -> Option<Vec<Certificate>> {
    port.certificate_arn
        .as_ref()
        .map(|arn| vec![Certificate::builder().certificate_arn(arn).build()])
}
