//! Upstream awareness: the session catalog (Claude Code, Codex, OpenCode, Pi), adoption of a native
//! session, and the monitor that turns direct human activity upstream into `human_direct_message`
//! events (and a vanished source into `upstream_missing`).
//!
//! **Adopted session keys** are agent-qualified: `agent:<agentId>:<catalogId>:<threadId lowercased>`
//! (agent `main` by default), e.g. `agent:main:claude:dabdface-a74f-47e7-a565-02a8eb260f31`. The key
//! names its one owning agent; the link row keeps the thread id in its original case.
//!
//! The classifiers live in `sessionwatch-upstream` and are synchronous: every tick runs them on the
//! blocking pool, one task per catalog, each bounded by [`Gateway::monitor_source_timeout`]. A source
//! that times out affects only its own catalog and is not evidence of anything.

use super::{Gateway, SessionRef, SessionSpec};
use crate::error::{ApiError, ApiResult};
use serde::Serialize;
use serde_json::{Value, json};
use sessionwatch_core::{Actor, AgentSessionKey, NewEvent};
use sessionwatch_core::{HumanTurnSource, RecordPolicy};
use sessionwatch_kernel::RecordOutcome;
use sessionwatch_store::{LinkUpsert, Store, UpstreamLinkRow};
use sessionwatch_upstream::{CatalogEntry, CatalogId, CheckOutcome, Homes, UpstreamError};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The host every local source lives on (part of the source key, so it must be stable).
pub const LOCAL_HOST_ID: &str = "gateway:local";
/// Consecutive definitive "gone" checks before `upstream_missing`.
pub const MISSING_THRESHOLD: u32 = 3;
/// Gateway-side user messages that count as our own (self-echo filter).
pub const OWN_TEXT_LIMIT: usize = 10;
/// Default bound on one catalog's classifiers per tick.
pub const DEFAULT_SOURCE_TIMEOUT: Duration = Duration::from_secs(45);
/// Transcript messages read to find the last [`OWN_TEXT_LIMIT`] user messages.
const OWN_TEXT_SCAN: u32 = 200;

/// What one monitor tick did (`POST /v1/monitor/tick`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TickReport {
    /// Another tick was running: this one did nothing.
    pub skipped: bool,
    /// Watched links found.
    pub links: usize,
    /// Links skipped because their key is linked under several agents.
    pub ambiguous: usize,
    /// Links whose source was checked and answered.
    pub checked: usize,
    /// Human turns recorded (sum of `turns`).
    pub human_turns: u64,
    /// `human_direct_message` events recorded (new or deduplicated).
    pub events: usize,
    /// Markers advanced.
    pub advanced: usize,
    pub no_change: usize,
    /// Checks that could not tell (read errors, busy database, bad reference).
    pub inconclusive: usize,
    /// Checks that found the source definitively gone.
    pub missing: usize,
    /// `upstream_missing` recorded and the link removed.
    pub removed: usize,
    /// Catalogs whose classifiers ran past the per-source bound.
    pub timed_out: Vec<String>,
    /// Links whose outcome could not be applied (store or record failure, link changed meanwhile).
    pub deferred: usize,
    pub duration_ms: u64,
}

