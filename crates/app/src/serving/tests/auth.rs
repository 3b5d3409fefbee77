//! Who may read what: anonymous, bearer tokens by TokenReview, client
//! certificates, the front proxy's headers; answers cached per TTL.

use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::*;

const SKIP_LOOKUP: &str = "--authentication-skip-lookup";

#[tokio::test]
async fn healthz_is_open_and_metrics_needs_an_authorized_token() {
    let stub = Stub::start().await;
    let server = start(&[SKIP_LOOKUP], &stub).await;
    let client = https().build().unwrap();

    assert_eq!(
        get_with(&client, &server.url("/healthz"), None).await,
        (200, "ok".to_owned())
    );

    let (status, body) = get_with(&client, &server.url("/metrics"), None).await;
    assert_eq!(status, 401);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"Unauthorized","reason":"Unauthorized","code":401})
    );

    let (status, body) = get_with(&client, &server.url("/metrics"), Some("bob-token")).await;
    assert_eq!(status, 403, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["message"],
        r#"forbidden: User "bob" cannot get path "/metrics""#
    );
    assert_eq!(
        (&body["reason"], &body["code"]),
        (&json!("Forbidden"), &json!(403))
    );

    assert_eq!(
        get_with(&client, &server.url("/metrics"), Some("alice-token")).await,
        (200, "ccm_up 1\n".to_owned())
    );
    assert_eq!(
        get_with(&client, &server.url("/metrics"), Some("stolen-token"))
            .await
            .0,
        401,
        "a token the API server does not recognize"
    );
    assert_eq!(
        get_with(&client, &server.url("/healthz"), Some("stolen-token"))
            .await
            .0,
        401,
        "bad credentials fail even where anonymous may go, as upstream"
    );
}

