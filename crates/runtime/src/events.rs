//! Kubernetes events on the objects controllers act on, correlated as
//! client-go's event recorder (`tools/record`) correlates them, so a CCM
//! writes no more Events than upstream's for the same happenings.
//!
//! Each series is remembered by its Event's name and count alone (about a
//! hundred bytes), not by a kube-runtime `Recorder` with its own cache of
//! the whole Event (some 6 KiB each: 2,000 series of a thousand new
//! Services kept 12 MiB).

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::{EventType, Reporter};
use parking_lot::Mutex;
use serde_json::json;
use tokio::time::Instant;

/// Distinct events (object and message) and groups of similar events
/// remembered before the memory is reset (client-go's LRU holds 4096).
const MAX_REMEMBERED: usize = 4096;
/// The longest note, in bytes, kube-apiserver accepts on an events.k8s.io/v1
/// Event (`can have at most 1024 characters`).
const MAX_NOTE_BYTES: usize = 1024;
/// client-go's `defaultAggregateMaxEvents`: similar events (one object,
/// type and reason, each with a new message) past this many distinct
/// messages within [`AGGREGATE_WINDOW`] become one combined Event.
const AGGREGATE_MAX_MESSAGES: usize = 10;
/// client-go's `defaultAggregateIntervalInSeconds`.
const AGGREGATE_WINDOW: Duration = Duration::from_secs(600);
/// client-go's `EventAggregatorByReasonMessageFunc` prefix.
const COMBINED_PREFIX: &str = "(combined from similar events): ";
/// A repeat within this long of the last is counted on its series (as
/// kube-runtime's recorder and client-go's events broadcaster count it);
/// later, it starts a new Event.
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// `note` cut to what kube-apiserver accepts, ending in `...` when cut, as
/// client-go's event recorder does.
fn fit_note(mut note: String) -> String {
    if note.len() <= MAX_NOTE_BYTES {
        return note;
    }
    let mut end = MAX_NOTE_BYTES - 3;
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    note.truncate(end);
    note.push_str("...");
    note
}

fn hash_of(value: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// What client-go's correlator identifies an object by: everything in the
/// reference but its resourceVersion (and, for similar events, field path),
/// so a status write between two events does not make the second a new
/// Event.
fn object_key(object: &ObjectReference) -> impl Hash + '_ {
    (
        &object.api_version,
        &object.kind,
        &object.namespace,
        &object.name,
        &object.uid,
    )
}

/// Similar events seen lately: one object, type and reason.
#[derive(Debug)]
struct Similar {
    /// Hashes of the distinct messages seen.
    notes: HashSet<u64>,
    last: Instant,
}

/// One Event series: the Event it was created as, how often it happened,
/// and when last.
#[derive(Debug, Clone)]
struct Series {
    name: String,
    namespace: String,
    count: i32,
    last: Instant,
}

/// What publishing an event takes.
#[derive(Debug)]
enum Publish {
    /// A new Event.
    Create(Box<Event>),
    /// A repeat: the series' count and the time it was observed.
    Count {
        name: String,
        namespace: String,
        count: i32,
    },
}

#[derive(Default)]
struct Correlator {
    /// Identity of an Event (object, type, reason, message; or the
    /// combined Event of a group of similar ones) → its series.
    series: HashMap<u64, Series>,
    /// Identity of a group of similar events → what it has seen.
    similar: HashMap<u64, Similar>,
}

/// What a new Event is published with.
struct NewEvent<'a> {
    reporter: &'a Reporter,
    object: &'a ObjectReference,
    type_: EventType,
    reason: &'a str,
}

impl NewEvent<'_> {
    /// The Event, named as kube-runtime's recorder names it: the object's
    /// name and the time in hexadecimal nanoseconds.
    fn build(&self, note: String, now: Timestamp) -> Event {
        let object = self.object;
        Event {
            action: Some(self.reason.to_owned()),
            reason: Some(self.reason.to_owned()),
            event_time: Some(MicroTime(now)),
            regarding: Some(object.clone()),
            note: Some(note),
            metadata: ObjectMeta {
                namespace: Some(namespace_of(object)),
                name: Some(format!(
                    "{}.{:x}",
                    object.name.as_deref().unwrap_or(&self.reporter.controller),
                    now.as_nanosecond()
                )),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(
                match self.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            ..Event::default()
        }
    }
}

/// The namespace an Event about `object` goes in: the object's, or
/// `default` for a cluster-scoped object.
fn namespace_of(object: &ObjectReference) -> String {
    object
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned())
}

