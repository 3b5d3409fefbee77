//! Which certificate is served, reloading without a restart, protocol
//! versions and HTTP/2, and the errors for unusable files.

use std::net::IpAddr;

use super::*;
use crate::serving::certs::self_signed;

const SKIP_LOOKUP: &str = "--authentication-skip-lookup";

fn loopback() -> IpAddr {
    IpAddr::from([127, 0, 0, 1])
}

/// Writes a fresh self-signed pair; returns its certificate's DER.
fn write_pair(cert: &std::path::Path, key: &std::path::Path) -> Vec<u8> {
    let (cert_pem, key_pem) = self_signed(loopback()).unwrap();
    // Key first: for a moment the files do not match, which a reload
    // must sit out.
    std::fs::write(key, key_pem).unwrap();
    std::fs::write(cert, &cert_pem).unwrap();
    der(&cert_pem)
}

#[tokio::test]
async fn given_files_are_served_and_a_rotation_needs_no_restart() {
    let stub = Stub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let first = write_pair(&cert, &key);
    let server = start(
        &[
            SKIP_LOOKUP,
            &format!("--tls-cert-file={}", cert.display()),
            &format!("--tls-private-key-file={}", key.display()),
        ],
        &stub,
    )
    .await;
    let client = https().build().unwrap();
    assert_eq!(
        served_certificate(&client, &server.url("/healthz")).await,
        first
    );

    let second = write_pair(&cert, &key);
    assert_ne!(first, second);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        // A new client each time: an HTTP/2 connection would be reused.
        let client = https().build().unwrap();
        if served_certificate(&client, &server.url("/healthz")).await == second {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new certificate was not served within 10s"
        );
        tokio::time::sleep(RELOAD_EVERY).await;
    }
}

#[tokio::test]
async fn cert_dir_gets_a_self_signed_pair_once_and_reuses_it() {
    let stub = Stub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cert_dir = format!("--cert-dir={}", dir.path().join("certs").display());
    let client = https().build().unwrap();

    let first = start(&[SKIP_LOOKUP, &cert_dir], &stub).await;
    let written =
        std::fs::read_to_string(dir.path().join("certs/cloud-controller-manager.crt")).unwrap();
    assert_eq!(
        served_certificate(&client, &first.url("/healthz")).await,
        der(&written)
    );
    let key = dir.path().join("certs/cloud-controller-manager.key");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let second = start(&[SKIP_LOOKUP, &cert_dir], &stub).await;
    assert_eq!(
        served_certificate(&client, &second.url("/healthz")).await,
        der(&written),
        "the pair in --cert-dir is reused"
    );
}

#[tokio::test]
async fn without_files_a_certificate_is_made_in_memory() {
    let stub = Stub::start().await;
    let server = start(&[SKIP_LOOKUP], &stub).await;
    let client = https().build().unwrap();
    let der = served_certificate(&client, &server.url("/healthz")).await;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let san = cert.subject_alternative_name().unwrap().unwrap();
    assert!(
        san.value.general_names.iter().any(|n| matches!(
            n,
            x509_parser::extensions::GeneralName::DNSName("localhost")
        )),
        "{san:?}"
    );
}

#[tokio::test]
async fn sni_serves_the_certificate_for_the_name_asked() {
    let stub = Stub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("sni.crt"), dir.path().join("sni.key"));
    let sni = write_pair(&cert, &key);
    let flag = format!(
        "--tls-sni-cert-key={},{}:ccm.example.com",
        cert.display(),
        key.display()
    );
    let server = start(&[SKIP_LOOKUP, &flag], &stub).await;
    let client = https()
        .resolve("ccm.example.com", server.addr)
        .build()
        .unwrap();
    let url = format!("https://ccm.example.com:{}/healthz", server.addr.port());
    assert_eq!(served_certificate(&client, &url).await, sni);
    let by_ip = served_certificate(&client, &server.url("/healthz")).await;
    assert_ne!(by_ip, sni, "no name asked: the default certificate");
}

