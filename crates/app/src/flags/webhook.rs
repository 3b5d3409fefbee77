//! Upstream's "webhook" and "webhook serving" sections (KEP 2699), three
//! flags of ours for certificates the CCM keeps itself, and one of ours for
//! what the webhook refuses (`--webhook-strict`). This CCM serves one
//! webhook, `service-annotations` ([`crate::admission`]), when `--webhooks`
//! enables it and `--webhook-secure-port` is not 0. Upstream also needs the
//! alpha `CloudControllerManagerWebhook` gate; this CCM's webhook is not
//! behind it.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::Args;

use super::parse_path;
use crate::admission::{self, ManagedCerts, ObjectName, Policy};
use crate::serving::{CertSource, TlsOptions};

/// The webhooks this CCM can serve, all on by default (`*`).
const KNOWN_WEBHOOKS: [&str; 1] = [admission::WEBHOOK_NAME];

/// The "webhook" section.
#[derive(Debug, Clone, Args)]
pub(crate) struct Webhook {
    /// Webhooks to enable: `*` for all on by default, `foo` to enable,
    /// `-foo` to disable. Known: service-annotations (refuses LoadBalancer
    /// Services with load-balancer annotations upstream's CCM would fail
    /// on, and warns about other malformed or unknown ones).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub(super) webhooks: Vec<String>,

    /// Have service-annotations refuse every malformed value, unknown key
    /// under the provider's prefixes and change the cloud cannot make in
    /// place, not only those upstream's CCM fails on (which it otherwise
    /// admits with a warning).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = super::parse_bool)]
    pub(super) webhook_strict: bool,
}

/// The "webhook serving" section.
#[derive(Debug, Clone, Args)]
pub(crate) struct WebhookServing {
    /// Disable HTTP/2 on the webhook server.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = super::parse_bool)]
    pub(super) webhook_disable_http2_serving: bool,

    /// The IP address on which to listen for the --webhook-secure-port port.
    #[arg(long, value_name = "IP", default_value = "0.0.0.0")]
    pub(super) webhook_bind_address: IpAddr,

    /// The directory where the webhook's TLS certificates are.
    #[arg(long, value_name = "PATH", value_parser = parse_path)]
    pub(super) webhook_cert_dir: Option<PathBuf>,

    /// Secure port to serve cloud provider webhooks; 0 serves none.
    #[arg(long, value_name = "PORT", default_value_t = 10260)]
    pub(super) webhook_secure_port: u16,

    /// File with the default x509 certificate for webhook HTTPS.
    #[arg(long, value_name = "PATH", value_parser = parse_path)]
    pub(super) webhook_tls_cert_file: Option<PathBuf>,

    /// Cipher suites for the webhook server (Go's names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub(super) webhook_tls_cipher_suites: Vec<String>,

    /// Go crypto/tls CurveIDs the webhook server may use.
    #[arg(long, value_name = "IDS", value_parser = super::parse_int32_list)]
    pub(super) webhook_tls_curve_preferences: Option<super::Int32List>,

    /// File with the default x509 private key matching --webhook-tls-cert-file.
    #[arg(long, value_name = "PATH", value_parser = parse_path)]
    pub(super) webhook_tls_private_key_file: Option<PathBuf>,

    /// Keep the webhook's CA and serving certificate in this Secret
    /// (`NAMESPACE/NAME`; `ca.crt`, `tls.crt`, `tls.key`): filled when
    /// empty, reused otherwise, renewed before it expires. Needs
    /// --webhook-service and --webhook-configuration.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = parse_object_name)]
    pub(super) webhook_cert_secret: Option<ObjectName>,

    /// The Service in front of the webhook port (`NAMESPACE/NAME`): the
    /// serving certificate of --webhook-cert-secret names it.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = parse_object_name)]
    pub(super) webhook_service: Option<ObjectName>,

    /// The ValidatingWebhookConfiguration whose caBundle the CCM keeps equal
    /// to the CA of --webhook-cert-secret.
    #[arg(long, value_name = "NAME")]
    pub(super) webhook_configuration: Option<String>,

    /// PEM bundle of the CAs that vouch for kube-apiserver's client
    /// certificate: when set, the webhook port completes a TLS handshake
    /// only with a client certificate one of them signed (reloaded on
    /// change). Unset: any client may call the webhook.
    #[arg(long, value_name = "PATH", value_parser = parse_path)]
    pub(super) webhook_client_ca_file: Option<PathBuf>,

    /// Minimum TLS version of the webhook server.
    #[arg(long, value_name = "VERSION", value_parser = ["", "VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"])]
    pub(super) webhook_tls_min_version: Option<String>,

