//! `sessionwatch hooks install|uninstall|status pi`: Pi has no command hooks; it loads TypeScript
//! extensions. We write ONE file, `~/.pi/agent/extensions/sessionwatch.ts` (`--scope project`:
//! `<project>/.pi/extensions/sessionwatch.ts`), from `pi_extension.ts` with the install-time values (agent,
//! data dir, fallback gateway URL) on its `CONFIG` line.
//!
//! Ours is recognised by the marker on its first line: a file of that name without it is the user's and
//! is never overwritten nor removed. Installing twice changes nothing; an older copy of ours is replaced;
//! uninstall removes only ours. The file holds no secret (the token is read from the data dir at run
//! time) but is written 0600 like the other install records.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};

/// The extension's source; its `CONFIG` line is filled in by [`render`].
const TEMPLATE: &str = include_str!("pi_extension.ts");
/// On the first line of every file we write.
pub const MARKER: &str = "(sessionwatch-pi-extension)";
/// The placeholder `CONFIG` object in [`TEMPLATE`], replaced by [`render`].
const CONFIG_PLACEHOLDER: &str = r#"{"agentId":null,"dataDir":"/nonexistent","url":"http://127.0.0.1:7420"}"#;
pub const FILE_NAME: &str = "sessionwatch.ts";

/// The install-time values the extension carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtensionConfig {
    /// `--agent`: the sessionwatch agent that owns the sessions (`None`: the gateway's default, main).
    pub agent_id: Option<String>,
    /// Where the token and the running gateway's runtime file are (`<data dir>/token`, `gateway.json`).
    pub data_dir: PathBuf,
    /// The gateway URL when no gateway runtime file names one (the config's listen address, or the default).
    pub url: String,
}

/// The extension file's text for `config`.
pub fn render(config: &ExtensionConfig) -> String {
    let values = super::ConfigJson::new(config.agent_id.clone(), &config.data_dir, &config.url);
    TEMPLATE.replacen(CONFIG_PLACEHOLDER, &values.to_string(), 1)
}

/// Whether `text` is a file we wrote.
pub fn is_ours(text: &str) -> bool {
    text.lines().next().is_some_and(|l| l.starts_with("//") && l.contains(MARKER))
}

/// `~/.pi/agent/extensions/sessionwatch.ts` (Pi's agent dir is `$PI_CODING_AGENT_DIR` when set), or
/// `<project>/.pi/extensions/sessionwatch.ts`.
pub fn extension_file(project: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = project {
        return Ok(p.join(".pi/extensions").join(FILE_NAME));
    }
    let agent_dir = match std::env::var_os("PI_CODING_AGENT_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".pi/agent"),
    };
    Ok(agent_dir.join("extensions").join(FILE_NAME))
}

/// What is at the extension's path.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    Missing,
    /// Ours, with its text.
    Ours(String),
    /// A file of that name that we did not write.
    Theirs,
}

pub fn inspect(file: &Path) -> anyhow::Result<Found> {
    match std::fs::read(file) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            Ok(if is_ours(&text) { Found::Ours(text) } else { Found::Theirs })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Found::Missing),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
    }
}

/// Writes the extension; answers whether the file changed. A file of that name that is not ours is
/// refused and left as it is.
pub fn install(file: &Path, config: &ExtensionConfig) -> anyhow::Result<bool> {
    let text = render(config);
    match inspect(file)? {
        Found::Ours(old) if old == text => return Ok(false),
        Found::Theirs => bail!(
            "{} exists and was not written by sessionwatch (no {MARKER} marker on its first line): left \
             alone. Move it away and install again. Nothing was changed.",
            file.display()
        ),
        Found::Ours(_) | Found::Missing => {}
    }
    super::write_private(file, &text)?;
    Ok(true)
}

/// Removes the extension if it is ours; answers whether it was removed. A file of that name that is not
/// ours is reported and left alone.
pub fn uninstall(file: &Path) -> anyhow::Result<bool> {
    match inspect(file)? {
        Found::Missing => Ok(false),
        Found::Theirs => bail!(
            "{} was not written by sessionwatch (no {MARKER} marker on its first line): left alone",
            file.display()
        ),
        Found::Ours(_) => {
            std::fs::remove_file(file).with_context(|| format!("cannot remove {}", file.display()))?;
            Ok(true)
        }
    }
}

/// The `CONFIG` values of an installed extension of ours (for `status` and `doctor`).
pub fn installed_config(text: &str) -> Option<serde_json::Value> {
    let line = text.lines().find(|l| l.starts_with("const CONFIG"))?;
    let json = line.split_once("*/")?.1.trim().trim_end_matches(';');
    serde_json::from_str(json).ok()
}

#[cfg(test)]
mod tests;
