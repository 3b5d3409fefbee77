//! Keeping the process under AWS's request limits: a client-side rate
//! limit per kind of call (the workspace's [`RateLimiter`]), and upstream's
//! process-wide backoff after `RequestLimitExceeded`.
//!
//! Each action has a bucket of its own, as AWS keeps them ("each API is
//! evaluated individually"), sized by its kind ([`RateLimits::default`]:
//! AWS's documented EC2 buckets for non-mutating and mutating actions). A
//! hundred route creates then no longer wait for the tokens describe calls
//! left, nor the instances' `ModifyInstanceAttribute` for the creates'.
//! (One bucket for every call paced 200 route mutations at 20 per second:
//! 5.7 s for 100 routes, against upstream's 2.4 s.)
//!
//! A call the rate limit holds back for a moment waits for its token, up
//! to [`MAX_PACING_WAIT`], as client-go's and the AWS SDK's limiters do:
//! failing it at once made a reconcile of a dozen calls start over from its
//! first describe, and a few Services retrying every few milliseconds kept
//! the bucket empty for good (a livelock the AWS crash-point suite found).
//! Upstream's backoff after `RequestLimitExceeded` (seconds to a minute),
//! and a pacing wait beyond the bound, fail at once with the time to wait,
//! which the interface surfaces as `CloudError::Throttled`, so the
//! controller requeues the object instead of holding a worker.
//!
//! Route work runs in the bulk lane ([`bulk`]): while any other call waits
//! for a token, bulk calls let it go first. A pass creating hundreds of
//! routes keeps the bucket empty for seconds; without the lanes a Service's
//! load balancer queued behind it (8.5 s to its first ingress at 100
//! nodes, against upstream's 0.64 s). A bulk call waits for its token up to
//! [`MAX_BULK_PACING_WAIT`]: a batch keeps a bounded number of creates in
//! flight, each waiting its turn at the action's refill rate, and a create
//! that is only paced is not a failure to report (with the two-second
//! bound, 500 routes past AWS's burst of 200 made hundreds of
//! `FailedToCreateRoute` Warnings and `NetworkUnavailable` flips).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ccm_cloud_provider::{InvalidRateLimit, RateLimiter};
use parking_lot::Mutex;
use tokio::time::Instant;

/// A client-side limit on one kind of call, across EC2 and ELBv2.
///
/// `qps` must be a positive number and `burst` at least 1, or the
/// provider's `initialize` fails.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Calls per second, sustained.
    pub qps: f64,
    /// Calls that may go out at once after a quiet period.
    pub burst: u32,
}

impl Default for RateLimit {
    /// AWS's own bucket for EC2 describe calls: 20 per second, bursts of 100.
    fn default() -> Self {
        Self {
            qps: 20.0,
            burst: 100,
        }
    }
}

/// The client-side limit of each action: reads (`Describe*`, `Get*`,
/// `List*`) and mutations (every other action), each action in a bucket of
/// its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimits {
    /// Calls that only read.
    pub reads: RateLimit,
    /// Calls that create, change or delete.
    pub mutations: RateLimit,
}

impl Default for RateLimits {
    /// AWS's documented EC2 buckets: non-mutating actions 20 per second in
    /// bursts of 100, mutating actions 5 per second in bursts of 200.
    fn default() -> Self {
        Self {
            reads: RateLimit::default(),
            mutations: RateLimit {
                qps: 5.0,
                burst: 200,
            },
        }
    }
}

impl RateLimits {
    /// The same limit for every action, each in its own bucket.
    pub fn uniform(limit: RateLimit) -> Self {
        Self {
            reads: limit,
            mutations: limit,
        }
    }
}

/// Which limit an action's bucket has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An action that only reads.
    Read,
    /// An action that creates, changes or deletes.
    Mutation,
}

impl Kind {
    /// The kind of the AWS action `operation` (`DescribeInstances`, ...).
    pub(crate) fn of(operation: &str) -> Self {
        if ["Describe", "Get", "List"]
            .iter()
            .any(|verb| operation.starts_with(verb))
        {
            Self::Read
        } else {
            Self::Mutation
        }
    }
}

