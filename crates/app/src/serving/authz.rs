//! Delegated authorization, as upstream's union: `system:masters` and the
//! always-allowed paths pass; anything else is a SubjectAccessReview for the
//! non-resource path and verb, allowed and denied answers cached for their
//! own TTLs (but for anonymous denials, which are not kept).

use std::time::Duration;

use axum::http::Method;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};

use super::AuthorizationOptions;
use super::authn::User;
use super::cache::{Key, TtlCache};
use super::review::{self, ReviewError};

/// Upstream's `AlwaysAllowGroups` for the CCM.
const PRIVILEGED_GROUP: &str = "system:masters";

/// What a request asks to do.
#[derive(Debug, Clone)]
pub(crate) struct Attributes {
    pub(crate) user: User,
    pub(crate) verb: &'static str,
    pub(crate) path: String,
}

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Allow,
    /// Denied, or no authorizer had an opinion; `reason` as the review gave it.
    Deny {
        reason: String,
    },
}

/// Why no decision could be made (answered 500).
#[derive(Debug, thiserror::Error)]
#[error("SubjectAccessReview failed: {0}")]
pub(crate) struct AuthorizeError(#[source] ReviewError);

/// Upstream's request-info verb of a non-resource request.
pub(crate) fn verb(method: &Method) -> &'static str {
    match *method {
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        Method::OPTIONS => "options",
        Method::CONNECT => "connect",
        Method::TRACE => "trace",
        _ => "unknown",
    }
}

/// The delegated authorizer.
pub(super) struct Authorizer {
    /// Always-allowed paths without their leading `/`.
    exact: Vec<String>,
    prefixes: Vec<String>,
    client: kube::Client,
    allow_ttl: Duration,
    deny_ttl: Duration,
    cache: TtlCache<Decision>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("exact", &self.exact)
            .field("prefixes", &self.prefixes)
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    pub(super) fn new(options: &AuthorizationOptions, client: kube::Client) -> Self {
        let mut exact = Vec::new();
        let mut prefixes = Vec::new();
        for path in &options.always_allow_paths {
            let path = path.strip_prefix('/').unwrap_or(path);
            match path.strip_suffix('*') {
                Some(prefix) if !path.is_empty() => prefixes.push(prefix.to_owned()),
                _ => exact.push(path.to_owned()),
            }
        }
        Self {
            exact,
            prefixes,
            client,
            allow_ttl: options.allow_ttl,
            deny_ttl: options.deny_ttl,
            cache: TtlCache::default(),
        }
    }

    /// Upstream's path authorizer: exact, or a prefix given with a
    /// trailing `*`; leading slashes ignored.
    fn always_allowed(&self, path: &str) -> bool {
        let path = path.strip_prefix('/').unwrap_or(path);
        self.exact.iter().any(|p| p == path)
            || self.prefixes.iter().any(|p| path.starts_with(p.as_str()))
    }

    /// Allows or denies `attributes`.
    ///
    /// # Errors
    /// The review could not be made; nothing is cached then.
    pub(super) async fn authorize(
        &self,
        attributes: &Attributes,
    ) -> Result<Decision, AuthorizeError> {
        if attributes.user.groups.iter().any(|g| g == PRIVILEGED_GROUP)
            || self.always_allowed(&attributes.path)
        {
            return Ok(Decision::Allow);
        }
        let review = SubjectAccessReview {
            spec: spec(attributes),
            ..SubjectAccessReview::default()
        };
        let key = Key::of(&serde_json::to_vec(&review.spec).unwrap_or_default());
        let fetch = async {
            let answer = review::create(&self.client, &review)
                .await
                .map_err(AuthorizeError)?;
            let status = answer.status.unwrap_or_default();
            Ok(if status.allowed {
                (Decision::Allow, self.allow_ttl)
            } else {
                let reason = status.reason.unwrap_or_default();
                // Anyone can make an anonymous denial, so keeping them would
                // let strangers fill the cache (upstream keeps them).
                let ttl = if attributes.user.is_anonymous() {
                    Duration::ZERO
                } else {
                    self.deny_ttl
                };
                (Decision::Deny { reason }, ttl)
            })
        };
        self.cache.get_or_fetch(key, fetch).await
    }
}

fn spec(attributes: &Attributes) -> SubjectAccessReviewSpec {
    let user = &attributes.user;
    SubjectAccessReviewSpec {
        non_resource_attributes: Some(NonResourceAttributes {
            path: Some(attributes.path.clone()),
            verb: Some(attributes.verb.to_owned()),
        }),
        user: Some(user.name.clone()),
        groups: Some(user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
        uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
        resource_attributes: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_follow_upstream_request_info() {
        assert_eq!(verb(&Method::GET), "get");
        assert_eq!(verb(&Method::HEAD), "get");
        assert_eq!(verb(&Method::POST), "create");
        assert_eq!(verb(&Method::PUT), "update");
        assert_eq!(verb(&Method::PATCH), "patch");
        assert_eq!(verb(&Method::DELETE), "delete");
    }

    #[tokio::test]
    async fn always_allowed_paths_are_exact_or_prefixes() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let authorizer = Authorizer::new(
            &AuthorizationOptions {
                kubeconfig: None,
                always_allow_paths: vec!["/healthz".into(), "/debug/*".into()],
                allow_ttl: Duration::from_secs(10),
                deny_ttl: Duration::from_secs(10),
            },
            client,
        );
        assert!(authorizer.always_allowed("/healthz"));
        assert!(
            !authorizer.always_allowed("/healthz/ping"),
            "exact, as upstream"
        );
        assert!(authorizer.always_allowed("/debug/pprof/heap"));
        assert!(!authorizer.always_allowed("/metrics"));
    }
}
