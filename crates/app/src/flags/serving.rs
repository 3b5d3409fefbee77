//! Upstream's secure serving, delegated authentication and delegated
//! authorization flags (k8s.io/apiserver's `SecureServingOptions`,
//! `DelegatingAuthenticationOptions`, `DelegatingAuthorizationOptions`),
//! validated into a [`serving::Config`].

#[cfg(test)]
mod tests;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{duration, parse_bool};
use crate::serving::{
    self, AuthenticationOptions, AuthorizationOptions, CertSource, RequestHeaderOptions,
    SniCertKey, TlsOptions, TlsVersion,
};

/// `--bind-address`, `--secure-port` and the TLS flags.
#[derive(Debug, Clone, Args)]
pub(crate) struct SecureServing {
    /// The IP address on which to listen for the --secure-port port; 0.0.0.0 or :: for all interfaces.
    #[arg(long, value_name = "IP", default_value = "0.0.0.0")]
    bind_address: IpAddr,

    /// The port on which to serve HTTPS with authentication and authorization. If 0, don't serve HTTPS at all.
    #[arg(long, value_name = "PORT", default_value_t = 10258)]
    secure_port: u16,

    /// The directory where the TLS certs are located. If --tls-cert-file and
    /// --tls-private-key-file are provided, this flag will be ignored.
    #[arg(long, value_name = "DIR", value_parser = path)]
    cert_dir: Option<PathBuf>,

    /// File containing the default x509 certificate for HTTPS (CA cert, if any,
    /// concatenated after server cert). Without it and --tls-private-key-file, a
    /// self-signed certificate is generated (and saved in --cert-dir if given).
    #[arg(long, value_name = "PATH", value_parser = path)]
    tls_cert_file: Option<PathBuf>,

    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(long, value_name = "PATH", value_parser = path)]
    tls_private_key_file: Option<PathBuf>,

    /// Minimum TLS version supported: VersionTLS10, VersionTLS11, VersionTLS12,
    /// VersionTLS13 (this server never negotiates below TLS 1.2).
    #[arg(long, value_name = "VERSION", default_value = "")]
    tls_min_version: String,

    /// Comma-separated list of cipher suites for the server, by Go's names
    /// (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...). If omitted, the defaults are used.
    #[arg(long, value_name = "NAMES")]
    tls_cipher_suites: Vec<String>,

    /// A pair of x509 certificate and private key file paths, optionally suffixed
    /// with a list of domain patterns: "example.crt,example.key" or
    /// "foo.crt,foo.key:*.foo.com,foo.com". Repeat for several pairs.
    #[arg(long, value_name = "CERT,KEY[:NAMES]", value_parser = parse_sni_cert_key)]
    tls_sni_cert_key: Vec<SniCertKey>,

    /// The limit that the server gives to clients for the maximum number of
    /// streams in an HTTP/2 connection. Zero means the default (100).
    #[arg(long, value_name = "N", default_value_t = 0)]
    http2_max_streams_per_connection: u32,

    /// If true, HTTP2 serving will be disabled.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    disable_http2_serving: bool,

    /// If true, SO_REUSEPORT will be used when binding the port, which allows
    /// more than one instance to bind on the same address and port.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    permit_port_sharing: bool,

    /// If true, SO_REUSEADDR will be used when binding the port.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    permit_address_sharing: bool,

    /// Go crypto/tls CurveIDs the server may use for key exchange; rustls
    /// offers its own safe set (X25519, P-256, P-384), so this changes nothing.
    #[arg(long, value_name = "IDS", value_parser = super::parse_int32_list)]
    pub(super) tls_curve_preferences: Option<super::Int32List>,
}

/// Delegated authentication: client certificates, request headers, TokenReview.
#[derive(Debug, Clone, Args)]
pub(crate) struct Authentication {
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights
    /// to create tokenreviews.authentication.k8s.io. If empty, the main client's
    /// credentials are used.
    #[arg(long, value_name = "PATH", value_parser = path)]
    authentication_kubeconfig: Option<PathBuf>,

    /// If false, the authentication kubeconfig is used to look up missing
    /// authentication configuration from the cluster.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    authentication_skip_lookup: bool,

    /// The duration to cache responses from the webhook token authenticator.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration::parse)]
    authentication_token_webhook_cache_ttl: Duration,

    /// If true, failures to look up missing authentication configuration from
    /// the cluster are not considered fatal.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    authentication_tolerate_lookup_failure: bool,

    /// If set, any request presenting a client certificate signed by one of the
    /// authorities in the client-ca-file is authenticated with an identity
    /// corresponding to the CommonName of the client certificate.
    #[arg(long, value_name = "PATH", value_parser = path)]
    client_ca_file: Option<PathBuf>,

