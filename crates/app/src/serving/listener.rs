//! The HTTPS listener: binds with upstream's socket options, completes TLS
//! handshakes, serves HTTP/1.1 and HTTP/2 (unless disabled) behind the
//! [`Guard`](super::Guard), and drains connections on shutdown.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpSocket};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::Serving;
use super::authn::PeerCertificates;

/// How long a client may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Upstream's `ReadHeaderTimeout`.
const READ_HEADER_TIMEOUT: Duration = Duration::from_secs(32);
/// How long open connections get to finish after shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Upstream's HTTP/2 stream limit when the flag is 0.
const DEFAULT_HTTP2_STREAMS: u32 = 100;

/// Binds `addr`. SO_REUSEADDR is set as Go and tokio set it on every Unix
/// listener (so `--permit-address-sharing` changes nothing here);
/// `permit_port_sharing` adds SO_REUSEPORT.
///
/// # Errors
/// The address is taken or not this host's.
pub(crate) fn bind(addr: SocketAddr, permit_port_sharing: bool) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if permit_port_sharing {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Serves `router` over TLS on `listener`, every request through the guard
/// when there is one, until `shutdown`.
///
/// # Errors
/// None yet: accept errors are logged and retried; kept for callers.
pub(crate) async fn serve(
    listener: TcpListener,
    serving: Serving,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let router = match serving.guard.clone() {
        Some(guard) => router.layer(axum::middleware::from_fn_with_state(guard, super::guard)),
        None => router,
    };
    let acceptor = TlsAcceptor::from(serving.tls.clone());
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(READ_HEADER_TIMEOUT);
    if serving.http2 {
        let streams = match serving.http2_max_streams {
            0 => DEFAULT_HTTP2_STREAMS,
            n => n,
        };
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(streams);
    } else {
        builder = builder.http1_only();
    }
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    loop {
        let tcp = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(err) => {
                    // Out of file descriptors and the like: wait, then retry.
                    tracing::warn!(error = %err, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(err)) => {
                    tracing::debug!(error = %err, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let peer = PeerCertificates(Arc::new(
                tls.get_ref()
                    .1
                    .peer_certificates()
                    .map(<[_]>::to_vec)
                    .unwrap_or_default(),
            ));
            let service =
                hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
                    request.extensions_mut().insert(peer.clone());
                    let router = router.clone();
                    async move {
                        Ok::<_, Infallible>(
                            router
                                .oneshot(request.map(Body::new))
                                .await
                                .unwrap_or_else(|never| match never {}),
                        )
                    }
                });
            let connection = builder.serve_connection(TokioIo::new(tls), service);
            if let Err(err) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(error = %err, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("connections still open after {DRAIN_TIMEOUT:?}; closing them");
    }
    Ok(())
}
