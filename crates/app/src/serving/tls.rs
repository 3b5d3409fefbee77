//! The rustls server configuration from upstream's TLS flags: Go's version
//! and cipher-suite names, ALPN, and client certificates requested (never
//! required) so the authenticators can check them.

use std::sync::{Arc, Once};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ResolvesServerCert, ServerConfig};
use rustls::{CipherSuite, DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::{Error, TlsOptions};

/// `--tls-min-version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TlsVersion {
    Tls10,
    Tls11,
    Tls12,
    Tls13,
}

impl TlsVersion {
    /// Go's names, as component-base's `TLSVersion`.
    pub(crate) fn from_go_name(name: &str) -> Option<Self> {
        match name {
            "VersionTLS10" => Some(Self::Tls10),
            "VersionTLS11" => Some(Self::Tls11),
            "VersionTLS12" => Some(Self::Tls12),
            "VersionTLS13" => Some(Self::Tls13),
            _ => None,
        }
    }
}

/// Every name Go's `tls.CipherSuites()` and `tls.InsecureCipherSuites()`
/// know (component-base accepts both, plus two legacy ChaCha20 names), and
/// the rustls suite it stands for, if rustls has one.
const GO_CIPHER_SUITES: &[(&str, Option<CipherSuite>)] = &[
    (
        "TLS_AES_128_GCM_SHA256",
        Some(CipherSuite::TLS13_AES_128_GCM_SHA256),
    ),
    (
        "TLS_AES_256_GCM_SHA384",
        Some(CipherSuite::TLS13_AES_256_GCM_SHA384),
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        Some(CipherSuite::TLS13_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        Some(CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        Some(CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        Some(CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        Some(CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_RSA_WITH_RC4_128_SHA", None),
    ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_128_CBC_SHA256", None),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", None),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", None),
    ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", None),
    ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", None),
    ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", None),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", None),
];

/// Whether Go (and so upstream's `--tls-cipher-suites`) knows `name`.
pub(crate) fn is_go_cipher_suite(name: &str) -> bool {
    GO_CIPHER_SUITES.iter().any(|(n, _)| *n == name)
}

/// The rustls suite for a Go name; `None` for names rustls lacks or Go
/// does not know.
pub(super) fn rustls_cipher_suite(name: &str) -> Option<CipherSuite> {
    GO_CIPHER_SUITES
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(_, suite)| *suite)
}

/// The aws-lc-rs provider limited to the named suites. As in Go, the
/// TLS 1.3 suites are not configurable: all of them stay on; the list
/// chooses among the TLS 1.2 suites.
pub(super) fn provider(cipher_suites: &[String]) -> CryptoProvider {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    if cipher_suites.is_empty() {
        return provider;
    }
    let wanted: Vec<CipherSuite> = cipher_suites
        .iter()
        .filter_map(|name| {
            let suite = rustls_cipher_suite(name);
            if suite.is_none() {
                tracing::info!(
                    cipher_suite = %name,
                    "--tls-cipher-suites: not offered; this server's TLS library does not implement it"
                );
            }
            suite
        })
        .collect();
    provider.cipher_suites.retain(|suite| {
        suite.version() == &rustls::version::TLS13 || wanted.contains(&suite.suite())
    });
    provider
}

/// Whether the handshake asks for a client certificate.
#[derive(Debug)]
pub(super) enum ClientAuth {
    /// No client certificate asked for.
    None,
    /// Asked for, never required (Go's `tls.RequestClientCert`), with the
    /// subjects of the CAs that would accept it as hints.
    Request(Vec<DistinguishedName>),
    /// Required, and verified by this verifier in the handshake.
    Require(Arc<dyn ClientCertVerifier>),
}

/// The server configuration: versions from `--tls-min-version`, suites
/// from `--tls-cipher-suites`, ALPN `h2` unless `--disable-http2-serving`,
/// certificates from `resolver`, and client certificates as `client_auth`
/// says.
///
/// # Errors
/// rustls refuses the combination (no suite left for any version).
pub(super) fn server_config(
    options: &TlsOptions,
    resolver: Arc<dyn ResolvesServerCert>,
    client_auth: ClientAuth,
) -> Result<ServerConfig, Error> {
    if matches!(options.min_version, TlsVersion::Tls10 | TlsVersion::Tls11) {
        static EXPLAINED: Once = Once::new();
        EXPLAINED.call_once(|| {
            tracing::info!(
                "--tls-min-version: TLS 1.0 and 1.1 are not implemented by this server's TLS library; serving TLS 1.2 and 1.3"
            );
        });
    }
    let provider = Arc::new(provider(&options.cipher_suites));
    let has_tls12_suite = provider
        .cipher_suites
        .iter()
        .any(|s| s.version() == &rustls::version::TLS12);
    let versions: &[&'static rustls::SupportedProtocolVersion] =
        if options.min_version == TlsVersion::Tls13 || !has_tls12_suite {
            &[&rustls::version::TLS13]
        } else {
            &[&rustls::version::TLS12, &rustls::version::TLS13]
        };
    let builder =
        ServerConfig::builder_with_provider(provider.clone()).with_protocol_versions(versions)?;
    let builder = match client_auth {
        ClientAuth::Request(hints) => {
            builder.with_client_cert_verifier(Arc::new(RequestClientCert {
                hints,
                algorithms: provider.signature_verification_algorithms,
            }))
        }
        ClientAuth::Require(verifier) => builder.with_client_cert_verifier(verifier),
        ClientAuth::None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = if options.http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(config)
}

/// Go's `tls.RequestClientCert`: asks for a client certificate, accepts a
/// connection without one, and checks only that the client holds the
/// certificate's key. Whether a CA vouches for it is the authenticators'
/// question, asked per request against the CA bundles of that moment.
#[derive(Debug)]
struct RequestClientCert {
    hints: Vec<DistinguishedName>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_names_map_onto_rustls_suites() {
        assert_eq!(
            rustls_cipher_suite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
            Some(CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)
        );
        assert_eq!(
            rustls_cipher_suite("TLS_AES_128_GCM_SHA256"),
            Some(CipherSuite::TLS13_AES_128_GCM_SHA256)
        );
        assert_eq!(
            rustls_cipher_suite("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"),
            Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
            "the legacy ChaCha20 name"
        );
        assert!(is_go_cipher_suite("TLS_RSA_WITH_AES_128_CBC_SHA"));
        assert_eq!(rustls_cipher_suite("TLS_RSA_WITH_AES_128_CBC_SHA"), None);
        assert!(!is_go_cipher_suite("TLS_FANCY_NEW_CIPHER"));
    }

    #[test]
    fn every_mapped_suite_is_one_the_provider_has() {
        let provider = rustls::crypto::aws_lc_rs::default_provider();
        for (name, suite) in GO_CIPHER_SUITES {
            if let Some(suite) = suite {
                assert!(
                    provider.cipher_suites.iter().any(|s| s.suite() == *suite),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn named_suites_choose_among_tls12_and_keep_every_tls13_suite() {
        let provider = provider(&[
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_owned(),
            "TLS_RSA_WITH_AES_128_CBC_SHA".to_owned(),
        ]);
        let tls12: Vec<_> = provider
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS12)
            .map(|s| s.suite())
            .collect();
        assert_eq!(tls12, [CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]);
        let tls13 = provider
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS13)
            .count();
        assert_eq!(tls13, 3);
    }

    #[test]
    fn go_version_names() {
        assert_eq!(
            TlsVersion::from_go_name("VersionTLS13"),
            Some(TlsVersion::Tls13)
        );
        assert_eq!(
            TlsVersion::from_go_name("VersionTLS10"),
            Some(TlsVersion::Tls10)
        );
        assert_eq!(TlsVersion::from_go_name("TLS1.2"), None);
    }
}
