//! Remote nodes (`sessionwatch node`): tokens the gateway issues, and the node's reports. The gateway
//! keeps every link and marker durably; a node holds no state but its token. Each tick it reports its
//! catalog, gets its links with their markers, runs the same classifiers on its own files and reports
//! the outcomes, which the gateway applies exactly as its own monitor's (`upstream.rs` `apply`): the
//! event first (deduplicated), then the marker, compare-and-set on the link's version.
//!
//! So a node that loses the gateway, or dies mid-tick, re-classifies from the last marker the gateway
//! stored: nothing is lost, and a report applied twice is one event (same dedupe key) and one marker
//! move (the second compare-and-set fails). An unreachable node reports nothing, which is never
//! evidence of deletion: only three consecutive definite `Missing` reports remove a link.

use super::upstream::{Adopted, OWN_TEXT_LIMIT, RemoteAdoption, TickReport, Work};
use super::{DEFAULT_AGENT, Gateway, SessionRef};
use crate::error::{ApiError, ApiResult};
use crate::node_protocol::{
    BaselineReport, BaselineResult, NodeLink, OutcomeReport, SyncAnswer, SyncRequest,
};
use sessionwatch_core::AgentSessionKey;
use sessionwatch_core::is_valid_agent_id;
use sessionwatch_store::{LinkUpsert, NodeRow, Store, UpstreamLinkRow};
use sessionwatch_upstream::CatalogId;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

const HOST_PREFIX: &str = "node:";
/// The reference of a link adopted through the gateway that its node has not baselined yet.
pub(crate) const PENDING_REFERENCE: &str = r#"{"pendingBaseline":true}"#;
/// Catalog entries one sync may carry.
const MAX_CATALOG: usize = 100_000;

/// The `host_id` of links whose source lives on node `name`.
pub(crate) fn node_host_id(name: &str) -> String {
    format!("{HOST_PREFIX}{name}")
}

pub(crate) fn is_node_host(host_id: &str) -> bool {
    host_id.starts_with(HOST_PREFIX)
}

/// Node names: 1–63 of `a-z 0-9 . _ -`, starting with a letter or digit (they appear in session keys).
pub(crate) fn is_valid_node_name(name: &str) -> bool {
    let b = name.as_bytes();
    (1..=63).contains(&b.len())
        && b[0].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-'))
}

/// The session key of a thread on a node: the catalog names the host, `agent:<agent>:claude@<node>:<id>`.
pub(crate) fn remote_key(agent_id: &str, catalog: CatalogId, node: &str, thread_id: &str) -> String {
    AgentSessionKey::build_remote(agent_id, catalog.as_str(), node, thread_id)
}

fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// What the gateway keeps in memory about nodes: their last catalogs (not durable: a node sends its
/// catalog every tick).
#[derive(Default)]
pub(crate) struct NodeState {
    catalogs: Mutex<HashMap<String, Vec<crate::node_protocol::RemoteEntry>>>,
}

/// `GET /v1/nodes`: one node.
#[derive(Clone, Debug)]
pub(crate) struct NodeStatus {
    /// The node as the store holds it: its name, when its token was issued, when it last reported.
    pub node: NodeRow,
    /// Links whose source lives on the node.
    pub sessions: usize,
    /// Of those, the watched ones (checked every tick).
    pub watched: usize,
    /// Now minus the oldest last check of a watched link (`None`: nothing watched).
    pub monitor_lag_ms: Option<i64>,
    /// Entries in its last catalog (`None`: none since the gateway started).
    pub catalog_size: Option<usize>,
}

impl<S: Store> Gateway<S> {
    /// `POST /v1/nodes {name}`: a new node and its token (shown once; only its hash is kept).
    pub(crate) async fn issue_node(&self, name: &str) -> ApiResult<String> {
        if !is_valid_node_name(name) {
            return Err(ApiError::invalid(format!(
                "node name {name:?}: 1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit"
            )));
        }
        let token = format!("swn_{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        if !self.store.create_node(name.to_string(), token_hash(&token), self.now()).await? {
            return Err(ApiError::Conflict(format!(
                "node {name:?} exists: revoke it first to issue a new token"
            )));
        }
        tracing::info!(node = name, "node token issued");
        Ok(token)
    }

