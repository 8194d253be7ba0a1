//! `sessionwatch doctor`: one row per check of the chain from an agent CLI to the gateway, each with
//! its fix when it fails. Exit 0 when every check passes (warnings included), 1 otherwise.

use super::client::ToolArgs;
use super::setup::{self, Paths, service};
use anyhow::Context;
use clap::Args;
use serde::Serialize;
use serde_json::Value;
use sessionwatch_server::host_protocol::ToolCall;
use sessionwatch_upstream::hook::{HookCli, HookEvent};
use sessionwatch_upstream::source::Installer;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Gateway URL [default: as every client finds it: $SESSIONWATCH_URL, the runtime file, the config,
    /// http://127.0.0.1:7420].
    #[arg(long)]
    url: Option<String>,
    /// Data dir holding the token and the runtime file.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// One JSON array of {check, ok, warn, detail, fix}.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
pub struct Row {
    check: String,
    ok: bool,
    /// Passes, but not as we test it (an untested CLI version, no service).
    warn: bool,
    detail: String,
    fix: Option<String>,
}

fn pass(check: impl Into<String>, detail: impl Into<String>) -> Row {
    Row { check: check.into(), ok: true, warn: false, detail: detail.into(), fix: None }
}
fn warn(check: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Row {
    Row { check: check.into(), ok: true, warn: true, detail: detail.into(), fix: Some(fix.into()) }
}
fn fail(check: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Row {
    Row { check: check.into(), ok: false, warn: false, detail: detail.into(), fix: Some(fix.into()) }
}

/// What the gateway checks found: enough for the round trips.
struct Gateway {
    url: String,
    token: Option<String>,
    up: bool,
}

pub async fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let paths = Paths::from_env()?;
    let exe = setup::this_exe()?;
    let mut rows = vec![];
    let gateway = gateway_rows(&args, &mut rows).await;
    rows.push(service_row(&paths, &exe, gateway.up));
    for cli in setup::supported() {
        cli_rows(cli.as_str(), &paths, &exe, &gateway, &mut rows).await;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows);
    }
    Ok(if rows.iter().all(|r| r.ok) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn print_table(rows: &[Row]) {
    let width = rows.iter().map(|r| r.check.len()).max().unwrap_or(0);
    for r in rows {
        let status = match (r.ok, r.warn) {
            (false, _) => "FAIL",
            (true, true) => "WARN",
            _ => "ok",
        };
        println!("{status:<4}  {:<width$}  {}", r.check, r.detail);
        if let (false, Some(fix)) | (true, Some(fix)) = (r.ok, &r.fix)
            && (!r.ok || r.warn)
        {
            println!("{:<4}  {:<width$}  fix: {fix}", "", "");
        }
    }
}

async fn gateway_rows(args: &DoctorArgs, rows: &mut Vec<Row>) -> Gateway {
    let found = super::resolve_gateway(super::client_context(args.url.clone(), args.data_dir.clone()));
    let url = found.url.url.clone();
    let from = found.url.source.to_string();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(3)).build().expect("an HTTP client");
    let up = match http.get(format!("{url}/healthz")).send().await {
        Ok(r) if r.status().is_success() => {
            rows.push(pass("gateway reachable", format!("{url} (from {from})")));
            true
        }
        Ok(r) => {
            rows.push(fail(
                "gateway reachable",
                format!("{url} (from {from}) answered {}", r.status()),
                "is another program on that port? see `sessionwatch serve --listen`",
            ));
            false
        }
        Err(e) => {
            rows.push(fail(
                "gateway reachable",
                format!("the gateway is unreachable at {url} (from {from}): {}", root_cause(&e)),
                "start it: `systemctl --user start sessionwatch` (after `sessionwatch setup`) or `sessionwatch serve`",
            ));
            false
        }
    };
    let token = match sessionwatch_server::auth::read_token(&found.data_dir) {
        Ok(Some(t)) => {
            rows.push(pass("token readable", format!("{}", found.data_dir.join("token").display())));
            Some(t)
        }
        Ok(None) => {
            rows.push(fail(
                "token readable",
                format!("no token in {}", found.data_dir.display()),
                "start the gateway once (`sessionwatch serve`): it creates the token",
            ));
            None
        }
        Err(e) => {
            rows.push(fail(
                "token readable",
                format!("{e:#}"),
                "the token file must be readable by you (mode 0600)",
            ));
            None
        }
    };
    if up {
        rows.push(database_row(&http, &url, token.as_deref()).await);
    } else {
        rows.push(fail("database ok", "not checked: the gateway is unreachable", "start the gateway first"));
    }
    Gateway { url, token, up }
}

fn root_cause(e: &dyn std::error::Error) -> String {
    let mut e = e;
    while let Some(s) = e.source() {
        e = s;
    }
    e.to_string()
}

/// The gateway answers a read of its store (`sessions_list`): the database is open and readable.
async fn database_row(http: &reqwest::Client, url: &str, token: Option<&str>) -> Row {
    let mut req = http.post(format!("{url}/tools/invoke")).json(&ToolCall {
        tool: "sessions_list".into(),
        args: ToolArgs { limit: Some(1), ..Default::default() },
        session_key: None,
    });
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    match req.send().await {
        Ok(r) if r.status().is_success() => pass("database ok", "the gateway reads its store"),
        Ok(r) => {
            let status = r.status();
            let text = r.text().await.unwrap_or_default();
            fail(
                "database ok",
                format!("sessions_list answered {status}: {}", text.chars().take(200).collect::<String>()),
                if status.as_u16() == 401 {
                    "the token does not match the gateway's: use the data dir the gateway uses (--data-dir)"
                } else {
                    "see the gateway's log"
                },
            )
        }
        Err(e) => fail("database ok", format!("no answer: {}", root_cause(&e)), "see the gateway's log"),
    }
}

fn service_row(paths: &Paths, exe: &Path, gateway_up: bool) -> Row {
    let Some(kind) = service::ServiceKind::for_this_platform() else {
        return warn(
            "service",
            "no user service manager known on this platform",
            "run `sessionwatch serve` at login yourself",
        );
    };
    let file = service::service_file(kind, exe, &paths.home);
    if !file.path.exists() {
        let detail = format!("{} is not installed", file.path.display());
        return if gateway_up {
            warn(
                "service",
                detail + " (the gateway runs outside it)",
                "`sessionwatch setup` keeps the gateway running after a reboot",
            )
        } else {
            fail("service", detail, "`sessionwatch setup` installs it")
        };
    }
    match service::is_running(kind) {
        Some(true) => pass("service", format!("{} installed and running", file.path.display())),
        Some(false) if !gateway_up => fail(
            "service",
            format!("{} installed but not running", file.path.display()),
            service::how_to_start(&file, exe).replace("no systemd user manager runs here: ", ""),
        ),
        running => pass(
            "service",
            format!(
                "{} installed{}",
                file.path.display(),
                if running.is_none() {
                    " (no user service manager runs here to ask whether it runs)"
                } else {
                    "; the gateway runs outside it"
                }
            ),
        ),
    }
}

async fn cli_rows(cli: &str, paths: &Paths, exe: &Path, gateway: &Gateway, rows: &mut Vec<Row>) {
    let Some(bin) = setup::find_cli(cli, &paths.home) else {
        rows.push(pass(cli.to_string(), "not installed: skipped"));
        return;
    };
    rows.push(version_row(cli, &bin));
    match HookCli::parse(cli).map(|c| c.source().installer) {
        Some(Installer::OpenCodePlugin) => {
            rows.push(opencode_plugin_row(&paths.opencode_plugin));
            return;
        }
        Some(Installer::PiExtension) => {
            rows.push(pi_extension_row());
            return;
        }
        Some(Installer::Settings(_)) | None => {}
    }
    let hooks_file = match cli {
        "claude" => &paths.claude_settings,
        "gemini" => &paths.gemini_settings,
        _ => &paths.codex_hooks,
    };
    let hooks = hooks_row(cli, hooks_file, exe);
    let hook_command = hooks.1.clone();
    rows.push(hooks.0);
    if cli == "codex" {
        rows.push(codex_trust_row(&bin, hooks_file));
    }
    rows.push(mcp_row(cli, paths));
    rows.push(round_trip_row(cli, hook_command.as_deref(), gateway).await);
}

/// Pi: our extension is there, and is what `hooks install pi` would write now (the same data dir and
/// gateway URL, this version's handlers). Pi has no MCP client, so there is no MCP row.
fn pi_extension_row() -> Row {
    use super::hooks_install::pi;
    let check = "pi extension";
    let fix = "`sessionwatch setup` (or `sessionwatch hooks install pi`)";
    let file = match pi::extension_file(None) {
        Ok(f) => f,
        Err(e) => return fail(check, format!("{e:#}"), fix),
    };
    match pi::inspect(&file) {
        Ok(pi::Found::Ours(text)) if text == pi::render(&super::hooks_install::pi_config(None)) => {
            pass(check, file.display().to_string())
        }
        Ok(pi::Found::Ours(text)) => warn(
            check,
            format!(
                "{} is an older copy, or for another agent or data dir ({})",
                file.display(),
                pi::installed_config(&text).map(|c| c.to_string()).unwrap_or_default()
            ),
            "`sessionwatch hooks install pi` (with --agent if you chose one)",
        ),
        Ok(pi::Found::Theirs) => fail(
            check,
            format!("{} exists and is not sessionwatch's", file.display()),
            "move it away, then install",
        ),
        Ok(pi::Found::Missing) => fail(check, format!("{} does not exist", file.display()), fix),
        Err(e) => fail(check, format!("{e:#}"), fix),
    }
}

fn version_row(cli: &str, bin: &Path) -> Row {
    let check = format!("{cli} version");
    let out = Command::new(bin).arg("--version").stdin(Stdio::null()).output();
    let text = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => return fail(check, format!("`{} --version` failed", bin.display()), format!("reinstall {cli}")),
    };
    // The CLI versions we test against (tests/agents): `major.minor`.
    let pinned = HookCli::parse(cli).map(|c| c.source().tested_version).unwrap_or("");
    let version =
        text.split_whitespace().find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit())).unwrap_or("");
    let minor: String = version.split('.').take(2).collect::<Vec<_>>().join(".");
    if minor == pinned {
        pass(check, format!("{version} ({})", bin.display()))
    } else {
        warn(
            check,
            format!("{version} ({}): sessionwatch is tested with {pinned}.x", bin.display()),
            format!("use {cli} {pinned}.x if its hooks misbehave"),
        )
    }
}

