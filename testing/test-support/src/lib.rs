//! What the end-to-end suites share: the Kubernetes API a test runs against
//! ([`ApiServer`]: the in-memory test API server, or a real kube-apiserver
//! and etcd started for the test), the real control plane itself
//! ([`ControlPlane`]), the CCM binary as a child process ([`Launch`],
//! [`Ccm`]), bounded waiting ([`eventually`]) and waiting for the controllers
//! to have nothing left to do ([`Quiescence`]), and the fixtures every suite builds
//! ([`uninitialized_node`], [`load_balancer_service`], [`unique`]), and
//! call budgets against upstream's counts ([`budget`]), and certificate
//! requests crafted byte by byte ([`csr_craft`]) with Go's own reading of
//! them ([`csr_referee`]).
//!
//! Start with [`ApiServer::with_nodes`]: it reads [`APISERVER_ENV`], so the
//! same test body runs on both servers.

mod api;
pub mod budget;
mod ccm;
mod certificates;
pub mod conditions;
mod control_plane;
mod counters;
pub mod csr_craft;
pub mod csr_referee;
mod listener;
pub mod monitoring;
mod objects;
mod pki;
mod quiescence;
mod rbac;
mod wait;

pub use api::{
    APISERVER_ENV, ApiServer, Credentials, MemoryServer, kubectl, kubectl_command, kubectl_path,
};
pub use ccm::{Ccm, Launch, forbidden_lines, tail};
pub use certificates::{
    KUBELET_SERVING_SIGNER, SERVING_USAGES, kubelet_serving_csr, kubelet_serving_request,
};
pub use control_plane::{
    AUDITED_TOKEN, AUDITED_USER, ControlPlane, ETCD_ENV, KUBE_APISERVER_ENV, free_port,
    kubeconfig_yaml,
};
pub use counters::{cloud_call_count, reconcile_count, sample};
pub use listener::RecordingListener;
pub use objects::{
    LOAD_BALANCER_FINALIZER, UNINITIALIZED, annotation, csi_persistent_volume,
    has_load_balancer_finalizer, has_taint, ingress_hostnames, ingress_ips, load_balancer_service,
    ready_condition, service_key, uninitialized_node, unique, wants_load_balancer,
};
pub use quiescence::{Quiescence, QuiescenceError};
pub use rbac::RBAC_DIR_ENV;
pub use wait::{Outcome, eventually};
