//! `sessionwatch setup`: from an installed binary to a watching fleet in one command. It installs the
//! gateway as a user service, and for every supported agent CLI it finds: our hooks (the `hooks install`
//! code), our MCP server in the CLI's own config (as its `mcp add` would), Claude's permission for our
//! tools, Codex's trust of our hooks. Idempotent; it merges into the user's files and never reformats
//! them; what it added is recorded in a 0600 manifest in the data dir, so `setup --undo` removes exactly
//! that (and gives a file its very bytes back when nothing else changed it since).

mod editors;
mod manifest;
pub mod service;

use super::hooks_install::write_file;
use anyhow::Context;
use clap::{Args, Parser};
pub use editors::{CLAUDE_ALLOW_RULE, SERVER, jsonc_object};
use manifest::{Added, EditKind, Manifest};
use service::{ServiceFile, ServiceKind};
use sessionwatch_upstream::hook::HookCli;
use sessionwatch_upstream::source::Installer;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct SetupArgs {
    /// Do it without asking (for scripts).
    #[arg(long, short = 'y')]
    yes: bool,
    /// Print what would change, and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Remove what setup added (recorded in <data dir>/setup.json), and nothing else.
    #[arg(long)]
    undo: bool,
    /// Leave the user service alone (no unit or agent file is written or started).
    #[arg(long)]
    no_service: bool,
}

/// Where each CLI keeps what we edit.
#[derive(Clone, Debug)]
pub struct Paths {
    pub home: PathBuf,
    pub claude_json: PathBuf,
    pub claude_settings: PathBuf,
    pub codex_config: PathBuf,
    pub codex_hooks: PathBuf,
    pub gemini_settings: PathBuf,
    /// OpenCode's user plugin file (`hooks install opencode`).
    pub opencode_plugin: PathBuf,
}

impl Paths {
    pub fn from_env() -> anyhow::Result<Paths> {
        let home = PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?);
        let claude_dir = std::env::var_os("CLAUDE_CONFIG_DIR").map(PathBuf::from);
        let codex_home =
            std::env::var_os("CODEX_HOME").map(PathBuf::from).unwrap_or_else(|| home.join(".codex"));
        Ok(Paths {
            claude_json: claude_dir.clone().unwrap_or_else(|| home.clone()).join(".claude.json"),
            claude_settings: claude_dir.unwrap_or_else(|| home.join(".claude")).join("settings.json"),
            codex_config: codex_home.join("config.toml"),
            codex_hooks: codex_home.join("hooks.json"),
            gemini_settings: std::env::var_os("GEMINI_CLI_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.clone())
                .join(".gemini/settings.json"),
            opencode_plugin: super::hooks_install::opencode::user_plugin_file(&home),
            home,
        })
    }
}

/// The agent CLIs setup knows: one per upstream source, in the order setup and doctor show them.
pub fn supported() -> impl Iterator<Item = HookCli> {
    HookCli::ALL.into_iter()
}

/// An executable `name` on PATH, else in the places its installers use.
pub fn find_cli(name: &str, home: &Path) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name));
    let usual = match name {
        "claude" => vec![home.join(".claude/local/claude"), home.join(".local/bin/claude")],
        _ => vec![home.join(".local/bin").join(name)],
    }
    .into_iter()
    .chain(["/usr/local/bin", "/opt/homebrew/bin"].map(|d| Path::new(d).join(name)));
    on_path.chain(usual).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// This binary, as the service, the hooks and the MCP entries run it.
pub fn this_exe() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot locate the sessionwatch binary")?;
    Ok(std::fs::canonicalize(&exe).unwrap_or(exe))
}

