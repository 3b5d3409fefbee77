//! Client-certificate authorities, and the front proxy's request-header
//! settings that come with its CA: from `--client-ca-file` and
//! `--requestheader-client-ca-file` (reloaded on change) and the
//! `--requestheader-*` flags, or looked up in ConfigMap
//! `kube-system/extension-apiserver-authentication` as upstream.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::RwLock;
use rustls::DistinguishedName;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use tokio_util::sync::CancellationToken;

use super::Error;
use super::reload::{FileBacked, Reloader, Source};

/// The ConfigMap upstream's control plane publishes its client CAs in.
const NAMESPACE: &str = "kube-system";
const NAME: &str = "extension-apiserver-authentication";

/// Certificate authorities that vouch for client certificates.
#[derive(Debug)]
pub(super) struct CaBundle {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl CaBundle {
    /// The PEM certificates in `pem`.
    ///
    /// # Errors
    /// [`Error::Invalid`] when `pem` holds no usable CA certificate.
    pub(super) fn from_pem(source: &Source, pem: &[u8]) -> Result<Self, Error> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|_| source.invalid("not a PEM certificate bundle"))?;
            roots
                .add(cert)
                .map_err(|e| source.invalid(format!("not a usable CA certificate: {e}")))?;
        }
        if roots.is_empty() {
            return Err(source.invalid("no CA certificate in it"));
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| source.invalid(format!("not a usable CA bundle: {e}")))?;
        Ok(Self { verifier })
    }

    /// The CAs' subjects, the hint a client picks its certificate by.
    pub(super) fn subjects(&self) -> Vec<DistinguishedName> {
        self.verifier.root_hint_subjects().to_vec()
    }

    /// Whether `chain` (leaf first) leads to one of these CAs, for client
    /// authentication, now.
    ///
    /// # Errors
    /// Why not, in rustls's words.
    pub(super) fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Err("no certificate".into());
        };
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// A CA bundle that is fixed (looked up) or read from a file and reloaded.
#[derive(Debug, Clone)]
pub(super) enum CaSource {
    Fixed(Arc<CaBundle>),
    File(Arc<FileBacked<CaBundle, 1>>),
}

impl CaSource {
    /// `path`, named `flag` in errors, reloaded on change.
    ///
    /// # Errors
    /// The file cannot be read or holds no CA.
    pub(super) fn file(
        flag: &'static str,
        path: &Path,
        reloader: &mut Reloader,
    ) -> Result<Self, Error> {
        let backed = Arc::new(FileBacked::load(
            [Source::new(flag, path)],
            |[source], [pem]| CaBundle::from_pem(source, pem),
        )?);
        reloader.watch(backed.clone());
        Ok(Self::File(backed))
    }

    pub(super) fn current(&self) -> Arc<CaBundle> {
        match self {
            Self::Fixed(bundle) => bundle.clone(),
            Self::File(file) => file.current(),
        }
    }
}

/// Requires a client certificate that the CA of the moment vouches for
/// (`--webhook-client-ca-file`: only kube-apiserver may call the webhook).
/// No hints are sent: the file may change, and kube-apiserver picks its
/// certificate from its own configuration.
#[derive(Debug)]
pub(super) struct RequireClientCert {
    ca: CaSource,
}

impl RequireClientCert {
    pub(super) fn new(ca: CaSource) -> Self {
        Self { ca }
    }
}

impl ClientCertVerifier for RequireClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        self.ca
            .current()
            .verifier
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.ca
            .current()
            .verifier
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.ca
            .current()
            .verifier
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.ca.current().verifier.supported_verify_schemes()
    }
}

/// The front proxy's request-header authentication: its CA and the headers
/// it names the user in; [`super::authn`] checks requests against it.
#[derive(Debug)]
pub(super) struct RequestHeader {
    pub(super) ca: CaSource,
    pub(super) allowed_names: Vec<String>,
    pub(super) username_headers: Vec<String>,
    pub(super) group_headers: Vec<String>,
    pub(super) extra_header_prefixes: Vec<String>,
    pub(super) uid_headers: Vec<String>,
}

/// What the authentication ConfigMap says.
#[derive(Debug, Default)]
pub(super) struct Lookup {
    pub(super) client_ca: Option<CaSource>,
    pub(super) request_header: Option<RequestHeader>,
}

/// The authentication ConfigMap as last read. Upstream watches it; this
/// re-reads it every `refresh`, so a rotated cluster CA (or a ConfigMap
/// created after start-up) is used without a restart.
pub(super) struct ClusterAuthentication {
    api: kube::Api<ConfigMap>,
    current: RwLock<Arc<Lookup>>,
}

impl std::fmt::Debug for ClusterAuthentication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterAuthentication")
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

/// How long one read of the ConfigMap may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

