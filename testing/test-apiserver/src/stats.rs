//! Request accounting: counts by verb × resource × subresource, open
//! watches, and a log of requests, readable through
//! [`TestApiServer::stats`](crate::TestApiServer::stats) and
//! [`TestApiServer::requests`](crate::TestApiServer::requests), and as JSON at
//! `GET /testapi/stats` and `GET /testapi/requests`.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use serde::{Deserialize, Serialize};

/// A Kubernetes API verb, as RBAC names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection or object with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    #[serde(rename = "deletecollection")]
    DeleteCollection,
}

impl Verb {
    /// The verb as RBAC rules spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }

    /// Whether the verb changes objects.
    pub fn is_write(self) -> bool {
        !matches!(self, Self::Get | Self::List | Self::Watch)
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a resource request is counted under.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequestKey {
    /// The verb.
    pub verb: Verb,
    /// The API group; empty for the core group.
    pub group: String,
    /// The resource's plural name (`nodes`).
    pub resource: String,
    /// The subresource (`status`), empty for the main resource.
    pub subresource: String,
}

/// How many requests one [`RequestKey`] received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestCount {
    /// What was counted.
    #[serde(flatten)]
    pub key: RequestKey,
    /// How many requests.
    pub count: u64,
}

/// A snapshot of the request counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Resource requests by verb × group × resource × subresource, sorted.
    pub requests: Vec<RequestCount>,
    /// Requests outside the resource API (`/version`, `/api`, discovery), by path.
    pub non_resource: BTreeMap<String, u64>,
    /// Watches open now.
    pub open_watches: usize,
    /// Watches open now, by resource plural (both Event groups count under `events`).
    pub open_watches_by_resource: BTreeMap<String, usize>,
}

impl Stats {
    /// Requests with `verb` on the main resource `resource` (any group).
    pub fn count(&self, verb: Verb, resource: &str) -> u64 {
        self.count_subresource(verb, resource, "")
    }

    /// Requests with `verb` on `resource/subresource` (any group).
    pub fn count_subresource(&self, verb: Verb, resource: &str, subresource: &str) -> u64 {
        self.requests
            .iter()
            .filter(|c| {
                c.key.verb == verb && c.key.resource == resource && c.key.subresource == subresource
            })
            .map(|c| c.count)
            .sum()
    }

    /// Requests that change `resource` or any of its subresources.
    pub fn writes(&self, resource: &str) -> u64 {
        self.requests
            .iter()
            .filter(|c| c.key.verb.is_write() && c.key.resource == resource)
            .map(|c| c.count)
            .sum()
    }

    /// All resource requests.
    pub fn total(&self) -> u64 {
        self.requests.iter().map(|c| c.count).sum()
    }

    /// Watches open now on `resource`.
    pub fn open_watches_on(&self, resource: &str) -> usize {
        self.open_watches_by_resource
            .get(resource)
            .copied()
            .unwrap_or(0)
    }
}

/// One request, as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The RBAC verb for resource requests; the lowercase HTTP method otherwise.
    pub verb: String,
    /// The HTTP method.
    pub method: String,
    /// The URL path.
    pub path: String,
    /// The query string, without `?`.
    pub query: String,
    /// The API group (empty for core and for non-resource requests).
    pub group: String,
    /// The resource plural; empty for non-resource requests.
    pub resource: String,
    /// The subresource, if any.
    pub subresource: String,
    /// The namespace in the URL, if any.
    pub namespace: String,
    /// The object name in the URL, if any.
    pub name: String,
    /// The `User-Agent` header.
    pub user_agent: String,
    /// The response status code (200 for a watch that started).
    pub status: u16,
    /// The authenticated user's name (`system:anonymous` for an anonymous
    /// request); absent when authentication is off (no token file) or the
    /// request did not authenticate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// The mutable counters behind [`Stats`].
#[derive(Debug)]
pub(crate) struct Accounting {
    counts: BTreeMap<RequestKey, u64>,
    non_resource: BTreeMap<String, u64>,
    open_watches: BTreeMap<String, usize>,
    log: VecDeque<RequestRecord>,
    log_limit: usize,
    log_dropped: u64,
}

