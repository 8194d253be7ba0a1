//! The monitor: ticks over every watched local link, and applying one outcome (record first, then
//! advance the marker), which remote nodes' reports share.

use super::{MISSING_THRESHOLD, TickReport, source_key};
use crate::gateway::{Gateway, SessionRef, nodes};
use sessionwatch_core::{HumanTurnSource, Millis, NewEvent, RecordPolicy};
use sessionwatch_kernel::RecordOutcome;
use sessionwatch_store::{Store, UpstreamLinkRow, WatchedLinks};
use sessionwatch_upstream::{CatalogId, CheckOutcome, Probe};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The monitor's own state in the gateway.
#[derive(Default)]
pub(in crate::gateway) struct MonitorState {
    /// Single flight: set while a tick runs.
    running: AtomicBool,
    /// The watched links the last read found, prepared, with the store's version they were read at: a
    /// tick keeps them while the store answers that nothing they depend on changed (one row read on
    /// SQLite, instead of every link's twelve columns), and reads them again otherwise.
    watched: Mutex<Option<(i64, Arc<Watched>)>>,
}

/// Clears the single-flight flag when a tick ends (also on panic or cancellation).
struct TickGuard<'a>(&'a AtomicBool);

impl Drop for TickGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// One link prepared for a tick.
pub(in crate::gateway) struct Work {
    pub link: UpstreamLinkRow,
    pub catalog: CatalogId,
}

/// What applying one outcome wrote to its link's row: the monitor keeps the links it holds in step
/// with its own writes ([`Gateway::keep_watched`]).
pub(in crate::gateway) enum LinkWrite {
    /// Nothing: the row is as it was read.
    Nothing,
    /// The marker advanced at `at` (which is also the row's new `updated_at`), the streak reset.
    Advanced { marker_json: String, at: Millis },
    /// The missing streak stored.
    Streak(u32),
    /// The link removed, or a write whose outcome is not known: the links must be read again.
    Unknown,
}

impl LinkWrite {
    /// `link` as the store has it after this write (the store's own statements, done again).
    fn apply_to(self, link: &mut UpstreamLinkRow) {
        match self {
            LinkWrite::Nothing | LinkWrite::Unknown => {}
            LinkWrite::Advanced { marker_json, at } => {
                link.marker_json = marker_json;
                link.last_scanned_at = Some(at);
                link.updated_at = at;
                link.missing_streak = 0;
            }
            LinkWrite::Streak(streak) => link.missing_streak = streak,
        }
    }
}

/// One read of the watched links, prepared: the local links a tick checks, and what preparing them
/// counted (the same for every tick until the links change).
struct Watched {
    work: Vec<Work>,
    /// Local links found (remote nodes' links aside).
    links: usize,
    ambiguous: usize,
    /// Links of an unknown catalog.
    unknown: usize,
}

impl<S: Store> Gateway<S> {
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
        if self.monitor.running.swap(true, Ordering::SeqCst) {
            return TickReport { skipped: true, ..TickReport::default() };
        }
        let _guard = TickGuard(&self.monitor.running);
        let started = Instant::now();
        let mut report = TickReport::default();
        let Some((version, watched)) = self.watched_links().await else {
            report.duration_ms = started.elapsed().as_millis() as u64;
            return report;
        };
        report.links = watched.links;
        report.ambiguous = watched.ambiguous;
        report.deferred = watched.unknown;

