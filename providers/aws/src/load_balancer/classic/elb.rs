//! The classic ELB itself: found by name, created with its listeners,
//! subnets, groups and tags, and kept to the Service: subnets, groups,
//! listeners, proxy-protocol backends, tags and registered instances, each
//! changed only where it differs (upstream's `ensureLoadBalancer`,
//! `syncElbListeners` and `ensureLoadBalancerInstances`).

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_elasticloadbalancing::types::{
    Instance, Listener, ListenerDescription, LoadBalancerDescription, PolicyAttribute, Tag,
};
use ccm_cloud_provider::CloudError;

use super::ClassicSpec;
use super::security::ClassicGroups;
use super::spec::ClassicListener;
use crate::provider::Cloud;

/// Upstream's proxy-protocol policy.
pub(crate) const PROXY_PROTOCOL_POLICY: &str = "k8s-proxyprotocol-enabled";

fn built<T>(r: Result<T, aws_smithy_types::error::operation::BuildError>) -> Result<T, CloudError> {
    r.map_err(|e| CloudError::msg(format!("building a classic ELB request: {e}")))
}

fn listener(l: &ClassicListener) -> Result<Listener, CloudError> {
    built(
        Listener::builder()
            .protocol(l.protocol)
            .load_balancer_port(l.port)
            .instance_protocol(l.instance_protocol)
            .instance_port(l.instance_port)
            .set_ssl_certificate_id(l.certificate.clone())
            .build(),
    )
}

/// Whether AWS's `actual` listener is `wanted` (upstream's
/// `elbListenersAreEqual`: protocols without regard to case).
fn same_listener(actual: &Listener, wanted: &ClassicListener) -> bool {
    actual.load_balancer_port() == wanted.port
        && actual.instance_port() == wanted.instance_port
        && actual.protocol().eq_ignore_ascii_case(wanted.protocol)
        && actual
            .instance_protocol()
            .unwrap_or(actual.protocol())
            .eq_ignore_ascii_case(wanted.instance_protocol)
        && actual.ssl_certificate_id() == wanted.certificate.as_deref()
}

/// Listener ports to delete and listeners to create.
pub(crate) fn listener_changes<'a>(
    actual: &[Listener],
    wanted: &'a [ClassicListener],
) -> (Vec<i32>, Vec<&'a ClassicListener>) {
    let remove = actual
        .iter()
        .filter(|a| !wanted.iter().any(|w| same_listener(a, w)))
        .map(Listener::load_balancer_port)
        .collect();
    let add = wanted
        .iter()
        .filter(|w| !actual.iter().any(|a| same_listener(a, w)))
        .collect();
    (remove, add)
}

/// `lb` as its listener changes leave it, which a dry run only planned: a
/// listener kept keeps its policies, a new one has none.
pub(crate) fn with_listeners(
    mut lb: LoadBalancerDescription,
    wanted: &[ClassicListener],
) -> Result<LoadBalancerDescription, CloudError> {
    let actual: Vec<Listener> = lb
        .listener_descriptions()
        .iter()
        .filter_map(|d| d.listener().cloned())
        .collect();
    let (remove, add) = listener_changes(&actual, wanted);
    let mut descriptions: Vec<ListenerDescription> = lb
        .listener_descriptions
        .take()
        .unwrap_or_default()
        .into_iter()
        .filter(|d| {
            d.listener()
                .is_none_or(|l| !remove.contains(&l.load_balancer_port()))
        })
        .collect();
    for new in add {
        descriptions.push(
            ListenerDescription::builder()
                .listener(listener(new)?)
                .build(),
        );
    }
    lb.listener_descriptions = Some(descriptions);
    Ok(lb)
}

fn tag_list(tags: &BTreeMap<String, String>) -> Result<Vec<Tag>, CloudError> {
    tags.iter()
        .map(|(k, v)| built(Tag::builder().key(k).value(v).build()))
        .collect()
}

