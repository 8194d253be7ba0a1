//! Upstream awareness: the session catalog (Claude Code, Codex, OpenCode, Pi, Gemini CLI), adoption of a native
//! session, and the monitor that turns direct human activity upstream into `human_direct_message`
//! events (and a vanished source into `upstream_missing`).
//!
//! **Adopted session keys** are agent-qualified: `agent:<agentId>:<catalogId>:<threadId lowercased>`
//! (agent `main` by default), e.g. `agent:main:claude:dabdface-a74f-47e7-a565-02a8eb260f31`. The key
//! names its one owning agent; the link row keeps the thread id in its original case.
//!
//! The classifiers live in `sessionwatch-upstream` and are synchronous: every tick runs them on the
//! blocking pool, one task per catalog, each bounded by [`DEFAULT_SOURCE_TIMEOUT`]. A source
//! that times out affects only its own catalog and is not evidence of anything.
//!
//! `catalog` (listing and adoption requests), `adoption` (the adopted session and its link), `monitor`
//! (the ticks, and applying an outcome, which node reports share).

mod adoption;
mod catalog;
mod monitor;

pub(crate) use catalog::{Adopted, CatalogListing, RemoteAdoption};
pub(super) use monitor::{MonitorState, Work};

use super::Gateway;
use serde::Serialize;
use sessionwatch_core::AgentSessionKey;
use sessionwatch_store::Store;
use sessionwatch_upstream::{CatalogId, Homes};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// The host every local source lives on (part of the source key, so it must be stable).
pub(crate) const LOCAL_HOST_ID: &str = "gateway:local";
/// Consecutive definitive "gone" checks before `upstream_missing`.
pub(crate) const MISSING_THRESHOLD: u32 = 3;
/// Gateway-side user messages that count as our own (self-echo filter).
pub(crate) const OWN_TEXT_LIMIT: usize = 10;
/// Default bound on one catalog's classifiers per tick.
pub(crate) const DEFAULT_SOURCE_TIMEOUT: Duration = Duration::from_secs(45);

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
pub(crate) fn source_key(host_id: &str, thread_id: &str, reference_json: &str) -> String {
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
pub(crate) fn adopted_key(agent_id: &str, catalog: CatalogId, thread_id: &str) -> String {
    AgentSessionKey::build_adopted(agent_id, catalog.as_str(), thread_id)
}

impl<S: Store> Gateway<S> {
    /// Where the native stores live (from the environment at start; tests point it elsewhere).
    pub(crate) fn homes(&self) -> Homes {
        self.homes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Points discovery, adoption and monitoring at other native stores.
    pub fn set_homes(&self, homes: Homes) {
        *self.homes.lock().unwrap_or_else(|p| p.into_inner()) = homes;
    }
}
