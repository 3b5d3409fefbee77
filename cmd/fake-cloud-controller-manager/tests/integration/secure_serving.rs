//! The CCM's HTTPS port as a scraper meets it: health without credentials,
//! `/metrics` behind delegated authentication and authorization (TokenReview
//! and SubjectAccessReview against the test API server's RBAC, cached per
//! TTL), the serving certificate from files or self-signed, reloaded without
//! a restart, and no secret in the log.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ccm_test_apiserver::{AuthorizationMode, TestApiServer};
use ccm_test_support::{Ccm, Launch, eventually, kubectl, unique};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, PostParams};

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
/// How long any one outcome may take.
const WAIT: Duration = Duration::from_secs(30);

/// The test's own identity, and the CCM's: an administrator.
const ADMIN_TOKEN: &str = "admin-token-7f3c9a1e52d84b06";
/// A user with no rights at all.
const SCRAPER_TOKEN: &str = "scraper-token-c41be8d07a2f5593";
/// A user granted `get` on `/metrics` before the CCM starts.
const PROMETHEUS_TOKEN: &str = "prometheus-token-9e2d61f0b8c3a774";

/// The test API server in RBAC mode with a static token file, and the
/// directory holding that file (and anything else the test writes).
async fn rbac_server() -> (TestApiServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        format!(
            "{ADMIN_TOKEN},admin,uid-admin,\"system:masters\"\n\
             {SCRAPER_TOKEN},scraper,uid-scraper\n\
             {PROMETHEUS_TOKEN},prometheus,uid-prometheus\n"
        ),
    )
    .unwrap();
    let server = TestApiServer::builder()
        .token_auth_file(&tokens)
        .authorization_mode(AuthorizationMode::Rbac)
        .start()
        .await
        .unwrap();
    (server, dir)
}

/// Grants `user` `get` on `/metrics`: the ClusterRole and binding are
/// written by kubectl's own `create clusterrole`/`create clusterrolebinding`
/// and sent by the administrator's client. (kubectl itself cannot send
/// them: client-go's clientcmd drops every credential when the server is
/// not TLS, and the test API server speaks plain HTTP, so kubectl is
/// `system:anonymous` there.)
async fn grant_metrics(server: &TestApiServer, user: &str) {
    let name = format!("{user}-metrics-reader");
    let kubeconfig = server.kubeconfig_path();
    let role = kubectl(
        kubeconfig,
        &[
            "create",
            "clusterrole",
            &name,
            "--verb=get",
            "--non-resource-url=/metrics",
            "--dry-run=client",
            "-o",
            "json",
        ],
    )
    .await
    .expect("kubectl renders the ClusterRole");
    let binding = kubectl(
        kubeconfig,
        &[
            "create",
            "clusterrolebinding",
            &name,
            &format!("--clusterrole={name}"),
            &format!("--user={user}"),
            "--dry-run=client",
            "-o",
            "json",
        ],
    )
    .await
    .expect("kubectl renders the ClusterRoleBinding");
    let role: ClusterRole = serde_json::from_str(&role).unwrap();
    let binding: ClusterRoleBinding = serde_json::from_str(&binding).unwrap();
    Api::<ClusterRole>::all(server.client())
        .create(&PostParams::default(), &role)
        .await
        .expect("the ClusterRole is created");
    Api::<ClusterRoleBinding>::all(server.client())
        .create(&PostParams::default(), &binding)
        .await
        .expect("the ClusterRoleBinding is created");
}

/// The binary against `server` as its administrator, with `/metrics`
/// behind authorization and `extra` flags.
fn launch(server: &TestApiServer, extra: &[&str]) -> Launch {
    let log =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{}.log", unique("secure-ccm")));
    Launch::new(BINARY, log)
        .metrics_behind_authorization()
        .args([
            format!("--kubeconfig={}", server.kubeconfig_path().display()),
            "--cluster-cidr=10.244.0.0/16".to_owned(),
            "--leader-elect-lease-duration=3s".to_owned(),
            "--leader-elect-renew-deadline=2s".to_owned(),
            "--leader-elect-retry-period=500ms".to_owned(),
        ])
        .args(extra.iter().copied())
}

