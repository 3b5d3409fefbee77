//! The health of a Service's load balancer's targets, as AWS's own health
//! checks see them, named by node.
//!
//! A Network Load Balancer costs `DescribeLoadBalancers` by name,
//! `DescribeTargetGroups` by its ARN and one `DescribeTargetHealth` per
//! target group (one per Service port): a node is reported once per group.
//! A classic ELB costs one `DescribeInstanceHealth` by name. Neither reads
//! tags: the name is the Service's UID, health changes nothing, and an
//! ensure has already refused a load balancer that is not the Service's.
//!
//! A target is named by the node whose `spec.providerID` (or name, for
//! nodes named after their instance) gives its instance ID, an IP target
//! by the node with that `InternalIP`; a target no node stands for keeps
//! its instance ID or IP as its name.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_elasticloadbalancing::types::InstanceState;
use aws_sdk_elasticloadbalancingv2::types::{TargetHealthDescription, TargetHealthStateEnum};
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{CloudError, LoadBalancerHealth, TargetHealth, TargetState};

use super::spec::Kind;
use crate::instances::lookup::{NodeKey, node_key};
use crate::provider::Cloud;

/// Classic ELB reason codes that say nothing (`N/A` is moto's and AWS's
/// answer for an instance in service).
const NO_REASON: &[&str] = &["", "N/A"];

/// Node names by the instance IDs and internal IPs targets are known by.
#[derive(Debug, Default)]
pub(crate) struct NodeNames(HashMap<String, String>);

impl NodeNames {
    pub(crate) fn of(nodes: &[Arc<Node>]) -> Self {
        let mut names = HashMap::new();
        for node in nodes {
            let Some(name) = node.metadata.name.as_deref() else {
                continue;
            };
            if let Ok(NodeKey::Id(id)) = node_key(node) {
                names.insert(id.to_owned(), name.to_owned());
            }
            let addresses = node.status.as_ref().and_then(|s| s.addresses.as_deref());
            for address in addresses.unwrap_or_default() {
                if address.type_ == "InternalIP" {
                    names.insert(address.address.clone(), name.to_owned());
                }
            }
        }
        Self(names)
    }

    /// The node a target `id` (instance ID or IP) stands for, else `id`.
    fn name(&self, id: &str) -> String {
        self.0.get(id).map_or_else(|| id.to_owned(), Clone::clone)
    }
}

/// An ELBv2 target's state: `healthy` and `initial` as they are, any other
/// state unhealthy for its reason code (`Target.Timeout`), or for the
/// state's name when AWS gives no reason.
pub(crate) fn target_state(description: &TargetHealthDescription) -> TargetState {
    let health = description.target_health();
    match health.and_then(|h| h.state()) {
        Some(TargetHealthStateEnum::Healthy) => TargetState::Healthy,
        Some(TargetHealthStateEnum::Initial) => TargetState::Initial,
        state => TargetState::Unhealthy {
            reason: health
                .and_then(|h| h.reason())
                .map(|r| r.as_str())
                .or(state.map(TargetHealthStateEnum::as_str))
                .unwrap_or_default()
                .to_owned(),
        },
    }
}

/// A classic ELB instance's state: `InService` healthy, `Unknown` (still
/// registering) initial, `OutOfService` unhealthy for its reason code
/// (`Instance`, `ELB`) or `OutOfService` when AWS gives none.
pub(crate) fn instance_state(instance: &InstanceState) -> TargetState {
    match instance.state().unwrap_or_default() {
        "InService" => TargetState::Healthy,
        "Unknown" => TargetState::Initial,
        state => TargetState::Unhealthy {
            reason: instance
                .reason_code()
                .filter(|code| !NO_REASON.contains(code))
                .unwrap_or(state)
                .to_owned(),
        },
    }
}

impl Cloud {
    /// The targets of the load balancer `name` of `kind`, named by `nodes`;
    /// `None` when there is no such load balancer.
    pub(crate) async fn health_of(
        &self,
        name: &str,
        kind: Kind,
        nodes: &NodeNames,
    ) -> Result<Option<LoadBalancerHealth>, CloudError> {
        match kind {
            Kind::Network => self.network_health(name, nodes).await,
            Kind::Classic => self.classic_health(name, nodes).await,
        }
    }

    async fn network_health(
        &self,
        name: &str,
        nodes: &NodeNames,
    ) -> Result<Option<LoadBalancerHealth>, CloudError> {
        let Some(lb) = self.describe_network_load_balancer(name).await? else {
            return Ok(None);
        };
        let groups = self
            .load_balancer_target_groups(lb.load_balancer_arn().unwrap_or_default())
            .await?;
        let mut targets = Vec::new();
        for arn in groups.iter().filter_map(|g| g.target_group_arn()) {
            let described = self
                .api
                .call("DescribeTargetHealth", || {
                    self.api
                        .elbv2
                        .describe_target_health()
                        .target_group_arn(arn)
                        .send()
                })
                .await;
            let described = match described {
                Ok(out) => out,
                // Replaced by an ensure since it was listed: not a target
                // group of the load balancer any more.
                Err(e) if e.is("TargetGroupNotFound") => continue,
                Err(e) => return Err(e.into()),
            };
            targets.extend(described.target_health_descriptions().iter().map(|d| {
                let id = d.target().and_then(|t| t.id()).unwrap_or_default();
                TargetHealth::new(nodes.name(id), target_state(d))
            }));
        }
        Ok(Some(LoadBalancerHealth { targets }))
    }

