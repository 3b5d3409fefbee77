//! Delete: preconditions, finalizers (the object stays, marked with
//! `deletionTimestamp`, until the last one is removed), graceful Pod
//! deletion, Namespaces held by `spec.finalizers`, and propagation policies.

use serde::Deserialize;
use serde_json::{Value, json};

use super::update::finalized;
use super::{Outcome, Written, key};
use crate::kinds;
use crate::meta;
use crate::resources::{Kind, RESOURCES, ResourceType};
use crate::status::ApiError;
use crate::store::Store;

/// `DeleteOptions`, from the body or the query.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeleteOptions {
    #[serde(default)]
    pub(crate) preconditions: Option<Preconditions>,
    #[serde(default)]
    pub(crate) propagation_policy: Option<String>,
    #[serde(default)]
    pub(crate) grace_period_seconds: Option<i64>,
    #[serde(default)]
    pub(crate) orphan_dependents: Option<bool>,
    #[serde(default)]
    pub(crate) dry_run: Option<Vec<String>>,
}

/// `DeleteOptions.preconditions`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Preconditions {
    #[serde(default)]
    pub(crate) uid: Option<String>,
    #[serde(default)]
    pub(crate) resource_version: Option<String>,
}

impl DeleteOptions {
    fn is_dry_run(&self) -> bool {
        self.dry_run
            .as_ref()
            .is_some_and(|d| d.iter().any(|m| m == "All"))
    }
}

/// Deletes `name`, or marks it for deletion when something holds it.
///
/// # Errors
///
/// 404 for a missing object, 409 for a failed precondition, 422 for an
/// unknown propagation policy, 501 for Foreground or Orphan propagation of
/// an object that has dependents (that needs the garbage collector, which
/// this server does not run).
pub(crate) fn delete(
    store: &mut Store,
    rt: &'static ResourceType,
    namespace: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Outcome, ApiError> {
    let key = key(rt, namespace, name);
    let Some(current) = store.get(rt.storage, &key).cloned() else {
        return Err(ApiError::not_found(rt, name));
    };
    check_preconditions(
        rt,
        name,
        &current.value,
        current.rv,
        opts.preconditions.as_ref(),
    )?;
    check_propagation(store, rt, &current.value, opts)?;
    let kind = rt.storage_type().kind_id;
    let mut next = current.value.clone();
    let holds = hold_for_deletion(kind, &mut next, opts.grace_period_seconds);
    let dry_run = opts.is_dry_run();
    if holds && !finalized(kind, &next) {
        if next == current.value {
            return Ok(Outcome {
                code: 200,
                written: Written::Stored(current),
                warnings: Vec::new(),
            });
        }
        let written = if dry_run {
            Written::Value(next)
        } else {
            Written::Stored(store.put(rt.storage, key, next))
        };
        return Ok(Outcome {
            code: 200,
            written,
            warnings: Vec::new(),
        });
    }
    let last = if dry_run {
        next
    } else {
        store.remove(rt.storage, &key, next).value.clone()
    };
    let written = if kinds::returns_deleted_object(kind) {
        Written::Value(last)
    } else {
        Written::Status(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "group": rt.group, "kind": rt.plural, "uid": meta::uid(&last).unwrap_or("")}
        }))
    };
    Ok(Outcome {
        code: 200,
        written,
        warnings: Vec::new(),
    })
}

fn check_preconditions(
    rt: &ResourceType,
    name: &str,
    obj: &Value,
    rv: u64,
    pre: Option<&Preconditions>,
) -> Result<(), ApiError> {
    let Some(pre) = pre else {
        return Ok(());
    };
    if let Some(uid) = pre.uid.as_deref().filter(|u| !u.is_empty())
        && Some(uid) != meta::uid(obj)
    {
        let why = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta::uid(obj).unwrap_or("")
        );
        return Err(ApiError::conflict(rt, name, &why));
    }
    if let Some(want) = pre.resource_version.as_deref().filter(|v| !v.is_empty())
        && want != rv.to_string()
    {
        let why = format!(
            "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
        );
        return Err(ApiError::conflict(rt, name, &why));
    }
    Ok(())
}

/// Background is what this server does; Foreground and Orphan differ only
/// when the object has dependents, which needs a garbage collector.
fn check_propagation(
    store: &Store,
    rt: &ResourceType,
    obj: &Value,
    opts: &DeleteOptions,
) -> Result<(), ApiError> {
    let policy = match (opts.propagation_policy.as_deref(), opts.orphan_dependents) {
        (Some(p), _) => p,
        (None, Some(true)) => "Orphan",
        (None, _) => "Background",
    };
    match policy {
        "Background" => Ok(()),
        "Foreground" | "Orphan" => {
            let uid = meta::uid(obj).unwrap_or("");
            if has_dependents(store, uid) {
                Err(ApiError::not_implemented(format!(
                    "propagationPolicy {policy} for {} {:?}, which has dependents: that needs the garbage collector",
                    rt.kind,
                    meta::name(obj).unwrap_or("")
                )))
            } else {
                Ok(())
            }
        }
        other => Err(ApiError::invalid(
            "DeleteOptions",
            "meta.k8s.io",
            "",
            &[(
                "propagationPolicy".into(),
                format!(
                    "Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
                ),
            )],
        )),
    }
}

fn has_dependents(store: &Store, uid: &str) -> bool {
    let mut storages: Vec<usize> = RESOURCES.iter().map(|r| r.storage).collect();
    storages.dedup();
    storages.iter().any(|s| {
        store.objects(*s, None).any(|(_, o)| {
            o.value
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    refs.iter()
                        .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
                })
        })
    })
}

/// Marks `obj` deleting when something must finish first (finalizers, a
/// running Pod's grace period, a Namespace's `spec.finalizers`); returns
/// whether anything holds it.
fn hold_for_deletion(kind: Kind, obj: &mut Value, grace: Option<i64>) -> bool {
    let already = meta::deletion_timestamp(obj).is_some();
    if kind == Kind::Pod {
        let grace = pod_grace_period(obj, grace);
        let current = obj
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64);
        if grace > 0 || current.is_some_and(|c| c > 0) {
            let grace = current.map_or(grace, |c| c.min(grace));
            meta::set(obj, "deletionGracePeriodSeconds", Some(Value::from(grace)));
            if !already || grace == 0 {
                meta::set(
                    obj,
                    "deletionTimestamp",
                    Some(Value::String(meta::time_in(grace))),
                );
            }
            return true;
        }
    }
    let spec_finalizers = kind == Kind::Namespace
        && obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
    if meta::finalizers(obj).is_empty() && !spec_finalizers && !already {
        return false;
    }
    if !already {
        meta::set(
            obj,
            "deletionTimestamp",
            Some(Value::String(meta::now_time())),
        );
        meta::set(obj, "deletionGracePeriodSeconds", Some(Value::from(0)));
    }
    if kind == Kind::Namespace {
        kinds::set_path(obj, &["status", "phase"], json!("Terminating"));
    }
    true
}

/// The grace period a Pod gets: none unless it is scheduled and still running.
fn pod_grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let scheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    if !scheduled || finished {
        return 0;
    }
    let period = requested
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30);
    if period < 0 { 1 } else { period }
}
