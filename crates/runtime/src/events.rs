//! Kubernetes events on the objects controllers act on, correlated as
//! client-go's event recorder (`tools/record`) correlates them, so a CCM
//! writes no more Events than upstream's for the same happenings.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use parking_lot::Mutex;
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

/// One Event series: kube-runtime's recorder, whose cache turns a repeat
/// into a series patch, and the reference as first published (a repeat
/// keeps it, as client-go's patch keeps `involvedObject`).
#[derive(Clone)]
struct Series {
    recorder: Recorder,
    object: ObjectReference,
}

#[derive(Default)]
struct Correlator {
    /// Identity of an Event (object, type, reason, message; or the
    /// combined Event of a group of similar ones) → its series.
    series: HashMap<u64, Series>,
    /// Identity of a group of similar events → what it has seen.
    similar: HashMap<u64, Similar>,
}

impl Correlator {
    /// The series `note` joins, and the note to publish: the note itself, or
    /// the combined note once its group has seen too many distinct ones.
    fn correlate(
        &mut self,
        new_recorder: impl FnOnce() -> Recorder,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
        now: Instant,
    ) -> (Series, String) {
        let kind = matches!(type_, EventType::Warning);
        let group = hash_of((object_key(object), kind, reason));
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
        if self.series.len() >= MAX_REMEMBERED && !self.series.contains_key(&identity) {
            self.series.clear();
        }
        let series = self
            .series
            .entry(identity)
            .or_insert_with(|| Series {
                recorder: new_recorder(),
                object: object.clone(),
            })
            .clone();
        (series, note)
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
        let (series, note) = self.correlator.lock().correlate(
            || Recorder::new(self.client.clone(), self.reporter.clone()),
            object,
            type_,
            reason,
            fit_note(note),
            Instant::now(),
        );
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(err) = series.recorder.publish(&event, &series.object).await {
            tracing::warn!(reason, object = ?object.name, error = %err, "could not publish event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_NOTE_BYTES, fit_note};

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
