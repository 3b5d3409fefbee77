//! A small client for DigitalOcean's REST API v2 over reqwest: bearer
//! authentication, JSON bodies, pagination, and rate limits.

mod error;
mod rate_limit;
pub(crate) mod types;

use std::fmt;
use std::time::{Duration, SystemTime};

use ccm_cloud_provider::RateLimiter;
use ccm_cloud_provider::fence::{FencedBody, Request};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub(crate) use error::ApiError;
use rate_limit::ServerBudget;
use types::{ErrorBody, Page};

use crate::config::AccessToken;

/// The API's largest page.
const PER_PAGE: u32 = 200;
/// 200 × 500 objects is far beyond any account; a list still going is broken.
const MAX_PAGES: u32 = 500;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a body goes into one line: an unexpected error's into its
/// message, a request's into its description to the fence.
const MAX_DETAIL: usize = 300;
const USER_AGENT: &str = concat!(
    "rust-cloud-controller-manager/",
    env!("CARGO_PKG_VERSION"),
    " (digitalocean)"
);

/// A DigitalOcean API client: one connection pool and one rate-limit state
/// for every call the provider makes.
pub(crate) struct Client {
    http: reqwest::Client,
    base: Url,
    auth: HeaderValue,
    token: AccessToken,
    /// Spaces requests `1/qps` apart with no burst, as upstream's
    /// `godo.SetStaticRateLimit`: pacing the operator asked for, waited
    /// out in the call, not a wait for the cloud's limit.
    pacer: Option<RateLimiter>,
    budget: ServerBudget,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .field("pacer", &self.pacer)
            .finish_non_exhaustive()
    }
}

/// A request could not be set up (no network I/O happens here).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The token has characters an HTTP header cannot carry.
    #[error("the access token contains characters not allowed in an HTTP header")]
    TokenNotAHeader,
    /// The HTTP client could not be built (TLS setup).
    #[error("could not set up the HTTPS client")]
    Http(#[source] reqwest::Error),
}

impl Client {
    pub(crate) fn new(
        base: Url,
        token: AccessToken,
        pacer: Option<RateLimiter>,
    ) -> Result<Self, ClientError> {
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
            .map_err(|_| ClientError::TokenNotAHeader)?;
        // Keeps the value out of hyper's and reqwest's debug output.
        auth.set_sensitive(true);
        let http = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(ClientError::Http)?;
        Ok(Self {
            http,
            base,
            auth,
            token,
            pacer,
            budget: ServerBudget::default(),
        })
    }

    /// A plain GET of an absolute URL without the token, for the droplet
    /// metadata service.
    pub(crate) async fn get_text_unauthenticated(&self, url: Url) -> Result<String, ApiError> {
        let path = url.path().to_owned();
        let transport = |source| ApiError::Transport {
            method: "GET",
            path: path.clone(),
            source,
        };
        ccm_cloud_provider::fence::check_request(Request {
            operation: &format!("GET {path}"),
            mutates: false,
            detail: "",
        })
        .map_err(|source| ApiError::Fenced {
            method: "GET",
            path: path.clone(),
            source,
        })?;
        let resp = self
            .http
            .get(url)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(transport)?;
        let status = resp.status();
        let text = resp.text().await.map_err(transport)?;
        if !status.is_success() {
            return Err(ApiError::Status {
                method: "GET",
                path,
                status: status.as_u16(),
                detail: excerpt(&text),
            });
        }
        Ok(text.trim().to_owned())
    }

    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, ApiError> {
        let body = self.send(Method::GET, path, query, None::<&()>).await?;
        decode("GET", path, &body)
    }

    pub(crate) async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ApiError> {
        let body = self.send(Method::POST, path, &[], Some(body)).await?;
        decode("POST", path, &body)
    }

    /// A POST whose answer has no body (204).
    pub(crate) async fn post_no_content<B: Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<(), ApiError> {
        self.send(Method::POST, path, &[], Some(body))
            .await
            .map(drop)
    }

