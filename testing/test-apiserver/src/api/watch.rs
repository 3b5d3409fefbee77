//! Watches: replay from the bounded history, 410 Expired when it is too
//! old, selector transitions, BOOKMARK events, `timeoutSeconds`, and
//! streaming lists (`sendInitialEvents=true` ending with the
//! `k8s.io/initial-events-end` bookmark).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::Response;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Bytes, Frame};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use super::params::Params;
use super::read::{Selection, parse_rv};
use super::render::{self, Body, Representation};
use super::route::ResourceRequest;
use super::table;
use crate::resources::ResourceType;
use crate::shared::Shared;
use crate::status::ApiError;
use crate::store::{Change, ChangeType, StoredObject, event_line};

/// How long a watch without `timeoutSeconds` stays open (kube-apiserver's
/// `--min-request-timeout`).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// Changes read from the history per lock.
const BATCH: usize = 512;
/// Initial objects per chunk written.
const INITIAL_CHUNK: usize = 100;

/// Counts a watch as open for as long as it lives.
struct OpenWatch {
    shared: Arc<Shared>,
    resource: &'static str,
}

impl OpenWatch {
    fn new(shared: Arc<Shared>, resource: &'static str) -> Self {
        shared.accounting.lock().watch_opened(resource);
        Self { shared, resource }
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.shared.accounting.lock().watch_closed(self.resource);
    }
}

/// Where a watch starts.
#[derive(Debug, PartialEq, Eq)]
enum Start {
    /// Synthetic ADDED events for the current state first; with the
    /// initial-events-end bookmark when `sendInitialEvents=true`.
    Initial { end_bookmark: bool },
    /// Changes after this resourceVersion.
    After(u64),
}

fn options_invalid(field: &str, why: &str) -> ApiError {
    ApiError::invalid(
        "ListOptions",
        "meta.k8s.io",
        "",
        &[(field.into(), why.into())],
    )
}

