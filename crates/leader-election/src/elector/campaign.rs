//! The election loop: acquire, renew within the deadline, release on
//! stop, as client-go's `LeaderElector` does.

use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use tokio::time::{Instant, sleep, sleep_until, timeout, timeout_at};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, debug, info, info_span, warn};

use super::Error;
use crate::decision::{Decision, Observed, decide, released};
use crate::store::{LeaseApiError, LeaseEvent, LeaseStore};
use crate::{JITTER_FACTOR, LeaderElectionConfig, LeaderHandle, LeaseRecord};

/// Conflicts tolerated while releasing: each means a write raced ours.
const RELEASE_ATTEMPTS: usize = 5;

/// One candidate's election loop over a [`LeaseStore`]: the logic of
/// client-go's `LeaderElector`, minus the callbacks.
#[derive(Debug)]
pub(crate) struct Campaign<S> {
    store: S,
    config: LeaderElectionConfig,
    handle: LeaderHandle,
    /// The record last seen and when it was first seen.
    observed: Option<Observed>,
    /// The Lease last read or written, whose `resourceVersion` the next
    /// update carries.
    lease: Option<Lease>,
}

/// How one try at acquiring or renewing ended.
#[derive(Debug)]
enum Attempt {
    /// This candidate holds the Lease; the write that proved it was sent at
    /// `sent_at`.
    Leading { sent_at: Instant },
    /// Another candidate holds the Lease and it has not expired.
    Held { holder: String },
    /// A request failed, or another candidate won the round (409).
    Failed(LeaseApiError),
}

impl<S: LeaseStore> Campaign<S> {
    pub(crate) fn new(store: S, config: LeaderElectionConfig, handle: LeaderHandle) -> Self {
        Self {
            store,
            config,
            handle,
            observed: None,
            lease: None,
        }
    }

    pub(crate) async fn run(mut self, shutdown: CancellationToken) -> Result<(), Error> {
        let lease = self.config.lease_key();
        let span = info_span!("leader_election", %lease, identity = %self.config.identity);
        async {
            let result = match self.acquire(&shutdown).await {
                Some(sent_at) => self.lead(sent_at, &shutdown).await,
                None => Ok(()),
            };
            self.handle.step_down();
            result
        }
        .instrument(span)
        .await
    }

    /// Tries every retry period (jittered) until this candidate holds the
    /// Lease, returning when its winning write was sent; `None` on shutdown.
    ///
    /// Between tries it watches the Lease: a release, or an expiry falling
    /// before the next try, brings the next try forward.
    async fn acquire(&mut self, shutdown: &CancellationToken) -> Option<Instant> {
        info!("attempting to acquire leader lease");
        let mut changes = self.store.watch();
        while !shutdown.is_cancelled() {
            let attempt = tokio::select! {
                biased;
                () = shutdown.cancelled() => {
                    // The interrupted write may have reached the API server.
                    self.release().await;
                    return None;
                }
                attempt = timeout(self.config.renew_deadline, self.try_acquire_or_renew()) => {
                    attempt
                }
            };
            match attempt {
                Ok(Attempt::Leading { sent_at }) => return Some(sent_at),
                Ok(Attempt::Held { holder }) => {
                    debug!(%holder, "leader lease held by another candidate");
                }
                Ok(Attempt::Failed(
                    error @ (LeaseApiError::Conflict { .. } | LeaseApiError::AlreadyExists { .. }),
                )) => {
                    debug!(%error, "another candidate won this round");
                }
                Ok(Attempt::Failed(error)) => {
                    warn!(error = %chain(&error), "failed to acquire leader lease");
                }
                Err(_) => {
                    let after = self.config.renew_deadline;
                    warn!(?after, "attempt to acquire leader lease timed out");
                }
            }
            if !self.wait_for_next_try(&mut changes, shutdown).await {
                return None;
            }
        }
        None
    }