    /// `DELETE /v1/nodes/{name}`: its token stops working at once. Its links stay (unchecked) until a
    /// node of that name is issued again.
    pub(crate) async fn revoke_node(&self, name: &str) -> ApiResult<()> {
        if !self.store.revoke_node(name.to_string()).await? {
            return Err(ApiError::NotFound(format!("no node named {name:?}")));
        }
        self.nodes.catalogs.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        tracing::info!(node = name, "node token revoked");
        Ok(())
    }

    /// Whether a node of this name holds a token.
    pub(super) async fn node_is_registered(&self, name: &str) -> ApiResult<bool> {
        Ok(self.store.list_nodes().await?.iter().any(|n| n.name == name))
    }

    /// The node a token belongs to.
    pub(crate) async fn node_of_token(&self, token: &str) -> ApiResult<Option<String>> {
        Ok(self.store.node_by_token(token_hash(token)).await?.map(|n| n.name))
    }

    /// `GET /v1/nodes`.
    pub(crate) async fn node_statuses(&self) -> ApiResult<Vec<NodeStatus>> {
        let store = &self.store;
        let now = self.now();
        let watched: HashSet<(String, String)> = store
            .watched_links()
            .await?
            .into_iter()
            .filter(|l| is_node_host(&l.host_id))
            .map(|l| (l.session_key, l.agent_id))
            .collect();
        let catalogs = self.nodes.catalogs.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut out = vec![];
        for node in store.list_nodes().await? {
            let links = store.links_of_host(node_host_id(&node.name)).await?;
            let watched_links: Vec<&UpstreamLinkRow> = links
                .iter()
                .filter(|l| watched.contains(&(l.session_key.clone(), l.agent_id.clone())))
                .collect();
            let oldest = watched_links.iter().map(|l| l.last_scanned_at.unwrap_or(l.created_at)).min();
            out.push(NodeStatus {
                catalog_size: catalogs.get(&node.name).map(Vec::len),
                sessions: links.len(),
                watched: watched_links.len(),
                monitor_lag_ms: oldest.map(|t| (now - t).max(0)),
                node,
            });
        }
        Ok(out)
    }

