//! The catalog API: listing the native sessions (here and on nodes) and adopting one.

use super::adopted_key;
use crate::error::{ApiError, ApiResult};
use crate::gateway::{DEFAULT_AGENT, Gateway, nodes};
use crate::node_protocol::RemoteEntry;
use sessionwatch_store::Store;
use sessionwatch_upstream::{CatalogEntry, CatalogId, UpstreamError};

/// `GET /v1/catalog`: each native session with the key of its adopted session, if linked.
#[derive(Clone, Debug, Default)]
pub(crate) struct CatalogListing {
    pub local: Vec<(CatalogEntry, Option<String>)>,
    /// (node, entry, adopted key) of the nodes' sessions (`all=true`).
    pub remote: Vec<(String, RemoteEntry, Option<String>)>,
}

/// `POST /v1/catalog/continue`: the adopted session.
#[derive(Clone, Debug)]
pub struct Adopted {
    pub session_key: String,
    pub session_id: String,
    pub agent_id: String,
    pub catalog: CatalogId,
    pub thread_id: String,
    pub created: bool,
    /// `adopted` was recorded now (the first adoption of this key).
    pub adopted: bool,
    /// `created`, `kept` or `rebaselined`.
    pub link: &'static str,
    /// Set for a session on a remote node.
    pub remote: Option<RemoteAdoption>,
}

/// Where a remote adoption stands.
#[derive(Clone, Debug)]
pub struct RemoteAdoption {
    pub node: String,
    /// `pending` until the node took the baseline, then `done`.
    pub baseline: &'static str,
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
    /// `GET /v1/catalog`: every native session on this machine, newest first, with the key of the
    /// adopted session when it is linked (under any agent's default key `agent:main:…`).
    pub(crate) async fn catalog(&self, with_nodes: bool) -> ApiResult<CatalogListing> {
        let homes = self.homes();
        let entries =
            tokio::task::spawn_blocking(move || sessionwatch_upstream::discover(&homes, &mut |_, _| {}))
                .await
                .map_err(|e| ApiError::Internal(format!("catalog discovery failed: {e}")))?;
        let store = &self.store;
        let mut listing = CatalogListing::default();
        for e in entries {
            let key = adopted_key(DEFAULT_AGENT, e.catalog_id, &e.thread_id);
            let linked = store.get_link(key.clone(), DEFAULT_AGENT.to_string()).await?;
            listing.local.push((e, linked.map(|_| key)));
        }
        if with_nodes {
            for (node, e) in self.remote_catalog() {
                let Some(catalog) = CatalogId::parse(&e.catalog_id) else { continue };
                let key = nodes::remote_key(DEFAULT_AGENT, catalog, &node, &e.thread_id);
                let linked = store.get_link(key.clone(), DEFAULT_AGENT.to_string()).await?;
                listing.remote.push((node, e, linked.map(|_| key)));
            }
        }
        Ok(listing)
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
    ) -> ApiResult<Adopted> {
        let catalog = CatalogId::parse(catalog_id).ok_or_else(|| {
            ApiError::invalid(format!(
                "unknown catalogId {catalog_id:?}: expected claude, codex, opencode or pi"
            ))
        })?;
        let agent = nodes::adoption_agent(agent_id)?;
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
        Ok(Adopted {
            session_key: r.key,
            session_id: created.session_id,
            agent_id: r.agent_id,
            catalog,
            thread_id: adoption.entry.thread_id,
            created: created.created,
            adopted: created.adopted,
            link: link.0,
            remote: None,
        })
    }
}
