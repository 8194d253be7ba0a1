//! Claude Code, Codex and Gemini CLI hooks (`POST /v1/hooks`, called by `sessionwatch hook <event>`) and
//! OpenCode's sessionwatch plugin (which posts there itself): a native session is adopted when it starts
//! (OpenCode: at its first event), a typed prompt is recorded at once, and the session's pending notices
//! reach the model inside its own turn.
//!
//! The session is the adopted one, `agent:<agent>:<claude|codex|gemini>:<session id>`: the same key as
//! `catalog continue`, so the file monitor, the catalog and the hooks all speak of one session.
//!
//! Pi's extension posts the same shapes (`cli: "pi"`): `UserPromptSubmit` records a typed prompt with the
//! user message's timestamp as its turn id and drains nothing (Pi stamps the message only after
//! `before_agent_start`, its `BeforeAgent`, which drains); its `SessionStart` only adopts.
//!
//! Gemini's `BeforeAgent` is its `UserPromptSubmit` and `AfterTool` its `PostToolUse`; its
//! `SessionStart` only adopts (context answered there is lost on a resume, so notices wait for the
//! prompt), and as Gemini gives hooks no message id the prompt's turn id is derived from the session's
//! file, the way the monitor will read it (`gemini::turn_id_now`).

use super::{Gateway, SessionRef, SessionSpec};
use crate::error::{ApiError, ApiResult};
use crate::node_protocol::HookWorkspace;
use sessionwatch_core::{Actor, AgentSessionKey, NewEvent, QueuedEvent, RunStatus, is_valid_agent_id};
use sessionwatch_core::{HumanTurnSource, RecordPolicy};
use sessionwatch_store::Store;
use sessionwatch_upstream::codex;
use sessionwatch_upstream::hook::{HookCli, HookEvent, HookInput, HookReply, Origin};
use sessionwatch_upstream::text::{NormText, OwnTexts};
use std::sync::Arc;

/// What a hook call did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HookOutcome {
    pub session_key: String,
    pub reply: HookReply,
    /// `UserPromptSubmit` / `BeforeAgent`: a human turn was recorded (false: our own echo, already
    /// recorded, or left to the file monitor).
    pub recorded: bool,
}

const CONTEXT_HEADER: &str = "sessionwatch: sessions you depend on changed (each notice is shown once and is now \
     acknowledged; reconcile with session_status changesSince before you rely on them):";
const STOP_HEADER: &str = "sessionwatch: before you finish, sessions you depend on changed while you worked \
     (each notice is shown once and is now acknowledged). Reconcile with session_status changesSince, then finish:";

impl<S: Store> Gateway<S> {
    /// Handles one hook of a Claude Code, Codex or Gemini session run by `agent` (default `main`), on this
    /// gateway's machine or, with `node`, on that remote node (then the session is the node's, the
    /// one its monitor reports on, so hooks and node speak of one session, and `workspace` is the
    /// worktree its cwd lies in, as the node resolved it).
    pub(crate) async fn hook(
        self: &Arc<Self>,
        input: &HookInput,
        agent: Option<&str>,
        node: Option<&str>,
        workspace: Option<&HookWorkspace>,
    ) -> ApiResult<HookOutcome> {
        let agent =
            agent.map(|a| a.trim().to_ascii_lowercase()).unwrap_or_else(|| super::DEFAULT_AGENT.into());
        if !is_valid_agent_id(&agent) {
            return Err(ApiError::invalid(format!("agentId \"{agent}\" is not a valid agent id")));
        }
        let catalog = input.cli.catalog();
        if node.is_some_and(|n| !super::nodes::is_valid_node_name(n)) {
            return Err(ApiError::invalid(format!("node {node:?} is not a node name")));
        }
        let workspace = node_workspace(node, workspace)?;
        let r = self.adopted_ref(&agent, catalog, &input.session_id, node)?;
        let mut outcome =
            HookOutcome { session_key: r.key.clone(), reply: HookReply::default(), recorded: false };
        tracing::debug!(session = %r.key, event = ?input.event, turn = ?input.turn_id, "hook call");
        if input.origin == Origin::SubAgent {
            // An OpenCode sub-agent's own session: not adopted (the catalog lists top-level sessions
            // only), its prompts are the agent's; the parent's turn gets the notices.
            return Ok(outcome);
        }
        // Before the drain, so this turn's notice includes what the other members just did. A node's
        // cwd is on the node: only the workspace the node resolved can be joined (an older node's hook
        // sends none).
        if node.is_none() || workspace.is_some() {
            self.workspace_hook(&r, input, workspace).await;
        }
        self.answer_hook(&r, input, node, &mut outcome).await?;
        let state = native_state_after(input.event, outcome.reply.block.is_some());
        if let Err(e) = self.note_native(&r, input.cwd.as_deref(), state).await {
            // What the session is doing is shown, never relied on: the hook's own work stands.
            tracing::warn!(session = %r.key, "cannot note the session's state: {e}");
        }
        Ok(outcome)
    }

