//! Runs one kube-runtime `Controller` with the framework's error policy,
//! metrics and shutdown.

use std::collections::HashSet;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::server_delay;
use futures::stream::BoxStream;
use futures::{FutureExt, Stream, StreamExt};
use kube::Resource;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use parking_lot::Mutex;
use prometheus_client::metrics::gauge::Gauge;
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::activity::{Activity, Busy};
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
    queue: Queue<K>,
}

/// The objects of one controller that wait for a reconcile now or for a
/// scheduled retry, as the queue-depth metric and the process's
/// [`Activity`] see them.
struct Queue<K: Resource<DynamicType = ()> + 'static> {
    waiting: Mutex<HashSet<ObjectRef<K>>>,
    retrying: Mutex<HashSet<ObjectRef<K>>>,
    depth: Gauge,
    activity: Activity,
}

impl<K> Queue<K>
where
    K: Resource<DynamicType = ()> + 'static,
    ObjectRef<K>: Hash + Eq,
{
    /// `key` changed or was triggered: a reconcile is due.
    fn push(&self, key: ObjectRef<K>) {
        let mut waiting = self.waiting.lock();
        if waiting.insert(key) {
            self.activity.add_queued(1);
        }
        self.depth.set(waiting.len() as i64);
    }

    /// The reconcile of `key` starts; it runs until the guard is dropped.
    fn start(&self, key: &ObjectRef<K>) -> Busy {
        let mut waiting = self.waiting.lock();
        let busy = self.activity.start_queued(waiting.remove(key));
        self.depth.set(waiting.len() as i64);
        shrink_when_drained(&mut waiting);
        drop(waiting);
        if self.retrying.lock().remove(key) {
            self.activity.add_retrying(-1);
        }
        busy
    }

    /// The reconcile of `key` failed; `retry` if a retry is scheduled.
    fn failed(&self, key: ObjectRef<K>, retry: bool) {
        let mut retrying = self.retrying.lock();
        if retry {
            if retrying.insert(key) {
                self.activity.add_retrying(1);
            }
        } else if retrying.remove(&key) {
            self.activity.add_retrying(-1);
        }
    }

    /// A reconcile was due for an object that is gone: none will run.
    fn gone(&self, name: &str, namespace: Option<&str>) {
        let same = |key: &ObjectRef<K>| key.name == name && key.namespace.as_deref() == namespace;
        let mut waiting = self.waiting.lock();
        let before = waiting.len();
        waiting.retain(|key| !same(key));
        self.activity
            .add_queued(waiting.len() as i64 - before as i64);
        self.depth.set(waiting.len() as i64);
        shrink_when_drained(&mut waiting);
        drop(waiting);
        let mut retrying = self.retrying.lock();
        let before = retrying.len();
        retrying.retain(|key| !same(key));
        self.activity
            .add_retrying(retrying.len() as i64 - before as i64);
    }
}

/// A set that held more than this many keys gives its table back once it
/// is empty again.
const KEPT_CAPACITY: usize = 1024;

/// Frees the table a burst grew (5,000 nodes leave room for 7,168 keys)
/// once the burst has drained: a hash set never shrinks by itself.
fn shrink_when_drained<T: Eq + Hash>(set: &mut HashSet<T>) {
    if set.is_empty() && set.capacity() > KEPT_CAPACITY {
        set.shrink_to_fit();
    }
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
///   waiting are recorded in `metrics`; objects waiting, reconciles running
///   and retries scheduled also in its [`Activity`].
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
    run_where(
        config,
        informer,
        triggers,
        metrics,
        shutdown,
        |_| true,
        reconcile,
    )
}

/// [`run`], for the changed objects `relevant` keeps only: the others never
/// enter the queue (kube-runtime's scheduler keeps the table a burst grew
/// for good, so objects that could only ever be no-ops are kept out of it).
/// Triggers and periodic passes over every object are not filtered.
///
/// # Errors
/// The informer must not be running yet (see [`Informer::subscribe`]).
pub fn run_where<K, P, F, Fut>(
    config: ControllerConfig,
    informer: &Informer<K>,
    triggers: Triggers<K>,
    metrics: Metrics,
    shutdown: CancellationToken,
    relevant: P,
    reconcile: F,
) -> Result<impl Future<Output = ()> + Send + 'static, crate::InformerError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    ObjectRef<K>: Hash + Eq,
    P: Fn(&K) -> bool + Send + 'static,
    F: Fn(Arc<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, ReconcileError>> + Send + 'static,
{
    Ok(drive(
        config,
        only(informer.subscribe()?, relevant),
        informer.store(),
        triggers,
        metrics,
        shutdown,
        reconcile,
    ))
}

/// The changes `relevant` keeps.
fn only<K: Send + Sync + 'static>(
    changes: impl Stream<Item = Arc<K>> + Send + 'static,
    relevant: impl Fn(&K) -> bool + Send + 'static,
) -> impl Stream<Item = Arc<K>> + Send + 'static {
    changes.filter(move |obj| futures::future::ready(relevant(obj)))
}

