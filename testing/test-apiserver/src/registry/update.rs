//! Update (PUT, and PATCH once the patch is applied): preconditions,
//! system fields kept, status written only through `/status` and spec
//! never through it, generation
//! bumped on spec changes, no-op writes skipped, and deletion completed when
//! the last finalizer goes.

use std::sync::Arc;

use parking_lot::Mutex;

use serde_json::Value;

use super::{Decoded, Outcome, WriteOptions, Written, create, key, place_in_namespace};
use crate::kinds::{self, ServiceIndex};
use crate::meta;
use crate::resources::{Kind, ResourceType};
use crate::status::ApiError;
use crate::store::{Store, StoredObject};

/// Which part of the object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subresource {
    /// The object; `.status` is kept as it was.
    Main,
    /// `/status`: `.spec` is kept as it was; like kube-apiserver's status
    /// strategies for core kinds, metadata (labels, annotations,
    /// finalizers) may change.
    Status,
    /// `namespaces/<name>/finalize`: `.status` is kept; `spec.finalizers` may change.
    Finalize,
    /// `serviceaccounts/<name>/token`: create only, answered by the
    /// authentication module; never an update.
    Token,
    /// `certificatesigningrequests/<name>/approval`: only the conditions
    /// (Approved, Denied) change.
    Approval,
}

impl Subresource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Main => "",
            Self::Status => "status",
            Self::Finalize => "finalize",
            Self::Token => "token",
            Self::Approval => "approval",
        }
    }
}

/// System fields an update cannot change.
const SYSTEM_FIELDS: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
];

/// The object an update addresses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) rt: &'static ResourceType,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: &'a str,
    pub(crate) sub: Subresource,
}

/// Why an update did not happen.
#[derive(Debug)]
pub(crate) enum UpdateError {
    /// The request is refused.
    Api(ApiError),
    /// The object changed since the candidate was derived from it: derive
    /// it again from the new version.
    Raced,
}

impl From<ApiError> for UpdateError {
    fn from(err: ApiError) -> Self {
        Self::Api(err)
    }
}

/// Replaces `name` with `candidate` (the full object), provided the stored
/// object is still `base` (read now when `None`, as for PUT).
///
/// # Errors
///
/// 404 for a missing object (unless the kind creates on update), 409 for a
/// stale resourceVersion or a different uid, 400 for a name or namespace
/// that differs from the URL's, 422 for a new finalizer on a deleting
/// object or a missing resourceVersion where the kind needs one;
/// [`UpdateError::Raced`] when another write came first.
pub(crate) fn update(
    store: &Mutex<Store>,
    target: Target<'_>,
    candidate: Decoded,
    base: Option<Arc<StoredObject>>,
    opts: WriteOptions,
) -> Result<Outcome, UpdateError> {
    let Target {
        rt,
        namespace,
        name,
        sub,
    } = target;
    let Decoded {
        value: mut cand,
        warnings,
    } = candidate;
    if meta::name(&cand) != Some(name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            meta::name(&cand).unwrap_or("")
        ))
        .into());
    }
    place_in_namespace(rt, &mut cand, namespace)?;
    let key = key(rt, namespace, name);
    let base = match base {
        Some(base) => base,
        None => {
            let mut locked = store.lock();
            let Some(current) = locked.get(rt.storage, &key).cloned() else {
                if sub == Subresource::Main && kinds::allows_create_on_update(rt.kind_id) {
                    meta::set(&mut cand, "resourceVersion", None);
                    return Ok(create(
                        &mut locked,
                        rt,
                        namespace,
                        Decoded {
                            value: cand,
                            warnings,
                        },
                        opts,
                    )?);
                }
                return Err(ApiError::not_found(rt, name).into());
            };
            current
        }
    };
    let old = &base.value;
    check_preconditions(rt, name, &cand, &base)?;
    let stored_type = rt.storage_type();
    let mut next = cand;
    for field in SYSTEM_FIELDS {
        meta::copy(&mut next, old, field);
    }
    // Only Services' rules read shared state (allocations); the rest of an
    // update is worked out before taking the lock.
    let allocates = stored_type.kind_id == Kind::Service;
    if !allocates {
        shape(rt, sub, &mut next, &base, &EMPTY_SERVICES)?;
    }
    let mut locked = store.lock();
    if locked.get(rt.storage, &key).map(|o| o.rv) != Some(base.rv) {
        return Err(UpdateError::Raced);
    }
    if allocates {
        shape(rt, sub, &mut next, &base, &locked.services)?;
    }
    if next == *old {
        return Ok(Outcome {
            code: 200,
            written: Written::Stored(base),
            warnings,
        });
    }
    let written = if opts.dry_run {
        Written::Value(next)
    } else if finalized(stored_type.kind_id, &next) {
        Written::Value(locked.remove(rt.storage, &key, next).value.clone())
    } else {
        Written::Stored(locked.put(rt.storage, key, next))
    };
    Ok(Outcome {
        code: 200,
        written,
        warnings,
    })
}

