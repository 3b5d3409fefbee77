//! The webhook serving TLS flags upstream 1.36 added: each reaches the
//! admission webhook's TLS options, none the secure port's, and a bad value
//! is refused naming its flag.

use std::path::PathBuf;

use super::tests::{bad, ok};
use crate::serving::{SniCertKey, TlsOptions, TlsVersion};

/// `--webhooks=service-annotations` with `args`: the webhook's TLS options
/// and the secure port's.
fn tls_of_both(args: &[&str]) -> (TlsOptions, TlsOptions) {
    let args = [&["--webhooks=service-annotations"], args].concat();
    let settings = ok(&args);
    let webhook = settings.webhook.expect("the webhook is served").tls;
    let secure = settings.serving.expect("the secure port is served").tls;
    (webhook, secure)
}

#[test]
fn webhook_tls_flags_set_the_webhooks_tls_and_leave_the_secure_ports_alone() {
    let (defaults, secure_defaults) = tls_of_both(&[]);
    assert!(defaults.http2, "HTTP/2 is on by default, as upstream");
    assert_eq!(defaults.min_version, TlsVersion::Tls12, "Go's default");
    assert!(defaults.cipher_suites.is_empty() && defaults.sni.is_empty());

    let (webhook, secure) = tls_of_both(&[
        "--webhook-disable-http2-serving",
        "--webhook-tls-min-version=VersionTLS13",
        "--webhook-tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
        "--webhook-tls-cipher-suites=TLS_AES_256_GCM_SHA384",
        "--webhook-tls-sni-cert-key=a.crt,a.key",
        "--webhook-tls-sni-cert-key",
        "b.crt,b.key:*.foo.com,foo.com",
    ]);
    assert!(!webhook.http2, "--webhook-disable-http2-serving");
    assert_eq!(webhook.min_version, TlsVersion::Tls13);
    assert_eq!(
        webhook.cipher_suites,
        [
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_AES_128_GCM_SHA256",
            "TLS_AES_256_GCM_SHA384",
        ],
        "every occurrence, in order"
    );
    assert_eq!(
        webhook.sni,
        [
            SniCertKey {
                cert: PathBuf::from("a.crt"),
                key: PathBuf::from("a.key"),
                names: vec![],
            },
            SniCertKey {
                cert: PathBuf::from("b.crt"),
                key: PathBuf::from("b.key"),
                names: vec!["*.foo.com".into(), "foo.com".into()],
            },
        ]
    );
    assert_eq!(
        webhook.cert, defaults.cert,
        "the default certificate is still the webhook's own"
    );
    assert_eq!(secure, secure_defaults, "the secure port keeps its own TLS");

    let (webhook, _) = tls_of_both(&[
        "--disable-http2-serving",
        "--tls-min-version=VersionTLS13",
        "--tls-cipher-suites=TLS_AES_128_GCM_SHA256",
        "--tls-sni-cert-key=a.crt,a.key",
    ]);
    assert_eq!(
        webhook, defaults,
        "the secure port's flags do not reach the webhook"
    );
    assert_eq!(
        tls_of_both(&["--webhook-tls-min-version="]).0.min_version,
        TlsVersion::Tls12,
        "empty is Go's default, as upstream"
    );
}

#[test]
fn bad_webhook_tls_values_are_refused_naming_the_flag() {
    bad(
        &["--webhook-tls-min-version=VersionTLS14"],
        "--webhook-tls-min-version",
    );
    bad(
        &["--webhook-tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_NOPE"],
        "--webhook-tls-cipher-suites: cipher suite `TLS_NOPE` is not supported",
    );
    bad(
        &["--webhook-tls-sni-cert-key=a.crt"],
        "--webhook-tls-sni-cert-key",
    );
    bad(
        &["--webhook-tls-sni-cert-key=a.crt,a.key:"],
        "empty list of names",
    );
    bad(
        &["--webhook-disable-http2-serving=perhaps"],
        "not a boolean",
    );
}