impl Correlator {
    /// What publishing `note` takes: a new Event, or a count on the series
    /// it repeats; the note is itself, or the combined note once its group
    /// has seen too many distinct ones.
    fn correlate(&mut self, event: &NewEvent<'_>, note: String, now: Instant) -> Publish {
        let object = event.object;
        let kind = matches!(event.type_, EventType::Warning);
        let group = hash_of((object_key(object), kind, event.reason));
        if self.similar.len() >= MAX_REMEMBERED && !self.similar.contains_key(&group) {
            self.similar.clear();
        }
        let similar = self.similar.entry(group).or_insert_with(|| Similar {
            notes: HashSet::new(),
            last: now,
        });
        if now.duration_since(similar.last) > AGGREGATE_WINDOW {
            similar.notes.clear();
        }
        similar.notes.insert(hash_of(&note));
        similar.last = now;
        let (identity, note) = if similar.notes.len() < AGGREGATE_MAX_MESSAGES {
            let identity = hash_of((group, &object.field_path, &note));
            (identity, note)
        } else {
            (
                hash_of((group, COMBINED_PREFIX)),
                fit_note(format!("{COMBINED_PREFIX}{note}")),
            )
        };
        if let Some(series) = self.series.get_mut(&identity)
            && now.duration_since(series.last) < SERIES_WINDOW
        {
            series.count += 1;
            series.last = now;
            return Publish::Count {
                name: series.name.clone(),
                namespace: series.namespace.clone(),
                count: series.count,
            };
        }
        if self.series.len() >= MAX_REMEMBERED {
            self.series
                .retain(|_, s| now.duration_since(s.last) < SERIES_WINDOW);
            if self.series.len() >= MAX_REMEMBERED {
                self.series.clear();
            }
        }
        let created = event.build(note, Timestamp::now());
        self.series.insert(
            identity,
            Series {
                name: created.metadata.name.clone().unwrap_or_default(),
                namespace: namespace_of(object),
                count: 1,
                last: now,
            },
        );
        Publish::Create(Box::new(created))
    }

    /// Forgets the series an Event could not be created for, so its repeat
    /// creates it rather than counting on an Event that does not exist.
    fn forget(&mut self, name: &str) {
        self.series.retain(|_, s| s.name != name);
    }
}

/// Publishes events for one controller. Publishing is best-effort: a failure
/// is logged, never returned, so an event can't fail a reconcile.
///
/// # Guarantees
/// As client-go's event correlator (`EventCorrelator`):
/// - the same event (object, type, reason and message) repeated is one
///   Event whose series count grows, even when the object changed in
///   between (its resourceVersion is not part of the identity);
/// - an event with a new message is a new Event — until the object has had
///   [`AGGREGATE_MAX_MESSAGES`] distinct messages of one type and reason
///   within ten minutes: from then on they are one Event, its note the
///   first such message prefixed `(combined from similar events): `, whose
///   series count grows. (kube-runtime's `Recorder` alone would fold every
///   new message into the old Event, hiding, say, a second bad annotation.)
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    reporter: Reporter,
    correlator: Arc<Mutex<Correlator>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("controller", &self.reporter.controller)
            .finish_non_exhaustive()
    }
}

