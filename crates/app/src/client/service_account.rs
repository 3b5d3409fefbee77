//! `--use-service-account-credentials`: each controller talks to the API as
//! its own ServiceAccount in kube-system, as upstream's
//! `DynamicControllerClientBuilder` does. The ServiceAccount is created when
//! missing; its tokens come from the TokenRequest API, are renewed when 80%
//! of their lifetime has passed, and again at once when the API server
//! refuses one (401), in which case the request is sent once more with the
//! new token, so a controller never sees the refusal.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::client::Body;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tower::{BoxError, Layer, Service, ServiceExt};

/// Where upstream keeps controller ServiceAccounts.
pub(crate) const NAMESPACE: &str = "kube-system";

/// Token lifetime requested, as upstream's client builder (one hour).
const EXPIRATION_SECONDS: i64 = 3600;

/// Requests waiting for the buffered client stack.
const BUFFER: usize = 64;

/// Why no token could be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenError {
    /// The ServiceAccount could not be read or created.
    #[error("ServiceAccount {NAMESPACE}/{name}: {error}")]
    ServiceAccount { name: String, error: kube::Error },
    /// The TokenRequest failed.
    #[error("TokenRequest for ServiceAccount {NAMESPACE}/{name}: {error}")]
    TokenRequest { name: String, error: kube::Error },
    /// The answer carried no token.
    #[error("TokenRequest for ServiceAccount {NAMESPACE}/{name} answered without a token")]
    Empty { name: String },
}

/// A current token.
struct Cached {
    token: String,
    renew_at: Instant,
}

/// Tokens of one ServiceAccount, fetched with the main client.
pub(crate) struct TokenSource {
    name: String,
    main: kube::Client,
    cached: Mutex<Option<Cached>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("TokenSource")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TokenSource {
    pub(crate) fn new(name: &str, main: kube::Client) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            main,
            cached: Mutex::new(None),
        })
    }

    /// A token that is not due for renewal.
    pub(crate) async fn token(&self) -> Result<String, TokenError> {
        let mut cached = self.cached.lock().await;
        if let Some(current) = cached.as_ref()
            && Instant::now() < current.renew_at
        {
            return Ok(current.token.clone());
        }
        let fresh = self.request().await?;
        let token = fresh.token.clone();
        *cached = Some(fresh);
        Ok(token)
    }

    /// Forgets `refused`, which the API server no longer accepts.
    pub(crate) async fn refused(&self, refused: &str) {
        let mut cached = self.cached.lock().await;
        if cached.as_ref().is_some_and(|c| c.token == refused) {
            *cached = None;
        }
    }

    async fn request(&self) -> Result<Cached, TokenError> {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.main.clone(), NAMESPACE);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(EXPIRATION_SECONDS),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let pp = PostParams::default();
        let answer = match accounts
            .create_token_request(&self.name, &pp, &request)
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 404 => {
                self.create_account(&accounts).await?;
                accounts
                    .create_token_request(&self.name, &pp, &request)
                    .await
            }
            other => other,
        }
        .map_err(|error| TokenError::TokenRequest {
            name: self.name.clone(),
            error,
        })?;
        let status = answer.status.ok_or_else(|| TokenError::Empty {
            name: self.name.clone(),
        })?;
        if status.token.is_empty() {
            return Err(TokenError::Empty {
                name: self.name.clone(),
            });
        }
        let lifetime = Duration::try_from(
            status
                .expiration_timestamp
                .0
                .duration_since(k8s_openapi::jiff::Timestamp::now()),
        )
        .unwrap_or(Duration::ZERO);
        tracing::debug!(service_account = %self.name, ?lifetime, "got a token");
        Ok(Cached {
            token: status.token,
            renew_at: Instant::now() + lifetime.mul_f64(0.8),
        })
    }

    async fn create_account(&self, accounts: &Api<ServiceAccount>) -> Result<(), TokenError> {
        let account = ServiceAccount {
            metadata: kube::api::ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(NAMESPACE.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        match accounts.create(&PostParams::default(), &account).await {
            Ok(_) => {
                tracing::info!(service_account = %self.name, namespace = NAMESPACE, "created the controller's ServiceAccount");
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(error) => Err(TokenError::ServiceAccount {
                name: self.name.clone(),
                error,
            }),
        }
    }
}

/// Puts the ServiceAccount's bearer token on every request.
#[derive(Debug, Clone)]
pub(crate) struct BearerLayer {
    source: Arc<TokenSource>,
}

impl BearerLayer {
    pub(crate) fn new(source: Arc<TokenSource>) -> Self {
        Self { source }
    }
}

impl<S> Layer<S> for BearerLayer
where
    S: Service<http::Request<Body>> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send + Sync,
    S::Response: Send + 'static,
{
    type Service = Bearer<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Bearer {
            inner: tower::buffer::Buffer::new(inner, BUFFER),
            source: self.source.clone(),
        }
    }
}

/// The service [`BearerLayer`] produces.
pub(crate) struct Bearer<S: Service<http::Request<Body>>> {
    inner: tower::buffer::Buffer<http::Request<Body>, S::Future>,
    source: Arc<TokenSource>,
}

impl<S: Service<http::Request<Body>>> std::fmt::Debug for Bearer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bearer")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl<S, B> Service<http::Request<Body>> for Bearer<S>
where
    S: Service<http::Request<Body>, Response = http::Response<B>> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send + Sync,
    B: Send + 'static,
{
    type Response = http::Response<B>;
    type Error = BoxError;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        // `poll_ready` reserved a slot in this handle; the clone sends the retry.
        let ready = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, ready);
        let source = self.source.clone();
        Box::pin(async move {
            let retry = clone_request(&request);
            let token = source.token().await?;
            let mut inner = ready;
            let response = inner.call(with_token(request, &token)?).await?;
            if response.status() != http::StatusCode::UNAUTHORIZED {
                return Ok(response);
            }
            let Some(retry) = retry else {
                return Ok(response);
            };
            tracing::debug!(service_account = %source.name, "the API server refused the token; renewing it");
            source.refused(&token).await;
            let token = source.token().await?;
            inner.ready().await?.call(with_token(retry, &token)?).await
        })
    }
}

