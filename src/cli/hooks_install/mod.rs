//! `sessionwatch hooks install|uninstall|status claude|codex|gemini|opencode|pi`: our entries in the CLI's
//! own hook settings (Claude `settings.json`, Codex `hooks.json`, Gemini `settings.json`), merged with what
//! is there; each CLI gets its own events ([`HookCli::events`]). OpenCode gets a plugin file instead
//! ([`opencode`]), Pi one extension file (`pi`).
//!
//! Our entries are the handlers whose command runs `sessionwatch hook`; everything else in the file is
//! left as it was, byte for byte (edited on its syntax tree). Installing twice changes nothing;
//! uninstalling removes only ours (and the arrays and objects that only held ours), and gives back the
//! file's exact bytes when nothing else changed since (see `record`). A file that is not the JSON shape
//! the CLI reads (strict JSON for Claude and Codex, JSON with comments for Gemini) is reported and left
//! untouched. Codex hooks are trusted at install (Codex skips
//! untrusted ones silently), so install needs a codex binary unless `--untrusted`.

pub(crate) mod codex_trust;
mod json;
mod marked;
pub(crate) mod opencode;
pub(crate) mod pi;
mod record;
mod settings;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use json::Json;
use record::{InstallRecord, Records};
use sessionwatch_upstream::hook::{HookCli, HookEvent};
use sessionwatch_upstream::source::{Installer, SettingsHooks};
use settings::Settings;
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
    /// claude, codex, gemini, opencode or pi.
    cli: String,
    /// user: your settings (~/.claude/settings.json, ~/.codex/hooks.json, ~/.gemini/settings.json,
    /// ~/.config/opencode/plugins/sessionwatch.js, ~/.pi/agent/extensions/sessionwatch.ts); project: the
    /// project's (.claude/settings.json, .codex/hooks.json, .gemini/settings.json,
    /// .opencode/plugins/sessionwatch.js, .pi/extensions/sessionwatch.ts in --project-dir).
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
    /// Codex: install without trusting the hooks (Codex skips them until you trust them with /hooks).
    #[arg(long)]
    untrusted: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Scope {
    User,
    Project,
}

/// Seconds the CLI waits for us; the command gives up on its own after 1 s. (Gemini counts its
/// `timeout` in milliseconds.)
const HOOK_TIMEOUT_SECS: u64 = 5;