/// OpenCode's plugin file is ours and what this sessionwatch writes (its handlers post to the gateway
/// themselves: there is no command to run for a round trip).
fn opencode_plugin_row(file: &Path) -> Row {
    use super::hooks_install::opencode;
    let check = "opencode plugin";
    let fix = "`sessionwatch setup` (or `sessionwatch hooks install opencode`)";
    match opencode::inspect(file) {
        Ok(opencode::Found::Ours(_)) if opencode::is_current(file, &opencode::config_here(None)) => {
            pass(check, format!("{} (loaded when OpenCode starts)", file.display()))
        }
        Ok(opencode::Found::Ours(_)) => fail(
            check,
            format!("{} is an older or other install (data dir, address or version)", file.display()),
            fix,
        ),
        Ok(opencode::Found::Theirs) => fail(
            check,
            format!("{} exists and is not sessionwatch's plugin", file.display()),
            "move it away, then `sessionwatch hooks install opencode`",
        ),
        Ok(opencode::Found::Missing) => fail(check, format!("{} does not exist", file.display()), fix),
        Err(e) => fail(check, format!("{e:#}"), "check the file's permissions"),
    }
}

/// Every event's hook runs a sessionwatch binary that exists and is this version. Answers the row and
/// one installed command (for the round trip).
fn hooks_row(cli: &str, file: &Path, exe: &Path) -> (Row, Option<String>) {
    let check = format!("{cli} hooks");
    let fix = format!("`sessionwatch setup` (or `sessionwatch hooks install {cli}`)");
    let Some(hook_cli) = HookCli::parse(cli) else {
        return (fail(check, format!("{cli} has no hooks"), fix), None);
    };
    let v = match std::fs::read_to_string(file) {
        Ok(text) => match settings_json(hook_cli, &text) {
            Ok(v) => v,
            Err(e) => {
                let why = format!("{} is not valid JSON: {e}", file.display());
                return (fail(check, why, "fix the file's syntax"), None);
            }
        },
        Err(_) => return (fail(check, format!("{} does not exist", file.display()), fix), None),
    };
    let commands = match installed_commands(&v, hook_cli, file) {
        Ok(commands) => commands,
        Err(why) => return (fail(check, why, fix), None),
    };
    if let Err(why) = commands.iter().try_for_each(|(_, command)| runs_this_version(command, exe)) {
        return (fail(check, why, fix), None);
    }
    let first = commands.iter().find(|(e, _)| *e == HookEvent::SessionStart).map(|(_, c)| c.clone());
    (
        pass(
            check,
            format!("{} events in {} run {}", commands.len(), file.display(), program_of(&commands[0].1)),
        ),
        first,
    )
}

