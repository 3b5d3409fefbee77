//! Certificates the CCM keeps itself (`--webhook-cert-secret`), so the
//! webhook needs no cert-manager: a CA and a serving certificate for the
//! webhook's Service, kept in one Secret that every replica shares, and the
//! CA kept in the ValidatingWebhookConfiguration's `caBundle`.
//!
//! The Secret is read first: a complete pair that still has a month to run
//! is served as it is. Otherwise the CA in it is reused (or a new one made)
//! to issue a new serving certificate, and the Secret is updated with its
//! resourceVersion, so when two replicas race one wins and the other reads
//! what the winner wrote. Nothing here ever logs key material.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use parking_lot::RwLock;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::ManagedCerts;

/// The Secret's keys.
pub(crate) const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const TLS_CERT: &str = "tls.crt";
const TLS_KEY: &str = "tls.key";

/// How long a CA lives.
const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// How long a serving certificate lives.
const SERVING_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// A serving certificate closer than this to its end is renewed.
const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);
/// The CA's common name: fixed, so a CA read back from the Secret signs
/// with the same issuer name it was made with.
const CA_NAME: &str = "rust-ccm-webhook-ca";

/// What went wrong keeping the certificates. Never holds key material.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("secret {namespace}/{name}: {source}")]
    Secret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("validatingwebhookconfiguration {name}: {source}")]
    Configuration {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot make the webhook's certificates: {0}")]
    Issue(String),
    #[error("the webhook's serving certificate: {0}")]
    Serve(String),
}

/// The PEM material kept in the Secret.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Material {
    pub(crate) ca_cert: String,
    ca_key: String,
    pub(crate) tls_cert: String,
    tls_key: String,
}

impl std::fmt::Debug for Material {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Material { .. }")
    }
}

impl Material {
    /// The material in `secret`, when all four keys are there.
    fn from_secret(secret: &Secret) -> Option<Self> {
        let data = secret.data.as_ref()?;
        let text = |key: &str| {
            data.get(key)
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
                .filter(|v| !v.is_empty())
        };
        Some(Self {
            ca_cert: text(CA_CERT)?,
            ca_key: text(CA_KEY)?,
            tls_cert: text(TLS_CERT)?,
            tls_key: text(TLS_KEY)?,
        })
    }

    fn into_data(self) -> std::collections::BTreeMap<String, ByteString> {
        [
            (CA_CERT, self.ca_cert),
            (CA_KEY, self.ca_key),
            (TLS_CERT, self.tls_cert),
            (TLS_KEY, self.tls_key),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.into_bytes())))
        .collect()
    }

    /// Whether the serving certificate names every one of `names` and has
    /// more than [`RENEW_BEFORE`] to run at `now`.
    fn serves(&self, names: &[String], now: SystemTime) -> bool {
        let Some(der) = rustls::pki_types::CertificateDer::pem_slice_iter(self.tls_cert.as_bytes())
            .next()
            .and_then(Result::ok)
        else {
            return false;
        };
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(&der) else {
            return false;
        };
        let not_after = u64::try_from(cert.validity().not_after.timestamp()).unwrap_or(0);
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        if Duration::from_secs(not_after) <= now + RENEW_BEFORE {
            return false;
        }
        let Ok(Some(san)) = cert.subject_alternative_name() else {
            return false;
        };
        names.iter().all(|name| {
            san.value.general_names.iter().any(
                |g| matches!(g, x509_parser::extensions::GeneralName::DNSName(dns) if dns == name),
            )
        })
    }

    /// The serving certificate and key as rustls serves them.
    pub(crate) fn certified_key(&self) -> Result<Arc<CertifiedKey>, Error> {
        crate::serving::certified_key_from_pem(
            "--webhook-cert-secret",
            self.tls_cert.as_bytes(),
            self.tls_key.as_bytes(),
        )
        .map_err(|e| Error::Serve(e.to_string()))
    }
}