    pub(crate) async fn put<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ApiError> {
        let body = self.send(Method::PUT, path, &[], Some(body)).await?;
        decode("PUT", path, &body)
    }

    /// A DELETE, with a body for the endpoints that take one.
    pub(crate) async fn delete<B: Serialize>(
        &self,
        path: &str,
        body: Option<&B>,
    ) -> Result<(), ApiError> {
        self.send(Method::DELETE, path, &[], body).await.map(drop)
    }

    /// Every item of a paginated list, page by page until the last one.
    ///
    /// The list ends at whichever comes first: a page without a `next`
    /// link, the page `links.pages.last` names, `meta.total` items read, an
    /// empty page, or a page identical to the one before it (a server that
    /// answers every page with the same example, as Prism does). It never
    /// reads more than [`MAX_PAGES`] pages.
    pub(crate) async fn list_all<T: DeserializeOwned>(
        &self,
        path: &str,
        filter: &[(&str, String)],
    ) -> Result<Vec<T>, ApiError> {
        let mut items = Vec::new();
        let mut previous: Option<Vec<serde_json::Value>> = None;
        for page in 1..=MAX_PAGES {
            let mut query = filter.to_vec();
            query.push(("page", page.to_string()));
            query.push(("per_page", PER_PAGE.to_string()));
            let got: Page<serde_json::Value> = self.get(path, &query).await?;
            if previous.as_ref() == Some(&got.items) {
                tracing::debug!(path, page, "a page repeats the one before; the list ends");
                return Ok(items);
            }
            let end = got.is_last(page, items.len() + got.items.len());
            for item in &got.items {
                items.push(T::deserialize(item).map_err(|source| ApiError::Decode {
                    method: "GET",
                    path: path.to_owned(),
                    source,
                })?);
            }
            if end {
                return Ok(items);
            }
            previous = Some(got.items);
        }
        Err(ApiError::TooManyPages {
            path: path.to_owned(),
            pages: MAX_PAGES,
        })
    }

