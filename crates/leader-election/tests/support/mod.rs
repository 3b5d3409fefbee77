//! Candidates against a test API server, and a sampler that checks how many
//! of them lead at each instant.

#![allow(dead_code, reason = "each test binary uses part of the support code")]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccm_leader_election::{Error, LeaderElectionConfig, LeaderElector, LeaderHandle, LeaseRecord};
use ccm_test_apiserver::TestApiServer;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

/// Short durations keep the tests fast; their ratios are the defaults'.
pub(crate) const LEASE: Duration = Duration::from_secs(3);
pub(crate) const DEADLINE: Duration = Duration::from_secs(2);
pub(crate) const RETRY: Duration = Duration::from_millis(500);

pub(crate) const LEASE_NAME: &str = "cloud-controller-manager";
pub(crate) const NAMESPACE: &str = "kube-system";

const SAMPLE_EVERY: Duration = Duration::from_millis(2);

pub(crate) fn fast_config(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new(LEASE_NAME, NAMESPACE, identity)
        .with_lease_duration(LEASE)
        .with_renew_deadline(DEADLINE)
        .with_retry_period(RETRY)
}

/// One running elector.
#[derive(Debug)]
pub(crate) struct Candidate {
    pub(crate) identity: String,
    pub(crate) handle: LeaderHandle,
    pub(crate) shutdown: CancellationToken,
    pub(crate) task: JoinHandle<Result<(), Error>>,
}

pub(crate) fn spawn(server: &TestApiServer, identity: &str) -> Candidate {
    spawn_with(server, fast_config(identity))
}

pub(crate) fn spawn_with(server: &TestApiServer, config: LeaderElectionConfig) -> Candidate {
    let identity = config.identity.clone();
    let elector = LeaderElector::new(server.client(), config).expect("valid config");
    let handle = elector.handle();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(elector.run(shutdown.clone()));
    Candidate {
        identity,
        handle,
        shutdown,
        task,
    }
}

/// Polls until one of `candidates` leads; its index and how long it took.
pub(crate) async fn wait_for_leader(
    candidates: &[Candidate],
    within: Duration,
) -> Option<(usize, Duration)> {
    let start = Instant::now();
    while start.elapsed() < within {
        if let Some(index) = candidates
            .iter()
            .position(|candidate| candidate.handle.is_leader())
        {
            return Some((index, start.elapsed()));
        }
        sleep(SAMPLE_EVERY).await;
    }
    None
}

/// The Lease's record as the API server has it.
pub(crate) async fn lease_record(server: &TestApiServer) -> anyhow::Result<Option<LeaseRecord>> {
    let leases: Api<Lease> = Api::namespaced(server.client(), NAMESPACE);
    let lease = leases.get_opt(LEASE_NAME).await?;
    Ok(lease.map(|lease| LeaseRecord::from_spec(lease.spec.as_ref())))
}

/// Samples every watched handle's fencing check every couple of
/// milliseconds, in its own task, until [`finish`](Self::finish).
#[derive(Debug)]
pub(crate) struct Sampler {
    watched: Arc<Mutex<Vec<(String, LeaderHandle)>>>,
    stop: CancellationToken,
    task: JoinHandle<Report>,
}

/// What the sampler saw.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) samples: usize,
    pub(crate) samples_with_a_leader: usize,
    /// The identities leading together, each time more than one did.
    pub(crate) overlaps: Vec<Vec<String>>,
    /// When each identity that led was first seen leading.
    pub(crate) first_led: BTreeMap<String, Instant>,
}

impl Sampler {
    pub(crate) fn start() -> Self {
        let watched: Arc<Mutex<Vec<(String, LeaderHandle)>>> = Arc::default();
        let stop = CancellationToken::new();
        let task = tokio::spawn(sample(watched.clone(), stop.clone()));
        Self {
            watched,
            stop,
            task,
        }
    }

    pub(crate) fn watch(&self, candidate: &Candidate) {
        let entry = (candidate.identity.clone(), candidate.handle.clone());
        self.watched.lock().unwrap().push(entry);
    }

    pub(crate) async fn finish(self) -> Report {
        self.stop.cancel();
        self.task.await.expect("sampler panicked")
    }
}

async fn sample(
    watched: Arc<Mutex<Vec<(String, LeaderHandle)>>>,
    stop: CancellationToken,
) -> Report {
    let mut report = Report::default();
    while !stop.is_cancelled() {
        let leaders: Vec<String> = watched
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, handle)| handle.is_leader())
            .map(|(identity, _)| identity.clone())
            .collect();
        report.samples += 1;
        for leader in &leaders {
            report
                .first_led
                .entry(leader.clone())
                .or_insert_with(Instant::now);
        }
        if !leaders.is_empty() {
            report.samples_with_a_leader += 1;
        }
        if leaders.len() > 1 {
            report.overlaps.push(leaders);
        }
        sleep(SAMPLE_EVERY).await;
    }
    report
}
