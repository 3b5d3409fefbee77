//! Who may do what in the sandbox: the API server authenticates static
//! tokens and authorizes with RBAC, so the CCM's `/metrics` is read as a
//! real scraper reads it — with a token granted `get` on it.
//!
//! Tokens are random per run and the file lives in the run directory: the
//! server listens on loopback only and stops with the sandbox.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::http;

/// The user granted `get` on `/metrics`.
const METRICS_READER: &str = "metrics-reader";
/// The administrator: the kubeconfig's user (the server's first
/// `system:masters` token), the CCM's and the sandbox's own reads.
const ADMIN: &str = "sandbox-admin";

/// The run's tokens.
#[derive(Debug)]
pub(crate) struct Access {
    admin_token: String,
    metrics_reader_token: String,
    token_file: PathBuf,
}

impl Access {
    /// Makes fresh tokens and writes them as kube-apiserver's static token
    /// file in `dir`.
    pub(crate) fn write(dir: &Path) -> anyhow::Result<Self> {
        let access = Self {
            admin_token: random_token()?,
            metrics_reader_token: random_token()?,
            token_file: dir.join("tokens.csv"),
        };
        std::fs::write(&access.token_file, access.token_file_text())
            .with_context(|| format!("writing {}", access.token_file.display()))?;
        Ok(access)
    }

    fn token_file_text(&self) -> String {
        format!(
            "{},{ADMIN},{ADMIN},\"system:masters\"\n{},{METRICS_READER},{METRICS_READER}\n",
            self.admin_token, self.metrics_reader_token
        )
    }

    /// The test API server's flags for this access.
    pub(crate) fn api_server_args(&self) -> Vec<String> {
        vec![
            format!("--token-auth-file={}", self.token_file.display()),
            "--authorization-mode=RBAC".to_owned(),
        ]
    }

    pub(crate) fn admin_token(&self) -> &str {
        &self.admin_token
    }

    pub(crate) fn metrics_reader_token(&self) -> &str {
        &self.metrics_reader_token
    }

    /// Creates, as the administrator, the grants the sandbox relies on:
    /// `get` on `/metrics` for the metrics reader, and the API for
    /// anonymous requests — kubectl sends no credentials to a server that
    /// is not TLS (client-go's clientcmd drops them), and the test API
    /// server speaks plain HTTP. Anonymous requests get neither `/metrics`
    /// nor any other non-resource path but discovery.
    pub(crate) fn grant(&self, api: SocketAddr) -> anyhow::Result<()> {
        let binding = |name: &str, user: &str| {
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            })
        };
        let role = |name: &str, rules: Value| {
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name},
                "rules": rules,
            })
        };
        let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
        let bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
        self.create(
            api,
            roles,
            &role(
                METRICS_READER,
                json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
            ),
        )?;
        self.create(api, bindings, &binding(METRICS_READER, METRICS_READER))?;
        self.create(
            api,
            roles,
            &role(
                "sandbox-kubectl",
                json!([
                    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                    {
                        "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/version", "/openapi", "/openapi/*"],
                        "verbs": ["get"],
                    },
                ]),
            ),
        )?;
        self.create(
            api,
            bindings,
            &binding("sandbox-kubectl", "system:anonymous"),
        )
    }

    fn create(&self, api: SocketAddr, path: &str, object: &Value) -> anyhow::Result<()> {
        let response = http::request_as(
            api,
            "POST",
            path,
            Some(("application/json", &object.to_string())),
            Some(&self.admin_token),
        )?;
        if response.status != 201 {
            bail!(
                "creating {} {}: HTTP {}: {}",
                object["kind"],
                object["metadata"]["name"],
                response.status,
                response.body
            );
        }
        Ok(())
    }

    /// A command that reads the CCM's `/metrics` at `metrics` as the
    /// metrics reader.
    pub(crate) fn curl_line(&self, metrics: SocketAddr) -> String {
        format!(
            "curl -k -H \"Authorization: Bearer {}\" https://{metrics}/metrics",
            self.metrics_reader_token
        )
    }
}

/// 32 hex digits from the system's random source.
fn random_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_the_file_lists_the_admin_first() {
        let dir = tempfile::tempdir().unwrap();
        let access = Access::write(dir.path()).unwrap();
        assert_eq!(access.admin_token().len(), 32);
        assert_ne!(access.admin_token(), access.metrics_reader_token());
        let text = std::fs::read_to_string(dir.path().join("tokens.csv")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                format!(
                    "{},sandbox-admin,sandbox-admin,\"system:masters\"",
                    access.admin_token()
                ),
                format!(
                    "{},metrics-reader,metrics-reader",
                    access.metrics_reader_token()
                ),
            ]
        );
        assert!(
            access.api_server_args()[0].starts_with("--token-auth-file="),
            "{:?}",
            access.api_server_args()
        );
    }

    #[test]
    fn the_curl_line_carries_the_readers_token() {
        let dir = tempfile::tempdir().unwrap();
        let access = Access::write(dir.path()).unwrap();
        let line = access.curl_line(SocketAddr::from(([127, 0, 0, 1], 10258)));
        assert_eq!(
            line,
            format!(
                "curl -k -H \"Authorization: Bearer {}\" https://127.0.0.1:10258/metrics",
                access.metrics_reader_token()
            )
        );
    }
}
