//! Objects, the global resourceVersion, and the bounded change history that
//! watches replay from.
//!
//! Every object is serialized once, when written; reads, lists and watch
//! events share those bytes. Each change records the object it replaced, so a
//! list at an older resourceVersion (continue tokens, `resourceVersionMatch=Exact`)
//! is rebuilt by rolling the history back, as etcd's MVCC would serve it.

mod ids;
mod snapshot;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use hyper::body::Bytes;
use serde_json::Value;
use tokio::sync::watch;

use crate::kinds::ServiceIndex;
use crate::meta;
use crate::resources::{Kind, STORAGE_COUNT, by_kind};
use crate::status::ApiError;

pub(crate) use ids::IdSource;

/// `(namespace, name)`; the namespace is empty for cluster-scoped objects.
/// Ordered as etcd orders keys, which is the order lists come in.
pub(crate) type ObjectKey = (String, String);

/// One version of an object: its JSON value, and that value serialized once
/// inside the watch event line that announced it.
#[derive(Debug)]
pub(crate) struct StoredObject {
    pub(crate) value: Value,
    /// The serialized object: a slice of `line`, so reads and watches share one buffer.
    pub(crate) json: Bytes,
    /// `{"type":..,"object":..}\n` for the change that wrote this version.
    pub(crate) line: Bytes,
    pub(crate) rv: u64,
}

impl StoredObject {
    fn new(value: Value, rv: u64, kind: ChangeType) -> Self {
        let mut buf = Vec::with_capacity(2048);
        buf.extend_from_slice(b"{\"type\":\"");
        buf.extend_from_slice(kind.as_str().as_bytes());
        buf.extend_from_slice(b"\",\"object\":");
        let start = buf.len();
        // Writing a Value into a Vec cannot fail: its map keys are strings.
        let _ = serde_json::to_writer(&mut buf, &value);
        let end = buf.len();
        buf.extend_from_slice(b"}\n");
        let line = Bytes::from(buf);
        let json = line.slice(start..end);
        Self {
            value,
            json,
            line,
            rv,
        }
    }
}

/// What a change did, as watch events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeType {
    Added,
    Modified,
    Deleted,
}

impl ChangeType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One write, as the history keeps it.
#[derive(Debug)]
pub(crate) struct Change {
    pub(crate) rv: u64,
    pub(crate) kind: ChangeType,
    pub(crate) key: ObjectKey,
    /// The object after the change; for a deletion, its last state stamped
    /// with the deletion's resourceVersion. Its `line` is this change's event.
    pub(crate) object: Arc<StoredObject>,
    /// The object before the change.
    pub(crate) prev: Option<Arc<StoredObject>>,
}

/// Builds a watch event line around an object's JSON.
pub(crate) fn event_line(kind: &str, object_json: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object_json.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object_json);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

#[derive(Debug)]
struct Collection {
    objects: BTreeMap<ObjectKey, Arc<StoredObject>>,
    history: VecDeque<Arc<Change>>,
    /// The newest change that left `history`: every change after it is kept.
    dropped: u64,
    notify: watch::Sender<u64>,
}

impl Collection {
    fn new() -> Self {
        Self {
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            dropped: 0,
            notify: watch::Sender::new(0),
        }
    }
}

/// Everything the server holds.
#[derive(Debug)]
pub(crate) struct Store {
    rv: u64,
    /// Requests may not start before this resourceVersion (the last compaction).
    compacted: u64,
    collections: Vec<Collection>,
    history_limit: usize,
    pub(crate) ids: IdSource,
    /// Cluster IPs and node ports held by stored Services.
    pub(crate) services: ServiceIndex,
}

impl Store {
    pub(crate) fn new(history_limit: usize) -> Self {
        Self {
            rv: 0,
            compacted: 0,
            collections: (0..STORAGE_COUNT).map(|_| Collection::new()).collect(),
            history_limit: history_limit.max(1),
            ids: IdSource::new(),
            services: ServiceIndex::default(),
        }
    }

    /// The newest resourceVersion issued.
    pub(crate) fn current_rv(&self) -> u64 {
        self.rv
    }

    /// Forgets all history, as an etcd compaction would: watches and exact
    /// lists must start at or after the current resourceVersion. Open
    /// watches that have seen every change go on.
    pub(crate) fn compact(&mut self) {
        self.compacted = self.rv;
        for c in &mut self.collections {
            if let Some(newest) = c.history.back() {
                c.dropped = newest.rv;
            }
            c.history.clear();
        }
    }

