//! Create: a new object gets its name, uid, creationTimestamp, generation
//! and first resourceVersion.

use serde_json::Value;

use super::{Decoded, Outcome, WriteOptions, Written, key, place_in_namespace};
use crate::kinds;
use crate::meta;
use crate::resources::{Kind, ResourceType, by_kind};
use crate::status::ApiError;
use crate::store::Store;
use crate::validation::validate_name;

/// Creates `decoded` as a `rt` in `namespace`.
///
/// # Errors
///
/// 404 when the namespace does not exist, 403 when it is terminating, 409
/// AlreadyExists, 422 for an invalid or missing name or a taken node port.
pub(crate) fn create(
    store: &mut Store,
    rt: &'static ResourceType,
    namespace: Option<&str>,
    decoded: Decoded,
    opts: WriteOptions,
) -> Result<Outcome, ApiError> {
    let Decoded {
        value: mut obj,
        warnings,
    } = decoded;
    place_in_namespace(rt, &mut obj, namespace)?;
    let name = choose_name(store, rt, &obj, namespace)?;
    meta::set(&mut obj, "name", Some(Value::String(name.clone())));
    if let Some(ns) = rt.namespaced.then_some(namespace.unwrap_or("")) {
        check_namespace_open(store, rt, ns, &name)?;
    }
    if meta::resource_version(&obj).is_some() {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let stored_kind = rt.storage_type().kind_id;
    meta::set(&mut obj, "uid", Some(Value::String(store.ids.uid())));
    meta::set(
        &mut obj,
        "creationTimestamp",
        Some(Value::String(meta::now_time())),
    );
    meta::set(&mut obj, "deletionTimestamp", None);
    meta::set(&mut obj, "deletionGracePeriodSeconds", None);
    meta::set(&mut obj, "selfLink", None);
    let generation = kinds::tracks_generation(stored_kind).then(|| Value::from(1));
    meta::set(&mut obj, "generation", generation);
    kinds::prepare_create(stored_kind, &mut obj, &store.services)?;
    let key = key(rt, namespace, &name);
    if store.get(rt.storage, &key).is_some() {
        return Err(ApiError::already_exists(rt, &name));
    }
    let written = if opts.dry_run {
        Written::Value(obj)
    } else {
        Written::Stored(store.put(rt.storage, key, obj))
    };
    Ok(Outcome {
        code: 201,
        written,
        warnings,
    })
}

/// `metadata.name`, or `generateName` plus a suffix no object has.
fn choose_name(
    store: &mut Store,
    rt: &ResourceType,
    obj: &Value,
    namespace: Option<&str>,
) -> Result<String, ApiError> {
    let invalid = |why: String| {
        ApiError::invalid(
            rt.kind,
            rt.group,
            meta::name(obj).unwrap_or(""),
            &[("metadata.name".into(), why)],
        )
    };
    let name = match (meta::name(obj), meta::str_field(obj, "generateName")) {
        (Some(name), _) => name.to_owned(),
        (None, Some(prefix)) => {
            let mut name = String::new();
            for _ in 0..16 {
                name = format!("{prefix}{}", store.ids.name_suffix());
                if store.get(rt.storage, &key(rt, namespace, &name)).is_none() {
                    break;
                }
            }
            name
        }
        (None, None) => {
            return Err(invalid(
                "Required value: name or generateName is required".into(),
            ));
        }
    };
    validate_name(rt.kind_id, &name).map_err(invalid)?;
    Ok(name)
}

/// New objects need their namespace to exist and not be terminating.
fn check_namespace_open(
    store: &Store,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    let namespaces = by_kind(Kind::Namespace);
    match store.get(namespaces.storage, &(String::new(), namespace.to_owned())) {
        None => Err(ApiError::not_found(namespaces, namespace)),
        Some(ns) if meta::deletion_timestamp(&ns.value).is_some() => Err(ApiError::forbidden(
            rt,
            name,
            &format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
        )),
        Some(_) => Ok(()),
    }
}
