//! The Kubernetes client: from `--kubeconfig`, `--master`, or in-cluster,
//! rate-limited client-side to `--kube-api-qps` / `--kube-api-burst`.

mod dry_run;
mod qps;
pub(crate) mod service_account;

use std::path::Path;

use kube::Client;
use kube::client::ClientBuilder;
use kube::config::{Config, KubeConfigOptions, Kubeconfig};

pub(crate) use dry_run::PlanWrites;
pub(crate) use qps::QpsLayer;

/// Why no client could be built. Each message holds its cause's, so none
/// has a `source()` that a chain printer would show a second time.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The kubeconfig file could not be read or parsed. The message never
    /// quotes the file (see [`kubeconfig_message`]).
    #[error("--kubeconfig {path}: {}", kubeconfig_message(error))]
    Kubeconfig {
        path: String,
        error: kube::config::KubeconfigError,
    },
    /// `--master` is not a URL.
    #[error("--master `{0}` is not a URL")]
    Master(String),
    /// Neither flag was given and no in-cluster or `KUBECONFIG` config exists.
    #[error("no Kubernetes configuration: set --kubeconfig or --master, or run in a cluster ({0})")]
    Infer(kube::config::InferConfigError),
    /// The client stack could not be built from the configuration.
    #[error("could not build the Kubernetes client: {0}")]
    Build(kube::Error),
    /// `--kube-api-qps` and `--kube-api-burst` make no enforceable limit.
    #[error("--kube-api-qps / --kube-api-burst: {0}")]
    RateLimit(ccm_cloud_provider::InvalidRateLimit),
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
            let kubeconfig_error = |error| ClientError::Kubeconfig {
                path: path.display().to_string(),
                error,
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
/// with bursts of `burst` (no limit when `qps` is `None`, as client-go with
/// a negative QPS), identifying itself as `user_agent` (as upstream's
/// `cloud-controller-manager/<version>` and `.../leader-election`).
pub(crate) fn build(
    config: Config,
    qps: Option<f64>,
    burst: u32,
    user_agent: &str,
) -> Result<Client, ClientError> {
    build_with(config, qps, burst, user_agent, None)
}

/// [`build`], with every write planned instead of sent when `plan` is set
/// (`--dry-run`).
pub(crate) fn build_with(
    mut config: Config,
    qps: Option<f64>,
    burst: u32,
    user_agent: &str,
    plan: Option<&PlanWrites>,
) -> Result<Client, ClientError> {
    if let Ok(value) = http::HeaderValue::from_str(user_agent) {
        config.headers.push((http::header::USER_AGENT, value));
    }
    let builder = ClientBuilder::try_from(config).map_err(ClientError::Build)?;
    let limit = qps
        .map(|qps| QpsLayer::new(qps, burst).map_err(ClientError::RateLimit))
        .transpose()?;
    Ok(match (limit, plan) {
        (Some(limit), Some(plan)) => builder.with_layer(plan).with_layer(&limit).build(),
        (Some(limit), None) => builder.with_layer(&limit).build(),
        (None, Some(plan)) => builder.with_layer(plan).build(),
        (None, None) => builder.build(),
    })
}

/// A kubeconfig error in one line that quotes nothing of the file: the
/// parser's message shows the offending lines (a bearer token, a client
/// key) and may quote a value, so only its first line is kept, with every
/// quoted value replaced by `…`.
pub(crate) fn kubeconfig_message(error: &kube::config::KubeconfigError) -> String {
    redact_quotes(error.to_string().lines().next().unwrap_or_default())
}

fn redact_quotes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut open: Option<char> = None;
    for c in line.chars() {
        match open {
            Some(quote) if c == quote => {
                out.push('…');
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if matches!(c, '"' | '`') {
                    open = Some(c);
                }
            }
        }
    }
    if open.is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:6443'}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user: {token: t}
";

    #[tokio::test]
    async fn master_alone_is_the_server() {
        let config = config(None, Some("http://127.0.0.1:8080")).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "http://127.0.0.1:8080/");
    }

    #[tokio::test]
    async fn master_overrides_the_kubeconfig_server_and_keeps_its_credentials() {
        let path = std::env::temp_dir().join(format!("ccm-app-kubeconfig-{}", std::process::id()));
        std::fs::write(&path, KUBECONFIG).unwrap();
        let from_file = config(Some(&path), None).await.unwrap();
        let overridden = config(Some(&path), Some("http://127.0.0.2:8080"))
            .await
            .unwrap();
        std::fs::remove_file(&path).unwrap();

        assert_eq!(from_file.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(overridden.cluster_url.to_string(), "http://127.0.0.2:8080/");
        assert!(
            overridden.auth_info.token.is_some(),
            "credentials from the file"
        );
    }

    #[tokio::test]
    async fn a_malformed_kubeconfig_is_one_line_that_never_echoes_its_secrets() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            (
                "syntax",
                "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: SUPERSECRET123\n  bad: [unclosed\nclusters: {}\n",
            ),
            (
                "type",
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1\n    insecure-skip-tls-verify: SUPERSECRET123\n",
            ),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let err = config(Some(&path), None).await.unwrap_err().to_string();
            assert!(!err.contains("SUPERSECRET123"), "{name}: {err}");
            assert_eq!(err.lines().count(), 1, "{name}: {err}");
            assert!(
                err.starts_with(&format!("--kubeconfig {}: ", path.display())),
                "{name}: {err}"
            );
        }
    }

    #[test]
    fn quoted_values_are_redacted() {
        assert_eq!(
            redact_quotes("invalid type: string \"s3cret\", expected a boolean"),
            "invalid type: string \"…\", expected a boolean"
        );
        assert_eq!(redact_quotes("unknown `x` and `y"), "unknown `…` and `…");
    }

    #[tokio::test]
    async fn a_master_that_is_not_a_url_is_named_in_the_error() {
        let err = config(None, Some("not a url")).await.unwrap_err();
        assert_eq!(err.to_string(), "--master `not a url` is not a URL");
    }
}