impl Cloud {
    /// The classic ELB named `name`, if it exists.
    async fn lookup_classic(
        &self,
        name: &str,
    ) -> Result<Option<LoadBalancerDescription>, CloudError> {
        let found = self
            .api
            .call("DescribeLoadBalancers", || {
                self.api
                    .elb
                    .describe_load_balancers()
                    .load_balancer_names(name)
                    .send()
            })
            .await;
        match found {
            Ok(out) => Ok(out.load_balancer_descriptions().first().cloned()),
            Err(e) if e.is("LoadBalancerNotFound") => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The classic ELB named `name` and its tags, if it exists.
    pub(crate) async fn find_classic(
        &self,
        name: &str,
    ) -> Result<Option<(LoadBalancerDescription, Vec<Tag>)>, CloudError> {
        let Some(lb) = self.lookup_classic(name).await? else {
            return Ok(None);
        };
        let described = self
            .api
            .call("DescribeTags", || {
                self.api
                    .elb
                    .describe_tags()
                    .load_balancer_names(name)
                    .send()
            })
            .await?;
        let tags = described
            .tag_descriptions()
            .iter()
            .find(|d| d.load_balancer_name() == Some(name))
            .map(|d| d.tags().to_vec())
            .unwrap_or_default();
        Ok(Some((lb, tags)))
    }

    /// The ELB as AWS now describes it.
    pub(crate) async fn describe_classic(
        &self,
        name: &str,
    ) -> Result<LoadBalancerDescription, CloudError> {
        self.lookup_classic(name)
            .await?
            .ok_or_else(|| CloudError::msg(format!("classic ELB {name} vanished")))
    }

    /// Creates the ELB; in a dry run, answers the ELB it planned, which
    /// stands in for it in the rest of the plan (`None` once created).
    pub(crate) async fn create_classic(
        &self,
        spec: &ClassicSpec,
        subnets: &[String],
        groups: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<Option<LoadBalancerDescription>, CloudError> {
        let listeners = spec
            .listeners
            .iter()
            .map(listener)
            .collect::<Result<Vec<_>, _>>()?;
        let tags = tag_list(tags)?;
        let name = &spec.svc.load_balancer_name;
        tracing::info!(service = %spec.svc.key, name = %name, "creating classic ELB");
        let created = self
            .api
            .change("CreateLoadBalancer", || {
                self.api
                    .elb
                    .create_load_balancer()
                    .load_balancer_name(name)
                    .set_listeners(Some(listeners.clone()))
                    .set_scheme(spec.internal.then(|| "internal".to_owned()))
                    .set_subnets(Some(subnets.to_vec()))
                    .set_security_groups(Some(groups.to_vec()))
                    .set_tags(Some(tags.clone()))
                    .send()
            })
            .await?;
        if created.is_some() {
            return Ok(None);
        }
        let listeners = listeners
            .into_iter()
            .map(|l| ListenerDescription::builder().listener(l).build());
        Ok(Some(
            LoadBalancerDescription::builder()
                .load_balancer_name(name)
                .set_listener_descriptions(Some(listeners.collect()))
                .set_subnets(Some(subnets.to_vec()))
                .set_security_groups(Some(groups.to_vec()))
                .build(),
        ))
    }

    /// Brings an existing ELB's subnets, groups, listeners, proxy protocol
    /// and tags (to `wanted`) to the Service; whether anything changed.
    pub(crate) async fn update_classic_settings(
        &self,
        spec: &ClassicSpec,
        lb: &LoadBalancerDescription,
        current_tags: &[Tag],
        wanted: &BTreeMap<String, String>,
        subnets: &[String],
        groups: &ClassicGroups,
    ) -> Result<bool, CloudError> {
        let name = spec.svc.load_balancer_name.as_str();
        let mut dirty = false;
        let have: BTreeSet<&str> = lb.subnets().iter().map(String::as_str).collect();
        let want: BTreeSet<&str> = subnets.iter().map(String::as_str).collect();
        let detach: Vec<String> = have.difference(&want).map(|s| (*s).to_owned()).collect();
        let attach: Vec<String> = want.difference(&have).map(|s| (*s).to_owned()).collect();
        if !detach.is_empty() {
            self.api
                .change("DetachLoadBalancerFromSubnets", || {
                    self.api
                        .elb
                        .detach_load_balancer_from_subnets()
                        .load_balancer_name(name)
                        .set_subnets(Some(detach.clone()))
                        .send()
                })
                .await?;
            dirty = true;
        }
        if !attach.is_empty() {
            self.api
                .change("AttachLoadBalancerToSubnets", || {
                    self.api
                        .elb
                        .attach_load_balancer_to_subnets()
                        .load_balancer_name(name)
                        .set_subnets(Some(attach.clone()))
                        .send()
                })
                .await?;
            dirty = true;
        }
        let have: BTreeSet<&String> = lb.security_groups().iter().collect();
        let want: BTreeSet<&String> = groups.attached.iter().collect();
        if have != want {
            self.api
                .change("ApplySecurityGroupsToLoadBalancer", || {
                    self.api
                        .elb
                        .apply_security_groups_to_load_balancer()
                        .load_balancer_name(name)
                        .set_security_groups(Some(groups.attached.clone()))
                        .send()
                })
                .await?;
            let detached: Vec<String> = have.difference(&want).map(|g| (*g).clone()).collect();
            self.delete_replaced_own_group(spec, &detached).await;
            dirty = true;
        }
        dirty |= self.sync_listeners(spec, lb).await?;
        dirty |= self.set_proxy_protocol(spec, Some(lb)).await?;
        let mut missing = BTreeMap::new();
        for (k, v) in wanted {
            if !current_tags
                .iter()
                .any(|t| t.key() == k && t.value().unwrap_or_default() == v)
            {
                missing.insert(k.clone(), v.clone());
            }
        }
        if !missing.is_empty() {
            let tags = tag_list(&missing)?;
            self.api
                .change("AddTags", || {
                    self.api
                        .elb
                        .add_tags()
                        .load_balancer_names(name)
                        .set_tags(Some(tags.clone()))
                        .send()
                })
                .await?;
        }
        Ok(dirty)
    }

    async fn sync_listeners(
        &self,
        spec: &ClassicSpec,
        lb: &LoadBalancerDescription,
    ) -> Result<bool, CloudError> {
        let name = spec.svc.load_balancer_name.as_str();
        let actual: Vec<Listener> = lb
            .listener_descriptions()
            .iter()
            .filter_map(|d| d.listener().cloned())
            .collect();
        let (remove, add) = listener_changes(&actual, &spec.listeners);
        // One port per call: moto keeps every listener when asked to
        // delete several at once, and listeners seldom change.
        for port in &remove {
            self.api
                .change("DeleteLoadBalancerListeners", || {
                    self.api
                        .elb
                        .delete_load_balancer_listeners()
                        .load_balancer_name(name)
                        .load_balancer_ports(*port)
                        .send()
                })
                .await?;
        }
        if !add.is_empty() {
            let listeners = add
                .iter()
                .map(|l| listener(l))
                .collect::<Result<Vec<_>, _>>()?;
            self.api
                .change("CreateLoadBalancerListeners", || {
                    self.api
                        .elb
                        .create_load_balancer_listeners()
                        .load_balancer_name(name)
                        .set_listeners(Some(listeners.clone()))
                        .send()
                })
                .await?;
        }
        Ok(!remove.is_empty() || !add.is_empty())
    }

    /// PROXY protocol on every listener's node port when asked, on none
    /// otherwise; the policy made once. `lb` is `None` for a new ELB.
    pub(crate) async fn set_proxy_protocol(
        &self,
        spec: &ClassicSpec,
        lb: Option<&LoadBalancerDescription>,
    ) -> Result<bool, CloudError> {
        let name = spec.svc.load_balancer_name.as_str();
        let mut current: BTreeMap<i32, bool> = BTreeMap::new();
        for b in lb
            .map(LoadBalancerDescription::backend_server_descriptions)
            .unwrap_or_default()
        {
            if let Some(port) = b.instance_port() {
                current.insert(
                    port,
                    b.policy_names().iter().any(|p| p == PROXY_PROTOCOL_POLICY),
                );
            }
        }
        let mut wanted: BTreeMap<i32, bool> = current.keys().map(|p| (*p, false)).collect();
        for l in &spec.listeners {
            wanted.insert(l.instance_port, spec.proxy_protocol);
        }
        let changes: Vec<(i32, bool)> = wanted
            .into_iter()
            .filter(|(port, on)| current.get(port).copied().unwrap_or(false) != *on)
            .collect();
        if changes.is_empty() {
            return Ok(false);
        }
        let has_policy = lb
            .and_then(LoadBalancerDescription::policies)
            .is_some_and(|p| {
                p.other_policies()
                    .iter()
                    .any(|n| n == PROXY_PROTOCOL_POLICY)
            });
        if spec.proxy_protocol && !has_policy {
            let attribute = PolicyAttribute::builder()
                .attribute_name("ProxyProtocol")
                .attribute_value("true")
                .build();
            self.api
                .change("CreateLoadBalancerPolicy", || {
                    self.api
                        .elb
                        .create_load_balancer_policy()
                        .load_balancer_name(name)
                        .policy_name(PROXY_PROTOCOL_POLICY)
                        .policy_type_name("ProxyProtocolPolicyType")
                        .policy_attributes(attribute.clone())
                        .send()
                })
                .await?;
        }
        for (port, on) in changes {
            let policies = if on {
                vec![PROXY_PROTOCOL_POLICY.to_owned()]
            } else {
                Vec::new()
            };
            self.api
                .change("SetLoadBalancerPoliciesForBackendServer", || {
                    self.api
                        .elb
                        .set_load_balancer_policies_for_backend_server()
                        .load_balancer_name(name)
                        .instance_port(port)
                        .set_policy_names(Some(policies.clone()))
                        .send()
                })
                .await?;
        }
        Ok(true)
    }

    /// Registers `ids` that are not yet and deregisters the others.
    pub(crate) async fn sync_registered(
        &self,
        name: &str,
        lb: &LoadBalancerDescription,
        ids: &[String],
    ) -> Result<(), CloudError> {
        let have: BTreeSet<&str> = lb
            .instances()
            .iter()
            .filter_map(Instance::instance_id)
            .collect();
        let want: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        let instances = |set: BTreeSet<&&str>| -> Vec<Instance> {
            set.into_iter()
                .map(|id| Instance::builder().instance_id(*id).build())
                .collect()
        };
        let add = instances(want.difference(&have).collect());
        let remove = instances(have.difference(&want).collect());
        if !add.is_empty() {
            self.api
                .change("RegisterInstancesWithLoadBalancer", || {
                    self.api
                        .elb
                        .register_instances_with_load_balancer()
                        .load_balancer_name(name)
                        .set_instances(Some(add.clone()))
                        .send()
                })
                .await?;
        }
        if !remove.is_empty() {
            self.api
                .change("DeregisterInstancesFromLoadBalancer", || {
                    self.api
                        .elb
                        .deregister_instances_from_load_balancer()
                        .load_balancer_name(name)
                        .set_instances(Some(remove.clone()))
                        .send()
                })
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
