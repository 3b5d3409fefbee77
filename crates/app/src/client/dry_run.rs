//! Kubernetes writes in a dry run (`--dry-run`): a tower layer on the
//! client that sends reads and plans every write instead.
//!
//! A write never leaves the process. Its caller gets an answer it can go on
//! with: a PATCH, PUT or DELETE gets the object as it is now (read with a
//! GET of the same object, so nothing changed, which is the truth); a POST
//! gets its own body back. Each write but an Event is recorded in the
//! [`Plan`] as "would change", with its body as the difference; Events are
//! logged at debug level only.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use ccm_runtime::dry_run::{Plan, Verdict};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use kube::client::{Body, DynBody};
use tower::{BoxError, Layer, Service};

/// The longest body kept as a plan's difference.
const DIFFERENCE_LIMIT: usize = 500;

/// Plans writes instead of sending them.
#[derive(Debug, Clone)]
pub(crate) struct PlanWrites {
    plan: Plan,
}

impl PlanWrites {
    pub(crate) fn new(plan: Plan) -> Self {
        Self { plan }
    }
}

impl<S> Layer<S> for PlanWrites {
    type Service = PlannedWrites<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PlannedWrites {
            inner,
            plan: self.plan.clone(),
        }
    }
}

/// The service [`PlanWrites`] produces.
#[derive(Debug)]
pub(crate) struct PlannedWrites<S> {
    inner: S,
    plan: Plan,
}

type Answer = Response<Box<DynBody>>;
type Pending = Pin<Box<dyn Future<Output = Result<Answer, BoxError>> + Send>>;

impl<S> Service<Request<Body>> for PlannedWrites<S>
where
    S: Service<Request<Body>, Response = Answer, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Answer;
    type Error = BoxError;
    type Future = Pending;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Pending {
        let method = request.method().clone();
        if matches!(method, Method::GET | Method::HEAD | Method::OPTIONS) {
            return Box::pin(self.inner.call(request));
        }
        let target = Target::of(request.uri().path());
        let (parts, body) = request.into_parts();
        // What the caller gets back: the object as it stands.
        let current = (method != Method::POST).then(|| {
            let mut read = Request::new(Body::empty());
            *read.method_mut() = Method::GET;
            *read.uri_mut() = target
                .object_path
                .parse()
                .unwrap_or_else(|_| parts.uri.clone());
            *read.headers_mut() = parts.headers.clone();
            read.headers_mut().remove(http::header::CONTENT_TYPE);
            read.headers_mut().remove(http::header::CONTENT_LENGTH);
            self.inner.call(read)
        });
        let plan = self.plan.clone();
        Box::pin(async move {
            let sent = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            target.record(&plan, &method, &sent);
            match current {
                Some(read) => read.await,
                None => Ok(respond(StatusCode::CREATED, sent)),
            }
        })
    }
}

fn respond(status: StatusCode, body: Bytes) -> Answer {
    let body: Box<DynBody> =
        Box::new(http_body_util::Full::new(body).map_err(|never| -> BoxError { match never {} }));
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// What a write's path names.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    /// `services`, `nodes`, `events`...
    resource: String,
    /// `status`, or empty.
    subresource: String,
    /// `namespace/name`, or the name of a cluster-scoped object.
    object: String,
    /// The path of the object itself, without its subresource.
    object_path: String,
}

impl Target {
    /// Reads `/api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]]` and
    /// `/apis/GROUP/VERSION/...` alike.
    fn of(path: &str) -> Self {
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let rest = match parts.first() {
            Some(&"api") => parts.get(2..).unwrap_or_default(),
            _ => parts.get(3..).unwrap_or_default(),
        };
        let prefix_len = parts.len() - rest.len();
        let (namespace, rest, prefix_len) = match rest {
            ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(*ns), tail, prefix_len + 2),
            _ => (None, rest, prefix_len),
        };
        let resource = rest.first().copied().unwrap_or_default().to_owned();
        let name = rest.get(1).copied().unwrap_or_default();
        let subresource = rest.get(2..).unwrap_or_default().join("/");
        let end = (prefix_len + rest.len().min(2)).min(parts.len());
        let object = match (namespace, name) {
            (_, "") => String::new(),
            (Some(ns), _) => format!("{ns}/{name}"),
            (None, _) => name.to_owned(),
        };
        Self {
            resource,
            subresource,
            object,
            object_path: format!("/{}", parts[..end].join("/")),
        }
    }

    /// The controller behind a write, from what it writes.
    fn controller(&self, method: &Method) -> &str {
        match (self.resource.as_str(), method) {
            ("nodes", &Method::DELETE) => "cloud-node-lifecycle",
            ("nodes", _) => "cloud-node",
            ("services", _) => "service",
            ("persistentvolumes", _) => "persistentvolume-label",
            ("certificatesigningrequests", _) => "node-csr-approver",
            ("leases", _) => "leader-election",
            (other, _) => other,
        }
    }

    fn record(&self, plan: &Plan, method: &Method, body: &[u8]) {
        let verb = method.as_str().to_ascii_lowercase();
        if self.resource == "events" {
            tracing::debug!(event = %String::from_utf8_lossy(body), "dry run: event not sent");
            return;
        }
        let operation = if self.subresource.is_empty() {
            format!("{verb} {}", self.resource)
        } else {
            format!("{verb} {}/{}", self.resource, self.subresource)
        };
        let mut difference = String::from_utf8_lossy(body).into_owned();
        if difference.len() > DIFFERENCE_LIMIT {
            let mut cut = DIFFERENCE_LIMIT;
            while !difference.is_char_boundary(cut) {
                cut -= 1;
            }
            difference.truncate(cut);
            difference.push('…');
        }
        let difference = if difference.is_empty() {
            Vec::new()
        } else {
            vec![difference]
        };
        plan.record(
            self.controller(method),
            &self.object,
            &operation,
            Verdict::WouldChange,
            difference,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_object_and_subresource() {
        let status = Target::of("/api/v1/namespaces/default/services/web/status");
        assert_eq!(status.resource, "services");
        assert_eq!(status.subresource, "status");
        assert_eq!(status.object, "default/web");
        assert_eq!(
            status.object_path,
            "/api/v1/namespaces/default/services/web"
        );
        let node = Target::of("/api/v1/nodes/n1");
        assert_eq!(
            (node.object.as_str(), node.object_path.as_str()),
            ("n1", "/api/v1/nodes/n1")
        );
        assert_eq!(node.controller(&Method::DELETE), "cloud-node-lifecycle");
        let lease = Target::of("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ccm");
        assert_eq!(lease.object, "kube-system/ccm");
        assert_eq!(lease.controller(&Method::PUT), "leader-election");
        let created = Target::of("/api/v1/namespaces/default/events");
        assert_eq!(
            (created.resource.as_str(), created.object.as_str()),
            ("events", "")
        );
        assert_eq!(created.object_path, "/api/v1/namespaces/default/events");
        let approval =
            Target::of("/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1/approval");
        assert_eq!(approval.subresource, "approval");
        assert_eq!(
            approval.object_path,
            "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1"
        );
    }
}
