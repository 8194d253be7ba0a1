//! Session rows (with the gateway that hosts each), the small transcript and the inbox.

use super::{PostgresStore, execute, query, query_one, query_opt};
use crate::rows::{MESSAGE_COLUMNS, SESSION_COLUMNS, inbox_from_row, message_from_row, session_from_row};
use crate::{
    InboxItem, NewMessage, NewSession, Result, SessionActivity, SessionFilter, SessionRow, StoreError,
    TRANSCRIPT_CAP, TranscriptMessage,
};
use deadpool_postgres::GenericClient;
use sessionwatch_core::Millis;
use std::collections::HashMap;
use tokio_postgres::Row;

fn session_from_row(r: &Row) -> Result<SessionRow> {
    Ok(session_from_row!(r, try_get))
}

pub(crate) async fn load_session<C: GenericClient + Sync>(
    c: &C,
    key: &str,
    agent: &str,
) -> Result<Option<SessionRow>> {
    query_opt(
        c,
        &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE session_key = $1 AND agent_id = $2"),
        &[&key, &agent],
    )
    .await?
    .map(|r| session_from_row(&r))
    .transpose()
}

fn message_from_row(r: &Row) -> Result<TranscriptMessage> {
    Ok(message_from_row!(r, try_get))
}

fn inbox_from_row(r: &Row) -> Result<InboxItem> {
    Ok(inbox_from_row!(r, try_get))
}

/// Records which gateway hosts the session (when given) and bumps `updated_at`.
pub(crate) async fn touch_session<C: GenericClient + Sync>(
    c: &C,
    key: &str,
    agent: &str,
    host: Option<&str>,
    now: Millis,
) -> Result<()> {
    execute(
        c,
        "UPDATE sessions SET updated_at = $3, host_id = COALESCE($4, host_id) \
         WHERE session_key = $1 AND agent_id = $2",
        &[&key, &agent, &now, &host],
    )
    .await?;
    Ok(())
}

/// Appends to the transcript and trims it to [`TRANSCRIPT_CAP`]; inside the caller's transaction.
pub(crate) async fn append_message<C: GenericClient + Sync>(
    tx: &C,
    key: &str,
    agent: &str,
    m: &NewMessage,
    now: Millis,
) -> Result<i64> {
    let id: i64 = query_one(
        tx,
        "INSERT INTO session_messages (session_key, agent_id, session_id, role, text, run_id, \
         from_session, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        &[&key, &agent, &m.session_id, &m.role, &m.text, &m.run_id, &m.from_session, &now],
    )
    .await?
    .get(0);
    execute(
        tx,
        "DELETE FROM session_messages WHERE session_key = $1 AND agent_id = $2 AND id <= \
         (SELECT id FROM session_messages WHERE session_key = $1 AND agent_id = $2 \
          ORDER BY id DESC LIMIT 1 OFFSET $3)",
        &[&key, &agent, &TRANSCRIPT_CAP],
    )
    .await?;
    Ok(id)
}

pub(crate) async fn push_inbox<C: GenericClient + Sync>(
    c: &C,
    key: &str,
    agent: &str,
    item: &InboxItem,
) -> Result<i64> {
    Ok(query_one(
        c,
        "INSERT INTO session_inbox (session_key, agent_id, run_id, from_session, text, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        &[&key, &agent, &item.run_id, &item.from_session, &item.text, &item.created_at],
    )
    .await?
    .get(0))
}

