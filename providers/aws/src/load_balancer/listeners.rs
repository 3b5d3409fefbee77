//! Listeners: one per Service port, forwarding to the port's target group.
//!
//! A listener is keyed by its port (a Network Load Balancer has one per
//! port): one whose protocol, certificate, policy or target group differ is
//! modified in place, one for a port the Service dropped is deleted, and a
//! target group no listener forwards to any more is deleted after it.
//!
//! What to do with a port's listener is decided by [`listener_change`],
//! and which listeners go by [`stale_listeners`], both pure; the property
//! test applies them to a model of the load balancer's listeners.

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

/// What a Service port's listener needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ListenerChange<'a> {
    /// A listener on the port, forwarding to the port's target group.
    Create,
    /// The port's listener, to be brought to the port and target group.
    Modify(&'a Listener),
}

/// What `port`'s listener among `listeners` needs so that it does what the
/// port asks, forwarding to `tg`: nothing when it already does.
pub(crate) fn listener_change<'a>(
    listeners: &'a [Listener],
    port: &PortMapping,
    tg: &str,
) -> Option<ListenerChange<'a>> {
    match listeners.iter().find(|l| l.port() == Some(port.port)) {
        Some(l) if listener_matches(l, port, tg) => None,
        Some(l) => Some(ListenerChange::Modify(l)),
        None => Some(ListenerChange::Create),
    }
}

/// The listeners on ports the Service no longer has.
pub(crate) fn stale_listeners<'a>(
    listeners: &'a [Listener],
    ports: &[PortMapping],
) -> Vec<&'a Listener> {
    listeners
        .iter()
        .filter(|l| !ports.iter().any(|p| Some(p.port) == l.port()))
        .collect()
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
            match listener_change(&listeners, port, &tg_arn) {
                None => {}
                Some(ListenerChange::Modify(l)) => self.modify_listener(l, port, &tg_arn).await?,
                Some(ListenerChange::Create) => {
                    self.create_listener(lb_arn, port, &tg_arn, tags).await?;
                }
            }
            wanted_groups.insert(tg_arn);
        }
        for listener in stale_listeners(&listeners, &spec.ports) {
            let arn = listener.listener_arn().unwrap_or_default();
            tracing::info!(service = %spec.svc.key, port = ?listener.port(), "deleting listener");
            let deleted = self
                .api
                .change("DeleteListener", || {
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

    /// A listener as the provider's create or modify leaves it.
    fn made(port: &PortMapping, tg: &str) -> Listener {
        Listener::builder()
            .port(port.port)
            .protocol(port.listener_protocol.clone())
            .default_actions(forward(tg))
            .set_certificates(certificates(port))
            .set_ssl_policy(port.ssl_policy.clone())
            .build()
    }

    /// The listeners once the plan for `wanted` (each port with its target
    /// group) is carried out on `listeners`, decided on the listeners as
    /// read, as `ensure_listeners` does.
    fn carried_out(listeners: &[Listener], wanted: &[(PortMapping, String)]) -> Vec<Listener> {
        let ports: Vec<PortMapping> = wanted.iter().map(|(p, _)| p.clone()).collect();
        let stale = stale_listeners(listeners, &ports);
        let mut out: Vec<Listener> = listeners
            .iter()
            .filter(|l| !stale.contains(l))
            .cloned()
            .collect();
        for (port, tg) in wanted {
            match listener_change(listeners, port, tg) {
                None => {}
                Some(ListenerChange::Modify(old)) => {
                    let at = out.iter().position(|l| l == old).expect("kept");
                    out[at] = made(port, tg);
                }
                Some(ListenerChange::Create) => out.push(made(port, tg)),
            }
        }
        out
    }

    mod plan {
        use proptest::prelude::*;

        use super::*;

        const PORTS: [i32; 4] = [80, 443, 8080, 9000];

        fn mapping() -> impl Strategy<Value = (PortMapping, String)> {
            (
                prop_oneof![
                    Just(ProtocolEnum::Tcp),
                    Just(ProtocolEnum::Udp),
                    Just(ProtocolEnum::Tls)
                ],
                prop::option::of(prop_oneof![Just("arn:cert-a"), Just("arn:cert-b")]),
                prop::option::of(Just("ELBSecurityPolicy-TLS13-1-2-2021-06")),
                0..3usize,
            )
                .prop_map(|(protocol, cert, policy, tg)| {
                    let tls = protocol == ProtocolEnum::Tls;
                    let mut p = port(protocol, cert.filter(|_| tls), policy.filter(|_| tls));
                    p.port = 0;
                    (p, format!("tg-{tg}"))
                })
        }

        /// Distinct ports, each with what it asks.
        fn ports() -> impl Strategy<Value = Vec<(PortMapping, String)>> {
            prop::collection::vec(mapping(), PORTS.len()).prop_flat_map(|all| {
                prop::sample::subsequence((0..PORTS.len()).collect::<Vec<_>>(), 0..=PORTS.len())
                    .prop_map(move |chosen| {
                        chosen
                            .into_iter()
                            .map(|i| {
                                let (mut p, tg) = all[i].clone();
                                p.port = PORTS[i];
                                (p, tg)
                            })
                            .collect()
                    })
            })
        }

        proptest! {
            #[test]
            fn carried_out_the_plan_leaves_one_matching_listener_per_port_and_nothing_to_do(
                have in ports(),
                want in ports(),
            ) {
                let listeners: Vec<Listener> = have.iter().map(|(p, tg)| made(p, tg)).collect();
                let after = carried_out(&listeners, &want);
                for (port, tg) in &want {
                    let on: Vec<&Listener> =
                        after.iter().filter(|l| l.port() == Some(port.port)).collect();
                    prop_assert_eq!(on.len(), 1, "one listener on {}", port.port);
                    prop_assert!(listener_matches(on[0], port, tg));
                    prop_assert_eq!(listener_change(&after, port, tg), None);
                }
                prop_assert_eq!(after.len(), want.len(), "no listener on a dropped port");
                let ports: Vec<PortMapping> = want.iter().map(|(p, _)| p.clone()).collect();
                prop_assert!(stale_listeners(&after, &ports).is_empty());
            }

            #[test]
            fn a_listener_that_already_does_what_its_port_asks_is_left_alone(
                have in ports(),
            ) {
                let listeners: Vec<Listener> = have.iter().map(|(p, tg)| made(p, tg)).collect();
                for (port, tg) in &have {
                    prop_assert_eq!(listener_change(&listeners, port, tg), None);
                }
                let ports: Vec<PortMapping> = have.iter().map(|(p, _)| p.clone()).collect();
                prop_assert!(stale_listeners(&listeners, &ports).is_empty());
            }
        }
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