    /// Sleeps until the next try: a jittered retry period, or sooner when
    /// the Lease becomes acquirable before. Returns false on shutdown.
    async fn wait_for_next_try(
        &mut self,
        changes: &mut BoxStream<'static, LeaseEvent>,
        shutdown: &CancellationToken,
    ) -> bool {
        let tried_at = Instant::now();
        let retry_at = tried_at + jittered(self.config.retry_period, random_unit());
        let acted_on = self.observed.clone();
        loop {
            let wake_at = self.next_try_at(acted_on.as_ref(), tried_at, retry_at);
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return false,
                () = sleep_until(wake_at) => return true,
                Some(event) = changes.next() => self.observe_event(event),
            }
        }
    }

    /// `retry_at`, brought forward to the Lease's takeover time when that
    /// falls after the last try, or when a watch event changed the Lease
    /// since (a release makes it acquirable at once). A takeover time the
    /// last try already acted on does not count, so a failing write is not
    /// retried in a tight loop.
    fn next_try_at(
        &self,
        acted_on: Option<&Observed>,
        tried_at: Instant,
        retry_at: Instant,
    ) -> Instant {
        let changed = self.observed.as_ref() != acted_on;
        let takeover_at = self
            .observed
            .as_ref()
            .map_or(tried_at, Observed::takeover_at);
        if changed || takeover_at > tried_at {
            retry_at.min(takeover_at)
        } else {
            retry_at
        }
    }

    fn observe_event(&mut self, event: LeaseEvent) {
        let now = Instant::now();
        match event {
            LeaseEvent::Applied(lease) => self.observe(Some(*lease), now),
            LeaseEvent::Deleted => self.observe(None, now),
        }
    }

    /// Renews every retry period while leading. Returns `Ok` after releasing
    /// the Lease on shutdown, or the error saying why leadership was lost.
    async fn lead(&mut self, sent_at: Instant, shutdown: &CancellationToken) -> Result<(), Error> {
        let renew_deadline = self.config.renew_deadline;
        let mut valid_until = sent_at + renew_deadline;
        self.handle
            .set_lease_uid(self.lease.as_ref().and_then(|l| l.metadata.uid.clone()));
        self.handle.lead_until(valid_until);
        info!("acquired leader lease");
        let mut last_error = None;
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return self.resign().await,
                () = sleep(self.config.retry_period) => {}
            }
            if Instant::now() >= valid_until {
                self.handle.count_renew_failure();
                return Err(self.lost(last_error));
            }
            let attempt = tokio::select! {
                biased;
                () = shutdown.cancelled() => return self.resign().await,
                attempt = timeout_at(valid_until, self.try_acquire_or_renew()) => attempt,
            };
            match attempt {
                Ok(Attempt::Leading { sent_at }) => {
                    valid_until = sent_at + renew_deadline;
                    self.handle.lead_until(valid_until);
                    last_error = None;
                }
                Ok(Attempt::Held { holder }) => {
                    self.handle.step_down();
                    warn!(%holder, "leader lease taken over by another candidate");
                    return Err(Error::LeaseTakenOver {
                        lease: self.config.lease_key(),
                        holder,
                    });
                }
                Ok(Attempt::Failed(error)) => {
                    let error_chain = chain(&error);
                    warn!(error = %error_chain, "failed to renew leader lease; retrying");
                    self.handle.count_renew_failure();
                    last_error = Some(error);
                }
                Err(_) => {
                    self.handle.count_renew_failure();
                    return Err(self.lost(last_error));
                }
            }
        }
    }

    fn lost(&self, last_error: Option<LeaseApiError>) -> Error {
        self.handle.step_down();
        let error = Error::LeadershipLost {
            lease: self.config.lease_key(),
            renew_deadline: self.config.renew_deadline,
            last_error,
        };
        warn!(error = %chain(&error), "stopped leading");
        error
    }

    async fn resign(&mut self) -> Result<(), Error> {
        self.handle.step_down();
        self.release().await;
        Ok(())
    }

    /// Gives the Lease up if this candidate holds it, within the renew
    /// deadline. A failure is only logged: the Lease then expires by itself.
    async fn release(&mut self) {
        match timeout(self.config.renew_deadline, self.try_release()).await {
            Ok(Ok(true)) => info!("released leader lease"),
            Ok(Ok(false)) => {
                debug!("leader lease not held; nothing to release");
            }
            Ok(Err(error)) => {
                warn!(error = %chain(&error), "failed to release leader lease; it will expire");
            }
            Err(_) => {
                warn!("releasing leader lease timed out; it will expire");
            }
        }
    }

    async fn try_release(&mut self) -> Result<bool, LeaseApiError> {
        let identity = self.config.identity.clone();
        let held = self
            .observed
            .as_ref()
            .is_some_and(|observed| observed.record.holder() == Some(&identity));
        // Our last write is most likely current; a conflict means it is not.
        let mut last_written = self.lease.take().filter(|_| held);
        let mut conflict = None;
        for _ in 0..RELEASE_ATTEMPTS {
            let lease = match last_written.take() {
                Some(lease) => lease,
                None => match self.store.get().await? {
                    Some(lease) => lease,
                    None => return Ok(false),
                },
            };
            let record = LeaseRecord::from_spec(lease.spec.as_ref());
            let Some(release) = released(&record, &identity, wall_now()) else {
                return Ok(false);
            };
            match self.store.replace(&lease, &release).await {
                Ok(lease) => {
                    self.remember_write(lease, Instant::now());
                    return Ok(true);
                }
                Err(error @ LeaseApiError::Conflict { .. }) => conflict = Some(error),
                Err(error) => return Err(error),
            }
        }
        Err(conflict.unwrap_or_else(|| LeaseApiError::Conflict {
            lease: self.config.lease_key(),
        }))
    }

    /// One round of client-go's `tryAcquireOrRenew`.
    async fn try_acquire_or_renew(&mut self) -> Attempt {
        if let Some(sent_at) = self.try_renew_optimistically().await {
            return Attempt::Leading { sent_at };
        }
        let mut rereads_left = 1;
        loop {
            let current = match self.store.get().await {
                Ok(current) => current,
                Err(error) => return Attempt::Failed(error),
            };
            let now = Instant::now();
            self.observe(current, now);
            let record = match decide(self.observed.as_ref(), &self.config, now, wall_now()) {
                Decision::Wait { holder, .. } => return Attempt::Held { holder },
                Decision::Acquire(record) | Decision::Renew(record) => record,
            };
            let sent_at = Instant::now();
            let written = match &self.lease {
                Some(lease) => self.store.replace(lease, &record).await,
                None => self.store.create(&record).await,
            };
            match written {
                Ok(lease) => {
                    self.remember_write(lease, sent_at);
                    return Attempt::Leading { sent_at };
                }
                Err(LeaseApiError::AlreadyExists { .. }) if rereads_left > 0 => {
                    debug!("leader lease created by another candidate first; reading it");
                    rereads_left -= 1;
                }
                Err(error) => return Attempt::Failed(error),
            }
        }
    }

    /// client-go's fast path: the leader updates the Lease it last wrote
    /// without reading it first. `None` when not leading or when the update
    /// fails, and the caller reads the Lease.
    async fn try_renew_optimistically(&mut self) -> Option<Instant> {
        let now = Instant::now();
        let observed = self.observed.as_ref()?;
        let lease = self.lease.as_ref()?;
        if observed.record.holder() != Some(self.config.identity.as_str())
            || now >= observed.expires_at()
        {
            return None;
        }
        let Decision::Renew(record) = decide(Some(observed), &self.config, now, wall_now()) else {
            return None;
        };
        match self.store.replace(lease, &record).await {
            Ok(lease) => {
                self.remember_write(lease, now);
                Some(now)
            }
            Err(error) => {
                debug!(error = %chain(&error), "optimistic renewal failed; reading the lease");
                None
            }
        }
    }

    fn observe(&mut self, current: Option<Lease>, now: Instant) {
        self.observed = current.as_ref().map(|lease| {
            let record = LeaseRecord::from_spec(lease.spec.as_ref());
            Observed::update(self.observed.take(), record, now)
        });
        self.lease = current;
    }

    fn remember_write(&mut self, lease: Lease, sent_at: Instant) {
        self.observed = Some(Observed {
            record: LeaseRecord::from_spec(lease.spec.as_ref()),
            at: sent_at,
        });
        self.lease = Some(lease);
    }
}

