//! Which request a method and path make, by the rules of Kubernetes'
//! `RequestInfoFactory`.

use http::Method;

use super::params::Params;
use crate::registry::Subresource;
use crate::resources::{self, GROUPS, ResourceType, ReviewType};
use crate::stats::{RequestKey, Verb};
use crate::status::ApiError;

/// Paths outside the resource API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Discovery {
    Root,
    Version,
    Health,
    CoreVersions,
    Groups,
    Group(&'static str),
    Resources(&'static str, &'static str),
    /// `/openapi/v3`: the list of documents.
    OpenApiV3,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`.
    OpenApiV3Document(&'static str, &'static str),
    /// `/openapi/v2`: the Swagger 2.0 document.
    OpenApiV2,
    /// Any other `/openapi` path: not served.
    OpenApi,
}

/// A request on a resource.
#[derive(Debug, Clone)]
pub(crate) struct ResourceRequest {
    pub(crate) rt: &'static ResourceType,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) subresource: Subresource,
    pub(crate) verb: Verb,
}

impl ResourceRequest {
    pub(crate) fn key(&self) -> RequestKey {
        RequestKey {
            verb: self.verb,
            group: self.rt.group.to_owned(),
            resource: self.rt.plural.to_owned(),
            subresource: self.subresource.as_str().to_owned(),
        }
    }
}

#[derive(Debug)]
pub(crate) enum Route {
    Discovery(Discovery),
    Resource(ResourceRequest),
    /// A POST of a review (TokenReview, SubjectAccessReview...).
    Review(&'static ReviewType),
}

/// Parses `method` and `path`.
///
/// # Errors
///
/// 404 for paths naming nothing served, 405 for methods a path does not take.
pub(crate) fn parse(method: &Method, path: &str, params: &Params) -> Result<Route, ApiError> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let discovery = |d| {
        if method == Method::GET {
            Ok(Route::Discovery(d))
        } else {
            Err(ApiError::method_not_allowed(method.as_str(), path))
        }
    };
    match parts.as_slice() {
        [] => discovery(Discovery::Root),
        ["version"] => discovery(Discovery::Version),
        ["healthz" | "livez" | "readyz", ..] => discovery(Discovery::Health),
        ["openapi", "v3"] => discovery(Discovery::OpenApiV3),
        ["openapi", "v3", "api", "v1"] => discovery(Discovery::OpenApiV3Document("", "v1")),
        ["openapi", "v3", "apis", group, "v1"] => match GROUPS.iter().find(|g| *g == group) {
            Some(g) => discovery(Discovery::OpenApiV3Document(g, "v1")),
            None => Err(ApiError::no_such_path()),
        },
        ["openapi", "v2"] => discovery(Discovery::OpenApiV2),
        ["openapi", ..] => discovery(Discovery::OpenApi),
        ["api"] => discovery(Discovery::CoreVersions),
        ["api", "v1"] => discovery(Discovery::Resources("", "v1")),
        ["apis"] => discovery(Discovery::Groups),
        ["apis", group] => match GROUPS.iter().find(|g| *g == group) {
            Some(g) => discovery(Discovery::Group(g)),
            None => Err(ApiError::no_such_path()),
        },
        ["apis", group, "v1"] => match GROUPS.iter().find(|g| *g == group) {
            Some(g) => discovery(Discovery::Resources(g, "v1")),
            None => Err(ApiError::no_such_path()),
        },
        ["api", "v1", rest @ ..] => resource(method, "", "v1", rest, params),
        ["apis", group, version, rest @ ..] => resource(method, group, version, rest, params),
        _ => Err(ApiError::no_such_path()),
    }
}

fn resource(
    method: &Method,
    group: &str,
    version: &str,
    rest: &[&str],
    params: &Params,
) -> Result<Route, ApiError> {
    let (watch_path, mut parts) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let mut namespace = None;
    if let ["namespaces", ns, tail @ ..] = parts {
        namespace = Some((*ns).to_owned());
        if !tail.is_empty() && !matches!(tail[0], "status" | "finalize") {
            parts = tail;
        }
    }
    let (plural, name, sub) = match parts {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return Err(ApiError::no_such_path()),
    };
    if let (Some(review), None, false) =
        (resources::review(group, version, plural), name, watch_path)
    {
        return if method == Method::POST && namespace.is_none() {
            Ok(Route::Review(review))
        } else {
            Err(ApiError::method_not_allowed(method.as_str(), plural))
        };
    }
    let rt = resources::lookup(group, version, plural).ok_or_else(ApiError::no_such_path)?;
    if !rt.namespaced {
        if plural != "namespaces" && namespace.is_some() {
            return Err(ApiError::no_such_path());
        }
        namespace = None;
    }
    let subresource = match sub {
        None => Subresource::Main,
        Some(s) if rt.subresources.contains(&s) => match s {
            "status" => Subresource::Status,
            "token" => Subresource::Token,
            "approval" => Subresource::Approval,
            _ => Subresource::Finalize,
        },
        Some(_) => return Err(ApiError::no_such_path()),
    };
    let verb = verb(
        method,
        name.is_some() && subresource != Subresource::Token,
        watch_path || params.flag("watch")?.unwrap_or(false),
    )
    .ok_or_else(|| ApiError::method_not_allowed(method.as_str(), &rt.qualified_plural()))?;
    let allowed = match subresource {
        Subresource::Main => true,
        Subresource::Status | Subresource::Approval => {
            matches!(verb, Verb::Get | Verb::Update | Verb::Patch)
        }
        Subresource::Finalize => verb == Verb::Update,
        Subresource::Token => verb == Verb::Create,
    };
    let needs_namespace =
        rt.namespaced && !matches!(verb, Verb::List | Verb::Watch) && namespace.is_none();
    if !allowed || needs_namespace {
        return Err(ApiError::method_not_allowed(
            method.as_str(),
            &rt.qualified_plural(),
        ));
    }
    Ok(Route::Resource(ResourceRequest {
        rt,
        namespace,
        name: name.map(str::to_owned),
        subresource,
        verb,
    }))
}

fn verb(method: &Method, named: bool, watch: bool) -> Option<Verb> {
    Some(match (method.as_str(), named) {
        ("GET", _) if watch => Verb::Watch,
        ("GET", true) => Verb::Get,
        ("GET", false) => Verb::List,
        ("POST", false) => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(method: &Method, path: &str) -> Result<Route, ApiError> {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        parse(method, path, &Params::parse(query))
    }

    fn request(method: &Method, path: &str) -> ResourceRequest {
        match route(method, path) {
            Ok(Route::Resource(r)) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_and_cluster_scoped_paths() {
        let r = request(&Method::GET, "/api/v1/namespaces/default/services/lb-1");
        assert_eq!(
            (
                r.rt.plural,
                r.namespace.as_deref(),
                r.name.as_deref(),
                r.verb
            ),
            ("services", Some("default"), Some("lb-1"), Verb::Get)
        );
        let r = request(&Method::PATCH, "/api/v1/nodes/n1/status");
        assert_eq!(
            (r.rt.plural, r.subresource, r.verb),
            ("nodes", Subresource::Status, Verb::Patch)
        );
        let r = request(&Method::GET, "/api/v1/namespaces/kube-system");
        assert_eq!(
            (r.rt.plural, r.name.as_deref()),
            ("namespaces", Some("kube-system"))
        );
        let r = request(&Method::PUT, "/api/v1/namespaces/x/finalize");
        assert_eq!(
            (r.rt.plural, r.subresource),
            ("namespaces", Subresource::Finalize)
        );
        let r = request(
            &Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?watch=true",
        );
        assert_eq!((r.rt.plural, r.verb), ("leases", Verb::Watch));
        let r = request(&Method::GET, "/api/v1/watch/namespaces/default/pods");
        assert_eq!((r.rt.plural, r.verb), ("pods", Verb::Watch));
        let r = request(&Method::DELETE, "/api/v1/namespaces/default/configmaps");
        assert_eq!(r.verb, Verb::DeleteCollection);
        let r = request(
            &Method::POST,
            "/api/v1/namespaces/kube-system/serviceaccounts/ccm/token",
        );
        assert_eq!(
            (r.rt.plural, r.subresource, r.verb, r.name.as_deref()),
            (
                "serviceaccounts",
                Subresource::Token,
                Verb::Create,
                Some("ccm")
            )
        );
    }

    #[test]
    fn reviews_take_only_post() {
        assert!(matches!(
            route(&Method::POST, "/apis/authentication.k8s.io/v1/tokenreviews"),
            Ok(Route::Review(r)) if r.kind == "TokenReview"
        ));
        assert!(matches!(
            route(
                &Method::GET,
                "/apis/authorization.k8s.io/v1/subjectaccessreviews"
            ),
            Err(ApiError { code: 405, .. })
        ));
    }

    #[test]
    fn unknown_paths_and_methods_are_refused() {
        assert_eq!(
            route(&Method::GET, "/api/v1/widgets")
                .map(drop)
                .map_err(|e| e.code),
            Err(404)
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/namespaces/a/nodes")
                .map(drop)
                .map_err(|e| e.code),
            Err(404)
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/nodes/n1")
                .map(drop)
                .map_err(|e| e.code),
            Err(405)
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/configmaps")
                .map(drop)
                .map_err(|e| e.code),
            Err(405)
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/nodes/n1/status")
                .map(drop)
                .map_err(|e| e.code),
            Err(405)
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/nodes/n1/proxy")
                .map(drop)
                .map_err(|e| e.code),
            Err(404)
        );
    }

    #[test]
    fn discovery_paths() {
        assert!(matches!(
            route(&Method::GET, "/apis/events.k8s.io/v1"),
            Ok(Route::Discovery(Discovery::Resources(
                "events.k8s.io",
                "v1"
            )))
        ));
        assert!(matches!(
            route(&Method::GET, "/apis/apps/v1"),
            Err(ApiError { code: 404, .. })
        ));
    }
}