#[tokio::test]
async fn a_scrape_every_100ms_costs_one_review_of_each_kind_per_ttl() {
    let stub = Stub::start().await;
    let server = start(
        &[
            SKIP_LOOKUP,
            "--authentication-token-webhook-cache-ttl=1s",
            "--authorization-webhook-cache-authorized-ttl=1s",
        ],
        &stub,
    )
    .await;
    let client = https().build().unwrap();
    let began = Instant::now();
    for _ in 0..25 {
        let (status, _) = get_with(&client, &server.url("/metrics"), Some("alice-token")).await;
        assert_eq!(status, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ttls = began.elapsed().as_secs_f64().ceil() as usize;
    let (tokens, accesses) = (stub.token_reviews(), stub.access_reviews());
    assert!(
        (2..=ttls).contains(&tokens),
        "{tokens} TokenReviews in {ttls} TTLs"
    );
    assert!(
        (2..=ttls).contains(&accesses),
        "{accesses} SubjectAccessReviews in {ttls} TTLs"
    );
}

#[tokio::test]
async fn concurrent_scrapes_with_one_token_make_one_review_of_each_kind() {
    let stub = Stub::start().await;
    let server = start(&[SKIP_LOOKUP], &stub).await;
    let client = https().build().unwrap();
    let url = server.url("/metrics");
    let scrapes = (0..10).map(|_| get_with(&client, &url, Some("alice-token")));
    for (status, _) in futures::future::join_all(scrapes).await {
        assert_eq!(status, 200);
    }
    assert_eq!((stub.token_reviews(), stub.access_reviews()), (1, 1));
}

#[tokio::test]
async fn denials_are_cached_for_the_unauthorized_ttl_but_anonymous_ones_are_not() {
    let stub = Stub::start().await;
    let server = start(
        &[
            SKIP_LOOKUP,
            "--authorization-webhook-cache-unauthorized-ttl=1h",
        ],
        &stub,
    )
    .await;
    let client = https().build().unwrap();
    for _ in 0..5 {
        assert_eq!(
            get_with(&client, &server.url("/metrics"), Some("bob-token"))
                .await
                .0,
            403
        );
        assert_eq!(
            get_with(&client, &server.url("/metrics"), None).await.0,
            401
        );
    }
    assert_eq!(
        stub.access_reviews(),
        6,
        "one for bob, one per anonymous request: strangers fill no cache"
    );
}

#[tokio::test]
async fn an_unknown_path_answers_404_before_any_review() {
    let stub = Stub::start().await;
    let server = start(&[SKIP_LOOKUP], &stub).await;
    let client = https().build().unwrap();
    for token in [None, Some("stolen-token"), Some("alice-token")] {
        for path in ["/nope", "/metrics/", "/healthz/made-up", "/"] {
            let (status, body) = get_with(&client, &server.url(path), token).await;
            assert_eq!((status, body.as_str()), (404, ""), "{path} with {token:?}");
        }
    }
    assert_eq!(
        (stub.token_reviews(), stub.access_reviews()),
        (0, 0),
        "no TokenReview, no SubjectAccessReview for a path nothing serves"
    );
    assert_eq!(
        get_with(&client, &server.url("/metrics"), None).await.0,
        401
    );
    assert_eq!(stub.access_reviews(), 1, "a served path is still reviewed");
}

#[tokio::test]
async fn always_allowed_paths_and_masters_skip_the_review() {
    let stub = Stub::start().await;
    let server = start(
        &[SKIP_LOOKUP, "--authorization-always-allow-paths=/met*"],
        &stub,
    )
    .await;
    let client = https().build().unwrap();
    assert_eq!(
        get_with(&client, &server.url("/metrics"), None).await.0,
        200
    );
    assert_eq!(
        get_with(&client, &server.url("/healthz"), None).await.0,
        401,
        "no longer always allowed, so anonymous is refused"
    );
    assert_eq!(stub.access_reviews(), 1, "only for /healthz");
}

/// A CA and client certificates it signs.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A client certificate and key, PEM, for reqwest's `Identity`.
    fn client(&self, common_name: &str, organizations: &[&str]) -> Vec<u8> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        for o in organizations {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        format!("{}{}", cert.pem(), key.serialize_pem()).into_bytes()
    }

    fn write(&self, dir: &tempfile::TempDir, name: &str) -> String {
        let path = dir.path().join(name);
        std::fs::write(&path, &self.pem).unwrap();
        path.display().to_string()
    }
}

fn with_identity(pem: &[u8]) -> reqwest::Client {
    https()
        .identity(reqwest::Identity::from_pem(pem).unwrap())
        .build()
        .unwrap()
}

#[tokio::test]
async fn client_certificates_from_the_client_ca_authenticate() {
    let stub = Stub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("client-ca");
    let ca_file = format!("--client-ca-file={}", ca.write(&dir, "ca.crt"));
    let server = start(&[SKIP_LOOKUP, &ca_file], &stub).await;

    let alice = with_identity(&ca.client("alice", &[]));
    assert_eq!(get_with(&alice, &server.url("/metrics"), None).await.0, 200);
    let admin = with_identity(&ca.client("admin", &["system:masters"]));
    assert_eq!(get_with(&admin, &server.url("/metrics"), None).await.0, 200);
    assert_eq!(stub.access_reviews(), 1, "system:masters needs no review");

    let stranger = with_identity(&Ca::new("other-ca").client("alice", &[]));
    assert_eq!(
        get_with(&stranger, &server.url("/metrics"), None).await.0,
        401
    );
    assert_eq!(
        get_with(&stranger, &server.url("/metrics"), Some("alice-token"))
            .await
            .0,
        200,
        "a failed certificate does not stop a good token, as upstream's union"
    );
}

#[tokio::test]
async fn the_front_proxy_names_the_user_in_headers() {
    let stub = Stub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let front = Ca::new("front-proxy-ca");
    let ca_file = format!(
        "--requestheader-client-ca-file={}",
        front.write(&dir, "front.crt")
    );
    let server = start(
        &[
            SKIP_LOOKUP,
            &ca_file,
            "--requestheader-allowed-names=front-proxy",
        ],
        &stub,
    )
    .await;
    let proxy = with_identity(&front.client("front-proxy", &[]));
    let as_alice = proxy
        .get(server.url("/metrics"))
        .header("X-Remote-User", "alice")
        .header("X-Remote-Group", "readers")
        .send()
        .await
        .unwrap();
    assert_eq!(as_alice.status(), 200);
    let no_user = proxy.get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(
        no_user.status(),
        401,
        "a proxy certificate without a user is no one"
    );

    let imposter = with_identity(&front.client("someone-else", &[]));
    let response = imposter
        .get(server.url("/metrics"))
        .header("X-Remote-User", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        401,
        "CN not in --requestheader-allowed-names"
    );
}

#[tokio::test]
async fn the_client_ca_is_looked_up_in_the_cluster_unless_skipped() {
    let stub = Stub::start().await;
    let ca = Ca::new("cluster-client-ca");
    stub.answer_config_map(ConfigMapAnswer::Data(BTreeMap::from([(
        "client-ca-file".to_owned(),
        ca.pem.clone(),
    )])));
    let server = start(&[], &stub).await;
    let alice = with_identity(&ca.client("alice", &[]));
    assert_eq!(get_with(&alice, &server.url("/metrics"), None).await.0, 200);

    stub.answer_config_map(ConfigMapAnswer::Missing);
    let server = start(&[], &stub).await;
    assert_eq!(get_with(&alice, &server.url("/metrics"), None).await.0, 401);
    stub.answer_config_map(ConfigMapAnswer::Data(BTreeMap::from([(
        "client-ca-file".to_owned(),
        ca.pem.clone(),
    )])));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while get_with(&alice, &server.url("/metrics"), None).await.0 != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a CA published after start-up was not used within 10s"
        );
        tokio::time::sleep(RELOAD_EVERY).await;
    }

    stub.answer_config_map(ConfigMapAnswer::Forbidden);
    let err = try_start(&[], &stub).await.unwrap_err();
    assert!(!err.is_usage(), "a cluster problem, not bad flags: {err}");
    assert!(
        err.to_string()
            .contains("extension-apiserver-authentication"),
        "{err}"
    );
    start(&["--authentication-tolerate-lookup-failure"], &stub).await;
    start(&[SKIP_LOOKUP], &stub).await;
}

#[tokio::test]
async fn a_failed_review_never_shows_the_token() {
    let dead = client_for("http://127.0.0.1:1");
    let config = config(&[SKIP_LOOKUP]);
    let mut reloader = super::super::reload::Reloader::default();
    let authenticator =
        super::super::authn::Authenticator::build(&config.authentication, dead, &mut reloader)
            .await
            .unwrap();
    let mut request = axum::extract::Request::builder()
        .uri("/metrics")
        .header("Authorization", "Bearer s3cr3t-t0ken-value")
        .body(axum::body::Body::empty())
        .unwrap();
    let err = authenticator.authenticate(&mut request).await.unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(text.contains("TokenReview failed"), "{text}");
    assert!(!text.contains("s3cr3t"), "{text}");
}
