//! `sessionwatch hooks install|uninstall|status claude|codex`: our entries in the CLI's own hook
//! settings (Claude `settings.json`, Codex `hooks.json`), merged with what is there.
//!
//! Our entries are the handlers whose command runs `sessionwatch hook`; everything else in the file is
//! left as it was, in its order. Installing twice changes nothing; uninstalling removes only ours (and
//! the arrays and objects that only held ours). A file that is not the JSON shape the CLI reads is
//! reported and left untouched.

mod codex_trust;
mod json;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use json::Json;
use sessionwatch_upstream::hook::{HookCli, HookEvent};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum HooksCommand {
    /// Add sessionwatch's hooks to the CLI's settings (idempotent).
    Install(Target),
    /// Remove sessionwatch's hooks (and nothing else).
    Uninstall(Target),
    /// Show which events run sessionwatch.
    Status(Target),
}

#[derive(Args, Debug)]
pub struct Target {
    /// claude or codex.
    cli: String,
    /// user: your settings (~/.claude/settings.json, ~/.codex/hooks.json); project: the project's
    /// (.claude/settings.json, .codex/hooks.json in --project-dir).
    #[arg(long, value_enum, default_value_t = Scope::User)]
    scope: Scope,
    /// The sessionwatch agent that owns the sessions (default main).
    #[arg(long)]
    agent: Option<String>,
    /// The project directory for --scope project (default: the current directory).
    #[arg(long)]
    project_dir: Option<PathBuf>,
    /// Edit this settings file instead.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Codex: the codex binary used to trust the installed hooks (default: `codex` on PATH).
    #[arg(long)]
    codex: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Scope {
    User,
    Project,
}

/// The events we install: all the hooks sessionwatch acts on (Codex fires the sub-agent ones only with
/// `multi_agent_v2`).
const EVENTS: [HookEvent; 7] = HookEvent::ALL;

/// Seconds the CLI waits for us; the command gives up on its own after 1 s.
const HOOK_TIMEOUT_SECS: u64 = 5;

pub fn run(cmd: HooksCommand) -> anyhow::Result<ExitCode> {
    let (target, action) = match &cmd {
        HooksCommand::Install(t) => (t, "install"),
        HooksCommand::Uninstall(t) => (t, "uninstall"),
        HooksCommand::Status(t) => (t, "status"),
    };
    let cli = HookCli::parse(&target.cli)
        .ok_or_else(|| anyhow::anyhow!("hooks exist for claude and codex, not {:?}", target.cli))?;
    if let Some(a) = &target.agent
        && !sessionwatch_core::is_valid_agent_id(&a.to_ascii_lowercase())
    {
        bail!("--agent {a:?} is not a valid agent id");
    }
    let file = settings_file(cli, target)?;
    let exe = std::env::current_exe().context("cannot locate the sessionwatch binary")?;
    let ours = Ours { cli, command_prefix: shell_quote(&exe.to_string_lossy()), agent: target.agent.clone() };
    match action {
        "install" => {
            let changed = edit(&file, |doc| install(doc, &ours))?;
            println!(
                "{} {}: sessionwatch hooks {}",
                cli.as_str(),
                file.display(),
                if changed { "installed" } else { "already installed" }
            );
            if cli == HookCli::Codex {
                trust_codex(target, &file);
            }
        }
        "uninstall" => {
            let changed = edit(&file, uninstall)?;
            println!(
                "{} {}: sessionwatch hooks {}",
                cli.as_str(),
                file.display(),
                if changed { "removed" } else { "were not installed" }
            );
        }
        _ => status(cli, &file)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn settings_file(cli: HookCli, t: &Target) -> anyhow::Result<PathBuf> {
    if let Some(f) = &t.file {
        return Ok(f.clone());
    }
    let project = || -> anyhow::Result<PathBuf> {
        Ok(match &t.project_dir {
            Some(d) => d.clone(),
            None => std::env::current_dir()?,
        })
    };
    let home = || std::env::var_os("HOME").map(PathBuf::from).context("HOME is not set");
    Ok(match (cli, t.scope) {
        (HookCli::Claude, Scope::User) => match std::env::var_os("CLAUDE_CONFIG_DIR") {
            Some(d) => PathBuf::from(d).join("settings.json"),
            None => home()?.join(".claude/settings.json"),
        },
        (HookCli::Claude, Scope::Project) => project()?.join(".claude/settings.json"),
        (HookCli::Codex, Scope::User) => match std::env::var_os("CODEX_HOME") {
            Some(d) => PathBuf::from(d).join("hooks.json"),
            None => home()?.join(".codex/hooks.json"),
        },
        (HookCli::Codex, Scope::Project) => project()?.join(".codex/hooks.json"),
    })
}

/// Which handlers are ours, and what ours look like.
struct Ours {
    cli: HookCli,
    command_prefix: String,
    agent: Option<String>,
}

impl Ours {
    fn command(&self, event: HookEvent) -> String {
        let mut c = format!("{} hook {} --agent {}", self.command_prefix, event.as_str(), self.cli.as_str());
        if let Some(a) = &self.agent {
            c.push_str(&format!(" --agent-id {}", a.to_ascii_lowercase()));
        }
        c
    }

    fn handler(&self, event: HookEvent) -> Json {
        Json::Object(vec![
            ("type".into(), Json::String("command".into())),
            ("command".into(), Json::String(self.command(event))),
            ("timeout".into(), Json::Number(HOOK_TIMEOUT_SECS.into())),
        ])
    }
}

/// A handler runs `sessionwatch hook …` (any install location).
fn is_ours(handler: &Json) -> bool {
    handler.get("command").and_then(Json::as_str).is_some_and(is_our_command)
}

fn is_our_command(cmd: &str) -> bool {
    let cmd = cmd.trim_start();
    let (program, rest) = match cmd.chars().next() {
        Some(q @ ('\'' | '"')) => match cmd[1..].split_once(q) {
            Some(split) => split,
            None => return false,
        },
        _ => cmd.split_once(char::is_whitespace).unwrap_or((cmd, "")),
    };
    Path::new(program).file_name().is_some_and(|n| n == "sessionwatch")
        && rest.split_whitespace().next() == Some("hook")
}

/// Reads, checks, edits and (when it changed) writes the settings file. Answers whether it changed.
fn edit(file: &Path, change: impl FnOnce(&mut Json) -> anyhow::Result<bool>) -> anyhow::Result<bool> {
    let original = match std::fs::read_to_string(file) {
        Ok(s) => Some(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let mut doc = match &original {
        Some(s) if !s.trim().is_empty() => serde_json::from_str::<Json>(s)
            .with_context(|| format!("{} is not valid JSON; it was not changed", file.display()))?,
        _ => Json::Object(vec![]),
    };
    check_shape(&doc)
        .with_context(|| format!("{} is not a hook settings file; it was not changed", file.display()))?;
    if !change(&mut doc)? {
        return Ok(false);
    }
    let mut text = doc.to_pretty();
    if original.as_deref().is_none_or(|s| s.ends_with('\n')) {
        text.push('\n');
    }
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let tmp = file.with_extension("sessionwatch-tmp");
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, file).with_context(|| format!("cannot replace {}", file.display()))?;
    Ok(true)
}

/// `{"hooks": {"<Event>": [{"matcher"?, "hooks": [{"type", "command", …}]}]}}`, other keys free.
fn check_shape(doc: &Json) -> anyhow::Result<()> {
    let Json::Object(_) = doc else { bail!("the top level is not an object") };
    let Some(hooks) = doc.get("hooks") else { return Ok(()) };
    let Json::Object(events) = hooks else { bail!("\"hooks\" is not an object") };
    for (event, groups) in events {
        let Json::Array(groups) = groups else { bail!("hooks.{event} is not an array") };
        for g in groups {
            match g.get("hooks") {
                Some(Json::Array(_)) => {}
                _ => bail!("a hooks.{event} entry has no \"hooks\" array"),
            }
        }
    }
    Ok(())
}

fn install(doc: &mut Json, ours: &Ours) -> anyhow::Result<bool> {
    let before = doc.clone();
    let hooks = doc.entry("hooks", Json::Object(vec![])).expect("checked: an object");
    for event in EVENTS {
        let Some(Json::Array(groups)) = hooks.entry(event.as_str(), Json::Array(vec![])) else {
            unreachable!("checked: arrays")
        };
        let existing = groups.iter_mut().find_map(|g| match g.get_mut("hooks") {
            Some(Json::Array(handlers)) => handlers.iter_mut().find(|h| is_ours(h)),
            _ => None,
        });
        match existing {
            Some(h) => *h = ours.handler(event),
            None => {
                let mut group = vec![];
                match event {
                    HookEvent::PostToolUse => group.push(("matcher".to_string(), Json::String("*".into()))),
                    // Only MCP calls: it announces the call's tool-use id, so our MCP server knows its
                    // caller (one identity for hooks and tools).
                    HookEvent::PreToolUse => {
                        group.push(("matcher".to_string(), Json::String("mcp__.*".into())))
                    }
                    _ => {}
                }
                group.push(("hooks".to_string(), Json::Array(vec![ours.handler(event)])));
                groups.push(Json::Object(group));
            }
        }
    }
    Ok(*doc != before)
}

fn uninstall(doc: &mut Json) -> anyhow::Result<bool> {
    let before = doc.clone();
    let hooks_was_empty = before.get("hooks").is_some_and(Json::is_empty_container);
    let Some(Json::Object(events)) = doc.get_mut("hooks") else { return Ok(false) };
    let mut emptied = vec![];
    for (event, groups) in events.iter_mut() {
        let Json::Array(list) = groups else { continue };
        let had = list.len();
        list.retain_mut(|g| {
            let Some(Json::Array(handlers)) = g.get_mut("hooks") else { return true };
            let n = handlers.len();
            handlers.retain(|h| !is_ours(h));
            // A group that only held ours goes; one the user left empty stays.
            !(handlers.is_empty() && n > 0)
        });
        if had > 0 && list.is_empty() {
            emptied.push(event.clone());
        }
    }
    events.retain(|(k, _)| !emptied.contains(k));
    if events.is_empty() && !hooks_was_empty {
        doc.remove("hooks");
    }
    Ok(*doc != before)
}

fn status(cli: HookCli, file: &Path) -> anyhow::Result<()> {
    let doc = match std::fs::read_to_string(file) {
        Ok(s) => serde_json::from_str::<Json>(&s)
            .with_context(|| format!("{} is not valid JSON", file.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Json::Object(vec![]),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    println!("{} {}", cli.as_str(), file.display());
    for event in EVENTS {
        let found = doc.get("hooks").and_then(|h| h.get(event.as_str())).and_then(|groups| match groups {
            Json::Array(gs) => gs.iter().find_map(|g| match g.get("hooks") {
                Some(Json::Array(hs)) => hs.iter().find(|h| is_ours(h)).cloned(),
                _ => None,
            }),
            _ => None,
        });
        match found.as_ref().and_then(|h| h.get("command")).and_then(Json::as_str) {
            Some(cmd) => println!("  {:<17} installed: {cmd}", event.as_str()),
            None => println!("  {:<17} not installed", event.as_str()),
        }
    }
    Ok(())
}

fn trust_codex(target: &Target, file: &Path) {
    let codex = target.codex.clone().unwrap_or_else(|| PathBuf::from("codex"));
    match codex_trust::trust(&codex, file, target.project_dir.as_deref()) {
        Ok(n) => println!("codex: trusted {n} sessionwatch hooks (Codex runs only trusted hooks)"),
        Err(e) => eprintln!(
            "codex: the hooks are installed but not trusted yet ({e:#}); Codex skips untrusted hooks silently: \
             trust them with /hooks in the Codex TUI, or rerun with --codex <path of codex>"
        ),
    }
}

/// Quotes for `sh -c` (both CLIs run the command through a shell) when needed.
fn shell_quote(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests;
