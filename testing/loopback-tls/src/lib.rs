//! The one TLS client configuration for talking to a server on loopback
//! that shows a certificate it made for itself (the CCM's secure port, its
//! webhook, a test's listener): the certificate is taken as `curl -k`
//! takes it, and the handshake's signatures are still checked, so the
//! handshake is a real one. Tests and xtask use it; nothing that ships does.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms, aws_lc_rs};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

/// Accepts whatever certificate the server shows; checks the signatures.
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// A client configuration (aws-lc-rs, rustls's safe protocol versions, no
/// client certificate) that takes any server certificate and offers `alpn`
/// (empty: no ALPN).
///
/// # Errors
/// When the crypto provider supports none of the protocol versions.
pub fn client_config(alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, rustls::Error> {
    let provider: Arc<CryptoProvider> = Arc::new(aws_lc_rs::default_provider());
    let verifier = Arc::new(AnyCertificate(provider.signature_verification_algorithms));
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_offers_what_it_is_asked_to_and_checks_signatures() {
        let config = client_config(&[b"h2", b"http/1.1"]).expect("a configuration");
        assert_eq!(
            config.alpn_protocols,
            [b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert!(
            client_config(&[])
                .expect("a configuration")
                .alpn_protocols
                .is_empty()
        );
        let schemes =
            AnyCertificate(aws_lc_rs::default_provider().signature_verification_algorithms)
                .supported_verify_schemes();
        assert!(
            schemes.contains(&SignatureScheme::ECDSA_NISTP256_SHA256),
            "{schemes:?}"
        );
        assert!(!schemes.is_empty());
    }
}