    async fn send<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> Result<Vec<u8>, ApiError> {
        let name = method_name(&method);
        let mutates = method != Method::GET;
        if let Some(retry_after) = self.budget.wait_needed(SystemTime::now()) {
            tracing::debug!(
                method = name,
                path,
                ?retry_after,
                "DigitalOcean API budget spent; not sending"
            );
            return Err(ApiError::Throttled { retry_after });
        }
        if let Some(pacer) = &self.pacer {
            pacer.acquire().await;
        }
        let mut url =
            self.base
                .join(path.trim_start_matches('/'))
                .map_err(|_| ApiError::InvalidPath {
                    path: path.to_owned(),
                })?;
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        let mut request = self
            .http
            .request(method, url)
            .header(AUTHORIZATION, self.auth.clone());
        let operation = format!("{name} /{}", path.trim_start_matches('/'));
        let mut detail = query_detail(query);
        // A request with a body (POST, PUT) carries it fenced: the fence is
        // asked again when the connection writes it. A DELETE has none to
        // carry the check (hyper writes a bodiless request without reading
        // an empty body), so it relies on the check just before the send.
        if let Some(body) = body {
            let json = serde_json::to_vec(body).map_err(|source| ApiError::Encode {
                method: name,
                path: path.to_owned(),
                source,
            })?;
            // serde_json writes compact JSON: one line.
            detail = self.redact(&excerpt(&String::from_utf8_lossy(&json)));
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(reqwest::Body::wrap(FencedBody::new(json)));
        }
        tracing::debug!(method = name, path, "DigitalOcean API request");
        let fenced = |source| ApiError::Fenced {
            method: name,
            path: path.to_owned(),
            source,
        };
        let transport = |source| ApiError::Transport {
            method: name,
            path: path.to_owned(),
            source,
        };
        // The framework's request fence, as late as possible: after the
        // budget and the pacer's wait. Described, so that a dry run sends
        // the reads and plans the mutations.
        ccm_cloud_provider::fence::check_request(Request {
            operation: &operation,
            mutates,
            detail: &detail,
        })
        .map_err(fenced)?;
        let response = match request.send().await {
            Ok(response) => response,
            // The body's own check (the fence's plain `check`) refused: a
            // fenced error, not a transport one.
            Err(source) => {
                return Err(ccm_cloud_provider::fence::check()
                    .err()
                    .map_or_else(|| transport(source), fenced));
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await;
        let quota = bytes
            .as_ref()
            .ok()
            .and_then(|b| error::quota_refusal(status.as_u16(), b));
        // A quota refusal's 429 spends no rate-limit budget.
        let throttled = self.budget.observe(
            status.as_u16() == 429 && quota.is_none(),
            &headers,
            SystemTime::now(),
        );
        let bytes = bytes.map_err(transport)?;
        if let Some(message) = quota {
            let message = self.redact(&message);
            tracing::info!(method = name, path, %message, "DigitalOcean account limit reached");
            return Err(ApiError::QuotaExceeded {
                method: name,
                path: path.to_owned(),
                message,
            });
        }
        if let Some(retry_after) = throttled {
            tracing::info!(
                method = name,
                path,
                ?retry_after,
                "DigitalOcean API answered 429"
            );
            return Err(ApiError::Throttled { retry_after });
        }
        if status.as_u16() == 404 {
            return Err(ApiError::NotFound {
                method: name,
                path: path.to_owned(),
            });
        }
        if !status.is_success() {
            let detail = match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(e) if !e.id.is_empty() || !e.message.is_empty() => {
                    format!("{}: {}", e.id, e.message)
                }
                _ => excerpt(&String::from_utf8_lossy(&bytes)),
            };
            return Err(ApiError::Status {
                method: name,
                path: path.to_owned(),
                status: status.as_u16(),
                detail: self.redact(&detail),
            });
        }
        Ok(bytes.to_vec())
    }

    /// Removes the token from text a server sent back, should it echo it.
    fn redact(&self, text: &str) -> String {
        let token = self.token.expose();
        if token.is_empty() {
            text.to_owned()
        } else {
            text.replace(token, "<redacted>")
        }
    }
}

fn decode<T: DeserializeOwned>(
    method: &'static str,
    path: &str,
    body: &[u8],
) -> Result<T, ApiError> {
    // A 204 answer to a call that expects nothing decodes from `null`.
    let body = if body.is_empty() {
        b"null".as_slice()
    } else {
        body
    };
    serde_json::from_slice(body).map_err(|source| ApiError::Decode {
        method,
        path: path.to_owned(),
        source,
    })
}

fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_DETAIL) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A request's query as the fence's detail: `page=1&per_page=200`.
fn query_detail(query: &[(&str, String)]) -> String {
    query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        _ => "PATCH",
    }
}

