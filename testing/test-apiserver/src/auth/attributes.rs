//! What an authorizer decides on: the request attributes kube-apiserver's
//! `RequestInfoFactory` derives from a method and path, before routing (so
//! a path naming nothing served is still authorized first).

use http::Method;

use crate::api::Params;

/// One request as RBAC sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attributes {
    /// get, list, watch, create, update, patch, delete, deletecollection;
    /// for non-resource requests the lowercase HTTP method.
    pub(crate) verb: String,
    pub(crate) resource_request: bool,
    /// The URL path (non-resource requests are matched on it).
    pub(crate) path: String,
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl Attributes {
    /// The attributes of `method` on `path` with `params`, by the rules of
    /// kube-apiserver's `RequestInfoFactory`.
    pub(crate) fn of_request(method: &Method, path: &str, params: &Params) -> Self {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let non_resource = Self {
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_owned(),
            ..Self::default()
        };
        let (group, rest) = match parts.as_slice() {
            ["api", rest @ ..] if rest.len() >= 2 => ("", rest),
            ["apis", group, rest @ ..] if rest.len() >= 2 => (*group, rest),
            _ => return non_resource,
        };
        let mut info = Self {
            resource_request: true,
            path: path.to_owned(),
            group: group.to_owned(),
            version: rest[0].to_owned(),
            ..Self::default()
        };
        let mut parts = &rest[1..];
        if let ["watch" | "proxy", tail @ ..] = parts {
            if tail.is_empty() {
                return non_resource;
            }
            info.verb = parts[0].to_owned();
            parts = tail;
        } else {
            info.verb = match *method {
                Method::POST => "create",
                Method::GET | Method::HEAD => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            }
            .to_owned();
        }
        if let ["namespaces", ns, tail @ ..] = parts {
            info.namespace = (*ns).to_owned();
            if !tail.is_empty() && !matches!(tail[0], "status" | "finalize") {
                parts = tail;
            }
        }
        if parts.len() >= 3 && info.verb != "proxy" {
            info.subresource = parts[2].to_owned();
        }
        if parts.len() >= 2 {
            info.name = parts[1].to_owned();
        }
        if let Some(resource) = parts.first() {
            info.resource = (*resource).to_owned();
        }
        if info.name.is_empty() && info.verb == "get" {
            info.verb = if watch_requested(params) {
                "watch"
            } else {
                "list"
            }
            .to_owned();
            if let Some(name) = params.get("fieldSelector").and_then(exact_name) {
                info.name = name;
            }
        }
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".to_owned();
        }
        info
    }
}

/// `watch` as Kubernetes' parameter codec reads it: anything but false or 0.
fn watch_requested(params: &Params) -> bool {
    params
        .get("watch")
        .is_some_and(|w| !matches!(w.to_ascii_lowercase().as_str(), "false" | "0" | ""))
}

/// The name a field selector requires exactly (`metadata.name=x`), if it is
/// a valid path segment.
pub(crate) fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (field, value) = term.split_once("==").or_else(|| term.split_once('='))?;
        let valid = !matches!(value, "" | "." | "..") && !value.contains(['/', '%']);
        (field.trim() == "metadata.name" && !field.ends_with('!') && valid)
            .then(|| value.trim().to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: &Method, path: &str) -> Attributes {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        Attributes::of_request(method, path, &Params::parse(query))
    }

    fn short(a: &Attributes) -> (&str, &str, &str, &str, &str, &str) {
        (
            &a.verb,
            &a.group,
            &a.resource,
            &a.subresource,
            &a.namespace,
            &a.name,
        )
    }

    #[test]
    fn resource_requests_as_kube_apiserver_derives_them() {
        for (method, path, want) in [
            (
                Method::PATCH,
                "/api/v1/nodes/n1/status",
                ("patch", "", "nodes", "status", "", "n1"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods",
                ("list", "", "pods", "", "default", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/pods?watch=true",
                ("watch", "", "pods", "", "a", ""),
            ),
            (
                Method::GET,
                "/api/v1/watch/nodes",
                ("watch", "", "nodes", "", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/nodes?fieldSelector=metadata.name%3Dn2",
                ("list", "", "nodes", "", "", "n2"),
            ),
            (
                Method::DELETE,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
                (
                    "deletecollection",
                    "coordination.k8s.io",
                    "leases",
                    "",
                    "kube-system",
                    "",
                ),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/kube-system",
                ("get", "", "namespaces", "", "kube-system", "kube-system"),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/x/finalize",
                ("update", "", "namespaces", "finalize", "x", "x"),
            ),
            (
                Method::POST,
                "/api/v1/namespaces/ns/serviceaccounts/sa/token",
                ("create", "", "serviceaccounts", "token", "ns", "sa"),
            ),
            (
                Method::GET,
                "/apis/foo/v1/bars",
                ("list", "foo", "bars", "", "", ""),
            ),
        ] {
            let a = attrs(&method, path);
            assert!(a.resource_request, "{path}");
            assert_eq!(short(&a), want, "{path}");
        }
    }

    #[test]
    fn discovery_and_health_are_non_resource_requests() {
        for path in [
            "/api",
            "/api/v1",
            "/apis/rbac.authorization.k8s.io",
            "/apis/rbac.authorization.k8s.io/v1",
            "/version",
            "/healthz",
        ] {
            let a = attrs(&Method::GET, path);
            assert!(!a.resource_request, "{path}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", path));
        }
    }
}
