//! What both kinds of load balancer read alike: the kind a Service asks
//! for, its scheme, PROXY protocol, extra tags and spec checks.

use std::collections::BTreeMap;

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Service, ServiceSpec};

use super::super::annotations::{self as key, Annotations, check_tags, invalid};
use crate::tagging::{CLUSTER_TAG_PREFIX, LEGACY_CLUSTER_TAG, SERVICE_NAME_TAG};

/// The kind of load balancer a Service asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `aws-load-balancer-type: nlb`.
    Network,
    /// No type: upstream's default, a classic ELB.
    Classic,
}

/// The kind `a`'s type annotation asks for.
///
/// # Errors
/// [`CloudError::ImplementedElsewhere`] for `external` and `nlb-ip`;
/// [`CloudError::InvalidInput`] for a value upstream does not know (it
/// would make a classic ELB of a misspelt `nlb`).
pub(crate) fn kind_of(a: &Annotations<'_>) -> Result<Kind, CloudError> {
    match a.get(key::TYPE) {
        Some("nlb") => Ok(Kind::Network),
        Some("external" | "nlb-ip") => Err(CloudError::ImplementedElsewhere),
        None | Some("" | "classic" | "clb" | "elb") => Ok(Kind::Classic),
        Some(other) => Err(invalid(
            key::TYPE,
            format!("expected `nlb`, `external`, or no value for a classic ELB, got `{other}`"),
        )),
    }
}

/// The kind of load balancer `service` asks for, read from its type
/// annotation alone (see [`kind_of`]).
///
/// # Errors
/// As [`kind_of`].
pub(crate) fn kind(service: &Service) -> Result<Kind, CloudError> {
    let empty = BTreeMap::new();
    kind_of(&Annotations(
        service.metadata.annotations.as_ref().unwrap_or(&empty),
    ))
}

/// Keys only a classic ELB has a use for: refused on a Network Load
/// Balancer, where upstream ignores them.
pub(crate) const CLASSIC_ONLY: &[&str] = &[
    key::ACCESS_LOG_EMIT_INTERVAL,
    key::ACCESS_LOG_ENABLED,
    key::ACCESS_LOG_S3_BUCKET_NAME,
    key::ACCESS_LOG_S3_BUCKET_PREFIX,
    key::CONNECTION_DRAINING_ENABLED,
    key::CONNECTION_DRAINING_TIMEOUT,
    key::CONNECTION_IDLE_TIMEOUT,
];

/// [`CloudError::InvalidInput`] for the first of `keys` the Service sets,
/// saying `why`.
pub(crate) fn refuse_present(
    a: &Annotations<'_>,
    keys: &[&str],
    why: &str,
) -> Result<(), CloudError> {
    match keys.iter().find(|k| a.get(k).is_some()) {
        Some(k) => Err(invalid(k, why)),
        None => Ok(()),
    }
}

pub(crate) fn owned_list(a: &Annotations<'_>, k: &str) -> Result<Option<Vec<String>>, CloudError> {
    Ok(a.list(k)?
        .map(|items| items.into_iter().map(str::to_owned).collect()))
}

/// `internal`: `true`, or `0.0.0.0/0` as upstream's documentation once gave.
pub(crate) fn internal(a: &Annotations<'_>) -> Result<bool, CloudError> {
    Ok(match a.get(key::INTERNAL) {
        None | Some("") => false,
        Some("0.0.0.0/0") => true,
        Some(_) => a.bool(key::INTERNAL)?.unwrap_or(false),
    })
}

/// `proxy-protocol`: only `*` (every target), as upstream.
pub(crate) fn proxy_protocol(a: &Annotations<'_>) -> Result<bool, CloudError> {
    match a.get(key::PROXY_PROTOCOL) {
        None | Some("") => Ok(false),
        Some("*") => Ok(true),
        Some(other) => Err(invalid(
            key::PROXY_PROTOCOL,
            format!("the only supported value is `*` (every target), got `{other}`"),
        )),
    }
}

/// `additional-resource-tags`, none of them an ownership tag.
pub(crate) fn additional_tags(a: &Annotations<'_>) -> Result<BTreeMap<String, String>, CloudError> {
    let tags = a.key_values(key::ADDITIONAL_RESOURCE_TAGS)?;
    check_tags(key::ADDITIONAL_RESOURCE_TAGS, &tags)?;
    if let Some(reserved) = tags.keys().find(|k| {
        k.starts_with(CLUSTER_TAG_PREFIX) || *k == SERVICE_NAME_TAG || *k == LEGACY_CLUSTER_TAG
    }) {
        return Err(invalid(
            key::ADDITIONAL_RESOURCE_TAGS,
            format!("tag `{reserved}` is reserved for cluster ownership"),
        ));
    }
    Ok(tags)
}

/// The Service's spec, with a UID to name the load balancer after and
/// nothing a load balancer here cannot do.
pub(crate) fn checked_spec(service: &Service) -> Result<&ServiceSpec, CloudError> {
    let spec = service
        .spec
        .as_ref()
        .ok_or_else(|| invalid("spec", "the Service has no spec"))?;
    if service
        .metadata
        .uid
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        return Err(invalid(
            "metadata.uid",
            "the Service has no UID to name its load balancer after",
        ));
    }
    check_spec(spec)?;
    Ok(spec)
}

fn check_spec(spec: &ServiceSpec) -> Result<(), CloudError> {
    if spec.session_affinity.as_deref() == Some("ClientIP") {
        return Err(invalid(
            "spec.sessionAffinity",
            "ClientIP affinity is not supported by this provider's load balancers; use None",
        ));
    }
    if spec
        .load_balancer_ip
        .as_deref()
        .is_some_and(|ip| !ip.is_empty())
    {
        return Err(invalid(
            "spec.loadBalancerIP",
            format!(
                "cannot be chosen on AWS; use the {} annotation for fixed addresses",
                key::EIP_ALLOCATIONS
            ),
        ));
    }
    Ok(())
}
