//! The provider conformance suite: what the controllers rely on from every
//! [`CloudProvider`], checked against a provider and its emulator.
//!
//! A provider's tests build a [`Subject`] (the provider, a second provider
//! for another cluster in the same account, and an [`Emulator`] handle on
//! the fake cloud behind both) and call [`run`], or [`assert_conforms`]:
//!
//! ```ignore
//! #[tokio::test]
//! async fn conforms() {
//!     let subject = my_subject().await;
//!     ccm_provider_conformance::assert_conforms(&subject).await;
//! }
//! ```
//!
//! The checks, each named in the [`Report`]:
//! - **instances**: a missing instance is `Ok(false)` or `InstanceNotFound`,
//!   never another error; batches answer in order and length with
//!   per-node errors; provider IDs round-trip; a full batch is answered
//!   whole, and no dearer than one node.
//! - **load balancers**: ensure twice gives one status and creates nothing
//!   the second time; update with another node set; delete of an absent one
//!   is `Ok`; another Service's and another cluster's survive a delete; a
//!   Service the provider does not own is `ImplementedElsewhere` and costs
//!   nothing.
//! - **routes**: create twice creates once; delete of an absent one is
//!   `Ok`; another cluster's routes are neither listed nor deleted; a route
//!   whose instance is gone is listed as a blackhole.
//! - **errors**: the cloud's rate limiting is `Throttled` with a delay; an
//!   ensure or route create cancelled after each of its cloud requests
//!   leaves nothing that the next call cannot finish, and nothing behind
//!   after a delete.
//!
//! Capabilities a provider does not offer (its accessor is `None`) are
//! reported as not applicable, never passed.

mod emulator;
mod errors;
mod instances;
mod load_balancers;
mod report;
mod routes;
mod steps;

use std::sync::Arc;

use ccm_cloud_provider::CloudProvider;

pub use emulator::{Emulator, Resources};
pub use report::{Outcome, Report};

/// What the suite runs against.
#[derive(Debug, Clone)]
pub struct Subject {
    /// The provider under test, already [initialized](CloudProvider::initialize).
    pub provider: Arc<dyn CloudProvider>,
    /// The cluster name `provider` is called with.
    pub cluster: String,
    /// The same provider configured for another cluster in the same
    /// account, already initialized: its resources must survive everything
    /// `provider` does.
    pub neighbour: Arc<dyn CloudProvider>,
    /// The cluster name `neighbour` is called with.
    pub neighbour_cluster: String,
    /// The fake cloud behind both.
    pub emulator: Arc<dyn Emulator>,
}

/// Runs every check against `subject`, one after the other.
///
/// Each check uses fresh instances and Services of its own, so the emulator
/// may hold anything beforehand; counts are compared before and after.
pub async fn run(subject: &Subject) -> Report {
    let mut report = Report::default();
    instances::run(subject, &mut report).await;
    load_balancers::run(subject, &mut report).await;
    routes::run(subject, &mut report).await;
    errors::run(subject, &mut report).await;
    report
}

/// [`run`], then panics listing every failed check.
///
/// # Panics
/// When a check fails; the message lists them all, and the whole report.
pub async fn assert_conforms(subject: &Subject) {
    let report = run(subject).await;
    assert!(
        report.failures().is_empty(),
        "the provider does not conform:\n{report}"
    );
    assert!(report.passed() > 0, "the suite checked nothing:\n{report}");
}