    /// The oldest resourceVersion a request on `storage` can start from.
    pub(crate) fn oldest(&self, storage: usize) -> u64 {
        self.compacted.max(self.collections[storage].dropped)
    }

    /// Whether a watch or exact list of `storage` can start at `rv`.
    ///
    /// # Errors
    ///
    /// 410 Expired when `rv` is older than the last compaction or the history.
    pub(crate) fn check_start(&self, storage: usize, rv: u64) -> Result<(), ApiError> {
        let oldest = self.oldest(storage);
        if rv < oldest {
            Err(too_old(rv, oldest))
        } else {
            Ok(())
        }
    }

    pub(crate) fn get(&self, storage: usize, key: &ObjectKey) -> Option<&Arc<StoredObject>> {
        self.collections[storage].objects.get(key)
    }

    /// The current objects of `storage` (in `namespace` when given), in key order.
    pub(crate) fn objects<'a>(
        &'a self,
        storage: usize,
        namespace: Option<&'a str>,
    ) -> Box<dyn Iterator<Item = (&'a ObjectKey, &'a Arc<StoredObject>)> + 'a> {
        let objects = &self.collections[storage].objects;
        match namespace {
            None => Box::new(objects.iter()),
            Some(ns) => Box::new(
                objects
                    .range((ns.to_owned(), String::new())..)
                    .take_while(move |(k, _)| k.0 == ns),
            ),
        }
    }

    /// A receiver that sees the newest resourceVersion of each write to `storage`.
    pub(crate) fn subscribe(&self, storage: usize) -> watch::Receiver<u64> {
        self.collections[storage].notify.subscribe()
    }

    /// Adds or replaces an object, issuing it the next resourceVersion.
    pub(crate) fn put(
        &mut self,
        storage: usize,
        key: ObjectKey,
        mut value: Value,
    ) -> Arc<StoredObject> {
        self.rv += 1;
        let rv = self.rv;
        meta::set(
            &mut value,
            "resourceVersion",
            Some(Value::String(rv.to_string())),
        );
        let kind = if self.collections[storage].objects.contains_key(&key) {
            ChangeType::Modified
        } else {
            ChangeType::Added
        };
        let object = Arc::new(StoredObject::new(value, rv, kind));
        let prev = self.collections[storage]
            .objects
            .insert(key.clone(), object.clone());
        self.reindex(storage, prev.as_deref(), Some(&object));
        self.record(storage, kind, key, object.clone(), prev);
        object
    }

    /// Removes an object; `last` is its final state, which the DELETED event
    /// carries stamped with the deletion's resourceVersion.
    pub(crate) fn remove(
        &mut self,
        storage: usize,
        key: &ObjectKey,
        mut last: Value,
    ) -> Arc<StoredObject> {
        self.rv += 1;
        let rv = self.rv;
        meta::set(
            &mut last,
            "resourceVersion",
            Some(Value::String(rv.to_string())),
        );
        let object = Arc::new(StoredObject::new(last, rv, ChangeType::Deleted));
        let prev = self.collections[storage].objects.remove(key);
        self.reindex(storage, prev.as_deref(), None);
        self.record(
            storage,
            ChangeType::Deleted,
            key.clone(),
            object.clone(),
            prev,
        );
        object
    }

    fn reindex(
        &mut self,
        storage: usize,
        prev: Option<&StoredObject>,
        next: Option<&StoredObject>,
    ) {
        if storage != by_kind(Kind::Service).storage {
            return;
        }
        if let Some(prev) = prev {
            self.services.release(&prev.value);
        }
        if let Some(next) = next {
            self.services.add(&next.value);
        }
    }

    fn record(
        &mut self,
        storage: usize,
        kind: ChangeType,
        key: ObjectKey,
        object: Arc<StoredObject>,
        prev: Option<Arc<StoredObject>>,
    ) {
        let rv = object.rv;
        let collection = &mut self.collections[storage];
        collection.history.push_back(Arc::new(Change {
            rv,
            kind,
            key,
            object,
            prev,
        }));
        while collection.history.len() > self.history_limit {
            if let Some(old) = collection.history.pop_front() {
                collection.dropped = old.rv;
            }
        }
        collection.notify.send_replace(rv);
    }

    /// Up to `max` changes of `storage` after resourceVersion `after`, oldest
    /// first, for a watch that has seen every change up to `after`.
    ///
    /// # Errors
    ///
    /// 410 Expired when a change after `after` has left the history.
    pub(crate) fn changes_since(
        &self,
        storage: usize,
        after: u64,
        max: usize,
    ) -> Result<Vec<Arc<Change>>, ApiError> {
        let collection = &self.collections[storage];
        if after < collection.dropped {
            return Err(too_old(after, collection.dropped));
        }
        let start = collection.history.partition_point(|c| c.rv <= after);
        Ok(collection
            .history
            .range(start..)
            .take(max)
            .cloned()
            .collect())
    }
}

