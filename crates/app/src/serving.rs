//! HTTPS on `--secure-port` with delegated authentication and authorization,
//! as upstream's `SecureServingOptionsWithLoopback`,
//! `DelegatingAuthenticationOptions` and `DelegatingAuthorizationOptions`.
//!
//! [`Serving::build`] turns the validated [`Config`] and the review clients
//! into a TLS acceptor (certificates reloaded from disk, SNI) and a [`Guard`]
//! that every request passes before the router: authentication (request
//! header, client certificate, bearer token by TokenReview; else anonymous),
//! then authorization (always-allowed paths, `system:masters`,
//! SubjectAccessReview). Reviews go through a `kube::Client`, so they work
//! against any API server.

mod authn;
mod authz;
mod cache;
mod certs;
mod client_ca;
mod listener;
mod reload;
mod responses;
mod review;
mod tls;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tokio_util::sync::CancellationToken;

pub(crate) use certs::{WEBHOOK_SERVING, certified_key_from_pem};
pub(crate) use listener::{Limits, bind, serve};
pub(crate) use tls::{TlsVersion, is_go_cipher_suite};

/// The authentication ConfigMap is read again every this many file polls
/// (every minute in production).
const LOOKUP_EVERY_RELOADS: u32 = 12;

/// Validated serving flags.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    /// `--bind-address`:`--secure-port`.
    pub(crate) addr: SocketAddr,
    /// `--permit-port-sharing`: SO_REUSEPORT.
    pub(crate) permit_port_sharing: bool,
    /// `--permit-address-sharing`: SO_REUSEADDR.
    pub(crate) permit_address_sharing: bool,
    pub(crate) tls: TlsOptions,
    pub(crate) authentication: AuthenticationOptions,
    pub(crate) authorization: AuthorizationOptions,
}

/// Where the default serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CertSource {
    /// `--tls-cert-file` and `--tls-private-key-file`, reloaded on change.
    Files { cert: PathBuf, key: PathBuf },
    /// `--cert-dir`: its `cloud-controller-manager.crt`/`.key`, written
    /// self-signed when absent, then reloaded on change.
    Dir(PathBuf),
    /// A self-signed certificate made in memory at start-up.
    Generated,
}

/// One `--tls-sni-cert-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SniCertKey {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    /// Explicit names; empty: the certificate's own names.
    pub(crate) names: Vec<String>,
}

/// The TLS flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsOptions {
    pub(crate) cert: CertSource,
    pub(crate) sni: Vec<SniCertKey>,
    pub(crate) min_version: TlsVersion,
    /// Go's names, all known; empty: the defaults.
    pub(crate) cipher_suites: Vec<String>,
    /// `!--disable-http2-serving`.
    pub(crate) http2: bool,
    /// `--http2-max-streams-per-connection`; 0: upstream's 100.
    pub(crate) http2_max_streams: u32,
}

/// The request-header (front proxy) flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestHeaderOptions {
    pub(crate) client_ca_file: Option<PathBuf>,
    pub(crate) allowed_names: Vec<String>,
    pub(crate) username_headers: Vec<String>,
    pub(crate) group_headers: Vec<String>,
    pub(crate) extra_header_prefixes: Vec<String>,
    pub(crate) uid_headers: Vec<String>,
}

/// The delegated authentication flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthenticationOptions {
    pub(crate) kubeconfig: Option<PathBuf>,
    pub(crate) skip_lookup: bool,
    pub(crate) tolerate_lookup_failure: bool,
    pub(crate) cache_ttl: Duration,
    pub(crate) client_ca_file: Option<PathBuf>,
    pub(crate) request_header: RequestHeaderOptions,
}

/// The delegated authorization flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthorizationOptions {
    pub(crate) kubeconfig: Option<PathBuf>,
    pub(crate) always_allow_paths: Vec<String>,
    pub(crate) allow_ttl: Duration,
    pub(crate) deny_ttl: Duration,
}