/// The DNS names the serving certificate must carry for `service`.
pub(crate) fn service_names(managed: &ManagedCerts) -> Vec<String> {
    let (ns, name) = (&managed.service.namespace, &managed.service.name);
    vec![
        format!("{name}.{ns}.svc"),
        format!("{name}.{ns}.svc.cluster.local"),
    ]
}

/// The CA's parameters, the same every time so a stored CA key signs with
/// the issuer name its certificate carries.
fn ca_params() -> Result<CertificateParams, rcgen::Error> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, CA_NAME);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(ca)
}

/// Valid from an hour ago (clock skew) for `validity`.
fn validity(params: &mut CertificateParams, now: SystemTime, validity: Duration) {
    let now = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + now.saturating_sub(Duration::from_secs(3600));
    params.not_after = epoch + now + validity;
}

/// A serving certificate for `names`, signed by the CA in `previous` when
/// there is one (so the `caBundle` stays valid), else by a new CA.
pub(crate) fn issue(
    previous: Option<&Material>,
    names: &[String],
    now: SystemTime,
) -> Result<Material, Error> {
    let fail = |e: rcgen::Error| Error::Issue(e.to_string());
    let reused = previous.and_then(|p| {
        KeyPair::from_pem(&p.ca_key)
            .ok()
            .map(|key| (p.ca_cert.clone(), key))
    });
    let (ca_cert, ca_key) = match reused {
        Some(pair) => pair,
        None => {
            let key = KeyPair::generate().map_err(fail)?;
            let mut params = ca_params().map_err(fail)?;
            validity(&mut params, now, CA_VALIDITY);
            let cert = params.self_signed(&key).map_err(fail)?;
            (cert.pem(), key)
        }
    };
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca_params().map_err(fail)?, ca_key);
    let key = KeyPair::generate().map_err(fail)?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(fail)?;
    // Loopback too, as upstream's self-signed webhook certificates: an API
    // server on the same host may call the webhook by URL.
    params.subject_alt_names.extend([
        SanType::DnsName("localhost".try_into().map_err(fail)?),
        SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()),
    ]);
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().cloned().unwrap_or_default(),
    );
    validity(&mut params, now, SERVING_VALIDITY);
    let cert = params.signed_by(&key, &issuer).map_err(fail)?;
    Ok(Material {
        ca_cert,
        ca_key: ca_key_pem,
        tls_cert: cert.pem(),
        tls_key: key.serialize_pem(),
    })
}

/// The material to serve: the Secret's when still good, else newly issued
/// and stored. A replica that loses the race to store reads the winner's.
///
/// # Errors
/// The Secret cannot be read or written (it must exist: the chart creates
/// it empty), or certificates cannot be made.
pub(crate) async fn load_or_issue(
    client: &kube::Client,
    managed: &ManagedCerts,
) -> Result<Material, Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &managed.secret.namespace);
    let secret_error = |source| Error::Secret {
        namespace: managed.secret.namespace.clone(),
        name: managed.secret.name.clone(),
        source,
    };
    let names = service_names(managed);
    for _ in 0..3 {
        let mut secret = secrets
            .get(&managed.secret.name)
            .await
            .map_err(secret_error)?;
        let stored = Material::from_secret(&secret);
        if let Some(material) = stored
            .as_ref()
            .filter(|m| m.serves(&names, SystemTime::now()))
        {
            return Ok(material.clone());
        }
        let material = issue(stored.as_ref(), &names, SystemTime::now())?;
        let mut data = secret.data.take().unwrap_or_default();
        data.extend(material.clone().into_data());
        secret.data = Some(data);
        match secrets
            .replace(&managed.secret.name, &PostParams::default(), &secret)
            .await
        {
            Ok(_) => {
                tracing::info!(
                    secret = %format!("{}/{}", managed.secret.namespace, managed.secret.name),
                    "issued the admission webhook's serving certificate"
                );
                return Ok(material);
            }
            // Another replica stored its pair first: read and serve it.
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(err) => return Err(secret_error(err)),
        }
    }
    Err(Error::Issue(
        "the Secret kept changing under three attempts to store a certificate in it".into(),
    ))
}