    /// Certificate and key file pairs for SNI (`cert,key[:names]`), repeatable.
    #[arg(long, value_name = "CERT,KEY[:NAMES]", action = clap::ArgAction::Append, value_parser = super::serving::parse_sni_cert_key)]
    pub(super) webhook_tls_sni_cert_key: Vec<crate::serving::SniCertKey>,
}

/// `NAMESPACE/NAME`, each part a DNS label or subdomain.
fn parse_object_name(value: &str) -> Result<ObjectName, String> {
    let (namespace, name) = value
        .split_once('/')
        .ok_or_else(|| format!("expected NAMESPACE/NAME, got `{value}`"))?;
    let valid = |part: &str| {
        !part.is_empty()
            && part.len() <= 253
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
            && part.starts_with(|c: char| c.is_ascii_alphanumeric())
            && part.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    if !valid(namespace) || !valid(name) {
        return Err(format!(
            "expected NAMESPACE/NAME in lower-case letters, digits, `-` and `.`, got `{value}`"
        ));
    }
    Ok(ObjectName {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

impl Webhook {
    /// Upstream's validation: every named webhook must be known. `Ok(true)`
    /// when `service-annotations` is enabled.
    pub(super) fn validate(&self) -> Result<bool, String> {
        let named: Vec<&str> = self
            .webhooks
            .iter()
            .map(|w| w.trim())
            .filter(|w| !w.is_empty())
            .collect();
        for name in &named {
            let bare = name.strip_prefix('-').unwrap_or(name);
            if *name != "*" && !KNOWN_WEBHOOKS.contains(&bare) {
                return Err(format!(
                    "--webhooks: `{bare}` is not in the list of known webhooks ({})",
                    KNOWN_WEBHOOKS.join(", ")
                ));
            }
        }
        let this = admission::WEBHOOK_NAME;
        let disabled = named.iter().any(|n| n.strip_prefix('-') == Some(this));
        Ok(!disabled && named.iter().any(|n| *n == "*" || *n == this))
    }

    /// What `service-annotations` refuses (`--webhook-strict`).
    pub(super) fn policy(&self) -> Policy {
        if self.webhook_strict {
            Policy::Strict
        } else {
            Policy::Upstream
        }
    }
}

impl WebhookServing {
    /// Upstream's checks, and the webhook server's options, deciding under
    /// `policy`, when `enabled` and the port is not 0.
    pub(super) fn validate(
        &self,
        enabled: bool,
        policy: Policy,
    ) -> Result<Option<admission::Options>, String> {
        let given = |p: &Option<PathBuf>| p.clone().filter(|p| !p.as_os_str().is_empty());
        let cert = match (
            given(&self.webhook_tls_cert_file),
            given(&self.webhook_tls_private_key_file),
        ) {
            (Some(cert), Some(key)) => CertSource::Files { cert, key },
            (None, None) => match given(&self.webhook_cert_dir) {
                Some(dir) => CertSource::Dir(dir),
                None => CertSource::Generated,
            },
            _ => {
                return Err(
                    "--webhook-tls-cert-file and --webhook-tls-private-key-file go together: give both or neither".into(),
                );
            }
        };
        let managed = match (
            self.webhook_cert_secret.clone(),
            self.webhook_service.clone(),
            self.webhook_configuration.clone().filter(|c| !c.is_empty()),
        ) {
            (None, None, None) => None,
            (Some(secret), Some(service), Some(configuration)) => Some(ManagedCerts {
                secret,
                service,
                configuration,
            }),
            _ => {
                return Err(
                    "--webhook-cert-secret, --webhook-service and --webhook-configuration go together: give all three or none".into(),
                );
            }
        };
        if managed.is_some() && !matches!(cert, CertSource::Generated) {
            return Err(
                "--webhook-cert-secret: the CCM keeps its own certificates there; drop --webhook-tls-cert-file, --webhook-tls-private-key-file and --webhook-cert-dir, or drop --webhook-cert-secret".into(),
            );
        }
        let min_version = super::serving::min_version(
            "--webhook-tls-min-version",
            self.webhook_tls_min_version.as_deref().unwrap_or_default(),
        )?;
        let cipher_suites = super::serving::cipher_suites(
            "--webhook-tls-cipher-suites",
            &self.webhook_tls_cipher_suites,
        )?;
        if !enabled || self.webhook_secure_port == 0 {
            return Ok(None);
        }
        Ok(Some(admission::Options {
            addr: SocketAddr::new(self.webhook_bind_address, self.webhook_secure_port),
            tls: TlsOptions {
                cert,
                sni: self.webhook_tls_sni_cert_key.clone(),
                min_version,
                cipher_suites,
                http2: !self.webhook_disable_http2_serving,
                http2_max_streams: 0,
            },
            managed,
            client_ca: given(&self.webhook_client_ca_file),
            policy,
        }))
    }
}
