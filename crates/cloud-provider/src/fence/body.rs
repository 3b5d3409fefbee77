//! A request body that asks the fence at the last moment a process can:
//! when the HTTP connection reads it to write the request to the socket.
//!
//! [`check`](super::check) before a send leaves a gap: the request still
//! waits for a connection and for the connection's task to be scheduled,
//! and a process frozen in that gap (SIGSTOP, a stalled VM) writes the
//! request when it resumes, long after its lease lapsed. hyper reads a
//! body in the same turn in which it writes the buffered request, so a
//! body that refuses on its first read closes that gap to the
//! instructions between the read and the write; a refused request is never
//! completed on the wire, so the cloud never acts on it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::{FENCE, RequestFence};

/// The reason a [`FencedBody`] refused to be written.
#[derive(Debug, Clone, thiserror::Error)]
#[error("refusing to send a cloud request: {0}")]
pub struct Refused(pub String);

/// One chunk of bytes, written only if the fence of the scope it was made
/// in (see [`scope`](super::scope)) still allows it when the connection
/// reads it. Made outside a scope, it is a plain body.
#[derive(Debug)]
pub struct FencedBody {
    data: Option<Bytes>,
    fence: Option<Arc<dyn RequestFence>>,
}

impl FencedBody {
    /// `data`, fenced by the current scope's fence.
    pub fn new(data: impl Into<Bytes>) -> Self {
        Self {
            data: Some(data.into()),
            fence: FENCE.try_with(Arc::clone).ok(),
        }
    }
}

impl Body for FencedBody {
    type Data = Bytes;
    type Error = Refused;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Refused>>> {
        if let Some(fence) = self.fence.take()
            && let Err(reason) = fence.check()
        {
            self.data = None;
            return Poll::Ready(Some(Err(Refused(reason))));
        }
        Poll::Ready(self.data.take().map(|data| Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.fence.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use http_body::Body as _;

    use super::*;
    use crate::fence::{Countdown, scope};

    fn read(body: &mut FencedBody) -> Poll<Option<Result<Frame<Bytes>, Refused>>> {
        let waker = std::task::Waker::noop();
        Pin::new(body).poll_frame(&mut Context::from_waker(waker))
    }

    #[tokio::test]
    async fn the_fence_is_asked_when_the_body_is_read_not_when_it_is_made() {
        let fence = Arc::new(Countdown::new(0));
        let shared: Arc<dyn RequestFence> = fence.clone();
        let mut body = scope(shared, async { FencedBody::new("Action=CreateRoute") }).await;
        assert_eq!(fence.asked(), 0, "not asked when made");
        assert_eq!(body.size_hint().exact(), Some(18));
        let Poll::Ready(Some(Err(refused))) = read(&mut body) else {
            panic!("a lapsed lease must refuse the write");
        };
        assert!(
            refused.to_string().contains("the lease lapsed"),
            "{refused}"
        );
        assert!(body.is_end_stream(), "nothing is left to write");
    }

    #[tokio::test]
    async fn an_allowed_body_is_written_once_whole() {
        let fence: Arc<dyn RequestFence> = Arc::new(Countdown::new(1));
        let mut body = scope(fence, async { FencedBody::new("payload") }).await;
        let Poll::Ready(Some(Ok(frame))) = read(&mut body) else {
            panic!("an allowed body is written");
        };
        assert_eq!(frame.into_data().ok().as_deref(), Some(&b"payload"[..]));
        assert!(matches!(read(&mut body), Poll::Ready(None)));
        assert!(body.is_end_stream());
    }

    #[test]
    fn made_outside_a_scope_it_is_a_plain_body() {
        let mut body = FencedBody::new("x");
        assert!(matches!(read(&mut body), Poll::Ready(Some(Ok(_)))));
    }
}
