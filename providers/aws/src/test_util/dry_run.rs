//! [`DryRun`]: a request fence that behaves as `--dry-run`'s, for tests of
//! what the provider describes to it.

use ccm_cloud_provider::fence::{Request, RequestFence};
use parking_lot::Mutex;

/// One request as the provider described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// The operation: `CreateListener`.
    pub operation: String,
    /// Its arguments, as one line.
    pub detail: String,
}

/// A dry run's fence: lets every read through, refuses every mutation and
/// records it as the plan. Run the provider inside
/// `ccm_cloud_provider::fence::scope(Arc::new(DryRun::default()), ...)`.
#[derive(Debug, Default)]
pub struct DryRun {
    reads: Mutex<Vec<Described>>,
    planned: Mutex<Vec<Described>>,
}

impl DryRun {
    /// The reads let through, in order.
    pub fn reads(&self) -> Vec<Described> {
        self.reads.lock().clone()
    }

    /// The mutations refused, in order.
    pub fn planned(&self) -> Vec<Described> {
        self.planned.lock().clone()
    }
}

impl RequestFence for DryRun {
    /// A plain check passes: only a described mutation is refused.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    fn check_request(&self, request: &Request<'_>) -> Result<(), String> {
        let described = Described {
            operation: request.operation.to_owned(),
            detail: request.detail.to_owned(),
        };
        if request.mutates {
            self.planned.lock().push(described);
            Err("a dry run plans mutations instead of sending them".into())
        } else {
            self.reads.lock().push(described);
            Ok(())
        }
    }

    fn dry_run(&self) -> bool {
        true
    }
}
