//! The bearer token: generated on first start into the data dir with mode 0600, read by the CLI.

use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) fn token_path(data_dir: &Path) -> PathBuf {
    data_dir.join("token")
}

/// Reads the token, or creates one (mode 0600) if there is none.
pub fn load_or_create_token(data_dir: &Path) -> std::io::Result<String> {
    let path = token_path(data_dir);
    if let Some(t) = read_token(data_dir)? {
        return Ok(t);
    }
    std::fs::create_dir_all(data_dir)?;
    let token = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match opts.open(&path) {
        Ok(mut f) => {
            f.write_all(token.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            Ok(token)
        }
        // Another process created it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read_token(data_dir)?.ok_or_else(|| std::io::Error::other("token file is empty"))
        }
        Err(e) => Err(e),
    }
}

pub fn read_token(data_dir: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(token_path(data_dir)) {
        Ok(s) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
