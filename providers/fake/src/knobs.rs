//! What a test sets on the fake beyond faults: which capabilities it
//! offers, and a hook that sees every call as it is made.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::{Call, FakeCloud};

/// A capability of the provider interface the fake can offer or lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// `CloudProvider::instances`.
    Instances,
    /// `CloudProvider::load_balancer`.
    LoadBalancer,
    /// `CloudProvider::routes`.
    Routes,
    /// `CloudProvider::volumes`.
    Volumes,
    /// `CloudProvider::inventory`.
    Inventory,
    /// `CloudProvider::service_observer`: off until
    /// [`FakeCloud::observe_services`].
    ServiceObserver,
    /// `LoadBalancer::check_service`: without it the fake cannot tell
    /// ownership or validity from the Service alone (`None`).
    ServiceCheck,
    /// `LoadBalancer::load_balancer_health`: without it the fake cannot
    /// tell target health (`Ok(None)`, no call).
    Health,
    /// `LoadBalancer::annotation_schema`: without it the fake warns of an
    /// unknown annotation in the ensure's answer, as a provider without a
    /// schema does.
    AnnotationSchema,
    /// `CloudProvider::instance_tags`: off until
    /// [`FakeCloud::offer_instance_tags`].
    InstanceTags,
    /// `CloudProvider::pod_cidrs`: off until [`FakeCloud::offer_pod_cidrs`].
    PodCidrs,
}

/// Calls waiting out their latency now, and the most at once.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    now: usize,
    most: usize,
}

impl InFlight {
    /// Counts one call in progress until the guard is dropped (also when
    /// the call is cancelled).
    pub(crate) fn enter(knobs: &Mutex<Knobs>) -> impl Drop + '_ {
        let mut held = knobs.lock();
        held.in_flight.now += 1;
        held.in_flight.most = held.in_flight.most.max(held.in_flight.now);
        Leaving(knobs)
    }
}

/// A call in progress, counted out when dropped.
struct Leaving<'a>(&'a Mutex<Knobs>);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        let mut held = self.0.lock();
        held.in_flight.now = held.in_flight.now.saturating_sub(1);
    }
}

/// What runs at each call, after it is recorded and before it is answered.
type Hook = Arc<dyn Fn(&Call) + Send + Sync>;

pub(crate) struct Knobs {
    offered: BTreeSet<Capability>,
    pub(crate) in_flight: InFlight,
    /// The service observer's resync period.
    pub(crate) resync: Duration,
    pub(crate) hook: Option<Hook>,
    /// The node label instance tagging records its tags under.
    pub(crate) tagged_label: &'static str,
}

impl Default for Knobs {
    fn default() -> Self {
        use Capability::{
            AnnotationSchema, Health, Instances, Inventory, LoadBalancer, Routes, ServiceCheck,
            Volumes,
        };
        Self {
            offered: BTreeSet::from([
                Instances,
                LoadBalancer,
                Routes,
                Volumes,
                Inventory,
                ServiceCheck,
                Health,
                AnnotationSchema,
            ]),
            resync: Duration::MAX,
            hook: None,
            in_flight: InFlight::default(),
            tagged_label: "",
        }
    }
}

impl fmt::Debug for Knobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Knobs")
            .field("offered", &self.offered)
            .field("resync", &self.resync)
            .field("hook", &self.hook.is_some())
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

impl FakeCloud {
    /// Offers `capability` or, with `offered` false, lacks it, as a
    /// provider without it does: from the next time it is asked.
    pub fn set_capability(&self, capability: Capability, offered: bool) {
        let mut knobs = self.inner.knobs.lock();
        if offered {
            knobs.offered.insert(capability);
        } else {
            knobs.offered.remove(&capability);
        }
    }

    /// Lacks every capability: a provider with nothing but a name.
    pub fn offer_nothing(&self) {
        self.inner.knobs.lock().offered.clear();
    }

    /// Offers a service observer resyncing every `period`; its
    /// `sync_services` calls are recorded ([`crate::Operation::SyncServices`])
    /// and answer the errors [`FakeCloud::fail_next`] queues.
    pub fn observe_services(&self, period: Duration) {
        let mut knobs = self.inner.knobs.lock();
        knobs.offered.insert(Capability::ServiceObserver);
        knobs.resync = period;
    }

    /// Runs `hook` at each call from now on, after the call is recorded and
    /// before it is answered (when the test's clock says the call was made).
    pub fn on_call(&self, hook: impl Fn(&Call) + Send + Sync + 'static) {
        self.inner.knobs.lock().hook = Some(Arc::new(hook));
    }

    /// The most calls in progress at once so far, counted while they wait
    /// out the latency [`FakeCloud::set_latency`] sets (none without it).
    pub fn most_in_flight(&self) -> usize {
        self.inner.knobs.lock().in_flight.most
    }

    /// Whether the fake offers `capability` now.
    pub(crate) fn offers(&self, capability: Capability) -> bool {
        self.inner.knobs.lock().offered.contains(&capability)
    }

    /// The hook to run, taken out of the lock.
    pub(crate) fn hook(&self) -> Option<Hook> {
        self.inner.knobs.lock().hook.clone()
    }
}
