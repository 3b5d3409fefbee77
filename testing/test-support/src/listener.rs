//! A loopback TCP listener that records every byte clients send and never
//! answers: what a test reads to know whether a request reached the wire.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// A running recorder; it stops with the test's runtime.
#[derive(Debug)]
pub struct RecordingListener {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    received: Arc<Mutex<Vec<u8>>>,
    closed: Arc<AtomicUsize>,
}

impl RecordingListener {
    /// Listens on a free loopback port.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(AtomicUsize::new(0));
        let (sink, done) = (received.clone(), closed.clone());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (sink, done) = (sink.clone(), done.clone());
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = stream.read(&mut buf).await {
                        sink.lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .extend_from_slice(&buf[..n]);
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Ok(Self {
            url,
            received,
            closed,
        })
    }

    /// Everything received so far, as text.
    pub fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap_or_else(PoisonError::into_inner))
            .into_owned()
    }

    /// Waits until clients have closed `connections` connections, so all
    /// they ever sent on them is in [`Self::received`].
    ///
    /// # Errors
    /// When fewer are closed within `timeout`.
    pub async fn closed(&self, connections: usize, timeout: Duration) -> anyhow::Result<()> {
        crate::eventually("the client to close its connections", timeout, || async {
            (self.closed.load(Ordering::SeqCst) >= connections).then_some(())
        })
        .await
    }

    /// Waits until the received bytes contain `text`.
    ///
    /// # Errors
    /// When they do not within `timeout`.
    pub async fn received_containing(&self, text: &str, timeout: Duration) -> anyhow::Result<()> {
        crate::eventually(&format!("{text:?} on the wire"), timeout, || async {
            self.received().contains(text).then_some(())
        })
        .await
    }
}