/// `period` stretched by up to [`JITTER_FACTOR`] times itself, `unit` in
/// `[0, 1]` choosing how much (client-go's `wait.Jitter`).
fn jittered(period: Duration, unit: f64) -> Duration {
    period.mul_f64(1.0 + JITTER_FACTOR * unit.clamp(0.0, 1.0))
}

/// A number in `[0, 1)`, different on each call.
fn random_unit() -> f64 {
    fastrand::f64()
}

/// Now, at the microsecond precision the API server keeps (`MicroTime`).
fn wall_now() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_microsecond(now.as_microsecond()).unwrap_or(now)
}

/// An error and its causes on one line, for logs.
fn chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_between_one_and_two_point_two_periods() {
        let period = Duration::from_secs(2);
        assert_eq!(jittered(period, 0.0), period);
        assert_eq!(jittered(period, 1.0), Duration::from_millis(4_400));
        assert_eq!(jittered(period, 7.0), Duration::from_millis(4_400));
        for _ in 0..1_000 {
            let unit = random_unit();
            assert!((0.0..=1.0).contains(&unit), "{unit}");
        }
    }

    #[test]
    fn random_units_differ() {
        let draws: Vec<f64> = (0..16).map(|_| random_unit()).collect();
        let distinct = draws.iter().filter(|draw| **draw != draws[0]).count();
        assert!(distinct >= 14, "{draws:?}");
    }
}
