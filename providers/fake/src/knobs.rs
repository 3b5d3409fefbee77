//! What a test sets on the fake beyond faults: which capabilities it
//! offers, and a hook that sees every call as it is made.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

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
}

/// What runs at each call, after it is recorded and before it is answered.
type Hook = Arc<dyn Fn(&Call) + Send + Sync>;

pub(crate) struct Knobs {
    offered: BTreeSet<Capability>,
    /// The service observer's resync period.
    pub(crate) resync: Duration,
    pub(crate) hook: Option<Hook>,
}

impl Default for Knobs {
    fn default() -> Self {
        use Capability::{Instances, Inventory, LoadBalancer, Routes, Volumes};
        Self {
            offered: BTreeSet::from([Instances, LoadBalancer, Routes, Volumes, Inventory]),
            resync: Duration::MAX,
            hook: None,
        }
    }
}

impl fmt::Debug for Knobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Knobs")
            .field("offered", &self.offered)
            .field("resync", &self.resync)
            .field("hook", &self.hook.is_some())
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

    /// Whether the fake offers `capability` now.
    pub(crate) fn offers(&self, capability: Capability) -> bool {
        self.inner.knobs.lock().offered.contains(&capability)
    }

    /// The hook to run, taken out of the lock.
    pub(crate) fn hook(&self) -> Option<Hook> {
        self.inner.knobs.lock().hook.clone()
    }
}
