//! Upstream's "webhook" and "webhook serving" sections. Upstream serves
//! cloud webhooks (KEP 2699) only behind the alpha
//! `CloudControllerManagerWebhook` gate and ships none; nor does this CCM
//! yet, so these flags are validated as upstream does and change nothing.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

use super::parse_path;

/// The webhooks this CCM can serve (none yet, as upstream's generic CCM).
const KNOWN_WEBHOOKS: [&str; 0] = [];

/// The "webhook" section.
#[derive(Debug, Clone, Args)]
pub(crate) struct Webhook {
    /// Webhooks to enable: `*` for all on by default, `foo` to enable,
    /// `-foo` to disable. This CCM has no webhooks yet.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub(super) webhooks: Vec<String>,
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

    /// Minimum TLS version of the webhook server.
    #[arg(long, value_name = "VERSION", value_parser = ["", "VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"])]
    pub(super) webhook_tls_min_version: Option<String>,

    /// Certificate and key file pairs for SNI (`cert,key[:names]`), repeatable.
    #[arg(long, value_name = "CERT,KEY[:NAMES]", action = clap::ArgAction::Append, value_parser = super::serving::parse_sni_cert_key)]
    pub(super) webhook_tls_sni_cert_key: Vec<crate::serving::SniCertKey>,
}

impl Webhook {
    /// Upstream's validation: every named webhook must be known.
    pub(super) fn validate(&self) -> Result<Option<String>, String> {
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
                    "--webhooks: `{bare}` is not in the list of known webhooks (this CCM has none yet)"
                ));
            }
        }
        Ok((!named.is_empty()).then(|| {
            "--webhooks: upstream serves the cloud provider's admission webhooks; this CCM has none yet, so none are served".to_owned()
        }))
    }
}

impl WebhookServing {
    /// Upstream's checks, and what to say when these flags are set.
    pub(super) fn validate(&self) -> Result<Option<String>, String> {
        let given = |p: &Option<PathBuf>| p.as_ref().is_some_and(|p| !p.as_os_str().is_empty());
        if given(&self.webhook_tls_cert_file) != given(&self.webhook_tls_private_key_file) {
            return Err(
                "--webhook-tls-cert-file and --webhook-tls-private-key-file go together: give both or neither".into(),
            );
        }
        let set = given(&self.webhook_cert_dir) || given(&self.webhook_tls_cert_file);
        Ok(set.then(|| {
            "--webhook-*: upstream serves cloud webhooks on this address; this CCM has none yet, so nothing listens there".to_owned()
        }))
    }
}