impl PostgresStore {
    pub(crate) async fn ensure_session_pg(
        &self,
        new: &NewSession,
        now: Millis,
    ) -> Result<(SessionRow, bool)> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let inserted = execute(
            &tx,
            "INSERT INTO sessions (session_key, agent_id, session_id, kind, chat_type, channel, label, \
             spawned_by, created_via, host_id, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) ON CONFLICT DO NOTHING",
            &[
                &new.session_key,
                &new.agent_id,
                &new.session_id,
                &new.kind,
                &new.chat_type,
                &new.channel,
                &new.label,
                &new.spawned_by,
                &new.created_via,
                &new.host_id,
                &now,
            ],
        )
        .await?
            > 0;
        let row = load_session(&tx, &new.session_key, &new.agent_id)
            .await?
            .ok_or_else(|| StoreError::InvalidData("session row vanished inside its transaction".into()))?;
        tx.commit().await?;
        Ok((row, inserted))
    }

    pub(crate) async fn list_sessions_pg(&self, filter: &SessionFilter) -> Result<Vec<SessionRow>> {
        let kinds: Option<Vec<&str>> = filter.kinds.as_ref().map(|k| k.iter().map(String::as_str).collect());
        self.read_all(
            &format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE updated_at >= $1 \
                 AND ($2::text[] IS NULL OR kind = ANY($2)) AND ($4::text IS NULL OR agent_id = $4) \
                 AND (NOT $6 OR (cwd <> '' AND native_state IS DISTINCT FROM 'idle')) \
                 ORDER BY updated_at DESC, session_key COLLATE \"C\" LIMIT $3 OFFSET $5"
            ),
            &[
                &filter.updated_since.unwrap_or(i64::MIN),
                &kinds,
                &(filter.limit as i64),
                &filter.agent_id,
                &(filter.offset as i64),
                &filter.native_active,
            ],
            session_from_row,
        )
        .await
    }

    pub(crate) async fn update_goal_pg(
        &self,
        key: &str,
        agent: &str,
        objective: Option<&str>,
        status: Option<&str>,
        now: Millis,
    ) -> Result<Option<SessionRow>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let before = query_opt(
            &tx,
            &format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE session_key = $1 AND agent_id = $2 FOR UPDATE"
            ),
            &[&key, &agent],
        )
        .await?;
        let Some(before) = before else { return Ok(None) };
        let before = session_from_row(&before)?;
        execute(
            &tx,
            "UPDATE sessions SET goal_objective = $3, goal_status = $4, updated_at = $5 \
             WHERE session_key = $1 AND agent_id = $2",
            &[&key, &agent, &objective, &status, &now],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(before))
    }

    pub(crate) async fn reset_session_pg(
        &self,
        key: &str,
        agent: &str,
        new_id: &str,
        now: Millis,
    ) -> Result<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let n = execute(
            &tx,
            "UPDATE sessions SET session_id = $3, updated_at = $4 WHERE session_key = $1 AND agent_id = $2",
            &[&key, &agent, &new_id, &now],
        )
        .await?;
        execute(&tx, "DELETE FROM session_inbox WHERE session_key = $1 AND agent_id = $2", &[&key, &agent])
            .await?;
        tx.commit().await?;
        Ok(n > 0)
    }

    pub(crate) async fn set_native_state_pg(
        &self,
        key: &str,
        agent: &str,
        cwd: Option<&str>,
        state: Option<&str>,
    ) -> Result<bool> {
        self.changed(
            "UPDATE sessions SET cwd = COALESCE($3, cwd), native_state = COALESCE($4, native_state) \
             WHERE session_key = $1 AND agent_id = $2",
            &[&key, &agent, &cwd, &state],
        )
        .await
    }

    pub(crate) async fn messages_pg(
        &self,
        key: &str,
        agent: &str,
        limit: u32,
    ) -> Result<Vec<TranscriptMessage>> {
        let client = self.client().await?;
        let mut out = query(
            &client,
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM session_messages \
                 WHERE session_key = $1 AND agent_id = $2 ORDER BY id DESC LIMIT $3"
            ),
            &[&key, &agent, &(limit as i64)],
        )
        .await?
        .iter()
        .map(message_from_row)
        .collect::<Result<Vec<_>>>()?;
        out.reverse();
        Ok(out)
    }

    pub(crate) async fn pending_inbox_pg(&self, key: &str, agent: &str) -> Result<Vec<InboxItem>> {
        self.read_all(
            "SELECT id, run_id, from_session, text, created_at FROM session_inbox \
             WHERE session_key = $1 AND agent_id = $2 ORDER BY id",
            &[&key, &agent],
            inbox_from_row,
        )
        .await
    }

    pub(crate) async fn session_activity_pg(
        &self,
        sessions: &[(String, String)],
    ) -> Result<HashMap<(String, String), SessionActivity>> {
        let mut out: HashMap<(String, String), SessionActivity> = HashMap::new();
        if sessions.is_empty() {
            return Ok(out);
        }
        let client = self.client().await?;
        let keys: Vec<&str> = sessions.iter().map(|(k, _)| k.as_str()).collect();
        let agents: Vec<&str> = sessions.iter().map(|(_, a)| a.as_str()).collect();
        let runs = query(
            &client,
            "SELECT q.session_key, q.agent_id, r.status \
             FROM unnest($1::text[], $2::text[]) AS q(session_key, agent_id) \
             CROSS JOIN LATERAL (SELECT status FROM session_runs \
               WHERE session_key = q.session_key AND agent_id = q.agent_id \
               ORDER BY created_at DESC, run_id DESC LIMIT 1) r",
            &[&keys, &agents],
        )
        .await?;
        for r in runs {
            let status: Option<String> = r.try_get(2)?;
            out.entry((r.try_get(0)?, r.try_get(1)?)).or_default().latest_run = Some(status);
        }
        let by_key: HashMap<&str, &(String, String)> = sessions.iter().map(|s| (s.0.as_str(), s)).collect();
        let children = query(
            &client,
            "SELECT spawned_by, session_key FROM sessions WHERE spawned_by = ANY($1::text[]) \
             ORDER BY session_key",
            &[&keys],
        )
        .await?;
        for r in children {
            let parent: String = r.try_get(0)?;
            if let Some(s) = by_key.get(parent.as_str()) {
                out.entry((*s).clone()).or_default().children.push(r.try_get(1)?);
            }
        }
        for a in out.values_mut() {
            a.children.sort();
            a.children.dedup();
        }
        Ok(out)
    }

    pub(crate) async fn take_inbox_pg(&self, key: &str, agent: &str) -> Result<Vec<InboxItem>> {
        let client = self.client().await?;
        let mut items = query(
            &client,
            "DELETE FROM session_inbox WHERE session_key = $1 AND agent_id = $2 \
             RETURNING id, run_id, from_session, text, created_at",
            &[&key, &agent],
        )
        .await?
        .iter()
        .map(inbox_from_row)
        .collect::<Result<Vec<_>>>()?;
        items.sort_by_key(|i| i.id);
        Ok(items)
    }
}
