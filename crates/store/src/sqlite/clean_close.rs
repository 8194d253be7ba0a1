//! A record of a clean close, so that the next open may skip `PRAGMA quick_check`.
//!
//! The open checks a file it did not create (`quick_check` reads every page: 200 ms for a 180 MB file of
//! a million cursors, most of a start-up over it) so that a damaged or foreign file is refused untouched.
//! A file we closed cleanly and nobody touched since needs no check: when the store closes with no WAL
//! left (every connection closed, the log checkpointed into the file), it writes `<db>-clean` naming the
//! file's identity, size, and modification and change times to the nanosecond. The next open takes the
//! record away first (a crash from then on leaves none) and skips the check only if the file still
//! matches it and no WAL holds anything. Any write to the file since (a copy over it, a truncation, a
//! tool editing pages in place, `touch`) moves its change time, which nobody can set back; a record that
//! does not parse is no record.
//!
//! A change within the clock's granularity after our close could keep the same times on a kernel
//! without fine-grained timestamps (before Linux 6.13: a few milliseconds); nothing writes to a closed
//! database that soon but another program, and a damaged page is still refused by SQLite when read.

use std::path::{Path, PathBuf};

/// Who a clean close is recorded for: written when it is dropped, after the connections it outlives.
pub(super) struct CleanClose {
    db: PathBuf,
}

impl CleanClose {
    pub(super) fn new(db: &Path) -> CleanClose {
        CleanClose { db: db.to_path_buf() }
    }
}

impl Drop for CleanClose {
    fn drop(&mut self) {
        let Some(state) = FileState::of(&self.db) else { return };
        let mut record = std::ffi::OsString::from(self.db.as_os_str());
        record.push(SUFFIX);
        // Best effort: without the record, the next open checks the file.
        let written = super::lock::private_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&record)
            .and_then(|mut f| std::io::Write::write_all(&mut f, state.to_line().as_bytes()));
        if let Err(e) = written {
            tracing::debug!(file = %Path::new(&record).display(), error = %e, "cannot record a clean close");
            let _ = std::fs::remove_file(&record);
        }
    }
}

const SUFFIX: &str = "-clean";

/// Takes the record of `db`'s clean close away; answers whether the file is still exactly as it was
/// closed then (so its check may be skipped).
pub(super) fn take(db: &Path) -> bool {
    let mut record = std::ffi::OsString::from(db.as_os_str());
    record.push(SUFFIX);
    let Ok(line) = read_small(Path::new(&record)) else { return false };
    // A record we cannot take away could outlive a crash: then the file is checked.
    if std::fs::remove_file(&record).is_err() {
        return false;
    }
    FileState::of(db).is_some_and(|now| Some(now) == FileState::parse(&line))
}

fn read_small(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?.take(256).read_to_string(&mut text)?;
    Ok(text)
}

/// What identifies a database file's state: any write to it changes `changed_ns`.
#[derive(Debug, PartialEq, Eq)]
struct FileState {
    device: u64,
    inode: u64,
    bytes: u64,
    modified_ns: i128,
    changed_ns: i128,
}

impl FileState {
    /// The file's state, if it has no WAL with content (a WAL would be replayed into it at the open).
    #[cfg(unix)]
    fn of(db: &Path) -> Option<FileState> {
        use std::os::unix::fs::MetadataExt;
        let mut wal = std::ffi::OsString::from(db.as_os_str());
        wal.push("-wal");
        match std::fs::metadata(&wal) {
            Ok(m) if m.len() > 0 => return None,
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return None,
            _ => {}
        }
        let m = std::fs::metadata(db).ok()?;
        let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        Some(FileState {
            device: m.dev(),
            inode: m.ino(),
            bytes: m.len(),
            modified_ns: ns(m.mtime(), m.mtime_nsec()),
            changed_ns: ns(m.ctime(), m.ctime_nsec()),
        })
    }

    /// Elsewhere the change time is not at hand: every open checks.
    #[cfg(not(unix))]
    fn of(_db: &Path) -> Option<FileState> {
        None
    }

    fn to_line(&self) -> String {
        let FileState { device, inode, bytes, modified_ns, changed_ns } = self;
        format!("v1 {device} {inode} {bytes} {modified_ns} {changed_ns}\n")
    }

    fn parse(line: &str) -> Option<FileState> {
        let mut words = line.strip_suffix('\n')?.split(' ');
        (words.next()? == "v1").then_some(())?;
        let state = FileState {
            device: words.next()?.parse().ok()?,
            inode: words.next()?.parse().ok()?,
            bytes: words.next()?.parse().ok()?,
            modified_ns: words.next()?.parse().ok()?,
            changed_ns: words.next()?.parse().ok()?,
        };
        words.next().is_none().then_some(state)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn db_in(dir: &Path) -> PathBuf {
        let db = dir.join("state.db");
        std::fs::write(&db, vec![7u8; 8192]).unwrap();
        db
    }

    /// Records a clean close of `db`, then lets the clock pass its coarsest tick (a few milliseconds on
    /// kernels without fine-grained timestamps), as it always has before another program opens the file.
    fn record(db: &Path) -> PathBuf {
        drop(CleanClose::new(db));
        let record = PathBuf::from(format!("{}{SUFFIX}", db.display()));
        assert!(record.exists(), "a clean close is recorded");
        std::thread::sleep(std::time::Duration::from_millis(20));
        record
    }

    #[test]
    fn an_untouched_file_matches_its_record_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_in(dir.path());
        let record = record(&db);
        assert!(take(&db));
        assert!(!record.exists(), "the record is taken away at the open");
        assert!(!take(&db), "a second open (after a crash, say) finds none");
    }

    #[test]
    fn a_write_after_the_close_does_not_match() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_in(dir.path());
        record(&db);
        // The same size, the same inode: only the times tell.
        std::fs::write(&db, vec![9u8; 8192]).unwrap();
        assert!(!take(&db));
    }

    #[test]
    fn a_file_put_in_its_place_does_not_match() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_in(dir.path());
        record(&db);
        let other = dir.path().join("other.db");
        std::fs::write(&other, vec![7u8; 8192]).unwrap();
        std::fs::rename(&other, &db).unwrap();
        assert!(!take(&db));
    }

    #[test]
    fn a_wal_with_content_is_neither_recorded_nor_matched() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_in(dir.path());
        let wal = PathBuf::from(format!("{}-wal", db.display()));
        std::fs::write(&wal, b"frames").unwrap();
        drop(CleanClose::new(&db));
        assert!(!PathBuf::from(format!("{}{SUFFIX}", db.display())).exists());
        std::fs::remove_file(&wal).unwrap();
        record(&db);
        std::fs::write(&wal, b"frames").unwrap();
        assert!(!take(&db));
    }

    #[test]
    fn a_record_that_does_not_parse_is_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let db = db_in(dir.path());
        let record = record(&db);
        let line = std::fs::read_to_string(&record).unwrap();
        for bad in [
            line.replace("v1", "v2"),
            line.trim_end().to_string(),
            format!("{} 1\n", line.trim_end()),
            line.replace(' ', "  "),
            "\u{0}".repeat(300),
        ] {
            std::fs::write(&record, &bad).unwrap();
            assert!(!take(&db), "{bad:?}");
        }
        // The real line still matches: the refusals above were the text's.
        std::fs::write(&record, &line).unwrap();
        assert!(take(&db));
    }
}
