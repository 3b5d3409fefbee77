//! Fault injection: answering chosen requests with an error, and latency.

use std::collections::VecDeque;
use std::time::Duration;

use crate::stats::{RequestKey, Verb};
use crate::status::ApiError;

/// Which requests an injected failure applies to; unset parts match anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestMatch {
    verb: Option<Verb>,
    resource: Option<String>,
    subresource: Option<String>,
    user: Option<String>,
}

impl RequestMatch {
    /// Every resource request.
    pub fn any() -> Self {
        Self::default()
    }

    /// Requests with `verb`.
    pub fn verb(verb: Verb) -> Self {
        Self {
            verb: Some(verb),
            ..Self::default()
        }
    }

    /// Only requests on `resource` (plural, any group).
    #[must_use]
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Only requests on `subresource` (`""` for the main resource).
    #[must_use]
    pub fn subresource(mut self, subresource: impl Into<String>) -> Self {
        self.subresource = Some(subresource.into());
        self
    }

    /// Only requests of the authenticated user `name`, as a network
    /// partition between one client and the server looks to that client.
    #[must_use]
    pub fn user(mut self, name: impl Into<String>) -> Self {
        self.user = Some(name.into());
        self
    }

    pub(crate) fn matches(&self, key: &RequestKey, user: Option<&str>) -> bool {
        self.user.as_deref().is_none_or(|u| Some(u) == user)
            && self.verb.is_none_or(|v| v == key.verb)
            && self.resource.as_deref().is_none_or(|r| r == key.resource)
            && self
                .subresource
                .as_deref()
                .is_none_or(|s| s == key.subresource)
    }
}

/// How an injected failure answers: a status code with Kubernetes' reason
/// for it, and for 429 a `Retry-After`.
///
/// On a watch, 410 is sent as Kubernetes sends it: a `200 OK` stream whose
/// only event is an `ERROR` carrying a `Status` with code 410, reason
/// `Expired`. Other codes answer the watch request itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub(crate) code: u16,
    pub(crate) retry_after: Option<Duration>,
}

impl Failure {
    /// Any status code, with the reason Kubernetes gives it.
    pub fn status(code: u16) -> Self {
        Self {
            code,
            retry_after: None,
        }
    }

    /// 500 InternalError.
    pub fn internal_error() -> Self {
        Self::status(500)
    }

    /// 503 ServiceUnavailable.
    pub fn service_unavailable() -> Self {
        Self::status(503)
    }

    /// 429 TooManyRequests with `Retry-After` (whole seconds, at least 1).
    pub fn too_many_requests(retry_after: Duration) -> Self {
        Self {
            code: 429,
            retry_after: Some(retry_after),
        }
    }

    /// 410 Expired; on a watch, an `ERROR` event in a 200 stream.
    pub fn expired() -> Self {
        Self::status(410)
    }

    /// The status code.
    pub fn code(&self) -> u16 {
        self.code
    }

    pub(crate) fn to_api_error(&self) -> ApiError {
        if self.code == 410 {
            return ApiError::expired("injected by test-apiserver: too old resource version");
        }
        ApiError::injected(self.code, self.retry_after)
    }
}

#[derive(Debug)]
struct Injection {
    matcher: RequestMatch,
    failure: Failure,
    remaining: u32,
}

/// The faults configured now.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pub(crate) latency: Duration,
    injections: VecDeque<Injection>,
}

impl Faults {
    pub(crate) fn inject(&mut self, matcher: RequestMatch, failure: Failure, times: u32) {
        if times > 0 {
            self.injections.push_back(Injection {
                matcher,
                failure,
                remaining: times,
            });
        }
    }

    /// The failure the request `key` of `user` gets, if one is due;
    /// counts it down.
    pub(crate) fn take(&mut self, key: &RequestKey, user: Option<&str>) -> Option<Failure> {
        let pos = self
            .injections
            .iter()
            .position(|i| i.matcher.matches(key, user))?;
        let injection = &mut self.injections[pos];
        let failure = injection.failure.clone();
        injection.remaining -= 1;
        if injection.remaining == 0 {
            self.injections.remove(pos);
        }
        Some(failure)
    }

    pub(crate) fn clear(&mut self) {
        self.latency = Duration::ZERO;
        self.injections.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(verb: Verb, resource: &str) -> RequestKey {
        RequestKey {
            verb,
            group: String::new(),
            resource: resource.into(),
            subresource: String::new(),
        }
    }

    #[test]
    fn a_user_matcher_fails_only_that_users_requests() {
        let mut faults = Faults::default();
        faults.inject(
            RequestMatch::any().user("replica-1"),
            Failure::service_unavailable(),
            u32::MAX,
        );
        assert_eq!(
            faults.take(&key(Verb::Get, "nodes"), Some("replica-2")),
            None
        );
        assert_eq!(faults.take(&key(Verb::Get, "nodes"), None), None);
        assert_eq!(
            faults
                .take(&key(Verb::Update, "leases"), Some("replica-1"))
                .map(|f| f.code),
            Some(503)
        );
    }

    #[test]
    fn injections_match_and_count_down() {
        let mut faults = Faults::default();
        faults.inject(
            RequestMatch::verb(Verb::Patch).resource("nodes"),
            Failure::internal_error(),
            2,
        );
        assert_eq!(faults.take(&key(Verb::Get, "nodes"), None), None);
        assert_eq!(faults.take(&key(Verb::Patch, "services"), None), None);
        assert_eq!(
            faults
                .take(&key(Verb::Patch, "nodes"), None)
                .map(|f| f.code),
            Some(500)
        );
        assert_eq!(
            faults
                .take(&key(Verb::Patch, "nodes"), None)
                .map(|f| f.code),
            Some(500)
        );
        assert_eq!(faults.take(&key(Verb::Patch, "nodes"), None), None);
    }

    #[test]
    fn too_many_requests_carries_retry_after() {
        let err = Failure::too_many_requests(Duration::from_secs(2)).to_api_error();
        assert_eq!(
            (err.code, err.reason, err.retry_after),
            (429, "TooManyRequests", Some(2))
        );
    }
}
