//! The server's connections: at most `--max-connections` open at once (past it, accepting
//! waits for one to close: new clients queue in the listen backlog rather than take the
//! server's descriptors, which its sessions need), at most `--max-connections-per-peer` of
//! them from one address (past it, the new connection is answered 503 `too_many_connections`
//! at once and closed: one client cannot take every place), each request head complete within
//! `--header-timeout` of its first byte (a connection's first head within that of its accept),
//! and each connection closed once it has been idle for `--connection-idle-timeout` (clients
//! keep connections alive; one that went away without closing its socket would otherwise hold
//! a place forever).
//!
//! A connection is in one of three phases: reading a request head (from its accept, or from
//! the first byte after its previous answer: the head deadline runs), handling a request (the
//! server's middleware marks it, see [`Connection::handling`]: no head deadline; the body and
//! the answer have their own), or idle between requests (kept alive: only the idle clock). The
//! idle clock restarts at every byte read or written, so a client that drips a byte at a time
//! keeps it running, but not the head deadline, which no byte resets. A request being handled
//! is never cut: its answer (at worst the 504 of its deadline) is written within
//! `--request-timeout`, which the idle timeout must exceed (checked at start).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// How many connections, from whom, and how long each phase may last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub per_peer: usize,
    pub idle: Duration,
    pub header: Duration,
}

impl ConnectionLimits {
    /// The default of `--max-connections-per-peer` for `max_connections`: a quarter of them,
    /// but at least 16 (all of them when there are fewer).
    pub fn default_per_peer(max_connections: usize) -> usize {
        (max_connections / 4).max(max_connections.min(16)).max(1)
    }
}

/// Refused connections answered and drained at once, at most (past it, closed unanswered):
/// answering must not cost more than refusing.
const MAX_REFUSALS_IN_FLIGHT: usize = 64;
/// How long and how much of a refused connection's request is read (and dropped) before it is
/// closed, so that the 503 is not lost to a reset.
const REFUSAL_DRAIN: Duration = Duration::from_secs(1);
const REFUSAL_DRAIN_BYTES: usize = 64 * 1024;

/// A listener that bounds and watches the connections it accepts.
pub struct Bounded {
    inner: TcpListener,
    places: Arc<Semaphore>,
    peers: Arc<Mutex<HashMap<IpAddr, usize>>>,
    refusals: Arc<Semaphore>,
    limits: ConnectionLimits,
}

impl Bounded {
    pub fn new(inner: TcpListener, limits: ConnectionLimits) -> Bounded {
        Bounded {
            inner,
            places: Arc::new(Semaphore::new(limits.max_connections.max(1))),
            peers: Arc::new(Mutex::new(HashMap::new())),
            refusals: Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT)),
            limits,
        }
    }
}

impl axum::serve::Listener for Bounded {
    type Io = Watched;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Watched, SocketAddr) {
        loop {
            // The semaphore is never closed: acquiring can only wait.
            let place = match self.places.clone().acquire_owned().await {
                Ok(place) => place,
                Err(_) => unreachable!("the connection semaphore is never closed"),
            };
            let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
            let peer = addr.ip().to_canonical();
            let Some(slot) = PeerSlot::take(&self.peers, peer, self.limits.per_peer) else {
                drop(place);
                tracing::warn!(%peer, per_peer = self.limits.per_peer, "refusing a connection: the address holds its maximum");
                refuse(stream, &self.refusals, self.limits.per_peer);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let connection = Connection {
                peer: addr,
                phase: Arc::new(AtomicU8::new(HEAD)),
            };
            return (
                Watched::new(stream, place, slot, connection, self.limits),
                addr,
            );
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// Answer a connection past its address's bound with 503 `too_many_connections` (the error
/// shape of the API), then close it once its request is read or a second has passed.
fn refuse(stream: TcpStream, refusals: &Arc<Semaphore>, per_peer: usize) {
    let Ok(permit) = refusals.clone().try_acquire_owned() else {
        return;
    };
    let body = serde_json::json!({"error": {
        "category": "too_many_connections",
        "message": format!(
            "this address holds the server's maximum of {per_peer} connections per client: close one or retry later"
        ),
    }})
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    // A fresh socket's send buffer takes a few hundred bytes at once.
    let _ = stream.try_write(answer.as_bytes());
    tokio::spawn(async move {
        let _permit = permit;
        let Ok(stream) = stream.into_std() else {
            return;
        };
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let Ok(stream) = TcpStream::from_std(stream) else {
            return;
        };
        let drained = async {
            let mut buf = [0u8; 4096];
            let mut left = REFUSAL_DRAIN_BYTES;
            while left > 0 {
                if stream.readable().await.is_err() {
                    return;
                }
                match stream.try_read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => left = left.saturating_sub(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => return,
                }
            }
        };
        let _ = tokio::time::timeout(REFUSAL_DRAIN, drained).await;
    });
}

/// One of an address's places; given back when the connection is dropped.
struct PeerSlot {
    peers: Arc<Mutex<HashMap<IpAddr, usize>>>,
    peer: IpAddr,
}

impl PeerSlot {
    fn take(
        peers: &Arc<Mutex<HashMap<IpAddr, usize>>>,
        peer: IpAddr,
        max: usize,
    ) -> Option<PeerSlot> {
        let mut counts = peers.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(peer).or_insert(0);
        if *count >= max.max(1) {
            return None;
        }
        *count += 1;
        OPEN.fetch_add(1, Ordering::SeqCst);
        Some(PeerSlot {
            peers: peers.clone(),
            peer,
        })
    }
}

/// Connections accepted and not yet closed, in this process.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// How many connections are open now: their descriptors are the reserve's, not sessions' (see
/// `capacity::Headroom::check`).
pub fn open_connections() -> u64 {
    OPEN.load(Ordering::SeqCst) as u64
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        OPEN.fetch_sub(1, Ordering::SeqCst);
        let mut counts = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = counts.get_mut(&self.peer) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.peer);
            }
        }
    }
}

