//! The validating admission webhook `service-annotations` (upstream's
//! cloud-provider webhooks, KEP 2699, on `--webhook-secure-port`): a
//! LoadBalancer Service whose load-balancer annotations upstream's
//! cloud-controller-manager would fail (a malformed value or an immutable
//! change where the provider's schema says upstream fails on it) is refused
//! at `kubectl apply`, with the words the service controller's Warning
//! event would use ([`decide`]); every other problem (an unknown key under
//! the provider's prefixes, a value upstream reads anyway, a deprecated
//! key) is admitted with a `Warning:` line, so a manifest that applied with
//! the Go CCM still applies. `--webhook-strict` refuses every malformed
//! value, unknown key and immutable change instead.
//!
//! Every replica serves it, leader or not: admission needs no Lease and
//! changes nothing in the cloud. Certificates come from files, from a
//! directory, from memory, or (`--webhook-cert-secret`) from a Secret the
//! CCM keeps itself, also keeping the configuration's `caBundle` current
//! ([`certs`]).

mod certs;
mod decide;
mod handler;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use ccm_cloud_provider::CloudProvider;
use tokio_util::sync::CancellationToken;

use crate::serving::{self, CertSource, Serving, TlsOptions};

pub(crate) use decide::{Policy, decide};
pub(crate) use handler::respond;

/// The webhook's name in `--webhooks`.
pub(crate) const WEBHOOK_NAME: &str = "service-annotations";

/// The path the API server posts reviews to.
pub(crate) const PATH: &str = "/validate-service";

/// How often the kept certificate and the `caBundle` are checked.
const RECHECK_EVERY: Duration = Duration::from_secs(60);

/// A namespaced object's name, `NAMESPACE/NAME` on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectName {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// `--webhook-cert-secret`, `--webhook-service`, `--webhook-configuration`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManagedCerts {
    pub(crate) secret: ObjectName,
    pub(crate) service: ObjectName,
    pub(crate) configuration: String,
}

/// The validated webhook flags.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Options {
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) tls: TlsOptions,
    pub(crate) managed: Option<ManagedCerts>,
    /// `--webhook-client-ca-file`: callers must present a certificate this
    /// CA vouches for.
    pub(crate) client_ca: Option<std::path::PathBuf>,
    /// `--webhook-strict`: which problems are refused.
    pub(crate) policy: Policy,
}

/// What went wrong starting the webhook.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error(
        "cannot serve the admission webhook on {addr} (--webhook-bind-address, --webhook-secure-port): {source}"
    )]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Serving(#[from] serving::Error),
    #[error(transparent)]
    Certs(#[from] certs::Error),
}

impl Error {
    /// Bad input (exit 64) rather than a failure of the cluster.
    pub(crate) fn is_usage(&self) -> bool {
        match self {
            Self::Serving(e) => e.is_usage(),
            Self::Bind { .. } | Self::Certs(_) => false,
        }
    }
}

/// The router: one route; reviews of up to [`handler::MAX_BODY`], at most
/// [`handler::MAX_CONCURRENT_REVIEWS`] at once, decided under `policy`.
pub(crate) fn router(cloud: Arc<dyn CloudProvider>, policy: Policy) -> Router {
    Router::new()
        .route(PATH, post(handler::validate))
        .with_state(handler::Reviewer::new(cloud, policy))
}

/// Binds the port and loads (or issues) the certificate, then returns the
/// server to run until `shutdown`; with kept certificates, the server also
/// renews them and keeps the `caBundle` current.
///
/// # Errors
/// The port is taken, a certificate file is bad, or the kept Secret cannot
/// be read or written.
pub(crate) async fn start(
    options: &Options,
    cloud: Arc<dyn CloudProvider>,
    client: kube::Client,
    shutdown: CancellationToken,
) -> Result<impl Future<Output = Result<(), String>> + Send + 'static, Error> {
    let listener = serving::bind(options.addr, false).map_err(|source| Error::Bind {
        addr: options.addr,
        source,
    })?;
    let (resolver, keeper) = match &options.managed {
        Some(managed) => {
            let material = certs::load_or_issue(&client, managed).await?;
            let current = Arc::new(certs::Current::new(material.certified_key()?));
            let keeper = keep(
                client,
                managed.clone(),
                material,
                current.clone(),
                shutdown.clone(),
            );
            (
                Some(current as Arc<dyn rustls::server::ResolvesServerCert>),
                Some(keeper),
            )
        }
        None => (None, None),
    };
    let served = Serving::unguarded(
        &options.tls,
        serving::WEBHOOK_SERVING,
        options.addr.ip(),
        resolver,
        options.client_ca.as_deref(),
        &shutdown,
    )?;
    let source = match (&options.managed, &options.tls.cert) {
        (Some(_), _) => "the certificate kept in --webhook-cert-secret",
        (None, CertSource::Generated) => "a self-signed certificate made in memory",
        (None, _) => "the configured certificate",
    };
    tracing::info!(addr = %options.addr, path = PATH, "serving the admission webhook over HTTPS with {source}");
    let router = router(cloud, options.policy);
    Ok(async move {
        let keeper = async move {
            if let Some(keeper) = keeper {
                keeper.await;
            }
        };
        let ((), served) = tokio::join!(keeper, serving::serve(listener, served, router, shutdown));
        served.map_err(|e| e.to_string())
    })
}

/// Keeps the `caBundle` equal to the CA and renews the serving certificate
/// before it ends, every [`RECHECK_EVERY`] until `shutdown`. Failures are
/// logged and retried: admission fails open (`failurePolicy: Ignore`) while
/// the API server cannot reach a trusted certificate.
async fn keep(
    client: kube::Client,
    managed: ManagedCerts,
    mut material: certs::Material,
    current: Arc<certs::Current>,
    shutdown: CancellationToken,
) {
    loop {
        match certs::sync_ca_bundle(&client, &managed.configuration, &material.ca_cert).await {
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(error = %err, "cannot keep the admission webhook's caBundle current; retrying in a minute");
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(RECHECK_EVERY) => {}
        }
        match certs::load_or_issue(&client, &managed).await {
            Ok(fresh) if fresh != material => match fresh.certified_key() {
                Ok(key) => {
                    current.set(key);
                    material = fresh;
                    tracing::info!("serving the admission webhook's renewed certificate");
                }
                Err(err) => {
                    tracing::warn!(error = %err, "the admission webhook's renewed certificate is unusable");
                }
            },
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(error = %err, "cannot renew the admission webhook's certificate; retrying in a minute");
            }
        }
    }
}