    /// The catalogs the nodes last reported: (node, entry).
    pub(crate) fn remote_catalog(&self) -> Vec<(String, crate::node_protocol::RemoteEntry)> {
        let catalogs = self.nodes.catalogs.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<_> =
            catalogs.iter().flat_map(|(n, es)| es.iter().map(move |e| (n.clone(), e.clone()))).collect();
        out.sort_by(|a, b| b.1.updated_at.cmp(&a.1.updated_at).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// `POST /v1/node/sync`: records the node's catalog and answers its links with their markers.
    pub(crate) async fn node_sync(&self, node: &str, req: SyncRequest) -> ApiResult<SyncAnswer> {
        if let Some(claimed) = &req.name
            && claimed != node
        {
            return Err(ApiError::Forbidden(format!("this token belongs to node {node:?}, not {claimed:?}")));
        }
        if req.catalog.len() > MAX_CATALOG {
            return Err(ApiError::invalid(format!("catalog: at most {MAX_CATALOG} entries")));
        }
        for e in &req.catalog {
            if CatalogId::parse(&e.catalog_id).is_none() {
                return Err(ApiError::invalid(format!("catalog: unknown catalogId {:?}", e.catalog_id)));
            }
            if !valid_thread_id(&e.thread_id) {
                return Err(ApiError::invalid(format!("catalog: bad threadId {:?}", e.thread_id)));
            }
        }
        let store = &self.store;
        store.touch_node(node.to_string(), self.now()).await?;
        self.nodes.catalogs.lock().unwrap_or_else(|p| p.into_inner()).insert(node.to_string(), req.catalog);
        let host = node_host_id(node);
        let watched: HashSet<(String, String)> = store
            .watched_links()
            .await?
            .into_iter()
            .filter(|l| l.host_id == host)
            .map(|l| (l.session_key, l.agent_id))
            .collect();
        let mut links = vec![];
        for l in store.links_of_host(host).await? {
            let baseline = l.reference_json == PENDING_REFERENCE;
            let is_watched = watched.contains(&(l.session_key.clone(), l.agent_id.clone()));
            let own_texts = if is_watched && !baseline {
                self.own_user_texts(&SessionRef { key: l.session_key.clone(), agent_id: l.agent_id.clone() })
                    .await?
            } else {
                vec![]
            };
            debug_assert!(own_texts.len() <= OWN_TEXT_LIMIT);
            links.push(NodeLink {
                session_key: l.session_key,
                agent_id: l.agent_id,
                catalog_id: l.catalog_id,
                thread_id: l.thread_id,
                reference_json: l.reference_json,
                marker_json: l.marker_json,
                updated_at: l.updated_at,
                own_texts,
                baseline,
                watched: is_watched,
            });
        }
        Ok(SyncAnswer { node: node.to_string(), links, workspaces: self.node_followed_workspaces(node) })
    }

    /// The link a node reports on, which must live on that node (checked for every report before
    /// anything is written). `None`: the link is gone (removed meanwhile).
    async fn node_links(
        &self,
        node: &str,
        keys: impl Iterator<Item = (&str, &str)>,
    ) -> ApiResult<Vec<Option<UpstreamLinkRow>>> {
        let host = node_host_id(node);
        let mut out = vec![];
        for (key, agent) in keys {
            let link = self.store.get_link(key.to_string(), agent.to_string()).await?;
            if let Some(l) = &link
                && l.host_id != host
            {
                return Err(ApiError::Forbidden(format!("node {node:?} does not host session {key:?}")));
            }
            out.push(link);
        }
        Ok(out)
    }

    /// `POST /v1/node/baselines`: the node adopted sessions the gateway asked for.
    pub(crate) async fn node_baselines(&self, node: &str, reports: Vec<BaselineReport>) -> ApiResult<usize> {
        let links = self
            .node_links(node, reports.iter().map(|r| (r.session_key.as_str(), r.agent_id.as_str())))
            .await?;
        let store = &self.store;
        let mut linked = 0;
        for (report, link) in reports.into_iter().zip(links) {
            let Some(link) =
                link.filter(|l| l.reference_json == PENDING_REFERENCE && l.updated_at == report.updated_at)
            else {
                continue; // baselined already, or re-adopted meanwhile: the next sync says what is current
            };
            match report.result {
                BaselineResult::Linked { upstream_kind, reference_json, marker_json } => {
                    if reference_json == PENDING_REFERENCE {
                        return Err(ApiError::invalid("a baseline needs the node's reference"));
                    }
                    let now = self.now();
                    store
                        .upsert_link(UpstreamLinkRow {
                            upstream_kind,
                            reference_json,
                            marker_json,
                            last_scanned_at: None,
                            missing_streak: 0,
                            updated_at: now.max(link.updated_at + 1),
                            ..link
                        })
                        .await?;
                    linked += 1;
                }
                BaselineResult::NotFound { message } => {
                    tracing::warn!(node, session = %link.session_key, %message, "the node has no such session: link removed");
                    store.delete_link(link.session_key, link.agent_id).await?;
                }
            }
        }
        Ok(linked)
    }

    /// `POST /v1/node/outcomes`: applies the node's check outcomes as the local monitor applies its own.
    pub(crate) async fn node_outcomes(
        &self,
        node: &str,
        reports: Vec<OutcomeReport>,
    ) -> ApiResult<TickReport> {
        let links = self
            .node_links(node, reports.iter().map(|r| (r.session_key.as_str(), r.agent_id.as_str())))
            .await?;
        let mut tick = TickReport::default();
        for (report, link) in reports.into_iter().zip(links) {
            let Some(link) = link.filter(|l| l.reference_json != PENDING_REFERENCE) else {
                tick.deferred += 1;
                continue;
            };
            let (Some(catalog), Ok(Some(_))) = (
                CatalogId::parse(&link.catalog_id),
                self.store.get_session(link.session_key.clone(), link.agent_id.clone()).await,
            ) else {
                tick.deferred += 1;
                continue;
            };
            tick.links += 1;
            tick.checked += 1;
            // The version the node classified against: a report from a stale marker does not move it.
            let link = UpstreamLinkRow { updated_at: report.updated_at, ..link };
            let work = Work { link, catalog };
            // What this writes to the link moves the store's version past the monitor's: it reads them again.
            self.apply(&work, report.outcome.into(), &mut tick).await;
        }
        Ok(tick)
    }

    /// `POST /v1/catalog/continue` with a `node`: adopts a session that lives on that node. The
    /// session and its link are created now; the node takes the baseline on its next tick.
    pub(super) async fn continue_on_node(
        &self,
        catalog: CatalogId,
        thread: &str,
        agent: &str,
        node: &str,
    ) -> ApiResult<Adopted> {
        if !valid_thread_id(thread) {
            return Err(ApiError::invalid(format!("threadId {thread:?} is not a thread id")));
        }
        let store = &self.store;
        if !self.node_is_registered(node).await? {
            return Err(ApiError::NotFound(format!("no node named {node:?} (see GET /v1/nodes)")));
        }
        let r = self.adopted_ref(agent, catalog, thread, Some(node))?;
        let (row, created, recorded) = self.adopted_session(&r, catalog, None).await?;
        let host = node_host_id(node);
        let existing = store.get_link(r.key.clone(), r.agent_id.clone()).await?;
        let (link, baseline) = match existing {
            Some(l) if l.host_id == host && l.thread_id == thread => {
                ("kept", if l.reference_json == PENDING_REFERENCE { "pending" } else { "done" })
            }
            _ => {
                let now = self.now();
                let outcome = store
                    .upsert_link(UpstreamLinkRow {
                        session_key: r.key.clone(),
                        agent_id: r.agent_id.clone(),
                        catalog_id: catalog.as_str().to_string(),
                        host_id: host,
                        thread_id: thread.to_string(),
                        upstream_kind: catalog.upstream_kind().to_string(),
                        reference_json: PENDING_REFERENCE.to_string(),
                        marker_json: "null".into(),
                        last_scanned_at: None,
                        missing_streak: 0,
                        created_at: now,
                        updated_at: now,
                    })
                    .await?;
                (if outcome == LinkUpsert::Created { "created" } else { "rebaselined" }, "pending")
            }
        };
        tracing::info!(session = %r.key, node, catalog = catalog.as_str(), link, "remote session adopted");
        Ok(Adopted {
            session_key: r.key,
            session_id: row.session_id,
            agent_id: r.agent_id,
            catalog,
            thread_id: thread.to_string(),
            created,
            adopted: matches!(recorded, sessionwatch_kernel::RecordOutcome::Recorded(_)),
            link,
            remote: Some(RemoteAdoption { node: node.to_string(), baseline }),
        })
    }
}

fn valid_thread_id(t: &str) -> bool {
    !t.is_empty() && t.len() <= 256 && !t.chars().any(|c| c.is_control() || c.is_whitespace() || c == ':')
}

/// The agent of a remote adoption (default `main`), validated.
pub(super) fn adoption_agent(agent_id: Option<&str>) -> ApiResult<String> {
    let agent = agent_id.map(|a| a.trim().to_ascii_lowercase()).unwrap_or_else(|| DEFAULT_AGENT.into());
    if !is_valid_agent_id(&agent) {
        return Err(ApiError::invalid(format!("agentId \"{agent}\" is not a valid agent id")));
    }
    Ok(agent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_fit_in_keys() {
        for ok in ["buildbox", "gpu-1", "a.b_c", "0box"] {
            assert!(is_valid_node_name(ok), "{ok}");
        }
        for bad in ["", "-box", "Box", "a:b", "a@b", "a b", &"x".repeat(64)] {
            assert!(!is_valid_node_name(bad), "{bad}");
        }
        assert_eq!(
            remote_key("main", CatalogId::Claude, "buildbox", "ABC"),
            "agent:main:claude@buildbox:abc"
        );
    }
}