        // Two passes, so that an idle tick reads nothing from the store per link: the first checks every
        // link without our own texts (which only lower the count of human turns in new rows); the links
        // it finds with human turns are checked again, with their own texts, before anything is applied;
        // a session we never wrote to has none, and the first pass's answer stands.
        let mut checked = Vec::with_capacity(watched.work.len());
        let mut recheck = Vec::new();
        let first = (0..watched.work.len()).map(|i| (i, vec![])).collect();
        for (i, outcome) in self.check_all(&watched, first, &mut report).await {
            match outcome {
                CheckOutcome::Activity { human_turns, .. } if human_turns > 0 => recheck.push((i, outcome)),
                _ => checked.push((i, outcome)),
            }
        }
        let mut with_texts = Vec::with_capacity(recheck.len());
        for (i, first_outcome) in recheck {
            let link = &watched.work[i].link;
            let r = SessionRef { key: link.session_key.clone(), agent_id: link.agent_id.clone() };
            match self.own_user_texts(&r).await {
                Ok(texts) if texts.is_empty() => checked.push((i, first_outcome)),
                Ok(texts) => with_texts.push((i, texts)),
                Err(e) => {
                    // Without our own texts we could mistake an echo for a human: skip this link.
                    tracing::warn!(error = ?e, session = %r.key, "upstream link: transcript read failed");
                    report.deferred += 1;
                }
            }
        }
        checked.extend(self.check_all(&watched, with_texts, &mut report).await);
        let mut writes = Vec::with_capacity(checked.len());
        for (i, outcome) in checked {
            report.checked += 1;
            writes.push((i, self.apply(&watched.work[i], outcome, &mut report).await));
        }
        self.keep_watched(version, watched, writes);
        report.duration_ms = started.elapsed().as_millis() as u64;
        report
    }

    /// After a tick's own writes to the links it holds: when they are all it did to them (each moved
    /// the store's version by one), the held links take the same changes and the version they make, so
    /// the next tick does not read every link again because one marker advanced (1.5–2 ms for 1,000
    /// links). Any other write, or a version moved by someone else meanwhile, leaves the held links
    /// behind the store's version: the next tick reads them again.
    fn keep_watched(&self, version: Option<i64>, watched: Arc<Watched>, writes: Vec<(usize, LinkWrite)>) {
        let Some(version) = version else { return };
        if writes.iter().any(|(_, w)| matches!(w, LinkWrite::Unknown)) {
            return;
        }
        let moved = writes.iter().filter(|(_, w)| !matches!(w, LinkWrite::Nothing)).count() as i64;
        if moved == 0 {
            return;
        }
        let mut held = self.monitor.watched.lock().unwrap_or_else(|p| p.into_inner());
        let Some((held_version, mut held_links)) = held.take() else { return };
        let same = held_version == version && Arc::ptr_eq(&held_links, &watched);
        drop(watched); // the held links are then the only holder, and change in place
        match Arc::get_mut(&mut held_links) {
            Some(links) if same => {
                for (i, write) in writes {
                    write.apply_to(&mut links.work[i].link);
                }
                *held = Some((version + moved, held_links));
            }
            _ => *held = Some((held_version, held_links)),
        }
    }

    /// The watched links, prepared: those held from an earlier read while the store answers that
    /// nothing they depend on changed since, else read and prepared again. `None` (after a warning)
    /// when the store cannot answer.
    async fn watched_links(&self) -> Option<(Option<i64>, Arc<Watched>)> {
        let lock = || self.monitor.watched.lock().unwrap_or_else(|p| p.into_inner());
        let held = lock().clone();
        let read = match self.store.watched_links_since(held.as_ref().map(|(version, _)| *version)).await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(error = %e, "upstream monitor: listing watched links failed");
                return None;
            }
        };
        match (read, held) {
            (WatchedLinks::Unchanged, Some((version, watched))) => Some((Some(version), watched)),
            (WatchedLinks::Unchanged, None) => {
                tracing::warn!("upstream monitor: the store found unchanged links the monitor never read");
                None
            }
            (WatchedLinks::Read { links, version }, _) => {
                let watched = Arc::new(prepare(links));
                *lock() = version.map(|v| (v, watched.clone()));
                Some((version, watched))
            }
        }
    }

    /// Runs each catalog's classifiers on the blocking pool over `(link, our own texts)`, the link by
    /// its index in `watched`, concurrently, each bounded by the source timeout; a catalog that times
    /// out or fails is reported and its links left for the next tick.
    async fn check_all(
        &self,
        watched: &Arc<Watched>,
        items: Vec<(usize, Vec<String>)>,
        report: &mut TickReport,
    ) -> Vec<(usize, CheckOutcome)> {
        let mut by_catalog: BTreeMap<CatalogId, Vec<(usize, Vec<String>)>> = BTreeMap::new();
        for (i, texts) in items {
            by_catalog.entry(watched.work[i].catalog).or_default().push((i, texts));
        }
        let timeout = super::DEFAULT_SOURCE_TIMEOUT;
        let tasks = by_catalog.into_iter().map(|(catalog, items)| {
            let watched = watched.clone();
            async move {
                // The probes borrow the links and texts on the blocking pool; the texts come back.
                let handle = tokio::task::spawn_blocking(move || {
                    let probes: Vec<Probe<'_>> = items
                        .iter()
                        .map(|(i, texts)| {
                            let link = &watched.work[*i].link;
                            Probe {
                                reference_json: &link.reference_json,
                                marker_json: &link.marker_json,
                                own_recent_user_texts: texts,
                            }
                        })
                        .collect();
                    let outcomes = sessionwatch_upstream::check_many(catalog, &probes);
                    (items, outcomes)
                });
                let checked = match tokio::time::timeout(timeout, handle).await {
                    Ok(Ok(checked)) => Some(checked),
                    Ok(Err(e)) => {
                        tracing::warn!(catalog = catalog.as_str(), error = %e, "upstream classifiers failed");
                        None
                    }
                    Err(_) => {
                        tracing::warn!(
                            catalog = catalog.as_str(),
                            ?timeout,
                            "upstream classifiers timed out"
                        );
                        None
                    }
                };
                (catalog, checked)
            }
        });
        let mut out = Vec::new();
        for (catalog, checked) in futures::future::join_all(tasks).await {
            match checked {
                Some((items, outcomes)) => out.extend(items.into_iter().map(|(i, _)| i).zip(outcomes)),
                None => report.timed_out.push(catalog.as_str().to_string()),
            }
        }
        out
    }

    /// The native session id recorded on the events of `link`'s session; `None` (after a warning) when
    /// the session is gone or cannot be read: the outcome is not applied this tick.
    async fn session_id_of(&self, link: &UpstreamLinkRow) -> Option<String> {
        match self.store.get_session(link.session_key.clone(), link.agent_id.clone()).await {
            Ok(Some(s)) => Some(s.session_id),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, session = %link.session_key, "upstream link: session read failed");
                None
            }
        }
    }

    /// Applies one outcome: record first, then advance; count missing streaks durably. Answers what it
    /// wrote to the link.
    pub(in crate::gateway) async fn apply(
        &self,
        w: &Work,
        outcome: CheckOutcome,
        report: &mut TickReport,
    ) -> LinkWrite {
        match outcome {
            CheckOutcome::NoChange => {
                report.no_change += 1;
                self.break_missing_streak(w).await
            }
            CheckOutcome::Inconclusive(why) => {
                report.inconclusive += 1;
                tracing::debug!(session = %w.link.session_key, reason = %why, "upstream check inconclusive");
                self.break_missing_streak(w).await
            }
            activity @ CheckOutcome::Activity { .. } => self.apply_activity(w, activity, report).await,
            CheckOutcome::Missing => self.apply_missing(w, report).await,
        }
    }

    /// Not a definitive "gone": the streak of consecutive missing checks is broken.
    async fn break_missing_streak(&self, w: &Work) -> LinkWrite {
        let link = &w.link;
        if link.missing_streak == 0 {
            return LinkWrite::Nothing;
        }
        match self.store.set_link_missing_streak(link.version(), 0).await {
            Ok(true) => LinkWrite::Streak(0),
            Ok(false) => LinkWrite::Nothing,
            Err(e) => {
                tracing::warn!(error = %e, session = %link.session_key, "resetting the missing streak failed");
                LinkWrite::Unknown
            }
        }
    }

    /// Human turns are recorded first (deduplicated), then the marker advances (compare-and-set on the
    /// link's version): a failure in between classifies the same rows again next tick, once.
    async fn apply_activity(&self, w: &Work, activity: CheckOutcome, report: &mut TickReport) -> LinkWrite {
        let CheckOutcome::Activity { human_turns, next_marker_json, occurred_at_ms, dedupe_id, turn_id } =
            activity
        else {
            return LinkWrite::Nothing; // `apply` passes only activity
        };
        let link = &w.link;
        if human_turns > 0 {
            let Some(session_id) = self.session_id_of(link).await else {
                report.deferred += 1;
                return LinkWrite::Nothing;
            };
            let source = source_key(&link.host_id, &link.thread_id, &link.reference_json);
            let dedupe = match &turn_id {
                Some(t) => NewEvent::human_turn_dedupe_key(&link.session_key, t),
                None => format!("upstream:{}:{source}:{dedupe_id}", link.session_key),
            };
            let event = NewEvent::human_message(&link.session_key, &link.agent_id, &link.catalog_id, None)
                .with_turns(human_turns)
                .with_session_id(Some(session_id))
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
                    return LinkWrite::Nothing;
                }
            }
        }
        let at = self.now();
        match self.store.advance_link_marker(link.version(), next_marker_json.clone(), at).await {
            Ok(true) => {
                report.advanced += 1;
                LinkWrite::Advanced { marker_json: next_marker_json, at }
            }
            Ok(false) => {
                tracing::debug!(session = %link.session_key, "upstream link changed during the tick");
                report.deferred += 1;
                LinkWrite::Nothing
            }
            Err(e) => {
                tracing::warn!(error = %e, session = %link.session_key, "advancing the upstream marker failed");
                report.deferred += 1;
                LinkWrite::Unknown
            }
        }
    }

    /// A definitive "gone": the durable streak grows; at [`MISSING_THRESHOLD`] `upstream_missing` is
    /// recorded (once: deduplicated per link version) and the link removed.
    async fn apply_missing(&self, w: &Work, report: &mut TickReport) -> LinkWrite {
        let store = &self.store;
        let link = &w.link;
        let source = source_key(&link.host_id, &link.thread_id, &link.reference_json);
        report.missing += 1;
        // The link must be the one we checked: same update time and same source.
        let current = match store.get_link(link.session_key.clone(), link.agent_id.clone()).await {
            Ok(Some(c)) => c,
            Ok(None) => return LinkWrite::Unknown, // removed meanwhile
            Err(e) => {
                tracing::warn!(error = %e, session = %link.session_key, "upstream link read failed");
                report.deferred += 1;
                return LinkWrite::Nothing;
            }
        };
        if current.updated_at != link.updated_at
            || source_key(&current.host_id, &current.thread_id, &current.reference_json) != source
        {
            report.deferred += 1;
            return LinkWrite::Unknown; // changed meanwhile
        }
        let streak = (current.missing_streak + 1).min(MISSING_THRESHOLD);
        let set_streak = |streak| store.set_link_missing_streak(link.version(), streak);
        if streak < MISSING_THRESHOLD {
            return match set_streak(streak).await {
                Ok(true) => LinkWrite::Streak(streak),
                Ok(false) => {
                    report.deferred += 1;
                    LinkWrite::Nothing
                }
                Err(e) => {
                    tracing::warn!(error = %e, session = %link.session_key, "storing the missing streak failed");
                    report.deferred += 1;
                    LinkWrite::Unknown
                }
            };
        }
        let Some(session_id) = self.session_id_of(link).await else {
            report.deferred += 1;
            return LinkWrite::Nothing;
        };
        let event = NewEvent::upstream_missing(&link.session_key, &link.agent_id, &link.catalog_id)
            .with_session_id(Some(session_id))
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
                let _ = set_streak(MISSING_THRESHOLD - 1).await;
                report.deferred += 1;
            }
        }
        LinkWrite::Unknown
    }
}