/// One thing setup would do.
enum Action {
    WriteService { file: ServiceFile, start: bool },
    StartService { file: ServiceFile },
    Hooks { cli: &'static str, codex: Option<PathBuf>, file: PathBuf },
    Edit { edit: EditKind, path: PathBuf },
}

/// A row of the plan: what it is about, and what happens.
struct Step {
    subject: String,
    says: String,
    action: Option<Action>,
}

pub fn run(args: SetupArgs) -> anyhow::Result<ExitCode> {
    let paths = Paths::from_env()?;
    let data_dir = super::default_data_dir();
    let exe = this_exe()?;
    if args.undo {
        return undo(&data_dir, args.dry_run);
    }
    let manifest = Manifest::read(&data_dir)?.unwrap_or_default();
    let steps = plan(&paths, &exe, &manifest, args.no_service);
    for s in &steps {
        println!("{:<8} {}: {}", if s.action.is_some() { "change" } else { "ok" }, s.subject, s.says);
    }
    let changes = steps.iter().filter(|s| s.action.is_some()).count();
    if changes == 0 {
        println!("nothing to change: sessionwatch is set up");
        return Ok(ExitCode::SUCCESS);
    }
    if args.dry_run {
        println!("dry run: {changes} change(s) above, nothing was changed");
        return Ok(ExitCode::SUCCESS);
    }
    if !args.yes && !confirm(changes)? {
        println!("nothing was changed");
        return Ok(ExitCode::SUCCESS);
    }
    let mut manifest = manifest;
    manifest.exe = exe.to_string_lossy().into_owned();
    let mut failed = false;
    for step in steps {
        let Some(action) = step.action else { continue };
        match apply(action, &exe, &mut manifest) {
            Ok(said) => println!("done     {}: {said}", step.subject),
            Err(e) => {
                failed = true;
                println!("FAILED   {}: {e:#}", step.subject);
            }
        }
        // After each step: an interruption still leaves a manifest that undo can use.
        manifest.write(&data_dir)?;
    }
    println!(
        "setup recorded what it added in {} (`sessionwatch setup --undo` removes it)",
        manifest::manifest_path(&data_dir).display()
    );
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn confirm(changes: usize) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "setup would make {changes} change(s); stdin is not a terminal: pass --yes (or --dry-run)"
        );
    }
    print!("apply these {changes} change(s)? [y/N] ");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}

fn plan(paths: &Paths, exe: &Path, manifest: &Manifest, no_service: bool) -> Vec<Step> {
    let mut steps = vec![];
    if !no_service {
        steps.push(plan_service(paths, exe, manifest));
    }
    for cli in supported() {
        let name = cli.as_str();
        let Some(found) = find_cli(name, &paths.home) else {
            steps.push(Step {
                subject: name.into(),
                says: "not found on PATH: skipped".into(),
                action: None,
            });
            continue;
        };
        let subject = format!("{name} ({})", found.display());
        if cli.source().installer == Installer::PiExtension {
            steps.push(plan_pi(subject));
            continue;
        }
        let (hooks_file, edits) = match name {
            "claude" => (
                paths.claude_settings.clone(),
                vec![
                    (EditKind::ClaudeMcp, paths.claude_json.clone()),
                    (EditKind::ClaudeAllow, paths.claude_settings.clone()),
                ],
            ),
            "gemini" => {
                (paths.gemini_settings.clone(), vec![(EditKind::GeminiMcp, paths.gemini_settings.clone())])
            }
            // The plugin only: OpenCode's MCP entry (opencode.json `mcp`) is not written by setup yet.
            "opencode" => (paths.opencode_plugin.clone(), vec![]),
            _ => (paths.codex_hooks.clone(), vec![(EditKind::CodexMcp, paths.codex_config.clone())]),
        };
        let codex = (name == "codex").then(|| found.clone());
        steps.push(plan_hooks(&subject, name, codex, hooks_file, exe));
        for (edit, path) in edits {
            steps.push(plan_edit(&subject, name, edit, path, exe));
        }
    }
    steps
}

/// A CLI's hooks (or plugin) in `hooks_file`: already ours, or to install (and, for Codex, to trust).
fn plan_hooks(
    subject: &str,
    name: &'static str,
    codex: Option<PathBuf>,
    hooks_file: PathBuf,
    exe: &Path,
) -> Step {
    if hooks_installed(&hooks_file, exe, name) {
        return Step {
            subject: subject.to_string(),
            says: format!("hooks already in {}", hooks_file.display()),
            action: None,
        };
    }
    Step {
        subject: subject.to_string(),
        says: format!(
            "install the hooks in {}{}",
            hooks_file.display(),
            if codex.is_some() { " and trust them in Codex" } else { "" }
        ),
        action: Some(Action::Hooks { cli: name, codex, file: hooks_file }),
    }
}

