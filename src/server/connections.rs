//! The server's connections: at most `--max-connections` open at once (past it, accepting
//! waits for one to close: new clients queue in the listen backlog rather than take the
//! server's descriptors, which its sessions need), and each closed once it has been idle for
//! `--connection-idle-timeout` (clients keep connections alive; one that went away without
//! closing its socket would otherwise hold a place forever).
//!
//! The idle clock restarts at every byte read or written. A request being handled is never
//! cut: its answer (at worst the 504 of its deadline) is written within `--request-timeout`,
//! which the idle timeout must exceed (checked at start).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// A listener that bounds and watches the connections it accepts.
pub struct Bounded {
    inner: TcpListener,
    places: Arc<Semaphore>,
    idle: Duration,
}

impl Bounded {
    pub fn new(inner: TcpListener, max_connections: usize, idle: Duration) -> Bounded {
        Bounded {
            inner,
            places: Arc::new(Semaphore::new(max_connections.max(1))),
            idle,
        }
    }
}

impl axum::serve::Listener for Bounded {
    type Io = Watched;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Watched, SocketAddr) {
        // The semaphore is never closed: acquiring can only wait.
        let place = match self.places.clone().acquire_owned().await {
            Ok(place) => place,
            Err(_) => unreachable!("the connection semaphore is never closed"),
        };
        let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        let _ = stream.set_nodelay(true);
        (Watched::new(stream, place, self.idle), addr)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// An accepted connection: holds its place until dropped, fails its next read once idle.
pub struct Watched {
    stream: TcpStream,
    _place: OwnedSemaphorePermit,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl Watched {
    fn new(stream: TcpStream, place: OwnedSemaphorePermit, idle: Duration) -> Watched {
        Watched {
            stream,
            _place: place,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
        }
    }

    fn active(&mut self) {
        let next = Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                self.active();
                Poll::Ready(result)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the connection was idle past --connection-idle-timeout",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, buf);
        if written.is_ready() {
            self.active();
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if written.is_ready() {
            self.active();
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