#[cfg(test)]
mod fence_tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use ccm_cloud_provider::CloudError;
    use ccm_cloud_provider::fence::{Countdown, RequestFence, scope};

    use super::*;
    use crate::config::AccessToken;

    #[derive(Debug)]
    struct LostTheLease;

    impl RequestFence for LostTheLease {
        fn check(&self) -> Result<(), String> {
            Err("lost the lease".into())
        }
    }

    #[tokio::test]
    async fn a_request_the_fence_refuses_never_leaves_the_process() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        let client = Client::new(base, AccessToken::new("token"), None).unwrap();
        let err = scope(
            Arc::new(LostTheLease),
            client.delete("v2/load_balancers/lb-1", None::<&()>),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ApiError::Fenced { .. }), "{err:?}");
        assert_eq!(CloudError::from(err).kind(), "retry");
        assert_eq!(accepted.load(Ordering::SeqCst), 0, "nothing was sent");

        let _ = client.delete("v2/load_balancers/lb-1", None::<&()>).await;
        assert!(
            accepted.load(Ordering::SeqCst) >= 1,
            "sent outside a fence scope"
        );
    }

    /// Refuses every request, recording how it was described.
    #[derive(Debug, Default)]
    struct Described(parking_lot::Mutex<Vec<(String, bool, String)>>);

    impl RequestFence for Described {
        fn check(&self) -> Result<(), String> {
            Err("only described".into())
        }

        fn check_request(&self, request: &Request<'_>) -> Result<(), String> {
            self.0.lock().push((
                request.operation.to_owned(),
                request.mutates,
                request.detail.to_owned(),
            ));
            self.check()
        }
    }

    #[tokio::test]
    async fn each_request_is_described_to_the_fence_by_method_path_and_arguments() {
        // Nothing listens there: every request is refused before it is sent.
        let base = Url::parse("http://127.0.0.1:9/").unwrap();
        let client = Client::new(base, AccessToken::new("dop_v1_secret"), None).unwrap();
        let fence = Arc::new(Described::default());
        let long = "x".repeat(2 * MAX_DETAIL);
        scope(fence.clone(), async {
            let query = [("tag_name", "k8s:c1".to_owned()), ("page", "1".to_owned())];
            let _ = client
                .get::<serde_json::Value>("/v2/droplets", &query)
                .await;
            let body = serde_json::json!({ "forwarding_rules": [{ "entry_port": 8080 }] });
            let _ = client
                .put::<_, serde_json::Value>("v2/load_balancers/lb-1", &body)
                .await;
            let _ = client
                .post::<_, serde_json::Value>("/v2/tags", &serde_json::json!({ "name": long }))
                .await;
            let _ = client.delete("/v2/load_balancers/lb-1", None::<&()>).await;
        })
        .await;
        let described = fence.0.lock().clone();
        let operations: Vec<(&str, bool)> = described
            .iter()
            .map(|(op, mutates, _)| (op.as_str(), *mutates))
            .collect();
        assert_eq!(
            operations,
            [
                ("GET /v2/droplets", false),
                ("PUT /v2/load_balancers/lb-1", true),
                ("POST /v2/tags", true),
                ("DELETE /v2/load_balancers/lb-1", true),
            ]
        );
        assert_eq!(described[0].2, "tag_name=k8s:c1&page=1");
        assert_eq!(
            described[1].2,
            r#"{"forwarding_rules":[{"entry_port":8080}]}"#
        );
        let cut = &described[2].2;
        assert_eq!(cut.chars().count(), MAX_DETAIL + 1, "{cut}");
        assert!(cut.ends_with('…'), "{cut}");
        assert_eq!(described[3].2, "");
        assert!(
            described.iter().all(|(_, _, d)| !d.contains("secret")),
            "{described:?}"
        );
    }

    #[tokio::test]
    async fn a_request_whose_lease_lapses_before_its_body_is_written_never_completes() {
        let wire = ccm_test_support::RecordingListener::start().await.unwrap();
        let base = Url::parse(&format!("{}/", wire.url)).unwrap();
        let client = Client::new(base, AccessToken::new("token"), None).unwrap();
        let body = serde_json::json!({ "droplet_ids": [1, 2] });
        for method in [Method::POST, Method::PUT] {
            // The check before the send passes; the body's, when the
            // connection writes it (a process frozen in between), refuses.
            let fence = Arc::new(Countdown::new(1));
            let call = client.send(method.clone(), "v2/load_balancers/lb-1", &[], Some(&body));
            let err = scope(fence.clone(), call).await.unwrap_err();
            assert!(matches!(err, ApiError::Fenced { .. }), "{method}: {err:?}");
            assert_eq!(fence.asked(), 3, "{method}");
        }
        // Once the client has closed its connections, nothing more arrives.
        wire.closed(2, Duration::from_secs(10)).await.unwrap();
        let wire = wire.received();
        assert!(
            !wire.contains("droplet_ids"),
            "no body reached the wire: {wire}"
        );
        assert!(
            !wire.contains("\r\n\r\n"),
            "no request was completed on the wire: {wire:?}"
        );
    }
}