pub fn run(cmd: HooksCommand) -> anyhow::Result<ExitCode> {
    let (target, action) = match &cmd {
        HooksCommand::Install(t) => (t, "install"),
        HooksCommand::Uninstall(t) => (t, "uninstall"),
        HooksCommand::Status(t) => (t, "status"),
    };
    let cli = HookCli::parse(&target.cli).ok_or_else(|| {
        anyhow::anyhow!("hooks exist for claude, codex, gemini, opencode and pi, not {:?}", target.cli)
    })?;
    if let Some(a) = &target.agent
        && !sessionwatch_core::is_valid_agent_id(&a.to_ascii_lowercase())
    {
        bail!("--agent {a:?} is not a valid agent id");
    }
    let file = settings_file(cli, target)?;
    let hooks = match cli.source().installer {
        Installer::PiExtension => return run_pi(action, &file, target),
        Installer::OpenCodePlugin => return run_opencode(action, &file, target),
        Installer::Settings(hooks) => hooks,
    };
    let exe = std::env::current_exe().context("cannot locate the sessionwatch binary")?;
    let ours = Ours { cli, command_prefix: shell_quote(&exe.to_string_lossy()), agent: target.agent.clone() };
    let records = Records::new(super::default_data_dir().join("hooks-install"));
    match action {
        "install" => {
            let trust = match hooks.trust && !target.untrusted {
                true => Some(TrustWith {
                    codex: codex_to_trust_with(target.codex.as_deref())?,
                    project_dir: target.project_dir.clone(),
                }),
                false => None,
            };
            let done = install_file(&file, &ours, &records, trust.as_ref())?;
            println!(
                "{} {}: sessionwatch hooks {}",
                cli.as_str(),
                file.display(),
                if done.changed { "installed" } else { "already installed" }
            );
            match (hooks.trust, done.trusted) {
                (true, Some(n)) => {
                    println!("codex: trusted {n} sessionwatch hooks (Codex runs only trusted hooks)")
                }
                (true, None) => println!(
                    "codex: the hooks are installed untrusted (--untrusted): Codex skips them silently until \
                     you trust them with /hooks in the Codex TUI"
                ),
                _ => {}
            }
        }
        "uninstall" => {
            let changed = uninstall_file(&file, cli, &records)?;
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

/// OpenCode: the plugin file.
fn run_opencode(action: &str, file: &Path, target: &Target) -> anyhow::Result<ExitCode> {
    let config = opencode::config_here(target.agent.clone());
    let changed = match action {
        "install" => opencode::install(file, &config)?,
        "uninstall" => opencode::uninstall(file)?,
        _ => {
            opencode::status(file, &config)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let when = if action == "install" { " (OpenCode loads it when it starts)" } else { "" };
    println!("{}{when}", marked::outcome("opencode", file, "plugin", action, changed));
    Ok(ExitCode::SUCCESS)
}

/// What `hooks install pi` writes into the extension now: the agent, the data dir and the gateway URL
/// every client would find.
pub(crate) fn pi_config(agent: Option<&str>) -> pi::ExtensionConfig {
    let found = super::resolve_gateway(super::client_context(None, None));
    pi::ExtensionConfig {
        agent_id: agent.map(|a| a.to_ascii_lowercase()),
        data_dir: found.data_dir,
        url: found.url.url,
    }
}

/// `hooks install|uninstall|status pi`: the one extension file.
fn run_pi(action: &str, file: &Path, target: &Target) -> anyhow::Result<ExitCode> {
    let changed = match action {
        "install" => pi::install(file, &pi_config(target.agent.as_deref()))?,
        "uninstall" => pi::uninstall(file)?,
        _ => {
            pi::status(file)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    println!("{}", marked::outcome("pi", file, "extension", action, changed));
    Ok(ExitCode::SUCCESS)
}

/// Codex runs only trusted hooks and skips the others silently: without a codex to ask for the trust
/// keys, install refuses (nothing changed) unless `--untrusted` says the user will trust them by hand.
fn codex_to_trust_with(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    codex_trust::find_codex(given).ok_or_else(|| {
        let what = match given {
            Some(p) => format!("--codex {} is not an executable file", p.display()),
            None => "no codex on PATH".to_string(),
        };
        anyhow::anyhow!(
            "{what}: Codex runs only trusted hooks (and skips untrusted ones silently), and trusting them needs \
             the codex binary. Put codex on PATH or pass --codex PATH; or pass --untrusted to install them \
             untrusted and trust them with /hooks in the Codex TUI. Nothing was changed."
        )
    })
}

pub(crate) struct TrustWith {
    codex: PathBuf,
    project_dir: Option<PathBuf>,
}

struct Installed {
    changed: bool,
    /// How many hooks Codex now trusts (`None`: not asked to).
    trusted: Option<usize>,
}

/// Installs our entries into `file`, keeping a record of its bytes from before our first install, and
/// (Codex) trusts them; if the trust fails, the file is put back as it was and the error answered.
fn install_file(
    file: &Path,
    ours: &Ours,
    records: &Records,
    trust: Option<&TrustWith>,
) -> anyhow::Result<Installed> {
    let s = Settings::load(file, ours.cli)?;
    let had_ours = ours.cli.events().iter().any(|e| settings::installed_command(&s.value(), *e).is_some());
    let mut record = match records.get(file) {
        Some(r) if had_ours => r,
        // No entry of ours (first install, or the user removed them by hand): the file as it is now
        // is what uninstall gives back.
        _ => InstallRecord {
            path: file.to_path_buf(),
            original: s.original.clone(),
            ..InstallRecord::default()
        },
    };
    let changed = settings::install(&s, ours)?;
    if changed {
        records.put(file, &record)?;
        write_file(file, &s.text())?;
    }
    let Some(t) = trust else { return Ok(Installed { changed, trusted: None }) };
    match codex_trust::trust(&t.codex, file, t.project_dir.as_deref()) {
        Ok((n, added)) => {
            if !added.is_empty() {
                record.codex_config = Some(codex_trust::config_file()?);
                record.codex_trust.extend(added);
                records.put(file, &record)?;
            }
            Ok(Installed { changed, trusted: Some(n) })
        }
        Err(e) => {
            if changed {
                restore(file, s.original.as_deref())?;
                if !had_ours {
                    records.remove(file);
                }
            }
            Err(e.context(format!(
                "codex could not trust the hooks, so they were not installed ({} is as it was); \
                 pass --untrusted to install them untrusted",
                file.display()
            )))
        }
    }
}

/// Removes our entries; when what is left is the value the file had before our install, the file
/// gets its very bytes back (or goes, if we created it). Then the Codex trust we added goes too.
fn uninstall_file(file: &Path, cli: HookCli, records: &Records) -> anyhow::Result<bool> {
    let s = Settings::load(file, cli)?;
    let record = records.get(file);
    let before = record.as_ref().map(|r| settings::value_of(r.original.as_deref().unwrap_or("")));
    let mut changed = settings::uninstall(&s, before.as_ref())?;
    match &record {
        Some(r) if Some(s.value()) == before => {
            changed |= s.original != r.original;
            restore(file, r.original.as_deref())?;
        }
        _ if changed => write_file(file, &s.text())?,
        _ => {}
    }
    if let Some(r) = record {
        if let Some(config) = &r.codex_config {
            changed |= codex_trust::untrust(config, &r.codex_trust)? > 0;
        }
        records.remove(file);
    }
    Ok(changed)
}

/// Puts `file` back to `original` (`None`: it did not exist).
fn restore(file: &Path, original: Option<&str>) -> anyhow::Result<()> {
    match original {
        Some(text) => write_file(file, text),
        None => match std::fs::remove_file(file) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).with_context(|| format!("cannot remove {}", file.display())),
        },
    }
}

/// Replaces `file` atomically, keeping its permissions (a new file: the user's umask); `setup` writes
/// its files with it too.
pub(crate) fn write_file(file: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let tmp = file.with_extension("sessionwatch-tmp");
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    if let Ok(meta) = std::fs::metadata(file) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    std::fs::rename(&tmp, file).with_context(|| format!("cannot replace {}", file.display()))?;
    Ok(())
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
    Ok(match (cli.source().installer, t.scope) {
        (Installer::Settings(h), Scope::User) => match std::env::var_os(h.user_env) {
            Some(d) => PathBuf::from(d).join(h.under_env),
            None => home()?.join(h.under_home),
        },
        (Installer::Settings(h), Scope::Project) => project()?.join(h.project),
        (Installer::OpenCodePlugin, Scope::User) => opencode::user_plugin_file(&home()?),
        (Installer::OpenCodePlugin, Scope::Project) => opencode::project_plugin_file(&project()?),
        (Installer::PiExtension, Scope::User) => pi::extension_file(None)?,
        (Installer::PiExtension, Scope::Project) => pi::extension_file(Some(&project()?))?,
    })
}

/// How `cli` reads its hook settings (`None`: its hooks are a plugin or an extension, not settings).
fn settings_hooks(cli: HookCli) -> Option<SettingsHooks> {
    match cli.source().installer {
        Installer::Settings(h) => Some(h),
        Installer::OpenCodePlugin | Installer::PiExtension => None,
    }
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

    /// Our handler's fields: `type`, (Gemini) `name`, `command`, `timeout` (Gemini: milliseconds).
    fn fields(&self, event: HookEvent) -> Vec<(&'static str, Json)> {
        let mut fields = vec![("type", Json::String("command".into()))];
        let timeout = match settings_hooks(self.cli).is_some_and(|h| h.named_handlers_ms) {
            true => {
                fields.push(("name", Json::String(handler_name(event))));
                HOOK_TIMEOUT_SECS * 1000
            }
            false => HOOK_TIMEOUT_SECS,
        };
        fields.push(("command", Json::String(self.command(event))));
        fields.push(("timeout", Json::Number(timeout.into())));
        fields
    }

    fn handler(&self, event: HookEvent) -> Json {
        Json::Object(self.fields(event).into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    fn handler_input(&self, event: HookEvent) -> jsonc_parser::cst::CstInputValue {
        use jsonc_parser::cst::CstInputValue;
        let input = |v: Json| match v {
            Json::String(s) => CstInputValue::String(s),
            Json::Number(n) => CstInputValue::Number(n.to_string()),
            other => unreachable!("our handlers hold strings and numbers, not {other:?}"),
        };
        CstInputValue::Object(
            self.fields(event).into_iter().map(|(k, v)| (k.to_string(), input(v))).collect(),
        )
    }
}

/// Gemini shows a hook's `name` in its hook list: `sessionwatch-before-agent` for `BeforeAgent`.
fn handler_name(event: HookEvent) -> String {
    let mut name = String::from("sessionwatch");
    for c in event.as_str().chars() {
        if c.is_ascii_uppercase() {
            name.push('-');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

pub(crate) fn is_our_command(cmd: &str) -> bool {
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

fn status(cli: HookCli, file: &Path) -> anyhow::Result<()> {
    let doc = Settings::load(file, cli)?.value();
    println!("{} {}", cli.as_str(), file.display());
    for &event in cli.events() {
        match settings::installed_command(&doc, event) {
            Some(cmd) => println!("  {:<17} installed: {cmd}", event.as_str()),
            None => println!("  {:<17} not installed", event.as_str()),
        }
    }
    Ok(())
}

/// Quotes for `sh -c` (the CLIs run the command through a shell) when needed.
fn shell_quote(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The configuration our OpenCode plugin and Pi extension files carry (one JSON object, no secret: the
/// token stays in the data dir, read at each call). Fields in alphabetical order, as the files have
/// always had them, so a reinstall writes the same bytes.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfigJson<'a> {
    agent_id: Option<String>,
    data_dir: std::borrow::Cow<'a, str>,
    url: &'a str,
}

impl<'a> ConfigJson<'a> {
    fn new(agent_id: Option<String>, data_dir: &'a Path, url: &'a str) -> ConfigJson<'a> {
        ConfigJson { agent_id, data_dir: data_dir.to_string_lossy(), url }
    }
}

impl std::fmt::Display for ConfigJson<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| std::fmt::Error)?)
    }
}

#[cfg(test)]
mod tests;

/// Creates the file (and its directory) atomically with mode 0600.
pub(crate) fn write_private(file: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = file.with_extension("sessionwatch-tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(text.as_bytes()).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, file).with_context(|| format!("cannot write {}", file.display()))?;
    Ok(())
}
