//! Which connections hold the gateway's connection slots, and which one gives its slot up when a new
//! client arrives at the cap.
//!
//! A connection with no request in flight (it has not finished its headers yet, or it idles between
//! keep-alive requests) costs the gateway nothing but its slot, and its client has not been told anything
//! it could lose: closing it is what its header timeout would do anyway, only sooner. So at the cap (or
//! out of file descriptors) the gateway closes the connection idle the longest and serves the newcomer;
//! idle or half-sent connections therefore cannot starve a client that sends its request at once.
//! Connections with a request in flight (a live stream, an MCP call, a body being read) are never shed;
//! when every slot holds one, a newcomer waits for a slot as before.
//!
//! It also holds each connection to its deadlines: its request headers within the header timeout (a new
//! connection, and one idle between keep-alive requests), its request body within the body timeout from
//! its headers. One watchdog task ([`Connections::watch_deadlines`]) closes the connections past theirs.
//! hyper's header read timeout and tower-http's body timeout did this with a timer per request (armed,
//! then cancelled, on the runtime's timer wheel under its lock): 3.4k of a `session_status` request's
//! 132k instructions in the gateway in `sessionwatch bench gateway` (docs/performance.md); a deadline is
//! one atomic store.

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A connection's deadline while it owes the gateway nothing (its request is being answered).
const NO_DEADLINE: u64 = u64::MAX;

/// File descriptors kept for everything but client connections (the database and its WAL, the
/// upstream monitor's transcript reads, the MCP child processes' pipes).
const RESERVED_DESCRIPTORS: u64 = 128;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, as Go's runtime and most servers do at start-up:
/// a service's default soft limit (often 1024) is far below what the system allows. Answers the soft
/// limit in force afterwards (`None` where it cannot be read).
#[cfg(unix)]
pub fn raise_fd_limit() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft >= hard {
        return Some(soft);
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => {
            tracing::debug!(from = soft, to = hard, "raised the soft fd limit");
            Some(hard)
        }
        Err(e) => {
            tracing::warn!(error = %e, soft, hard, "could not raise the soft fd limit");
            Some(soft)
        }
    }
}

#[cfg(not(unix))]
pub(crate) fn raise_fd_limit() -> Option<u64> {
    None
}

/// The connection cap in force: `configured`, lowered to what the fd limit leaves after
/// [`RESERVED_DESCRIPTORS`] (so the gateway sheds idle connections before it runs out of descriptors).
pub(crate) fn effective_cap(configured: usize) -> usize {
    #[cfg(unix)]
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok().map(|l| l.0);
    #[cfg(not(unix))]
    let soft: Option<u64> = None;
    let Some(soft) = soft else { return configured };
    let room = usize::try_from(soft.saturating_sub(RESERVED_DESCRIPTORS).max(16)).unwrap_or(usize::MAX);
    if room < configured {
        tracing::warn!(
            configured,
            fd_limit = soft,
            cap = room,
            "gateway.maxConnections is above what the fd limit allows; serving at most {room} connections"
        );
    }
    configured.min(room)
}

/// The open connections, by id.
pub(crate) struct Connections {
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Connection>>>,
    epoch: Instant,
    /// The header and body timeouts, in milliseconds.
    header_ms: u64,
    body_ms: u64,
}

/// One open connection.
pub(crate) struct Connection {
    in_flight: AtomicUsize,
    /// Milliseconds since [`Connections::epoch`] since when no request has been in flight.
    idle_since: AtomicU64,
    /// Milliseconds since [`Connections::epoch`] by which the client must have sent what it owes: its
    /// next request's headers while idle, its request's body while that is arriving; [`NO_DEADLINE`]
    /// while the gateway answers.
    deadline: AtomicU64,
    /// Cancelled to ask the connection's task to close it.
    shed: CancellationToken,
    /// Cancelled when the client missed its deadline: the connection's task closes it at once.
    expired: CancellationToken,
}

impl Connection {
    pub(crate) fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Resolves when the gateway wants this connection closed to free its slot.
    pub(crate) async fn shed_requested(&self) {
        self.shed.cancelled().await
    }

    /// Resolves when the client missed a deadline.
    pub(crate) async fn expired(&self) {
        self.expired.cancelled().await
    }
}

