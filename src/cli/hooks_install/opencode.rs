//! `sessionwatch hooks install|uninstall|status opencode`: one plain JavaScript file in OpenCode's plugin
//! folder (`~/.config/opencode/plugins/sessionwatch.js`, or `<project>/.opencode/plugins/`), whose
//! handlers post to the gateway (`hook::opencode` maps what they send).
//!
//! The file is ours when its first line is [`MARKER`]: a file of that name without it is the user's and is
//! never written over or removed. Installing writes the file (again only if its text changed, e.g. another
//! data dir or agent); uninstalling removes it (there was no file before: we never replace one).

use super::marked::MarkedFile;
use std::path::{Path, PathBuf};

/// The first line of every plugin file we write.
pub const MARKER: &str = "// sessionwatch OpenCode plugin: written by `sessionwatch hooks install opencode`";

const TEMPLATE: &str = include_str!("opencode_plugin.js");

/// What the plugin file holds besides its code: where it finds the gateway and whose sessions these are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginConfig {
    /// The gateway's data dir: its runtime file (`gateway.json`, the live URL) and `token` are read
    /// there at each call, so a restarted gateway on another port or a new token needs no reinstall.
    pub data_dir: PathBuf,
    /// The URL used when no gateway runtime file names a live one (the config's address or the default).
    pub url: String,
    /// The sessionwatch agent that owns the sessions (`None`: the gateway's default, main).
    pub agent: Option<String>,
}

/// The plugin file's text. The configuration is one JSON object: no secret is written (the token stays
/// in the data dir, read at each call).
pub fn render(config: &PluginConfig) -> String {
    let agent_id = config.agent.as_deref().map(str::to_ascii_lowercase);
    let value = super::ConfigJson::new(agent_id, &config.data_dir, &config.url);
    let text = TEMPLATE.replacen("__CONFIG__", &value.to_string(), 1);
    debug_assert!(text.starts_with(MARKER));
    text
}

pub use super::marked::Found;

/// The plugin file: ours when its first line is [`MARKER`].
const PLUGIN: MarkedFile = MarkedFile {
    is_ours: |text| text.lines().next() == Some(MARKER),
    write: super::write_file,
    refusal: |file| {
        format!(
            "{} exists and is not sessionwatch's plugin (its first line is not {MARKER:?}): it was left \
             untouched; move it away, or install with --scope project or --file PATH",
            file.display()
        )
    },
};

pub fn inspect(file: &Path) -> anyhow::Result<Found> {
    PLUGIN.inspect(file)
}

/// Writes the plugin; `Ok(false)`: the same text was already there. A file of that name that is not
/// ours is refused, and left as it is.
pub fn install(file: &Path, config: &PluginConfig) -> anyhow::Result<bool> {
    PLUGIN.install(file, &render(config))
}

/// Removes our plugin file; `Ok(false)`: there was none of ours (a file that is not ours stays).
pub fn uninstall(file: &Path) -> anyhow::Result<bool> {
    Ok(matches!(PLUGIN.remove(file)?, Found::Ours(_)))
}

/// Whether the plugin installed at `file` is the one `config` makes (setup's and doctor's check).
pub fn is_current(file: &Path, config: &PluginConfig) -> bool {
    matches!(inspect(file), Ok(Found::Ours(t)) if t == render(config))
}

/// OpenCode's plugin folders: `$XDG_CONFIG_HOME/opencode/plugins` (default `~/.config/…`) for every
/// project, `<project>/.opencode/plugins` for one.
pub fn user_plugin_file(home: &Path) -> PathBuf {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".config"));
    config.join("opencode/plugins/sessionwatch.js")
}

pub fn project_plugin_file(project: &Path) -> PathBuf {
    project.join(".opencode/plugins/sessionwatch.js")
}

/// The plugin's configuration for this machine: the data dir and fallback URL `sessionwatch hook` would
/// use (a runtime file's URL is not written: the plugin reads the live one itself).
pub fn config_here(agent: Option<String>) -> PluginConfig {
    let found = super::super::resolve_gateway(super::super::client_context(None, None));
    let url = match found.url.source {
        sessionwatch_server::discovery::UrlSource::RuntimeFile { .. } => {
            let default: std::net::SocketAddr =
                sessionwatch_server::config::DEFAULT_LISTEN.parse().expect("valid default address");
            sessionwatch_server::discovery::url_for_listen(default)
        }
        _ => found.url.url,
    };
    PluginConfig { data_dir: found.data_dir, url, agent }
}

/// `hooks status opencode`.
pub fn status(file: &Path, config: &PluginConfig) -> anyhow::Result<()> {
    println!("opencode {}", file.display());
    let said = match inspect(file)? {
        Found::Missing => "not installed".to_string(),
        Found::Theirs => "not installed (a file of that name that is not sessionwatch's is there)".into(),
        Found::Ours(t) if t == render(config) => {
            "installed: chat.message, tool.execute.after and event post to the gateway".into()
        }
        Found::Ours(_) => "installed, but not as this sessionwatch would write it now (another data dir, \
                           address, agent or version): run `sessionwatch hooks install opencode` again"
            .into(),
    };
    println!("  plugin            {said}");
    Ok(())
}

#[cfg(test)]
mod tests;
