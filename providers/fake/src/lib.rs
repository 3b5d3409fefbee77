//! An in-memory cloud for tests, the sandbox and benchmarks.
//!
//! Start with [`FakeCloud`]: it implements every capability of the
//! [`ccm_cloud_provider`] interface — instances, load balancers, routes, volumes
//! (named by CSI volume handles of [`CSI_DRIVER`]) — and
//! records every call in a log tests assert on ([`FakeCloud::calls`]). It can
//! be made to behave like a real cloud: per-call latency, a random error
//! rate, errors injected for the next calls, and a token-bucket rate limit
//! that answers [`CloudError::Throttled`] when exceeded. A test can also take
//! capabilities away ([`FakeCloud::set_capability`]), give it a service
//! observer ([`FakeCloud::observe_services`]) and see each call as it is
//! made ([`FakeCloud::on_call`]), instead of writing a provider of its own.
//!
//! Tests drive it through its methods; the real binary, run as a separate
//! process by the sandbox and the benchmark, reads the same settings and
//! seeded instances from its cloud-config file ([`FakeConfig`]).
//!
//! The cloud can also run as its own process, the `fake-cloud` binary
//! ([`server`]), shared by several CCM replicas whose cloud-config holds
//! only `[server] url = "http://127.0.0.1:PORT"`; each replica then talks to
//! it through [`RemoteCloud`], and the server's call log names the replica
//! behind every call. The chaos suites run it this way.

mod calls;
mod config;
mod factory;
mod faults;
mod health;
mod instance;
mod instances;
mod inventory;
mod knobs;
mod load_balancer;
mod observer;
mod remote;
mod routes;
pub mod server;
mod state;
mod tagging;
mod volumes;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_cloud_provider::{
    CloudError, CloudProvider, Instances, InvalidRateLimit, LoadBalancer, RateLimiter, Route,
    Routes, Volumes,
};
use parking_lot::{Mutex, MutexGuard};

pub use calls::{Call, Operation};
pub use config::{AddressSpec, FakeConfig, InstanceSpec, Settings, VolumeSpec};
pub use factory::FakeProviderFactory;
pub use faults::InjectedError;
pub use instance::{Instance, InstanceState};
pub use inventory::ROUTE;
pub use knobs::Capability;
pub use load_balancer::{
    ANNOTATION_FAIL, ANNOTATION_HEALTH_CHECK_INTERVAL_DEPRECATED, ANNOTATION_HEALTHCHECK_INTERVAL,
    ANNOTATION_HOSTNAME, ANNOTATION_LOAD_BALANCER_ID, ANNOTATION_PANIC, ANNOTATION_TYPE, SCHEMA,
};
pub use remote::RemoteCloud;
pub use remote::wire::{CALLER_HEADER, DRY_RUN_HEADER};
pub use state::{FakeLoadBalancer, ForwardedPort, OwnedRoute};
pub use volumes::{CSI_DRIVER, FakeVolume};

use faults::Faults;
use state::State;

/// The provider name: `--cloud-provider=fake`.
pub const PROVIDER_NAME: &str = "fake";

/// An in-memory cloud. Cloning gives another handle to the same cloud.
#[derive(Debug, Clone)]
pub struct FakeCloud {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    faults: Mutex<Faults>,
    calls: Mutex<Vec<Call>>,
    settings: Mutex<Settings>,
    knobs: Mutex<knobs::Knobs>,
}

impl Default for FakeCloud {
    fn default() -> Self {
        Self::new(FakeConfig::default())
    }
}

