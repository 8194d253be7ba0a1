//! The gateway: sessions around the kernel, the tools and the host API as domain operations.
//! HTTP and MCP are thin layers over this.

mod home;
mod hooks;
mod host;
pub(crate) mod listing;
mod node_workspaces;
pub(crate) mod nodes;
mod notices;
pub(crate) mod results;
pub(crate) mod tool_args;
pub(crate) mod tool_spec;
mod tools;
pub(crate) mod upstream;
mod workspace;
mod workspace_watch;

pub(crate) use hooks::HookOutcome;
pub(crate) use host::InboundTurn;
pub(crate) use tools::{TOOL_NAMES, WRITING_TOOLS};

use crate::config::{Config, GroupScope, Scope};
use crate::error::{ApiError, ApiResult};
use sessionwatch_core::RecordPolicy;
use sessionwatch_core::{Actor, AgentSessionKey, NewEvent, SessionKind, classify_session_kind};
use sessionwatch_kernel::{Kernel, KernelConfig};
use sessionwatch_store::{NewSession, RetentionPolicy, SessionRow, Store};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::oneshot;

/// A session key resolved for one caller: the canonical key and its owning agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SessionRef {
    pub key: String,
    pub agent_id: String,
}

/// The terminal outcome of a run, as waiters of `sessions_send` see it.
#[derive(Clone, Debug)]
pub(crate) struct RunResult {
    pub status: String,
    pub reply: Option<String>,
}

pub struct Gateway<S: Store> {
    /// The signal log, watches and notices: the gateway reaches the log only through it.
    kernel: Kernel<S>,
    /// The same backend as the kernel's, for what the gateway owns: sessions, their transcript, inbox
    /// and runs, upstream links and nodes.
    store: S,
    config: Config,
    waiters: Mutex<HashMap<String, Vec<oneshot::Sender<RunResult>>>>,
    /// Background work (run timeouts) holds the gateway through this.
    me: Weak<Gateway<S>>,
    /// Where the native stores of Claude Code, Codex, OpenCode, Pi and Gemini CLI live (`Homes::from_env` at start).
    homes: Mutex<sessionwatch_upstream::Homes>,
    /// The upstream monitor's single flight and the watched links it holds.
    monitor: upstream::MonitorState,
    /// Recent MCP tool calls announced by Claude Code `PreToolUse` hooks: tool-use id → session key.
    tool_uses: Mutex<std::collections::VecDeque<(String, String)>>,
    /// What remote nodes last reported (`nodes.rs`).
    nodes: nodes::NodeState,
    /// Workspace members, pending edits, followed git dirs (`workspace.rs`).
    workspaces: workspace::WorkspaceState,
}

pub(crate) const DEFAULT_AGENT: &str = "main";
const MAX_KEY_LEN: usize = 512;

impl<S: Store> Gateway<S> {
    /// Starts the kernel (sweep + prune) on `store` and wraps it: one gateway on its own store.
    pub async fn start(
        store: S,
        config: Config,
        clock: Arc<dyn sessionwatch_core::Clock>,
    ) -> Arc<Gateway<S>> {
        Gateway::start_shared(store, config, clock, "sessionwatch".into(), None).await
    }

    /// Starts a gateway that may share its store with others: `store_identity` binds cursors to the
    /// store, `host_id` (stable across restarts) names this gateway as the host of the sessions it
    /// serves, so notices for them are pushed here.
    pub async fn start_shared(
        store: S,
        config: Config,
        clock: Arc<dyn sessionwatch_core::Clock>,
        store_identity: String,
        host_id: Option<String>,
    ) -> Arc<Gateway<S>> {
        let kernel_config = KernelConfig {
            store_identity,
            host_id,
            retention: RetentionPolicy {
                max_age_ms: config.retention_days as i64 * sessionwatch_core::DAY_MS,
                max_rows: config.retention_max_rows,
            },
            main_key: config.main_key.clone(),
            ..KernelConfig::default()
        };
        let kernel = Kernel::start(store.clone(), clock, kernel_config).await;
        let gateway = Arc::new_cyclic(|me| Gateway {
            kernel,
            store,
            config,
            waiters: Mutex::new(HashMap::new()),
            me: me.clone(),
            homes: Mutex::new(sessionwatch_upstream::Homes::from_env()),
            monitor: upstream::MonitorState::default(),
            tool_uses: Mutex::default(),
            nodes: nodes::NodeState::default(),
            workspaces: workspace::WorkspaceState::default(),
        });
        gateway.resume_workspaces().await;
        gateway
    }

    fn self_arc(&self) -> Option<Arc<Gateway<S>>> {
        self.me.upgrade()
    }

    pub fn kernel(&self) -> &Kernel<S> {
        &self.kernel
    }

    /// The sessions (with transcript, inbox, runs) and links this gateway holds; the log is the kernel's.
    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    fn now(&self) -> i64 {
        self.kernel.now()
    }

    /// The agent a caller acts as: the agent of its key, or `main`.
    pub(crate) fn caller_agent(raw_caller: &str) -> String {
        AgentSessionKey::parse(raw_caller)
            .map_or_else(|| DEFAULT_AGENT.to_string(), |k| k.agent_id().to_string())
    }

    /// Resolves a key given by `agent_id`'s caller: `main` is that agent's main key (or `global` under the
    /// global scope); agent-qualified keys are canonical lower case; under `groupScope: main` a group key
    /// routes into the main session; other bare keys stay bare, owned by the caller's agent.
    pub(crate) fn resolve(&self, raw: &str, agent_id: &str) -> ApiResult<SessionRef> {
        self.resolve_with(raw, || agent_id.to_string())
    }

