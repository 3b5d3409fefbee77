//! Leader election on a coordination.k8s.io/v1 Lease, with a fencing check.
//!
//! Start with [`LeaderElector`]: build it from a [`kube::Client`] and a
//! [`LeaderElectionConfig`], take a [`LeaderHandle`] from it, and run it with
//! a shutdown token. The handle says whether this process leads
//! ([`LeaderHandle::watch`] to start and stop work, [`LeaderHandle::fence`]
//! before every cloud mutation). [`LeaderHandle::always_leader`] stands in
//! when leader election is off.
//!
//! The behaviour is client-go's `leaderelection` package with a `LeaseLock`:
//! the same defaults (lease duration 15 s, renew deadline 10 s, retry period
//! 2 s), the same Lease fields, optimistic concurrency on `resourceVersion`,
//! release on shutdown, and the same clock rule: a candidate judges expiry by
//! when *it* last saw the Lease change, on its own clock, never by comparing
//! the Lease's timestamps with its clock. That decision is a pure function,
//! [`decision::decide`].
//!
//! ```no_run
//! # async fn example(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use ccm_leader_election::{LeaderElectionConfig, LeaderElector};
//! use tokio_util::sync::CancellationToken;
//!
//! let config = LeaderElectionConfig::new("cloud-controller-manager", "kube-system", "host-1_4f2a");
//! let elector = LeaderElector::new(client, config)?;
//! let leader = elector.handle();
//! let shutdown = CancellationToken::new();
//! let election = tokio::spawn(elector.run(shutdown.clone()));
//!
//! // In the code that changes the cloud:
//! if leader.fence().is_ok() {
//!     // ...one mutation...
//! }
//!
//! // On SIGTERM, once that code has stopped: release the Lease.
//! shutdown.cancel();
//! election.await??;
//! # Ok(())
//! # }
//! ```

pub mod decision;

mod config;
mod elector;
mod handle;
mod record;
mod store;

pub use config::{ConfigError, JITTER_FACTOR, LeaderElectionConfig};
pub use elector::{Error, LeaderElector};
pub use handle::{LeaderHandle, NotLeader};
pub use record::LeaseRecord;
pub use store::LeaseApiError;
