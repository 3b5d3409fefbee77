//! Fencing each request: a provider operation that makes several cloud
//! requests (AWS's load balancers: describe, create, register, tag…) asks
//! before each one leaves the process whether this process may still change
//! the cloud. The framework runs every mutating provider call inside
//! [`scope`] with its leadership check; a provider calls [`check`]
//! immediately before sending each request (the AWS provider from an SDK
//! interceptor, DigitalOcean's before each HTTP request). Outside a scope,
//! in reads and tests, [`check`] always passes.
//!
//! A provider that describes each request ([`check_request`]: its name,
//! whether it changes the cloud, the arguments that matter) and says so
//! ([`CloudProvider::describes_requests`](crate::CloudProvider::describes_requests))
//! can be run as a dry run (`--dry-run`): inside a [`dry_run`] scope its
//! reads are sent and its mutations are refused and planned instead. A
//! provider that carries on past a refusal (it knows it is a dry run from
//! [`dry_run`]) plans its whole change; one that does not, its first
//! mutation.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::CloudError;

mod body;
pub use body::{FencedBody, Refused};
#[cfg(any(test, feature = "test-util"))]
mod countdown;
#[cfg(any(test, feature = "test-util"))]
pub use countdown::Countdown;

/// One cloud request as its provider describes it to the fence, just
/// before it leaves the process.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The cloud's name for the call: `CreateListener`,
    /// `POST /v2/load_balancers`.
    pub operation: &'a str,
    /// Whether it changes the cloud (false for describes, gets and lists).
    pub mutates: bool,
    /// The arguments that matter, as one line, for a dry run's plan; never
    /// a credential.
    pub detail: &'a str,
}

/// The leadership check a scope carries.
pub trait RequestFence: Send + Sync + std::fmt::Debug {
    /// `Err` with the reason when this process must not change the cloud now.
    ///
    /// # Errors
    /// The reason, when this process must not send a cloud request now.
    fn check(&self) -> Result<(), String>;

    /// [`RequestFence::check`] for a described request; a dry run's fence
    /// lets reads through and refuses (and records) mutations.
    ///
    /// # Errors
    /// The reason, when this request must not be sent.
    fn check_request(&self, request: &Request<'_>) -> Result<(), String> {
        let _ = request;
        self.check()
    }

    /// Whether mutations in this scope are planned, not sent.
    fn dry_run(&self) -> bool {
        false
    }
}

tokio::task_local! {
    static FENCE: Arc<dyn RequestFence>;
}

/// How soon a request refused by the fence is retried: by then the process
/// has either renewed its lease or exited.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// Runs `call` with `fence` consulted by every [`check`] inside it.
pub async fn scope<F: Future>(fence: Arc<dyn RequestFence>, call: F) -> F::Output {
    FENCE.scope(fence, call).await
}

/// Whether the current task may send a cloud request now: call it
/// immediately before each request leaves the process.
///
/// # Errors
/// [`CloudError::Retry`] naming the reason when the scope's fence refuses.
pub fn check() -> Result<(), CloudError> {
    match FENCE.try_with(|fence| fence.check()) {
        Ok(Err(reason)) => Err(CloudError::Retry {
            after: RETRY_AFTER,
            reason: format!("refusing to send a cloud request: {reason}"),
        }),
        Ok(Ok(())) | Err(_) => Ok(()),
    }
}

/// [`check`] for a described `request`: call it immediately before each
/// request leaves the process, in place of [`check`], so that a dry run
/// can tell reads from mutations.
///
/// # Errors
/// [`CloudError::Retry`] naming the reason when the scope's fence refuses
/// (a mutation, in a dry run).
pub fn check_request(request: Request<'_>) -> Result<(), CloudError> {
    match FENCE.try_with(|fence| fence.check_request(&request)) {
        Ok(Err(reason)) => Err(CloudError::Retry {
            after: RETRY_AFTER,
            reason: format!("refusing to send {}: {reason}", request.operation),
        }),
        Ok(Ok(())) | Err(_) => Ok(()),
    }
}

/// Whether the current task runs in a dry run: its mutations are planned,
/// not sent. A provider whose one call both reads and changes (the fake
/// cloud's idempotent ensure) reads first in a dry run, so that the plan
/// can say whether the change is already in place.
pub fn dry_run() -> bool {
    FENCE.try_with(|fence| fence.dry_run()).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[derive(Debug, Default)]
    struct Switch(AtomicBool);

    impl RequestFence for Switch {
        fn check(&self) -> Result<(), String> {
            if self.0.load(Ordering::SeqCst) {
                Err("not the leader".into())
            } else {
                Ok(())
            }
        }
    }

    #[tokio::test]
    async fn a_check_inside_a_scope_asks_its_fence_each_time() {
        let switch = Arc::new(Switch::default());
        let fence: Arc<dyn RequestFence> = switch.clone();
        let answers = scope(fence, async {
            let first = check();
            switch.0.store(true, Ordering::SeqCst);
            tokio::task::yield_now().await;
            (first, check())
        })
        .await;
        assert!(answers.0.is_ok());
        let refused = answers.1.unwrap_err();
        assert!(matches!(refused, CloudError::Retry { .. }), "{refused:?}");
        assert!(refused.to_string().contains("not the leader"), "{refused}");
    }

    #[test]
    fn outside_a_scope_every_check_passes() {
        assert!(check().is_ok());
    }
}