/// The request again, if its body can be sent twice.
fn clone_request(request: &http::Request<Body>) -> Option<http::Request<Body>> {
    let body = request.body().try_clone()?;
    let mut copy = http::Request::new(body);
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    Some(copy)
}

fn with_token(
    mut request: http::Request<Body>,
    token: &str,
) -> Result<http::Request<Body>, BoxError> {
    let mut value = http::HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| BoxError::from("the ServiceAccount token is not a valid header value"))?;
    value.set_sensitive(true);
    request
        .headers_mut()
        .insert(http::header::AUTHORIZATION, value);
    Ok(request)
}

/// Each controller's own client, by ServiceAccount name: with
/// `--use-service-account-credentials` authenticated as that account,
/// otherwise with the main credentials and a rate limit of its own.
#[derive(Clone, Default)]
pub(crate) struct ControllerClients {
    by_account: std::collections::BTreeMap<&'static str, kube::Client>,
}

impl std::fmt::Debug for ControllerClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_account.keys()).finish()
    }
}

impl ControllerClients {
    pub(crate) fn insert(&mut self, account: &'static str, client: kube::Client) {
        self.by_account.insert(account, client);
    }

    pub(crate) fn contains(&self, account: &str) -> bool {
        self.by_account.contains_key(account)
    }

    /// Controller `id`'s own client, if it has one.
    #[cfg(test)]
    pub(crate) fn client_for(&self, id: ccm_controllers::ControllerId) -> Option<kube::Client> {
        self.by_account.get(id.service_account()).cloned()
    }

    pub(crate) fn accounts(&self) -> Vec<&'static str> {
        self.by_account.keys().copied().collect()
    }

    /// The context controller `id` runs with: `ctx` itself, or `ctx` with the
    /// controller's own client. The informers and the Lease keep the main
    /// credentials, as upstream.
    pub(crate) fn context_for(
        &self,
        id: ccm_controllers::ControllerId,
        ctx: &ccm_runtime::Context,
    ) -> ccm_runtime::Context {
        match self.by_account.get(id.service_account()) {
            Some(client) => ccm_runtime::Context {
                client: client.clone(),
                ..ctx.clone()
            },
            None => ctx.clone(),
        }
    }
}

/// A client for `config` without its own credentials, authenticated as
/// ServiceAccount `kube-system/<name>` through `source`.
pub(crate) fn client(
    mut config: kube::Config,
    source: Arc<TokenSource>,
    qps: Option<f64>,
    burst: u32,
    user_agent: &str,
) -> Result<kube::Client, super::ClientError> {
    config.auth_info = kube::config::AuthInfo::default();
    if let Ok(value) = http::HeaderValue::from_str(user_agent) {
        config.headers.push((http::header::USER_AGENT, value));
    }
    let builder = kube::client::ClientBuilder::try_from(config)
        .map_err(super::ClientError::Build)?
        .with_layer(&BearerLayer::new(source));
    Ok(match qps {
        Some(qps) => {
            let limit = super::QpsLayer::new(qps, burst).map_err(super::ClientError::RateLimit)?;
            builder.with_layer(&limit).build()
        }
        None => builder.build(),
    })
}