impl Accounting {
    pub(crate) fn new(log_limit: usize) -> Self {
        Self {
            counts: BTreeMap::new(),
            non_resource: BTreeMap::new(),
            open_watches: BTreeMap::new(),
            log: VecDeque::new(),
            log_limit,
            log_dropped: 0,
        }
    }

    pub(crate) fn count(&mut self, key: RequestKey) {
        *self.counts.entry(key).or_default() += 1;
    }

    pub(crate) fn count_non_resource(&mut self, path: &str) {
        *self.non_resource.entry(path.to_owned()).or_default() += 1;
    }

    pub(crate) fn log(&mut self, record: RequestRecord) {
        if self.log_limit == 0 {
            self.log_dropped += 1;
            return;
        }
        if self.log.len() == self.log_limit {
            self.log.pop_front();
            self.log_dropped += 1;
        }
        self.log.push_back(record);
    }

    pub(crate) fn watch_opened(&mut self, resource: &str) {
        *self.open_watches.entry(resource.to_owned()).or_default() += 1;
    }

    pub(crate) fn watch_closed(&mut self, resource: &str) {
        if let Some(n) = self.open_watches.get_mut(resource) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.open_watches.remove(resource);
            }
        }
    }

    pub(crate) fn snapshot(&self) -> Stats {
        Stats {
            requests: self
                .counts
                .iter()
                .map(|(key, count)| RequestCount {
                    key: key.clone(),
                    count: *count,
                })
                .collect(),
            non_resource: self.non_resource.clone(),
            open_watches: self.open_watches.values().sum(),
            open_watches_by_resource: self.open_watches.clone(),
        }
    }

    /// The log, oldest first, and how many older records it dropped.
    pub(crate) fn records(&self) -> (Vec<RequestRecord>, u64) {
        (self.log.iter().cloned().collect(), self.log_dropped)
    }

    /// Forgets counts and the log; open watches stay counted.
    pub(crate) fn reset(&mut self) {
        self.counts.clear();
        self.non_resource.clear();
        self.log.clear();
        self.log_dropped = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(verb: Verb, resource: &str, subresource: &str) -> RequestKey {
        RequestKey {
            verb,
            group: String::new(),
            resource: resource.into(),
            subresource: subresource.into(),
        }
    }

    #[test]
    fn counts_split_by_subresource_and_writes_sum_them() {
        let mut acc = Accounting::new(10);
        acc.count(key(Verb::Patch, "nodes", ""));
        acc.count(key(Verb::Patch, "nodes", "status"));
        acc.count(key(Verb::Patch, "nodes", "status"));
        acc.count(key(Verb::Get, "nodes", ""));
        let stats = acc.snapshot();
        assert_eq!(stats.count(Verb::Patch, "nodes"), 1);
        assert_eq!(stats.count_subresource(Verb::Patch, "nodes", "status"), 2);
        assert_eq!(stats.writes("nodes"), 3);
        assert_eq!(stats.total(), 4);
    }

    #[test]
    fn the_log_keeps_the_newest_records() {
        let mut acc = Accounting::new(2);
        for i in 0..3 {
            acc.log(RequestRecord {
                verb: "get".into(),
                method: "GET".into(),
                path: format!("/{i}"),
                query: String::new(),
                group: String::new(),
                resource: String::new(),
                subresource: String::new(),
                namespace: String::new(),
                name: String::new(),
                user_agent: String::new(),
                status: 200,
                user: None,
            });
        }
        let (records, dropped) = acc.records();
        assert_eq!(
            records.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
            ["/1", "/2"]
        );
        assert_eq!(dropped, 1);
    }

    #[test]
    fn verbs_serialize_as_rbac_spells_them() {
        assert_eq!(
            serde_json::to_string(&Verb::DeleteCollection)
                .ok()
                .as_deref(),
            Some("\"deletecollection\"")
        );
    }
}
