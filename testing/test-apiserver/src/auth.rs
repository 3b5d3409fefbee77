//! Authentication and authorization, as kube-apiserver does them with
//! `--token-auth-file`, anonymous requests allowed and
//! `--authorization-mode=RBAC`: bearer tokens from the static token file and
//! from TokenRequest, the RBAC authorizer over the stored roles, and the
//! reviews (TokenReview, SubjectAccessReview) answered from the same.
//!
//! Without a token file there is no authentication: every request is an
//! administrator, as this server always was.

pub(crate) mod approval;
mod attributes;
pub(crate) use attributes::exact_name;
mod bootstrap;
mod impersonation;
mod rbac;
pub(crate) mod reviews;
pub(crate) mod tokens;

use std::fmt;
use std::str::FromStr;
use std::time::SystemTime;

use http::Method;
use parking_lot::Mutex;

use crate::api::Params;
use crate::resources::{Kind, by_kind};
use crate::status::ApiError;
use crate::store::Store;
use crate::user::UserInfo;
pub(crate) use attributes::Attributes;
pub(crate) use bootstrap::{seed_client_ca, seed_policy};
use tokens::{IssuedTokens, MASTERS, StaticTokens};

/// The audiences of this API server: kube-apiserver's default, its
/// `--service-account-issuer` as the test control plane sets it.
pub(crate) const API_AUDIENCES: &[&str] = &["https://kubernetes.default.svc.cluster.local"];

/// Which authorizer decides requests (`--authorization-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthorizationMode {
    /// Every authenticated request is allowed (the default).
    #[default]
    AlwaysAllow,
    /// kube-apiserver's RBAC authorizer over the stored Roles,
    /// ClusterRoles and bindings; `system:masters` may do anything.
    Rbac,
}

impl FromStr for AuthorizationMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "AlwaysAllow" => Ok(Self::AlwaysAllow),
            "RBAC" => Ok(Self::Rbac),
            other => Err(format!(
                "{other:?} is not an authorization mode this server implements (AlwaysAllow, RBAC)"
            )),
        }
    }
}

impl fmt::Display for AuthorizationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::AlwaysAllow => "AlwaysAllow",
            Self::Rbac => "RBAC",
        })
    }
}

/// The server's authentication and authorization settings and tokens.
#[derive(Debug, Default)]
pub(crate) struct Auth {
    /// `None`: no authentication, every request an administrator.
    pub(crate) static_tokens: Option<StaticTokens>,
    pub(crate) issued: Mutex<IssuedTokens>,
    pub(crate) mode: AuthorizationMode,
    pub(crate) anonymous: bool,
}

/// Why a token does not authenticate, as TokenReview's `status.error` says.
const INVALID_TOKEN: &str = "invalid bearer token";

impl Auth {
    /// The user of `token` for `audiences` and the audiences it is good
    /// for, or TokenReview's error.
    pub(crate) fn token_user(
        &self,
        store: &Mutex<Store>,
        token: &str,
        audiences: &[String],
    ) -> Result<(UserInfo, Vec<String>), String> {
        if let Some(user) = self.static_tokens.as_ref().and_then(|t| t.user(token)) {
            // Static tokens are good for the API server's own audiences only.
            let good: Vec<String> = audiences
                .iter()
                .filter(|a| API_AUDIENCES.contains(&a.as_str()))
                .cloned()
                .collect();
            if good.is_empty() {
                return Err(INVALID_TOKEN.to_owned());
            }
            return Ok((user.clone().authenticated(), good));
        }
        let issued = self
            .issued
            .lock()
            .get(token)
            .cloned()
            .ok_or_else(|| INVALID_TOKEN.to_owned())?;
        let good: Vec<String> = audiences
            .iter()
            .filter(|a| issued.audiences.contains(a))
            .cloned()
            .collect();
        if good.is_empty() {
            return Err(format!(
                "[{INVALID_TOKEN}, token audiences {:?} is invalid for the target audiences {:?}]",
                issued.audiences, audiences
            ));
        }
        if issued.expires <= SystemTime::now() {
            return Err(format!(
                "[{INVALID_TOKEN}, service account token has expired]"
            ));
        }
        let rt = by_kind(Kind::ServiceAccount);
        let key = (issued.namespace.clone(), issued.name.clone());
        let current_uid = store
            .lock()
            .get(rt.storage, &key)
            .and_then(|sa| crate::meta::uid(&sa.value).map(str::to_owned));
        if current_uid.as_deref() != Some(issued.uid.as_str()) {
            return Err(format!(
                "[{INVALID_TOKEN}, service account {}/{} has been deleted]",
                issued.namespace, issued.name
            ));
        }
        let ns = &issued.namespace;
        let user = UserInfo {
            name: format!("system:serviceaccount:{ns}:{}", issued.name),
            uid: issued.uid.clone(),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{ns}"),
            ],
            extra: vec![(
                "authentication.kubernetes.io/credential-id".to_owned(),
                vec![format!("JTI={}", issued.credential_id)],
            )],
        };
        Ok((user.authenticated(), good))
    }

    /// The user of a request with this `Authorization` header: `None` when
    /// authentication is off.
    ///
    /// # Errors
    ///
    /// 401 for a bearer token that does not authenticate, or no token when
    /// anonymous requests are off.
    pub(crate) fn authenticate(
        &self,
        store: &Mutex<Store>,
        authorization: Option<&str>,
    ) -> Result<Option<UserInfo>, ApiError> {
        if self.static_tokens.is_none() {
            return Ok(None);
        }
        // As kube-apiserver's bearer token authenticator reads the header.
        let token = authorization.and_then(|header| {
            let mut parts = header.splitn(3, ' ');
            let scheme = parts.next()?;
            let token = parts.next()?;
            (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
        });
        match token {
            None if self.anonymous => Ok(Some(UserInfo::anonymous())),
            None => Err(unauthorized()),
            Some(token) => {
                let audiences: Vec<String> = API_AUDIENCES.iter().map(|a| a.to_string()).collect();
                self.token_user(store, token, &audiences)
                    .map(|(user, _)| Some(user))
                    .map_err(|_| unauthorized())
            }
        }
    }
}