/// Upstream's backoff shape (`CrossRequestRetryDelay`): counts decay by
/// `DECAY_FRACTION` every `DECAY_INTERVAL`; the delay is `MAX_DELAY` times the
/// recent fraction of throttled calls, ignored below `MIN_ERROR_FRACTION`.
const DECAY_INTERVAL: Duration = Duration::from_secs(20);
const DECAY_FRACTION: f64 = 0.8;
const MAX_DELAY: Duration = Duration::from_secs(60);
const MIN_ERROR_FRACTION: f64 = 0.1;
/// Bias so that one throttle in a quiet process does not apply the full delay.
const INITIAL_REQUESTS: f64 = 4.0;
/// The longest a call waits for the rate limit's next token before it
/// fails as throttled.
pub(crate) const MAX_PACING_WAIT: Duration = Duration::from_secs(2);
/// The longest a call of the bulk lane waits for its token: a batch's
/// creates in flight, at a mutating action's refill rate (5 per second),
/// wait a few seconds each.
pub(crate) const MAX_BULK_PACING_WAIT: Duration = Duration::from_secs(60);
/// The shortest pause between two tries for a token.
const MIN_PAUSE: Duration = Duration::from_millis(1);

/// Why a call may not go out now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// The rate limit's bucket is empty for this long.
    Pace(Duration),
    /// Upstream's backoff after AWS throttled calls is in force this long.
    Backoff(Duration),
}

tokio::task_local! {
    /// Set while a call of the bulk lane runs.
    static BULK: ();
}

/// Runs `work` in the bulk lane: each of its calls waits while a call of
/// any other work waits for a token.
pub(crate) async fn bulk<F: Future>(work: F) -> F::Output {
    BULK.scope((), work).await
}

fn in_bulk_lane() -> bool {
    BULK.try_with(|()| ()).is_ok()
}

/// The shared admission state of every call the provider makes.
#[derive(Debug)]
pub(crate) struct Throttle {
    limits: RateLimits,
    /// Each action's bucket, made at its first call.
    buckets: Mutex<BTreeMap<&'static str, Arc<Bucket>>>,
    state: Mutex<State>,
}

/// One kind's rate limit.
#[derive(Debug)]
struct Bucket {
    limit: RateLimiter,
    /// Calls outside the bulk lane waiting for one of its tokens.
    first_waiting: AtomicUsize,
}

impl Bucket {
    fn new(limit: RateLimit) -> Result<Self, InvalidRateLimit> {
        Ok(Self {
            limit: RateLimiter::new(limit.qps, limit.burst)?,
            first_waiting: AtomicUsize::new(0),
        })
    }
}

/// Counts a call outside the bulk lane as waiting while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Upstream's backoff after AWS throttled calls.
#[derive(Debug)]
struct State {
    requests: f64,
    throttled: f64,
    decayed: Instant,
    not_before: Option<Instant>,
}

impl Throttle {
    /// Admission under `limits`, with no backoff in force.
    ///
    /// # Errors
    /// [`InvalidRateLimit`] when a limit is not a rate a limiter can keep.
    pub(crate) fn new(limits: RateLimits) -> Result<Self, InvalidRateLimit> {
        // Refused here rather than at an action's first call.
        Bucket::new(limits.reads)?;
        Bucket::new(limits.mutations)?;
        Ok(Self {
            limits,
            buckets: Mutex::default(),
            state: Mutex::new(State {
                requests: INITIAL_REQUESTS,
                throttled: 0.0,
                decayed: Instant::now(),
                not_before: None,
            }),
        })
    }

    /// `operation`'s bucket.
    fn bucket(&self, operation: &'static str) -> Arc<Bucket> {
        let mut buckets = self.buckets.lock();
        let bucket = buckets.entry(operation).or_insert_with(|| {
            let limit = match Kind::of(operation) {
                Kind::Read => self.limits.reads,
                Kind::Mutation => self.limits.mutations,
            };
            Arc::new(Bucket::new(limit).expect("new() accepted both limits"))
        });
        Arc::clone(bucket)
    }

