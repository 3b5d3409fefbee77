//! Load balancers (upstream's `cloudprovider.LoadBalancer`): what the
//! service controller asks a provider to ensure, update and delete, and the
//! status it writes back.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Service};

use crate::{CloudError, LoadBalancerHealth};

/// How traffic reaches the load balancer's address (`status.loadBalancer.ingress[].ipMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpMode {
    /// Traffic is delivered with the load balancer's IP as destination
    /// (`VIP`, the Kubernetes default).
    Vip,
    /// The load balancer proxies traffic to the nodes (`Proxy`).
    Proxy,
}

impl IpMode {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vip => "VIP",
            Self::Proxy => "Proxy",
        }
    }
}

/// The state of one service port on a load-balancer ingress point.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortStatus {
    /// The service port number.
    pub port: i32,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// A CamelCase reason when the port is in error, `None` when it is fine.
    pub error: Option<String>,
}

/// One ingress point of a load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LoadBalancerIngress {
    /// The ingress IP, for clouds that give one.
    pub ip: Option<String>,
    /// The ingress DNS name, for clouds that give one (AWS).
    pub hostname: Option<String>,
    /// How traffic reaches `ip`; `None` leaves the Kubernetes default.
    pub ip_mode: Option<IpMode>,
    /// Per-port state, when the cloud reports it.
    pub ports: Vec<PortStatus>,
}

/// What `status.loadBalancer` of a Service should say.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LoadBalancerStatus {
    /// The ingress points, in the cloud's order.
    pub ingress: Vec<LoadBalancerIngress>,
}

/// What [`LoadBalancer::ensure_load_balancer`] achieved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnsuredLoadBalancer {
    /// What `status.loadBalancer` of the Service should say.
    pub status: LoadBalancerStatus,
    /// Annotations the service controller records on the Service, such as
    /// the cloud's ID for the load balancer, so later calls find it without a
    /// lookup by name (a provider never writes to the Kubernetes API itself).
    /// Existing annotations with other keys are left alone.
    pub service_annotations: BTreeMap<String, String>,
    /// Things the operator should know that did not stop the ensure, such as
    /// an unknown annotation (see [`crate::annotations::unknown_annotation_warnings`]).
    /// After a successful ensure the service controller emits each as a
    /// Warning event on the Service, with its reason and message; a failed
    /// ensure emits none of them.
    pub warnings: Vec<LoadBalancerWarning>,
}

impl From<LoadBalancerStatus> for EnsuredLoadBalancer {
    fn from(status: LoadBalancerStatus) -> Self {
        Self {
            status,
            ..Self::default()
        }
    }
}

/// A warning about a Service whose load balancer was nonetheless ensured,
/// published as a Warning event on the Service.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LoadBalancerWarning {
    /// The event's reason: CamelCase, stable, such as `UnknownAnnotation`.
    pub reason: String,
    /// The event's message, in words for an operator, under 1 KiB (longer
    /// ones are cut by the event publisher).
    pub message: String,
}

impl LoadBalancerWarning {
    /// A warning with `reason` and `message`.
    pub fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// Upstream's default load-balancer name: `"a"` followed by the Service UID
/// without dashes, cut to 32 characters (AWS's limit on load-balancer names).
///
/// A Service without a UID (never the case for a stored object) yields `"a"`.
pub fn default_load_balancer_name(service: &Service) -> String {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    let mut name: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .collect();
    // UIDs are ASCII; cut on a char boundary anyway so a malformed UID cannot panic.
    if let Some((cut, _)) = name.char_indices().nth(32) {
        name.truncate(cut);
    }
    name
}

/// Cloud load balancers for Services of type `LoadBalancer` (upstream's
/// `cloudprovider.LoadBalancer`).
///
/// # Contract for implementers
/// - Every method is idempotent: calling it twice with the same inputs
///   leaves the cloud as calling it once, and a create always looks the load
///   balancer up by name and ownership tags first, so a retry never
///   duplicates one.
/// - The `service` and `nodes` arguments are read-only.
/// - Everything created is tagged as owned by `cluster_name`.
/// - Validate the Service (annotations, ports) before the first mutation and
///   return [`CloudError::InvalidInput`] when it is malformed: no partial
///   change.
/// - An annotation that is merely unknown (a typo of a known key) is not
///   malformed: report it in [`EnsuredLoadBalancer::warnings`] (see
///   [`crate::annotations::unknown_annotation_warnings`]) and ensure the
///   load balancer as if it were absent.
/// - Return [`CloudError::ImplementedElsewhere`] for Services another
///   controller owns (for example by annotation), from every method.
/// - Return [`CloudError::Retry`] while the cloud is still provisioning.
#[async_trait]
pub trait LoadBalancer: Send + Sync {
    /// The load balancer for `service`, or `None` when there is none.
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError>;