/// kube-apiserver's 401.
fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

/// Decides `attrs` for `user` under `auth`'s mode, RBAC reading the
/// roles and bindings in `store`.
pub(crate) fn decide(
    auth: &Auth,
    store: &Mutex<Store>,
    user: &UserInfo,
    attrs: &Attributes,
) -> rbac::Decision {
    if user.groups.iter().any(|g| g == MASTERS) || auth.mode == AuthorizationMode::AlwaysAllow {
        return rbac::Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    rbac::authorize(&store.lock(), user, attrs)
}

/// Authenticates, impersonates and authorizes a request before it is
/// routed, as kube-apiserver's filters do: answers its user (`None` when
/// authentication is off) and whether it may go on.
pub(crate) fn admit(
    auth: &Auth,
    store: &Mutex<Store>,
    method: &Method,
    path: &str,
    params: &Params,
    headers: &http::HeaderMap,
) -> (Option<UserInfo>, Result<(), ApiError>) {
    let authorization = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let user = match auth.authenticate(store, authorization) {
        Ok(Some(user)) => user,
        Ok(None) => return (None, Ok(())),
        Err(e) => return (None, Err(e)),
    };
    let user = match impersonation::apply(auth, store, user.clone(), headers) {
        Ok(acting) => acting,
        Err(e) => return (Some(user), Err(e)),
    };
    let attrs = Attributes::of_request(method, path, params);
    let decision = decide(auth, store, &user, &attrs);
    let result = if decision.allowed {
        Ok(())
    } else {
        Err(forbidden(&user, &attrs, &decision.reason))
    };
    (Some(user), result)
}

/// kube-apiserver's 403 for a request it did not authorize.
fn forbidden(user: &UserInfo, attrs: &Attributes, reason: &str) -> ApiError {
    let mut why = if !attrs.resource_request {
        format!(
            "User {:?} cannot {} path {:?}",
            user.name, attrs.verb, attrs.path
        )
    } else {
        let resource = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        let scope = if attrs.namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!("in the namespace {:?}", attrs.namespace)
        };
        format!(
            "User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
            user.name, attrs.verb, attrs.group
        )
    };
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    let qualified = match (attrs.resource.as_str(), attrs.group.as_str()) {
        ("", _) => String::new(),
        (resource, "") => resource.to_owned(),
        (resource, group) => format!("{resource}.{group}"),
    };
    let message = match (qualified.as_str(), attrs.name.as_str()) {
        ("", _) => format!("forbidden: {why}"),
        (q, "") => format!("{q} is forbidden: {why}"),
        (q, name) => format!("{q} {name:?} is forbidden: {why}"),
    };
    let mut details = serde_json::Map::new();
    for (field, value) in [
        ("name", &attrs.name),
        ("group", &attrs.group),
        ("kind", &attrs.resource),
    ] {
        if !value.is_empty() {
            details.insert(field.to_owned(), value.clone().into());
        }
    }
    ApiError::new(403, "Forbidden", message).with_details(details.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_says_what_kube_apiserver_says() {
        let user = UserInfo {
            name: "u".into(),
            ..UserInfo::default()
        };
        let attrs =
            Attributes::of_request(&Method::PATCH, "/api/v1/nodes/x/status", &Params::default());
        let status = forbidden(&user, &attrs, "").to_status();
        assert_eq!(
            status["message"],
            "nodes \"x\" is forbidden: User \"u\" cannot patch resource \"nodes/status\" in API group \"\" at the cluster scope"
        );
        assert_eq!(
            status["details"],
            serde_json::json!({"name": "x", "kind": "nodes"})
        );
        let attrs = Attributes::of_request(&Method::GET, "/api", &Params::default());
        let status = forbidden(&user, &attrs, "").to_status();
        assert_eq!(
            status["message"],
            "forbidden: User \"u\" cannot get path \"/api\""
        );
        assert_eq!(status["details"], serde_json::json!({}));
    }

    #[test]
    fn bearer_headers_are_read_as_kube_apiserver_reads_them() {
        let auth = Auth {
            static_tokens: Some(StaticTokens::default()),
            anonymous: true,
            ..Auth::default()
        };
        let store = Mutex::new(Store::new(10));
        let anonymous = auth
            .authenticate(&store, Some("Basic abc"))
            .expect("anonymous");
        assert_eq!(
            anonymous.map(|u| u.name),
            Some("system:anonymous".to_owned())
        );
        let unknown = auth
            .authenticate(&store, Some("Bearer nope"))
            .expect_err("401");
        assert_eq!(
            (unknown.code, unknown.message.as_str()),
            (401, "Unauthorized")
        );
        let strict = Auth {
            anonymous: false,
            ..auth
        };
        assert_eq!(
            strict.authenticate(&store, None).map_err(|e| e.code),
            Err(401)
        );
        let off = Auth::default();
        assert_eq!(off.authenticate(&store, Some("Bearer nope")), Ok(None));
    }
}
