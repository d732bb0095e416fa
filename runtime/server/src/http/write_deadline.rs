//! A connection whose writes must make progress: when the client has read nothing for the
//! deadline while an answer waits to go out, writing fails and the connection closes, so a
//! client that asks and never reads cannot hold a connection (and the answer in memory).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

pub(super) struct WriteDeadline<S> {
    inner: S,
    deadline: Duration,
    /// Running while a write waits for the client.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    pub(super) fn new(inner: S, deadline: Duration) -> Self {
        Self {
            inner,
            deadline,
            stalled: None,
        }
    }

    /// What a write that is `Pending` answers: still pending, or an error once it has been
    /// for the deadline.
    fn waited<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let deadline = self.deadline;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(deadline)));
        ready!(stalled.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the client read nothing for {} s", self.deadline.as_secs()),
        )))
    }

    /// A write's outcome: progress stops the clock.
    fn progress<T>(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match written {
            Poll::Ready(outcome) => {
                self.stalled = None;
                Poll::Ready(outcome)
            }
            Poll::Pending => self.waited(cx),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progress(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progress(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        self.progress(cx, flushed)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let closed = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.progress(cx, closed)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_stops_reading_fails_the_write_and_one_that_reads_does_not() {
        // The far end stays open and unread.
        let (near, _far) = tokio::io::duplex(1024);
        let mut near = WriteDeadline::new(near, Duration::from_secs(10));
        // Nobody reads: the buffer fills, then the deadline passes.
        let failed = near.write_all(&[0; 64 << 10]).await.unwrap_err();
        assert_eq!(failed.kind(), io::ErrorKind::TimedOut);

        let (near, mut reader) = tokio::io::duplex(1024);
        let mut near = WriteDeadline::new(near, Duration::from_secs(10));
        let reading = tokio::spawn(async move {
            let mut all = Vec::new();
            // Slow, but never 10 s without progress.
            let mut chunk = [0; 512];
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                match reader.read(&mut chunk).await.unwrap() {
                    0 => return all.len(),
                    n => all.extend_from_slice(&chunk[..n]),
                }
            }
        });
        near.write_all(&[0; 8 << 10]).await.unwrap();
        drop(near);
        assert_eq!(reading.await.unwrap(), 8 << 10);
    }
}
