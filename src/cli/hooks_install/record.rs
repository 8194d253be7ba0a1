//! What `hooks install` found and added, kept until `hooks uninstall`: the settings file's bytes before
//! we first touched it (so an uninstall that leaves the same value gives back the very same bytes, or
//! removes a file we created) and the Codex trust entries we added to `config.toml`.
//! One file per settings file, `<data dir>/hooks-install/<sha256 of its path>.json`, 0600.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstallRecord {
    /// The settings file it is about.
    pub path: PathBuf,
    /// Its bytes before the install; `None`: there was no file.
    pub original: Option<String>,
    /// `[hooks.state."<key>"]` entries we added to Codex's `config.toml`, and that file.
    #[serde(default)]
    pub codex_trust: Vec<String>,
    #[serde(default)]
    pub codex_config: Option<PathBuf>,
}

pub struct Records {
    dir: PathBuf,
}

impl Records {
    pub fn new(dir: PathBuf) -> Records {
        Records { dir }
    }

    fn file_for(&self, settings: &Path) -> PathBuf {
        let abs = std::path::absolute(settings).unwrap_or_else(|_| settings.to_path_buf());
        let digest = Sha256::digest(abs.to_string_lossy().as_bytes());
        let name: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{name}.json"))
    }

    /// The record for `settings`; `None` when there is none (or it is unreadable: then uninstall only
    /// removes our entries, as without a record).
    pub fn get(&self, settings: &Path) -> Option<InstallRecord> {
        let text = std::fs::read_to_string(self.file_for(settings)).ok()?;
        serde_json::from_str(&text).ok()
    }

    pub fn put(&self, settings: &Path, record: &InstallRecord) -> anyhow::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        super::write_private(&self.file_for(settings), &serde_json::to_string(record)?)
    }

    pub fn remove(&self, settings: &Path) {
        let _ = std::fs::remove_file(self.file_for(settings));
    }
}