    /// Root certificate bundle to verify client certificates on incoming requests
    /// before trusting usernames in headers specified by --requestheader-username-headers.
    #[arg(long, value_name = "PATH", value_parser = path)]
    requestheader_client_ca_file: Option<PathBuf>,

    /// List of client certificate common names allowed to provide usernames in
    /// headers. If empty, any client certificate validated by the authorities in
    /// --requestheader-client-ca-file is allowed.
    #[arg(long, value_name = "NAMES")]
    requestheader_allowed_names: Vec<String>,

    /// List of request headers to inspect for usernames.
    #[arg(long, value_name = "HEADERS", default_value = "x-remote-user")]
    requestheader_username_headers: Vec<String>,

    /// List of request headers to inspect for groups.
    #[arg(long, value_name = "HEADERS", default_value = "x-remote-group")]
    requestheader_group_headers: Vec<String>,

    /// List of request header prefixes to inspect.
    #[arg(long, value_name = "PREFIXES", default_value = "x-remote-extra-")]
    requestheader_extra_headers_prefix: Vec<String>,

    /// List of request headers to inspect for UIDs. X-Remote-Uid is suggested.
    #[arg(long, value_name = "HEADERS")]
    requestheader_uid_headers: Vec<String>,
}

/// Delegated authorization: always-allowed paths, SubjectAccessReview.
#[derive(Debug, Clone, Args)]
pub(crate) struct Authorization {
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights
    /// to create subjectaccessreviews.authorization.k8s.io. If empty, the main
    /// client's credentials are used.
    #[arg(long, value_name = "PATH", value_parser = path)]
    authorization_kubeconfig: Option<PathBuf>,

    /// A list of HTTP paths to skip during authorization: exact, or a prefix
    /// ending in `*`.
    #[arg(long, value_name = "PATHS", default_value = "/healthz,/readyz,/livez")]
    authorization_always_allow_paths: Vec<String>,

    /// The duration to cache 'authorized' responses from the webhook authorizer.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration::parse)]
    authorization_webhook_cache_authorized_ttl: Duration,

    /// The duration to cache 'unauthorized' responses from the webhook authorizer.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration::parse)]
    authorization_webhook_cache_unauthorized_ttl: Duration,
}

/// Validates the three groups into what [`crate::serving`] runs; `None` when
/// `--secure-port=0`.
///
/// # Errors
/// One line naming the flag and what is wrong with its value.
pub(crate) fn validate(
    secure: &SecureServing,
    authn: Authentication,
    authz: Authorization,
) -> Result<Option<serving::Config>, String> {
    let tls = tls_options(secure)?;
    let authentication = authentication_options(authn)?;
    let authorization = authorization_options(authz)?;
    if secure.secure_port == 0 {
        return Ok(None);
    }
    Ok(Some(serving::Config {
        addr: SocketAddr::new(secure.bind_address, secure.secure_port),
        permit_port_sharing: secure.permit_port_sharing,
        permit_address_sharing: secure.permit_address_sharing,
        tls,
        authentication,
        authorization,
    }))
}

fn tls_options(flags: &SecureServing) -> Result<TlsOptions, String> {
    let non_empty = |p: &Option<PathBuf>| p.clone().filter(|p| !p.as_os_str().is_empty());
    let cert = match (
        non_empty(&flags.tls_cert_file),
        non_empty(&flags.tls_private_key_file),
    ) {
        (Some(cert), Some(key)) => CertSource::Files { cert, key },
        (Some(_), None) => {
            return Err("--tls-private-key-file is required with --tls-cert-file".into());
        }
        (None, Some(_)) => {
            return Err("--tls-cert-file is required with --tls-private-key-file".into());
        }
        (None, None) => match non_empty(&flags.cert_dir) {
            Some(dir) => CertSource::Dir(dir),
            None => CertSource::Generated,
        },
    };
    let min_version = min_version("--tls-min-version", &flags.tls_min_version)?;
    let cipher_suites = cipher_suites("--tls-cipher-suites", &flags.tls_cipher_suites)?;
    Ok(TlsOptions {
        cert,
        sni: flags.tls_sni_cert_key.clone(),
        min_version,
        cipher_suites,
        http2: !flags.disable_http2_serving,
        http2_max_streams: flags.http2_max_streams_per_connection,
    })
}