impl Events {
    /// A publisher reporting as `controller` (upstream's component name,
    /// such as `service-controller`) from instance `instance` (this pod).
    pub fn new(client: kube::Client, controller: &str, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: controller.into(),
            instance,
        };
        Self {
            client,
            reporter,
            correlator: Arc::default(),
        }
    }

    /// A Normal event with `reason` (CamelCase, upstream's) on `object`.
    pub async fn normal(&self, object: &ObjectReference, reason: &str, note: impl Into<String>) {
        self.publish(object, EventType::Normal, reason, note.into())
            .await;
    }

    /// A Warning event with `reason` on `object`.
    pub async fn warning(&self, object: &ObjectReference, reason: &str, note: impl Into<String>) {
        self.publish(object, EventType::Warning, reason, note.into())
            .await;
    }

    async fn publish(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let new = NewEvent {
            reporter: &self.reporter,
            object,
            type_,
            reason,
        };
        let publish = self
            .correlator
            .lock()
            .correlate(&new, fit_note(note), Instant::now());
        let failed = match publish {
            Publish::Create(event) => {
                let namespace = event.metadata.namespace.clone().unwrap_or_default();
                let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
                let created = api.create(&PostParams::default(), &event).await;
                if created.is_err()
                    && let Some(name) = &event.metadata.name
                {
                    self.correlator.lock().forget(name);
                }
                created.err()
            }
            Publish::Count {
                name,
                namespace,
                count,
            } => {
                let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
                let series = json!({"series": {
                    "count": count,
                    "lastObservedTime": MicroTime(Timestamp::now()),
                }});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&series))
                    .await
                    .err()
            }
        };
        if let Some(err) = failed {
            tracing::warn!(reason, object = ?object.name, error = %err, "could not publish event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reporter() -> Reporter {
        Reporter {
            controller: "service-controller".into(),
            instance: None,
        }
    }

    fn service() -> ObjectReference {
        ObjectReference {
            kind: Some("Service".into()),
            name: Some("lb-1".into()),
            namespace: Some("default".into()),
            ..ObjectReference::default()
        }
    }

    fn created(publish: &Publish) -> String {
        match publish {
            Publish::Create(event) => event.metadata.name.clone().unwrap(),
            Publish::Count { .. } => panic!("expected a new Event, got {publish:?}"),
        }
    }

    /// An event of `type_` and `reason` on `object`.
    fn new_event<'a>(
        reporter: &'a Reporter,
        object: &'a ObjectReference,
        type_: EventType,
        reason: &'a str,
    ) -> NewEvent<'a> {
        NewEvent {
            reporter,
            object,
            type_,
            reason,
        }
    }

    #[test]
    fn a_repeat_counts_on_its_series_until_the_window_passes() {
        let (reporter, object) = (reporter(), service());
        let event = new_event(&reporter, &object, EventType::Normal, "EnsuredLoadBalancer");
        let mut correlator = Correlator::default();
        let start = Instant::now();
        let first = created(&correlator.correlate(&event, "Ensured".into(), start));
        match correlator.correlate(&event, "Ensured".into(), start + Duration::from_secs(60)) {
            Publish::Count { name, count, .. } => {
                assert_eq!((name.as_str(), count), (first.as_str(), 2));
            }
            other => panic!("expected a count, got {other:?}"),
        }
        let later = start + Duration::from_secs(60) + SERIES_WINDOW;
        let second = created(&correlator.correlate(&event, "Ensured".into(), later));
        assert_ne!(first, second, "a repeat after the window is a new Event");
        correlator.forget(&second);
        created(&correlator.correlate(&event, "Ensured".into(), later));
    }

    #[test]
    fn a_series_is_remembered_in_a_hundred_bytes() {
        assert!(size_of::<Series>() <= 72, "{}", size_of::<Series>());
        let (reporter, object) = (reporter(), service());
        let event = new_event(
            &reporter,
            &object,
            EventType::Warning,
            "SyncLoadBalancerFailed",
        );
        let Publish::Create(built) =
            Correlator::default().correlate(&event, "no".into(), Instant::now())
        else {
            panic!("a first event is created");
        };
        assert_eq!(built.metadata.namespace.as_deref(), Some("default"));
        assert!(built.metadata.name.unwrap().starts_with("lb-1."));
        assert_eq!(built.type_.as_deref(), Some("Warning"));
        assert_eq!(
            built.reporting_instance.as_deref(),
            Some("service-controller")
        );
        assert_eq!(built.regarding, Some(object));
    }

    #[test]
    fn notes_are_cut_to_what_kube_apiserver_accepts() {
        assert_eq!(fit_note("short".into()), "short");
        let exact = "x".repeat(MAX_NOTE_BYTES);
        assert_eq!(fit_note(exact.clone()), exact);
        let cut = fit_note("é".repeat(MAX_NOTE_BYTES));
        assert!(cut.len() <= MAX_NOTE_BYTES, "{}", cut.len());
        assert!(cut.ends_with("é..."), "cut on a character boundary");
    }
}
