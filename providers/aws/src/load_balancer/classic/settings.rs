//! A classic ELB's attributes (access logs, connection draining, idle
//! timeout, cross-zone), its health check and the SSL negotiation policy of
//! its TLS listeners, each compared with what AWS reports and changed only
//! where it differs. Upstream compares the attributes as whole structures,
//! so AWS's defaults for fields it leaves unset make it rewrite them on
//! every ensure; here an unset field is one the Service does not ask about.

use aws_sdk_elasticloadbalancing::types::{
    AccessLog, ConnectionDraining, ConnectionSettings, CrossZoneLoadBalancing, HealthCheck,
    LoadBalancerAttributes, LoadBalancerDescription, PolicyAttribute,
};
use ccm_cloud_provider::CloudError;

use super::ClassicSpec;
use super::spec::ClassicAttributes;

/// Upstream's name for the policy made from `ssl-negotiation-policy`.
pub(crate) fn ssl_policy_name(policy: &str) -> String {
    format!("k8s-SSLNegotiationPolicy-{policy}")
}

/// Whether AWS's attributes already say what `wanted` asks.
pub(crate) fn attributes_match(
    actual: &LoadBalancerAttributes,
    wanted: &ClassicAttributes,
) -> bool {
    let log = actual.access_log();
    let log_ok = log.is_some_and(|l| {
        l.enabled() == wanted.access_log_enabled
            && wanted
                .access_log_interval
                .is_none_or(|i| l.emit_interval() == Some(i))
            && wanted
                .access_log_bucket
                .as_deref()
                .is_none_or(|b| l.s3_bucket_name() == Some(b))
            && wanted
                .access_log_prefix
                .as_deref()
                .is_none_or(|p| l.s3_bucket_prefix() == Some(p))
    });
    let draining_ok = actual.connection_draining().is_some_and(|d| {
        d.enabled() == wanted.draining_enabled
            && wanted
                .draining_timeout
                .is_none_or(|t| d.timeout() == Some(t))
    });
    let idle_ok = actual
        .connection_settings()
        .is_some_and(|c| c.idle_timeout() == wanted.idle_timeout);
    let cross_zone_ok = actual
        .cross_zone_load_balancing()
        .is_some_and(|c| c.enabled() == wanted.cross_zone);
    log_ok && draining_ok && idle_ok && cross_zone_ok
}

/// The attributes AWS gives an ELB made through the API: no access log,
/// no connection draining (its timeout reported as 300 s), a 60-second idle
/// timeout, no cross-zone load balancing.
const NEW_ELB: ClassicAttributes = ClassicAttributes {
    access_log_enabled: false,
    access_log_interval: None,
    access_log_bucket: None,
    access_log_prefix: None,
    draining_enabled: false,
    draining_timeout: Some(300),
    idle_timeout: 60,
    cross_zone: false,
};

fn attributes(wanted: &ClassicAttributes) -> Result<LoadBalancerAttributes, CloudError> {
    let idle = ConnectionSettings::builder()
        .idle_timeout(wanted.idle_timeout)
        .build()
        .map_err(|e| CloudError::msg(format!("building ELB attributes: {e}")))?;
    Ok(LoadBalancerAttributes::builder()
        .access_log(
            AccessLog::builder()
                .enabled(wanted.access_log_enabled)
                .set_emit_interval(wanted.access_log_interval)
                .set_s3_bucket_name(wanted.access_log_bucket.clone())
                .set_s3_bucket_prefix(wanted.access_log_prefix.clone())
                .build(),
        )
        .connection_draining(
            ConnectionDraining::builder()
                .enabled(wanted.draining_enabled)
                .set_timeout(wanted.draining_timeout)
                .build(),
        )
        .connection_settings(idle)
        .cross_zone_load_balancing(
            CrossZoneLoadBalancing::builder()
                .enabled(wanted.cross_zone)
                .build(),
        )
        .build())
}

/// Whether AWS's health check is `wanted` (the protocol without regard to
/// case).
pub(crate) fn health_check_matches(
    actual: Option<&HealthCheck>,
    wanted: &super::spec::ClassicHealthCheck,
) -> bool {
    actual.is_some_and(|a| {
        let (protocol, rest) = a.target().split_once(':').unwrap_or((a.target(), ""));
        let (w_protocol, w_rest) = wanted
            .target
            .split_once(':')
            .unwrap_or((&wanted.target, ""));
        protocol.eq_ignore_ascii_case(w_protocol)
            && rest == w_rest
            && a.interval() == wanted.interval
            && a.timeout() == wanted.timeout
            && a.healthy_threshold() == wanted.healthy_threshold
            && a.unhealthy_threshold() == wanted.unhealthy_threshold
    })
}

