//! Coalescing per-object cloud lookups (nodes, volumes) into the provider's
//! batch calls.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{BatchResult, CloudError};
use futures::future::BoxFuture;
use futures::stream::{self, Stream, StreamExt};
use tokio::sync::{Semaphore, mpsc, oneshot};

/// One batch call to the provider, such as `instances_metadata`, over keys
/// `K` (nodes by default; volume IDs for `volumes_labels`).
pub type BatchCall<T, K = Arc<Node>> =
    Arc<dyn Fn(Vec<K>) -> BoxFuture<'static, BatchResult<T>> + Send + Sync>;

struct Request<T, K> {
    node: K,
    reply: oneshot::Sender<Result<T, CloudError>>,
}

/// How many windows a batch stays open at most while requests stream in.
pub const STREAM_WINDOWS: u32 = 10;

/// Requests closer together than `window / STREAM_GAP_DIVISOR` are a stream.
const STREAM_GAP_DIVISOR: u32 = 4;

/// Turns concurrent single-node lookups into batch calls.
///
/// # Guarantees
/// - Requests arriving within `window` of the first request of a batch, or
///   while every call slot is busy, share one call, up to `max_batch` nodes:
///   a burst of N lookups costs ceil(N / max_batch) calls.
/// - While requests keep streaming in (each within a quarter window of the
///   last), the batch stays open past `window` until it is full, for at
///   most [`STREAM_WINDOWS`] windows: a burst that arrives over seconds
///   (nodes registering, a watch delivering them) still fills its calls,
///   instead of a call per window with whatever the window caught.
/// - A lone request waits one `window`.
/// - At most `concurrency` batch calls run at once.
/// - When a call fails as a whole, every node in it gets that error.
#[derive(Debug)]
pub struct Batcher<T, K = Arc<Node>> {
    tx: mpsc::UnboundedSender<Request<T, K>>,
}

impl<T, K> Clone for Batcher<T, K> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
        }
    }
}

/// The batcher's driver stopped (the runtime is shutting down).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the batcher has stopped")]
pub struct BatcherStopped;

/// A batch call ended without an answer for one of its nodes.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the batch call ended without answering for this node")]
pub struct AnswerLost;

impl<T: Send + 'static, K: Send + 'static> Batcher<T, K> {
    /// Starts a batcher on the current tokio runtime. It stops when every
    /// handle is dropped.
    pub fn spawn(
        call: BatchCall<T, K>,
        max_batch: NonZeroUsize,
        window: Duration,
        concurrency: NonZeroUsize,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(drive(
            rx,
            call,
            max_batch.get(),
            window,
            Arc::new(Semaphore::new(concurrency.get())),
        ));
        Self { tx }
    }

    /// Looks `node` (or another key) up as part of the next batch.
    pub async fn lookup(&self, node: K) -> Result<T, CloudError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || CloudError::other(BatcherStopped.to_string(), BatcherStopped);
        self.tx
            .send(Request { node, reply })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn drive<T: Send + 'static, K: Send + 'static>(
    mut rx: mpsc::UnboundedReceiver<Request<T, K>>,
    call: BatchCall<T, K>,
    max_batch: usize,
    window: Duration,
    slots: Arc<Semaphore>,
) {
    let gap = window / STREAM_GAP_DIVISOR;
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let opened = tokio::time::Instant::now();
        let latest = opened + window * STREAM_WINDOWS;
        let mut deadline = opened + window;
        while batch.len() < max_batch {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(request)) => {
                    batch.push(request);
                    let streaming = tokio::time::Instant::now() + gap;
                    deadline = deadline.max(streaming).min(latest);
                }
                Ok(None) | Err(_) => break,
            }
        }
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        // Requests that queued while we waited for a slot join this batch.
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        let call = call.clone();
        tokio::spawn(async move {
            let (nodes, replies): (Vec<_>, Vec<_>) =
                batch.into_iter().map(|r| (r.node, r.reply)).unzip();
            answer(replies, call(nodes).await);
            drop(permit);
        });
    }
}

fn answer<T>(replies: Vec<oneshot::Sender<Result<T, CloudError>>>, result: BatchResult<T>) {
    match result {
        Ok(results) if results.len() == replies.len() => {
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(result);
            }
        }
        Ok(results) => {
            let err = CloudError::msg(format!(
                "provider answered a batch of {} nodes with {} results",
                replies.len(),
                results.len()
            ));
            replies
                .into_iter()
                .for_each(|reply| drop(reply.send(Err(err.clone()))));
        }
        Err(err) => replies
            .into_iter()
            .for_each(|reply| drop(reply.send(Err(err.clone())))),
    }
}

/// Nodes (or other keys) with their answers.
pub type Answers<T, K = Arc<Node>> = Vec<(K, Result<T, CloudError>)>;

/// Looks up every node in `nodes` with batch calls of at most `max_batch`
/// nodes, `concurrency` calls at a time; for periodic passes over all nodes.
///
/// Returns each node with its answer, in input order.
pub async fn lookup_all<T: Send + 'static, K: Clone + Send + 'static>(
    nodes: Vec<K>,
    call: &BatchCall<T, K>,
    max_batch: NonZeroUsize,
    concurrency: NonZeroUsize,
) -> Answers<T, K> {
    lookup_batches(nodes, call, max_batch, concurrency)
        .concat()
        .await
}

/// [`lookup_all`], one batch call's nodes and answers at a time, in input
/// order. A caller that is done with each batch before it takes the next
/// holds the answers of at most `concurrency` calls, not of every node.
pub fn lookup_batches<T: Send + 'static, K: Clone + Send + 'static>(
    nodes: Vec<K>,
    call: &BatchCall<T, K>,
    max_batch: NonZeroUsize,
    concurrency: NonZeroUsize,
) -> impl Stream<Item = Answers<T, K>> + Send + 'static {
    let mut nodes = nodes.into_iter();
    let chunks: Vec<Vec<K>> = std::iter::from_fn(|| {
        let chunk: Vec<K> = nodes.by_ref().take(max_batch.get()).collect();
        (!chunk.is_empty()).then_some(chunk)
    })
    .collect();
    let call = call.clone();
    stream::iter(chunks)
        .map(move |chunk| {
            let call = call.clone();
            async move {
                let (tx, rx): (Vec<_>, Vec<_>) = chunk.iter().map(|_| oneshot::channel()).unzip();
                answer(tx, call(chunk.clone()).await);
                let mut out = Vec::with_capacity(chunk.len());
                for (node, rx) in chunk.into_iter().zip(rx) {
                    let result = rx.await.unwrap_or_else(|_| {
                        Err(CloudError::other(AnswerLost.to_string(), AnswerLost))
                    });
                    out.push((node, result));
                }
                out
            }
        })
        .buffered(concurrency.get())
}