/// The CLI's settings file read as JSON: Gemini strips comments from its settings; Claude and Codex
/// read strict JSON.
fn settings_json(cli: HookCli, text: &str) -> anyhow::Result<Value> {
    if matches!(cli.source().installer, Installer::Settings(h) if h.comments) {
        setup::jsonc_object(Some(text))
    } else {
        Ok(serde_json::from_str(text)?)
    }
}

/// Our hook's command for every event the CLI has, or why not (the first event without one).
fn installed_commands(v: &Value, cli: HookCli, file: &Path) -> Result<Vec<(HookEvent, String)>, String> {
    cli.events()
        .iter()
        .map(|&event| {
            let groups = v.pointer(&format!("/hooks/{}", event.as_str())).and_then(Value::as_array);
            groups
                .into_iter()
                .flatten()
                .flat_map(|g| g.get("hooks").and_then(Value::as_array).cloned().unwrap_or_default())
                .find_map(|h| {
                    h.get("command")
                        .and_then(Value::as_str)
                        .filter(|c| super::hooks_install::is_our_command(c))
                        .map(|c| (event, c.to_string()))
                })
                .ok_or_else(|| format!("no sessionwatch hook for {} in {}", event.as_str(), file.display()))
        })
        .collect()
}

/// Whether `command` runs a binary that exists and is this version (this very binary, or one answering
/// the same `--version`); why not otherwise.
fn runs_this_version(command: &str, exe: &Path) -> Result<(), String> {
    let program = program_of(command);
    if !Path::new(&program).is_file() {
        return Err(format!("the hooks run {program}, which does not exist"));
    }
    if Path::new(&program).canonicalize().ok().as_deref() == Some(exe) {
        return Ok(());
    }
    let theirs = Command::new(&program)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let ours = format!("sessionwatch {}", super::VERSION);
    if theirs != ours {
        return Err(format!("the hooks run {program} ({theirs}), not this version ({ours})"));
    }
    Ok(())
}

