//! Shadow mode (`--dry-run`): every controller runs as usual, reads from
//! the API server and the cloud, and plans instead of changing anything.
//!
//! A [`Plan`] holds one entry per planned operation (controller, object,
//! operation): `already in place` when the provider made the call's reads
//! and found nothing to change, `would change` with the mutations it would
//! have sent, `unknown` when the provider cannot tell reads from mutations
//! (it is then never called for a mutation). An entry is logged, and
//! counted in `dry_run_planned_operations_total`, when it is new or its
//! verdict or difference changes, so a reconcile retried every few minutes
//! does not repeat itself. `/debug/plan` serves [`Plan::summary`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use ccm_cloud_provider::fence::{Request, RequestFence};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::Serialize;

use crate::Metrics;

/// What a planned operation would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The cloud (or the cluster) is already in the desired shape: the
    /// running CCM did it, or nothing needed doing.
    AlreadyInPlace,
    /// This process would have changed something: see the difference.
    WouldChange,
    /// The provider cannot say without sending the mutation, so it was not
    /// called.
    Unknown,
}

impl Verdict {
    /// The words the log line and the summary use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AlreadyInPlace => "already in place",
            Self::WouldChange => "would change",
            Self::Unknown => "unknown: the provider cannot plan this call",
        }
    }
}

/// One planned operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The controller that would make it (`service`, `route`, ...).
    pub controller: String,
    /// The object it is for (`namespace/name`, a node, a route).
    pub object: String,
    /// The operation (`ensure_load_balancer`, `patch service status`).
    pub operation: String,
    /// What it would do.
    pub verdict: Verdict,
    /// The requests or writes it would have sent, one per line.
    pub difference: Vec<String>,
    /// When it was last planned (seconds since the Unix epoch).
    pub planned_at: u64,
}

/// What `/debug/plan` answers.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Entries that would change something.
    pub would_change: usize,
    /// Entries already in place.
    pub already_in_place: usize,
    /// Entries the provider could not plan.
    pub unknown: usize,
    /// Every entry, by controller, object and operation.
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PlannedLabels {
    controller: String,
    operation: String,
}

type Key = (String, String, String);

/// The operations a dry run planned. Cheap to clone; clones share entries.
#[derive(Debug, Clone)]
pub struct Plan {
    entries: Arc<Mutex<BTreeMap<Key, Entry>>>,
    planned: Family<PlannedLabels, Counter>,
}

impl Plan {
    /// An empty plan whose counter is registered in `metrics`.
    pub fn new(metrics: &Metrics) -> Self {
        let planned = Family::<PlannedLabels, Counter>::default();
        metrics.register(|registry| {
            registry.register(
                "dry_run_planned_operations",
                "Operations a dry run (--dry-run) planned instead of making, counted when first planned or when their plan changed",
                planned.clone(),
            );
        });
        Self {
            entries: Arc::default(),
            planned,
        }
    }

    /// Records `verdict` for `operation` on `object`; logs and counts it when
    /// it is new or different from the last plan for the same operation.
    pub fn record(
        &self,
        controller: &str,
        object: &str,
        operation: &str,
        verdict: Verdict,
        difference: Vec<String>,
    ) {
        let key = (
            controller.to_owned(),
            object.to_owned(),
            operation.to_owned(),
        );
        let planned_at = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut entries = self.entries.lock();
        if let Some(entry) = entries.get_mut(&key)
            && entry.verdict == verdict
            && entry.difference == difference
        {
            entry.planned_at = planned_at;
            return;
        }
        tracing::info!(
            controller,
            object,
            operation,
            verdict = verdict.as_str(),
            difference = %difference.join("; "),
            "dry run: {}",
            verdict.as_str()
        );
        self.planned
            .get_or_create(&PlannedLabels {
                controller: controller.to_owned(),
                operation: operation.to_owned(),
            })
            .inc();
        entries.insert(
            key,
            Entry {
                controller: controller.to_owned(),
                object: object.to_owned(),
                operation: operation.to_owned(),
                verdict,
                difference,
                planned_at,
            },
        );
    }

    /// Every entry, and how many of each verdict.
    pub fn summary(&self) -> Summary {
        let entries: Vec<Entry> = self.entries.lock().values().cloned().collect();
        let count = |v: Verdict| entries.iter().filter(|e| e.verdict == v).count();
        Summary {
            would_change: count(Verdict::WouldChange),
            already_in_place: count(Verdict::AlreadyInPlace),
            unknown: count(Verdict::Unknown),
            entries,
        }
    }
}

/// The request fence of one planned provider call: reads go out,
/// mutations are recorded and refused.
#[derive(Debug, Default)]
pub(crate) struct Planner {
    refused: Mutex<Vec<String>>,
}

impl Planner {
    /// The mutations refused so far, each as `operation detail`.
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.refused.lock())
    }
}

/// The reason a planner gives a provider for each refused mutation.
pub(crate) const NOT_SENT: &str = "dry run: planned, not sent";

impl RequestFence for Planner {
    /// Leadership is not a question in a dry run: a body already described
    /// and let through (a read) may be written.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    fn check_request(&self, request: &Request<'_>) -> Result<(), String> {
        if !request.mutates {
            return Ok(());
        }
        let line = if request.detail.is_empty() {
            request.operation.to_owned()
        } else {
            format!("{} {}", request.operation, request.detail)
        };
        self.refused.lock().push(line);
        Err(NOT_SENT.to_owned())
    }

    fn dry_run(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_plan_is_counted_once() {
        let metrics = Metrics::new();
        let plan = Plan::new(&metrics);
        for _ in 0..3 {
            plan.record(
                "service",
                "default/web",
                "ensure_load_balancer",
                Verdict::WouldChange,
                vec!["PUT /x".into()],
            );
        }
        plan.record(
            "service",
            "default/db",
            "ensure_load_balancer",
            Verdict::AlreadyInPlace,
            vec![],
        );
        let summary = plan.summary();
        assert_eq!((summary.would_change, summary.already_in_place), (1, 1));
        let counted = plan
            .planned
            .get_or_create(&PlannedLabels {
                controller: "service".into(),
                operation: "ensure_load_balancer".into(),
            })
            .get();
        assert_eq!(counted, 2, "one per distinct plan, not per retry");
        plan.record(
            "service",
            "default/web",
            "ensure_load_balancer",
            Verdict::WouldChange,
            vec!["PUT /y".into()],
        );
        assert_eq!(summary.entries.len(), 2);
        assert_eq!(
            plan.summary().entries[1].difference,
            vec!["PUT /y".to_owned()]
        );
    }

    #[tokio::test]
    async fn a_planner_lets_reads_out_and_refuses_mutations() {
        let planner = Arc::new(Planner::default());
        let fence: Arc<dyn RequestFence> = planner.clone();
        let answers = ccm_cloud_provider::fence::scope(fence, async {
            let read = ccm_cloud_provider::fence::check_request(Request {
                operation: "DescribeLoadBalancers",
                mutates: false,
                detail: "",
            });
            let write = ccm_cloud_provider::fence::check_request(Request {
                operation: "CreateListener",
                mutates: true,
                detail: "Port=80",
            });
            (read, write, ccm_cloud_provider::fence::dry_run())
        })
        .await;
        assert!(answers.0.is_ok());
        assert!(answers.1.unwrap_err().to_string().contains(NOT_SENT));
        assert!(answers.2, "providers can tell they are in a dry run");
        assert_eq!(planner.take(), vec!["CreateListener Port=80".to_owned()]);
        assert!(
            !ccm_cloud_provider::fence::dry_run(),
            "not outside the scope"
        );
    }
}
