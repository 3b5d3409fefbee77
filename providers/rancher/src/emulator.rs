//! An emulator of Rancher 1.x's Cattle `v2-beta` API, serving over HTTP on
//! 127.0.0.1 what the provider reads and writes: hosts and their addresses,
//! the `lb.instance.image` setting, stacks, load balancers and external
//! services, with Cattle's envelope (links, state-dependent actions,
//! collections with filters and marker pagination, error bodies), its
//! lifecycle transitions and injectable faults (feature `test-util`).
//!
//! Start with [`CattleEmulator::start`]; point the provider at
//! [`CattleEmulator::url`] with [`ACCESS_KEY`] and [`SECRET_KEY`]. Its
//! checks are written from Cattle's behaviour as go-rancher and upstream's
//! CCM see it, not borrowed from the provider, so a provider bug is not
//! mirrored here.
//!
//! Transitions are lazy: each object keeps the state it is heading for and
//! when it is due, and every request (and [`CattleEmulator::snapshot`])
//! first settles what is due. Time is tokio's clock, so a test with a
//! paused clock moves the emulator's transitions too.

mod answer;
mod faults;
mod filters;
mod fixtures;
mod render;
mod routes;
mod scope;
mod server;
mod state;
#[cfg(test)]
mod tests;
mod transitions;
mod writes;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::AbortHandle;
use tokio::time::Instant;

pub use faults::Faults;
use server::Shared;
use state::{HOST_PREFIX, Store};

use crate::cattle::PortRule;

/// The access key the emulator accepts (basic auth user).
pub const ACCESS_KEY: &str = "emulator-access";
/// The secret key the emulator accepts (basic auth password).
pub const SECRET_KEY: &str = "emulator-secret";
/// The environment (project) ID in the URL.
pub const PROJECT: &str = "1a5";
/// The value of the `lb.instance.image` setting.
pub const LB_IMAGE: &str = "rancher/lb-service-haproxy:v0.7.9";

/// How long a transition (`registering`, `activating`...) takes, and how
/// long an active load balancer waits for its public endpoints, unless set.
const DEFAULT_DELAY: Duration = Duration::from_millis(20);

/// A running emulator. Clones share it; the server stops when the last
/// clone is dropped.
#[derive(Clone)]
pub struct CattleEmulator {
    shared: Arc<Shared>,
    url: String,
    _server: Arc<ServerTask>,
}

/// Aborts the server task when dropped.
#[derive(Debug)]
struct ServerTask(AbortHandle);

impl Drop for ServerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl std::fmt::Debug for CattleEmulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CattleEmulator")
            .field("url", &self.url)
            .field("requests", &self.requests())
            .finish_non_exhaustive()
    }
}

/// A host [`CattleEmulator::add_host`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRef {
    /// Its ID, such as `1h1`.
    pub id: String,
    /// Its UUID: the instance ID in a node's provider ID.
    pub uuid: String,
}

/// One request the emulator received, whatever its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: String,
    /// The path after the project base, such as `/loadbalancerservices/1s3`
    /// (the whole path for a request outside the project).
    pub path: String,
    /// The `action` query parameter, for an action.
    pub action: Option<String>,
    /// The query string as sent, without `?`.
    pub query: String,
    /// The status answered.
    pub status: u16,
}

/// What exists at one moment: stacks and services neither `removing` nor
/// `removed`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The stacks.
    pub stacks: Vec<StackView>,
    /// The load balancers.
    pub load_balancers: Vec<LoadBalancerView>,
    /// The external services.
    pub external_services: Vec<ExternalServiceView>,
}

impl Snapshot {
    /// How many load balancers and external services exist:
    /// `{"external-services": m, "load-balancers": n}`, both keys always.
    /// Stacks are not counted: upstream never deletes its stack, so it is
    /// not a leak.
    #[must_use]
    pub fn counts(&self) -> BTreeMap<String, usize> {
        BTreeMap::from([
            ("load-balancers".to_owned(), self.load_balancers.len()),
            ("external-services".to_owned(), self.external_services.len()),
        ])
    }
}

/// A stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackView {
    /// Its ID, such as `1st1`.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its external ID, if it has one.
    pub external_id: Option<String>,
}

/// A load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerView {
    /// Its ID, such as `1s3`.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its state: `registering`, `inactive`, `activating`, `active`...
    pub state: String,
    /// Its stack's ID.
    pub stack_id: String,
    /// `launchConfig.ports`, such as `80:80/tcp`.
    pub ports: Vec<String>,
    /// `lbConfig.portRules`.
    pub port_rules: Vec<PortRule>,
    /// The services it links to (`setservicelinks`), sorted.
    pub linked: Vec<String>,
    /// Its metadata (empty when it has none).
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// Its public endpoints as `ip:port`, once they show.
    pub public_endpoints: Vec<String>,
}