impl FakeCloud {
    /// A cloud seeded from `config`.
    ///
    /// # Panics
    /// When `config` holds a rate limit [`FakeConfig::parse`] refuses (a
    /// `rate_limit_qps` that is not a positive number, a zero
    /// `rate_limit_burst`).
    pub fn new(config: FakeConfig) -> Self {
        let mut state = State::default();
        for instance in config.seeded_instances() {
            state.insert_instance(instance);
        }
        for volume in config.seeded_volumes() {
            state.volumes.insert(volume.id.clone(), volume);
        }
        let s = &config.settings;
        let mut faults = Faults::new(s.seed);
        faults.latency = Duration::from_millis(s.latency_ms);
        faults.error_rate = s.error_rate;
        faults.rate_limit = s.rate_limit().map(|(qps, burst)| {
            RateLimiter::new(qps, burst).expect("FakeConfig::parse refuses invalid rate limits")
        });
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                faults: Mutex::new(faults),
                calls: Mutex::new(Vec::new()),
                settings: Mutex::new(config.settings),
                knobs: Mutex::default(),
            }),
        }
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.inner.calls.lock().clone()
    }

    /// How many calls of `op` were made.
    pub fn count(&self, op: Operation) -> usize {
        self.inner
            .calls
            .lock()
            .iter()
            .filter(|c| c.op == op)
            .count()
    }

    /// How many calls changed the cloud.
    pub fn mutation_count(&self) -> usize {
        self.inner
            .calls
            .lock()
            .iter()
            .filter(|c| c.op.is_mutation())
            .count()
    }

    /// Forgets the calls made so far.
    pub fn clear_calls(&self) {
        self.inner.calls.lock().clear();
    }

    /// Adds `latency` to every call from now on.
    pub fn set_latency(&self, latency: Duration) {
        self.inner.faults.lock().latency = latency;
    }

    /// Makes a fraction `rate` (0 to 1) of calls fail with a general error.
    pub fn set_error_rate(&self, rate: f64) {
        self.inner.faults.lock().error_rate = rate.clamp(0.0, 1.0);
    }

    /// Limits calls to `qps` per second with bursts of `burst`; beyond it
    /// they answer Throttled. `None` removes the limit.
    ///
    /// # Errors
    /// [`InvalidRateLimit`] when `qps` is not a positive number or `burst`
    /// is zero; the limit in force is then unchanged.
    pub fn set_rate_limit(&self, limit: Option<(f64, u32)>) -> Result<(), InvalidRateLimit> {
        let limit = limit
            .map(|(qps, burst)| RateLimiter::new(qps, burst))
            .transpose()?;
        self.inner.faults.lock().rate_limit = limit;
        Ok(())
    }

    /// Sets the most nodes one batch call answers for.
    pub fn set_batch_size(&self, size: NonZeroUsize) {
        self.inner.settings.lock().batch_size = size.get();
    }

    /// Answers for any node name with a synthesized running instance.
    pub fn set_auto_instances(&self, on: bool) {
        self.inner.settings.lock().auto_instances = on;
    }

    /// Makes the next `times` calls of `op` (of any operation when `None`)
    /// fail with `error`.
    pub fn fail_next(&self, op: Option<Operation>, error: InjectedError, times: u32) {
        self.inner.faults.lock().inject(op, error, times);
    }

    /// Drops every error still queued by [`FakeCloud::fail_next`].
    pub fn clear_injected(&self) {
        self.inner.faults.lock().clear_injected();
    }

    /// Adds or replaces an instance.
    pub fn add_instance(&self, instance: Instance) {
        self.inner.state.lock().insert_instance(instance);
    }

    /// Adds a running instance named `name`, as [`FakeCloud::set_auto_instances`]
    /// would make it; its provider ID.
    pub fn add_running_instance(&self, name: &str) -> String {
        let instance = self.settings().synthesized_instance(name);
        let provider_id = instance.provider_id.clone();
        self.add_instance(instance);
        provider_id
    }

    /// Makes the instance `name` answer for `provider_id` too, as a node
    /// registered with one instance's ID and later re-pointed at another:
    /// the instance still reports its own ID.
    pub fn answer_for(&self, provider_id: &str, name: &str) {
        self.inner
            .state
            .lock()
            .by_provider_id
            .insert(provider_id.to_owned(), name.to_owned());
    }

    /// Removes an instance entirely, as if it never existed.
    pub fn remove_instance(&self, name: &str) -> Option<Instance> {
        self.inner.state.lock().remove_instance(name)
    }

    /// Sets an instance's state; `false` when there is no such instance.
    pub fn set_instance_state(&self, name: &str, state: InstanceState) -> bool {
        match self.inner.state.lock().instances.get_mut(name) {
            Some(instance) => {
                instance.state = state;
                true
            }
            None => false,
        }
    }

    /// The instance answering to node `name`, if any.
    pub fn instance(&self, name: &str) -> Option<Instance> {
        self.inner.state.lock().instances.get(name).cloned()
    }

    /// All instances, by name.
    pub fn instances(&self) -> Vec<Instance> {
        self.inner
            .state
            .lock()
            .instances
            .values()
            .cloned()
            .collect()
    }

    /// All load balancers, by name.
    pub fn load_balancers(&self) -> Vec<FakeLoadBalancer> {
        self.inner
            .state
            .lock()
            .load_balancers
            .values()
            .cloned()
            .collect()
    }

    /// All routes of every cluster.
    pub fn routes(&self) -> Vec<OwnedRoute> {
        self.inner.state.lock().routes.clone()
    }

    /// Adds or replaces a volume.
    pub fn add_volume(&self, volume: FakeVolume) {
        self.inner
            .state
            .lock()
            .volumes
            .insert(volume.id.clone(), volume);
    }

    /// Removes a volume, as if it never existed.
    pub fn remove_volume(&self, id: &str) -> Option<FakeVolume> {
        self.inner.state.lock().volumes.remove(id)
    }

    /// All volumes, by ID.
    pub fn volumes(&self) -> Vec<FakeVolume> {
        self.inner.state.lock().volumes.values().cloned().collect()
    }

    /// Sets the most volume IDs one `volumes_labels` call answers for.
    pub fn set_volume_batch_size(&self, size: NonZeroUsize) {
        self.inner.settings.lock().volume_batch_size = size.get();
    }

    /// Puts a route in the table directly, as another tool or cluster would.
    pub fn insert_route(&self, cluster_name: &str, route: Route) {
        let owned = OwnedRoute {
            cluster_name: cluster_name.to_owned(),
            route,
        };
        self.inner.state.lock().routes.push(owned);
    }

    /// Records a call, waits the configured latency, and decides whether it
    /// is throttled or fails. Every provider method starts here.
    async fn enter(
        &self,
        op: Operation,
        args: Vec<String>,
        batch_size: Option<usize>,
    ) -> Result<(), CloudError> {
        let call = Call {
            op,
            args,
            batch_size,
        };
        if let Some(hook) = self.hook() {
            hook(&call);
        }
        self.inner.calls.lock().push(call);
        let latency = self.inner.faults.lock().latency;
        if !latency.is_zero() {
            let _in_flight = knobs::InFlight::enter(&self.inner.knobs);
            tokio::time::sleep(latency).await;
        }
        self.inner.faults.lock().admit(op)
    }

    fn settings(&self) -> Settings {
        self.inner.settings.lock().clone()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock()
    }
}

