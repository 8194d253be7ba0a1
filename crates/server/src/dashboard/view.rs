//! What the pages show, read from the gateway into plain values (no HTML here, no JSON).

use crate::gateway::Gateway;
use sessionwatch_core::{AgentSessionKey, ChangesPage, Limit, SessionKind, StoredEvent, notice_text};
use sessionwatch_store::{Head, SessionFilter, SessionRow, Store, UpstreamLinkRow, WatchEdge};
use std::sync::atomic::Ordering;

/// Sessions per overview page.
pub(crate) const PAGE_SIZE: u32 = 50;
/// Events per timeline page.
pub(crate) const TIMELINE_PAGE: u64 = 50;
/// Edges drawn at most (the graph of one page of sessions).
pub(crate) const MAX_EDGES: u32 = 400;

/// The overview's filters and page, as the query string gives them (validated).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OverviewQuery {
    pub kind: Option<SessionKind>,
    pub agent: Option<String>,
    pub page: u32,
}

pub(crate) struct Counts {
    pub events_recorded: u64,
    pub notices_queued: u64,
    pub notices_acknowledged: u64,
    pub wakes: u64,
    pub queued_now: usize,
}

pub(crate) struct SessionLine {
    pub row: SessionRow,
    pub state_version: u64,
    /// `claude <thread>`, … for an adopted session.
    pub adopted: Option<String>,
}

/// How a watch came to be, for the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EdgeOrigin {
    /// The watcher spawned the target.
    Spawn,
    /// Group members watch the group without asking.
    Ambient,
    /// The sessions working in a git worktree watch its workspace session: its members.
    Workspace,
    Explicit,
}

impl EdgeOrigin {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EdgeOrigin::Spawn => "spawn",
            EdgeOrigin::Ambient => "ambient",
            EdgeOrigin::Workspace => "workspace",
            EdgeOrigin::Explicit => "explicit",
        }
    }
}

pub(crate) struct Edge {
    pub watcher: String,
    pub target: String,
    pub origin: EdgeOrigin,
    pub last_seen: u64,
    pub notified: u64,
    pub material: u64,
    pub pending: bool,
}

pub(crate) struct Overview {
    pub query: OverviewQuery,
    pub counts: Counts,
    /// Remote nodes (`sessionwatch node`) and how current their reports are.
    pub nodes: Vec<crate::gateway::nodes::NodeStatus>,
    pub sessions: Vec<SessionLine>,
    pub has_more: bool,
    pub edges: Vec<Edge>,
}

pub(crate) struct PendingNotice {
    pub target: String,
    pub text: String,
}

/// A page of a session's log and where it stands in the log.
pub(crate) struct Timeline {
    /// The session's head and floor, read before the page: its state version and where its history starts.
    pub head: Head,
    /// Newest first.
    pub events: Vec<std::sync::Arc<StoredEvent>>,
    /// `before` for the next older page, when there is one.
    pub older: Option<u64>,
    /// `before` for the next newer page, when this is not the newest.
    pub newer: Option<u64>,
    /// History up to this sequence was pruned and this page reaches it.
    pub pruned_through: Option<u64>,
}

pub(crate) struct Reconcile {
    pub since: u64,
    pub page: ChangesPage,
}

/// A session's watches, both ways (one read of the watch edges), and the notices it has pending about
/// the sessions it watches.
pub(crate) struct Watches {
    /// Its watchers' edges.
    pub watchers: Vec<Edge>,
    /// The edges to the sessions it watches.
    pub targets: Vec<Edge>,
    /// The notice of each of those edges with one pending.
    pub pending: Vec<PendingNotice>,
}

impl Watches {
    /// The watches of session `key` among `edges`.
    fn of(key: &str, edges: Vec<WatchEdge>) -> Watches {
        let (watchers, targets): (Vec<Edge>, Vec<Edge>) =
            edges_of(edges).into_iter().partition(|e| e.target == key);
        let pending = targets
            .iter()
            .filter(|e| e.pending)
            .filter_map(|e| {
                let target = AgentSessionKey::parse(&e.target)?;
                Some(PendingNotice { text: notice_text(&target, e.last_seen), target: e.target.clone() })
            })
            .collect();
        Watches { watchers, targets, pending }
    }
}

