//! An in-memory Lease with resourceVersion checks, a watch and per-candidate
//! faults, so the election loop can be tested on a paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::ObjectMeta;
use kube::core::Status;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::LeaseRecord;
use crate::store::{LeaseApiError, LeaseEvent, LeaseStore};

const KEY: &str = "kube-system/ccm";

/// The shared Lease every candidate's store reads and writes.
#[derive(Debug, Clone)]
pub(super) struct FakeLeases {
    server: Arc<Mutex<Server>>,
    changes: Arc<watch::Sender<Option<Lease>>>,
}

#[derive(Debug, Default)]
struct Server {
    lease: Option<Lease>,
    resource_version: u64,
    writes: usize,
}

/// What a candidate's requests run into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    /// Requests succeed.
    None,
    /// Every request is answered 500.
    InternalError,
    /// Creates and updates are answered 500; reads succeed.
    WritesFail,
    /// Requests never complete.
    Hang,
}

/// One candidate's connection to [`FakeLeases`].
#[derive(Debug, Clone)]
pub(super) struct FakeLeaseStore {
    leases: FakeLeases,
    fault: Arc<Mutex<Fault>>,
    latency: Duration,
    requests: Arc<AtomicUsize>,
}

impl FakeLeases {
    pub(super) fn new() -> Self {
        Self {
            server: Arc::default(),
            changes: Arc::new(watch::channel(None).0),
        }
    }

    /// A store whose requests each take `latency`.
    pub(super) fn store(&self, latency: Duration) -> FakeLeaseStore {
        FakeLeaseStore {
            leases: self.clone(),
            fault: Arc::new(Mutex::new(Fault::None)),
            latency,
            requests: Arc::default(),
        }
    }

    /// The Lease's record, `None` when absent.
    pub(super) fn record(&self) -> Option<LeaseRecord> {
        let server = self.server.lock();
        server
            .lease
            .as_ref()
            .map(|lease| LeaseRecord::from_spec(lease.spec.as_ref()))
    }

    /// How many creates and updates succeeded.
    pub(super) fn writes(&self) -> usize {
        self.server.lock().writes
    }

    /// Writes `record` as another client would, bumping the resourceVersion.
    pub(super) fn overwrite(&self, record: &LeaseRecord) {
        let mut server = self.server.lock();
        let mut lease = server.lease.clone().unwrap_or_default();
        record.apply_to(lease.spec.get_or_insert_with(LeaseSpec::default));
        self.store_lease(&mut server, lease);
    }

    fn store_lease(&self, server: &mut Server, mut lease: Lease) -> Lease {
        server.resource_version += 1;
        server.writes += 1;
        lease.metadata.resource_version = Some(server.resource_version.to_string());
        server.lease = Some(lease.clone());
        self.changes.send_replace(Some(lease.clone()));
        lease
    }
}

impl FakeLeaseStore {
    pub(super) fn set_fault(&self, fault: Fault) {
        *self.fault.lock() = fault;
    }

    /// How many requests this store has started.
    pub(super) fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }

    /// Waits out the latency, then applies the fault.
    async fn request(&self, verb: &'static str) -> Result<(), LeaseApiError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(self.latency).await;
        let fault = *self.fault.lock();
        match fault {
            Fault::None => Ok(()),
            Fault::WritesFail if verb == "get" => Ok(()),
            Fault::InternalError | Fault::WritesFail => Err(LeaseApiError::Request {
                verb,
                lease: KEY.into(),
                source: kube::Error::Api(
                    Status::failure("injected", "InternalError")
                        .with_code(500)
                        .boxed(),
                ),
            }),
            Fault::Hang => std::future::pending().await,
        }
    }
}

impl LeaseStore for FakeLeaseStore {
    async fn get(&self) -> Result<Option<Lease>, LeaseApiError> {
        self.request("get").await?;
        Ok(self.leases.server.lock().lease.clone())
    }

    async fn create(&self, record: &LeaseRecord) -> Result<Lease, LeaseApiError> {
        self.request("create").await?;
        let mut server = self.leases.server.lock();
        if server.lease.is_some() {
            return Err(LeaseApiError::AlreadyExists { lease: KEY.into() });
        }
        let mut spec = LeaseSpec::default();
        record.apply_to(&mut spec);
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some("ccm".into()),
                namespace: Some("kube-system".into()),
                uid: Some("lease-uid-1".into()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        };
        Ok(self.leases.store_lease(&mut server, lease))
    }

    async fn replace(&self, current: &Lease, record: &LeaseRecord) -> Result<Lease, LeaseApiError> {
        self.request("update").await?;
        let mut server = self.leases.server.lock();
        let stored_version = server
            .lease
            .as_ref()
            .and_then(|lease| lease.metadata.resource_version.clone());
        if stored_version.is_none() || stored_version != current.metadata.resource_version {
            return Err(LeaseApiError::Conflict { lease: KEY.into() });
        }
        let mut lease = current.clone();
        record.apply_to(lease.spec.get_or_insert_with(LeaseSpec::default));
        Ok(self.leases.store_lease(&mut server, lease))
    }

    fn watch(&self) -> BoxStream<'static, LeaseEvent> {
        let mut changes = self.leases.changes.subscribe();
        // Like a watcher's initial list: the current state comes first.
        changes.mark_changed();
        futures::stream::unfold(changes, |mut changes| async move {
            changes.changed().await.ok()?;
            let event = match changes.borrow_and_update().clone() {
                Some(lease) => LeaseEvent::Applied(Box::new(lease)),
                None => LeaseEvent::Deleted,
            };
            Some((event, changes))
        })
        .boxed()
    }
}
