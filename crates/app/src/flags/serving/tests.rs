//! The secure serving, authentication and authorization flags: upstream's
//! defaults, good values, and bad values with a one-line message naming the
//! flag.

use std::path::PathBuf;
use std::time::Duration;

use crate::flags::{Command, parse};
use crate::serving::{CertSource, Config, SniCertKey, TlsVersion};

fn run(args: &[&str]) -> Result<Option<Config>, String> {
    let argv = std::iter::once("fake-cloud-controller-manager")
        .chain(args.iter().copied())
        .map(str::to_owned);
    match parse("fake", argv)? {
        Command::Run(settings) => Ok(settings.serving),
        other => panic!("expected a run, got {other:?}"),
    }
}

fn ok(args: &[&str]) -> Config {
    run(args)
        .unwrap_or_else(|e| panic!("{args:?} should parse: {e}"))
        .expect("serving is on")
}

fn bad(args: &[&str], expected: &str) {
    let err = run(args).expect_err(&format!("{args:?} should be refused"));
    assert!(
        err.contains(expected),
        "{args:?}: `{err}` does not mention `{expected}`"
    );
    assert!(!err.contains('\n'), "one line: {err}");
}

#[test]
fn defaults_match_upstream() {
    let c = ok(&[]);
    assert_eq!(c.addr, "0.0.0.0:10258".parse().unwrap());
    assert!(!c.permit_port_sharing && !c.permit_address_sharing);
    assert_eq!(c.tls.cert, CertSource::Generated);
    assert!(c.tls.sni.is_empty() && c.tls.cipher_suites.is_empty());
    assert_eq!(c.tls.min_version, TlsVersion::Tls12);
    assert!(c.tls.http2);
    assert_eq!(c.tls.http2_max_streams, 0);

    let a = &c.authentication;
    assert_eq!(a.kubeconfig, None);
    assert!(!a.skip_lookup && !a.tolerate_lookup_failure);
    assert_eq!(a.cache_ttl, Duration::from_secs(10));
    assert_eq!(a.client_ca_file, None);
    let rh = &a.request_header;
    assert_eq!(rh.client_ca_file, None);
    assert!(rh.allowed_names.is_empty() && rh.uid_headers.is_empty());
    assert_eq!(rh.username_headers, ["x-remote-user"]);
    assert_eq!(rh.group_headers, ["x-remote-group"]);
    assert_eq!(rh.extra_header_prefixes, ["x-remote-extra-"]);

    let z = &c.authorization;
    assert_eq!(z.kubeconfig, None);
    assert_eq!(z.always_allow_paths, ["/healthz", "/readyz", "/livez"]);
    assert_eq!(z.allow_ttl, Duration::from_secs(10));
    assert_eq!(z.deny_ttl, Duration::from_secs(10));
}

#[test]
fn address_and_port() {
    assert_eq!(
        ok(&["--bind-address=127.0.0.1", "--secure-port=9443"]).addr,
        "127.0.0.1:9443".parse().unwrap()
    );
    assert_eq!(run(&["--secure-port=0"]).unwrap(), None, "0 serves nothing");
    bad(
        &["--bind-address=localhost:1"],
        "invalid value `localhost:1` for `--bind-address",
    );
    bad(
        &["--secure-port=70000"],
        "invalid value `70000` for `--secure-port",
    );
    let c = ok(&["--permit-port-sharing", "--permit-address-sharing=true"]);
    assert!(c.permit_port_sharing && c.permit_address_sharing);
    bad(&["--permit-port-sharing=maybe"], "--permit-port-sharing");
}

#[test]
fn certificate_sources() {
    assert_eq!(
        ok(&["--tls-cert-file=/c.crt", "--tls-private-key-file=/c.key"])
            .tls
            .cert,
        CertSource::Files {
            cert: "/c.crt".into(),
            key: "/c.key".into()
        }
    );
    assert_eq!(
        ok(&[
            "--cert-dir=/certs",
            "--tls-cert-file=/c.crt",
            "--tls-private-key-file=/c.key"
        ])
        .tls
        .cert,
        CertSource::Files {
            cert: "/c.crt".into(),
            key: "/c.key".into()
        },
        "files win over --cert-dir"
    );
    assert_eq!(
        ok(&["--cert-dir=/certs"]).tls.cert,
        CertSource::Dir("/certs".into())
    );
    assert_eq!(ok(&["--cert-dir="]).tls.cert, CertSource::Generated);
    bad(
        &["--tls-cert-file=/c.crt"],
        "--tls-private-key-file is required with --tls-cert-file",
    );
    bad(
        &["--tls-private-key-file=/c.key"],
        "--tls-cert-file is required with --tls-private-key-file",
    );
}

#[test]
fn sni_cert_keys_repeat_with_optional_names() {
    let c = ok(&[
        "--tls-sni-cert-key=a.crt,a.key",
        "--tls-sni-cert-key",
        "b.crt,b.key:*.foo.com,foo.com",
    ]);
    assert_eq!(
        c.tls.sni,
        [
            SniCertKey {
                cert: "a.crt".into(),
                key: "a.key".into(),
                names: vec![],
            },
            SniCertKey {
                cert: "b.crt".into(),
                key: "b.key".into(),
                names: vec!["*.foo.com".into(), "foo.com".into()],
            },
        ]
    );
    bad(&["--tls-sni-cert-key=a.crt"], "--tls-sni-cert-key");
    bad(&["--tls-sni-cert-key=a.crt,a.key:"], "empty list of names");
}

