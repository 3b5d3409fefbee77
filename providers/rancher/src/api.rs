//! A small client for Rancher 1.x's Cattle `v2-beta` API over reqwest:
//! HTTP basic authentication with an environment API key, collections with
//! filters and pagination, links, actions, and Cattle's error envelope.
//!
//! Unlike the generated scaffold, there is no `Api` trait with an in-memory
//! cloud behind it: the emulator (feature `test-util`) speaks Cattle over
//! HTTP, so every test runs this client too.
//!
//! Requests go through the shared REST client (`ccm_rest`): described to
//! the framework's request fence just before they leave (a dry run sends
//! the reads and plans the rest), a body carried fenced. A dry run's
//! planned change answers as made, and what it would create stands in
//! under a `planned:` ID, so a whole ensure is planned, not its first
//! change.

mod error;

use std::fmt;
use std::time::{Duration, SystemTime};

use ccm_rest::{
    Auth, Rest, Unexpected, decode_answer, excerpt, method_name, path_and_query, retry_after,
};
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub(crate) use error::ApiError;

use crate::cattle::{self, Collection};
use crate::config::Settings;

/// The largest page Cattle serves.
const PAGE: &str = "1000";
/// 1,000 × 100 objects is far beyond any environment; a list still going is
/// broken.
const MAX_PAGES: u32 = 100;

/// The ID prefix of a resource a dry run planned to create.
const PLANNED: &str = "planned:";

/// Whether the resource with ID `id` stands in for one a dry run planned
/// to create.
pub(crate) fn is_planned(id: &str) -> bool {
    id.starts_with(PLANNED)
}

/// A change as a dry run answers it: `Ok(None)` when the fence refused it
/// and recorded it as planned, so that the caller goes on and the plan
/// holds the rest of the change too.
fn planned<T>(sent: Result<T, ApiError>) -> Result<Option<T>, ApiError> {
    match sent {
        Ok(answer) => Ok(Some(answer)),
        Err(ApiError::Send(ccm_rest::SendError::Fenced { .. }))
            if ccm_cloud_provider::fence::dry_run() =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A Cattle API client: one connection pool for every call the provider
/// makes.
pub(crate) struct Client {
    rest: Rest,
    base: Url,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl Client {
    pub(crate) fn new(settings: &Settings) -> Result<Self, ccm_rest::BuildError> {
        let auth = Auth::Basic {
            user: settings.access_key.clone(),
            secret: settings.secret_key.expose().to_owned(),
        };
        Ok(Self {
            rest: Rest::new("Rancher", auth)?,
            base: settings.url.clone(),
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
            Some(_) => Err(Unexpected::TooManyPages {
                path: first.path().to_owned(),
                pages: MAX_PAGES,
            }
            .into()),
        }
    }

    /// `POST <collection>`: creates a resource; `None` when a dry run
    /// planned it (a stand-in from [`Client::stand_in`] takes its place).
    pub(crate) async fn create<B: Serialize, T: DeserializeOwned>(
        &self,
        name: &str,
        body: &B,
    ) -> Result<Option<T>, ApiError> {
        planned(
            self.send(Method::POST, self.collection(name), Some(body))
                .await,
        )
    }

    /// `PUT <self>`: changes a resource's updatable fields; `None` when a
    /// dry run planned it.
    pub(crate) async fn update<B: Serialize, T: DeserializeOwned>(
        &self,
        resource: &cattle::Resource,
        body: &B,
    ) -> Result<Option<T>, ApiError> {
        let url = self.related(resource, "link", "self", &resource.links)?;
        planned(self.send(Method::PUT, url, Some(body)).await)
    }

    /// `POST <self>?action=<action>`, when the resource offers the action
    /// in its current state (sent, or planned in a dry run); `Ok(false)`
    /// when it does not (yet).
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
        let sent = match input {
            Some(input) => {
                self.send::<_, serde_json::Value>(Method::POST, url, Some(input))
                    .await
            }
            None => {
                self.send::<_, serde_json::Value>(Method::POST, url, Some(&empty))
                    .await
            }
        };
        planned(sent)?;
        Ok(true)
    }

    /// `DELETE <self>`; `Ok` when it is already gone, or a dry run planned
    /// it.
    pub(crate) async fn delete(&self, resource: &cattle::Resource) -> Result<(), ApiError> {
        let url = self.related(resource, "link", "self", &resource.links)?;
        match planned(
            self.send::<(), serde_json::Value>(Method::DELETE, url, None)
                .await,
        ) {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// What stands in for the resource called `name` a dry run planned to
    /// create in collection `collection`: an ID nothing real has
    /// (`planned:<name>`), and its `self` link and `actions` on this
    /// server, so that the requests planned after it name it. Nothing is
    /// ever read by it ([`is_planned`]).
    pub(crate) fn stand_in(
        &self,
        collection: &str,
        name: &str,
        actions: &[&str],
    ) -> cattle::Resource {
        let id = format!("{PLANNED}{name}");
        let url = format!("{}/{id}", self.collection(collection));
        cattle::Resource {
            links: [("self".to_owned(), url.clone())].into(),
            actions: actions
                .iter()
                .map(|a| ((*a).to_owned(), format!("{url}?action={a}")))
                .collect(),
            type_: collection.to_owned(),
            id,
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
        let path = path_and_query(&url);
        let answer = self.rest.send(method, url, body).await?;
        let status = answer.status;
        let retry_after = retry_after(&answer.headers, SystemTime::now());
        let bytes = answer.body;
        if status.is_success() {
            return Ok(decode_answer(name, &path, &bytes)?);
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
            StatusCode::NOT_FOUND => Unexpected::NotFound { method: name, path }.into(),
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
            _ => Unexpected::Status {
                method: name,
                path,
                api: "Rancher",
                status: status.as_u16(),
                detail,
            }
            .into(),
        })
    }
}
