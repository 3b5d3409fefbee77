//! The create-only resources of authentication and authorization:
//! TokenReview, SubjectAccessReview, SelfSubjectAccessReview, and
//! TokenRequest (`serviceaccounts/<name>/token`). Nothing is stored.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::authentication::v1 as authn;
use k8s_openapi::api::authorization::v1 as authz;
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::tokens::{self, Issued};
use super::{API_AUDIENCES, Attributes, Auth, decide};
use crate::resources::{Kind, ReviewType, by_kind};
use crate::status::ApiError;
use crate::store::Store;
use crate::user::UserInfo;

/// The shortest and longest token lifetimes TokenRequest accepts.
const MIN_EXPIRATION: i64 = 600;
const MAX_EXPIRATION: i64 = 1 << 32;
const DEFAULT_EXPIRATION: i64 = 3600;

/// Decodes `body` as `T` (apiVersion and kind defaulted, checked when given).
fn decode<T: DeserializeOwned + Serialize>(
    mut body: Value,
    api_version: &str,
    kind: &str,
) -> Result<(T, Value), ApiError> {
    let map = body
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request(format!("the body is not a {kind} object")))?;
    for (field, expected) in [("apiVersion", api_version), ("kind", kind)] {
        match map.get(field).and_then(Value::as_str) {
            None | Some("") => {
                map.insert(field.into(), expected.into());
            }
            Some(given) if given != expected => {
                return Err(ApiError::bad_request(format!(
                    "the {field} in the data ({given}) does not match the expected {field} ({expected})"
                )));
            }
            Some(_) => {}
        }
    }
    let typed: T = serde_json::from_value(body).map_err(|e| {
        ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: {e}"
        ))
    })?;
    let normalized = serde_json::to_value(&typed)
        .map_err(|e| ApiError::internal(format!("encoding {kind}: {e}")))?;
    Ok((typed, normalized))
}

/// A review's answer: the spec as sent, the status computed.
fn answer(api_version: &str, kind: &str, normalized: &Value, status: Value) -> Value {
    let mut answer = json!({
        "kind": kind,
        "apiVersion": api_version,
        "metadata": {"creationTimestamp": null},
        "spec": normalized.get("spec").cloned().unwrap_or_else(|| json!({})),
    });
    answer["status"] = status;
    answer
}

/// 422 as kube-apiserver words it for these kinds.
fn invalid(
    qualified_kind: &str,
    group: &str,
    kind: &str,
    name: &str,
    field: &str,
    why: &str,
) -> ApiError {
    let mut details = Map::new();
    if !name.is_empty() {
        details.insert("name".into(), name.into());
    }
    details.insert("group".into(), group.into());
    if !kind.is_empty() {
        details.insert("kind".into(), kind.into());
    }
    details.insert(
        "causes".into(),
        json!([{"reason": "FieldValueInvalid", "message": why, "field": field}]),
    );
    ApiError::new(
        422,
        "Invalid",
        format!("{qualified_kind} \"{name}\" is invalid: {field}: {why}"),
    )
    .with_details(Value::Object(details))
}

/// Answers a POST of `review` by `requester` (`None`: authentication off).
pub(crate) fn serve(
    auth: &Auth,
    store: &Mutex<Store>,
    review: &ReviewType,
    requester: Option<&UserInfo>,
    body: Value,
) -> Result<(u16, Value), ApiError> {
    let api_version = format!("{}/v1", review.group);
    match review.kind {
        "TokenReview" => token_review(auth, store, &api_version, body),
        "SubjectAccessReview" => {
            let (sar, normalized): (authz::SubjectAccessReview, _) =
                decode(body, &api_version, review.kind)?;
            let spec = sar.spec;
            let user = UserInfo {
                name: spec.user.clone().unwrap_or_default(),
                uid: spec.uid.clone().unwrap_or_default(),
                groups: spec.groups.clone().unwrap_or_default(),
                extra: Vec::new(),
            };
            if user.name.is_empty() && user.groups.is_empty() {
                return Err(invalid(
                    ".authorization.k8s.io",
                    review.group,
                    "",
                    "",
                    "spec.user",
                    "Invalid value: \"\": at least one of user or group must be specified",
                ));
            }
            let attrs = review_attributes(spec.resource_attributes, spec.non_resource_attributes)?;
            Ok((
                201,
                access_answer(
                    auth,
                    store,
                    &api_version,
                    review.kind,
                    &normalized,
                    Some(&user),
                    &attrs,
                ),
            ))
        }
        _ => {
            let (ssar, normalized): (authz::SelfSubjectAccessReview, _) =
                decode(body, &api_version, review.kind)?;
            let spec = ssar.spec;
            let attrs = review_attributes(spec.resource_attributes, spec.non_resource_attributes)?;
            Ok((
                201,
                access_answer(
                    auth,
                    store,
                    &api_version,
                    review.kind,
                    &normalized,
                    requester,
                    &attrs,
                ),
            ))
        }
    }
}

fn token_review(
    auth: &Auth,
    store: &Mutex<Store>,
    api_version: &str,
    body: Value,
) -> Result<(u16, Value), ApiError> {
    let (review, normalized): (authn::TokenReview, _) = decode(body, api_version, "TokenReview")?;
    let token = review.spec.token.unwrap_or_default();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let audiences = match review.spec.audiences {
        Some(a) if !a.is_empty() => a,
        _ => API_AUDIENCES.iter().map(|a| a.to_string()).collect(),
    };
    let status = match auth.token_user(store, &token, &audiences) {
        Ok((user, audiences)) => {
            let mut shown = json!({"username": user.name, "uid": user.uid, "groups": user.groups});
            if !user.extra.is_empty() {
                shown["extra"] = user
                    .extra
                    .iter()
                    .map(|(key, values)| (key.clone(), json!(values)))
                    .collect::<Map<_, _>>()
                    .into();
            }
            json!({"authenticated": true, "user": shown, "audiences": audiences})
        }
        Err(error) => json!({"user": {}, "error": error}),
    };
    Ok((201, answer(api_version, "TokenReview", &normalized, status)))
}