/// The program of a shell command (`hooks install` quotes it with single quotes when needed).
fn program_of(command: &str) -> String {
    let c = command.trim_start();
    match c.strip_prefix('\'') {
        Some(rest) => {
            // 'a'\''b' -> a'b
            let mut out = String::new();
            let mut rest = rest;
            loop {
                match rest.split_once('\'') {
                    Some((part, after)) => {
                        out.push_str(part);
                        match after.strip_prefix("\\''") {
                            Some(more) => {
                                out.push('\'');
                                rest = more;
                            }
                            None => return out,
                        }
                    }
                    None => return out + rest,
                }
            }
        }
        None => c.split_whitespace().next().unwrap_or("").to_string(),
    }
}

fn codex_trust_row(codex: &Path, hooks_file: &Path) -> Row {
    let check = "codex trust";
    let fix = "`sessionwatch setup` (or `sessionwatch hooks install codex`) trusts them; or /hooks in the Codex TUI";
    let hooks = match super::hooks_install::codex_trust::list_hooks(codex, None) {
        Ok(h) => h,
        Err(e) => {
            return fail(check, format!("cannot ask codex: {e:#}"), "check that `codex app-server` runs");
        }
    };
    let file = std::fs::canonicalize(hooks_file).unwrap_or_else(|_| hooks_file.to_path_buf());
    let ours: Vec<&Value> = hooks
        .iter()
        .filter(|h| {
            h.get("sourcePath")
                .and_then(Value::as_str)
                .map(|s| std::fs::canonicalize(s).unwrap_or_else(|_| s.into()))
                == Some(file.clone())
                && h.get("command").and_then(Value::as_str).is_some_and(super::hooks_install::is_our_command)
        })
        .collect();
    if ours.is_empty() {
        return fail(check, format!("codex lists no sessionwatch hook from {}", hooks_file.display()), fix);
    }
    let untrusted: Vec<String> = ours
        .iter()
        .filter(|h| h.get("trustStatus").and_then(Value::as_str) != Some("trusted"))
        .filter_map(|h| {
            Some(format!("{} ({})", h.get("eventName")?.as_str()?, h.get("trustStatus")?.as_str()?))
        })
        .collect();
    if untrusted.is_empty() {
        pass(check, format!("codex trusts all {} sessionwatch hooks", ours.len()))
    } else {
        fail(check, format!("codex skips these hooks silently: {}", untrusted.join(", ")), fix)
    }
}