    /// [`resolve`](Self::resolve) with the caller's agent worked out only for a key that needs it (`main`,
    /// `global`, a bare key): an agent-qualified key names its own.
    pub(crate) fn resolve_with(&self, raw: &str, agent_id: impl FnOnce() -> String) -> ApiResult<SessionRef> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(ApiError::invalid("sessionKey must not be empty"));
        }
        if raw.len() > MAX_KEY_LEN || raw.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(ApiError::invalid(format!("invalid session key {raw:?}")));
        }
        let lower = raw.to_ascii_lowercase();
        if lower == "main" || (self.config.scope == Scope::Global && lower == "global") {
            let agent_id = agent_id();
            return Ok(match self.config.scope {
                Scope::Global => SessionRef { key: "global".into(), agent_id },
                Scope::PerSender => {
                    SessionRef { key: AgentSessionKey::build(&agent_id, &self.config.main_key), agent_id }
                }
            });
        }
        if lower.starts_with("agent:") {
            let key = AgentSessionKey::parse(&lower).ok_or_else(|| {
                ApiError::invalid(format!("invalid session key {raw:?}: expected agent:<agentId>:<rest>"))
            })?;
            if self.config.group_scope == GroupScope::Main
                && classify_session_kind(key.as_str(), None, &self.config.main_key) == SessionKind::Group
            {
                return Ok(SessionRef {
                    key: AgentSessionKey::build(key.agent_id(), &self.config.main_key),
                    agent_id: key.agent_id().to_string(),
                });
            }
            return Ok(SessionRef { key: key.as_str().to_string(), agent_id: key.agent_id().to_string() });
        }
        Ok(SessionRef { key: lower, agent_id: agent_id() })
    }

    /// Resolves the caller's own key (default `main`).
    pub(crate) fn resolve_caller(&self, raw: Option<&str>) -> ApiResult<SessionRef> {
        let raw = raw.unwrap_or("main");
        self.resolve_with(raw, || Self::caller_agent(raw))
    }

    pub(crate) async fn session(&self, r: &SessionRef) -> ApiResult<Option<SessionRow>> {
        Ok(self.store.get_session(r.key.clone(), r.agent_id.clone()).await?)
    }

    pub(crate) async fn require_session(&self, r: &SessionRef) -> ApiResult<SessionRow> {
        self.session(r).await?.ok_or_else(|| ApiError::NotFound(format!("unknown session \"{}\"", r.key)))
    }

    /// The home (main) session key of an agent.
    pub(crate) fn home_key(&self, agent_id: &str) -> String {
        match self.config.scope {
            Scope::Global => "global".into(),
            Scope::PerSender => AgentSessionKey::build(agent_id, &self.config.main_key),
        }
    }

    /// Creates the session if it does not exist: records `created` and queues the Home notice on first
    /// creation. Answers the row and whether it was created now.
    pub(crate) async fn ensure_session(
        &self,
        r: &SessionRef,
        spec: SessionSpec<'_>,
    ) -> ApiResult<(SessionRow, bool)> {
        if let Some(row) = self.session(r).await? {
            return Ok((row, false));
        }
        let kind = classify_session_kind(&r.key, spec.chat_type, &self.config.main_key);
        let new = NewSession {
            session_key: r.key.clone(),
            agent_id: r.agent_id.clone(),
            session_id: uuid::Uuid::new_v4().to_string(),
            kind: kind.as_str().to_string(),
            chat_type: spec.chat_type.map(str::to_string),
            channel: spec.channel.map(str::to_string),
            label: spec.label.map(str::to_string),
            spawned_by: spec.spawned_by.map(str::to_string),
            created_via: spec.created_via.map(str::to_string),
            host_id: self.kernel.config().host_id.clone(),
        };
        let (row, created) = self.store.ensure_session(new, self.now()).await?;
        if created {
            let actor = spec.creator.clone().unwrap_or_else(Actor::system);
            let event = NewEvent::created(&row.session_key, &row.agent_id, &row.session_id, actor.clone());
            self.kernel.record(event, RecordPolicy::always()).await;
            self.home_notice(&row, kind, &spec).await;
        }
        Ok((row, created))
    }

    /// Waits for a run's terminal outcome.
    fn wait_for_run(&self, run_id: &str) -> oneshot::Receiver<RunResult> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(run_id.to_string())
            .or_default()
            .push(tx);
        rx
    }

    fn finish_waiters(&self, run_id: &str, result: RunResult) {
        let waiters = self.waiters.lock().unwrap_or_else(|p| p.into_inner()).remove(run_id);
        for w in waiters.into_iter().flatten() {
            let _ = w.send(result.clone());
        }
    }
}

/// What a caller knows about a session it creates.
#[derive(Clone, Debug, Default)]
pub(crate) struct SessionSpec<'a> {
    pub chat_type: Option<&'a str>,
    pub channel: Option<&'a str>,
    pub label: Option<&'a str>,
    pub spawned_by: Option<&'a str>,
    pub created_via: Option<&'a str>,
    pub creator: Option<Actor>,
    /// Creator label, shown in the Home notice.
    pub creator_label: Option<&'a str>,
    /// Drafts and incognito sessions never reach Home.
    pub quiet: bool,
}