static EMPTY_SERVICES: ServiceIndex = ServiceIndex::EMPTY;

/// The uid and resourceVersion a candidate carries must be the stored ones;
/// kinds that do not allow unconditional updates need the resourceVersion.
fn check_preconditions(
    rt: &ResourceType,
    name: &str,
    cand: &Value,
    base: &StoredObject,
) -> Result<(), ApiError> {
    if let Some(uid) = meta::uid(cand)
        && Some(uid) != meta::uid(&base.value)
    {
        let why = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta::uid(&base.value).unwrap_or("")
        );
        return Err(ApiError::conflict(rt, name, &why));
    }
    match meta::resource_version(cand) {
        Some(rv) if rv != base.rv.to_string() => Err(ApiError::stale(rt, name)),
        // kube-apiserver names the resource where the kind would be.
        None if !kinds::allows_unconditional_update(rt.storage_type().kind_id) => {
            Err(ApiError::invalid(
                rt.plural,
                rt.group,
                name,
                &[(
                    "metadata.resourceVersion".into(),
                    "Invalid value: 0: must be specified for an update".into(),
                )],
            ))
        }
        _ => Ok(()),
    }
}

/// Applies the rules of the addressed subresource, the finalizer rule and
/// generation to `next`, and gives it `base`'s resourceVersion so that an
/// unchanged object compares equal.
fn shape(
    rt: &ResourceType,
    sub: Subresource,
    next: &mut Value,
    base: &StoredObject,
    services: &ServiceIndex,
) -> Result<(), ApiError> {
    let stored_type = rt.storage_type();
    let old = &base.value;
    match sub {
        Subresource::Main => {
            kinds::prepare_update(
                stored_type.kind_id,
                stored_type.has_status(),
                next,
                old,
                services,
            )?;
        }
        Subresource::Status => kinds::prepare_status_update(stored_type.kind_id, next, old),
        Subresource::Finalize => meta::set_top(next, "status", meta::top(old, "status").clone()),
        Subresource::Approval => {
            let now = jiff::Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string();
            kinds::csr::prepare_approval(next, old, &now)?;
        }
        Subresource::Token => {
            return Err(ApiError::method_not_allowed("PUT", "serviceaccounts/token"));
        }
    }
    check_no_new_finalizers_while_deleting(rt, old, next)?;
    if kinds::bumps_generation(stored_type.kind_id, old, next) {
        meta::set(
            next,
            "generation",
            Some(Value::from(meta::generation(old) + 1)),
        );
    }
    meta::set(
        next,
        "resourceVersion",
        Some(Value::String(base.rv.to_string())),
    );
    Ok(())
}

/// A deleting object may lose finalizers but not gain them.
fn check_no_new_finalizers_while_deleting(
    rt: &ResourceType,
    old: &Value,
    next: &Value,
) -> Result<(), ApiError> {
    if meta::deletion_timestamp(old).is_none() {
        return Ok(());
    }
    let before = meta::finalizers(old);
    let added: Vec<&str> = meta::finalizers(next)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        rt.kind,
        rt.group,
        meta::name(old).unwrap_or(""),
        &[(
            "metadata.finalizers".into(),
            format!(
                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
            ),
        )],
    ))
}

/// Whether a deleting object has nothing left holding it: no finalizers,
/// and no grace period still running (a Pod waiting for its kubelet).
pub(super) fn finalized(kind: Kind, obj: &Value) -> bool {
    let grace = obj
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if meta::deletion_timestamp(obj).is_none() || !meta::finalizers(obj).is_empty() || grace != 0 {
        return false;
    }
    let spec_finalizers = obj
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    !(kind == Kind::Namespace && spec_finalizers)
}
