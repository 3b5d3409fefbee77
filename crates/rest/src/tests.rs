//! The client against loopback listeners: what reaches the wire, what the
//! fence is told, and what it refuses.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use ccm_cloud_provider::fence::{Countdown, RequestFence, scope};
use reqwest::header::HeaderValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

#[derive(Debug)]
struct LostTheLease;

impl RequestFence for LostTheLease {
    fn check(&self) -> Result<(), String> {
        Err("lost the lease".into())
    }
}

fn bearer(token: &str) -> Rest {
    Rest::new("acme", Auth::Bearer(token.to_owned())).unwrap()
}

fn url(base: &str, path: &str) -> Url {
    Url::parse(base).unwrap().join(path).unwrap()
}

/// A server answering every request `200 {}` and keeping each request's
/// head, for `count` connections.
async fn answering(count: usize) -> (String, tokio::task::JoinHandle<Vec<String>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let heads = tokio::spawn(async move {
        let mut heads = Vec::new();
        for _ in 0..count {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "the request ended before its head did");
                head.extend_from_slice(&buf[..n]);
            }
            let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}";
            stream.write_all(answer.as_bytes()).await.unwrap();
            heads.push(String::from_utf8_lossy(&head).to_lowercase());
        }
        heads
    });
    (base, heads)
}

#[tokio::test]
async fn a_request_the_fence_refuses_never_leaves_the_process() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    let client = bearer("token");
    let delete = || client.send(Method::DELETE, url(&base, "v2/lb/1"), None::<&()>);
    let err = scope(Arc::new(LostTheLease), delete()).await.unwrap_err();
    assert!(matches!(err, SendError::Fenced { .. }), "{err:?}");
    assert_eq!(CloudError::from(err).kind(), "retry");
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "nothing was sent");
    let _ = delete().await;
    assert!(accepted.load(Ordering::SeqCst) >= 1, "sent outside a scope");
}

/// Refuses every request, recording how it was described.
#[derive(Debug, Default)]
struct Described(parking_lot::Mutex<Vec<(String, bool, String)>>);

impl RequestFence for Described {
    fn check(&self) -> Result<(), String> {
        Err("only described".into())
    }

    fn check_request(
        &self,
        request: &ccm_cloud_provider::fence::Request<'_>,
    ) -> Result<(), String> {
        self.0.lock().push((
            request.operation.to_owned(),
            request.mutates,
            request.detail.to_owned(),
        ));
        self.check()
    }
}