    /// The cloud name of the load balancer for `service`.
    ///
    /// The default is [`default_load_balancer_name`].
    fn load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        let _ = cluster_name;
        default_load_balancer_name(service)
    }

    /// What the provider tells from `service` alone, without calling the
    /// cloud, before the service controller claims a new Service (stores
    /// its finalizer): `Some(Ok(()))` when the load balancer is this
    /// provider's to make and the Service is well-formed as far as can be
    /// told offline; `Some(Err(`[`CloudError::ImplementedElsewhere`]`))`
    /// when another controller implements it; `Some(Err(`
    /// [`CloudError::InvalidInput`]`))` for a malformed Service.
    ///
    /// The default, `None`, says the answer needs the cloud: the controller
    /// then asks [`get_load_balancer`](Self::get_load_balancer) first, one
    /// read more per new Service than upstream's controller makes.
    fn check_service(&self, service: &Service) -> Option<Result<(), CloudError>> {
        let _ = service;
        None
    }

    /// Every Service annotation this provider honours, described once: the
    /// service controller warns from it and the admission webhook refuses
    /// from it, with the same words. `None` (the default) for a provider
    /// that reads no annotations; then nothing is checked.
    fn annotation_schema(&self) -> Option<&'static crate::annotations::AnnotationSchema> {
        None
    }

    /// Creates the load balancer for `service` or brings it up to date,
    /// sending traffic to `nodes`, and returns its status and any annotations
    /// to record on the Service.
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<EnsuredLoadBalancer, CloudError>;

    /// Points the existing load balancer for `service` at `nodes`. Only the
    /// backends change.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError>;

    /// The health of the existing load balancer's targets, as the cloud's
    /// own health checks see them, for the Service's
    /// `LoadBalancerTargetsHealthy` condition. `nodes` are the nodes the
    /// load balancer was last pointed at, so a provider can name each
    /// target's node.
    ///
    /// The default, `Ok(None)`, says this provider cannot tell: the
    /// controller then writes no such condition rather than guess, and does
    /// not ask again for that Service until it changes. A provider that can
    /// tell answers with one read call per load balancer where the cloud
    /// allows it: the controller asks only after a change and while targets
    /// are not all healthy, never for a steady healthy Service.
    async fn load_balancer_health(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Option<LoadBalancerHealth>, CloudError> {
        let _ = (cluster_name, service, nodes);
        Ok(None)
    }

    /// Deletes the load balancer for `service` and everything created with
    /// it. Succeeds when it is already gone.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn service_with_uid(uid: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                uid: Some(uid.to_owned()),
                ..ObjectMeta::default()
            },
            ..Service::default()
        }
    }

    #[test]
    fn default_name_is_a_plus_uid_without_dashes_cut_to_32() {
        let svc = service_with_uid("3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b");
        let name = default_load_balancer_name(&svc);
        assert_eq!(name, "a3f2a9c1e5b7d4e8f9a0b1c2d3e4f5a6");
        assert_eq!(name.len(), 32);
    }

    #[test]
    fn default_name_keeps_short_uids_whole() {
        assert_eq!(
            default_load_balancer_name(&service_with_uid("ab-cd")),
            "aabcd"
        );
    }

    #[test]
    fn default_name_of_a_service_without_uid_is_a() {
        assert_eq!(default_load_balancer_name(&Service::default()), "a");
    }
}
