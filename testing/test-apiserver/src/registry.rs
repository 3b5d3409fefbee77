//! The object rules of Kubernetes' generic registry: what create, update and
//! delete do to metadata (uid, creationTimestamp, resourceVersion,
//! generation, finalizers, deletionTimestamp) and their preconditions.
//!
//! Decoding and most of an update's work happen outside the store's lock;
//! an update then commits only if the object is still the version it was
//! derived from (kube-apiserver's `GuaranteedUpdate`), so the lock is held
//! for a version check, one serialization and the bookkeeping.

mod create;
mod delete;
mod update;

use std::sync::Arc;

use serde_json::Value;

use crate::kinds::{self, event};
use crate::meta;
use crate::resources::{Kind, ResourceType};
use crate::status::ApiError;
use crate::store::StoredObject;

pub(crate) use create::create;
pub(crate) use delete::{DeleteOptions, delete};
pub(crate) use update::{Subresource, Target, UpdateError, update};

/// What `fieldValidation` asks of unknown fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

impl FieldValidation {
    /// Parses the `fieldValidation` query parameter.
    ///
    /// # Errors
    ///
    /// 400 for values other than Ignore, Warn and Strict.
    pub(crate) fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Ignore") => Ok(Self::Ignore),
            Some("Strict") => Ok(Self::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn or Strict, got {other:?}"
            ))),
        }
    }
}

/// Options every write takes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WriteOptions {
    pub(crate) dry_run: bool,
    pub(crate) validation: FieldValidation,
}

/// The object a write answers with.
#[derive(Debug)]
pub(crate) enum Written {
    /// As stored: its bytes are sent as they are.
    Stored(Arc<StoredObject>),
    /// Computed but not stored (dry run, a final deletion state).
    Value(Value),
    /// A `Status` (a completed deletion of most kinds).
    Status(Value),
}

/// The outcome of a write.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) code: u16,
    pub(crate) written: Written,
    /// `Warning` headers (unknown fields under `fieldValidation=Warn`).
    pub(crate) warnings: Vec<String>,
}

/// A body decoded as its Kubernetes type, in the storage representation.
#[derive(Debug, Clone)]
pub(crate) struct Decoded {
    pub(crate) value: Value,
    /// Warnings decoding raised (unknown fields under `fieldValidation=Warn`).
    pub(crate) warnings: Vec<String>,
}

/// What a refusal of unknown fields under `fieldValidation=Strict` says.
pub(crate) const STRICT_DECODING: &str = "strict decoding error:";

/// Decodes a patched object under `validation`: as [`decode`], except that
/// unknown fields refused under `fieldValidation=Strict` are 422 Invalid on
/// the field `patch`, as kube-apiserver answers a patch.
///
/// # Errors
///
/// As [`decode`], with that one difference.
pub(crate) fn decode_patched(
    rt: &ResourceType,
    patched: Value,
    validation: FieldValidation,
) -> Result<Decoded, ApiError> {
    let shown = patched.to_string();
    decode(rt, patched, validation).map_err(|err| match err.message.split_once(STRICT_DECODING) {
        Some((_, unknown)) if err.code == 400 => ApiError::invalid(
            "",
            "",
            "",
            &[(
                "patch".to_owned(),
                format!("Invalid value: {shown:?}: {STRICT_DECODING}{unknown}"),
            )],
        ),
        _ => err,
    })
}

/// Decodes a body sent to `rt` as the Kubernetes type of its kind.
///
/// # Errors
///
/// 400 when the body is not a `rt.kind`, or has unknown fields under
/// `fieldValidation=Strict`.
pub(crate) fn decode(
    rt: &ResourceType,
    body: Value,
    validation: FieldValidation,
) -> Result<Decoded, ApiError> {
    decode_with_duplicates(rt, body, &[], validation)
}

/// As [`decode`], for a body that repeated the fields `duplicates` (see
/// [`crate::validation::duplicates`]): refused or warned about as unknown
/// fields are, and before them.
///
/// # Errors
///
/// As [`decode`], and 400 for repeated fields under `fieldValidation=Strict`.
pub(crate) fn decode_with_duplicates(
    rt: &ResourceType,
    mut body: Value,
    duplicates: &[String],
    validation: FieldValidation,
) -> Result<Decoded, ApiError> {
    let api_version = rt.api_version();
    let Some(map) = body.as_object_mut() else {
        return Err(ApiError::bad_request(format!(
            "{} in version {:?} cannot be handled as a {}: the body is not a JSON object",
            rt.kind, rt.version, rt.kind
        )));
    };
    for (field, expected) in [("apiVersion", api_version.as_str()), ("kind", rt.kind)] {
        match map.get(field).and_then(Value::as_str) {
            None | Some("") => {
                map.insert(field.into(), Value::String(expected.into()));
            }
            Some(given) if given != expected => {
                return Err(ApiError::bad_request(format!(
                    "the {field} in the data ({given}) does not match the expected {field} ({expected}) of {}",
                    rt.qualified_plural()
                )));
            }
            Some(_) => {}
        }
    }
    let decoded = kinds::normalize(rt.kind_id, &body).map_err(|e| {
        ApiError::bad_request(format!(
            "{} in version {:?} cannot be handled as a {}: {e}",
            rt.kind, rt.version, rt.kind
        ))
    })?;
    let problems: Vec<String> = duplicates
        .iter()
        .map(|f| format!("duplicate field {f:?}"))
        .chain(
            kinds::unknown_fields(&body, &decoded)
                .iter()
                .map(|f| format!("unknown field {f:?}")),
        )
        .collect();
    let mut warnings = Vec::new();
    match validation {
        FieldValidation::Strict if !problems.is_empty() => {
            return Err(ApiError::bad_request(format!(
                "{} in version {:?} cannot be handled as a {}: {STRICT_DECODING} {}",
                rt.kind,
                rt.version,
                rt.kind,
                problems.join(", ")
            )));
        }
        FieldValidation::Warn => warnings = problems,
        _ => {}
    }
    if rt.kind_id == Kind::EventV1 {
        event::validate_note(&decoded)?;
    }
    let stored = match rt.kind_id {
        Kind::EventV1 => kinds::normalize(Kind::Event, &event::to_core(&decoded))
            .map_err(|e| ApiError::bad_request(format!("cannot convert to core/v1 Event: {e}")))?,
        _ => decoded,
    };
    Ok(Decoded {
        value: stored,
        warnings,
    })
}

/// A stored object as `rt` shows it.
pub(crate) fn view(rt: &ResourceType, stored: &Value) -> Value {
    match rt.kind_id {
        Kind::EventV1 => event::to_events_v1(stored),
        _ => stored.clone(),
    }
}

/// The store key of `name` under `rt` in `namespace`.
pub(crate) fn key(rt: &ResourceType, namespace: Option<&str>, name: &str) -> (String, String) {
    let ns = if rt.namespaced {
        namespace.unwrap_or("")
    } else {
        ""
    };
    (ns.to_owned(), name.to_owned())
}

/// Checks the body's namespace against the URL's and sets it.
fn place_in_namespace(
    rt: &ResourceType,
    obj: &mut Value,
    namespace: Option<&str>,
) -> Result<(), ApiError> {
    if !rt.namespaced {
        meta::set(obj, "namespace", None);
        return Ok(());
    }
    let url_ns = namespace.unwrap_or("");
    match meta::namespace(obj) {
        Some(body_ns) if body_ns != url_ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            meta::set(obj, "namespace", Some(Value::String(url_ns.to_owned())));
            Ok(())
        }
    }
}
