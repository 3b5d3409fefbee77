//! A small client for Rancher 1.x's Cattle `v2-beta` API over reqwest:
//! HTTP basic authentication with an environment API key, collections with
//! filters and pagination, links, actions, and Cattle's error envelope.
//!
//! Unlike the generated scaffold, there is no `Api` trait with an in-memory
//! cloud behind it: the emulator (feature `test-util`) speaks Cattle over
//! HTTP, so every test runs this client too.
//!
//! Every request is described to the framework's request fence just before
//! it leaves (a dry run sends the reads and plans the rest), and a request
//! with a body carries it fenced, as the other providers do.

mod error;

use std::fmt;
use std::time::{Duration, SystemTime};

use ccm_cloud_provider::fence::{FencedBody, Request};
use ccm_cloud_provider::server_delay;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub(crate) use error::ApiError;

use crate::cattle::{self, Collection};
use crate::config::{SecretKey, Settings};

/// The largest page Cattle serves.
const PAGE: &str = "1000";
/// 1,000 × 100 objects is far beyond any environment; a list still going is
/// broken.
const MAX_PAGES: u32 = 100;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a body goes into one line.
const MAX_DETAIL: usize = 300;
const USER_AGENT: &str = concat!(
    "rust-cloud-controller-manager/",
    env!("CARGO_PKG_VERSION"),
    " (rancher)"
);