    async fn classic_health(
        &self,
        name: &str,
        nodes: &NodeNames,
    ) -> Result<Option<LoadBalancerHealth>, CloudError> {
        let described = self
            .api
            .call("DescribeInstanceHealth", || {
                self.api
                    .elb
                    .describe_instance_health()
                    .load_balancer_name(name)
                    .send()
            })
            .await;
        let described = match described {
            Ok(out) => out,
            Err(e) if e.is("LoadBalancerNotFound") => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let targets = described
            .instance_states()
            .iter()
            .map(|i| {
                let id = i.instance_id().unwrap_or_default();
                TargetHealth::new(nodes.name(id), instance_state(i))
            })
            .collect();
        Ok(Some(LoadBalancerHealth { targets }))
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_elasticloadbalancingv2::types::{
        TargetDescription, TargetHealth as AwsHealth, TargetHealthReasonEnum,
    };
    use ccm_cloud_provider::k8s_openapi::api::core::v1::{NodeAddress, NodeSpec, NodeStatus};
    use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn described(
        state: Option<TargetHealthStateEnum>,
        reason: Option<TargetHealthReasonEnum>,
    ) -> TargetHealthDescription {
        TargetHealthDescription::builder()
            .target(TargetDescription::builder().id("i-1").port(30080).build())
            .target_health(
                AwsHealth::builder()
                    .set_state(state)
                    .set_reason(reason)
                    .build(),
            )
            .build()
    }

    fn unhealthy(reason: &str) -> TargetState {
        TargetState::Unhealthy {
            reason: reason.into(),
        }
    }

    #[test]
    fn elbv2_states_map_to_healthy_initial_or_unhealthy_for_their_reason() {
        use TargetHealthReasonEnum as Reason;
        use TargetHealthStateEnum as State;
        for (state, reason, want) in [
            (Some(State::Healthy), None, TargetState::Healthy),
            (
                Some(State::Initial),
                Some(Reason::RegistrationInProgress),
                TargetState::Initial,
            ),
            (
                Some(State::Unhealthy),
                Some(Reason::Timeout),
                unhealthy("Target.Timeout"),
            ),
            (
                Some(State::Unused),
                Some(Reason::InvalidState),
                unhealthy("Target.InvalidState"),
            ),
            (
                Some(State::Draining),
                Some(Reason::DeregistrationInProgress),
                unhealthy("Target.DeregistrationInProgress"),
            ),
            (Some(State::Unavailable), None, unhealthy("unavailable")),
            (Some(State::from("zombie")), None, unhealthy("zombie")),
            (None, None, unhealthy("")),
        ] {
            assert_eq!(
                target_state(&described(state.clone(), reason)),
                want,
                "{state:?}"
            );
        }
    }

    #[test]
    fn classic_states_map_to_healthy_initial_or_unhealthy_for_their_reason_code() {
        let instance = |state: &str, reason: Option<&str>| {
            InstanceState::builder()
                .instance_id("i-1")
                .state(state)
                .set_reason_code(reason.map(str::to_owned))
                .build()
        };
        assert_eq!(
            instance_state(&instance("InService", Some("N/A"))),
            TargetState::Healthy
        );
        assert_eq!(
            instance_state(&instance("Unknown", Some("ELB"))),
            TargetState::Initial
        );
        assert_eq!(
            instance_state(&instance("OutOfService", Some("Instance"))),
            unhealthy("Instance")
        );
        for no_reason in [None, Some("N/A"), Some("")] {
            assert_eq!(
                instance_state(&instance("OutOfService", no_reason)),
                unhealthy("OutOfService")
            );
        }
    }

    #[test]
    fn targets_are_named_by_provider_id_node_name_or_internal_ip() {
        let node = |name: &str, provider_id: Option<&str>, ips: &[(&str, &str)]| {
            Arc::new(Node {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..ObjectMeta::default()
                },
                spec: Some(NodeSpec {
                    provider_id: provider_id.map(str::to_owned),
                    ..NodeSpec::default()
                }),
                status: Some(NodeStatus {
                    addresses: Some(
                        ips.iter()
                            .map(|(kind, ip)| NodeAddress {
                                type_: (*kind).into(),
                                address: (*ip).into(),
                            })
                            .collect(),
                    ),
                    ..NodeStatus::default()
                }),
            })
        };
        let names = NodeNames::of(&[
            node(
                "ip-10-0-1-4.ec2.internal",
                Some("aws:///us-east-1a/i-0aaa"),
                &[("InternalIP", "10.0.1.4"), ("ExternalIP", "54.1.2.3")],
            ),
            node("i-0bbb.ec2.internal", None, &[]),
            node("no-instance", Some("gce://p/z/vm"), &[]),
        ]);
        assert_eq!(names.name("i-0aaa"), "ip-10-0-1-4.ec2.internal");
        assert_eq!(names.name("10.0.1.4"), "ip-10-0-1-4.ec2.internal");
        assert_eq!(names.name("i-0bbb"), "i-0bbb.ec2.internal");
        assert_eq!(names.name("54.1.2.3"), "54.1.2.3", "not an internal IP");
        assert_eq!(names.name("i-0ccc"), "i-0ccc", "no node: the instance ID");
    }
}
