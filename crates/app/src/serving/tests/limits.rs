//! The listener holds its ground: idle and slow connections cannot lock
//! out a scrape, idle connections close, headers are capped, HTTP/2 peers
//! are pinged.

use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::*;
use crate::serving::Limits;

const SKIP_LOOKUP: &str = "--authentication-skip-lookup";

/// The server of `tests.rs` with `limits` instead of the defaults.
async fn start_limited(stub: &Stub, limits: Limits) -> Running {
    let config = config(&[SKIP_LOOKUP]);
    let shutdown = CancellationToken::new();
    let mut serving = Serving::build_with(&config, stub.clients(), &shutdown, RELOAD_EVERY)
        .await
        .unwrap();
    serving.limits = limits;
    let listener = bind(config.addr, false).unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(|| async { "ccm_up 1\n" }));
    tokio::spawn(serve(listener, serving, router, shutdown.clone()));
    Running { addr, shutdown }
}

/// A raw TLS connection to `addr` offering `alpn`.
async fn tls(addr: SocketAddr, alpn: &[u8]) -> TlsStream<TcpStream> {
    let config = ccm_loopback_tls::client_config(&[alpn]).unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    tokio_rustls::TlsConnector::from(config)
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await
        .unwrap()
}

/// Whether the server closed `stream` (EOF or reset) within `wait`.
async fn closed<S: AsyncReadExt + Unpin>(stream: &mut S, wait: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn idle_and_slow_connections_do_not_lock_out_an_authorized_scrape() {
    let stub = Stub::start().await;
    let limits = Limits {
        max_connections: 32,
        ..Limits::default()
    };
    let server = start_limited(&stub, limits).await;
    // 40 clients that connect and say nothing...
    let mut idle = Vec::new();
    for _ in 0..40 {
        idle.push(TcpStream::connect(server.addr).await.unwrap());
    }
    // ...and 8 that finish TLS, then send their headers a byte at a time.
    let mut slow = Vec::new();
    for _ in 0..8 {
        let mut stream = tls(server.addr, b"http/1.1").await;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nhost: localhost\r\n")
            .await
            .unwrap();
        slow.push(tokio::spawn(async move {
            for _ in 0..100 {
                if stream.write_all(b"x").await.is_err() || stream.flush().await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
    let client = https().timeout(Duration::from_secs(10)).build().unwrap();
    assert_eq!(
        get_with(&client, &server.url("/metrics"), Some("alice-token")).await,
        (200, "ccm_up 1\n".to_owned()),
        "the scrape is answered with 49 connections against a cap of 32"
    );
    // Room was made by closing the longest-idle connections: the first of
    // the silent ones.
    let mut first = idle.remove(0);
    assert!(
        closed(&mut first, Duration::from_secs(5)).await,
        "the longest-idle connection was closed"
    );
    let mut last = idle.pop().unwrap();
    assert!(
        !closed(&mut last, Duration::from_millis(200)).await,
        "the newest idle connection is still open"
    );
    for task in slow {
        task.abort();
    }
}

#[tokio::test]
async fn a_connection_idle_for_the_timeout_is_closed() {
    let stub = Stub::start().await;
    let idle_timeout = Duration::from_millis(500);
    let limits = Limits {
        idle_timeout,
        ..Limits::default()
    };
    let server = start_limited(&stub, limits).await;
    let mut stream = tls(server.addr, b"http/1.1").await;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 256];
    let read = stream.read(&mut answer).await.unwrap();
    assert!(answer[..read].starts_with(b"HTTP/1.1 200"));
    let answered = Instant::now();
    assert!(
        closed(&mut stream, Duration::from_secs(10)).await,
        "closed once idle"
    );
    assert!(
        answered.elapsed() >= idle_timeout,
        "not before the idle timeout: {:?}",
        answered.elapsed()
    );
}

#[tokio::test]
async fn headers_over_the_limit_are_refused() {
    let stub = Stub::start().await;
    let limits = Limits {
        max_header_bytes: 16 * 1024,
        ..Limits::default()
    };
    let server = start_limited(&stub, limits).await;
    let client = https().http1_only().build().unwrap();
    let small = client
        .get(server.url("/healthz"))
        .header("x-padding", "a".repeat(4 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(small.status(), 200);
    let large = client
        .get(server.url("/healthz"))
        .header("x-padding", "a".repeat(32 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(large.status(), 431);
    let defaults = start_limited(&stub, Limits::default()).await;
    let over_http1 = client
        .get(defaults.url("/healthz"))
        .header("x-padding", "a".repeat(100 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(
        over_http1.status(),
        431,
        "by default, HTTP/1.1 headers stop at the 64 KiB read buffer"
    );
    let h2 = https().http2_prior_knowledge().build().unwrap();
    let refused = h2
        .get(server.url("/healthz"))
        .header("x-padding", "a".repeat(32 * 1024))
        .send()
        .await;
    assert!(
        refused.as_ref().map_or(true, |r| r.status() == 431),
        "HTTP/2: refused, got {refused:?}"
    );
}

#[tokio::test]
async fn an_http2_peer_is_pinged() {
    let stub = Stub::start().await;
    let limits = Limits {
        keep_alive_interval: Duration::from_millis(200),
        ..Limits::default()
    };
    let server = start_limited(&stub, limits).await;
    let mut stream = tls(server.addr, b"h2").await;
    // The client preface and an empty SETTINGS frame.
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let pinged = tokio::time::timeout(Duration::from_secs(5), async {
        for _ in 0..100 {
            let mut head = [0u8; 9];
            stream.read_exact(&mut head).await.unwrap();
            let length =
                usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let mut payload = vec![0u8; length];
            stream.read_exact(&mut payload).await.unwrap();
            // A PING (type 6) that is not an ACK (flag 1).
            if head[3] == 6 && head[4] & 1 == 0 {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(pinged, Ok(true), "a PING frame within 5 s");
}