pub(crate) struct SessionView {
    pub key: String,
    pub row: Option<SessionRow>,
    pub timeline: Timeline,
    pub watches: Watches,
    pub link: Option<UpstreamLinkRow>,
    pub reconcile: Option<Reconcile>,
    /// A workspace session: the sessions working in its worktree now.
    pub members: Option<Vec<String>>,
}

fn counts<S: Store>(gateway: &Gateway<S>) -> Counts {
    let kernel = gateway.kernel();
    let m = kernel.metrics();
    Counts {
        events_recorded: m.events_recorded.load(Ordering::Relaxed),
        notices_queued: m.notices_queued.load(Ordering::Relaxed),
        notices_acknowledged: m.notices_acknowledged.load(Ordering::Relaxed),
        wakes: m.wakes.load(Ordering::Relaxed),
        queued_now: kernel.queue_depths().iter().map(|(_, d)| d).sum(),
    }
}

fn adopted(link: &UpstreamLinkRow) -> String {
    format!("{} {}", link.upstream_kind, link.thread_id)
}

fn edges_of(raw: Vec<WatchEdge>) -> Vec<Edge> {
    raw.into_iter()
        .map(|e| {
            let origin = match e.cursor.provenance {
                sessionwatch_core::Provenance::AmbientGroup => EdgeOrigin::Ambient,
                sessionwatch_core::Provenance::Workspace => EdgeOrigin::Workspace,
                sessionwatch_core::Provenance::Explicit if e.spawned => EdgeOrigin::Spawn,
                sessionwatch_core::Provenance::Explicit => EdgeOrigin::Explicit,
            };
            Edge {
                pending: e.cursor.is_pending(),
                last_seen: e.cursor.last_seen,
                notified: e.cursor.notified,
                material: e.cursor.material,
                watcher: e.watcher,
                target: e.target,
                origin,
            }
        })
        .collect()
}

pub(crate) async fn overview<S: Store>(
    gateway: &Gateway<S>,
    query: OverviewQuery,
) -> anyhow::Result<Overview> {
    let store = gateway.store();
    let filter = SessionFilter {
        kinds: query.kind.map(|k| vec![k.as_str().to_string()]),
        agent_id: query.agent.clone(),
        offset: query.page * PAGE_SIZE,
        limit: PAGE_SIZE + 1,
        ..SessionFilter::default()
    };
    let mut rows = store.list_sessions(filter).await?;
    let has_more = rows.len() > PAGE_SIZE as usize;
    rows.truncate(PAGE_SIZE as usize);
    let versions = gateway
        .kernel()
        .state_versions(rows.iter().map(|r| (r.session_key.clone(), r.agent_id.clone())).collect())
        .await?;
    let keys = rows.iter().map(|r| r.session_key.clone()).collect();
    let edges = edges_of(gateway.kernel().watch_edges(keys, MAX_EDGES).await?);
    // The page's own links (adopted sessions, watched or not), not every link of the store.
    let mut sessions = Vec::with_capacity(rows.len());
    for row in rows {
        let link = store.get_link(row.session_key.clone(), row.agent_id.clone()).await?;
        let version = versions.get(&(row.session_key.clone(), row.agent_id.clone())).copied();
        sessions.push(SessionLine {
            state_version: version.unwrap_or(0),
            adopted: link.as_ref().map(adopted),
            row,
        });
    }
    let nodes = gateway.node_statuses().await.map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Overview { query, counts: counts(gateway), nodes, sessions, has_more, edges })
}

/// The page of events ending just before `before` (the newest page when `None`), newest first.
pub(crate) fn timeline_range(head: Head, before: Option<u64>) -> (u64, u64) {
    let end = before.map_or(head.head, |b| b.saturating_sub(1).min(head.head));
    let since = end.saturating_sub(TIMELINE_PAGE).max(head.floor);
    (since, end)
}

