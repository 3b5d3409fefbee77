//! Listeners: one per Service port, forwarding to the port's target group.
//!
//! A listener is keyed by its port (a Network Load Balancer has one per
//! port): one whose protocol, certificate, policy or target group differ is
//! modified in place, one for a port the Service dropped is deleted, and a
//! target group no listener forwards to any more is deleted after it.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_elasticloadbalancingv2::types::{
    Action, ActionTypeEnum, Certificate, Listener, LoadBalancer, ProtocolEnum,
};
use ccm_cloud_provider::CloudError;

use super::nlb::{AttachedGroups, elbv2_tag_list};
use super::spec::{LoadBalancerSpec, PortMapping};
use crate::api::ApiError;
use crate::provider::Cloud;
use crate::tagging::elbv2_tags;

/// The target group a listener forwards to.
pub(crate) fn forward_target(listener: &Listener) -> Option<&str> {
    listener
        .default_actions()
        .iter()
        .find(|a| a.r#type() == Some(&ActionTypeEnum::Forward))
        .and_then(Action::target_group_arn)
}

/// Whether `listener` already does what `port` asks, forwarding to `tg`.
fn listener_matches(listener: &Listener, port: &PortMapping, tg: &str) -> bool {
    let certificate = listener
        .certificates()
        .first()
        .and_then(|c| c.certificate_arn());
    let policy_matches = match (&port.listener_protocol, &port.ssl_policy) {
        (ProtocolEnum::Tls, Some(policy)) => listener.ssl_policy() == Some(policy.as_str()),
        // Without a policy AWS picks its default; leave whatever it chose.
        _ => true,
    };
    listener.protocol() == Some(&port.listener_protocol)
        && forward_target(listener) == Some(tg)
        && (port.listener_protocol != ProtocolEnum::Tls
            || certificate == port.certificate_arn.as_deref())
        && policy_matches
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
        let mut wanted_groups = BTreeSet::new();
        for port in &spec.ports {
            let (tg, tg_created) = self
                .ensure_target_group(spec, port, vpc_id, &attached.groups, tags)
                .await?;
            let tg_arn = tg.target_group_arn().unwrap_or_default().to_owned();
            self.ensure_targets(&tg_arn, instances, port.node_port, tg_created)
                .await?;
            match listeners.iter().find(|l| l.port() == Some(port.port)) {
                Some(l) if listener_matches(l, port, &tg_arn) => {}
                Some(l) => self.modify_listener(l, port, &tg_arn).await?,
                None => self.create_listener(lb_arn, port, &tg_arn, tags).await?,
            }
            wanted_groups.insert(tg_arn);
        }
        for listener in &listeners {
            if !spec.ports.iter().any(|p| Some(p.port) == listener.port()) {
                let arn = listener.listener_arn().unwrap_or_default();
                tracing::info!(service = %spec.svc.key, port = ?listener.port(), "deleting listener");
                let deleted = self
                    .api
                    .call("DeleteListener", || {
                        self.api.elbv2.delete_listener().listener_arn(arn).send()
                    })
                    .await;
                match deleted {
                    Err(e) if e.is("ListenerNotFound") => {}
                    other => {
                        other?;
                    }
                }
            }
        }
        let unused = attached
            .groups
            .iter()
            .filter_map(|tg| tg.target_group_arn())
            .filter(|arn| !wanted_groups.contains(*arn));
        for arn in unused {
            let ours = attached
                .tags
                .get(arn)
                .is_some_and(|t| self.tags.is_owned_for_service(elbv2_tags(t), &spec.svc.key));
            if ours {
                self.delete_target_group(arn).await?;
            }
        }
        Ok(())
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
            .call("CreateListener", || {
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
            .call("ModifyListener", || {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn port(protocol: ProtocolEnum, cert: Option<&str>, policy: Option<&str>) -> PortMapping {
        PortMapping {
            port: 443,
            name: None,
            listener_protocol: protocol,
            node_port: 30443,
            target_protocol: ProtocolEnum::Tcp,
            certificate_arn: cert.map(str::to_owned),
            ssl_policy: policy.map(str::to_owned),
        }
    }

    fn listener(
        protocol: ProtocolEnum,
        tg: &str,
        cert: Option<&str>,
        policy: Option<&str>,
    ) -> Listener {
        let mut b = Listener::builder()
            .port(443)
            .protocol(protocol)
            .default_actions(forward(tg));
        if let Some(c) = cert {
            b = b.certificates(Certificate::builder().certificate_arn(c).build());
        }
        if let Some(p) = policy {
            b = b.ssl_policy(p);
        }
        b.build()
    }

    #[test]
    fn a_listener_matches_when_protocol_target_and_tls_settings_agree() {
        let tls = port(
            ProtocolEnum::Tls,
            Some("arn:cert"),
            Some("ELBSecurityPolicy-TLS13-1-2-2021-06"),
        );
        assert!(listener_matches(
            &listener(
                ProtocolEnum::Tls,
                "tg1",
                Some("arn:cert"),
                Some("ELBSecurityPolicy-TLS13-1-2-2021-06")
            ),
            &tls,
            "tg1"
        ));
        assert!(!listener_matches(
            &listener(
                ProtocolEnum::Tls,
                "tg2",
                Some("arn:cert"),
                Some("ELBSecurityPolicy-TLS13-1-2-2021-06")
            ),
            &tls,
            "tg1"
        ));
        assert!(!listener_matches(
            &listener(
                ProtocolEnum::Tls,
                "tg1",
                Some("arn:other"),
                Some("ELBSecurityPolicy-TLS13-1-2-2021-06")
            ),
            &tls,
            "tg1"
        ));
        assert!(!listener_matches(
            &listener(ProtocolEnum::Tcp, "tg1", None, None),
            &tls,
            "tg1"
        ));
    }

    #[test]
    fn a_tcp_listener_ignores_the_policy_aws_reports() {
        // moto and AWS may report a default policy on any listener.
        let tcp = port(ProtocolEnum::Tcp, None, None);
        assert!(listener_matches(
            &listener(
                ProtocolEnum::Tcp,
                "tg1",
                None,
                Some("ELBSecurityPolicy-2016-08")
            ),
            &tcp,
            "tg1"
        ));
    }
}