    /// What one hook event does to the session `r` (adopts it, records a prompt, takes its notices) and
    /// what the hook answers the CLI (`outcome`).
    async fn answer_hook(
        self: &Arc<Self>,
        r: &SessionRef,
        input: &HookInput,
        node: Option<&str>,
        outcome: &mut HookOutcome,
    ) -> ApiResult<()> {
        match input.event {
            HookEvent::SessionStart => {
                self.adopt_hooked(r, input, node).await?;
                // Gemini drops a prompt carrying SessionStart context from every resumed history, and
                // Pi's session_start cannot answer any: their notices stay queued for BeforeAgent.
                if !matches!(input.cli, HookCli::Gemini | HookCli::Pi) {
                    outcome.reply.context = self.drain_context(r).await;
                }
            }
            HookEvent::UserPromptSubmit | HookEvent::BeforeAgent => {
                self.adopt_hooked(r, input, node).await?;
                if input.prompt.is_some() {
                    outcome.recorded = self.record_prompt(r, input).await?;
                }
                // Pi's prompt is posted after its before_agent_start took the notices: nothing can
                // carry them to the model from there.
                if !(input.cli == HookCli::Pi && input.event == HookEvent::UserPromptSubmit) {
                    outcome.reply.context = self.drain_context(r).await;
                }
            }
            HookEvent::BeforeTool => {
                if let Some(id) = &input.tool_use_id {
                    self.remember_tool_use(id, &r.key);
                }
            }
            HookEvent::PreToolUse => {
                if let (Some(tool), Some(id)) = (&input.tool_name, &input.tool_use_id)
                    && tool.starts_with("mcp__")
                {
                    self.remember_tool_use(id, &r.key);
                }
            }
            HookEvent::PostToolUse | HookEvent::AfterTool => {
                // The OpenCode plugin has no session-start event: its first event adopts.
                if input.cli == HookCli::OpenCode {
                    self.adopt_hooked(r, input, node).await?;
                }
                outcome.reply.context = self.drain_context(r).await
            }
            HookEvent::Stop => {
                // Block once: the drain acknowledges, so the next Stop finds nothing; and never while
                // the CLI is already continuing because of a stop hook.
                if !input.stop_hook_active && self.has_session_notice(r) {
                    outcome.reply.block = self.drain_text(r, STOP_HEADER).await;
                }
            }
            HookEvent::SubagentStart => self.subagent_started(r, input, node).await?,
            HookEvent::SubagentStop => self.subagent_stopped(input).await?,
            HookEvent::SessionEnd => {}
        }
        Ok(())
    }