    /// Lets one `DescribeInstances` go out now, or says how long to wait.
    #[cfg(test)]
    pub(crate) fn admit(&self) -> Result<(), Duration> {
        self.try_admit(&self.bucket("DescribeInstances"))
            .map_err(|(Hold::Pace(d) | Hold::Backoff(d))| d)
    }

    fn try_admit(&self, bucket: &Bucket) -> Result<(), Hold> {
        let now = Instant::now();
        let mut s = self.lock();
        if let Some(until) = s.not_before {
            if now < until {
                return Err(Hold::Backoff(until - now));
            }
            s.not_before = None;
        }
        bucket.limit.try_acquire().map_err(Hold::Pace)?;
        s.decay(now);
        s.requests += 1.0;
        Ok(())
    }

    /// Lets one call of action `operation` go out, waiting up to `max_wait`
    /// for its bucket's next token; or says how long to wait when the wait
    /// would be longer or upstream's backoff is in force.
    ///
    /// In the bulk lane ([`bulk`]) a call also waits while any other call
    /// waits for a token of the same bucket, so that other work never
    /// queues behind it, and waits up to [`MAX_BULK_PACING_WAIT`] when that
    /// is longer than `max_wait`.
    pub(crate) async fn admit_within(
        &self,
        operation: &'static str,
        max_wait: Duration,
    ) -> Result<(), Duration> {
        let bulk = in_bulk_lane();
        let max_wait = if bulk {
            max_wait.max(MAX_BULK_PACING_WAIT)
        } else {
            max_wait
        };
        let deadline = Instant::now() + max_wait;
        let bucket = self.bucket(operation);
        let mut waiting = None;
        loop {
            let hold = if bulk && bucket.first_waiting.load(Ordering::SeqCst) > 0 {
                // The next token is another lane's: try again after it.
                Err(Hold::Pace(Duration::from_secs_f64(
                    1.0 / bucket.limit.qps(),
                )))
            } else {
                self.try_admit(&bucket)
            };
            match hold {
                Ok(()) => return Ok(()),
                Err(Hold::Pace(wait)) if Instant::now() + wait <= deadline => {
                    if !bulk && waiting.is_none() {
                        waiting = Some(Waiting::new(&bucket.first_waiting));
                    }
                    tokio::time::sleep(wait.max(MIN_PAUSE)).await;
                }
                Err(Hold::Pace(wait) | Hold::Backoff(wait)) => return Err(wait),
            }
        }
    }

    /// Records that AWS throttled a call and returns how long every call
    /// must now wait: at least a second, at most upstream's 60.
    pub(crate) fn throttled(&self) -> Duration {
        let now = Instant::now();
        let mut s = self.lock();
        s.decay(now);
        s.throttled += 1.0;
        let fraction = if s.requests > 0.5 {
            s.throttled / s.requests
        } else {
            1.0
        };
        let delay = if fraction < MIN_ERROR_FRACTION {
            Duration::ZERO
        } else {
            // Whole seconds, as upstream rounds.
            Duration::from_secs((MAX_DELAY.as_secs_f64() * fraction.min(1.0)) as u64)
        };
        let delay = delay.max(Duration::from_secs(1));
        let until = now + delay;
        s.not_before = Some(s.not_before.map_or(until, |current| current.max(until)));
        delay
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, State> {
        self.state.lock()
    }
}

impl State {
    fn decay(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.decayed);
        if elapsed > DECAY_INTERVAL {
            let intervals = elapsed.as_secs_f64() / DECAY_INTERVAL.as_secs_f64();
            let factor = DECAY_FRACTION.powf(intervals);
            self.requests *= factor;
            self.throttled *= factor;
            self.decayed = now;
        }
    }
}

#[cfg(test)]
mod tests;
