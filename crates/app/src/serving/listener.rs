//! The HTTPS listener: binds with upstream's socket options, completes TLS
//! handshakes, serves HTTP/1.1 and HTTP/2 (unless disabled) behind the
//! [`Guard`](super::Guard), and drains connections on shutdown. It holds
//! its ground as upstream's Go server does ([`Limits`]): idle connections
//! close after 90 s, headers are capped, HTTP/2 peers are pinged, and at
//! most a few hundred connections are open at once ([`connections`]).

mod connections;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http_body_util::BodyExt;
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
/// The most hyper's HTTP/1.1 read buffer may grow to. It holds the request
/// line and headers whole, so it caps them (431 beyond); it also grows to
/// it while a fast client streams a body, so it is kept small: 256
/// connections cost at most 16 MiB. (hyper's default is about 400 KiB; Go
/// reads through 4 KiB.)
const HTTP1_BUFFER: usize = 64 * 1024;

/// What one listener allows its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Connections open at once; beyond it the longest-idle one is closed,
    /// or the new one waits in the accept queue when all are busy.
    pub(crate) max_connections: usize,
    /// A connection with no request in flight for this long is closed
    /// (Go's `IdleTimeout`, 90 s in upstream's secure serving).
    pub(crate) idle_timeout: Duration,
    /// Request headers larger than this are refused (Go's
    /// `MaxHeaderBytes`, 1 MiB): over HTTP/2 a stream reset; over HTTP/1.1
    /// 431, at [`HTTP1_BUFFER`] at most.
    pub(crate) max_header_bytes: u32,
    /// HTTP/2 connections are pinged this often, and closed when a ping is
    /// not answered within the same time: a vanished peer holding streams
    /// open is noticed.
    pub(crate) keep_alive_interval: Duration,
}

impl Default for Limits {
    /// 256 connections: far more than the scrapers and API servers that
    /// call the CCM need, and bounded memory however they are filled.
    fn default() -> Self {
        Self {
            max_connections: 256,
            idle_timeout: Duration::from_secs(90),
            max_header_bytes: 1024 * 1024,
            keep_alive_interval: Duration::from_secs(30),
        }
    }
}

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

/// The connection builder for `serving`'s protocols and limits.
fn builder(serving: &Serving) -> auto::Builder<TokioExecutor> {
    let limits = serving.limits;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(READ_HEADER_TIMEOUT)
        // At least hyper's minimum, 8 KiB.
        .max_buf_size((limits.max_header_bytes as usize).clamp(8 * 1024, HTTP1_BUFFER));
    if serving.http2 {
        let streams = match serving.http2_max_streams {
            0 => DEFAULT_HTTP2_STREAMS,
            n => n,
        };
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(streams)
            .max_header_list_size(limits.max_header_bytes)
            .keep_alive_interval(limits.keep_alive_interval)
            .keep_alive_timeout(limits.keep_alive_interval);
        builder
    } else {
        builder.http1_only()
    }
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
    let builder = Arc::new(builder(&serving));
    let connections = connections::Connections::new(serving.limits.max_connections);
    let idle_timeout = serving.limits.idle_timeout;
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
        let admitted = tokio::select! {
            () = shutdown.cancelled() => break,
            admitted = connections.admit() => admitted,
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let activity = admitted.activity.clone();
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
            let tls = tokio::select! {
                handshake = handshake => match handshake {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(err)) => {
                        tracing::debug!(error = %err, "TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                },
                () = activity.evicted() => return,
            };
            let peer = PeerCertificates(Arc::new(
                tls.get_ref()
                    .1
                    .peer_certificates()
                    .map(<[_]>::to_vec)
                    .unwrap_or_default(),
            ));
            let requests = activity.clone();
            let service =
                hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
                    request.extensions_mut().insert(peer.clone());
                    let router = router.clone();
                    let in_flight = requests.begin();
                    async move {
                        let response = router
                            .oneshot(request.map(Body::new))
                            .await
                            .unwrap_or_else(|never| match never {});
                        // In flight until the body is sent whole (or dropped).
                        Ok::<_, Infallible>(response.map(|body| {
                            Body::new(body.map_frame(move |frame| {
                                let _ = &in_flight;
                                frame
                            }))
                        }))
                    }
                });
            let connection = builder.serve_connection(TokioIo::new(tls), service);
            tokio::select! {
                served = watcher.watch(connection.into_owned()) => {
                    if let Err(err) = served {
                        tracing::debug!(error = %err, "connection ended with an error");
                    }
                }
                () = activity.idle_for(idle_timeout) => {
                    tracing::debug!("closing a connection idle for {idle_timeout:?}");
                }
                () = activity.evicted() => {}
            }
            drop(admitted);
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