    /// Writes the working directory and state a hook reported, when they differ from the row's (a
    /// hook's common path reads the row and writes nothing). A session not adopted yet is left be.
    pub(super) async fn note_native(
        &self,
        r: &SessionRef,
        cwd: Option<&str>,
        state: Option<NativeState>,
    ) -> ApiResult<()> {
        let store = &self.store;
        let Some(row) = store.get_session(r.key.clone(), r.agent_id.clone()).await? else { return Ok(()) };
        let cwd = cwd.filter(|c| !c.is_empty() && row.cwd.as_deref() != Some(*c));
        let state = state.map(NativeState::as_str).filter(|s| row.native_state.as_deref() != Some(*s));
        if cwd.is_none() && state.is_none() {
            return Ok(());
        }
        store
            .set_native_state(
                r.key.clone(),
                r.agent_id.clone(),
                cwd.map(str::to_string),
                state.map(str::to_string),
            )
            .await?;
        Ok(())
    }

    /// Adopts the session from the transcript the hook names, unless it is already linked (then
    /// nothing is written: a hook's common path is one read).
    async fn adopt_hooked(&self, r: &SessionRef, input: &HookInput, node: Option<&str>) -> ApiResult<()> {
        let store = &self.store;
        if store.get_link(r.key.clone(), r.agent_id.clone()).await?.is_some() {
            return Ok(());
        }
        // On a registered node the transcript is that machine's: the node takes the baseline.
        if let Some(n) = node
            && self.node_is_registered(n).await?
        {
            self.continue_on_node(input.cli.catalog(), &input.session_id, &r.agent_id, n).await?;
            return Ok(());
        }
        let path = if node.is_some() { None } else { input.transcript_path.clone() };
        let Some(path) = path else {
            // Without a transcript there is nothing to monitor: the session still exists.
            self.ensure_session(
                r,
                SessionSpec {
                    channel: Some(input.cli.as_str()),
                    created_via: Some("hook"),
                    creator: Some(Actor::system()),
                    creator_label: Some(input.cli.as_str()),
                    ..SessionSpec::default()
                },
            )
            .await?;
            return Ok(());
        };
        let (catalog, thread) = (input.cli.catalog(), input.session_id.clone());
        let adoption = tokio::task::spawn_blocking(move || {
            sessionwatch_upstream::adopt_transcript(catalog, &thread, std::path::Path::new(&path))
        })
        .await
        .map_err(|e| ApiError::Internal(format!("adoption failed: {e}")))?
        .map_err(|e| ApiError::invalid(format!("cannot adopt the session's transcript: {e}")))?;
        let (r, _, link) = self.link_adoption(&r.agent_id, catalog, &input.session_id, &adoption).await?;
        tracing::info!(session = %r.key, link = link.0, "session adopted by its hook");
        Ok(())
    }

    /// Records the typed prompt as `human_direct_message` unless it is a text we delivered ourselves.
    /// The dedupe key is the one the file monitor derives for the same turn.
    async fn record_prompt(&self, r: &SessionRef, input: &HookInput) -> ApiResult<bool> {
        if input.origin != Origin::Typed {
            // Another program's prompt or the CLI's own: the file monitor counts what it can tell.
            return Ok(false);
        }
        let prompt = input.prompt.as_deref().unwrap_or("");
        let own = self.own_user_texts(r).await?;
        let text = NormText::of(prompt);
        if text.is_empty() || !OwnTexts::new(&own).is_external(&text) {
            return Ok(false);
        }
        let turn_id = match input.cli {
            HookCli::Gemini => match self.gemini_turn_id(r, prompt).await? {
                GeminiTurn::Derived(t) => Some(t),
                GeminiTurn::Unwatched => None,
                // Recorded without the monitor's key it would be counted twice: the monitor has it.
                GeminiTurn::LeftToMonitor => return Ok(false),
            },
            HookCli::Codex => input.turn_id.as_deref().map(|t| codex::human_turn_key(t, &text)),
            HookCli::Claude | HookCli::OpenCode | HookCli::Pi => input.turn_id.clone(),
        };
        let row = self.require_session(r).await?;
        let event = NewEvent::human_message(&r.key, &r.agent_id, input.cli.as_str(), None)
            .with_session_id(Some(row.session_id))
            .with_dedupe_key(turn_id.as_deref().map(|t| NewEvent::human_turn_dedupe_key(&r.key, t)));
        Ok(matches!(
            self.kernel.record(event, RecordPolicy::human_turn(HumanTurnSource::Adopted, None)).await,
            sessionwatch_kernel::RecordOutcome::Recorded(_)
        ))
    }