/// `sha256(hostId \0 threadId \0 referenceJson)`, first 16 hex characters.
pub fn source_key(host_id: &str, thread_id: &str, reference_json: &str) -> String {
    let mut h = Sha256::new();
    h.update(host_id.as_bytes());
    h.update([0u8]);
    h.update(thread_id.as_bytes());
    h.update([0u8]);
    h.update(reference_json.as_bytes());
    let d = h.finalize();
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The adopted session key for a catalog thread under `agent_id`.
pub fn adopted_key(agent_id: &str, catalog: CatalogId, thread_id: &str) -> String {
    format!("agent:{agent_id}:{}:{}", catalog.as_str(), thread_id.to_ascii_lowercase())
}

/// What adopting did to the session.
pub(super) struct AdoptedSession {
    pub session_id: String,
    pub created: bool,
    /// `adopted` was recorded now (the first adoption of this key).
    pub adopted: bool,
}

/// `created`, `kept` or `rebaselined`.
pub(super) struct LinkOutcome(pub &'static str);

/// Clears the single-flight flag when a tick ends (also on panic or cancellation).
struct TickGuard<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for TickGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// One link prepared for a tick.
pub(super) struct Work {
    pub link: UpstreamLinkRow,
    pub catalog: CatalogId,
    pub session_id: String,
    pub own: Vec<String>,
}

fn catalog_entry_json(e: &CatalogEntry, adopted: Option<String>) -> Value {
    let mut v = json!({
        "catalogId": e.catalog_id.as_str(),
        "threadId": e.thread_id,
        "title": e.title,
        "cwd": e.cwd,
        "updatedAt": e.updated_at_ms,
        "location": e.location,
    });
    if let Some(k) = adopted {
        v["adopted"] = k.into();
    }
    v
}

fn upstream_error(e: UpstreamError) -> ApiError {
    match e {
        UpstreamError::NotFound { .. } => ApiError::NotFound(e.to_string()),
        UpstreamError::InvalidThreadId(_) => ApiError::invalid(e.to_string()),
        UpstreamError::Io { .. } | UpstreamError::Sqlite { .. } => {
            tracing::warn!(error = %e, "upstream read failed during adoption");
            ApiError::Internal(format!("the upstream store could not be read: {e}"))
        }
    }
}

impl<S: Store> Gateway<S> {
    /// Where the native stores live (from the environment at start; tests point it elsewhere).
    pub fn homes(&self) -> Homes {
        self.homes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Points discovery, adoption and monitoring at other native stores.
    pub fn set_homes(&self, homes: Homes) {
        *self.homes.lock().unwrap_or_else(|p| p.into_inner()) = homes;
    }

    /// The bound on one catalog's classifiers per tick.
    pub fn monitor_source_timeout(&self) -> Duration {
        Duration::from_millis(self.monitor_source_timeout_ms.load(Ordering::Relaxed))
    }

    pub fn set_monitor_source_timeout(&self, d: Duration) {
        self.monitor_source_timeout_ms.store(d.as_millis().max(1) as u64, Ordering::Relaxed);
    }

    /// `GET /v1/catalog`: every native session on this machine, newest first, with the key of the
    /// adopted session when it is linked (under any agent's default key `agent:main:…`).
    pub async fn catalog(&self, with_nodes: bool) -> ApiResult<Value> {
        let homes = self.homes();
        let entries =
            tokio::task::spawn_blocking(move || sessionwatch_upstream::discover(&homes, &mut |_, _| {}))
                .await
                .map_err(|e| ApiError::Internal(format!("catalog discovery failed: {e}")))?;
        let store = self.kernel.store();
        let mut sessions = Vec::with_capacity(entries.len());
        for e in &entries {
            let key = adopted_key(super::DEFAULT_AGENT, e.catalog_id, &e.thread_id);
            let linked = store.get_link(key.clone(), super::DEFAULT_AGENT.to_string()).await?;
            sessions.push(catalog_entry_json(e, linked.map(|_| key)));
        }
        if with_nodes {
            for (node, e) in self.remote_catalog() {
                let Some(catalog) = CatalogId::parse(&e.catalog_id) else { continue };
                let key = super::nodes::remote_key(super::DEFAULT_AGENT, catalog, &node, &e.thread_id);
                let linked = store.get_link(key.clone(), super::DEFAULT_AGENT.to_string()).await?;
                sessions.push(crate::wire::remote_catalog_entry(&node, &e, linked.map(|_| key)));
            }
        }
        Ok(json!({ "sessions": sessions }))
    }

    /// `POST /v1/catalog/continue`: adopts a native session. Creates the session (`created_via:
    /// "catalog"`), records `adopted` (once per key) and upserts the upstream link with a baseline
    /// marker at the source's current end: the same source keeps its marker, a changed one is
    /// re-baselined.
    pub async fn continue_catalog(
        &self,
        catalog_id: &str,
        thread_id: &str,
        agent_id: Option<&str>,
        node: Option<&str>,
    ) -> ApiResult<Value> {
        let catalog = CatalogId::parse(catalog_id).ok_or_else(|| {
            ApiError::invalid(format!(
                "unknown catalogId {catalog_id:?}: expected claude, codex, opencode or pi"
            ))
        })?;
        let agent = super::nodes::adoption_agent(agent_id)?;
        let thread = thread_id.trim().to_string();
        if let Some(node) = node {
            return self.continue_on_node(catalog, &thread, &agent, node).await;
        }
        let homes = self.homes();
        let t = thread.clone();
        let adoption = tokio::task::spawn_blocking(move || sessionwatch_upstream::adopt(&homes, catalog, &t))
            .await
            .map_err(|e| ApiError::Internal(format!("adoption failed: {e}")))?
            .map_err(upstream_error)?;
        let (r, created, link) = self.link_adoption(&agent, catalog, &thread, &adoption).await?;
        tracing::info!(session = %r.key, catalog = catalog.as_str(), thread = %thread, link = link.0, "catalog session adopted");
        Ok(json!({
            "sessionKey": r.key,
            "sessionId": created.session_id,
            "agentId": r.agent_id,
            "catalogId": catalog.as_str(),
            "threadId": adoption.entry.thread_id,
            "created": created.created,
            "adopted": created.adopted,
            "linked": true,
            "link": link.0,
        }))
    }

    /// The session of an adopted native thread: `agent:<agent>:<catalog>:<thread>` on this machine,
    /// `agent:<agent>:<catalog>@<node>:<thread>` on a remote node.
    pub(super) fn adopted_ref(
        &self,
        agent: &str,
        catalog: CatalogId,
        thread: &str,
        node: Option<&str>,
    ) -> ApiResult<SessionRef> {
        let raw_key = match node {
            None => adopted_key(agent, catalog, thread),
            Some(n) => super::nodes::remote_key(agent, catalog, n, thread),
        };
        let key = AgentSessionKey::parse(&raw_key).ok_or_else(|| {
            ApiError::invalid(format!("thread id {thread:?} does not make a valid session key"))
        })?;
        Ok(SessionRef { key: key.as_str().to_string(), agent_id: agent.to_string() })
    }

    /// Creates the adopted session (`created_via: "catalog"`) if needed and records `adopted` (once per
    /// key: the event is deduplicated). Answers the row, whether it was created, and the record.
    pub(super) async fn adopted_session(
        &self,
        r: &SessionRef,
        catalog: CatalogId,
        label: Option<&str>,
    ) -> ApiResult<(sessionwatch_store::SessionRow, bool, RecordOutcome)> {
        let (row, created) = self
            .ensure_session(
                r,
                SessionSpec {
                    channel: Some(catalog.as_str()),
                    label,
                    created_via: Some("catalog"),
                    creator: Some(Actor::system()),
                    creator_label: Some(catalog.as_str()),
                    ..SessionSpec::default()
                },
            )
            .await?;
        let adopted = NewEvent::adopted(&r.key, &r.agent_id, catalog.as_str(), Actor::system())
            .with_session_id(Some(row.session_id.clone()));
        let recorded = self.kernel.record(adopted, RecordPolicy::always()).await;
        Ok((row, created, recorded))
    }

    /// Creates the adopted session (`created_via: "catalog"`), records `adopted` once per key and
    /// upserts the link: the same source keeps its marker, a changed one is re-baselined.
    pub(super) async fn link_adoption(
        &self,
        agent: &str,
        catalog: CatalogId,
        thread: &str,
        adoption: &sessionwatch_upstream::Adoption,
    ) -> ApiResult<(SessionRef, AdoptedSession, LinkOutcome)> {
        let r = self.adopted_ref(agent, catalog, thread, None)?;
        let (row, created, recorded) =
            self.adopted_session(&r, catalog, adoption.entry.title.as_deref()).await?;
        let now = self.now();
        let outcome = self
            .kernel
            .store()
            .upsert_link(UpstreamLinkRow {
                session_key: r.key.clone(),
                agent_id: r.agent_id.clone(),
                catalog_id: catalog.as_str().to_string(),
                host_id: LOCAL_HOST_ID.to_string(),
                thread_id: adoption.entry.thread_id.clone(),
                upstream_kind: adoption.link.upstream_kind.to_string(),
                reference_json: adoption.link.reference_json.clone(),
                marker_json: adoption.link.marker_json.clone(),
                last_scanned_at: None,
                missing_streak: 0,
                created_at: now,
                updated_at: now,
            })
            .await?;
        let link = match outcome {
            LinkUpsert::Created => "created",
            LinkUpsert::Kept => "kept",
            LinkUpsert::Rebaselined => "rebaselined",
        };
        let adopted = AdoptedSession {
            session_id: row.session_id,
            created,
            adopted: matches!(recorded, RecordOutcome::Recorded(_)),
        };
        Ok((r, adopted, LinkOutcome(link)))
    }

    /// The session's last [`OWN_TEXT_LIMIT`] user messages that the gateway itself delivered: a
    /// native prompt with one of these texts is our echo, not a human.
    pub(super) async fn own_user_texts(&self, r: &SessionRef) -> ApiResult<Vec<String>> {
        let msgs = self.kernel.store().messages(r.key.clone(), r.agent_id.clone(), OWN_TEXT_SCAN).await?;
        let mut texts: Vec<String> = msgs
            .into_iter()
            .rev()
            .filter(|m| m.role == "user")
            .take(OWN_TEXT_LIMIT)
            .map(|m| m.text)
            .collect();
        texts.reverse();
        Ok(texts)
    }

    /// Starts the background monitor: the first tick after `first_tick`, then one every `interval`.
    /// Ticks never overlap; the task ends when the gateway is dropped.
    pub fn spawn_monitor(&self, first_tick: Duration, interval: Duration) -> tokio::task::JoinHandle<()> {
        let me = self.me.clone();
        tokio::spawn(async move {
            tokio::time::sleep(first_tick).await;
            loop {
                let Some(gateway) = me.upgrade() else { return };
                let report = gateway.monitor_tick().await;
                drop(gateway);
                if report.events > 0 || report.removed > 0 || !report.timed_out.is_empty() {
                    tracing::info!(?report, "upstream monitor tick");
                } else {
                    tracing::debug!(?report, "upstream monitor tick");
                }
                tokio::time::sleep(interval.max(Duration::from_millis(100))).await;
            }
        })
    }

    /// One monitor tick over every watched link. Single flight: a tick that finds another running
    /// answers `skipped` at once.
    pub async fn monitor_tick(&self) -> TickReport {
        if self.monitor_running.swap(true, Ordering::SeqCst) {
            return TickReport { skipped: true, ..TickReport::default() };
        }
        let _guard = TickGuard(&self.monitor_running);
        let started = Instant::now();
        let mut report = TickReport::default();
        let links = match self.kernel.store().watched_links().await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "upstream monitor: listing watched links failed");
                report.duration_ms = started.elapsed().as_millis() as u64;
                return report;
            }
        };
        report.links = links.iter().filter(|l| !super::nodes::is_node_host(&l.host_id)).count();
        let work = self.prepare(links, &mut report).await;

        // Run each catalog's classifiers on the blocking pool, concurrently, each bounded.
        let mut by_catalog: BTreeMap<CatalogId, Vec<Work>> = BTreeMap::new();
        for w in work {
            by_catalog.entry(w.catalog).or_default().push(w);
        }
        let timeout = self.monitor_source_timeout();
        let tasks = by_catalog.into_iter().map(|(catalog, items)| async move {
            let jobs: Vec<(String, String, Vec<String>)> = items
                .iter()
                .map(|w| (w.link.reference_json.clone(), w.link.marker_json.clone(), w.own.clone()))
                .collect();
            let handle =
                tokio::task::spawn_blocking(move || sessionwatch_upstream::check_many(catalog, &jobs));
            let outcomes = match tokio::time::timeout(timeout, handle).await {
                Ok(Ok(o)) => Some(o),
                Ok(Err(e)) => {
                    tracing::warn!(catalog = catalog.as_str(), error = %e, "upstream classifiers failed");
                    None
                }
                Err(_) => {
                    tracing::warn!(catalog = catalog.as_str(), ?timeout, "upstream classifiers timed out");
                    None
                }
            };
            (catalog, items, outcomes)
        });
        let results = futures::future::join_all(tasks).await;

        for (catalog, items, outcomes) in results {
            let Some(outcomes) = outcomes else {
                report.timed_out.push(catalog.as_str().to_string());
                continue;
            };
            for (w, outcome) in items.into_iter().zip(outcomes) {
                report.checked += 1;
                self.apply(w, outcome, &mut report).await;
            }
        }
        report.duration_ms = started.elapsed().as_millis() as u64;
        report
    }

    /// Drops ambiguous keys, unknown catalogs and links without a session; loads own texts.
    async fn prepare(&self, links: Vec<UpstreamLinkRow>, report: &mut TickReport) -> Vec<Work> {
        let mut agents: HashMap<&str, usize> = HashMap::new();
        for l in &links {
            *agents.entry(l.session_key.as_str()).or_default() += 1;
        }
        let ambiguous: Vec<String> =
            agents.iter().filter(|(_, n)| **n > 1).map(|(k, _)| (*k).to_string()).collect();
        let store = self.kernel.store();
        let mut out = Vec::new();
        for link in links {
            // A remote node checks its own sources (`sessionwatch node`); the gateway cannot read them.
            if super::nodes::is_node_host(&link.host_id) {
                continue;
            }
            if ambiguous.contains(&link.session_key) {
                tracing::warn!(
                    session = %link.session_key,
                    agent = %link.agent_id,
                    "upstream link skipped: the same key is linked under several agents (ambiguous)"
                );
                report.ambiguous += 1;
                continue;
            }
            let Some(catalog) = CatalogId::parse(&link.catalog_id) else {
                tracing::warn!(session = %link.session_key, catalog = %link.catalog_id, "upstream link of an unknown catalog");
                report.deferred += 1;
                continue;
            };
            let session = match store.get_session(link.session_key.clone(), link.agent_id.clone()).await {
                Ok(Some(s)) => s,
                Ok(None) => {
                    report.deferred += 1;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, session = %link.session_key, "upstream link: session read failed");
                    report.deferred += 1;
                    continue;
                }
            };
            let r = SessionRef { key: link.session_key.clone(), agent_id: link.agent_id.clone() };
            let own = match self.own_user_texts(&r).await {
                Ok(texts) => texts,
                Err(e) => {
                    // Without our own texts we could mistake an echo for a human: skip this link.
                    tracing::warn!(error = %e, session = %link.session_key, "upstream link: transcript read failed");
                    report.deferred += 1;
                    continue;
                }
            };
            out.push(Work { link, catalog, session_id: session.session_id, own });
        }
        out
    }

    /// Applies one outcome: record first, then advance; count missing streaks durably.
    pub(super) async fn apply(&self, w: Work, outcome: CheckOutcome, report: &mut TickReport) {
        let store = self.kernel.store();
        let link = &w.link;
        let source = source_key(&link.host_id, &link.thread_id, &link.reference_json);
        match outcome {
            CheckOutcome::NoChange | CheckOutcome::Inconclusive(_) => {
                if let CheckOutcome::Inconclusive(why) = &outcome {
                    report.inconclusive += 1;
                    tracing::debug!(session = %link.session_key, reason = %why, "upstream check inconclusive");
                } else {
                    report.no_change += 1;
                }
                // Not a definitive "gone": the streak of consecutive missing checks is broken.
                if link.missing_streak > 0
                    && let Err(e) = store
                        .set_link_missing_streak(
                            link.session_key.clone(),
                            link.agent_id.clone(),
                            link.updated_at,
                            0,
                        )
                        .await
                {
                    tracing::warn!(error = %e, session = %link.session_key, "resetting the missing streak failed");
                }
            }
            CheckOutcome::Activity { human_turns, next_marker_json, occurred_at_ms, dedupe_id, turn_id } => {
                if human_turns > 0 {
                    let dedupe = match &turn_id {
                        Some(t) => NewEvent::human_turn_dedupe_key(&link.session_key, t),
                        None => format!("upstream:{}:{source}:{dedupe_id}", link.session_key),
                    };
                    let event =
                        NewEvent::human_message(&link.session_key, &link.agent_id, &link.catalog_id, None)
                            .with_turns(human_turns)
                            .with_session_id(Some(w.session_id.clone()))
                            .with_occurred_at(occurred_at_ms)
                            .with_dedupe_key(Some(dedupe));
                    let policy = RecordPolicy::human_turn(HumanTurnSource::Adopted, None);
                    match self.kernel.record(event, policy).await {
                        RecordOutcome::Recorded(_) | RecordOutcome::Duplicate(_) => {
                            report.events += 1;
                            report.human_turns += u64::from(human_turns);
                        }
                        other => {
                            // The marker stays: the same rows are classified again next tick.
                            tracing::warn!(session = %link.session_key, ?other, "upstream human turn not recorded");
                            report.deferred += 1;
                            return;
                        }
                    }
                }
                match store
                    .advance_link_marker(
                        link.session_key.clone(),
                        link.agent_id.clone(),
                        link.updated_at,
                        next_marker_json,
                        self.now(),
                    )
                    .await
                {
                    Ok(true) => report.advanced += 1,
                    Ok(false) => {
                        tracing::debug!(session = %link.session_key, "upstream link changed during the tick");
                        report.deferred += 1;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, session = %link.session_key, "advancing the upstream marker failed");
                        report.deferred += 1;
                    }
                }
            }
            CheckOutcome::Missing => {
                report.missing += 1;
                // The link must be the one we checked: same update time and same source.
                let current = match store.get_link(link.session_key.clone(), link.agent_id.clone()).await {
                    Ok(Some(c)) => c,
                    Ok(None) => return,
                    Err(e) => {
                        tracing::warn!(error = %e, session = %link.session_key, "upstream link read failed");
                        report.deferred += 1;
                        return;
                    }
                };
                if current.updated_at != link.updated_at
                    || source_key(&current.host_id, &current.thread_id, &current.reference_json) != source
                {
                    report.deferred += 1;
                    return;
                }
                let streak = (current.missing_streak + 1).min(MISSING_THRESHOLD);
                if streak < MISSING_THRESHOLD {
                    match store
                        .set_link_missing_streak(
                            link.session_key.clone(),
                            link.agent_id.clone(),
                            link.updated_at,
                            streak,
                        )
                        .await
                    {
                        Ok(true) => {}
                        Ok(false) => report.deferred += 1,
                        Err(e) => {
                            tracing::warn!(error = %e, session = %link.session_key, "storing the missing streak failed");
                            report.deferred += 1;
                        }
                    }
                    return;
                }
                let event = NewEvent::upstream_missing(&link.session_key, &link.agent_id, &link.catalog_id)
                    .with_session_id(Some(w.session_id.clone()))
                    .with_dedupe_key(Some(format!(
                        "upstream-missing:{}:{source}:{}",
                        link.session_key, link.updated_at
                    )));
                match self.kernel.record(event, RecordPolicy::always()).await {
                    RecordOutcome::Recorded(_) | RecordOutcome::Duplicate(_) => {
                        match store.delete_link(link.session_key.clone(), link.agent_id.clone()).await {
                            Ok(_) => {
                                report.removed += 1;
                                tracing::info!(session = %link.session_key, catalog = %link.catalog_id, "upstream source gone: link removed");
                            }
                            Err(e) => {
                                // The event is deduplicated: the next tick retries the removal.
                                tracing::warn!(error = %e, session = %link.session_key, "removing the upstream link failed");
                                report.deferred += 1;
                            }
                        }
                    }
                    other => {
                        tracing::warn!(session = %link.session_key, ?other, "upstream_missing not recorded");
                        let _ = store
                            .set_link_missing_streak(
                                link.session_key.clone(),
                                link.agent_id.clone(),
                                link.updated_at,
                                MISSING_THRESHOLD - 1,
                            )
                            .await;
                        report.deferred += 1;
                    }
                }
            }
        }
    }
}