impl Connections {
    /// Connections that must send their request headers within `header_timeout` and a request body
    /// within `body_timeout` of its headers.
    pub(crate) fn new(header_timeout: Duration, body_timeout: Duration) -> Connections {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(NO_DEADLINE);
        Connections {
            next_id: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
            header_ms: ms(header_timeout),
            body_ms: ms(body_timeout),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// A newly accepted connection (idle: it has sent no request yet).
    pub(crate) fn open(self: &Arc<Self>) -> (u64, Arc<Connection>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let now = self.now_ms();
        let conn = Arc::new(Connection {
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(now),
            deadline: AtomicU64::new(now.saturating_add(self.header_ms)),
            shed: CancellationToken::new(),
            expired: CancellationToken::new(),
        });
        self.lock().insert(id, conn.clone());
        (id, conn)
    }

    pub(crate) fn close(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Connection>>> {
        self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Asks the connection idle the longest (no request in flight, not already asked) to close; false
    /// when every connection has a request in flight.
    pub(crate) fn shed_longest_idle(&self) -> bool {
        let open = self.lock();
        let oldest = open
            .values()
            .filter(|c| c.is_idle() && !c.shed.is_cancelled())
            .min_by_key(|c| c.idle_since.load(Ordering::Relaxed));
        match oldest {
            Some(c) => {
                c.shed.cancel();
                true
            }
            None => false,
        }
    }

    /// Marks a request of `conn` in flight until the returned guard (moved into its response body)
    /// drops. A request whose body is still to come (`awaits_body`) must have it within the body
    /// timeout: until it ended ([`OwedBody`]) or the route answered ([`InFlight::answering`]).
    pub(crate) fn begin_request(self: &Arc<Self>, conn: &Arc<Connection>, awaits_body: bool) -> InFlight {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        let deadline = if awaits_body { self.now_ms().saturating_add(self.body_ms) } else { NO_DEADLINE };
        conn.deadline.store(deadline, Ordering::Relaxed);
        InFlight { connections: self.clone(), conn: conn.clone() }
    }

    /// Closes every connection whose client is past its deadline; answers how many.
    fn expire_overdue(&self, now_ms: u64) -> usize {
        let open = self.lock();
        let overdue = open.values().filter(|c| c.deadline.load(Ordering::Relaxed) < now_ms);
        overdue.filter(|c| !c.expired.is_cancelled()).inspect(|c| c.expired.cancel()).count()
    }

    /// Every `tick` (a quarter of the shorter timeout, from 10 ms to 1 s: a client is closed at most
    /// that late), closes the connections past their deadline, until `stop` is cancelled.
    pub(crate) async fn watch_deadlines(self: Arc<Self>, stop: CancellationToken) {
        let tick = Duration::from_millis((self.header_ms.min(self.body_ms) / 4).clamp(10, 1000));
        let mut ticks = tokio::time::interval(tick);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {
                    let closed = self.expire_overdue(self.now_ms());
                    if closed > 0 {
                        tracing::debug!(closed, "closed connections past their header or body timeout");
                    }
                }
                () = stop.cancelled() => return,
            }
        }
    }
}

/// A request in flight on a connection: from its parsed head until its response body is dropped (sent
/// in full, or abandoned).
pub(crate) struct InFlight {
    connections: Arc<Connections>,
    conn: Arc<Connection>,
}

impl InFlight {
    /// The route answered: whatever of the body it did not read, it no longer waits for.
    pub(crate) fn answering(&self) {
        self.conn.deadline.store(NO_DEADLINE, Ordering::Relaxed);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = self.connections.now_ms();
        self.conn.idle_since.store(now, Ordering::Relaxed);
        if self.conn.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Idle: the next request's headers are due within the header timeout.
            self.conn.deadline.store(now.saturating_add(self.connections.header_ms), Ordering::Relaxed);
        }
    }
}

/// A request body the client still owes: once it ended, nothing is (a route may take longer than the
/// body timeout to answer, e.g. a `sessions_send` waiting for its reply).
pub(crate) struct OwedBody<B> {
    inner: B,
    conn: Arc<Connection>,
}

impl<B> OwedBody<B> {
    pub(crate) fn new(inner: B, conn: Arc<Connection>) -> OwedBody<B> {
        OwedBody { inner, conn }
    }
}

impl<B: http_body::Body + Unpin> http_body::Body for OwedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) || (frame.is_ready() && self.inner.is_end_stream()) {
            self.conn.deadline.store(NO_DEADLINE, Ordering::Relaxed);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that keeps its request [`InFlight`] until hyper has written it (or dropped it).
pub(crate) struct TrackedBody {
    inner: Body,
    _in_flight: InFlight,
}

impl TrackedBody {
    pub(crate) fn new(inner: Body, in_flight: InFlight) -> TrackedBody {
        TrackedBody { inner, _in_flight: in_flight }
    }
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_idle_connection_is_shed_and_one_with_a_request_in_flight_never() {
        let conns = Arc::new(Connections::new(Duration::from_secs(10), Duration::from_secs(30)));
        let (_, first) = conns.open();
        let (_, second) = conns.open();
        let (_, third) = conns.open();
        first.idle_since.store(5, Ordering::Relaxed);
        second.idle_since.store(1, Ordering::Relaxed);
        third.idle_since.store(3, Ordering::Relaxed);
        let busy = conns.begin_request(&second, false);
        assert!(conns.shed_longest_idle());
        assert!(third.shed.is_cancelled() && !first.shed.is_cancelled() && !second.shed.is_cancelled());
        assert!(conns.shed_longest_idle());
        assert!(first.shed.is_cancelled());
        assert!(!conns.shed_longest_idle(), "only a connection with a request in flight is left");
        drop(busy);
        assert!(second.is_idle());
        assert!(conns.shed_longest_idle());
        assert!(second.shed.is_cancelled());
    }