#[tokio::test]
async fn http2_is_offered_unless_disabled() {
    let stub = Stub::start().await;
    let client = https().build().unwrap();
    let server = start(&[SKIP_LOOKUP], &stub).await;
    let response = client.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(response.version(), reqwest::Version::HTTP_2);

    let server = start(&[SKIP_LOOKUP, "--disable-http2-serving"], &stub).await;
    let response = client.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(response.version(), reqwest::Version::HTTP_11);
}

#[tokio::test]
async fn tls_min_version_13_refuses_a_tls_12_client() {
    let stub = Stub::start().await;
    let tls12 = https()
        .tls_version_max(reqwest::tls::Version::TLS_1_2)
        .build()
        .unwrap();
    let server = start(&[SKIP_LOOKUP, "--tls-min-version=VersionTLS10"], &stub).await;
    assert_eq!(get_with(&tls12, &server.url("/healthz"), None).await.0, 200);
    let server = start(&[SKIP_LOOKUP, "--tls-min-version=VersionTLS13"], &stub).await;
    assert!(tls12.get(server.url("/healthz")).send().await.is_err());
}

#[tokio::test]
async fn tls_12_suites_follow_the_flag() {
    let stub = Stub::start().await;
    let tls12 = https()
        .tls_version_max(reqwest::tls::Version::TLS_1_2)
        .build()
        .unwrap();
    let server = start(
        &[
            SKIP_LOOKUP,
            "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_128_CBC_SHA",
        ],
        &stub,
    )
    .await;
    assert_eq!(get_with(&tls12, &server.url("/healthz"), None).await.0, 200);
    let server = start(
        &[
            SKIP_LOOKUP,
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ],
        &stub,
    )
    .await;
    assert!(
        tls12.get(server.url("/healthz")).send().await.is_err(),
        "the self-signed key is ECDSA: no RSA suite can serve it"
    );
}

#[tokio::test]
async fn unusable_files_name_the_flag_and_path_and_never_their_contents() {
    let stub = Stub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.crt");
    let garbage = dir.path().join("garbage.key");
    std::fs::write(
        &garbage,
        "-----BEGIN PRIVATE KEY-----\nSECRETKEYMATERIAL\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let (cert, key) = (dir.path().join("ok.crt"), dir.path().join("ok.key"));
    write_pair(&cert, &key);

    let cases = [
        (
            vec![
                format!("--tls-cert-file={}", missing.display()),
                format!("--tls-private-key-file={}", key.display()),
            ],
            format!("--tls-cert-file {}: cannot read it", missing.display()),
        ),
        (
            vec![
                format!("--tls-cert-file={}", cert.display()),
                format!("--tls-private-key-file={}", garbage.display()),
            ],
            format!("--tls-private-key-file {}", garbage.display()),
        ),
        (
            vec![format!("--client-ca-file={}", missing.display())],
            format!("--client-ca-file {}: cannot read it", missing.display()),
        ),
        (
            vec![format!(
                "--requestheader-client-ca-file={}",
                garbage.display()
            )],
            format!("--requestheader-client-ca-file {}", garbage.display()),
        ),
        (
            vec![format!(
                "--tls-sni-cert-key={},{}",
                cert.display(),
                missing.display()
            )],
            format!("--tls-sni-cert-key {}: cannot read it", missing.display()),
        ),
    ];
    for (args, expected) in cases {
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.push(SKIP_LOOKUP);
        let err = try_start(&args, &stub).await.unwrap_err();
        let text = err.to_string();
        assert!(err.is_usage(), "{text}");
        assert!(text.starts_with(&expected), "{args:?}: `{text}`");
        assert!(
            !text.contains('\n') && !text.contains("SECRETKEYMATERIAL"),
            "{text}"
        );
    }
}