pub(crate) async fn session<S: Store>(
    gateway: &Gateway<S>,
    key: &AgentSessionKey,
    before: Option<u64>,
    since: Option<u64>,
) -> anyhow::Result<SessionView> {
    let kernel = gateway.kernel();
    let store = gateway.store();
    let (k, agent) = (key.as_str().to_string(), key.agent_id().to_string());
    let row = store.get_session(k.clone(), agent.clone()).await?;
    let head = kernel.head(&k, &agent).await?;
    let (from, end) = timeline_range(head, before);
    let mut events = match Limit::new((end - from) as i64) {
        Ok(limit) => kernel.changes_since(&k, &agent, from, limit).await?.events,
        Err(_) => vec![],
    };
    events.reverse();
    let timeline = Timeline {
        head,
        events,
        older: (from > head.floor).then_some(from + 1),
        newer: (end < head.head).then_some((end + TIMELINE_PAGE + 1).min(head.head + 1)),
        pruned_through: (from == head.floor && head.floor > 0).then_some(head.floor),
    };
    let watches = Watches::of(&k, kernel.watch_edges(vec![k.clone()], MAX_EDGES).await?);
    let link = store.get_link(k.clone(), agent.clone()).await?;
    let reconcile = match since {
        Some(since) => {
            Some(Reconcile { since, page: kernel.changes_since(&k, &agent, since, Limit::MAX).await? })
        }
        None => None,
    };
    let is_workspace =
        row.as_ref().is_some_and(|r| r.kind == sessionwatch_core::SessionKind::Workspace.as_str());
    let members = is_workspace.then(|| gateway.workspace_members(&k));
    Ok(SessionView { key: k, row, timeline, watches, link, reconcile, members })
}

/// The key a `/chat/<agent>/<rest>` path names: the notice writes `rest` with `:` as `/`.
pub(crate) async fn key_of_path<S: Store>(
    gateway: &Gateway<S>,
    agent: &str,
    rest: &str,
) -> Option<AgentSessionKey> {
    let store = gateway.store();
    let mut candidates = vec![AgentSessionKey::build(agent, &rest.replace('/', ":"))];
    if rest.contains('/') {
        candidates.push(AgentSessionKey::build(agent, rest));
    }
    for raw in candidates {
        let Some(key) = AgentSessionKey::parse(&raw) else { continue };
        let (k, a) = (key.as_str().to_string(), key.agent_id().to_string());
        let known = matches!(store.get_session(k.clone(), a.clone()).await, Ok(Some(_)))
            || gateway.kernel().head(&k, &a).await.is_ok_and(|h| h.head > 0);
        if known {
            return Some(key);
        }
    }
    None
}

/// The path of a session's page, as notices build it (`:` in the rest becomes `/`), each segment
/// percent-encoded.
pub fn chat_path(key: &str) -> String {
    use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
    const SEGMENT: &AsciiSet = &CONTROLS
        .add(b' ')
        .add(b'"')
        .add(b'#')
        .add(b'<')
        .add(b'>')
        .add(b'?')
        .add(b'`')
        .add(b'{')
        .add(b'}')
        .add(b'%')
        .add(b'/')
        .add(b'\'')
        .add(b'\\');
    let Some(k) = AgentSessionKey::parse(key) else { return "/".into() };
    let mut out = format!("/chat/{}", utf8_percent_encode(k.agent_id(), SEGMENT));
    for segment in k.rest().split(':') {
        out.push('/');
        out.extend(utf8_percent_encode(segment, SEGMENT));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_paths_are_the_notice_links() {
        let key = "agent:main:dashboard:7ac7cf4b";
        let notice = notice_text(&AgentSessionKey::parse(key).unwrap(), 4);
        assert!(notice.contains(&format!("({})", chat_path(key))), "{notice}");
        assert_eq!(chat_path("agent:main:x y:<b>"), "/chat/main/x%20y/%3Cb%3E");
    }

    #[test]
    fn timeline_pages_walk_back_to_the_floor() {
        let head = Head { head: 120, floor: 30 };
        assert_eq!(timeline_range(head, None), (70, 120));
        assert_eq!(timeline_range(head, Some(71)), (30, 70), "stops at the floor");
        assert_eq!(timeline_range(Head { head: 3, floor: 0 }, None), (0, 3));
        assert_eq!(
            timeline_range(head, Some(1000)),
            (70, 120),
            "a `before` past the head is the newest page"
        );
    }
}