/// The attributes a (Self)SubjectAccessReview asks about.
fn review_attributes(
    resource: Option<authz::ResourceAttributes>,
    non_resource: Option<authz::NonResourceAttributes>,
) -> Result<Attributes, ApiError> {
    let s = |v: Option<String>| v.unwrap_or_default();
    match (resource, non_resource) {
        (Some(r), None) => Ok(Attributes {
            verb: s(r.verb),
            resource_request: true,
            path: String::new(),
            group: s(r.group),
            version: s(r.version),
            resource: s(r.resource),
            subresource: s(r.subresource),
            namespace: s(r.namespace),
            name: s(r.name),
        }),
        (None, Some(n)) => Ok(Attributes {
            verb: s(n.verb),
            path: s(n.path),
            ..Attributes::default()
        }),
        // 1.37's words: the path is `spec` when neither is given (1.35 and
        // 1.36 name `spec.resourceAttributes`), and the value JSON.
        (r, _) => Err(invalid(
            ".authorization.k8s.io",
            "authorization.k8s.io",
            "",
            "",
            if r.is_some() {
                "spec.resourceAttributes"
            } else {
                "spec"
            },
            &format!(
                "Invalid value: {}: exactly one of nonResourceAttributes or resourceAttributes must be specified",
                if r.is_some() { "\"object\"" } else { "null" }
            ),
        )),
    }
}

fn access_answer(
    auth: &Auth,
    store: &Mutex<Store>,
    api_version: &str,
    kind: &str,
    normalized: &Value,
    user: Option<&UserInfo>,
    attrs: &Attributes,
) -> Value {
    let decision = match user {
        Some(user) => decide(auth, store, user, attrs),
        None => super::rbac::Decision {
            allowed: true,
            reason: String::new(),
        },
    };
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = decision.reason.into();
    }
    answer(api_version, kind, normalized, status)
}

/// `POST .../namespaces/<ns>/serviceaccounts/<name>/token`.
pub(crate) fn token_request(
    auth: &Auth,
    store: &Mutex<Store>,
    namespace: &str,
    name: &str,
    body: Value,
) -> Result<(u16, Value), ApiError> {
    let group = "authentication.k8s.io";
    let (request, _): (authn::TokenRequest, _) =
        decode(body, &format!("{group}/v1"), "TokenRequest")?;
    if request.spec.bound_object_ref.is_some() {
        return Err(ApiError::not_implemented(
            "TokenRequest spec.boundObjectRef",
        ));
    }
    // kube-apiserver's order: the body's name and namespace, the account,
    // then the lifetime (whose message names no object).
    for (field, given, url, what) in [
        ("metadata.name", &request.metadata.name, name, "name"),
        (
            "metadata.namespace",
            &request.metadata.namespace,
            namespace,
            "namespace",
        ),
    ] {
        if let Some(given) = given.as_deref().filter(|g| !g.is_empty() && *g != url) {
            return Err(invalid(
                "TokenRequest.authentication.k8s.io",
                group,
                "TokenRequest",
                name,
                field,
                &format!(
                    "Invalid value: {given:?}: must match the service account {what} if specified"
                ),
            ));
        }
    }
    let rt = by_kind(Kind::ServiceAccount);
    let uid = store
        .lock()
        .get(rt.storage, &(namespace.to_owned(), name.to_owned()))
        .and_then(|sa| crate::meta::uid(&sa.value).map(str::to_owned))
        .ok_or_else(|| ApiError::not_found(rt, name))?;
    let seconds = request
        .spec
        .expiration_seconds
        .unwrap_or(DEFAULT_EXPIRATION);
    let too = if seconds < MIN_EXPIRATION {
        Some("may not specify a duration less than 10 minutes")
    } else if seconds > MAX_EXPIRATION {
        Some("may not specify a duration larger than 2^32 seconds")
    } else {
        None
    };
    if let Some(why) = too {
        return Err(invalid(
            "TokenRequest.authentication.k8s.io",
            group,
            "TokenRequest",
            "",
            "spec.expirationSeconds",
            &format!("Invalid value: {seconds}: {why}"),
        ));
    }
    let audiences = match request.spec.audiences {
        a if !a.is_empty() => a,
        _ => API_AUDIENCES.iter().map(|a| a.to_string()).collect(),
    };
    let random_failed = |e: std::io::Error| ApiError::internal(format!("no random token: {e}"));
    let secs = u64::try_from(seconds).unwrap_or(0);
    let issued = Issued {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid,
        audiences: audiences.clone(),
        expires: SystemTime::now() + Duration::from_secs(secs),
        credential_id: tokens::random_uuid().map_err(random_failed)?,
    };
    let token = auth.issued.lock().issue(issued).map_err(random_failed)?;
    Ok((
        201,
        json!({
            "kind": "TokenRequest",
            "apiVersion": format!("{group}/v1"),
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": crate::meta::now_time()},
            "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": null},
            "status": {"token": token, "expirationTimestamp": crate::meta::time_in(seconds)}
        }),
    ))
}
