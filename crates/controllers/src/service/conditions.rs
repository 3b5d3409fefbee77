//! The Service's load-balancer conditions, decided without I/O:
//! `LoadBalancerProvisioned` from the last ensure, `LoadBalancerTargetsHealthy`
//! from the cloud's health checks, and which of them a status write must
//! carry (only those that changed, so a steady Service costs no write).

use ccm_cloud_provider::{CloudError, LoadBalancerHealth, TargetState, health_by_node};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Whether the cloud load balancer exists and the ingress is written.
pub(crate) const PROVISIONED: &str = "LoadBalancerProvisioned";
/// Whether every target of the load balancer passes the cloud's health check.
pub(crate) const TARGETS_HEALTHY: &str = "LoadBalancerTargetsHealthy";
/// Our condition types, the only ones this controller writes or removes.
pub(crate) const OURS: [&str; 2] = [PROVISIONED, TARGETS_HEALTHY];

/// The longest message written: a cloud's error can be long, and a Service
/// is read by every `kubectl get`.
pub(crate) const MAX_MESSAGE: usize = 1024;
/// Nodes named in a message before "and N more".
const MAX_NAMED: usize = 10;

/// A condition as this controller wants it, before times and generations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// One of [`OURS`].
    pub(crate) type_: &'static str,
    /// `True`, `False` or `Unknown`.
    pub(crate) status: &'static str,
    /// CamelCase, stable.
    pub(crate) reason: &'static str,
    /// For an operator, at most [`MAX_MESSAGE`] bytes.
    pub(crate) message: String,
}

impl Wanted {
    fn new(
        type_: &'static str,
        status: &'static str,
        reason: &'static str,
        message: String,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: bounded(message),
        }
    }

    /// Whether this is `LoadBalancerTargetsHealthy=True`.
    pub(crate) fn all_healthy(&self) -> bool {
        self.type_ == TARGETS_HEALTHY && self.status == "True"
    }
}

/// `message` cut to [`MAX_MESSAGE`] bytes on a character boundary.
fn bounded(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE - 3;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str("...");
    }
    message
}

/// `LoadBalancerProvisioned=True`, naming where the load balancer answers.
pub(crate) fn provisioned(ingress: &[LoadBalancerIngress]) -> Wanted {
    let at: Vec<&str> = ingress
        .iter()
        .filter_map(|i| i.hostname.as_deref().or(i.ip.as_deref()))
        .collect();
    let message = if at.is_empty() {
        "load balancer ready".to_owned()
    } else {
        format!("load balancer ready at {}", at.join(", "))
    };
    Wanted::new(PROVISIONED, "True", "Provisioned", message)
}

/// `LoadBalancerProvisioned=False/Pending`.
pub(crate) fn pending(message: impl Into<String>) -> Wanted {
    Wanted::new(PROVISIONED, "False", "Pending", message.into())
}

/// What a failed ensure says in `LoadBalancerProvisioned`, or `None` when it
/// says nothing: throttling is transient and not the Service's business, and
/// a Service another controller implements is left alone.
pub(crate) fn failed(err: &CloudError) -> Option<Wanted> {
    let (reason, message) = match err {
        CloudError::Throttled { .. } | CloudError::ImplementedElsewhere => return None,
        CloudError::Retry { reason, .. } => ("Pending", reason.clone()),
        CloudError::InvalidInput { .. } => ("InvalidAnnotation", err.to_string()),
        CloudError::QuotaExceeded { message } => ("QuotaExceeded", message.clone()),
        _ => ("CloudError", err.to_string()),
    };
    Some(Wanted::new(PROVISIONED, "False", reason, message))
}

/// `LoadBalancerTargetsHealthy` from the cloud's answer: True when every
/// node's target is healthy, Unknown while any is initial and none
/// unhealthy, False when any is unhealthy or there is no target at all.
pub(crate) fn targets(health: &LoadBalancerHealth) -> Wanted {
    let nodes = health_by_node(health);
    if nodes.is_empty() {
        return Wanted::new(
            TARGETS_HEALTHY,
            "False",
            "NoTargets",
            "the load balancer has no targets".to_owned(),
        );
    }
    let total = nodes.len();
    let healthy = nodes
        .iter()
        .filter(|t| t.state == TargetState::Healthy)
        .count();
    let counts = format!("{healthy} of {total} targets healthy");
    let unhealthy: Vec<String> = nodes
        .iter()
        .filter_map(|t| match &t.state {
            TargetState::Unhealthy { reason } if reason.is_empty() => Some(t.node.clone()),
            TargetState::Unhealthy { reason } => Some(format!("{} ({reason})", t.node)),
            _ => None,
        })
        .collect();
    if !unhealthy.is_empty() {
        return Wanted::new(
            TARGETS_HEALTHY,
            "False",
            "TargetsUnhealthy",
            format!("{counts}; unhealthy: {}", named(&unhealthy)),
        );
    }
    let initial: Vec<String> = nodes
        .iter()
        .filter(|t| t.state == TargetState::Initial)
        .map(|t| t.node.clone())
        .collect();
    if !initial.is_empty() {
        return Wanted::new(
            TARGETS_HEALTHY,
            "Unknown",
            "TargetsInitializing",
            format!("{counts}; initializing: {}", named(&initial)),
        );
    }
    Wanted::new(TARGETS_HEALTHY, "True", "AllTargetsHealthy", counts)
}

/// The unhealthy or initializing targets of `health` (the gauge's value).
pub(crate) fn not_healthy(health: &LoadBalancerHealth) -> usize {
    health_by_node(health)
        .iter()
        .filter(|t| t.state != TargetState::Healthy)
        .count()
}

/// At most [`MAX_NAMED`] names, then how many more.
fn named(names: &[String]) -> String {
    let shown = names[..names.len().min(MAX_NAMED)].join(", ");
    match names.len().saturating_sub(MAX_NAMED) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// The Service's conditions (empty when unset).
pub(crate) fn current(service: &Service) -> &[Condition] {
    service
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
}

/// Whether the Service carries any condition of ours.
pub(crate) fn has_ours(service: &Service) -> bool {
    current(service)
        .iter()
        .any(|c| OURS.contains(&c.type_.as_str()))
}

/// The conditions a status write must carry so that the Service says
/// `wanted`: each one whose status, reason, message or observed generation
/// differs, with its transition time kept unless its status changed. Empty
/// when the Service already says it all: nothing to write.
pub(crate) fn changes(
    current: &[Condition],
    wanted: &[Wanted],
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    wanted
        .iter()
        .filter_map(|w| {
            let existing = current.iter().find(|c| c.type_ == w.type_);
            if let Some(c) = existing
                && c.status == w.status
                && c.reason == w.reason
                && c.message == w.message
                && c.observed_generation == generation
            {
                return None;
            }
            let since = existing
                .filter(|c| c.status == w.status)
                .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
            Some(Condition {
                type_: w.type_.to_owned(),
                status: w.status.to_owned(),
                reason: w.reason.to_owned(),
                message: w.message.clone(),
                last_transition_time: since,
                observed_generation: generation,
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "conditions_tests.rs"]
mod tests;
