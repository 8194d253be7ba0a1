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

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

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
}

/// One open connection.
pub(crate) struct Connection {
    in_flight: AtomicUsize,
    /// Milliseconds since [`Connections::epoch`] since when no request has been in flight.
    idle_since: AtomicU64,
    /// Cancelled to ask the connection's task to close it.
    shed: CancellationToken,
}

impl Connection {
    pub(crate) fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Resolves when the gateway wants this connection closed to free its slot.
    pub(crate) async fn shed_requested(&self) {
        self.shed.cancelled().await
    }
}

impl Connections {
    pub(crate) fn new() -> Connections {
        Connections { next_id: AtomicU64::new(0), open: Mutex::new(HashMap::new()), epoch: Instant::now() }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// A newly accepted connection (idle: it has sent no request yet).
    pub(crate) fn open(self: &Arc<Self>) -> (u64, Arc<Connection>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Connection {
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(self.now_ms()),
            shed: CancellationToken::new(),
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

    /// Marks a request of `conn` in flight until the returned guard (moved into its response body) drops.
    pub(crate) fn begin_request(self: &Arc<Self>, conn: &Arc<Connection>) -> InFlight {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight { connections: self.clone(), conn: conn.clone() }
    }
}

/// A request in flight on a connection: from its parsed head until its response body is dropped (sent
/// in full, or abandoned).
pub(crate) struct InFlight {
    connections: Arc<Connections>,
    conn: Arc<Connection>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conn.idle_since.store(self.connections.now_ms(), Ordering::Relaxed);
        self.conn.in_flight.fetch_sub(1, Ordering::AcqRel);
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
        let conns = Arc::new(Connections::new());
        let (_, first) = conns.open();
        let (_, second) = conns.open();
        let (_, third) = conns.open();
        first.idle_since.store(5, Ordering::Relaxed);
        second.idle_since.store(1, Ordering::Relaxed);
        third.idle_since.store(3, Ordering::Relaxed);
        let busy = conns.begin_request(&second);
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
}
