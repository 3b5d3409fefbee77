//! Kubernetes events on the objects controllers act on.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use parking_lot::Mutex;

/// Distinct messages remembered before the memory is reset.
const MAX_MESSAGES: usize = 1024;
/// The longest note, in bytes, kube-apiserver accepts on an events.k8s.io/v1
/// Event (`can have at most 1024 characters`).
const MAX_NOTE_BYTES: usize = 1024;

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

/// Publishes events for one controller. Publishing is best-effort: a failure
/// is logged, never returned, so an event can't fail a reconcile.
///
/// # Guarantees
/// As client-go's event correlator: the same event (object, type, reason and
/// message) repeated is one Event whose series count grows; an event with a
/// new message is a new Event. (kube-runtime's `Recorder` alone would fold a
/// new message into the old Event, hiding, say, a second bad annotation.)
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    reporter: Reporter,
    /// One recorder (and so one series cache) per distinct message.
    recorders: Arc<Mutex<HashMap<u64, Recorder>>>,
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
            recorders: Arc::default(),
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

    fn recorder_for(&self, note: &str) -> Recorder {
        let mut hasher = DefaultHasher::new();
        note.hash(&mut hasher);
        let mut recorders = self.recorders.lock();
        if recorders.len() >= MAX_MESSAGES {
            recorders.clear();
        }
        recorders
            .entry(hasher.finish())
            .or_insert_with(|| Recorder::new(self.client.clone(), self.reporter.clone()))
            .clone()
    }

    async fn publish(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let note = fit_note(note);
        let recorder = self.recorder_for(&note);
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(err) = recorder.publish(&event, object).await {
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
