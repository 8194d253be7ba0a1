//! What `setup` added, so `setup --undo` removes exactly that: `<data dir>/setup.json`, mode 0600 (it
//! holds copies of the user's config files from before our edits).

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const MANIFEST_NAME: &str = "setup.json";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EditKind {
    /// `~/.claude.json` `mcpServers.sessionwatch`.
    ClaudeMcp,
    /// `~/.claude/settings.json` `permissions.allow` `mcp__sessionwatch`.
    ClaudeAllow,
    /// `~/.codex/config.toml` `[mcp_servers.sessionwatch]`.
    CodexMcp,
    /// `~/.gemini/settings.json` `mcpServers.sessionwatch`.
    GeminiMcp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Added {
    /// A service definition we wrote (`text`), and whether we enabled and started it.
    Service { path: PathBuf, text: String, enabled: bool },
    /// `sessionwatch hooks install <cli>` (its own record keeps the file's bytes).
    Hooks { cli: String },
    /// An entry in a CLI's config file: the file's text before and after our edit (`None`: no file).
    Edit { edit: EditKind, path: PathBuf, before: Option<String>, after: String },
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The binary the entries run.
    pub exe: String,
    pub added: Vec<Added>,
}

pub fn manifest_path(data_dir: &Path) -> PathBuf {
    data_dir.join(MANIFEST_NAME)
}

impl Manifest {
    pub fn read(data_dir: &Path) -> anyhow::Result<Option<Manifest>> {
        let path = manifest_path(data_dir);
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(Some(
                serde_json::from_str(&t)
                    .with_context(|| format!("{} is not a setup manifest", path.display()))?,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Writes it atomically, 0600 from the start (tempfile creates files that way).
    pub fn write(&self, data_dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(data_dir).with_context(|| format!("cannot create {}", data_dir.display()))?;
        let mut tmp = tempfile::Builder::new().prefix(".setup.json.").tempfile_in(data_dir)?;
        tmp.write_all(serde_json::to_string_pretty(self)?.as_bytes())?;
        tmp.as_file().sync_all()?;
        tmp.persist(manifest_path(data_dir)).map_err(|e| e.error)?;
        Ok(())
    }

    pub fn remove(data_dir: &Path) -> anyhow::Result<()> {
        match std::fs::remove_file(manifest_path(data_dir)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}