/// An external service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalServiceView {
    /// Its ID, such as `1s2`.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its state.
    pub state: String,
    /// Its stack's ID.
    pub stack_id: String,
    /// `externalIpAddresses`.
    pub ips: Vec<String>,
}

impl CattleEmulator {
    /// Binds 127.0.0.1 on a free port and serves the emulator from a task
    /// on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// When the port cannot be bound.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let base_path = format!("/v2-beta/projects/{PROJECT}");
        let url = format!("http://{addr}{base_path}");
        let shared = Arc::new(Shared {
            base_path,
            store: Mutex::new(Store::new(url.clone(), DEFAULT_DELAY)),
            faults: Mutex::new(Faults::default()),
            requests: AtomicU64::new(0),
            calls: Mutex::new(Vec::new()),
        });
        let task = tokio::spawn(server::serve(Arc::clone(&shared), listener));
        Ok(Self {
            shared,
            url,
            _server: Arc::new(ServerTask(task.abort_handle())),
        })
    }

    /// The project's base URL (`CATTLE_URL`):
    /// `http://127.0.0.1:PORT/v2-beta/projects/1a5`.
    #[must_use]
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Adds an active host with a connected agent and one IP address.
    pub fn add_host(&self, hostname: &str, ip: &str) -> HostRef {
        let mut store = self.shared.store.lock();
        let n = store.add_host(hostname, ip);
        let uuid = store
            .hosts
            .get(&n)
            .map(|h| h.uuid.clone())
            .unwrap_or_default();
        HostRef {
            id: format!("{HOST_PREFIX}{n}"),
            uuid,
        }
    }

    /// Powers the host `uuid` off: `inactive`, agent `disconnected`.
    ///
    /// # Panics
    ///
    /// When no host has that UUID.
    pub fn stop_host(&self, uuid: &str) {
        let mut store = self.shared.store.lock();
        let Some(host) = store.host_by_uuid(uuid) else {
            panic!("stop_host: no host {uuid}");
        };
        host.state = "inactive";
        host.agent_state = "disconnected";
    }

    /// Removes the host `uuid`: `removed`, hidden by `removed_null`.
    ///
    /// # Panics
    ///
    /// When no host has that UUID.
    pub fn remove_host(&self, uuid: &str) {
        let mut store = self.shared.store.lock();
        let Some(host) = store.host_by_uuid(uuid) else {
            panic!("remove_host: no host {uuid}");
        };
        host.state = "removed";
        host.agent_state = "disconnected";
        host.removed.get_or_insert_with(transitions::timestamp);
    }

    /// How long transitions take from now on (default 20 ms).
    pub fn set_transition_delay(&self, d: Duration) {
        self.shared.store.lock().transition_delay = d;
    }

    /// How long a load balancer must have been active before its public
    /// endpoints show (default 20 ms).
    pub fn set_endpoint_delay(&self, d: Duration) {
        self.shared.store.lock().endpoint_delay = d;
    }

    /// Whether `include=ipAddresses` inlines each host's addresses (the
    /// default); off, hosts come without them, as from a server that
    /// ignores `include`.
    pub fn set_honours_include(&self, on: bool) {
        self.shared.store.lock().honours_include = on;
    }

    /// Replaces the faults injected from the next request on.
    pub fn set_faults(&self, faults: Faults) {
        *self.shared.faults.lock() = faults;
    }

    /// How many requests it has received, whatever their answer.
    #[must_use]
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Every request it has answered, oldest first.
    #[must_use]
    pub fn calls(&self) -> Vec<Call> {
        self.shared.calls.lock().clone()
    }

    /// What exists now, with due transitions settled.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        let now = Instant::now();
        let mut store = self.shared.store.lock();
        store.settle(now);
        store.snapshot(now)
    }

    /// Builds, directly (no request is made or logged), what upstream's Go
    /// CCM leaves behind for a Service whose load balancer is `lb_name`:
    /// the stack `kubernetes-loadbalancers` (reused if it exists), one
    /// active external service per hostname, named as upstream names it,
    /// with the host's first address (reused if it exists), and an active
    /// load balancer with `<port>:<port>/tcp` ports, the image setting's
    /// `imageUuid`, one port rule per port and host (`ports` pairs a port
    /// with its node port), links to those external services, no metadata,
    /// and its public endpoints already showing. Returns its ID.
    ///
    /// # Panics
    ///
    /// When a hostname names no live host, or a service called `lb_name`
    /// already exists in the stack.
    pub fn seed_upstream(&self, lb_name: &str, ports: &[(i64, i64)], hostnames: &[&str]) -> String {
        let now = Instant::now();
        let mut store = self.shared.store.lock();
        store.settle(now);
        store.seed_upstream(lb_name, ports, hostnames, now)
    }
}