#[tokio::test]
async fn each_request_is_described_by_method_path_and_arguments_without_the_secret() {
    // Nothing listens there: every request is refused before it is sent.
    let base = "http://127.0.0.1:9/";
    let client = bearer("dop_v1_secret");
    let fence = Arc::new(Described::default());
    let long = "x".repeat(2 * MAX_DETAIL);
    scope(fence.clone(), async {
        let list = url(base, "v2/droplets?tag_name=k8s:c1&page=1");
        let _ = client.send(Method::GET, list, None::<&()>).await;
        // An array: its order is the same whether serde_json keeps a map's
        // insertion order or sorts it (workspace features differ).
        let body = serde_json::json!(["rules", 8080, "dop_v1_secret"]);
        let _ = client
            .send(Method::PUT, url(base, "v2/lb/1"), Some(&body))
            .await;
        let long = serde_json::json!({ "name": long });
        let _ = client
            .send(Method::POST, url(base, "v2/tags"), Some(&long))
            .await;
        let _ = client
            .send(Method::DELETE, url(base, "v2/lb/1"), None::<&()>)
            .await;
        let action = url(base, "v2/lb/1?action=activate");
        let _ = client
            .send(Method::POST, action, Some(&serde_json::json!({})))
            .await;
    })
    .await;
    let described = fence.0.lock().clone();
    let operations: Vec<(&str, bool)> = described
        .iter()
        .map(|(op, mutates, _)| (op.as_str(), *mutates))
        .collect();
    assert_eq!(
        operations,
        [
            ("GET /v2/droplets", false),
            ("PUT /v2/lb/1", true),
            ("POST /v2/tags", true),
            ("DELETE /v2/lb/1", true),
            ("POST /v2/lb/1", true),
        ]
    );
    assert_eq!(described[0].2, "tag_name=k8s:c1&page=1");
    assert_eq!(described[1].2, r#"["rules",8080,"<redacted>"]"#);
    let cut = &described[2].2;
    assert_eq!(cut.chars().count(), MAX_DETAIL + 1, "{cut}");
    assert!(cut.ends_with('…'), "{cut}");
    assert_eq!(described[3].2, "");
    assert_eq!(
        described[4].2, "action=activate {}",
        "the query, then the body"
    );
}

#[tokio::test]
async fn a_request_whose_lease_lapses_before_its_body_is_written_never_completes() {
    let wire = ccm_test_support::RecordingListener::start().await.unwrap();
    let base = format!("{}/", wire.url);
    let client = bearer("token");
    let body = serde_json::json!({ "droplet_ids": [1, 2] });
    for method in [Method::POST, Method::PUT] {
        // The check before the send passes; the body's, when the
        // connection writes it (a process frozen in between), refuses.
        let fence = Arc::new(Countdown::new(1));
        let call = client.send(method.clone(), url(&base, "v2/lb/1"), Some(&body));
        let err = scope(fence.clone(), call).await.unwrap_err();
        assert!(matches!(err, SendError::Fenced { .. }), "{method}: {err:?}");
        assert_eq!(fence.asked(), 3, "{method}");
    }
    // Once the client has closed its connections, nothing more arrives.
    wire.closed(2, Duration::from_secs(10)).await.unwrap();
    let wire = wire.received();
    assert!(!wire.contains("droplet_ids"), "no body on the wire: {wire}");
    assert!(!wire.contains("\r\n\r\n"), "no whole request: {wire:?}");
}

#[tokio::test]
async fn credentials_go_in_the_header_and_nowhere_else() {
    let (base, heads) = answering(3).await;
    let basic = Rest::new(
        "acme",
        Auth::Basic {
            user: "user".into(),
            secret: "secret".into(),
        },
    )
    .unwrap();
    let answer = bearer("tok")
        .send(Method::GET, url(&base, "a"), None::<&()>)
        .await;
    assert_eq!(answer.unwrap().status, StatusCode::OK);
    let answer = basic.send(Method::GET, url(&base, "b"), None::<&()>).await;
    let answer = answer.unwrap();
    assert_eq!(
        decode::<serde_json::Value>(&answer.body).unwrap(),
        serde_json::json!({})
    );
    let metadata = basic.get_unauthenticated(url(&base, "c"), Duration::from_secs(5));
    metadata.await.unwrap();
    let heads = heads.await.unwrap();
    assert!(
        heads[0].contains("authorization: bearer tok\r\n"),
        "{}",
        heads[0]
    );
    // base64("user:secret")
    assert!(
        heads[1].contains("authorization: basic dxnlcjpzzwnyzxq=\r\n"),
        "{}",
        heads[1]
    );
    assert!(!heads[2].contains("authorization"), "{}", heads[2]);
    assert!(
        heads
            .iter()
            .all(|h| h.contains("user-agent: rust-cloud-controller-manager/"))
    );
    for shown in [
        format!("{basic:?}"),
        format!("{:?}", Auth::Bearer("tok".into())),
        format!(
            "{:?}",
            Auth::Basic {
                user: "user".into(),
                secret: "secret".into()
            }
        ),
    ] {
        assert!(
            !shown.contains("secret") && !shown.contains("tok)"),
            "{shown}"
        );
    }
    assert!(matches!(
        Rest::new("acme", Auth::Bearer("a\nb".into())),
        Err(BuildError::NotAHeader)
    ));
}

#[test]
fn helpers_read_bodies_and_headers_as_documented() {
    assert_eq!(decode::<Option<u32>>(b"").unwrap(), None);
    assert!(decode::<u32>(b"{").is_err());
    assert_eq!(excerpt("  short \n"), "short");
    assert_eq!(path_and_query(&url("http://h/", "a/b?x=1")), "/a/b?x=1");
    assert_eq!(path_and_query(&url("http://h/", "a/b")), "/a/b");
    let now = UNIX_EPOCH + Duration::from_secs(784_111_777);
    for (value, wait) in [
        ("7", Some(Duration::from_secs(7))),
        ("0", Some(Duration::from_secs(1))),
        ("18446744073709551615", Some(server_delay::MAX_SERVER_DELAY)),
        (
            "Sun, 06 Nov 1994 08:50:17 GMT",
            Some(Duration::from_secs(40)),
        ),
        (
            "Fri, 31 Dec 9999 23:59:59 GMT",
            Some(server_delay::MAX_SERVER_DELAY),
        ),
        ("NaN", None),
        ("-1", None),
    ] {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static(value));
        assert_eq!(retry_after(&headers, now), wait, "{value}");
    }
    assert_eq!(retry_after(&HeaderMap::new(), now), None);
}

#[test]
fn an_unexpected_answer_names_the_request_and_keeps_a_decoding_failure_as_its_cause() {
    let status = Unexpected::Status {
        method: "PUT",
        path: "/v2/load_balancers/1".into(),
        api: "DigitalOcean API",
        status: 500,
        detail: "server_error: boom".into(),
    };
    assert_eq!(
        CloudError::from(status).to_string(),
        "PUT /v2/load_balancers/1: DigitalOcean API answered 500: server_error: boom"
    );
    let err = decode_answer::<Vec<u32>>("GET", "/v2/droplets", b"{").unwrap_err();
    assert_eq!(
        err.to_string(),
        "GET /v2/droplets: unexpected response body"
    );
    let cloud = CloudError::from(err);
    assert!(
        std::error::Error::source(&cloud).is_some(),
        "the decoding failure stays the cause: {cloud:?}"
    );
    assert_eq!(
        decode_answer::<Option<u32>>("DELETE", "/x", b"").unwrap(),
        None
    );
}
