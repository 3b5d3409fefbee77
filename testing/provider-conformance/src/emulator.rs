//! [`Emulator`]: the suite's handle on the fake cloud behind a provider.

use std::collections::BTreeMap;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};

/// How many resources of each kind the cloud holds, in the whole account
/// (every cluster's): `"load-balancers"`, `"target-groups"`, `"routes"`...
///
/// The suite only compares counts before and after calls, so a provider
/// names its kinds as it likes; everything its load balancers and routes
/// are made of should be counted, so that a leak shows.
pub type Resources = BTreeMap<String, usize>;

/// The fake cloud behind a provider under test, as the suite drives it.
///
/// Each method is a test fixture: it panics when the emulator cannot do
/// what is asked.
#[async_trait]
pub trait Emulator: Send + Sync + std::fmt::Debug {
    /// Starts a running instance for a node called `name` and returns the
    /// Node as its kubelet would register it (with `spec.providerID` when
    /// the cloud's kubelets set one). Its instance is one the provider's
    /// routes may target.
    async fn add_instance(&self, name: &str) -> Node;

    /// A Node whose instance does not exist: a provider ID in this cloud's
    /// form that names nothing, or, for clouds that look nodes up by name,
    /// a name that matches no instance.
    fn missing_node(&self, name: &str) -> Node;

    /// Stops (shuts down, not terminates) the instance behind `node`.
    async fn stop_instance(&self, node: &Node);

    /// Terminates the instance behind `node`: it no longer exists.
    async fn remove_instance(&self, node: &Node);

    /// A LoadBalancer Service `default/<name>` with UID `uid` and one TCP
    /// port, with whatever annotations make this provider build its load
    /// balancer.
    fn service(&self, name: &str, uid: &str) -> Service;

    /// A Service another controller serves, for which the provider answers
    /// `ImplementedElsewhere`; `None` when the provider claims every
    /// LoadBalancer Service.
    fn foreign_service(&self, name: &str, uid: &str) -> Option<Service> {
        let _ = (name, uid);
        None
    }

    /// What the cloud holds now, by kind.
    async fn resources(&self) -> Resources;

    /// How many requests the cloud has received so far, whatever their
    /// answer. Used to cancel a call after each of its requests.
    fn requests(&self) -> u64;

    /// While `on`, the cloud answers every request as rate limited, the way
    /// the real cloud does (status, error code, retry headers). The delay it
    /// asks for should be short (a second or so): a provider that honours
    /// it sends nothing until it passes, and the suite retries for about
    /// six seconds once the limit is lifted.
    async fn set_throttled(&self, on: bool);

    /// Resource kinds (as [`Resources`] names them) that a provider makes
    /// per node a load balancer sends to and shares between load balancers,
    /// such as Rancher's external services: their count follows the node
    /// set, and deleting one load balancer of several leaves them for the
    /// others. The load-balancer checks leave these kinds out of their
    /// before-and-after comparisons while other load balancers use them;
    /// the final check, after every load balancer is gone, still counts
    /// them. Empty (the default) for clouds whose load balancers own all
    /// they are made of.
    fn node_kinds(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether the cloud rate-limits requests at all. `Some(reason)` when
    /// it never does (Rancher 1.x's API has no rate limit), and why; the
    /// throttling check is then reported as not applicable instead of
    /// asking the emulator to invent an answer the cloud never gives.
    fn throttle_gap(&self) -> Option<&'static str> {
        None
    }

    /// Whether the cloud marks a route whose target instance is gone as a
    /// blackhole. `Some(reason)` when this emulator cannot, and why; the
    /// check is then reported as not run.
    fn blackhole_gap(&self) -> Option<&'static str> {
        None
    }
}