fn authentication_options(flags: Authentication) -> Result<AuthenticationOptions, String> {
    let names = |flag: &str, values: &[String]| -> Result<Vec<String>, String> {
        let items = string_slice(values);
        match items.iter().find(|v| v.trim().is_empty()) {
            Some(_) => Err(format!("--{flag}: empty value in the list")),
            None => Ok(items),
        }
    };
    let uid_headers = names(
        "requestheader-uid-headers",
        &flags.requestheader_uid_headers,
    )?;
    if !uid_headers.is_empty()
        && !uid_headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("X-Remote-Uid"))
    {
        return Err("--requestheader-uid-headers is set without the standard X-Remote-Uid header; API aggregation would not work".into());
    }
    let request_header = RequestHeaderOptions {
        client_ca_file: flags
            .requestheader_client_ca_file
            .filter(|p| !p.as_os_str().is_empty()),
        allowed_names: names(
            "requestheader-allowed-names",
            &flags.requestheader_allowed_names,
        )?,
        username_headers: names(
            "requestheader-username-headers",
            &flags.requestheader_username_headers,
        )?,
        group_headers: names(
            "requestheader-group-headers",
            &flags.requestheader_group_headers,
        )?,
        extra_header_prefixes: names(
            "requestheader-extra-headers-prefix",
            &flags.requestheader_extra_headers_prefix,
        )?,
        uid_headers,
    };
    Ok(AuthenticationOptions {
        kubeconfig: flags
            .authentication_kubeconfig
            .filter(|p| !p.as_os_str().is_empty()),
        skip_lookup: flags.authentication_skip_lookup,
        tolerate_lookup_failure: flags.authentication_tolerate_lookup_failure,
        cache_ttl: flags.authentication_token_webhook_cache_ttl,
        client_ca_file: flags.client_ca_file.filter(|p| !p.as_os_str().is_empty()),
        request_header,
    })
}

fn authorization_options(flags: Authorization) -> Result<AuthorizationOptions, String> {
    let always_allow_paths = string_slice(&flags.authorization_always_allow_paths);
    for path in &always_allow_paths {
        let trimmed = path.strip_suffix('*').unwrap_or(path);
        if trimmed.contains('*') {
            return Err(format!(
                "--authorization-always-allow-paths: only a trailing * is allowed, in `{path}`"
            ));
        }
    }
    Ok(AuthorizationOptions {
        kubeconfig: flags
            .authorization_kubeconfig
            .filter(|p| !p.as_os_str().is_empty()),
        always_allow_paths,
        allow_ttl: flags.authorization_webhook_cache_authorized_ttl,
        deny_ttl: flags.authorization_webhook_cache_unauthorized_ttl,
    })
}

/// A path; empty is allowed and means unset, as for pflag's strings.
fn path(text: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(text))
}

/// `flag`'s Go TLS version name (empty: TLS 1.2, Go's default).
pub(super) fn min_version(flag: &str, name: &str) -> Result<TlsVersion, String> {
    match name {
        "" => Ok(TlsVersion::Tls12),
        name => TlsVersion::from_go_name(name).ok_or_else(|| {
            format!(
                "{flag}: unknown TLS version `{name}`; use VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13"
            )
        }),
    }
}

/// `flag`'s Go cipher suite names, each one Go knows.
pub(super) fn cipher_suites(flag: &str, occurrences: &[String]) -> Result<Vec<String>, String> {
    let names = string_slice(occurrences);
    match names.iter().find(|name| !serving::is_go_cipher_suite(name)) {
        Some(name) => Err(format!(
            "{flag}: cipher suite `{name}` is not supported or does not exist"
        )),
        None => Ok(names),
    }
}

/// pflag's string slice: each occurrence is a comma-separated list, an empty
/// occurrence adds nothing; a given flag replaces the default.
fn string_slice(occurrences: &[String]) -> Vec<String> {
    occurrences
        .iter()
        .filter(|o| !o.is_empty())
        .flat_map(|o| o.split(','))
        .map(str::to_owned)
        .collect()
}

/// component-base's `NamedCertKey`: `cert,key` or `cert,key:name1,name2`.
pub(super) fn parse_sni_cert_key(text: &str) -> Result<SniCertKey, String> {
    let (pair, names) = match text.split_once(':') {
        Some((pair, names)) => {
            let names = names.trim();
            if names.is_empty() {
                return Err("an empty list of names after `:` is not allowed".into());
            }
            let names = names.split(',').map(|n| n.trim().to_owned()).collect();
            (pair.trim(), names)
        }
        None => (text.trim(), Vec::new()),
    };
    match pair.split(',').collect::<Vec<_>>().as_slice() {
        [cert, key] if !cert.trim().is_empty() && !key.trim().is_empty() => Ok(SniCertKey {
            cert: PathBuf::from(cert.trim()),
            key: PathBuf::from(key.trim()),
            names,
        }),
        _ => Err("expected comma-separated certificate and key file paths".into()),
    }
}
