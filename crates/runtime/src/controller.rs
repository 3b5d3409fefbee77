//! Runs one kube-runtime `Controller` with the framework's error policy,
//! metrics and shutdown.

use std::collections::HashSet;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kube::Resource;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::ObjectRef;
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::FailureBackoff;
use crate::error::{ReconcileError, Retry};
use crate::informer::Informer;
use crate::metrics::{ControllerLabels, Metrics, ReconcileLabels};

/// How one controller runs.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// The controller's ID (`service`, `cloud-node`, ...): used in metrics
    /// and logs.
    pub name: &'static str,
    /// The most reconciles running at once; 0 is unbounded.
    pub concurrency: u16,
}

/// Extra reasons to reconcile, besides changes to the objects themselves.
pub struct Triggers<K: Resource<DynamicType = ()> + 'static> {
    /// Reconcile these objects.
    pub objects: Option<BoxStream<'static, ObjectRef<K>>>,
    /// Reconcile every cached object.
    pub all: Option<BoxStream<'static, ()>>,
}

impl<K: Resource<DynamicType = ()>> Default for Triggers<K> {
    fn default() -> Self {
        Self {
            objects: None,
            all: None,
        }
    }
}

impl<K: Resource<DynamicType = ()>> Debug for Triggers<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Triggers")
            .field("objects", &self.objects.is_some())
            .field("all", &self.all.is_some())
            .finish()
    }
}

struct Runner<K: Resource<DynamicType = ()> + 'static, F> {
    config: ControllerConfig,
    reconcile: F,
    backoff: FailureBackoff<ObjectRef<K>>,
    metrics: Metrics,
    waiting: Arc<Mutex<HashSet<ObjectRef<K>>>>,
}

/// Runs `reconcile` for every object of `informer` that changes, and for
/// the extra `triggers`, until `shutdown`.
///
/// # Guarantees
/// - An object is never reconciled twice at once; at most
///   `config.concurrency` reconciles run together.
/// - A failed reconcile is retried as its [`ReconcileError::retry`] says:
///   exponential backoff (5 s to 300 s) per object, reset by a success; the
///   exact delay a provider asked for; or not until the object changes.
/// - Reconciles, their duration and result, and the number of objects
///   waiting are recorded in `metrics`.
///
/// # Errors
/// The informer must not be running yet (see [`Informer::subscribe`]).
pub fn run<K, F, Fut>(
    config: ControllerConfig,
    informer: &Informer<K>,
    triggers: Triggers<K>,
    metrics: Metrics,
    shutdown: CancellationToken,
    reconcile: F,
) -> Result<impl Future<Output = ()> + Send + 'static, crate::InformerError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    ObjectRef<K>: Hash + Eq,
    F: Fn(Arc<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, ReconcileError>> + Send + 'static,
{
    let waiting: Arc<Mutex<HashSet<ObjectRef<K>>>> = Arc::default();
    let depth = metrics
        .queue_depth
        .get_or_create(&ControllerLabels {
            controller: config.name.into(),
        })
        .clone();
    let subscriber = {
        let waiting = waiting.clone();
        informer.subscribe()?.inspect(move |obj| {
            let mut waiting = waiting.lock().unwrap_or_else(PoisonError::into_inner);
            waiting.insert(ObjectRef::from(obj.as_ref()));
            depth.set(waiting.len() as i64);
        })
    };
    let mut controller = Controller::for_shared_stream(subscriber, informer.store())
        .with_config(controller::Config::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown.cancelled_owned());
    if let Some(objects) = triggers.objects {
        controller = controller.reconcile_on(objects);
    }
    if let Some(all) = triggers.all {
        controller = controller.reconcile_all_on(all);
    }
    let name = config.name;
    let runner = Arc::new(Runner {
        config,
        reconcile,
        backoff: FailureBackoff::controller_default(),
        metrics,
        waiting,
    });
    Ok(controller
        .run(reconcile_one, error_policy, runner)
        .for_each(move |result| {
            if let Err(err) = result {
                match err {
                    // The reconcile error itself was handled by error_policy.
                    controller::Error::ReconcilerFailed(..) => {}
                    controller::Error::ObjectNotFound(obj) => {
                        tracing::debug!(controller = name, %obj, "object gone before its reconcile");
                    }
                    other => tracing::warn!(controller = name, error = %other, "controller stream error"),
                }
            }
            futures::future::ready(())
        })
        .boxed())
}

async fn reconcile_one<K, F, Fut>(
    obj: Arc<K>,
    runner: Arc<Runner<K, F>>,
) -> Result<Action, ReconcileError>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    ObjectRef<K>: Hash + Eq,
    F: Fn(Arc<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, ReconcileError>> + Send + 'static,
{
    let key = ObjectRef::from(obj.as_ref());
    {
        let mut waiting = runner
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        waiting.remove(&key);
        runner
            .metrics
            .queue_depth
            .get_or_create(&ControllerLabels {
                controller: runner.config.name.into(),
            })
            .set(waiting.len() as i64);
    }
    let start = Instant::now();
    let result = (runner.reconcile)(obj).await;
    let labels = ControllerLabels {
        controller: runner.config.name.into(),
    };
    runner
        .metrics
        .reconcile_duration
        .get_or_create(&labels)
        .observe(start.elapsed().as_secs_f64());
    if result.is_ok() {
        runner.backoff.reset(&key);
        runner
            .metrics
            .reconciles
            .get_or_create(&ReconcileLabels {
                controller: runner.config.name.into(),
                result: "success".into(),
            })
            .inc();
    }
    result
}

#[allow(
    clippy::needless_pass_by_value,
    reason = "the signature kube-runtime's Controller::run requires"
)]
fn error_policy<K, F>(obj: Arc<K>, err: &ReconcileError, runner: Arc<Runner<K, F>>) -> Action
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    ObjectRef<K>: Hash + Eq,
{
    let key = ObjectRef::from(obj.as_ref());
    runner
        .metrics
        .reconciles
        .get_or_create(&ReconcileLabels {
            controller: runner.config.name.into(),
            result: err.kind().into(),
        })
        .inc();
    let action = match err.retry() {
        Retry::Backoff => Action::requeue(runner.backoff.fail(key.clone())),
        Retry::After(delay) => Action::requeue(delay),
        Retry::AwaitChange => Action::await_change(),
    };
    tracing::warn!(controller = runner.config.name, object = %key, error = %err, ?action, "reconcile failed");
    action
}