/// Drops ambiguous keys, unknown catalogs and remote links, counting them (no store read). Its warnings
/// come once per read of the links, not once per tick.
fn prepare(links: Vec<UpstreamLinkRow>) -> Watched {
    let mut agents: HashMap<&str, usize> = HashMap::new();
    for l in &links {
        *agents.entry(l.session_key.as_str()).or_default() += 1;
    }
    let ambiguous: Vec<String> =
        agents.iter().filter(|(_, n)| **n > 1).map(|(k, _)| (*k).to_string()).collect();
    let mut out = Watched { work: Vec::new(), links: 0, ambiguous: 0, unknown: 0 };
    for link in links {
        // A remote node checks its own sources (`sessionwatch node`); the gateway cannot read them.
        if nodes::is_node_host(&link.host_id) {
            continue;
        }
        out.links += 1;
        if ambiguous.contains(&link.session_key) {
            tracing::warn!(
                session = %link.session_key,
                agent = %link.agent_id,
                "upstream link skipped: the same key is linked under several agents (ambiguous)"
            );
            out.ambiguous += 1;
            continue;
        }
        let Some(catalog) = CatalogId::parse(&link.catalog_id) else {
            tracing::warn!(session = %link.session_key, catalog = %link.catalog_id, "upstream link of an unknown catalog");
            out.unknown += 1;
            continue;
        };
        out.work.push(Work { link, catalog });
    }
    out
}
