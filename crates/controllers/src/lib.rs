//! The cloud-agnostic controllers of a cloud-controller-manager.
//!
//! Start with [`start`]: given a [`ControllerId`], the shared
//! [`ccm_runtime::Context`] and [`ControllerSettings`], it sets the
//! controller up and returns the future that runs it, or says why the
//! controller is off (its cloud capability is absent, or the flags turn it
//! off). `persistentvolume-label` labels PersistentVolumes with their
//! cloud volume's zone and region; `kubelet-serving-csr-approver` (ours,
//! off unless named) approves kubelet serving certificates whose names the
//! cloud confirms. Controllers never call a cloud SDK: they use the provider through
//! the context's metered, fenced wrapper.
//!
//! [`start_provider_controller`] starts a controller a provider adds
//! (`tagging`, `nodeipam`): the behaviour is here and cloud-agnostic, the
//! cloud's part behind the capability its kind needs.
//!
//! [`start_service_observer`] is the one controller that is not upstream's:
//! it runs whenever the provider offers a `ServiceObserver`, feeding it the
//! whole set of Services.

mod calls;
mod csr_approver;
mod deadline;
mod id;
mod node;
mod node_lifecycle;
mod nodeipam;
mod provider_controllers;
mod provider_shared;
mod pv_label;
mod route;
mod service;
mod service_observer;
mod settings;
mod tagging;
mod taints;
mod writes;

use futures::future::BoxFuture;

use ccm_runtime::Context;

/// The kubelet-serving CSR approver's reading of `spec.request`, for the
/// fuzz targets (`testing/fuzz-targets`): not an API.
#[doc(hidden)]
pub mod fuzzing {
    /// What a request asks for, as the approver reads it: common names,
    /// organizations, DNS names, IP addresses (as text), e-mails, URIs and
    /// other names.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Reading {
        pub common_names: Vec<String>,
        pub organizations: Vec<String>,
        pub dns_names: Vec<String>,
        pub ip_addresses: Vec<String>,
        pub emails: Vec<String>,
        pub uris: Vec<String>,
        pub other_names: Vec<String>,
    }

    /// Reads `pem` as the approver does.
    ///
    /// # Errors
    /// Why the approver would deny it as unreadable.
    pub fn kubelet_serving_request(pem: &[u8]) -> Result<Reading, String> {
        let requested = crate::csr_approver::read_request(pem)?;
        Ok(Reading {
            common_names: requested.common_names,
            organizations: requested.organizations,
            dns_names: requested.dns_names,
            ip_addresses: requested
                .ip_addresses
                .iter()
                .map(ToString::to_string)
                .collect(),
            emails: requested.emails,
            uris: requested.uris,
            other_names: requested.other_names,
        })
    }
}

pub use id::ControllerId;
pub use nodeipam::dual_stack_cluster_cidr;
pub use provider_controllers::start_provider_controller;
pub use provider_shared::{ProviderControllerSettings, QueueRate};
pub use route::{check_cluster_cidrs, route_goes_to_node};
pub use service::spec::{has_finalizer, wants_load_balancer};
pub use service_observer::{SERVICE_OBSERVER, start_service_observer};
pub use settings::ControllerSettings;

/// The result of starting one controller.
pub enum Started {
    /// The controller runs as long as this future is polled (until the
    /// context's shutdown).
    Running(BoxFuture<'static, ()>),
    /// The controller is off, and why (logged once by the app).
    Off(String),
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Running(_) => f.write_str("Running"),
            Self::Off(reason) => f.debug_tuple("Off").field(reason).finish(),
        }
    }
}

/// Sets up controller `id` and returns how it runs.
///
/// Call it for every enabled controller before the context's informers
/// start: controllers subscribe to the shared informers here.
pub fn start(id: ControllerId, ctx: &Context, settings: &ControllerSettings) -> Started {
    match id {
        ControllerId::CloudNode => node::start(ctx, settings),
        ControllerId::CloudNodeLifecycle => node_lifecycle::start(ctx, settings),
        ControllerId::Service => service::start(ctx, settings),
        ControllerId::Route => route::start(ctx, settings),
        ControllerId::PersistentVolumeLabel => pv_label::start(ctx, settings),
        ControllerId::KubeletServingCsrApprover => csr_approver::start(ctx, settings),
    }
}

/// Runs `reconcile` over `informer`'s objects with the framework's run loop
/// (unbounded concurrency), as the [`Started`] a controller's `start`
/// answers: off, with why, when the informer already runs.
fn run_controller<K, F, Fut>(
    name: &'static str,
    informer: &ccm_runtime::Informer<K>,
    triggers: ccm_runtime::controller::Triggers<K>,
    ctx: &Context,
    reconcile: F,
) -> Started
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    F: Fn(std::sync::Arc<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ccm_runtime::Action, ccm_runtime::ReconcileError>> + Send + 'static,
{
    use futures::FutureExt;
    let config = ccm_runtime::controller::ControllerConfig {
        name,
        concurrency: 0,
    };
    match ccm_runtime::controller::run(
        config,
        informer,
        triggers,
        ctx.metrics.clone(),
        ctx.shutdown.clone(),
        reconcile,
    ) {
        Ok(future) => Started::Running(future.boxed()),
        Err(err) => Started::Off(err.to_string()),
    }
}
