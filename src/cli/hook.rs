//! `sessionwatch hook <event>`: the one command Claude Code, Codex and Gemini CLI hooks run.
//!
//! It reads the hook's JSON from stdin, forwards it to the running gateway (`POST /v1/hooks`) and prints
//! what that CLI expects. It must never break or slow the agent: whatever goes wrong (gateway down, bad
//! input, timeout) it prints one line on stderr and exits 0 — a non-zero exit is something the CLIs may
//! act on (exit 2 blocks a prompt). Stderr is shown by neither CLI, so when the gateway cannot be reached
//! (or refuses the token) the user also gets one `systemMessage` line, once per session per outage
//! (`hook_outage`): the CLIs show it to the user, not to the model (Gemini reads `systemMessage` too; not observed).

use clap::Args;
use serde_json::value::RawValue;
use sessionwatch_server::discovery::UrlSource;
use sessionwatch_server::hook_protocol::{HookAnswer, HookRequest};
use sessionwatch_server::host_protocol::ErrorBodyJson;
use sessionwatch_server::node_protocol::{HookWorkspace, MAX_HOOK_PATHS};
use sessionwatch_upstream::hook::{
    HookCli, HookInput, HookReply, MAX_INPUT_BYTES, parse_input, render_output, render_system_message,
};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct HookArgs {
    /// The hook event: SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, SubagentStart,
    /// SubagentStop, SessionEnd (Claude, Codex); SessionStart, BeforeAgent, AfterTool, SessionEnd (Gemini).
    event: String,
    /// Which CLI runs the hook: claude, codex or gemini (default: detected from the input).
    #[arg(long = "agent")]
    cli: Option<String>,
    /// The sessionwatch agent that owns the session (default main): `agent:<id>:<cli>:<session id>`.
    #[arg(long)]
    agent_id: Option<String>,
    /// This machine is the remote node NAME of a central gateway: the session is the node's
    /// (`agent:<id>:<cli>@NAME:<session id>`), which that node's monitor watches.
    #[arg(long, env = "SESSIONWATCH_NODE")]
    node: Option<String>,
    /// Gateway URL [default: $SESSIONWATCH_URL, else the running gateway's runtime file in the data
    /// dir, else the config's listen address, else http://127.0.0.1:7420].
    #[arg(long)]
    url: Option<String>,
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
    let deadline = tokio::time::Instant::now() + timeout;
    let gave_up = || anyhow::anyhow!("gave up after {} ms", timeout.as_millis());
    let call = match prepare(&args, deadline, timeout) {
        Ok(call) => call,
        Err(e) => {
            // No session to speak for (unreadable input): stderr only.
            eprintln!("sessionwatch hook {}: {e:#}", args.event);
            return Ok(ExitCode::SUCCESS);
        }
    };
    let outcome = tokio::time::timeout_at(deadline, forward(&call))
        .await
        .unwrap_or_else(|_| Err(Failure::Unreachable(gave_up().to_string())));
    match outcome {
        Ok(out) => {
            super::hook_outage::clear(&call.data_dir);
            if let Some(out) = out {
                println!("{out}");
            }
        }
        Err(failure) => {
            eprintln!("sessionwatch hook {}: {}", args.event, failure.describe(&call));
            if let Some(line) = failure.user_line(&call)
                && super::hook_outage::first_report(
                    &call.data_dir,
                    call.input.cli.as_str(),
                    &call.input.session_id,
                )
            {
                // Shown to the user by the CLIs, never to the model.
                println!("{}", render_system_message(&line));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A hook's input, read and checked, and where to send it.
struct HookCall {
    input: HookInput,
    /// The request, its `input` the hook's stdin as it came.
    body: bytes::Bytes,
    url: String,
    url_source: UrlSource,
    data_dir: std::path::PathBuf,
    token: Option<String>,
}

/// Why the gateway gave no answer to act on.
#[derive(Debug)]
enum Failure {
    /// No answer at all (down, hung, 5xx): the session goes unrecorded, so the user is told once.
    Unreachable(String),
    /// The gateway refused the token: the same consequence, another fix.
    Refused(String),
    /// The gateway refused this one call (bad input): nothing for the user to do.
    Rejected(String),
}

impl Failure {
    /// The stderr line (logs and `claude --debug` show it; neither CLI shows it to its user).
    fn describe(&self, call: &HookCall) -> String {
        match self {
            Failure::Unreachable(why) => {
                format!("cannot reach the gateway at {} (from {}): {why}", call.url, call.url_source)
            }
            Failure::Refused(why) | Failure::Rejected(why) => why.clone(),
        }
    }

    /// The one line the CLI's user sees, if this failure is theirs to fix.
    fn user_line(&self, call: &HookCall) -> Option<String> {
        let (url, source) = (&call.url, &call.url_source);
        match self {
            Failure::Unreachable(why) => Some(format!(
                "sessionwatch: cannot reach the gateway at {url} (from {source}: {why}); this session is not \
                 watched or recorded until it answers. Start it with `sessionwatch serve`."
            )),
            Failure::Refused(why) => Some(format!(
                "sessionwatch: the gateway at {url} refused this hook ({why}); this session is not watched or \
                 recorded. Check the token in {} or SESSIONWATCH_TOKEN.",
                call.data_dir.display()
            )),
            Failure::Rejected(_) => None,
        }
    }
}

/// Reads and checks the hook's stdin and finds the gateway.
fn prepare(args: &HookArgs, deadline: tokio::time::Instant, timeout: Duration) -> anyhow::Result<HookCall> {
    let cli = match &args.cli {
        Some(c) => Some(
            HookCli::parse(c)
                .ok_or_else(|| anyhow::anyhow!("--agent must be claude, codex or gemini, not {c:?}"))?,
        ),
        None => None,
    };
    if cli.is_some_and(|c| c.source().installer == sessionwatch_upstream::source::Installer::OpenCodePlugin) {
        anyhow::bail!(
            "OpenCode runs no hook command: its plugin posts to the gateway itself (`sessionwatch hooks install opencode`)"
        );
    }
    let stdin = read_stdin(deadline, timeout)?;
    let claude_session = std::env::var("CLAUDE_CODE_SESSION_ID").ok();
    // The one decode of the input here; the gateway gets the bytes as they came.
    let input = parse_input(&stdin, Some(&args.event), cli, claude_session.as_deref())?;
    let body = request_body(&input, stdin, args.agent_id.clone(), args.node.clone())?;
    let found = super::resolve_gateway(super::client_context(args.url.clone(), args.data_dir.clone()));
    let token = match &args.token {
        Some(t) => Some(t.clone()),
        None => sessionwatch_server::auth::read_token(&found.data_dir)?,
    };
    Ok(HookCall {
        input,
        body,
        url: found.url.url,
        url_source: found.url.source,
        data_dir: found.data_dir,
        token,
    })
}

/// The hook's stdin, up to one byte past [`MAX_INPUT_BYTES`] (the parser refuses more), read on this
/// thread, each read waiting in `poll(2)` for no longer than is left until `deadline`: a CLI that keeps
/// stdin open costs the hook its deadline, never its exit. (A thread of its own for the read cost every
/// hook its start and exit; tokio's stdin starts the runtime's blocking pool, whose shutdown waits for a
/// read that never ends.)
fn read_stdin(deadline: tokio::time::Instant, timeout: Duration) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::fd::{AsFd, AsRawFd};
    // A duplicate of fd 0, read unbuffered: what `poll` reports readable is never held in a buffer.
    let mut stdin = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let limit = MAX_INPUT_BYTES + 1;
    let mut input = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    while input.len() < limit {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            anyhow::bail!("gave up after {} ms (stdin stayed open)", timeout.as_millis());
        }
        let mut fd = libc::pollfd { fd: stdin.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let wait_ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid `pollfd`, alive for the call.
        let ready = unsafe { libc::poll(&mut fd, 1, wait_ms) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e.into());
        }
        if ready == 0 {
            continue; // the deadline is checked above
        }
        if fd.revents & libc::POLLNVAL != 0 {
            // Not a descriptor poll can wait on (macOS answers so for a terminal): a read could outlast
            // the deadline.
            anyhow::bail!("stdin cannot be waited for");
        }
        let want = chunk.len().min(limit - input.len());
        match stdin.read(&mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => input.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(input)
}

/// The `POST /v1/hooks` body: the [`HookRequest`] whose `input` is `stdin` byte for byte (checked as
/// JSON, not decoded again: `input` is what `parse_input` read it as).
fn request_body(
    input: &HookInput,
    stdin: Vec<u8>,
    agent_id: Option<String>,
    node: Option<String>,
) -> anyhow::Result<bytes::Bytes> {
    let stdin = String::from_utf8(stdin)?;
    let raw: &RawValue = serde_json::from_str(&stdin)?;
    // On a node the cwd is on this machine: the gateway learns its worktree from here.
    let workspace = if node.is_some() { node_workspace(input) } else { None };
    let request = HookRequest {
        cli: input.cli.as_str().to_string(),
        event: input.event.as_str().to_string(),
        agent_id,
        node,
        workspace,
        input: raw,
    };
    Ok(serde_json::to_vec(&request)?.into())
}

/// Posts the hook to the gateway; answers the output to print, if any.
async fn forward(call: &HookCall) -> Result<Option<String>, Failure> {
    // No client timeout of its own: the caller bounds the whole hook (stdin, connect, answer) once.
    let answer =
        super::hook_http::post_json(&call.url, "/v1/hooks", call.token.as_deref(), call.body.clone())
            .await
            .map_err(|e| Failure::Unreachable(e.0))?;
    let status = answer.status;
    if !status.is_success() {
        let refusal = serde_json::from_slice::<ErrorBodyJson>(&answer.body).ok();
        let message = refusal.as_ref().map_or("no message", |r| r.error.message.as_str());
        let why = format!("the gateway answered {status}: {message}");
        return Err(match status.as_u16() {
            401 | 403 => Failure::Refused(why),
            500.. => Failure::Unreachable(why),
            _ => Failure::Rejected(why),
        });
    }
    // An answer we cannot read says nothing to the model, as an empty one.
    let answer: HookAnswer = serde_json::from_slice(&answer.body).unwrap_or_default();
    let reply = HookReply { context: answer.additional_context, block: answer.block };
    Ok(render_output(call.input.cli, call.input.event, &reply))
}

/// On a remote node: the worktree the hook's cwd lies in (its name, hash, git dir and HEAD position)
/// and the paths a tool wrote, relative to it. What the gateway would refuse (a path it cannot name
/// safely) is left out rather than losing the hook.
fn node_workspace(input: &HookInput) -> Option<HookWorkspace> {
    use sessionwatch_upstream::workspace::{self as ws, HeadFollower};
    let cwd = std::path::Path::new(input.cwd.as_deref().filter(|c| !c.is_empty())?);
    let workspace = ws::resolve(cwd);
    let git_dir = workspace.git_dir().and_then(|g| g.to_str()).map(str::to_string);
    let mut w = HookWorkspace {
        name: workspace.name.clone(),
        hash: workspace.hash.clone(),
        git_dir,
        paths: vec![],
        head: None,
    };
    if w.git_dir.is_some() && w.check().is_ok() {
        w.head = Some(HeadFollower::start(workspace.clone()).position().into());
    }
    if w.check().is_err() {
        return None;
    }
    let written = input.written_paths.iter().filter_map(|p| workspace.relative(p, cwd));
    w.paths = written.filter(|p| HookWorkspace::check_path(p).is_ok()).take(MAX_HOOK_PATHS).collect();
    Some(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gateway gets the hook's stdin as it came (spacing, key order, escapes), not a re-encoding.
    #[test]
    fn the_request_carries_stdin_byte_for_byte() {
        let stdin = "{ \"hook_event_name\":\"Stop\",  \"session_id\" : \"s-1\",\n \"zz\": \"\\u00e9\", \"cwd\": \"/w\" }";
        let input = parse_input(stdin.as_bytes(), Some("Stop"), Some(HookCli::Claude), None).unwrap();
        let body = request_body(&input, stdin.as_bytes().to_vec(), Some("ops".into()), None).unwrap();
        let body = std::str::from_utf8(&body).unwrap();
        assert_eq!(
            body,
            format!("{{\"cli\":\"claude\",\"event\":\"Stop\",\"agentId\":\"ops\",\"input\":{stdin}}}")
        );
        let decoded: HookRequest<serde_json::Value> = serde_json::from_str(body).unwrap();
        assert_eq!(decoded.input["zz"], "\u{e9}");
    }

    /// The gateway's answer, read by its type: context and block as sent, `null` as nothing to say.
    #[test]
    fn the_answer_is_read_by_its_type() {
        let answer: HookAnswer = serde_json::from_str(
            r#"{"additionalContext":"notice","block":null,"recorded":true,"sessionKey":"agent:main:claude:s-1"}"#,
        )
        .unwrap();
        assert_eq!(answer.additional_context.as_deref(), Some("notice"));
        assert_eq!(answer.block, None);
        let reply = HookReply { context: answer.additional_context, block: answer.block };
        let out =
            render_output(HookCli::Claude, sessionwatch_upstream::hook::HookEvent::UserPromptSubmit, &reply);
        assert!(out.unwrap().contains("\"additionalContext\":\"notice\""));
    }
}