impl ClusterAuthentication {
    /// Reads the ConfigMap once. No ConfigMap: nothing yet. A failed read is
    /// fatal unless `tolerate` (`--authentication-tolerate-lookup-failure`).
    ///
    /// # Errors
    /// [`Error::Lookup`] when the read fails and is not tolerated.
    pub(super) async fn load(client: kube::Client, tolerate: bool) -> Result<Self, Error> {
        let api = kube::Api::<ConfigMap>::namespaced(client, NAMESPACE);
        let lookup = match read(&api).await {
            Ok(lookup) => lookup,
            Err(err) if tolerate => {
                tracing::warn!(error = %err, "continuing without configmap/{NAME}, which may treat all requests as anonymous (--authentication-tolerate-lookup-failure)");
                Lookup::default()
            }
            Err(err) => return Err(err),
        };
        Ok(Self {
            api,
            current: RwLock::new(Arc::new(lookup)),
        })
    }

    pub(super) fn current(&self) -> Arc<Lookup> {
        self.current.read().clone()
    }

    /// Re-reads the ConfigMap every `every` until `shutdown`; a failed read
    /// keeps what was last read.
    pub(super) fn spawn_refresh(self: Arc<Self>, every: Duration, shutdown: CancellationToken) {
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(every) => {}
                }
                match read(&self.api).await {
                    Ok(lookup) => *self.current.write() = Arc::new(lookup),
                    Err(err) => {
                        tracing::warn!(error = %err, "keeping the last read of configmap/{NAME}");
                    }
                }
            }
        });
    }
}

async fn read(api: &kube::Api<ConfigMap>) -> Result<Lookup, Error> {
    match tokio::time::timeout(READ_TIMEOUT, api.get_opt(NAME)).await {
        Ok(Ok(Some(config_map))) => Ok(from_data(&config_map.data.unwrap_or_default())),
        Ok(Ok(None)) => Ok(Lookup::default()),
        Ok(Err(err)) => Err(Error::Lookup(err)),
        Err(_) => Err(Error::Lookup(kube::Error::Service(
            format!("timed out after {READ_TIMEOUT:?}").into(),
        ))),
    }
}

fn from_data(data: &BTreeMap<String, String>) -> Lookup {
    let bundle = |key: &'static str| -> Option<CaSource> {
        let pem = data.get(key).filter(|v| !v.trim().is_empty())?;
        let source = Source::new(
            "--authentication-skip-lookup",
            format!("configmap/{NAME}[{key}]"),
        );
        match CaBundle::from_pem(&source, pem.as_bytes()) {
            Ok(bundle) => Some(CaSource::Fixed(Arc::new(bundle))),
            Err(err) => {
                tracing::warn!(error = %err, "ignoring an unusable CA in configmap/{NAME}");
                None
            }
        }
    };
    // Lists are JSON arrays of strings, as kube-apiserver writes them.
    let list = |key: &str| -> Vec<String> {
        data.get(key)
            .and_then(|v| serde_json::from_str::<Vec<String>>(v).ok())
            .unwrap_or_default()
    };
    Lookup {
        client_ca: bundle("client-ca-file"),
        request_header: bundle("requestheader-client-ca-file").map(|ca| RequestHeader {
            ca,
            allowed_names: list("requestheader-allowed-names"),
            username_headers: list("requestheader-username-headers"),
            group_headers: list("requestheader-group-headers"),
            extra_header_prefixes: list("requestheader-extra-headers-prefix"),
            uid_headers: list("requestheader-uid-headers"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn the_configmap_gives_the_request_header_settings_as_json_lists() {
        let data = BTreeMap::from([
            ("requestheader-client-ca-file".to_owned(), ca_pem()),
            (
                "requestheader-allowed-names".to_owned(),
                r#"["front-proxy-client"]"#.to_owned(),
            ),
            (
                "requestheader-username-headers".to_owned(),
                r#"["X-Remote-User"]"#.to_owned(),
            ),
            (
                "requestheader-extra-headers-prefix".to_owned(),
                r#"["X-Remote-Extra-"]"#.to_owned(),
            ),
        ]);
        let lookup = from_data(&data);
        assert!(lookup.client_ca.is_none());
        let rh = lookup.request_header.expect("a request-header CA");
        assert_eq!(rh.allowed_names, ["front-proxy-client"]);
        assert_eq!(rh.username_headers, ["X-Remote-User"]);
        assert_eq!(rh.extra_header_prefixes, ["X-Remote-Extra-"]);
        assert!(rh.group_headers.is_empty() && rh.uid_headers.is_empty());
    }

    #[test]
    fn an_unusable_ca_in_the_configmap_is_ignored() {
        let data = BTreeMap::from([("client-ca-file".to_owned(), "not a pem".to_owned())]);
        assert!(from_data(&data).client_ca.is_none());
    }
}