/// One edit of a CLI's own config file at `path`: already there, to add, or not made because the file
/// is not what the CLI reads (left untouched).
fn plan_edit(subject: &str, name: &str, edit: EditKind, path: PathBuf, exe: &Path) -> Step {
    let text = read_text(&path);
    let planned =
        text.as_ref().map_err(|e| anyhow::anyhow!("{e:#}")).and_then(|t| edit_text(edit, t.as_deref(), exe));
    let subject = subject.to_string();
    match planned {
        Ok(None) => {
            Step { subject, says: format!("{} already in {}", describe(edit), path.display()), action: None }
        }
        Ok(Some(_)) => Step {
            subject,
            says: format!("add {} to {}", describe(edit), path.display()),
            action: Some(Action::Edit { edit, path }),
        },
        Err(e) => Step {
            subject,
            says: format!(
                "{} not added: {} is not what {name} reads ({e:#}); it was left untouched",
                describe(edit),
                path.display()
            ),
            action: None,
        },
    }
}

/// Pi: our one extension file (no MCP: Pi 0.73 has no MCP client of its own).
fn plan_pi(subject: String) -> Step {
    use super::hooks_install::pi;
    let file = match pi::extension_file(None) {
        Ok(f) => f,
        Err(e) => return Step { subject, says: format!("{e:#}: skipped"), action: None },
    };
    let wanted = pi::render(&super::hooks_install::pi_config(None));
    match pi::inspect(&file) {
        Ok(pi::Found::Ours(text)) if text == wanted => {
            Step { subject, says: format!("extension already in {}", file.display()), action: None }
        }
        Ok(pi::Found::Theirs) => Step {
            subject,
            says: format!("{} exists and is not sessionwatch's: left as is", file.display()),
            action: None,
        },
        Ok(_) => Step {
            subject,
            says: format!("install the extension {}", file.display()),
            action: Some(Action::Hooks { cli: "pi", codex: None, file }),
        },
        Err(e) => Step { subject, says: format!("{e:#}: left as is"), action: None },
    }
}

fn describe(edit: EditKind) -> &'static str {
    match edit {
        EditKind::ClaudeMcp => "the sessionwatch MCP server (mcpServers.sessionwatch)",
        EditKind::ClaudeAllow => {
            "permission for the sessionwatch MCP tools (permissions.allow mcp__sessionwatch)"
        }
        EditKind::CodexMcp => "the sessionwatch MCP server ([mcp_servers.sessionwatch])",
        EditKind::GeminiMcp => "the sessionwatch MCP server (mcpServers.sessionwatch)",
    }
}

fn edit_text(edit: EditKind, text: Option<&str>, exe: &Path) -> anyhow::Result<Option<String>> {
    let exe = exe.to_string_lossy();
    match edit {
        EditKind::ClaudeMcp => editors::add_claude_mcp(text, &exe),
        EditKind::ClaudeAllow => editors::add_claude_allow(text),
        EditKind::CodexMcp => editors::add_codex_mcp(text, &exe),
        EditKind::GeminiMcp => editors::add_gemini_mcp(text, &exe),
    }
}

fn remove_text(edit: EditKind, text: &str, exe: &str, before: Option<&str>) -> anyhow::Result<String> {
    match edit {
        EditKind::ClaudeMcp => editors::remove_claude_mcp(text, exe, before),
        EditKind::ClaudeAllow => editors::remove_claude_allow(text, before),
        EditKind::CodexMcp => editors::remove_codex_mcp(text, exe, before),
        EditKind::GeminiMcp => editors::remove_gemini_mcp(text, exe, before),
    }
}

/// Whether every event's hook of `cli` in `file` already runs this binary.
pub fn hooks_installed(file: &Path, exe: &Path, cli: &str) -> bool {
    let Some(hook_cli) = HookCli::parse(cli) else { return false };
    if hook_cli.source().installer == Installer::OpenCodePlugin {
        // A plugin file, not settings entries: ours and as this sessionwatch would write it now.
        let config = super::hooks_install::opencode::config_here(None);
        return super::hooks_install::opencode::is_current(file, &config);
    }
    let Ok(text) = std::fs::read_to_string(file) else { return false };
    // Gemini's settings may hold comments; a check may read them for every CLI.
    let Ok(v) = editors::jsonc_object(Some(&text)) else { return false };
    let exe = exe.to_string_lossy();
    hook_cli.events().iter().all(|e| {
        v.pointer(&format!("/hooks/{}", e.as_str())).and_then(|g| g.as_array()).is_some_and(|groups| {
            groups
                .iter()
                .flat_map(|g| g.get("hooks").and_then(|h| h.as_array()).cloned().unwrap_or_default())
                .any(|h| {
                    h.get("command").and_then(|c| c.as_str()).is_some_and(|c| {
                        let c = c.trim_start_matches('\'');
                        c.starts_with(exe.as_ref())
                            && c.contains(&format!(" hook {} --agent {cli}", e.as_str()))
                    })
                })
        })
    })
}

