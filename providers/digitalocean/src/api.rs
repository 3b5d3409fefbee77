//! DigitalOcean's REST API v2 over the shared REST client (`ccm_rest`:
//! bearer authentication, the fence, JSON): paths, pagination, the
//! account's rate-limit budget and an optional pacer, and what its
//! refusals mean.

mod error;
mod rate_limit;
pub(crate) mod types;

use std::fmt;
use std::time::{Duration, SystemTime};

use ccm_cloud_provider::RateLimiter;
use ccm_rest::{Auth, Rest, Unexpected, decode_answer, excerpt, method_name};
use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub(crate) use error::ApiError;
use rate_limit::ServerBudget;
use types::{ErrorBody, Page};

use crate::config::AccessToken;

/// The API, as its errors name it.
const API: &str = "DigitalOcean API";
/// The API's largest page.
const PER_PAGE: u32 = 200;
/// 200 × 500 objects is far beyond any account; a list still going is broken.
const MAX_PAGES: u32 = 500;
/// How long the droplet metadata service may take to answer.
const METADATA_TIMEOUT: Duration = Duration::from_secs(5);

/// A DigitalOcean API client: one connection pool and one rate-limit state
/// for every call the provider makes.
pub(crate) struct Client {
    rest: Rest,
    base: Url,
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

impl Client {
    pub(crate) fn new(
        base: Url,
        token: &AccessToken,
        pacer: Option<RateLimiter>,
    ) -> Result<Self, ccm_rest::BuildError> {
        let rest = Rest::new("DigitalOcean", Auth::Bearer(token.expose().to_owned()))?;
        Ok(Self {
            rest,
            base,
            pacer,
            budget: ServerBudget::default(),
        })
    }

    /// A plain GET of an absolute URL without the token, for the droplet
    /// metadata service.
    pub(crate) async fn get_text_unauthenticated(&self, url: Url) -> Result<String, ApiError> {
        let path = url.path().to_owned();
        let answer = self.rest.get_unauthenticated(url, METADATA_TIMEOUT).await?;
        let text = String::from_utf8_lossy(&answer.body);
        if !answer.status.is_success() {
            return Err(Unexpected::Status {
                method: "GET",
                path,
                api: API,
                status: answer.status.as_u16(),
                detail: excerpt(&text),
            }
            .into());
        }
        Ok(text.trim().to_owned())
    }

    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, ApiError> {
        let body = self.send(Method::GET, path, query, None::<&()>).await?;
        Ok(decode_answer("GET", path, &body)?)
    }

    pub(crate) async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ApiError> {
        let body = self.send(Method::POST, path, &[], Some(body)).await?;
        Ok(decode_answer("POST", path, &body)?)
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
        Ok(decode_answer("PUT", path, &body)?)
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
                items.push(T::deserialize(item).map_err(|source| Unexpected::Decode {
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
        Err(Unexpected::TooManyPages {
            path: path.to_owned(),
            pages: MAX_PAGES,
        }
        .into())
    }

    async fn send<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> Result<Vec<u8>, ApiError> {
        let name = method_name(&method);
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
        let answer = self.rest.send(method, url, body).await?;
        let status = answer.status;
        let bytes = answer.body;
        let quota = error::quota_refusal(status.as_u16(), &bytes);
        // A quota refusal's 429 spends no rate-limit budget.
        let throttled = self.budget.observe(
            status.as_u16() == 429 && quota.is_none(),
            &answer.headers,
            SystemTime::now(),
        );
        if let Some(message) = quota {
            let message = self.rest.redact(&message);
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
            return Err(Unexpected::NotFound {
                method: name,
                path: path.to_owned(),
            }
            .into());
        }
        if !status.is_success() {
            let detail = match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(e) if !e.id.is_empty() || !e.message.is_empty() => {
                    format!("{}: {}", e.id, e.message)
                }
                _ => excerpt(&String::from_utf8_lossy(&bytes)),
            };
            return Err(Unexpected::Status {
                method: name,
                path: path.to_owned(),
                api: API,
                status: status.as_u16(),
                detail: self.rest.redact(&detail),
            }
            .into());
        }
        Ok(bytes.to_vec())
    }
}

/// A change without an answer to read, as a dry run answers it: the fence
/// refused it and recorded it as planned, so it is `Ok` and the caller
/// makes the rest of its changes, which the plan then holds too. A change
/// whose answer the caller reads (a created load balancer) still ends the
/// call at its refusal.
pub(crate) fn planned(sent: Result<(), ApiError>) -> Result<(), ApiError> {
    match sent {
        Err(ApiError::Send(ccm_rest::SendError::Fenced { .. }))
            if ccm_cloud_provider::fence::dry_run() =>
        {
            Ok(())
        }
        other => other,
    }
}