/// Why serving could not be set up. Messages name the flag and path and
/// never hold key or token material.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A certificate, key or CA file could not be read.
    #[error("{flag} {}: cannot read it: {source}", path.display())]
    Read {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file was read but holds no usable certificate, key or CA.
    #[error("{flag} {}: {reason}", path.display())]
    Invalid {
        flag: &'static str,
        path: PathBuf,
        reason: String,
    },
    /// The self-signed certificate could not be made or written.
    #[error("cannot make a self-signed serving certificate: {0}")]
    SelfSigned(String),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// The authentication ConfigMap could not be read.
    #[error(
        "cannot look up configmap/extension-apiserver-authentication in kube-system (--authentication-skip-lookup, --authentication-tolerate-lookup-failure): {0}"
    )]
    Lookup(kube::Error),
}

impl Error {
    /// Bad input (exit 64) rather than a failure of the cluster.
    pub(crate) fn is_usage(&self) -> bool {
        !matches!(self, Self::Lookup(_))
    }
}

/// The clients that send TokenReviews and SubjectAccessReviews (and read
/// the authentication ConfigMap).
#[derive(Clone)]
pub(crate) struct ReviewClients {
    pub(crate) authentication: kube::Client,
    pub(crate) authorization: kube::Client,
}

impl std::fmt::Debug for ReviewClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReviewClients").finish_non_exhaustive()
    }
}

/// Everything the HTTPS server needs beyond its router.
#[derive(Debug, Clone)]
pub(crate) struct Serving {
    pub(crate) tls: Arc<rustls::ServerConfig>,
    /// `None` serves every request unauthenticated (the admission webhook,
    /// which the API server calls without credentials).
    pub(crate) guard: Option<Arc<Guard>>,
    pub(crate) http2: bool,
    pub(crate) http2_max_streams: u32,
    pub(crate) limits: Limits,
}

impl Serving {
    /// Loads certificates and CAs (looking up the authentication ConfigMap
    /// unless told not to) and starts their reloading until `shutdown`.
    ///
    /// # Errors
    /// [`Error`]: an unreadable or invalid file, a refused TLS setting, a
    /// failed lookup that is not tolerated.
    pub(crate) async fn build(
        config: &Config,
        clients: ReviewClients,
        shutdown: &CancellationToken,
    ) -> Result<Self, Error> {
        Self::build_with(config, clients, shutdown, reload::DEFAULT_INTERVAL).await
    }

    /// [`Serving::build`] polling files every `reload_every`.
    pub(crate) async fn build_with(
        config: &Config,
        clients: ReviewClients,
        shutdown: &CancellationToken,
        reload_every: Duration,
    ) -> Result<Self, Error> {
        let mut reloader = reload::Reloader::default();
        let resolver = certs::Resolver::load(
            &config.tls,
            certs::SECURE_SERVING,
            config.addr.ip(),
            &mut reloader,
        )?;
        let authenticator = authn::Authenticator::build(
            &config.authentication,
            clients.authentication,
            &mut reloader,
        )
        .await?;
        if let Some(cluster) = authenticator.cluster() {
            cluster.spawn_refresh(reload_every * LOOKUP_EVERY_RELOADS, shutdown.clone());
        }
        let client_auth = authenticator.client_ca_hints();
        let client_auth = match client_auth {
            Some(hints) => tls::ClientAuth::Request(hints),
            None => tls::ClientAuth::None,
        };
        let tls = tls::server_config(&config.tls, Arc::new(resolver), client_auth)?;
        let authorizer = authz::Authorizer::new(&config.authorization, clients.authorization);
        reloader.spawn(reload_every, shutdown.clone());
        Ok(Self {
            tls: Arc::new(tls),
            guard: Some(Arc::new(Guard {
                authenticator,
                authorizer,
            })),
            http2: config.tls.http2,
            http2_max_streams: config.tls.http2_max_streams,
            limits: Limits::default(),
        })
    }
}

