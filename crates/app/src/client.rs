//! The Kubernetes client: from `--kubeconfig`, `--master`, or in-cluster,
//! rate-limited client-side to `--kube-api-qps` / `--kube-api-burst`.

mod qps;

use std::path::Path;

use kube::Client;
use kube::client::ClientBuilder;
use kube::config::{Config, KubeConfigOptions, Kubeconfig};

pub(crate) use qps::QpsLayer;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The kubeconfig file could not be read or parsed.
    #[error("--kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// `--master` is not a URL.
    #[error("--master `{0}` is not a URL")]
    Master(String),
    /// Neither flag was given and no in-cluster or `KUBECONFIG` config exists.
    #[error("no Kubernetes configuration: set --kubeconfig or --master, or run in a cluster ({0})")]
    Infer(#[source] kube::config::InferConfigError),
    /// The client stack could not be built from the configuration.
    #[error("could not build the Kubernetes client: {0}")]
    Build(#[source] kube::Error),
}

/// Loads the configuration as upstream's `BuildConfigFromFlags` does:
/// `--kubeconfig` if given, with `--master` overriding its server; `--master`
/// alone; otherwise `KUBECONFIG` or the in-cluster service account.
pub(crate) async fn config(
    kubeconfig: Option<&Path>,
    master: Option<&str>,
) -> Result<Config, ClientError> {
    let master = master
        .map(|m| {
            m.parse::<http::Uri>()
                .map_err(|_| ClientError::Master(m.to_owned()))
        })
        .transpose()?;
    let mut config = match (kubeconfig, &master) {
        (Some(path), _) => {
            let kubeconfig_error = |source| ClientError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let file = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)?
        }
        (None, Some(url)) => Config::new(url.clone()),
        (None, None) => Config::infer().await.map_err(ClientError::Infer)?,
    };
    if let Some(url) = master {
        config.cluster_url = url;
    }
    Ok(config)
}

/// A client for `config` whose requests are limited to `qps` per second
/// with bursts of `burst`, identifying itself as `user_agent` (as upstream's
/// `cloud-controller-manager/<version>` and `.../leader-election`).
pub(crate) fn build(
    mut config: Config,
    qps: f64,
    burst: u32,
    user_agent: &str,
) -> Result<Client, ClientError> {
    if let Ok(value) = http::HeaderValue::from_str(user_agent) {
        config.headers.push((http::header::USER_AGENT, value));
    }
    let builder = ClientBuilder::try_from(config).map_err(ClientError::Build)?;
    Ok(builder.with_layer(&QpsLayer::new(qps, burst)).build())
}