fn mcp_row(cli: &str, paths: &Paths) -> Row {
    let check = format!("{cli} MCP server");
    let fix = "`sessionwatch setup` registers it";
    let (file, command, args) = if cli == "claude" || cli == "gemini" {
        let file = if cli == "claude" { &paths.claude_json } else { &paths.gemini_settings };
        let v: Value = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| setup::jsonc_object(Some(&t)).ok())
            .unwrap_or(Value::Null);
        let s = v.pointer(&format!("/mcpServers/{}", setup::SERVER)).cloned().unwrap_or(Value::Null);
        (
            file,
            s.get("command").and_then(Value::as_str).map(str::to_string),
            s.get("args")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect::<Vec<_>>()),
        )
    } else {
        let doc: Option<toml_edit::DocumentMut> =
            std::fs::read_to_string(&paths.codex_config).ok().and_then(|t| t.parse().ok());
        let s = doc.as_ref().and_then(|d| d.get("mcp_servers")).and_then(|m| m.get(setup::SERVER));
        (
            &paths.codex_config,
            s.and_then(|s| s.get("command")).and_then(|c| c.as_str()).map(str::to_string),
            s.and_then(|s| s.get("args"))
                .and_then(|a| a.as_array())
                .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()),
        )
    };
    let Some(command) = command else {
        return fail(check, format!("no {} server in {}", setup::SERVER, file.display()), fix);
    };
    if args.as_deref() != Some(&["mcp".to_string()][..]) {
        return fail(
            check,
            format!("{} runs {command} with args {args:?}, not [\"mcp\"]", file.display()),
            fix,
        );
    }
    let resolved = if command.contains('/') {
        Some(PathBuf::from(&command))
    } else {
        setup::find_cli(&command, &paths.home)
    };
    match resolved.filter(|p| p.is_file()) {
        Some(p) => {
            let mut row = pass(check, format!("{} runs {} mcp", file.display(), p.display()));
            if cli == "claude" {
                let allowed = std::fs::read_to_string(&paths.claude_settings)
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .and_then(|v| v.pointer("/permissions/allow").cloned())
                    .and_then(|a| a.as_array().cloned())
                    .is_some_and(|a| {
                        a.iter().any(|r| {
                            r == setup::CLAUDE_ALLOW_RULE || r == &format!("{}__*", setup::CLAUDE_ALLOW_RULE)
                        })
                    });
                if !allowed {
                    row = warn(
                        row.check,
                        format!(
                            "{}; each tool call asks: {} is not in permissions.allow",
                            row.detail,
                            setup::CLAUDE_ALLOW_RULE
                        ),
                        fix,
                    );
                }
            }
            row
        }
        None => fail(check, format!("{} runs {command}, which does not exist", file.display()), fix),
    }
}