const HEAD: u8 = 0;
const HANDLING: u8 = 1;
const IDLE: u8 = 2;

/// What a request knows of its connection (axum's `ConnectInfo`): the peer, and the phase the
/// middleware moves to "handling" for as long as the request runs.
#[derive(Debug, Clone)]
pub struct Connection {
    pub peer: SocketAddr,
    phase: Arc<AtomicU8>,
}

impl Connection {
    /// Mark the connection as handling a request until the guard is dropped (then idle: the
    /// next byte starts the next head's deadline).
    pub fn handling(&self) -> Handling {
        self.phase.store(HANDLING, Ordering::SeqCst);
        Handling {
            phase: self.phase.clone(),
        }
    }
}

impl Connected<IncomingStream<'_, Bounded>> for Connection {
    fn connect_info(stream: IncomingStream<'_, Bounded>) -> Connection {
        stream.io().connection.clone()
    }
}

/// A request in progress on its connection (see [`Connection::handling`]).
pub struct Handling {
    phase: Arc<AtomicU8>,
}

impl Drop for Handling {
    fn drop(&mut self) {
        self.phase.store(IDLE, Ordering::SeqCst);
    }
}

/// An accepted connection: holds its places until dropped, fails its next read once idle or
/// once a request head took too long.
pub struct Watched {
    stream: TcpStream,
    // Dropped in this order: the address's count goes down before the server's place is freed,
    // so that the accept the freed place wakes never sees this connection still counted against
    // its address (and refuses a client of that address that is in fact within its bound).
    _peer_slot: PeerSlot,
    _place: OwnedSemaphorePermit,
    connection: Connection,
    limits: ConnectionLimits,
    idle_deadline: Pin<Box<Sleep>>,
    head_deadline: Pin<Box<Sleep>>,
}

impl Watched {
    fn new(
        stream: TcpStream,
        place: OwnedSemaphorePermit,
        peer_slot: PeerSlot,
        connection: Connection,
        limits: ConnectionLimits,
    ) -> Watched {
        Watched {
            stream,
            _place: place,
            _peer_slot: peer_slot,
            connection,
            limits,
            idle_deadline: Box::pin(tokio::time::sleep(limits.idle)),
            head_deadline: Box::pin(tokio::time::sleep(limits.header)),
        }
    }

    fn active(&mut self) {
        let next = Instant::now() + self.limits.idle;
        self.idle_deadline.as_mut().reset(next);
    }

    fn phase(&self) -> u8 {
        self.connection.phase.load(Ordering::SeqCst)
    }

    /// Bytes arrived: if the connection was idle between requests, a new head starts now.
    fn head_started(&mut self) {
        if self
            .connection
            .phase
            .compare_exchange(IDLE, HEAD, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            let deadline = Instant::now() + self.limits.header;
            self.head_deadline.as_mut().reset(deadline);
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                self.active();
                if buf.filled().len() > before {
                    self.head_started();
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                if self.phase() == HEAD && self.head_deadline.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the request head was not complete within --header-timeout",
                    )));
                }
                match self.idle_deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the connection was idle past --connection-idle-timeout",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_gets_at_most_its_places_and_gets_them_back() {
        let peers = Arc::new(Mutex::new(HashMap::new()));
        let a = IpAddr::from([127, 0, 0, 1]);
        let b = IpAddr::from([127, 0, 0, 2]);
        let first = PeerSlot::take(&peers, a, 2);
        let second = PeerSlot::take(&peers, a, 2);
        assert!(first.is_some() && second.is_some());
        assert!(PeerSlot::take(&peers, a, 2).is_none());
        assert!(PeerSlot::take(&peers, b, 2).is_some());
        drop(first);
        assert!(PeerSlot::take(&peers, a, 2).is_some());
    }

    #[test]
    fn the_default_per_peer_bound_is_a_quarter_but_never_below_sixteen() {
        assert_eq!(ConnectionLimits::default_per_peer(4096), 1024);
        assert_eq!(ConnectionLimits::default_per_peer(40), 16);
        assert_eq!(ConnectionLimits::default_per_peer(2), 2);
        assert_eq!(ConnectionLimits::default_per_peer(0), 1);
    }
}
