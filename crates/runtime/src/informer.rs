//! One watch and one cache per resource kind, shared by every controller.

mod lean;
mod progress;
mod relist;

pub use lean::Lean;
use progress::Progress;

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Called with every watch event after the cache applied it: applies,
/// deletes, and relists. Hooks must be quick and must not block.
pub type EventHook<K> = Arc<dyn Fn(&watcher::Event<K>) + Send + Sync>;

/// What a controller reads: every object created or changed, as it was
/// then. kube-runtime's own `ReflectHandle` carries references and looks
/// each up in the cache when read; one deleted meanwhile made it answer
/// "pending" with nothing left to wake it, and the controller stopped
/// hearing of changes. These carry the objects, so a slow reader loses
/// nothing.
pub type Changes<K> = UnboundedReceiver<Arc<K>>;

/// What went wrong with an informer.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// Subscriptions and hooks must be set up before the informer runs.
    #[error("the {kind} informer is already running: subscribe before it starts")]
    AlreadyStarted {
        /// The resource kind.
        kind: String,
    },
}

/// A watch on one kind of object, its cache, and fan-out to subscribers.
///
/// # Guarantees
/// - One list+watch per informer, however many controllers subscribe.
/// - The cache and subscribers hold each object as [`Lean::lean`] leaves
///   it: the fields controllers read.
/// - Subscribers receive every object that is created or changes (from the
///   cache, after it is updated); hooks additionally see deletions and
///   relists.
/// - [`Informer::watch_error`] reports a watch error from when it happens
///   until the watch makes progress again: an event, or a 2xx answer to
///   one of the informer's own list or watch requests (a re-watch that
///   succeeds on a quiet cluster yields no event).
///
/// # Assumptions
/// Subscribers and hooks are registered before [`Informer::run`] starts, and
/// every subscriber is polled: a subscriber that stops reading stalls the
/// watch once its buffer is full.
///
/// Wait for the first list with [`Informer::wait_until_ready`], never with
/// the store's own `Store::wait_until_ready`: kube-runtime's readiness
/// (a oneshot receiver) wakes only the last of several concurrent waiters,
/// and the store's Controller is one of them.
pub struct Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    client: kube::Client,
    reader: Store<K>,
    writer: Mutex<Option<reflector::store::Writer<K>>>,
    subscribers: Mutex<Vec<UnboundedSender<Arc<K>>>>,
    hooks: Mutex<Vec<EventHook<K>>>,
    ready: watch::Sender<bool>,
    progress: Progress,
}

impl<K> Debug for Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("kind", &K::kind(&()))
            .field("cached", &self.reader.len())
            .finish()
    }
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// An informer over every object of its kind, in every namespace,
    /// listed and watched with `client`.
    pub fn new(client: kube::Client) -> Self {
        let (reader, writer) = reflector::store();
        Self {
            client,
            reader,
            writer: Mutex::new(Some(writer)),
            subscribers: Mutex::new(Vec::new()),
            hooks: Mutex::new(Vec::new()),
            ready: watch::Sender::new(false),
            progress: Progress::default(),
        }
    }

    /// Why the watch cannot make progress: its last error, unless an event
    /// arrived since or the API server answered one of the informer's list
    /// or watch requests with a 2xx since.
    ///
    /// No time limit: a watch that keeps failing is reported through every
    /// backoff and every try, however long they take (a try against an
    /// unreachable server may take its whole connect timeout), until it
    /// succeeds.
    pub fn watch_error(&self) -> Option<String> {
        self.progress.error()
    }

    /// Waits until the cache holds its first complete list. Any number of
    /// tasks may wait at once.
    pub async fn wait_until_ready(&self) {
        let mut ready = self.ready.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = ready.wait_for(|ready| *ready).await;
    }

    /// Whether the cache holds its first complete list.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// The cache. Empty until the first list completes
    /// ([`Informer::wait_until_ready`]).
    pub fn store(&self) -> Store<K> {
        self.reader.clone()
    }

    /// A stream of every object that is created or changes, for a
    /// `kube::runtime::Controller`.
    ///
    /// # Errors
    /// [`InformerError::AlreadyStarted`] once the informer runs.
    pub fn subscribe(&self) -> Result<Changes<K>, InformerError> {
        if self.writer.lock().is_none() {
            return Err(InformerError::AlreadyStarted {
                kind: K::kind(&()).into_owned(),
            });
        }
        let (sender, changes) = unbounded();
        self.subscribers.lock().push(sender);
        Ok(changes)
    }

    /// Hands `event`'s objects to every subscriber: a created or changed
    /// object, or the whole cache once a list completes. Subscribers that
    /// went away are dropped.
    fn publish(&self, event: &watcher::Event<K>) {
        let objects: Vec<Arc<K>> = match event {
            // The cache applied this event just before: share its copy
            // rather than keep a second one for each change in flight.
            watcher::Event::Apply(object) => vec![
                self.reader
                    .get(&ObjectRef::from(object))
                    .unwrap_or_else(|| Arc::new(object.clone())),
            ],
            watcher::Event::InitDone => self.reader.state(),
            _ => return,
        };
        self.subscribers.lock().retain(|subscriber| {
            objects
                .iter()
                .all(|object| subscriber.unbounded_send(object.clone()).is_ok())
        });
    }

    /// Calls `hook` with every event, deletions included.
    ///
    /// # Errors
    /// [`InformerError::AlreadyStarted`] once the informer runs.
    pub fn on_event(
        &self,
        hook: impl Fn(&watcher::Event<K>) + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        if self.writer.lock().is_none() {
            return Err(InformerError::AlreadyStarted {
                kind: K::kind(&()).into_owned(),
            });
        }
        self.hooks.lock().push(Arc::new(hook));
        Ok(())
    }

    /// Lists and watches until `shutdown`, keeping the cache current and
    /// feeding subscribers and hooks. Watch errors are retried with
    /// client-go's backoff and logged; as client-go does, the watch starts
    /// over with a fresh list on 410 Gone, when the server calls its
    /// resourceVersion too large, and after errors that keep repeating.
    ///
    /// The requests go through a client of the informer's own, wrapping the
    /// one it was made with, that counts their 2xx answers as progress
    /// ([`Informer::watch_error`]).
    ///
    /// # Errors
    /// [`InformerError::AlreadyStarted`] when called twice.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), InformerError>
    where
        K: Lean,
    {
        let kind = K::kind(&()).into_owned();
        let writer = self
            .writer
            .lock()
            .take()
            .ok_or_else(|| InformerError::AlreadyStarted { kind: kind.clone() })?;
        let hooks = std::mem::take(&mut *self.hooks.lock());
        let api: Api<K> = Api::all(self.progress.recording(self.client.clone()));
        let events = relist::restarting(kind.clone(), move || {
            watcher(api.clone(), watcher::Config::default()).default_backoff()
        })
        .modify(K::lean)
        .reflect(writer)
        .for_each(|event| {
            match event {
                Ok(event) => {
                    self.progress.made();
                    if matches!(event, watcher::Event::InitDone) {
                        self.ready.send_replace(true);
                    }
                    self.publish(&event);
                    hooks.iter().for_each(|hook| hook(&event));
                }
                Err(err) => {
                    tracing::warn!(%kind, error = %err, "watch failed; retrying");
                    self.progress.failed(err.to_string());
                }
            }
            futures::future::ready(())
        });
        tokio::select! {
            () = events => {}
            () = shutdown.cancelled() => {}
        }
        Ok(())
    }
}