/// The installed SessionStart hook, run as the CLI would, then a UserPromptSubmit, for a throwaway
/// session; the session must exist afterwards, and is deleted.
async fn round_trip_row(cli: &str, session_start: Option<&str>, gateway: &Gateway) -> Row {
    let check = format!("{cli} hook round trip");
    let Some(command) = session_start else {
        return fail(check, "not run: no hooks installed", "`sessionwatch setup`");
    };
    if !gateway.up {
        return fail(check, "not run: the gateway is unreachable", "start the gateway");
    }
    match round_trip(cli, command, gateway).await {
        Ok(detail) => pass(check, detail),
        Err(e) => fail(check, format!("{e:#}"), "see the gateway's log and `sessionwatch hooks status`"),
    }
}

async fn round_trip(cli: &str, session_start: &str, gateway: &Gateway) -> anyhow::Result<String> {
    let dir = tempfile::tempdir()?;
    let id = uuid::Uuid::new_v4().to_string();
    let transcript = match cli {
        // Where Gemini keeps its chats (the session's file is looked up beside the one named).
        "gemini" => {
            let chats = dir.path().join("chats");
            std::fs::create_dir_all(&chats)?;
            chats.join(format!("session-2026-01-01T00-00-{}.jsonl", &id[..8]))
        }
        _ => dir.path().join(format!("{id}.jsonl")),
    };
    std::fs::write(&transcript, "")?;
    let cwd = dir.path().to_string_lossy().into_owned();
    let base = SyntheticHookInput {
        session_id: id.clone(),
        transcript_path: transcript.to_string_lossy().into_owned(),
        cwd,
        ..SyntheticHookInput::default()
    };
    let start = SyntheticHookInput {
        hook_event_name: "SessionStart",
        source: Some("startup"),
        model: (cli == "codex").then_some("doctor"),
        ..base.clone()
    };
    let prompt_event = if cli == "gemini" { "BeforeAgent" } else { "UserPromptSubmit" };
    let prompt = SyntheticHookInput {
        hook_event_name: prompt_event,
        prompt: Some("sessionwatch doctor: a synthetic prompt (this session is deleted right away)"),
        turn_id: (cli == "codex").then(|| uuid::Uuid::new_v4().to_string()),
        ..base
    };
    let prompt_command = session_start.replacen(" hook SessionStart ", &format!(" hook {prompt_event} "), 1);
    for (command, input) in [(session_start, &start), (prompt_command.as_str(), &prompt)] {
        let out = run_hook(command, input, dir.path())?;
        if out.contains("systemMessage") {
            anyhow::bail!("the hook told the user: {}", out.trim());
        }
    }
    let key = sessionwatch_core::AgentSessionKey::build_adopted("main", cli, &id);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(3)).build()?;
    let mut req = http.delete(format!("{}/v1/sessions/{}", gateway.url, percent_encode(&key)));
    if let Some(t) = &gateway.token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.context("cannot reach the gateway to delete the throwaway session")?;
    if !resp.status().is_success() {
        anyhow::bail!("the hooks ran but the gateway has no session {key} ({})", resp.status());
    }
    Ok(format!("SessionStart + {prompt_event} recorded {key} (deleted)"))
}