/// Decides the start from resourceVersion, resourceVersionMatch and
/// sendInitialEvents, validated as kube-apiserver validates watch options.
fn start_of(params: &Params, current: u64) -> Result<Start, ApiError> {
    let rv = params.get("resourceVersion").unwrap_or("");
    let matching = params.get("resourceVersionMatch").unwrap_or("");
    let send_initial = params.flag("sendInitialEvents")?;
    if send_initial.is_some() && matching != "NotOlderThan" {
        return Err(options_invalid(
            "resourceVersionMatch",
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !matching.is_empty() {
        if send_initial.is_none() {
            return Err(options_invalid(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if matching != "NotOlderThan" {
            return Err(options_invalid(
                "resourceVersionMatch",
                &format!("Unsupported value: {matching:?}: supported values: \"NotOlderThan\""),
            ));
        }
    }
    let requested = match rv {
        "" | "0" => None,
        n => Some(parse_rv(n)?),
    };
    if let Some(n) = requested
        && n > current
    {
        return Err(ApiError::too_large_resource_version(n, current));
    }
    Ok(match (send_initial, requested) {
        (Some(true), _) => Start::Initial { end_bookmark: true },
        (Some(false), n) => Start::After(n.unwrap_or(current)),
        (None, None) => Start::Initial {
            end_bookmark: false,
        },
        (None, Some(n)) => Start::After(n),
    })
}

/// Starts a watch stream for `req`.
///
/// # Errors
///
/// 400/422 for invalid options, 504 for a resourceVersion never issued.
/// A resourceVersion older than the history is not an error here: like
/// kube-apiserver, the stream starts and its first event is a 410 `ERROR`.
pub(crate) fn start(
    shared: Arc<Shared>,
    req: &ResourceRequest,
    params: &Params,
    repr: Representation,
) -> Result<Response<Body>, ApiError> {
    let selection = Selection::parse(params, req.rt)?;
    let bookmarks = params.flag("allowWatchBookmarks")?.unwrap_or(false);
    let timeout = params
        .number("timeoutSeconds")?
        .filter(|t| *t > 0)
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let (start, changes, initial, cursor, expired) = {
        let store = shared.store.lock();
        let current = store.current_rv();
        let start = start_of(params, current)?;
        let mut initial = VecDeque::new();
        if matches!(start, Start::Initial { .. }) {
            for (key, object) in store.objects(req.rt.storage, req.namespace.as_deref()) {
                if req.name.as_deref().is_none_or(|n| n == key.1)
                    && selection.matches(&object.value)
                {
                    initial.push_back(object.clone());
                }
            }
        }
        let (cursor, expired) = match start {
            Start::After(n) => (n, store.check_start(req.rt.storage, n).err()),
            Start::Initial { .. } => (current, None),
        };
        (
            start,
            store.subscribe(req.rt.storage),
            initial,
            cursor,
            expired,
        )
    };
    let now = Instant::now();
    let stream = WatchStream {
        rt: req.rt,
        namespace: req.namespace.clone(),
        name: req.name.clone(),
        selection,
        repr,
        bookmarks,
        cursor,
        initial,
        end_bookmark: start == Start::Initial { end_bookmark: true } && bookmarks,
        out: expired.iter().map(error_event).collect(),
        changes,
        closer: shared.close_watches.subscribe(),
        deadline: now + timeout,
        interval: shared.bookmark_interval,
        next_bookmark: now + shared.bookmark_interval,
        bookmark_due: false,
        finished: expired.is_some(),
        open: OpenWatch::new(shared, req.rt.plural),
        columns_sent: false,
    };
    let chunks = futures::stream::unfold(stream, |mut s| async move {
        let chunk = s.next_chunk().await?;
        Some((Ok::<_, Infallible>(Frame::data(chunk)), s))
    });
    let mut response = render::json_response(200, Bytes::new(), &[]);
    *response.body_mut() = StreamBody::new(chunks).boxed_unsync();
    Ok(response)
}

/// The `ERROR` event a watch gets instead of events it can no longer replay.
pub(crate) fn error_event(err: &ApiError) -> Bytes {
    event_line(
        "ERROR",
        &serde_json::to_vec(&err.to_status()).unwrap_or_default(),
    )
}

struct WatchStream {
    rt: &'static ResourceType,
    namespace: Option<String>,
    name: Option<String>,
    selection: Selection,
    repr: Representation,
    bookmarks: bool,
    /// Every change up to here has been considered.
    cursor: u64,
    initial: VecDeque<Arc<StoredObject>>,
    end_bookmark: bool,
    out: VecDeque<Bytes>,
    changes: watch::Receiver<u64>,
    closer: watch::Receiver<u64>,
    deadline: Instant,
    interval: Duration,
    next_bookmark: Instant,
    bookmark_due: bool,
    finished: bool,
    open: OpenWatch,
    /// A Table watch sends its column definitions with its first event
    /// only, as kube-apiserver.
    columns_sent: bool,
}

impl WatchStream {
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if let Some(chunk) = self.out.pop_front() {
                return Some(chunk);
            }
            if self.finished {
                return None;
            }
            if !self.initial.is_empty() {
                self.render_initial();
                continue;
            }
            if self.end_bookmark {
                self.end_bookmark = false;
                let bookmark = self.bookmark(self.cursor, true);
                self.out.push_back(bookmark);
                continue;
            }
            if self.poll_history() {
                continue;
            }
            tokio::select! {
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        self.finished = true;
                    }
                }
                () = sleep_until(self.deadline) => self.finished = true,
                () = sleep_until(self.next_bookmark), if self.bookmarks => {
                    self.bookmark_due = true;
                    self.next_bookmark = Instant::now() + self.interval;
                }
                _ = self.closer.changed() => self.finished = true,
            }
        }
    }

    fn render_initial(&mut self) {
        let mut chunk = Vec::new();
        let batch: Vec<_> = self
            .initial
            .drain(..INITIAL_CHUNK.min(self.initial.len()))
            .collect();
        for object in batch {
            let shown = self.shown(&object);
            chunk.extend_from_slice(&event_line("ADDED", &shown));
        }
        self.out.push_back(Bytes::from(chunk));
    }

    /// `object` as this watch shows it.
    fn shown(&mut self, object: &StoredObject) -> Bytes {
        match self.repr {
            Representation::Table(include) => {
                let columns = !self.columns_sent;
                self.columns_sent = true;
                let table = table::single(self.rt, include, &object.value, columns);
                Bytes::from(serde_json::to_vec(&table).unwrap_or_default())
            }
            repr => render::stored(self.rt, repr, object),
        }
    }

    /// Reads new changes into `out`; true when it produced output or must
    /// be called again.
    fn poll_history(&mut self) -> bool {
        let store = self.open.shared.store.lock();
        match store.changes_since(self.rt.storage, self.cursor, BATCH) {
            Err(expired) => {
                self.out.push_back(error_event(&expired));
                self.finished = true;
                true
            }
            Ok(changes) if changes.is_empty() => {
                if self.bookmark_due {
                    self.bookmark_due = false;
                    self.cursor = self.cursor.max(store.current_rv());
                    let bookmark = self.bookmark(self.cursor, false);
                    self.out.push_back(bookmark);
                    return true;
                }
                false
            }
            Ok(changes) => {
                drop(store);
                let mut lines = Vec::new();
                for change in &changes {
                    self.cursor = change.rv;
                    lines.extend(self.render_change(change));
                }
                // One chunk per wake: a watcher that fell behind catches up
                // in one write instead of one per event.
                match lines.len() {
                    0 => {}
                    1 => self.out.extend(lines),
                    _ => self.out.push_back(Bytes::from(lines.concat())),
                }
                true
            }
        }
    }

    fn render_change(&mut self, change: &Change) -> Option<Bytes> {
        if self
            .namespace
            .as_ref()
            .is_some_and(|ns| *ns != change.key.0)
            || self.name.as_ref().is_some_and(|n| *n != change.key.1)
        {
            return None;
        }
        let everything = self.selection.is_everything();
        let now = everything || self.selection.matches(&change.object.value);
        let before = change
            .prev
            .as_ref()
            .is_some_and(|p| everything || self.selection.matches(&p.value));
        let shown = match (change.kind, before, now) {
            (ChangeType::Added, _, true) | (ChangeType::Modified, false, true) => ChangeType::Added,
            (ChangeType::Modified, true, true) => ChangeType::Modified,
            (ChangeType::Modified, true, false) => ChangeType::Deleted,
            (ChangeType::Deleted, b, n) if b || n => ChangeType::Deleted,
            _ => return None,
        };
        if shown == change.kind && render::is_verbatim(self.rt, self.repr) {
            return Some(change.object.line.clone());
        }
        let object = self.shown(&change.object);
        Some(event_line(shown.as_str(), &object))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let (kind, api_version) = match self.repr {
            Representation::Object => (
                Value::from(self.rt.kind),
                Value::from(self.rt.api_version()),
            ),
            Representation::Metadata => (json!("PartialObjectMetadata"), json!("meta.k8s.io/v1")),
            Representation::Table(_) => (json!("Table"), json!("meta.k8s.io/v1")),
        };
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata});
        event_line("BOOKMARK", &serde_json::to_vec(&object).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(query: &str, current: u64) -> Result<Start, u16> {
        start_of(&Params::parse(query), current).map_err(|e| e.code)
    }

    #[test]
    fn watch_start_follows_resource_version_and_streaming_list_rules() {
        assert_eq!(
            start("", 9),
            Ok(Start::Initial {
                end_bookmark: false
            })
        );
        assert_eq!(
            start("resourceVersion=0", 9),
            Ok(Start::Initial {
                end_bookmark: false
            })
        );
        assert_eq!(start("resourceVersion=4", 9), Ok(Start::After(4)));
        assert_eq!(
            start(
                "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
                9
            ),
            Ok(Start::Initial { end_bookmark: true })
        );
        assert_eq!(start("sendInitialEvents=true", 9), Err(422));
        assert_eq!(
            start("resourceVersionMatch=NotOlderThan&resourceVersion=3", 9),
            Err(422)
        );
        assert_eq!(start("resourceVersion=10", 9), Err(504));
    }
}
