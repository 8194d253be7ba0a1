//! The adopted session of a native thread and its upstream link.

use super::{LOCAL_HOST_ID, OWN_TEXT_LIMIT, adopted_key};
use crate::error::{ApiError, ApiResult};
use crate::gateway::{Gateway, SessionRef, SessionSpec, nodes};
use sessionwatch_core::{Actor, AgentSessionKey, NewEvent, RecordPolicy};
use sessionwatch_kernel::RecordOutcome;
use sessionwatch_store::{LinkUpsert, Store, UpstreamLinkRow};
use sessionwatch_upstream::CatalogId;

/// Transcript messages read to find the last [`OWN_TEXT_LIMIT`] user messages.
const OWN_TEXT_SCAN: u32 = 200;

/// What adopting did to the session.
pub(in crate::gateway) struct AdoptedSession {
    pub session_id: String,
    pub created: bool,
    /// `adopted` was recorded now (the first adoption of this key).
    pub adopted: bool,
}

/// `created`, `kept` or `rebaselined`.
pub(in crate::gateway) struct LinkOutcome(pub &'static str);

impl<S: Store> Gateway<S> {
    /// The session of an adopted native thread: `agent:<agent>:<catalog>:<thread>` on this machine,
    /// `agent:<agent>:<catalog>@<node>:<thread>` on a remote node.
    pub(in crate::gateway) fn adopted_ref(
        &self,
        agent: &str,
        catalog: CatalogId,
        thread: &str,
        node: Option<&str>,
    ) -> ApiResult<SessionRef> {
        let raw_key = match node {
            None => adopted_key(agent, catalog, thread),
            Some(n) => nodes::remote_key(agent, catalog, n, thread),
        };
        let key = AgentSessionKey::parse(&raw_key).ok_or_else(|| {
            ApiError::invalid(format!("thread id {thread:?} does not make a valid session key"))
        })?;
        Ok(SessionRef { key: key.as_str().to_string(), agent_id: agent.to_string() })
    }

    /// Creates the adopted session (`created_via: "catalog"`) if needed and records `adopted` (once per
    /// key: the event is deduplicated). Answers the row, whether it was created, and the record.
    pub(in crate::gateway) async fn adopted_session(
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
    pub(in crate::gateway) async fn link_adoption(
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
            .store
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
        // Where the session runs, as its catalog entry says (its hooks say it again on every call).
        if row.cwd.is_none()
            && let Some(cwd) = adoption.entry.cwd.clone().filter(|c| !c.is_empty())
        {
            self.store.set_native_state(r.key.clone(), r.agent_id.clone(), Some(cwd), None).await?;
        }
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
    pub(in crate::gateway) async fn own_user_texts(&self, r: &SessionRef) -> ApiResult<Vec<String>> {
        let msgs = self.store.messages(r.key.clone(), r.agent_id.clone(), OWN_TEXT_SCAN).await?;
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
}