/// The 410 a watch or list at a resourceVersion older than the history gets.
pub(crate) fn too_old(requested: u64, oldest: u64) -> ApiError {
    ApiError::expired(format!("too old resource version: {requested} ({oldest})"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(name: &str) -> ObjectKey {
        (String::new(), name.to_owned())
    }

    #[test]
    fn writes_issue_increasing_resource_versions_into_the_object() {
        let mut store = Store::new(10);
        let a = store.put(1, key("a"), json!({"metadata": {"name": "a"}}));
        let b = store.put(1, key("a"), json!({"metadata": {"name": "a"}}));
        assert!(b.rv > a.rv);
        assert_eq!(
            meta::resource_version(&b.value),
            Some(b.rv.to_string().as_str())
        );
        let changes = store.changes_since(1, 0, 10).expect("in history");
        let kinds: Vec<_> = changes.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [ChangeType::Added, ChangeType::Modified]);
    }

    #[test]
    fn history_beyond_its_limit_expires_old_resource_versions() {
        let mut store = Store::new(2);
        for _ in 0..5 {
            store.put(1, key("a"), json!({}));
        }
        assert_eq!(store.oldest(1), 3);
        assert_eq!(store.changes_since(1, 3, 10).map(|c| c.len()), Ok(2));
        let err = store.changes_since(1, 2, 10).expect_err("expired");
        assert_eq!((err.code, err.reason), (410, "Expired"));
    }

    #[test]
    fn compaction_refuses_old_starts_but_keeps_caught_up_watches_going() {
        let mut store = Store::new(10);
        store.put(1, key("a"), json!({}));
        let seen = store.put(1, key("a"), json!({})).rv;
        store.put(2, key("b"), json!({}));
        store.compact();
        assert_eq!(store.check_start(1, seen).map_err(|e| e.code), Err(410));
        assert_eq!(
            store.check_start(3, seen).map_err(|e| e.code),
            Err(410),
            "compaction is global"
        );
        assert!(
            store.changes_since(1, seen, 10).is_ok(),
            "a watch that saw {seen} missed nothing"
        );
        assert_eq!(
            store
                .changes_since(1, seen - 1, 10)
                .map(|c| c.len())
                .map_err(|e| e.code),
            Err(410)
        );
    }

    #[test]
    fn deletion_event_carries_the_deletion_resource_version() {
        let mut store = Store::new(10);
        let created = store.put(1, key("a"), json!({"metadata": {"name": "a"}}));
        let deleted = store.remove(1, &key("a"), created.value.clone());
        assert!(store.get(1, &key("a")).is_none());
        assert_eq!(
            meta::resource_version(&deleted.value),
            Some(deleted.rv.to_string().as_str())
        );
        let line = String::from_utf8_lossy(
            &store.changes_since(1, created.rv, 1).expect("kept")[0]
                .object
                .line,
        )
        .into_owned();
        assert!(
            line.starts_with("{\"type\":\"DELETED\",\"object\":{"),
            "{line}"
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&deleted.json).ok(),
            Some(deleted.value.clone())
        );
    }

    #[test]
    fn namespace_scan_stops_at_the_namespace_boundary() {
        let mut store = Store::new(10);
        for (ns, name) in [("a", "x"), ("b", "x"), ("b", "y"), ("c", "x")] {
            store.put(2, (ns.into(), name.into()), json!({}));
        }
        let names: Vec<_> = store
            .objects(2, Some("b"))
            .map(|(k, _)| k.1.clone())
            .collect();
        assert_eq!(names, ["x", "y"]);
    }
}