/// What a CLI writes to its hooks' stdin, as much of it as the round trip needs.
#[derive(Clone, Default, serde::Serialize)]
struct SyntheticHookInput {
    session_id: String,
    transcript_path: String,
    cwd: String,
    hook_event_name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<&'static str>,
    /// Codex names its turn, and sends `model`, which tells it from Claude Code.
    #[serde(skip_serializing_if = "Option::is_none")]
    turn_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'static str>,
}

fn run_hook(command: &str, input: &SyntheticHookInput, cwd: &Path) -> anyhow::Result<String> {
    use std::io::Write;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {command}"))?;
    child.stdin.take().context("stdin")?.write_all(&serde_json::to_vec(input)?)?;
    let out = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stderr.trim().is_empty() {
        anyhow::bail!("the hook said: {}", stderr.trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A `sessionwatch` in `dir` that answers `--version` with `version`.
    fn fake_binary(dir: &Path, version: &str) -> PathBuf {
        let bin = dir.join("sessionwatch");
        std::fs::write(&bin, format!("#!/bin/sh\necho '{version}'\n")).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        bin
    }

    /// Claude settings with our hook, run by `program`, for every event but `skip`.
    fn settings(dir: &Path, program: &Path, skip: Option<&str>) -> PathBuf {
        let mut hooks = serde_json::Map::new();
        for event in HookCli::Claude.events().iter().map(|e| e.as_str()).filter(|e| Some(*e) != skip) {
            let command = format!("{} hook {event} --agent claude", program.display());
            hooks.insert(
                event.into(),
                serde_json::json!([{ "hooks": [{ "type": "command", "command": command }] }]),
            );
        }
        let file = dir.join("settings.json");
        std::fs::write(&file, serde_json::json!({ "hooks": hooks }).to_string()).unwrap();
        file
    }

    #[test]
    fn the_hooks_row_passes_only_when_every_event_runs_this_version() {
        let dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let ours = fake_binary(dir.path(), &format!("sessionwatch {}", super::super::VERSION));
        let good = hooks_row("claude", &settings(dir.path(), &ours, None), &exe);
        assert!(good.0.ok, "{}", good.0.detail);
        assert!(good.1.as_deref().is_some_and(|c| c.contains("hook SessionStart")), "{:?}", good.1);

        let missing = hooks_row("claude", &settings(dir.path(), &ours, Some("Stop")), &exe);
        assert!(
            !missing.0.ok && missing.0.detail.starts_with("no sessionwatch hook for Stop in "),
            "{}",
            missing.0.detail
        );

        let other = tempfile::tempdir().unwrap();
        let old = fake_binary(other.path(), "sessionwatch 0.0.1");
        let stale = hooks_row("claude", &settings(dir.path(), &old, None), &exe);
        assert!(
            !stale.0.ok && stale.0.detail.contains("(sessionwatch 0.0.1), not this version"),
            "{}",
            stale.0.detail
        );

        let gone =
            hooks_row("claude", &settings(dir.path(), &dir.path().join("bin/sessionwatch"), None), &exe);
        assert!(!gone.0.ok && gone.0.detail.ends_with("which does not exist"), "{}", gone.0.detail);
        assert!(gone.1.is_none());
    }

    #[test]
    fn the_hooks_row_names_an_unreadable_settings_file() {
        let dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let absent = hooks_row("claude", &dir.path().join("settings.json"), &exe);
        assert!(!absent.0.ok && absent.0.detail.ends_with("does not exist"), "{}", absent.0.detail);
        let file = dir.path().join("broken.json");
        std::fs::write(&file, "{ \"hooks\": ").unwrap();
        let broken = hooks_row("claude", &file, &exe);
        assert!(!broken.0.ok && broken.0.detail.contains("is not valid JSON"), "{}", broken.0.detail);
        assert_eq!(broken.0.fix.as_deref(), Some("fix the file's syntax"));
    }
}