    /// The turn id the file monitor will read for this Gemini prompt, from the session's link (its file
    /// and how far the monitor read it).
    async fn gemini_turn_id(&self, r: &SessionRef, prompt: &str) -> ApiResult<GeminiTurn> {
        let Some(link) = self.store.get_link(r.key.clone(), r.agent_id.clone()).await? else {
            return Ok(GeminiTurn::Unwatched);
        };
        let prompt = prompt.to_string();
        let derived = tokio::task::spawn_blocking(move || {
            sessionwatch_upstream::gemini::turn_id_now(&link.reference_json, &link.marker_json, &prompt)
        })
        .await
        .map_err(|e| ApiError::Internal(format!("cannot derive the turn id: {e}")))?;
        Ok(derived.map_or(GeminiTurn::LeftToMonitor, GeminiTurn::Derived))
    }

    fn has_session_notice(&self, r: &SessionRef) -> bool {
        self.kernel.peek(&r.key).iter().any(|e| e.notice.is_some())
    }

    async fn drain_context(&self, r: &SessionRef) -> Option<String> {
        self.drain_text(r, CONTEXT_HEADER).await
    }

    /// Drains (and acknowledges) the session's queue exactly as a turn does; `None` when it was empty.
    async fn drain_text(&self, r: &SessionRef, header: &str) -> Option<String> {
        if self.kernel.peek(&r.key).is_empty() {
            return None;
        }
        let drained: Vec<QueuedEvent> = self.kernel.drain(&r.key).await;
        if drained.is_empty() {
            return None;
        }
        let lines: Vec<String> = drained.iter().map(|e| format!("- {}", e.text)).collect();
        Some(format!("{header}\n{}", lines.join("\n")))
    }

    /// A native sub-agent is a spawn edge: a child session spawned by this one, with `child_spawned`
    /// seeding the parent's watch and a run that its `SubagentStop` finishes.
    async fn subagent_started(
        &self,
        parent: &SessionRef,
        input: &HookInput,
        node: Option<&str>,
    ) -> ApiResult<()> {
        self.adopt_hooked(parent, input, node).await?;
        let sub = input.subagent_id.as_deref().unwrap_or_default();
        let child =
            SessionRef { key: subagent_key(&parent.agent_id, input, sub), agent_id: parent.agent_id.clone() };
        let (row, _) = self
            .ensure_session(
                &child,
                SessionSpec {
                    label: input.subagent_type.as_deref(),
                    spawned_by: Some(&parent.key),
                    created_via: Some("hook"),
                    creator: Some(Actor::agent(parent.key.clone())),
                    ..SessionSpec::default()
                },
            )
            .await?;
        let run_id = subagent_run_id(input, sub);
        if self.store.get_run(run_id.clone()).await?.is_none() {
            self.create_run(&run_id, &row, &parent.key, true).await?;
        }
        let spawned = NewEvent::child_spawned(&row.session_key, &row.agent_id, &parent.key, &run_id)
            .with_session_id(Some(row.session_id.clone()));
        self.kernel.record(spawned, RecordPolicy::spawned_by(parent.key.clone())).await;
        Ok(())
    }

