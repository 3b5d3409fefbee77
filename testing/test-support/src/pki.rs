//! A throw-away PKI for one control plane: a CA, kube-apiserver's serving
//! certificate for `127.0.0.1` and `localhost`, and the service-account
//! signing key (so TokenRequest and TokenReview work).

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// The PEM files written by [`write`].
#[derive(Debug, Clone)]
pub(crate) struct Pki {
    pub(crate) ca_cert: PathBuf,
    pub(crate) serving_cert: PathBuf,
    pub(crate) serving_key: PathBuf,
    pub(crate) service_account_key: PathBuf,
    pub(crate) service_account_public_key: PathBuf,
}

/// Generates the PKI and writes it under `dir`.
pub(crate) fn write(dir: &Path) -> anyhow::Result<Pki> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "ccm-test-control-plane-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let serving_key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(vec!["localhost".to_owned()])?;
    serving
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let service_account_key = KeyPair::generate()?;

    let pki = Pki {
        ca_cert: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        service_account_key: dir.join("sa.key"),
        service_account_public_key: dir.join("sa.pub"),
    };
    let files = [
        (&pki.ca_cert, ca_cert.pem()),
        (&pki.serving_cert, serving_cert.pem()),
        (&pki.serving_key, serving_key.serialize_pem()),
        (
            &pki.service_account_key,
            service_account_key.serialize_pem(),
        ),
        (
            &pki.service_account_public_key,
            service_account_key.public_key_pem(),
        ),
    ];
    for (path, pem) in files {
        std::fs::write(path, pem).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(pki)
}
