//! [`Rest::send`]: one request, described to the fence and fenced until its
//! body is written.

use std::time::Duration;

use ccm_cloud_provider::fence::{self, FencedBody, Request};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, Url};
use serde::Serialize;

use crate::{Answer, Rest, SendError, excerpt, method_name};

impl Rest {
    /// Sends `method url` with the credentials and `body` as JSON, and
    /// answers whatever status the server gave.
    ///
    /// Just before it leaves, the request is described to the framework's
    /// request fence: `GET /v2/droplets` (a read) with its query, or a
    /// mutation with the start of its body, the secret taken out. A body
    /// asks the fence again when the connection writes it; a bodiless
    /// DELETE relies on the check before the send (hyper writes it without
    /// reading a body).
    ///
    /// # Errors
    /// [`SendError::Fenced`] when the fence refuses (nothing, or no whole
    /// request, was sent); [`SendError::Transport`] when no answer came;
    /// [`SendError::Encode`] when the body is not JSON.
    pub async fn send<B: Serialize + ?Sized>(
        &self,
        method: Method,
        url: Url,
        body: Option<&B>,
    ) -> Result<Answer, SendError> {
        self.send_with(method, url, body, true, None).await
    }

    /// A GET of `url` without the credentials (an instance metadata
    /// service), within `timeout`; fenced and described as [`Rest::send`].
    ///
    /// # Errors
    /// As [`Rest::send`].
    pub async fn get_unauthenticated(
        &self,
        url: Url,
        timeout: Duration,
    ) -> Result<Answer, SendError> {
        self.send_with(Method::GET, url, None::<&()>, false, Some(timeout))
            .await
    }

    async fn send_with<B: Serialize + ?Sized>(
        &self,
        method: Method,
        url: Url,
        body: Option<&B>,
        authenticated: bool,
        timeout: Option<Duration>,
    ) -> Result<Answer, SendError> {
        let name = method_name(&method);
        let path = url.path().to_owned();
        let mutates = method != Method::GET;
        let mut detail = url
            .query_pairs()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        let mut request = self.http.request(method, url);
        if authenticated {
            request = request.header(AUTHORIZATION, self.authorization.clone());
        }
        if let Some(timeout) = timeout {
            request = request.timeout(timeout);
        }
        if let Some(body) = body {
            let json = serde_json::to_vec(body).map_err(|source| SendError::Encode {
                method: name,
                path: path.clone(),
                source,
            })?;
            // serde_json writes compact JSON: one line. The query stays in
            // front of it: a Cattle action is named only there.
            let shown = self.redact(&excerpt(&String::from_utf8_lossy(&json)));
            detail = if detail.is_empty() {
                shown
            } else {
                format!("{detail} {shown}")
            };
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(reqwest::Body::wrap(FencedBody::new(json)));
        }
        tracing::debug!(method = name, path, "{} API request", self.cloud);
        let fenced = |source| SendError::Fenced {
            method: name,
            path: path.clone(),
            source,
        };
        let transport = |source| SendError::Transport {
            method: name,
            path: path.clone(),
            cloud: self.cloud,
            source,
        };
        fence::check_request(Request {
            operation: &format!("{name} {path}"),
            mutates,
            detail: &detail,
        })
        .map_err(fenced)?;
        let response = match request.send().await {
            Ok(response) => response,
            // The body's own check (the fence's plain `check`) refused: a
            // fenced error, not a transport one.
            Err(source) => {
                return Err(fence::check()
                    .err()
                    .map_or_else(|| transport(source), fenced));
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await.map_err(transport)?;
        Ok(Answer {
            status,
            headers,
            body,
        })
    }
}