/// A Cattle API client: one connection pool for every call the provider
/// makes.
pub(crate) struct Client {
    http: reqwest::Client,
    base: Url,
    access_key: String,
    secret_key: SecretKey,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

/// The HTTP client could not be built (TLS setup).
#[derive(Debug, thiserror::Error)]
#[error("could not set up the HTTP client")]
pub(crate) struct ClientError(#[source] reqwest::Error);

impl Client {
    pub(crate) fn new(settings: &Settings) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(ClientError)?;
        Ok(Self {
            http,
            base: settings.url.clone(),
            access_key: settings.access_key.clone(),
            secret_key: settings.secret_key.clone(),
        })
    }

    /// The URL of collection `name` (`hosts`, `loadbalancerservices`...).
    fn collection(&self, name: &str) -> Url {
        // `Settings` makes the base end in `/`, and names are plain words.
        self.base.join(name).unwrap_or_else(|_| self.base.clone())
    }

    /// Every item of collection `name` matching `filters`, page by page.
    pub(crate) async fn list<T: DeserializeOwned>(
        &self,
        name: &str,
        filters: &[(&str, &str)],
    ) -> Result<Vec<T>, ApiError> {
        let mut url = self.collection(name);
        url.query_pairs_mut()
            .extend_pairs(filters.iter().copied())
            .append_pair("limit", PAGE);
        self.all_pages(url).await
    }

    /// Every item behind link `link` of `resource` (a collection).
    pub(crate) async fn link<T: DeserializeOwned>(
        &self,
        resource: &cattle::Resource,
        link: &str,
    ) -> Result<Vec<T>, ApiError> {
        let url = self.related(resource, "link", link, &resource.links)?;
        self.all_pages(url).await
    }

    async fn all_pages<T: DeserializeOwned>(&self, first: Url) -> Result<Vec<T>, ApiError> {
        let mut items = Vec::new();
        let mut next = Some(first.clone());
        for _ in 0..MAX_PAGES {
            let Some(url) = next.take() else {
                return Ok(items);
            };
            let page: Collection<T> = self.send(Method::GET, url, None::<&()>).await?;
            items.extend(page.data);
            if let Some(link) = page.pagination.and_then(|p| p.next) {
                next = Some(self.same_server(&link)?);
            }
        }
        match next {
            None => Ok(items),
            Some(_) => Err(ApiError::TooManyPages {
                path: first.path().to_owned(),
                pages: MAX_PAGES,
            }),
        }
    }

    /// `POST <collection>`: creates a resource.
    pub(crate) async fn create<B: Serialize, T: DeserializeOwned>(
        &self,
        name: &str,
        body: &B,
    ) -> Result<T, ApiError> {
        self.send(Method::POST, self.collection(name), Some(body))
            .await
    }

    /// `PUT <self>`: changes a resource's updatable fields.
    pub(crate) async fn update<B: Serialize, T: DeserializeOwned>(
        &self,
        resource: &cattle::Resource,
        body: &B,
    ) -> Result<T, ApiError> {
        let url = self.related(resource, "link", "self", &resource.links)?;
        self.send(Method::PUT, url, Some(body)).await
    }

    /// `POST <self>?action=<action>`, when the resource offers the action
    /// in its current state; `Ok(false)` when it does not (yet).
    pub(crate) async fn action<B: Serialize>(
        &self,
        resource: &cattle::Resource,
        action: &str,
        input: Option<&B>,
    ) -> Result<bool, ApiError> {
        if !resource.actions.contains_key(action) {
            return Ok(false);
        }
        let url = self.related(resource, "action", action, &resource.actions)?;
        // An action without input is sent an empty JSON object.
        let empty = serde_json::Map::new();
        match input {
            Some(input) => {
                self.send::<_, serde_json::Value>(Method::POST, url, Some(input))
                    .await?;
            }
            None => {
                self.send::<_, serde_json::Value>(Method::POST, url, Some(&empty))
                    .await?;
            }
        }
        Ok(true)
    }

    /// `DELETE <self>`; `Ok` when it is already gone.
    pub(crate) async fn delete(&self, resource: &cattle::Resource) -> Result<(), ApiError> {
        let url = self.related(resource, "link", "self", &resource.links)?;
        match self
            .send::<(), serde_json::Value>(Method::DELETE, url, None)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `GET <self>`: the resource as it is now, `None` when it is gone.
    pub(crate) async fn reload<T: DeserializeOwned>(
        &self,
        resource: &cattle::Resource,
    ) -> Result<Option<T>, ApiError> {
        let url = self.related(resource, "link", "self", &resource.links)?;
        match self.send(Method::GET, url, None::<&()>).await {
            Ok(found) => Ok(Some(found)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn related(
        &self,
        resource: &cattle::Resource,
        kind: &'static str,
        name: &str,
        urls: &std::collections::BTreeMap<String, String>,
    ) -> Result<Url, ApiError> {
        let url = urls.get(name).ok_or_else(|| ApiError::Missing {
            what: format!("{} {}", resource.type_, resource.id),
            kind,
            name: name.to_owned(),
        })?;
        self.same_server(url)
    }

    /// `url` if it is on `CATTLE_URL`'s server: the key goes nowhere else.
    fn same_server(&self, url: &str) -> Result<Url, ApiError> {
        let foreign = || ApiError::ForeignUrl {
            url: url.split('?').next().unwrap_or_default().to_owned(),
        };
        let parsed = Url::parse(url).map_err(|_| foreign())?;
        if parsed.origin() == self.base.origin() {
            Ok(parsed)
        } else {
            Err(foreign())
        }
    }

    async fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<&B>,
    ) -> Result<T, ApiError> {
        let name = method_name(&method);
        let path = display_path(&url);
        let mutates = method != Method::GET;
        let mut request = self
            .http
            .request(method, url)
            // Marked sensitive by reqwest: never in its debug output.
            .basic_auth(&self.access_key, Some(self.secret_key.expose()));
        let mut detail = String::new();
        if let Some(body) = body {
            // Serializing these plain structs cannot fail; an empty body
            // would be refused by the server, not sent wrong.
            let json = serde_json::to_vec(body).unwrap_or_default();
            detail = excerpt(&String::from_utf8_lossy(&json));
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(reqwest::Body::wrap(FencedBody::new(json)));
        }
        tracing::debug!(method = name, path, "Rancher API request");
        let fenced = |source| ApiError::Fenced {
            method: name,
            path: path.clone(),
            source,
        };
        let transport = |source| ApiError::Transport {
            method: name,
            path: path.clone(),
            source,
        };
        ccm_cloud_provider::fence::check_request(Request {
            operation: &format!("{name} {path}"),
            mutates,
            detail: &detail,
        })
        .map_err(fenced)?;
        let response = match request.send().await {
            Ok(response) => response,
            Err(source) => {
                return Err(ccm_cloud_provider::fence::check()
                    .err()
                    .map_or_else(|| transport(source), fenced));
            }
        };
        let status = response.status();
        let retry_after = retry_after(response.headers(), SystemTime::now());
        let bytes = response.bytes().await.map_err(transport)?;
        if status.is_success() {
            let body = if bytes.is_empty() {
                &b"null"[..]
            } else {
                &bytes[..]
            };
            return serde_json::from_slice(body).map_err(|source| ApiError::Decode {
                method: name,
                path,
                source,
            });
        }
        let detail = match serde_json::from_slice::<cattle::ApiError>(&bytes) {
            Ok(e) if !e.code.is_empty() || !e.message.is_empty() => {
                excerpt(&format!("{}: {}", e.code, e.message))
            }
            _ => excerpt(&String::from_utf8_lossy(&bytes)),
        };
        Err(match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => ApiError::Unauthorized {
                method: name,
                path,
                status: status.as_u16(),
            },
            StatusCode::NOT_FOUND => ApiError::NotFound { method: name, path },
            StatusCode::CONFLICT => ApiError::Conflict {
                method: name,
                path,
                detail,
            },
            StatusCode::TOO_MANY_REQUESTS => ApiError::Throttled {
                method: name,
                path,
                retry_after: retry_after.unwrap_or(Duration::from_secs(1)),
            },
            StatusCode::SERVICE_UNAVAILABLE if retry_after.is_some() => ApiError::Throttled {
                method: name,
                path,
                retry_after: retry_after.unwrap_or(Duration::from_secs(1)),
            },
            _ => ApiError::Status {
                method: name,
                path,
                status: status.as_u16(),
                detail,
            },
        })
    }
}

/// The path and query of `url`, for messages.
/// `Retry-After`, seconds or an HTTP-date: at least a second, at most
/// [`server_delay::MAX_SERVER_DELAY`].
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| server_delay::parse_retry_after(v, now))
        .map(|wait| wait.max(Duration::from_secs(1)))
}

fn display_path(url: &Url) -> String {
    match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    }
}

fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_DETAIL) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
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
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use std::time::UNIX_EPOCH;

    #[test]
    fn retry_after_is_at_least_a_second_and_at_most_the_ceiling() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777);
        for (value, wait) in [
            ("7", Some(Duration::from_secs(7))),
            ("0", Some(Duration::from_secs(1))),
            ("18446744073709551615", Some(server_delay::MAX_SERVER_DELAY)),
            (
                "Sun, 06 Nov 1994 08:50:17 GMT",
                Some(Duration::from_secs(40)),
            ),
            (
                "Fri, 31 Dec 9999 23:59:59 GMT",
                Some(server_delay::MAX_SERVER_DELAY),
            ),
            ("NaN", None),
            ("-1", None),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(RETRY_AFTER, HeaderValue::from_static(value));
            assert_eq!(retry_after(&headers, now), wait, "{value}");
        }
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }
}
