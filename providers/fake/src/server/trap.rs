//! The crash trap: the chaos suites kill a replica right after the k-th
//! mutation of a scenario. The trap lets that mutation through, then holds
//! its answer and every later call, so the replica cannot learn of it or
//! act again before it is killed.

use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::watch;

/// How long a trapped call waits at most: a suite that never releases the
/// trap does not leave calls hanging for good.
const HOLD_AT_MOST: Duration = Duration::from_secs(300);

#[derive(Debug, Default, Clone, Copy, Serialize)]
pub(crate) struct TrapStatus {
    /// Whether a mutation is awaited.
    armed: bool,
    /// Whether the awaited mutation was applied: the cloud is frozen.
    tripped: bool,
    /// Successful mutations since the server started.
    mutations: u64,
}

#[derive(Debug)]
pub(crate) struct Trap {
    state: Mutex<(Option<u64>, u64)>,
    /// `true` while tripped.
    frozen: watch::Sender<bool>,
}

impl Default for Trap {
    fn default() -> Self {
        Self {
            state: Mutex::new((None, 0)),
            frozen: watch::Sender::new(false),
        }
    }
}

impl Trap {
    /// Awaits the `k`-th successful mutation from now (`k` ≥ 1).
    pub(crate) fn arm(&self, k: u64) {
        let mut state = self.state.lock();
        state.0 = Some(state.1 + k.max(1));
        self.frozen.send_replace(false);
    }

    /// Disarms the trap and lets held calls answer.
    pub(crate) fn release(&self) {
        self.state.lock().0 = None;
        self.frozen.send_replace(false);
    }

    pub(crate) fn status(&self) -> TrapStatus {
        let (target, mutations) = *self.state.lock();
        TrapStatus {
            armed: target.is_some(),
            tripped: *self.frozen.borrow(),
            mutations,
        }
    }

    /// Counts one applied mutation; trips the trap when it is the awaited one.
    pub(crate) fn count_mutation(&self) {
        let mut state = self.state.lock();
        state.1 += 1;
        if state.0 == Some(state.1) {
            self.frozen.send_replace(true);
        }
    }

    /// Waits while the trap is tripped (at most [`HOLD_AT_MOST`]).
    pub(crate) async fn hold(&self) {
        let mut frozen = self.frozen.subscribe();
        let _ = tokio::time::timeout(HOLD_AT_MOST, frozen.wait_for(|f| !*f)).await;
    }
}
