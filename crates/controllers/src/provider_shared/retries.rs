//! Upstream's retry limit on a provider controller's nodes: a node whose
//! work fails [`MAX_RETRIES`] times is given up on until it changes, each
//! failure counted under upstream's work-item error metric. A delay the
//! cloud asked for (throttling) is no failure.

use std::collections::HashMap;

use ccm_runtime::{Action, ReconcileError, Retry};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use parking_lot::Mutex;

use super::{RETRIES_EXHAUSTED, TOTAL_ERRORS, WorkItemErrors};

/// Upstream's `maxRequeuingCount`: retries before a node is given up on.
pub(crate) const MAX_RETRIES: u32 = 9;

/// Failures per node since its last success, and the metric counting them.
#[derive(Debug)]
pub(crate) struct RetryBudget {
    errors: WorkItemErrors,
    /// Node UID → failures since its last success.
    failures: Mutex<HashMap<String, u32>>,
}

impl RetryBudget {
    pub(crate) fn new(errors: WorkItemErrors) -> Self {
        Self {
            errors,
            failures: Mutex::default(),
        }
    }

    /// What `result` of the work on `node` (of `provider_id`) becomes: a
    /// success clears its count; a failure is counted and retried, until
    /// the one after [`MAX_RETRIES`], which is logged (`failing`, such as
    /// "tagging failed") and waits for the node to change.
    pub(crate) fn settle(
        &self,
        node: &Node,
        provider_id: &str,
        result: Result<Action, ReconcileError>,
        failing: &str,
    ) -> Result<Action, ReconcileError> {
        let uid = node.uid().unwrap_or_default();
        match result {
            Ok(action) => {
                self.failures.lock().remove(&uid);
                Ok(action)
            }
            Err(err) if matches!(err.retry(), Retry::After(_)) => Err(err),
            Err(err) => {
                let failures = {
                    let mut failures = self.failures.lock();
                    let n = failures.entry(uid.clone()).or_default();
                    *n += 1;
                    *n
                };
                if failures > MAX_RETRIES {
                    self.failures.lock().remove(&uid);
                    self.errors.record(RETRIES_EXHAUSTED, provider_id);
                    tracing::error!(node = %node.name_any(), error = %err, "{failing} {MAX_RETRIES} times; not retried until the node changes");
                    return Ok(Action::await_change());
                }
                self.errors.record(TOTAL_ERRORS, provider_id);
                Err(err)
            }
        }
    }
}