impl Serving {
    /// A server without authentication or authorization (the admission
    /// webhook): certificates from `options.cert` named by `flags` (files
    /// reloaded every `reload_every` until `shutdown`), or from `resolver`
    /// when given; with `client_ca` (a file named by `flags`, reloaded), a
    /// client certificate it vouches for is required in the handshake,
    /// else none is asked for.
    ///
    /// # Errors
    /// [`Error`]: an unreadable or invalid file, a refused TLS setting.
    pub(crate) fn unguarded(
        options: &TlsOptions,
        flags: certs::CertFlags,
        bind: std::net::IpAddr,
        resolver: Option<Arc<dyn rustls::server::ResolvesServerCert>>,
        client_ca: Option<&std::path::Path>,
        shutdown: &CancellationToken,
    ) -> Result<Self, Error> {
        let mut reloader = reload::Reloader::default();
        let resolver = match resolver {
            Some(resolver) => resolver,
            None => Arc::new(certs::Resolver::load(options, flags, bind, &mut reloader)?),
        };
        let client_auth = match client_ca {
            Some(path) => tls::ClientAuth::Require(Arc::new(client_ca::RequireClientCert::new(
                client_ca::CaSource::file(flags.client_ca, path, &mut reloader)?,
            ))),
            None => tls::ClientAuth::None,
        };
        reloader.spawn(reload::DEFAULT_INTERVAL, shutdown.clone());
        let tls = tls::server_config(options, resolver, client_auth)?;
        Ok(Self {
            tls: Arc::new(tls),
            guard: None,
            http2: options.http2,
            http2_max_streams: options.http2_max_streams,
            limits: Limits::default(),
        })
    }
}

impl Serving {
    /// `router` behind the guard on its routes only, the guard taken out
    /// of `self` so [`serve`] does not add it again around everything. A
    /// path no route serves answers 404 before authentication: a made-up
    /// path costs no TokenReview, no SubjectAccessReview and no cache
    /// entry. (Upstream authorizes first and answers 403; the project
    /// answers 404, which tells a caller nothing a route list would not.)
    pub(crate) fn guard_routes(&mut self, router: axum::Router) -> axum::Router {
        match self.guard.take() {
            Some(state) => router.route_layer(axum::middleware::from_fn_with_state(state, guard)),
            None => router,
        }
    }
}

/// Authentication and authorization in front of every route.
#[derive(Debug)]
pub(crate) struct Guard {
    authenticator: authn::Authenticator,
    authorizer: authz::Authorizer,
}

/// The axum middleware: authenticates, authorizes, then runs the route.
pub(crate) async fn guard(
    State(guard): State<Arc<Guard>>,
    mut request: Request,
    next: Next,
) -> Response {
    let user = match guard.authenticator.authenticate(&mut request).await {
        Ok(user) => user,
        Err(err) => {
            tracing::info!(path = %request.uri().path(), error = %err, "unauthorized");
            return responses::unauthorized();
        }
    };
    let attributes = authz::Attributes {
        verb: authz::verb(request.method()),
        path: request.uri().path().to_owned(),
        user,
    };
    match guard.authorizer.authorize(&attributes).await {
        Ok(authz::Decision::Allow) => next.run(request).await,
        // Upstream answers an anonymous request that authorization denies
        // with 403 (`User "system:anonymous" cannot get path ...`). This
        // project answers 401 instead: the caller sent no credentials, so
        // "authenticate" is the useful answer, and scrapers without a token
        // see the same 401 as with a bad one. Anonymous requests still reach
        // authorization, so always-allowed paths and any grant to
        // system:anonymous or system:unauthenticated work as upstream.
        Ok(authz::Decision::Deny { .. }) if attributes.user.is_anonymous() => {
            responses::unauthorized()
        }
        Ok(authz::Decision::Deny { reason }) => {
            tracing::debug!(path = %attributes.path, user = %attributes.user.name, %reason, "access denied");
            responses::forbidden(&attributes, &reason)
        }
        Err(err) => {
            tracing::error!(path = %attributes.path, error = %err, "authorization failed");
            responses::internal_error(request.uri(), &err.to_string())
        }
    }
}
