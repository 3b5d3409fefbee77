//! kube-apiserver's impersonation filter: `Impersonate-User`,
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>`
//! headers make a request act as another user, once the requester is
//! authorized to `impersonate` each of them.

use http::HeaderMap;

use parking_lot::Mutex;

use super::{Attributes, Auth, decide, forbidden};
use crate::status::ApiError;
use crate::store::Store;
use crate::user::UserInfo;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// The user `requester` acts as: itself without impersonation headers.
///
/// # Errors
/// 400 for groups, a uid or extras without a user; 403 for an
/// impersonation the requester is not authorized for.
pub(crate) fn apply(
    auth: &Auth,
    store: &Mutex<Store>,
    requester: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect()
    };
    let user = values(USER).into_iter().next();
    let groups = values(GROUP);
    let uid = values(UID).into_iter().next();
    let mut extra: Vec<(String, Vec<String>)> = Vec::new();
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) else {
            continue;
        };
        let Ok(value) = value.to_str() else { continue };
        match extra.iter_mut().find(|(k, _)| k == key) {
            Some((_, list)) => list.push(value.to_owned()),
            None => extra.push((key.to_owned(), vec![value.to_owned()])),
        }
    }
    let Some(name) = user else {
        if groups.is_empty() && uid.is_none() && extra.is_empty() {
            return Ok(requester);
        }
        return Err(ApiError::bad_request(
            "requested impersonation of groups, a uid or extras without impersonating a user",
        ));
    };
    let check = |attrs: Attributes| -> Result<(), ApiError> {
        let decision = decide(auth, store, &requester, &attrs);
        if decision.allowed {
            Ok(())
        } else {
            Err(forbidden(&requester, &attrs, &decision.reason))
        }
    };
    let attrs =
        |group: &str, resource: &str, subresource: &str, namespace: &str, name: &str| Attributes {
            verb: "impersonate".to_owned(),
            resource_request: true,
            group: group.to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            ..Attributes::default()
        };
    let account = name
        .strip_prefix(SERVICE_ACCOUNT_PREFIX)
        .and_then(|rest| rest.split_once(':'))
        .map(|(namespace, account)| (namespace.to_owned(), account.to_owned()));
    match &account {
        Some((namespace, account)) => check(attrs("", "serviceaccounts", "", namespace, account))?,
        None => check(attrs("", "users", "", "", &name))?,
    }
    for group in &groups {
        check(attrs("", "groups", "", "", group))?;
    }
    if let Some(uid) = &uid {
        check(attrs("authentication.k8s.io", "uids", "", "", uid))?;
    }
    for (key, list) in &extra {
        for value in list {
            check(attrs("authentication.k8s.io", "userextras", key, "", value))?;
        }
    }
    let mut impersonated = UserInfo {
        name,
        uid: uid.unwrap_or_default(),
        groups,
        extra,
    };
    if let Some((namespace, _)) = account
        && impersonated.groups.is_empty()
    {
        impersonated.groups = vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{namespace}"),
        ];
    }
    Ok(if impersonated.name == "system:anonymous" {
        impersonated
    } else {
        impersonated.authenticated()
    })
}