#[async_trait]
impl CloudProvider for FakeCloud {
    fn provider_name(&self) -> &'static str {
        PROVIDER_NAME
    }

    fn instances(&self) -> Option<&dyn Instances> {
        self.offers(Capability::Instances).then_some(self)
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        self.offers(Capability::LoadBalancer).then_some(self)
    }

    fn routes(&self) -> Option<&dyn Routes> {
        self.offers(Capability::Routes).then_some(self)
    }

    fn volumes(&self) -> Option<&dyn Volumes> {
        self.offers(Capability::Volumes).then_some(self)
    }

    fn inventory(&self) -> Option<&dyn ccm_cloud_provider::Inventory> {
        self.offers(Capability::Inventory).then_some(self)
    }

    fn service_observer(&self) -> Option<&dyn ccm_cloud_provider::ServiceObserver> {
        self.offers(Capability::ServiceObserver).then_some(self)
    }

    fn instance_tags(&self) -> Option<&dyn ccm_cloud_provider::InstanceTags> {
        self.offers(Capability::InstanceTags).then_some(self)
    }

    fn pod_cidrs(&self) -> Option<&dyn ccm_cloud_provider::PodCidrs> {
        self.offers(Capability::PodCidrs).then_some(self)
    }

    /// Every change is described before it is made (`load_balancer::describe`).
    fn describes_requests(&self) -> bool {
        true
    }
}