    #[tokio::test]
    async fn a_body_that_arrived_in_full_is_owed_no_longer() {
        use futures::StreamExt;
        let conns = Arc::new(Connections::new(Duration::from_millis(100), Duration::from_millis(1000)));
        let (_, conn) = conns.open();
        let _posting = conns.begin_request(&conn, true);
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(2);
        let body = http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
        let mut frames = http_body_util::BodyStream::new(OwedBody::new(body, conn.clone()));
        tx.send(Ok(Frame::data(Bytes::from_static(b"{\"tool\":")))).await.unwrap();
        frames.next().await.unwrap().unwrap();
        assert_ne!(conn.deadline.load(Ordering::Relaxed), NO_DEADLINE, "the rest is still owed");
        drop(tx);
        assert!(frames.next().await.is_none());
        assert_eq!(conn.deadline.load(Ordering::Relaxed), NO_DEADLINE, "nothing is owed once it ended");
    }

    #[test]
    fn a_client_is_held_to_its_headers_while_idle_and_to_its_body_until_the_answer() {
        let conns = Arc::new(Connections::new(Duration::from_millis(100), Duration::from_millis(1000)));
        let (_, conn) = conns.open();
        let deadline = || conn.deadline.load(Ordering::Relaxed);
        let opened = deadline();
        assert!(opened <= conns.now_ms() + 100, "a new connection owes its headers");
        assert_eq!(conns.expire_overdue(opened), 0, "not before the deadline");
        let posting = conns.begin_request(&conn, true);
        assert!(deadline() >= opened + 900, "a body owed is due within the body timeout");
        assert_eq!(conns.expire_overdue(opened + 200), 0, "the header deadline no longer holds");
        posting.answering();
        assert_eq!(deadline(), NO_DEADLINE, "nothing is owed while the gateway answers");
        assert_eq!(conns.expire_overdue(u64::MAX - 1), 0);
        drop(posting);
        let idle = deadline();
        assert!(idle != NO_DEADLINE && idle <= conns.now_ms() + 100, "idle again: the next headers are owed");
        let getting = conns.begin_request(&conn, false);
        assert_eq!(deadline(), NO_DEADLINE, "a request without a body owes nothing more");
        drop(getting);
        assert_eq!(conns.expire_overdue(deadline() + 1), 1, "past the deadline: closed");
        assert!(conn.expired.is_cancelled() && !conn.shed.is_cancelled());
        assert_eq!(conns.expire_overdue(deadline() + 1), 0, "closed once");
    }
}
