//! Reading a collection as it was at a resourceVersion.

use std::collections::BTreeMap;
use std::ops::{Bound, ControlFlow};
use std::sync::Arc;

use super::{ObjectKey, Store, StoredObject};
use crate::status::ApiError;

impl Store {
    /// Visits the objects of `storage` as they were at resourceVersion `at`
    /// (now when `None`), in key order, restricted to `namespace` and to keys
    /// after `start_after`, until `visit` breaks.
    ///
    /// # Errors
    ///
    /// 410 Expired when `at` is older than the history kept.
    pub(crate) fn scan_at(
        &self,
        storage: usize,
        at: Option<u64>,
        namespace: Option<&str>,
        start_after: Option<&ObjectKey>,
        mut visit: impl FnMut(&ObjectKey, &Arc<StoredObject>) -> ControlFlow<()>,
    ) -> Result<(), ApiError> {
        let collection = &self.collections[storage];
        let lower = match start_after {
            Some(key) => Bound::Excluded(key.clone()),
            None => match namespace {
                Some(ns) => Bound::Included((ns.to_owned(), String::new())),
                None => Bound::Unbounded,
            },
        };
        let in_namespace = |k: &ObjectKey| namespace.is_none_or(|ns| k.0 == ns);
        let at = at.unwrap_or(self.rv);
        self.check_start(storage, at)?;
        let first_later = collection.history.partition_point(|c| c.rv <= at);
        if first_later == collection.history.len() {
            for (key, object) in collection
                .objects
                .range((lower, Bound::Unbounded))
                .take_while(|(k, _)| in_namespace(k))
            {
                if visit(key, object).is_break() {
                    break;
                }
            }
            return Ok(());
        }
        // Roll back: for each key changed after `at`, the object before its
        // earliest later change is the one `at` saw.
        let mut then: BTreeMap<&ObjectKey, Option<&Arc<StoredObject>>> = BTreeMap::new();
        for change in collection.history.range(first_later..) {
            then.entry(&change.key).or_insert(change.prev.as_ref());
        }
        let mut rows: Vec<(&ObjectKey, &Arc<StoredObject>)> = collection
            .objects
            .range((lower.clone(), Bound::Unbounded))
            .take_while(|(k, _)| in_namespace(k))
            .filter(|(k, _)| !then.contains_key(k))
            .collect();
        rows.extend(
            then.iter()
                .filter(|(k, _)| in_namespace(k) && after_lower(k, &lower))
                .filter_map(|(k, o)| o.map(|o| (*k, o))),
        );
        rows.sort_by(|a, b| a.0.cmp(b.0));
        for (key, object) in rows {
            if visit(key, object).is_break() {
                break;
            }
        }
        Ok(())
    }
}

fn after_lower(key: &ObjectKey, lower: &Bound<ObjectKey>) -> bool {
    match lower {
        Bound::Excluded(k) => key > k,
        Bound::Included(k) => key >= k,
        Bound::Unbounded => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn names_at(store: &Store, at: Option<u64>, start_after: Option<&ObjectKey>) -> Vec<String> {
        let mut names = Vec::new();
        store
            .scan_at(4, at, Some("ns"), start_after, |k, _| {
                names.push(k.1.clone());
                ControlFlow::Continue(())
            })
            .expect("in history");
        names
    }

    fn key(name: &str) -> ObjectKey {
        ("ns".into(), name.into())
    }

    #[test]
    fn past_lists_undo_later_creations_updates_and_deletions() {
        let mut store = Store::new(100);
        store.put(4, key("a"), json!({"v": 1}));
        let b = store.put(4, key("b"), json!({"v": 1}));
        let at = store.current_rv();
        store.put(4, key("c"), json!({}));
        store.put(4, key("a"), json!({"v": 2}));
        store.remove(4, &key("b"), b.value.clone());
        assert_eq!(names_at(&store, None, None), ["a", "c"]);
        assert_eq!(names_at(&store, Some(at), None), ["a", "b"]);
        let mut a_then = None;
        store
            .scan_at(4, Some(at), Some("ns"), None, |k, o| {
                if k.1 == "a" {
                    a_then = o.value.get("v").cloned();
                }
                ControlFlow::Continue(())
            })
            .expect("in history");
        assert_eq!(a_then, Some(json!(1)));
        assert_eq!(names_at(&store, Some(at), Some(&key("a"))), ["b"]);
    }

    #[test]
    fn lists_older_than_the_history_expire() {
        let mut store = Store::new(1);
        store.put(4, key("a"), json!({}));
        store.put(4, key("b"), json!({}));
        store.put(4, key("c"), json!({}));
        let err = store
            .scan_at(4, Some(1), None, None, |_, _| ControlFlow::Continue(()))
            .expect_err("expired");
        assert_eq!(err.code, 410);
    }
}