#[test]
fn tls_versions_and_cipher_suites_by_go_names() {
    assert_eq!(
        ok(&["--tls-min-version=VersionTLS13"]).tls.min_version,
        TlsVersion::Tls13
    );
    assert_eq!(
        ok(&["--tls-min-version=VersionTLS10"]).tls.min_version,
        TlsVersion::Tls10,
        "accepted; served as TLS 1.2 and up"
    );
    bad(
        &["--tls-min-version=TLS1.2"],
        "--tls-min-version: unknown TLS version `TLS1.2`",
    );
    let c = ok(&[
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
        "--tls-cipher-suites=TLS_RSA_WITH_AES_128_CBC_SHA",
    ]);
    assert_eq!(
        c.tls.cipher_suites,
        [
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_AES_128_GCM_SHA256",
            "TLS_RSA_WITH_AES_128_CBC_SHA"
        ]
    );
    bad(
        &["--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_NOPE"],
        "--tls-cipher-suites: cipher suite `TLS_NOPE` is not supported",
    );
}

#[test]
fn http2() {
    let c = ok(&[
        "--disable-http2-serving",
        "--http2-max-streams-per-connection=50",
    ]);
    assert!(!c.tls.http2);
    assert_eq!(c.tls.http2_max_streams, 50);
    bad(
        &["--http2-max-streams-per-connection=-1"],
        "--http2-max-streams-per-connection",
    );
}

#[test]
fn authentication_flags() {
    let c = ok(&[
        "--authentication-kubeconfig=/auth.conf",
        "--authentication-skip-lookup",
        "--authentication-tolerate-lookup-failure=true",
        "--authentication-token-webhook-cache-ttl=1m",
        "--client-ca-file=/ca.crt",
        "--requestheader-client-ca-file=/front.crt",
        "--requestheader-allowed-names=front-proxy,aggregator",
        "--requestheader-username-headers=X-Remote-User,X-User",
        "--requestheader-group-headers=",
        "--requestheader-uid-headers=X-Remote-Uid",
    ]);
    let a = c.authentication;
    assert_eq!(a.kubeconfig, Some(PathBuf::from("/auth.conf")));
    assert!(a.skip_lookup && a.tolerate_lookup_failure);
    assert_eq!(a.cache_ttl, Duration::from_secs(60));
    assert_eq!(a.client_ca_file, Some(PathBuf::from("/ca.crt")));
    let rh = a.request_header;
    assert_eq!(rh.client_ca_file, Some(PathBuf::from("/front.crt")));
    assert_eq!(rh.allowed_names, ["front-proxy", "aggregator"]);
    assert_eq!(rh.username_headers, ["X-Remote-User", "X-User"]);
    assert!(
        rh.group_headers.is_empty(),
        "an empty value clears the list"
    );
    assert_eq!(rh.uid_headers, ["X-Remote-Uid"]);

    bad(
        &["--authentication-token-webhook-cache-ttl=10"],
        "--authentication-token-webhook-cache-ttl",
    );
    bad(
        &["--authentication-skip-lookup=yes"],
        "--authentication-skip-lookup",
    );
    bad(
        &["--requestheader-username-headers=x-remote-user, "],
        "--requestheader-username-headers: empty value",
    );
    bad(
        &["--requestheader-uid-headers=X-Uid"],
        "--requestheader-uid-headers is set without the standard X-Remote-Uid header",
    );
}

#[test]
fn authorization_flags() {
    let c = ok(&[
        "--authorization-kubeconfig=/authz.conf",
        "--authorization-always-allow-paths=/healthz,/debug/*",
        "--authorization-webhook-cache-authorized-ttl=5m",
        "--authorization-webhook-cache-unauthorized-ttl=30s",
    ]);
    let z = c.authorization;
    assert_eq!(z.kubeconfig, Some(PathBuf::from("/authz.conf")));
    assert_eq!(z.always_allow_paths, ["/healthz", "/debug/*"]);
    assert_eq!(z.allow_ttl, Duration::from_secs(300));
    assert_eq!(z.deny_ttl, Duration::from_secs(30));
    assert!(
        ok(&["--authorization-always-allow-paths="])
            .authorization
            .always_allow_paths
            .is_empty()
    );
    bad(
        &["--authorization-always-allow-paths=/a*b"],
        "--authorization-always-allow-paths: only a trailing * is allowed",
    );
    bad(
        &["--authorization-webhook-cache-unauthorized-ttl=-1s"],
        "--authorization-webhook-cache-unauthorized-ttl",
    );
}

#[test]
fn serving_flags_appear_under_their_own_headings() {
    let argv = ["ccm", "--help"].map(str::to_owned);
    let Ok(Command::Help(text)) = parse("fake", argv) else {
        panic!("--help gives the help text");
    };
    for heading in [
        "Secure serving flags",
        "Authentication flags",
        "Authorization flags",
    ] {
        assert!(text.contains(heading), "{heading}");
    }
    assert!(text.contains("--tls-sni-cert-key") && text.contains("--requestheader-uid-headers"));
}
