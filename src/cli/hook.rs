//! `sessionwatch hook <event>`: the one command Claude Code and Codex hooks run.
//!
//! It reads the hook's JSON from stdin, forwards it to the running gateway (`POST /v1/hooks`) and prints
//! what that CLI expects. It must never break or slow the agent: whatever goes wrong (gateway down, bad
//! input, timeout) it prints nothing on stdout, one line on stderr, and exits 0 — a non-zero exit is
//! something both CLIs may act on (exit 2 blocks a prompt).

use clap::Args;
use serde_json::{Value, json};
use sessionwatch_upstream::hook::{HookCli, HookReply, MAX_INPUT_BYTES, parse_input, render_output};
use std::process::ExitCode;
use std::time::Duration;
use tokio::io::AsyncReadExt;

#[derive(Args, Debug)]
pub struct HookArgs {
    /// The hook event: SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, SubagentStart or
    /// SubagentStop.
    event: String,
    /// Which CLI runs the hook: claude or codex (default: detected from the input).
    #[arg(long = "agent")]
    cli: Option<String>,
    /// The sessionwatch agent that owns the session (default main): `agent:<id>:<cli>:<session id>`.
    #[arg(long)]
    agent_id: Option<String>,
    /// This machine is the remote node NAME of a central gateway: the session is the node's
    /// (`agent:<id>:<cli>@NAME:<session id>`), which that node's monitor watches.
    #[arg(long, env = "SESSIONWATCH_NODE")]
    node: Option<String>,
    /// Gateway URL.
    #[arg(long, env = "SESSIONWATCH_URL", default_value = "http://127.0.0.1:7420")]
    url: String,
    /// Bearer token (default: read from the data dir).
    #[arg(long, env = "SESSIONWATCH_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Data dir holding the token.
    #[arg(long, env = "SESSIONWATCH_DATA_DIR")]
    data_dir: Option<std::path::PathBuf>,
    /// Give up after this long in all (reading stdin, the gateway call), in milliseconds.
    #[arg(long, env = "SESSIONWATCH_HOOK_TIMEOUT_MS", default_value_t = 1000)]
    timeout_ms: u64,
}

pub async fn run(args: HookArgs) -> anyhow::Result<ExitCode> {
    let timeout = Duration::from_millis(args.timeout_ms.clamp(1, 60_000));
    match tokio::time::timeout(timeout, answer(&args)).await {
        Ok(Ok(Some(out))) => println!("{out}"),
        Ok(Ok(None)) => {}
        Ok(Err(e)) => eprintln!("sessionwatch hook {}: {e:#}", args.event),
        Err(_) => eprintln!("sessionwatch hook {}: gave up after {} ms", args.event, timeout.as_millis()),
    }
    Ok(ExitCode::SUCCESS)
}

/// The output to print, if any.
async fn answer(args: &HookArgs) -> anyhow::Result<Option<String>> {
    let cli = match &args.cli {
        Some(c) => Some(
            HookCli::parse(c).ok_or_else(|| anyhow::anyhow!("--agent must be claude or codex, not {c:?}"))?,
        ),
        None => None,
    };
    let mut stdin = Vec::new();
    tokio::io::stdin().take(MAX_INPUT_BYTES as u64 + 1).read_to_end(&mut stdin).await?;
    let claude_session = std::env::var("CLAUDE_CODE_SESSION_ID").ok();
    let input = parse_input(&stdin, Some(&args.event), cli, claude_session.as_deref())?;
    let raw: Value = serde_json::from_slice(&stdin)?;
    let token = match &args.token {
        Some(t) => Some(t.clone()),
        None => {
            let dir = args.data_dir.clone().unwrap_or_else(super::default_data_dir);
            sessionwatch_server::auth::read_token(&dir)?
        }
    };
    let mut body = json!({ "cli": input.cli.as_str(), "event": input.event.as_str(), "input": raw });
    if let Some(a) = &args.agent_id {
        body["agentId"] = a.clone().into();
    }
    if let Some(n) = &args.node {
        body["node"] = n.clone().into();
    }
    // No client timeout of its own: the caller bounds the whole hook (stdin, connect, answer) once.
    let http = reqwest::Client::new();
    let mut req = http.post(format!("{}/v1/hooks", args.url.trim_end_matches('/'))).json(&body);
    if let Some(t) = &token {
        req = req.bearer_auth(t);
    }
    let resp =
        req.send().await.map_err(|e| anyhow::anyhow!("cannot reach the gateway at {}: {e}", args.url))?;
    let status = resp.status();
    let answer: Value = resp.json().await?;
    if !status.is_success() {
        let message = answer.pointer("/error/message").and_then(Value::as_str).unwrap_or("no message");
        anyhow::bail!("the gateway answered {status}: {message}");
    }
    let text = |k: &str| answer.get(k).and_then(Value::as_str).map(str::to_string);
    let reply = HookReply { context: text("additionalContext"), block: text("block") };
    Ok(render_output(input.cli, input.event, &reply))
}