fn plan_service(paths: &Paths, exe: &Path, manifest: &Manifest) -> Step {
    let subject = "service".to_string();
    let Some(kind) = ServiceKind::for_this_platform() else {
        return Step {
            subject,
            says: format!("no user service manager known here: run `{} serve` yourself", exe.display()),
            action: None,
        };
    };
    let file = service::service_file(kind, exe, &paths.home);
    let ours_before =
        manifest.added.iter().any(|a| matches!(a, Added::Service { path, .. } if *path == file.path));
    let can_start = kind == ServiceKind::Systemd && service::systemd_user_manager_runs();
    match std::fs::read_to_string(&file.path) {
        Ok(t) if t == file.text => {
            if can_start && service::is_running(kind) == Some(false) {
                Step {
                    subject,
                    says: format!("{} is installed but not running: start it", file.path.display()),
                    action: Some(Action::StartService { file }),
                }
            } else {
                Step { subject, says: format!("{} already installed", file.path.display()), action: None }
            }
        }
        Ok(_) if !ours_before => Step {
            subject,
            says: format!("{} exists and was not written by setup: left as is", file.path.display()),
            action: None,
        },
        _ => Step {
            subject,
            says: format!("write {}{}", file.path.display(), if can_start { " and start it" } else { "" }),
            action: Some(Action::WriteService { file, start: can_start }),
        },
    }
}

fn read_text(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Puts `path` back to `text` (`None`: it did not exist).
fn restore(path: &Path, text: Option<&str>) -> anyhow::Result<()> {
    match text {
        Some(t) => write_file(path, t),
        None => match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        },
    }
}

/// `sessionwatch hooks <install|uninstall> …` through its own command-line parser and code.
fn hooks_command(words: &[&str]) -> anyhow::Result<()> {
    #[derive(Parser)]
    struct Hooks {
        #[command(subcommand)]
        command: super::hooks_install::HooksCommand,
    }
    let parsed = Hooks::try_parse_from(std::iter::once("hooks").chain(words.iter().copied()))?;
    let code = super::hooks_install::run(parsed.command)?;
    anyhow::ensure!(code == ExitCode::SUCCESS, "sessionwatch hooks {} failed", words.join(" "));
    Ok(())
}

fn apply(action: Action, exe: &Path, manifest: &mut Manifest) -> anyhow::Result<String> {
    match action {
        Action::WriteService { file, start } => {
            write_file(&file.path, &file.text)?;
            manifest.added.retain(|a| !matches!(a, Added::Service { path, .. } if *path == file.path));
            manifest.added.push(Added::Service {
                path: file.path.clone(),
                text: file.text.clone(),
                enabled: false,
            });
            if !start {
                return Ok(format!("wrote {}; {}", file.path.display(), service::how_to_start(&file, exe)));
            }
            start_service(&file, manifest)?;
            Ok(format!("wrote {} and started it", file.path.display()))
        }
        Action::StartService { file } => {
            start_service(&file, manifest)?;
            Ok(format!("started {}", service::SERVICE_NAME))
        }
        Action::Hooks { cli, codex, file } => {
            let before = read_text(&file)?;
            let codex_arg = codex.as_ref().map(|c| c.to_string_lossy().into_owned());
            let mut words = vec!["install", cli];
            if let Some(c) = &codex_arg {
                words.extend(["--codex", c.as_str()]);
            }
            hooks_command(&words)?;
            if read_text(&file)? != before {
                manifest.added.push(Added::Hooks { cli: cli.to_string() });
            }
            Ok(format!("hooks installed in {}", file.display()))
        }
        Action::Edit { edit, path } => {
            // Read again: an earlier step (the hooks) may have edited the same file.
            let before = read_text(&path)?;
            let Some(after) = edit_text(edit, before.as_deref(), exe)? else {
                return Ok(format!("{} already in {}", describe(edit), path.display()));
            };
            write_file(&path, &after)?;
            manifest.added.push(Added::Edit { edit, path: path.clone(), before, after });
            Ok(format!("added {} to {}", describe(edit), path.display()))
        }
    }
}

