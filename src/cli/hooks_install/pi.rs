//! `sessionwatch hooks install|uninstall|status pi`: Pi has no command hooks; it loads TypeScript
//! extensions. We write ONE file, `~/.pi/agent/extensions/sessionwatch.ts` (`--scope project`:
//! `<project>/.pi/extensions/sessionwatch.ts`), from `pi_extension.ts` with the install-time values (agent,
//! data dir, fallback gateway URL) on its `CONFIG` line.
//!
//! Ours is recognised by the marker on its first line: a file of that name without it is the user's and
//! is never overwritten nor removed. Installing twice changes nothing; an older copy of ours is replaced;
//! uninstall removes only ours. The file holds no secret (the token is read from the data dir at run
//! time) but is written 0600 like the other install records.

use super::marked::MarkedFile;
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

pub use super::marked::Found;

/// The extension file, written 0600 like the other install records.
const EXTENSION: MarkedFile = MarkedFile {
    is_ours,
    write: super::write_private,
    refusal: |file| {
        format!(
            "{} exists and was not written by sessionwatch (no {MARKER} marker on its first line): left \
             alone. Move it away and install again. Nothing was changed.",
            file.display()
        )
    },
};

pub fn inspect(file: &Path) -> anyhow::Result<Found> {
    EXTENSION.inspect(file)
}

/// Writes the extension; answers whether the file changed. A file of that name that is not ours is
/// refused and left as it is.
pub fn install(file: &Path, config: &ExtensionConfig) -> anyhow::Result<bool> {
    EXTENSION.install(file, &render(config))
}

/// Removes the extension if it is ours; answers whether it was removed. A file of that name that is not
/// ours is reported and left alone.
pub fn uninstall(file: &Path) -> anyhow::Result<bool> {
    match EXTENSION.remove(file)? {
        Found::Theirs => bail!(
            "{} was not written by sessionwatch (no {MARKER} marker on its first line): left alone",
            file.display()
        ),
        found => Ok(matches!(found, Found::Ours(_))),
    }
}

/// The `CONFIG` values of an installed extension of ours (for `status` and `doctor`).
pub fn installed_config(text: &str) -> Option<serde_json::Value> {
    let line = text.lines().find(|l| l.starts_with("const CONFIG"))?;
    let json = line.split_once("*/")?.1.trim().trim_end_matches(';');
    serde_json::from_str(json).ok()
}

/// `hooks status pi`.
pub fn status(file: &Path) -> anyhow::Result<()> {
    println!("pi {}", file.display());
    match inspect(file)? {
        Found::Missing => println!("  extension         not installed"),
        Found::Theirs => println!("  extension         not installed (a file of that name is not ours)"),
        Found::Ours(text) => {
            let config = installed_config(&text).map(|c| c.to_string()).unwrap_or_default();
            println!("  extension         installed: {config}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