impl crate::provider::Cloud {
    /// The ELB's attributes as the Service asks; whether they changed. An
    /// ELB a dry run `planned` to create is not read: it would have
    /// [`NEW_ELB`]'s.
    pub(crate) async fn sync_classic_attributes(
        &self,
        spec: &ClassicSpec,
        planned: bool,
    ) -> Result<bool, CloudError> {
        let name = spec.svc.load_balancer_name.as_str();
        let current = if planned {
            Some(attributes(&NEW_ELB)?)
        } else {
            let described = self
                .api
                .call("DescribeLoadBalancerAttributes", || {
                    self.api
                        .elb
                        .describe_load_balancer_attributes()
                        .load_balancer_name(name)
                        .send()
                })
                .await?;
            described.load_balancer_attributes().cloned()
        };
        if current.is_some_and(|a| attributes_match(&a, &spec.attributes)) {
            return Ok(false);
        }
        let wanted = attributes(&spec.attributes)?;
        self.api
            .change("ModifyLoadBalancerAttributes", || {
                self.api
                    .elb
                    .modify_load_balancer_attributes()
                    .load_balancer_name(name)
                    .load_balancer_attributes(wanted.clone())
                    .send()
            })
            .await?;
        Ok(true)
    }

    pub(crate) async fn sync_health_check(
        &self,
        spec: &ClassicSpec,
        lb: &LoadBalancerDescription,
    ) -> Result<(), CloudError> {
        let wanted = &spec.health_check;
        if health_check_matches(lb.health_check(), wanted) {
            return Ok(());
        }
        let check = HealthCheck::builder()
            .target(&wanted.target)
            .interval(wanted.interval)
            .timeout(wanted.timeout)
            .healthy_threshold(wanted.healthy_threshold)
            .unhealthy_threshold(wanted.unhealthy_threshold)
            .build()
            .map_err(|e| CloudError::msg(format!("building the ELB health check: {e}")))?;
        self.api
            .change("ConfigureHealthCheck", || {
                self.api
                    .elb
                    .configure_health_check()
                    .load_balancer_name(&spec.svc.load_balancer_name)
                    .health_check(check.clone())
                    .send()
            })
            .await?;
        Ok(())
    }

    /// With `ssl-negotiation-policy`: the policy made once and set on every
    /// TLS listener that lacks it.
    pub(crate) async fn sync_ssl_policy(
        &self,
        spec: &ClassicSpec,
        lb: &LoadBalancerDescription,
    ) -> Result<(), CloudError> {
        let Some(policy) = &spec.ssl_negotiation_policy else {
            return Ok(());
        };
        let name = spec.svc.load_balancer_name.as_str();
        let policy_name = ssl_policy_name(policy);
        let tls_ports: Vec<i32> = lb
            .listener_descriptions()
            .iter()
            .filter(|d| {
                d.listener().is_some_and(|l| {
                    l.protocol().eq_ignore_ascii_case("SSL")
                        || l.protocol().eq_ignore_ascii_case("HTTPS")
                }) && d.policy_names() != [policy_name.clone()]
            })
            .filter_map(|d| d.listener().map(|l| l.load_balancer_port()))
            .collect();
        if tls_ports.is_empty() {
            return Ok(());
        }
        let exists = lb
            .policies()
            .is_some_and(|p| p.other_policies().contains(&policy_name));
        if !exists {
            let attribute = PolicyAttribute::builder()
                .attribute_name("Reference-Security-Policy")
                .attribute_value(policy)
                .build();
            self.api
                .change("CreateLoadBalancerPolicy", || {
                    self.api
                        .elb
                        .create_load_balancer_policy()
                        .load_balancer_name(name)
                        .policy_name(&policy_name)
                        .policy_type_name("SSLNegotiationPolicyType")
                        .policy_attributes(attribute.clone())
                        .send()
                })
                .await?;
        }
        for port in tls_ports {
            self.api
                .change("SetLoadBalancerPoliciesOfListener", || {
                    self.api
                        .elb
                        .set_load_balancer_policies_of_listener()
                        .load_balancer_name(name)
                        .load_balancer_port(port)
                        .policy_names(&policy_name)
                        .send()
                })
                .await?;
        }
        Ok(())
    }
}