/// Starts the CCM and waits until it holds the Lease and `/readyz` answers
/// 200 (the harness's own wait reads `/metrics`, which is guarded here).
async fn start(server: &TestApiServer, extra: &[&str]) -> Ccm {
    let ccm = launch(server, extra).spawn().expect("the binary starts");
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    eventually(
        "the CCM leading and ready",
        Duration::from_secs(60),
        || async {
            let holder = leases
                .get_opt("cloud-controller-manager")
                .await
                .ok()??
                .spec?
                .holder_identity
                .filter(|h| !h.is_empty());
            let ready = matches!(ccm.get("/readyz").await, Ok((200, _)));
            (holder.is_some() && ready).then_some(())
        },
    )
    .await
    .unwrap_or_else(|err| panic!("{err}; the CCM's log ends:\n{}", ccm.log_tail()));
    ccm
}

/// An HTTPS client that accepts any certificate, keeps no connection (so
/// each request sees the certificate served now) and reports TLS details.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .tls_info(true)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// `GET path` with an optional bearer token: status and body.
async fn get(ccm: &Ccm, path: &str, token: Option<&str>) -> (u16, String) {
    let mut request = client().get(format!("https://127.0.0.1:{}{path}", ccm.port()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("the CCM answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// The certificate the CCM serves now, DER.
async fn served_certificate(ccm: &Ccm) -> Vec<u8> {
    let response = client()
        .get(format!("https://127.0.0.1:{}/healthz", ccm.port()))
        .send()
        .await
        .expect("the CCM answers");
    response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(reqwest::tls::TlsInfo::peer_certificate)
        .expect("the TLS peer certificate")
        .to_vec()
}

/// How many TokenReviews and SubjectAccessReviews the API server has seen.
fn reviews(server: &TestApiServer) -> (usize, usize) {
    let requests = server.requests();
    let count = |resource: &str| {
        requests
            .iter()
            .filter(|r| r.resource == resource && r.verb == "create")
            .count()
    };
    (count("tokenreviews"), count("subjectaccessreviews"))
}

#[tokio::test]
async fn metrics_need_a_token_and_a_grant_and_a_new_grant_works_within_the_denial_ttl() {
    let (server, _dir) = rbac_server().await;
    let ccm = start(
        &server,
        &["--authorization-webhook-cache-unauthorized-ttl=1s"],
    )
    .await;

    assert_eq!(get(&ccm, "/healthz", None).await.0, 200);
    let (status, body) = get(&ccm, "/metrics", None).await;
    assert_eq!(status, 401, "no token: {body}");
    let (status, body) = get(&ccm, "/metrics", Some("not-a-known-token")).await;
    assert_eq!(status, 401, "an unknown token: {body}");

    let (status, body) = get(&ccm, "/metrics", Some(SCRAPER_TOKEN)).await;
    assert_eq!(status, 403, "{body}");
    let refusal: serde_json::Value = serde_json::from_str(&body).expect("a Status object");
    assert_eq!(refusal["kind"], "Status", "{body}");
    assert_eq!(refusal["reason"], "Forbidden", "{body}");
    assert_eq!(refusal["code"], 403, "{body}");
    let message = refusal["message"].as_str().unwrap();
    assert!(
        message.contains(r#"User "scraper" cannot get path "/metrics""#),
        "{message}"
    );

    grant_metrics(&server, "scraper").await;
    let granted_at = Instant::now();
    let metrics = eventually("/metrics 200 for scraper", WAIT, || async {
        match get(&ccm, "/metrics", Some(SCRAPER_TOKEN)).await {
            (200, body) => Some(body),
            _ => None,
        }
    })
    .await
    .expect("the grant takes effect");
    assert!(metrics.contains("ccm_controller_running{"), "{metrics}");
    let waited = granted_at.elapsed();
    println!("the grant took effect after {waited:?} (denials cached 1s)");
    assert!(
        waited < Duration::from_secs(5),
        "a denial cached for 1s held for {waited:?}"
    );

    // No certificate files: a self-signed certificate of its own.
    let der = served_certificate(&ccm).await;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("an X.509 certificate");
    assert_eq!(
        cert.issuer().as_raw(),
        cert.subject().as_raw(),
        "self-signed: issuer {} subject {}",
        cert.issuer(),
        cert.subject()
    );
}

#[tokio::test]
async fn a_stranger_costs_no_review_for_an_unknown_path_and_no_cache_entry_for_a_denial() {
    let (server, _dir) = rbac_server().await;
    let ccm = start(
        &server,
        &["--authorization-webhook-cache-unauthorized-ttl=1h"],
    )
    .await;
    let before = reviews(&server);
    for token in [None, Some("not-a-known-token"), Some(SCRAPER_TOKEN)] {
        for path in ["/wp-login.php", "/metrics/x", "/readyz/made-up"] {
            assert_eq!(get(&ccm, path, token).await.0, 404, "{path} with {token:?}");
        }
    }
    assert_eq!(
        reviews(&server),
        before,
        "no TokenReview or SubjectAccessReview for a path nothing serves"
    );

    for _ in 0..3 {
        assert_eq!(get(&ccm, "/metrics", None).await.0, 401);
    }
    assert_eq!(
        reviews(&server),
        (before.0, before.1 + 3),
        "each anonymous denial asked again, none kept for the hour"
    );

    // A check's reason is for those allowed its path: the administrator,
    // not a stranger (who still reads the root path).
    assert_eq!(get(&ccm, "/readyz/watches", None).await.0, 401);
    assert_eq!(
        get(&ccm, "/readyz/watches", Some(ADMIN_TOKEN)).await,
        (200, "ok".to_owned())
    );
    assert_eq!(get(&ccm, "/readyz", None).await, (200, "ok".to_owned()));
    let (status, verbose) = get(&ccm, "/healthz?verbose", None).await;
    assert_eq!(
        (status, verbose.as_str()),
        (
            200,
            "[+]ping ok\n[+]leaderElection ok\n[+]controllers ok\nhealthz check passed\n"
        )
    );
}

#[tokio::test]
async fn a_scrape_every_second_costs_one_review_of_each_kind_per_ttl() {
    const TTL: u64 = 10;
    const SCRAPES: u64 = 30;
    let (server, _dir) = rbac_server().await;
    grant_metrics(&server, "prometheus").await;
    let ttl = [
        format!("--authentication-token-webhook-cache-ttl={TTL}s"),
        format!("--authorization-webhook-cache-authorized-ttl={TTL}s"),
    ];
    let ccm = start(&server, &[&ttl[0], &ttl[1]]).await;

    let before = reviews(&server);
    let started = Instant::now();
    for scrape in 0..SCRAPES {
        let (status, body) = get(&ccm, "/metrics", Some(PROMETHEUS_TOKEN)).await;
        assert_eq!(status, 200, "scrape {scrape}: {body}");
        tokio::time::sleep_until((started + Duration::from_secs(scrape + 1)).into()).await;
    }
    let elapsed = started.elapsed();
    let after = reviews(&server);
    let (token_reviews, access_reviews) = (after.0 - before.0, after.1 - before.1);
    println!(
        "{SCRAPES} scrapes in {elapsed:?} with {TTL}s TTLs: {token_reviews} TokenReviews, {access_reviews} SubjectAccessReviews"
    );
    // A miss at the first scrape, then one at the first scrape after each
    // expiry: at most one per window begun (plus one for a scrape that meets
    // an expiry at a window's edge), at least one per window the scrapes
    // outlast. A slow machine stretches the run, and the bound with it.
    let seconds = elapsed.as_secs().max(SCRAPES);
    let most = usize::try_from(seconds.div_ceil(TTL) + 1).unwrap();
    let least = usize::try_from(elapsed.as_secs() / (TTL + 1) + 1).unwrap();
    for (kind, count) in [
        ("TokenReviews", token_reviews),
        ("SubjectAccessReviews", access_reviews),
    ] {
        assert!(
            (least..=most).contains(&count),
            "{count} {kind} for {SCRAPES} scrapes in {elapsed:?}: expected {least}..={most}"
        );
    }
    let reviewers: std::collections::BTreeSet<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.resource == "tokenreviews" || r.resource == "subjectaccessreviews")
        .map(|r| r.user)
        .collect();
    assert_eq!(
        reviewers,
        [Some("admin".to_owned())].into(),
        "reviews go through the CCM's own client"
    );
}

/// A certificate for `localhost`/127.0.0.1: its PEM, its DER and its
/// key's PEM.
struct Certificate {
    pem: String,
    der: Vec<u8>,
    key_pem: String,
}

fn certificate() -> Certificate {
    let made =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    Certificate {
        pem: made.cert.pem(),
        der: made.cert.der().to_vec(),
        key_pem: made.signing_key.serialize_pem(),
    }
}

/// The base64 lines of a PEM block: what a leak of it would show.
fn pem_body_lines(pem: &str) -> Vec<&str> {
    pem.lines()
        .filter(|l| !l.starts_with("-----") && !l.is_empty())
        .collect()
}

#[tokio::test]
async fn serves_its_certificate_files_reloads_them_without_restart_and_logs_no_secret() {
    let (server, dir) = rbac_server().await;
    grant_metrics(&server, "prometheus").await;
    let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let first = certificate();
    std::fs::write(&cert_file, &first.pem).unwrap();
    std::fs::write(&key_file, &first.key_pem).unwrap();
    let files = [
        format!("--tls-cert-file={}", cert_file.display()),
        format!("--tls-private-key-file={}", key_file.display()),
    ];
    // Debug logging: the most the binary writes about requests and reviews.
    let ccm = start(&server, &[&files[0], &files[1], "--v=5"]).await;

    assert_eq!(served_certificate(&ccm).await, first.der);

    // Tokens of every kind pass through the CCM: granted, refused, unknown.
    assert_eq!(get(&ccm, "/metrics", Some(PROMETHEUS_TOKEN)).await.0, 200);
    assert_eq!(get(&ccm, "/metrics", Some(SCRAPER_TOKEN)).await.0, 403);
    assert_eq!(
        get(&ccm, "/metrics", Some("unknown-token-0d9f3b")).await.0,
        401
    );

    let second = certificate();
    std::fs::write(&key_file, &second.key_pem).unwrap();
    std::fs::write(&cert_file, &second.pem).unwrap();
    let rotated_at = Instant::now();
    // Files are polled every 5 s.
    eventually(
        "the rotated certificate served",
        Duration::from_secs(20),
        || async { (served_certificate(&ccm).await == second.der).then_some(()) },
    )
    .await
    .expect("the new certificate is served without a restart");
    println!(
        "the rotated certificate was served after {:?}",
        rotated_at.elapsed()
    );
    assert_eq!(get(&ccm, "/metrics", Some(PROMETHEUS_TOKEN)).await.0, 200);

    let log = ccm.log();
    assert!(!log.is_empty(), "the CCM logged");
    for token in [
        ADMIN_TOKEN,
        SCRAPER_TOKEN,
        PROMETHEUS_TOKEN,
        "unknown-token-0d9f3b",
    ] {
        assert!(!log.contains(token), "a bearer token is in the log");
    }
    for key in [&first.key_pem, &second.key_pem] {
        for line in pem_body_lines(key) {
            assert!(
                !log.contains(line),
                "a line of the private key is in the log"
            );
        }
    }
}

/// Runs the binary with `args` to its exit: it must exit 64 with one line
/// on stderr that contains `expected`.
async fn assert_usage_error(args: &[&str], expected: &str) {
    let log =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{}.log", unique("bad-flags")));
    let out = Launch::new(BINARY, log)
        .args(args.iter().copied())
        .output()
        .await
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(64),
        "{args:?} should exit 64; stderr: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains(expected),
        "{args:?}: `{stderr}` does not mention `{expected}`"
    );
}

#[tokio::test]
async fn bad_tls_and_authentication_flags_exit_64_with_one_line() {
    let port = ccm_test_support::free_port().unwrap().to_string();
    let base = [
        "--cluster-cidr=10.0.0.0/8",
        "--master=http://127.0.0.1:1",
        "--bind-address=127.0.0.1",
    ];
    let secure_port = format!("--secure-port={port}");
    let with = |flag: &'static str| -> Vec<String> {
        base.iter()
            .map(|s| (*s).to_owned())
            .chain([secure_port.clone(), flag.to_owned()])
            .collect()
    };
    let cases = [
        (
            "--tls-cipher-suites=TLS_NOPE",
            "--tls-cipher-suites: cipher suite `TLS_NOPE`",
        ),
        (
            "--tls-min-version=VersionTLS99",
            "--tls-min-version: unknown TLS version `VersionTLS99`",
        ),
        (
            "--tls-cert-file=/nonexistent/tls.crt",
            "--tls-private-key-file is required with --tls-cert-file",
        ),
    ];
    for (flag, expected) in cases {
        let args = with(flag);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_usage_error(&args, expected).await;
    }
}

#[tokio::test]
async fn an_unreadable_client_ca_file_exits_64_with_one_line() {
    let port = format!("--secure-port={}", ccm_test_support::free_port().unwrap());
    assert_usage_error(
        &[
            "--cluster-cidr=10.0.0.0/8",
            "--master=http://127.0.0.1:1",
            "--bind-address=127.0.0.1",
            &port,
            "--client-ca-file=/nonexistent/ca.crt",
        ],
        "--client-ca-file /nonexistent/ca.crt: cannot read it",
    )
    .await;
}
