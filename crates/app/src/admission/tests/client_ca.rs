//! `--webhook-client-ca-file`: only a caller with a client certificate that
//! CA signed (kube-apiserver) completes the TLS handshake.

use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::flags::{Command, parse};

/// A CA, PEM, and a client certificate and key it signed, PEM.
fn ca_and_client(name: &str) -> (String, Vec<u8>) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_pem = params.self_signed(&key).unwrap().pem();
    let issuer = Issuer::new(params, key);
    let client_key = KeyPair::generate().unwrap();
    let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
    client
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = client.signed_by(&client_key, &issuer).unwrap();
    let identity = format!("{}{}", cert.pem(), client_key.serialize_pem()).into_bytes();
    (ca_pem, identity)
}

fn client(identity: Option<&[u8]>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(10));
    if let Some(pem) = identity {
        builder = builder.identity(reqwest::Identity::from_pem(pem).unwrap());
    }
    builder.build().unwrap()
}

#[tokio::test]
async fn with_a_client_ca_only_its_certificates_may_call() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, apiserver) = ca_and_client("apiserver-client-ca");
    let (_, stranger) = ca_and_client("other-ca");
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, ca).unwrap();
    let argv = [
        "fake-cloud-controller-manager".to_owned(),
        "--webhooks=service-annotations".to_owned(),
        "--webhook-bind-address=127.0.0.1".to_owned(),
        format!("--webhook-client-ca-file={}", ca_file.display()),
    ];
    let Ok(Command::Run(settings)) = parse("fake", argv) else {
        panic!("the flags parse");
    };
    let options = settings.webhook.expect("the webhook is on");
    assert_eq!(options.client_ca.as_deref(), Some(ca_file.as_path()));
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let served = Serving::unguarded(
        &options.tls,
        serving::WEBHOOK_SERVING,
        options.addr.ip(),
        None,
        options.client_ca.as_deref(),
        &shutdown,
    )
    .unwrap();
    let listener = serving::bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
    let url = format!("https://{}{PATH}", listener.local_addr().unwrap());
    let router = router(Arc::new(FakeCloud::default()), Policy::Upstream);
    tokio::spawn(serving::serve(listener, served, router, shutdown.clone()));
    let body = review("CREATE", &service("LoadBalancer", &[]), None);

    let answered = client(Some(&apiserver))
        .post(&url)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200, "the CA's client is answered");
    for (who, identity) in [
        ("no certificate", None),
        ("another CA's", Some(&stranger[..])),
    ] {
        let refused = client(identity).post(&url).body(body.clone()).send().await;
        assert!(
            refused.is_err(),
            "{who}: the handshake fails, got {refused:?}"
        );
    }
}

#[tokio::test]
async fn an_unreadable_client_ca_names_the_flag_and_is_a_usage_error() {
    let shutdown = CancellationToken::new();
    let options = TlsOptions {
        cert: CertSource::Generated,
        sni: Vec::new(),
        min_version: serving::TlsVersion::Tls12,
        cipher_suites: Vec::new(),
        http2: true,
        http2_max_streams: 0,
    };
    let err = Serving::unguarded(
        &options,
        serving::WEBHOOK_SERVING,
        "127.0.0.1".parse().unwrap(),
        None,
        Some(std::path::Path::new("/nonexistent/ca.crt")),
        &shutdown,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("--webhook-client-ca-file /nonexistent/ca.crt: cannot read it"),
        "{err}"
    );
    assert!(Error::Serving(err).is_usage());
}