/// [`run`] over a shared store and its subscription, however they are fed.
fn drive<K, F, Fut>(
    config: ControllerConfig,
    changes: impl Stream<Item = Arc<K>> + Send + 'static,
    store: Store<K>,
    triggers: Triggers<K>,
    metrics: Metrics,
    shutdown: CancellationToken,
    reconcile: F,
) -> impl Future<Output = ()> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    ObjectRef<K>: Hash + Eq,
    F: Fn(Arc<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, ReconcileError>> + Send + 'static,
{
    let name = config.name;
    let depth = metrics
        .queue_depth
        .get_or_create(&ControllerLabels {
            controller: name.into(),
        })
        .clone();
    let runner = Arc::new(Runner {
        queue: Queue {
            waiting: Mutex::default(),
            retrying: Mutex::default(),
            depth,
            activity: metrics.activity(),
        },
        config,
        reconcile,
        backoff: FailureBackoff::controller_default(),
        metrics,
    });
    let subscriber = {
        let runner = runner.clone();
        changes.inspect(move |obj| runner.queue.push(ObjectRef::from(obj.as_ref())))
    };
    let mut controller = Controller::for_shared_stream(subscriber, store)
        .with_config(controller::Config::default().concurrency(runner.config.concurrency))
        .graceful_shutdown_on(shutdown.cancelled_owned());
    if let Some(objects) = triggers.objects {
        let runner = runner.clone();
        controller =
            controller.reconcile_on(objects.inspect(move |key| runner.queue.push(key.clone())));
    }
    if let Some(all) = triggers.all {
        // Not counted as queued (kube-runtime alone knows which objects it
        // reaches); their reconciles still count as running.
        controller = controller.reconcile_all_on(all);
    }
    let gone = runner.clone();
    controller
        .run(reconcile_one, error_policy, runner)
        .for_each(move |result| {
            if let Err(err) = result {
                match err {
                    // The reconcile error itself was handled by error_policy.
                    controller::Error::ReconcilerFailed(..) => {}
                    controller::Error::ObjectNotFound(obj) => {
                        gone.queue.gone(&obj.name, obj.namespace.as_deref());
                        gone.backoff.forget_where(|key| {
                            key.name == obj.name && key.namespace == obj.namespace
                        });
                        tracing::debug!(controller = name, %obj, "object gone before its reconcile");
                    }
                    other => tracing::warn!(controller = name, error = %other, "controller stream error"),
                }
            }
            futures::future::ready(())
        })
        .boxed()
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
    let _running = runner.queue.start(&key);
    let _watched = runner
        .metrics
        .stalls
        .start(runner.config.name, object_name(&key));
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
    let retry = err.retry();
    let action = retry_action(retry, || runner.backoff.fail(key.clone()));
    runner
        .queue
        .failed(key.clone(), retry != Retry::AwaitChange);
    tracing::warn!(controller = runner.config.name, object = %key, error = %err, ?action, "reconcile failed");
    action
}

/// What the queue does after a failure: `backoff` is asked only for
/// [`Retry::Backoff`].
fn retry_action(retry: Retry, backoff: impl FnOnce() -> Duration) -> Action {
    match retry {
        Retry::Backoff => Action::requeue(backoff()),
        // The delay may come from a server: no object waits past the
        // ceiling, and no huge delay reaches the scheduler's clock arithmetic.
        Retry::After(delay) => Action::requeue(server_delay::clamp_delay(delay)),
        Retry::AwaitChange => Action::await_change(),
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object.
fn object_name<K: Resource<DynamicType = ()>>(key: &ObjectRef<K>) -> String {
    match &key.namespace {
        Some(namespace) => format!("{namespace}/{}", key.name),
        None => key.name.clone(),
    }
}

#[cfg(test)]
mod tests;
