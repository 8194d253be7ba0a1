//! One gateway per database file: an exclusive lock on `<db>.lock`, held by the store opened with it
//! (`SqliteStore::open_locked`) until it closes.
//!
//! Two processes serving one SQLite file each keep their own in-memory notice queues, so notices would be
//! split between them silently; and a store holding the lock keeps session rows and checked tail pages in
//! memory, which only its own writer's commits may change. The lock is advisory (`flock`): the kernel releases it when the process
//! dies, kill -9 included, so a stale lock file never blocks a restart. The file is never deleted
//! (deleting a lock file races with the next process taking it).

use crate::{Result, StoreError};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Held while a gateway serves the database; dropping it releases the lock.
#[derive(Debug)]
pub struct GatewayLock {
    _file: File,
    path: PathBuf,
    /// The database it locks.
    database: PathBuf,
}

impl GatewayLock {
    /// Takes the lock of the database at `db`, or says which process holds it.
    pub fn acquire(db: &Path) -> Result<GatewayLock> {
        let path = lock_path(db);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = private_options().read(true).write(true).create(true).truncate(false).open(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                let holder = holder.trim();
                let by = if holder.is_empty() { String::new() } else { format!(" (pid {holder})") };
                return Err(StoreError::Locked(format!(
                    "another sessionwatch gateway{by} is serving {}; stop it, or give this one another \
                     database (lock file {})",
                    db.display(),
                    path.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(e.into()),
        }
        // Who holds it, for the next one's error message.
        file.set_len(0)?;
        writeln!(file, "{}", std::process::id())?;
        Ok(GatewayLock { _file: file, path, database: db.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The database this lock is for.
    pub fn database(&self) -> &Path {
        &self.database
    }
}

fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| "sessionwatch.db".into());
    name.push(".lock");
    db.with_file_name(name)
}

/// Open options that create a file readable by its owner only (our files hold transcript text).
pub(crate) fn private_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o
}