    /// The sub-agent's run completes (once; a stop without a start is ignored).
    async fn subagent_stopped(self: &Arc<Self>, input: &HookInput) -> ApiResult<()> {
        let run_id = subagent_run_id(input, input.subagent_id.as_deref().unwrap_or_default());
        match self.run_result(&run_id, RunStatus::Ok, None, None).await {
            Ok(_) | Err(ApiError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The worktree a node's hook names, checked (only a node's hook names one: a local cwd is resolved here).
fn node_workspace<'a>(
    node: Option<&'a str>,
    workspace: Option<&'a HookWorkspace>,
) -> ApiResult<Option<(&'a str, &'a HookWorkspace)>> {
    match (node, workspace) {
        (Some(n), Some(w)) => {
            w.check().map_err(ApiError::invalid)?;
            Ok(Some((n, w)))
        }
        (None, Some(_)) => Err(ApiError::invalid("workspace: only a node's hook names its workspace")),
        (_, None) => Ok(None),
    }
}

/// A Gemini prompt's turn id, as the hook can know it.
enum GeminiTurn {
    /// The id the monitor will read for the same row.
    Derived(String),
    /// The session has no file to monitor: no other reader, no key needed.
    Unwatched,
    /// The file cannot be read here (a remote node's, or unreadable): only the monitor can key it.
    LeftToMonitor,
}

/// What a native CLI session is doing, as its hooks tell (`SessionRow::native_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NativeState {
    /// A turn is under way.
    Running,
    /// A turn ended: the user's move.
    Waiting,
    /// The CLI session ended.
    Idle,
}

impl NativeState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NativeState::Running => "running",
            NativeState::Waiting => "waiting",
            NativeState::Idle => "idle",
        }
    }
}

/// The state a hook event leaves its session in (`None`: it says nothing about it). A session that
/// starts (or resumes) waits for its user; a prompt or a tool call is a turn under way; a `Stop` that
/// we blocked goes on working.
fn native_state_after(event: HookEvent, blocked: bool) -> Option<NativeState> {
    match event {
        HookEvent::SessionStart => Some(NativeState::Waiting),
        HookEvent::UserPromptSubmit
        | HookEvent::BeforeAgent
        | HookEvent::PreToolUse
        | HookEvent::BeforeTool
        | HookEvent::PostToolUse
        | HookEvent::AfterTool => Some(NativeState::Running),
        HookEvent::Stop if blocked => Some(NativeState::Running),
        HookEvent::Stop => Some(NativeState::Waiting),
        HookEvent::SessionEnd => Some(NativeState::Idle),
        HookEvent::SubagentStart | HookEvent::SubagentStop => None,
    }
}

/// Tool-use ids remembered for the MCP identity join (a few seconds' worth of MCP calls is plenty: the
/// MCP call follows its `PreToolUse` hook at once).
const TOOL_USES_KEPT: usize = 1024;

impl<S: Store> Gateway<S> {
    fn remember_tool_use(&self, tool_use_id: &str, session_key: &str) {
        let mut uses = self.tool_uses.lock().unwrap_or_else(|p| p.into_inner());
        if uses.len() == TOOL_USES_KEPT {
            uses.pop_front();
        }
        uses.push_back((tool_use_id.to_string(), session_key.to_string()));
    }

    /// The session whose Claude Code `PreToolUse` hook announced this MCP tool call: the MCP server
    /// learns its caller from `_meta["claudecode/toolUseId"]` even after `/clear` (when the stdio
    /// server's environment still names the old session).
    pub(crate) fn session_of_tool_use(&self, tool_use_id: &str) -> Option<String> {
        let uses = self.tool_uses.lock().unwrap_or_else(|p| p.into_inner());
        uses.iter().rev().find(|(id, _)| id == tool_use_id).map(|(_, key)| key.clone())
    }
}

/// `agent:<agent>:subagent:<cli>-<sub-agent id>`: a sub-agent key, so it is treated like any spawned
/// child (nested sub-agents are not woken).
fn subagent_key(agent: &str, input: &HookInput, sub: &str) -> String {
    AgentSessionKey::build_subagent(agent, &format!("{}-{}", input.cli.as_str(), sub.to_ascii_lowercase()))
}

fn subagent_run_id(input: &HookInput, sub: &str) -> String {
    format!("{}-subagent-{}-{}", input.cli.as_str(), input.session_id, sub)
}