fn start_service(file: &ServiceFile, manifest: &mut Manifest) -> anyhow::Result<()> {
    service::systemctl_user(&["daemon-reload"])?;
    service::systemctl_user(&["enable", "--now", service::SERVICE_NAME])?;
    for a in &mut manifest.added {
        if let Added::Service { path, enabled, .. } = a
            && *path == file.path
        {
            *enabled = true;
        }
    }
    Ok(())
}

fn undo(data_dir: &Path, dry_run: bool) -> anyhow::Result<ExitCode> {
    let Some(manifest) = Manifest::read(data_dir)? else {
        println!(
            "nothing to undo: setup has recorded no change ({} does not exist)",
            manifest::manifest_path(data_dir).display()
        );
        return Ok(ExitCode::SUCCESS);
    };
    let mut failed = false;
    let mut left = vec![];
    for added in manifest.added.iter().rev() {
        if dry_run {
            println!("would undo {}", undo_subject(added));
            continue;
        }
        match undo_one(added, &manifest.exe) {
            Ok(said) => println!("undone   {said}"),
            Err(e) => {
                failed = true;
                left.push(added.clone());
                println!("FAILED   {}: {e:#}", undo_subject(added));
            }
        }
    }
    if dry_run {
        println!("dry run: nothing was changed");
    } else if left.is_empty() {
        Manifest::remove(data_dir)?;
    } else {
        left.reverse();
        Manifest { exe: manifest.exe.clone(), added: left }.write(data_dir)?;
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn undo_subject(added: &Added) -> String {
    match added {
        Added::Service { path, .. } => format!("the service {}", path.display()),
        Added::Hooks { cli } => format!("the {cli} hooks"),
        Added::Edit { edit, path, .. } => format!("{} in {}", describe(*edit), path.display()),
    }
}

fn undo_one(added: &Added, exe: &str) -> anyhow::Result<String> {
    match added {
        Added::Service { path, text, enabled } => {
            if *enabled {
                service::systemctl_user(&["disable", "--now", service::SERVICE_NAME])?;
            }
            match read_text(path)? {
                Some(t) if t == *text => {
                    restore(path, None)?;
                    if *enabled {
                        let _ = service::systemctl_user(&["daemon-reload"]);
                    }
                    Ok(format!("removed {}", path.display()))
                }
                Some(_) => Ok(format!("{} changed since setup wrote it: left as is", path.display())),
                None => Ok(format!("{} is already gone", path.display())),
            }
        }
        Added::Hooks { cli } => {
            hooks_command(&["uninstall", cli])?;
            Ok(format!("the {cli} hooks"))
        }
        Added::Edit { edit, path, before, after } => {
            let Some(now) = read_text(path)? else { return Ok(format!("{} is gone", path.display())) };
            if now == *after {
                restore(path, before.as_deref())?;
                return Ok(format!("{} is as it was", path.display()));
            }
            // Changed since (the CLI writes its own state there too): take out only our entry.
            let removed = remove_text(*edit, &now, exe, before.as_deref())?;
            if same_value(*edit, &removed, before.as_deref()) {
                restore(path, before.as_deref())?;
            } else if removed != now {
                write_file(path, &removed)?;
            }
            Ok(format!("{} from {}", describe(*edit), path.display()))
        }
    }
}

/// Whether `text` says what `before` said (then `before`'s very bytes are put back).
fn same_value(edit: EditKind, text: &str, before: Option<&str>) -> bool {
    let object = match edit {
        EditKind::GeminiMcp => editors::jsonc_object,
        _ => editors::json_object,
    };
    match edit {
        EditKind::CodexMcp => text.trim_end() == before.unwrap_or("").trim_end(),
        _ => match (object(Some(text)), object(before)) {
            (Ok(a), Ok(b)) => {
                a == b
                    && (before.is_some()
                        || text.trim().is_empty()
                        || a.as_object().is_some_and(|o| o.is_empty()))
            }
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests;