/// Makes every webhook of the configuration trust `ca_pem`. `Ok(true)` when
/// it changed something.
///
/// # Errors
/// The configuration cannot be read or written.
pub(crate) async fn sync_ca_bundle(
    client: &kube::Client,
    configuration: &str,
    ca_pem: &str,
) -> Result<bool, Error> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let error = |source| Error::Configuration {
        name: configuration.to_owned(),
        source,
    };
    let mut stored = api.get(configuration).await.map_err(error)?;
    let wanted = ByteString(ca_pem.as_bytes().to_vec());
    let mut changed = false;
    for webhook in stored.webhooks.iter_mut().flatten() {
        if webhook.client_config.ca_bundle.as_ref() != Some(&wanted) {
            webhook.client_config.ca_bundle = Some(wanted.clone());
            changed = true;
        }
    }
    if changed {
        api.replace(configuration, &PostParams::default(), &stored)
            .await
            .map_err(error)?;
        tracing::info!(
            configuration,
            "the admission webhook's caBundle is now its CA"
        );
    }
    Ok(changed)
}

/// The serving certificate of the moment, swapped when renewed.
#[derive(Debug)]
pub(crate) struct Current(RwLock<Arc<CertifiedKey>>);

impl Current {
    pub(crate) fn new(key: Arc<CertifiedKey>) -> Self {
        Self(RwLock::new(key))
    }

    pub(crate) fn set(&self, key: Arc<CertifiedKey>) {
        *self.0.write() = key;
    }
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["ccm-webhook.kube-system.svc".into()]
    }

    #[test]
    fn a_fresh_pair_serves_its_names_and_a_renewal_keeps_the_ca() {
        let now = SystemTime::now();
        let first = issue(None, &names(), now).unwrap();
        assert!(first.serves(&names(), now));
        assert!(
            !first.serves(&["other.svc".into()], now),
            "names are checked"
        );
        first.certified_key().unwrap();
        let renewed = issue(Some(&first), &names(), now).unwrap();
        assert_eq!(renewed.ca_cert, first.ca_cert, "the caBundle stays valid");
        assert_ne!(renewed.tls_cert, first.tls_cert);
        let late = now + SERVING_VALIDITY - RENEW_BEFORE / 2;
        assert!(
            !first.serves(&names(), late),
            "renewed a month before its end"
        );
    }

    #[test]
    fn a_renewed_certificate_chains_to_the_kept_ca() {
        use rustls::client::danger::ServerCertVerifier;
        let now = SystemTime::now();
        let first = issue(None, &names(), now).unwrap();
        let renewed = issue(Some(&first), &names(), now).unwrap();
        let ca =
            rustls::pki_types::CertificateDer::from_pem_slice(first.ca_cert.as_bytes()).unwrap();
        let leaf =
            rustls::pki_types::CertificateDer::from_pem_slice(renewed.tls_cert.as_bytes()).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::aws_lc_rs::default_provider()),
        )
        .build()
        .unwrap();
        let name = rustls::pki_types::ServerName::try_from("ccm-webhook.kube-system.svc").unwrap();
        verifier
            .verify_server_cert(&leaf, &[], &name, &[], rustls::pki_types::UnixTime::now())
            .unwrap();
    }

    #[test]
    fn material_reads_back_from_a_secret_and_never_prints() {
        let material = issue(None, &names(), SystemTime::now()).unwrap();
        let secret = Secret {
            data: Some(material.clone().into_data()),
            ..Secret::default()
        };
        assert_eq!(Material::from_secret(&secret), Some(material.clone()));
        assert_eq!(format!("{material:?}"), "Material { .. }");
        assert_eq!(Material::from_secret(&Secret::default()), None);
    }
}
