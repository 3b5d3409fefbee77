//! Client-certificate authorities: from `--client-ca-file` and
//! `--requestheader-client-ca-file` (reloaded on change), or looked up in
//! ConfigMap `kube-system/extension-apiserver-authentication` as upstream.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use rustls::DistinguishedName;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;

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
    File(Arc<FileBacked<CaBundle>>),
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
            vec![Source::new(flag, path)],
            |sources, contents| CaBundle::from_pem(&sources[0], &contents[0]),
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

/// What the authentication ConfigMap says.
#[derive(Debug, Default)]
pub(super) struct Lookup {
    pub(super) client_ca: Option<CaSource>,
    pub(super) request_header: Option<LookedUpRequestHeader>,
}

/// The `requestheader-*` keys of the ConfigMap.
#[derive(Debug)]
pub(super) struct LookedUpRequestHeader {
    pub(super) ca: CaSource,
    pub(super) allowed_names: Vec<String>,
    pub(super) username_headers: Vec<String>,
    pub(super) group_headers: Vec<String>,
    pub(super) extra_header_prefixes: Vec<String>,
    pub(super) uid_headers: Vec<String>,
}

/// Reads the ConfigMap once. No ConfigMap: nothing to add. A failed read
/// is fatal unless `tolerate` (`--authentication-tolerate-lookup-failure`).
///
/// # Errors
/// [`Error::Lookup`] when the read fails and is not tolerated.
pub(super) async fn lookup(client: kube::Client, tolerate: bool) -> Result<Lookup, Error> {
    let api = kube::Api::<ConfigMap>::namespaced(client, NAMESPACE);
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), api.get_opt(NAME)).await;
    let config_map = match read {
        Ok(Ok(Some(config_map))) => config_map,
        Ok(Ok(None)) => return Ok(Lookup::default()),
        Ok(Err(err)) if tolerate => {
            tracing::warn!(error = %err, "cannot look up configmap/{NAME} in {NAMESPACE}; continuing without it, which may treat all requests as anonymous");
            return Ok(Lookup::default());
        }
        Ok(Err(err)) => return Err(Error::Lookup(err)),
        Err(_) if tolerate => {
            tracing::warn!(
                "looking up configmap/{NAME} in {NAMESPACE} timed out; continuing without it"
            );
            return Ok(Lookup::default());
        }
        Err(_) => {
            return Err(Error::Lookup(kube::Error::Service(
                "timed out after 10s".into(),
            )));
        }
    };
    Ok(from_data(&config_map.data.unwrap_or_default()))
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
        request_header: bundle("requestheader-client-ca-file").map(|ca| LookedUpRequestHeader {
            ca,
            allowed_names: list("requestheader-allowed-names"),
            username_headers: list("requestheader-username-headers"),
            group_headers: list("requestheader-group-headers"),
            extra_header_prefixes: list("requestheader-extra-headers-prefix"),
            uid_headers: list("requestheader-uid-headers"),
        }),
    }
}
