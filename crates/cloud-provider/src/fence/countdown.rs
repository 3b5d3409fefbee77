//! A fence for tests (feature `test-util`): a lease that lapses after a
//! set number of checks, say between the check before a send and the one
//! when the body is written.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::RequestFence;

/// Allows its first `allowed` checks and refuses every later one ("the
/// lease lapsed").
#[derive(Debug)]
pub struct Countdown {
    allowed: usize,
    asked: AtomicUsize,
}

impl Countdown {
    /// A fence that allows `allowed` checks.
    pub fn new(allowed: usize) -> Self {
        Self {
            allowed,
            asked: AtomicUsize::new(0),
        }
    }

    /// How many checks it has answered.
    pub fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

impl RequestFence for Countdown {
    fn check(&self) -> Result<(), String> {
        if self.asked.fetch_add(1, Ordering::SeqCst) < self.allowed {
            Ok(())
        } else {
            Err("the lease lapsed".into())
        }
    }
}
