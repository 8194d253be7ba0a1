//! Windowed, append-only JSONL scanning shared by Claude Code, Codex and Pi.
//!
//! One tick reads at most [`WINDOW`] bytes from the marker offset and classifies complete lines
//! only. A truncated last line waits for its newline. A single row larger than the window is
//! streamed through [`crate::json_stream`] (bounded memory) and the cursor advances past it.
//! Bytes that were not classified are never skipped.
//!
//! Rewrites: the marker remembers a fingerprint of the first line and the number of human-shaped
//! rows before the offset. If the file shrinks below the offset or its first line changes (a
//! legacy Pi file migrated in place, a rollout re-materialised differently), scanning restarts
//! at 0 with a *floor*: the first `floor` human-shaped rows are the ones already seen.

use crate::json_stream::{StreamLimits, StreamedRow, stream_row};
use crate::text::{NormText, OwnTexts};
use crate::{CheckOutcome, CountedTurns, io_outcome};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// Bytes scanned per tick.
pub const WINDOW: usize = 1024 * 1024;
const HEAD_CAP: usize = 64 * 1024;

/// What a classifier says about one row.
#[derive(Debug)]
pub enum Verdict {
    /// Not a human turn.
    Ignore,
    /// Human-shaped row (self-echo not yet applied), with its time if known.
    Human(NormText, Option<i64>),
    /// Stop before this row (Pi: not a JSON object); the cursor stays before it.
    Stop,
}

/// Source-specific row classification, with state carried in the marker.
pub trait RowClassifier {
    /// Quick byte test: may this line be relevant? `false` lets the scanner skip parsing. Must
    /// be `true` for every line whose classification could be anything but `Ignore`.
    fn may_matter(&self, line: &[u8]) -> bool;
    /// Classify one row. `value` is `None` for a row that is not valid JSON. `truncated` is set
    /// when an oversized row could not be retained whole.
    fn classify(&mut self, value: Option<&Value>, truncated: bool) -> Verdict;
    /// Load state from the marker.
    fn load(&mut self, marker: &Map<String, Value>);
    /// Save state into the marker.
    fn save(&self, marker: &mut Map<String, Value>);
    /// The CLI's own id of the turn a human row starts (shared with its hooks), if it has one.
    fn turn_id(&self, _row: &Value) -> Option<String> {
        None
    }
    /// Dedupe id for an activity ending at `offset` with `humans` human-shaped rows so far.
    fn dedupe_id(&self, offset: u64, humans: u64) -> String {
        format!("{offset}:{humans}")
    }
}

/// Marker flag of a link adopted before its file was written (Claude, Codex).
pub(crate) const AWAITING_FILE: &str = "awaitingFile";

/// What a tick needs of a marker before anything else: where the classified part of the file ends, and
/// whether the file is still awaited. Read without building the rest (most ticks stop here).
#[derive(Deserialize)]
pub(crate) struct MarkerEnd {
    offset: Option<u64>,
    size: Option<u64>,
    #[serde(rename = "awaitingFile", default, deserialize_with = "present")]
    awaiting_file: bool,
}

/// A key that is there, whatever its value.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

impl MarkerEnd {
    pub(crate) fn parse(marker_json: &str) -> Option<MarkerEnd> {
        serde_json::from_str(marker_json).ok()
    }

    pub(crate) fn awaits_file(&self) -> bool {
        self.awaiting_file
    }

    /// Nothing to classify: `path` is a regular file whose size is where the marker ends (one stat,
    /// nothing opened; a same-size rewrite is caught once the file grows, as in [`check_file`]). Never
    /// while the file is awaited.
    pub(crate) fn is_idle_at(&self, path: &Path) -> bool {
        let Some(end) = self.offset.or(self.size) else { return false };
        !self.awaiting_file && std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == end)
    }
}

/// The JSONL marker.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonlMarker {
    pub offset: u64,
    /// Human-shaped rows before `offset`, if known.
    pub humans: Option<u64>,
    /// Rows with index <= floor were already seen (after a rewrite).
    pub floor: u64,
    /// Fingerprint of the first line, if known.
    pub head: Option<String>,
    /// Classifier state.
    pub extra: Map<String, Value>,
}

impl JsonlMarker {
    pub fn parse(s: &str) -> Option<JsonlMarker> {
        let v: Value = serde_json::from_str(s).ok()?;
        let m = v.as_object()?;
        let offset = m.get("offset").or_else(|| m.get("size")).and_then(Value::as_u64)?;
        let mut extra = m.clone();
        for k in ["offset", "size", "humans", "floor", "head"] {
            extra.remove(k);
        }
        Some(JsonlMarker {
            offset,
            humans: m.get("humans").and_then(Value::as_u64),
            floor: m.get("floor").and_then(Value::as_u64).unwrap_or(0),
            head: m.get("head").and_then(Value::as_str).map(str::to_string),
            extra,
        })
    }

    pub fn to_json(&self) -> String {
        let mut m = self.extra.clone();
        m.insert("offset".into(), json!(self.offset));
        if let Some(h) = self.humans {
            m.insert("humans".into(), json!(h));
        }
        if self.floor > 0 {
            m.insert("floor".into(), json!(self.floor));
        }
        if let Some(h) = &self.head {
            m.insert("head".into(), json!(h));
        }
        Value::Object(m).to_string()
    }
}

/// Fingerprint of the first line (up to 64 KiB of it): `len:hash`.
pub fn head_fingerprint(file: &mut File) -> io::Result<Option<String>> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0u8; HEAD_CAP];
    let n = read_full(file, &mut buf)?;
    let buf = &buf[..n];
    let line = match memchr::memchr(b'\n', buf) {
        Some(i) => &buf[..i],
        None if n == HEAD_CAP => buf,
        None => return Ok(None), // no complete first line yet
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in line {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    Ok(Some(format!("{}:{:016x}", line.len(), h)))
}

fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// One scanned row, as delivered to the visitor.
pub struct Row<'a> {
    pub value: Option<&'a Value>,
    pub truncated: bool,
    /// Offset just after the row's newline.
    pub end: u64,
}

/// Scan complete rows from `offset`, at most `window` bytes (plus one oversized row streamed).
/// `visit` returns `false` to stop before the row. Returns the classified end offset.
pub fn scan_window(
    file: &mut File,
    size: u64,
    offset: u64,
    window: usize,
    may_matter: &dyn Fn(&[u8]) -> bool,
    visit: &mut dyn FnMut(Row<'_>) -> bool,
) -> io::Result<u64> {
    if offset >= size {
        return Ok(offset);
    }
    let avail = size - offset;
    let want = avail.min(window as u64) as usize;
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0u8; want];
    let n = read_full(file, &mut buf)?;
    buf.truncate(n);
    let mut pos = 0usize;
    let mut classified = offset;
    while let Some(i) = memchr::memchr(b'\n', &buf[pos..]) {
        let line = &buf[pos..pos + i];
        let end = offset + (pos + i + 1) as u64;
        let relevant = may_matter(line);
        let parsed: Option<Value> = if relevant { serde_json::from_slice(line).ok() } else { None };
        let value_holder;
        let value = if !relevant {
            // Not relevant: hand the classifier a cheap placeholder object.
            value_holder = Value::Object(Map::new());
            Some(&value_holder)
        } else {
            parsed.as_ref()
        };
        if !visit(Row { value, truncated: false, end }) {
            return Ok(classified);
        }
        classified = end;
        pos += i + 1;
    }
    if pos == 0 && n == window && avail > window as u64 {
        // One row larger than the window: stream it with bounded memory.
        file.seek(SeekFrom::Start(offset))?;
        let reader = (&mut *file).take(size - offset);
        match stream_row(reader, StreamLimits::default())? {
            StreamedRow::Partial => {}
            StreamedRow::Row { value, truncated, len } => {
                let end = offset + len;
                if visit(Row { value: value.as_ref(), truncated, end }) {
                    classified = end;
                }
            }
        }
    }
    Ok(classified)
}

/// Result of scanning a file region with a classifier.
#[derive(Debug, Default)]
pub struct ScanTally {
    pub end: u64,
    /// Human-shaped rows seen (index counter after the scan).
    pub humans: u64,
    /// Rows counted as human (above the floor and external).
    pub counted: CountedTurns,
}

/// Run one window of classification.
#[allow(clippy::too_many_arguments)]
pub fn classify_window(
    file: &mut File,
    size: u64,
    offset: u64,
    humans_before: u64,
    floor: u64,
    window: usize,
    cls: &mut dyn RowClassifier,
    own: &OwnTexts,
) -> io::Result<ScanTally> {
    let mut tally = ScanTally { end: offset, humans: humans_before, ..ScanTally::default() };
    let end = {
        let cls_cell = std::cell::RefCell::new(&mut *cls);
        let may = |l: &[u8]| cls_cell.borrow().may_matter(l);
        let mut visit = |row: Row<'_>| -> bool {
            let verdict = cls_cell.borrow_mut().classify(row.value, row.truncated);
            match verdict {
                Verdict::Stop => false,
                Verdict::Ignore => true,
                Verdict::Human(text, ts) => {
                    tally.humans += 1;
                    if tally.humans > floor && own.is_external(&text) {
                        tally.counted.add(ts, row.value.and_then(|v| cls_cell.borrow().turn_id(v)));
                    }
                    true
                }
            }
        };
        scan_window(file, size, offset, window, &may, &mut visit)?
    };
    tally.end = end;
    Ok(tally)
}

/// Open a source file: stat first (never open something that is not a regular file).
pub fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), CheckOutcome> {
    let meta = std::fs::metadata(path).map_err(|e| io_outcome(&e, path))?;
    if !meta.is_file() {
        return Err(CheckOutcome::Missing);
    }
    let file = File::open(path).map_err(|e| io_outcome(&e, path))?;
    let meta = file.metadata().map_err(|e| io_outcome(&e, path))?;
    if !meta.is_file() {
        return Err(CheckOutcome::Missing);
    }
    Ok((file, meta))
}

fn mtime_ms(meta: &std::fs::Metadata) -> Option<i64> {
    let t = meta.modified().ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(d.as_millis() as i64)
}

/// One monitoring tick over a JSONL file.
pub fn check_file(
    path: &Path,
    marker_json: &str,
    own_texts: &[String],
    cls: &mut dyn RowClassifier,
) -> CheckOutcome {
    check_file_with_window(path, marker_json, own_texts, cls, WINDOW)
}

pub fn check_file_with_window(
    path: &Path,
    marker_json: &str,
    own_texts: &[String],
    cls: &mut dyn RowClassifier,
    window: usize,
) -> CheckOutcome {
    if MarkerEnd::parse(marker_json).is_some_and(|end| end.is_idle_at(path)) {
        return CheckOutcome::NoChange;
    }
    let Some(mut marker) = JsonlMarker::parse(marker_json) else {
        return CheckOutcome::Inconclusive("unreadable marker".into());
    };
    let (mut file, meta) = match open_regular(path) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let size = meta.len();
    if size == marker.offset {
        // Stat only: nothing appended (a same-size rewrite is caught once the file grows).
        return CheckOutcome::NoChange;
    }
    let head = match head_fingerprint(&mut file) {
        Ok(h) => h,
        Err(e) => return io_outcome(&e, path),
    };
    let rewritten = size < marker.offset
        || (marker.head.is_some() && head.is_some() && marker.head != head)
        || (marker.head.is_some() && head.is_none() && marker.offset > 0);
    if rewritten {
        marker = match rescan_after_rewrite(&mut file, size, &marker, &head, path) {
            Ok(m) => m,
            Err(o) => return o,
        };
    }
    if size <= marker.offset && !rewritten {
        return CheckOutcome::NoChange;
    }
    cls.load(&marker.extra);
    let own = OwnTexts::new(own_texts);
    let humans_before = marker.humans.unwrap_or(0);
    let tally =
        match classify_window(&mut file, size, marker.offset, humans_before, marker.floor, window, cls, &own)
        {
            Ok(t) => t,
            Err(e) => return io_outcome(&e, path),
        };
    if tally.end == marker.offset && !rewritten {
        return CheckOutcome::NoChange;
    }
    activity(marker, head, tally, &meta, cls)
}

/// The file was replaced or rewritten in place: the marker to rescan it from 0, above a floor of the
/// human turns already seen. With no count of those (unknown history), the tick re-baselines at the
/// current end and reports nothing (the `Err`, as for an I/O error).
fn rescan_after_rewrite(
    file: &mut File,
    size: u64,
    marker: &JsonlMarker,
    head: &Option<String>,
    path: &Path,
) -> Result<JsonlMarker, CheckOutcome> {
    let Some(seen) = marker.humans else {
        let end = last_complete_line_end(file, size).map_err(|e| io_outcome(&e, path))?;
        let next = JsonlMarker { offset: end, humans: None, floor: 0, head: head.clone(), extra: Map::new() };
        return Err(CheckOutcome::rebaselined(next.to_json(), format!("rebaseline:{end}")));
    };
    Ok(JsonlMarker {
        offset: 0,
        humans: Some(0),
        floor: seen.max(marker.floor),
        head: head.clone(),
        extra: Map::new(),
    })
}

/// What a tick that read past `marker` up to `tally.end` reports, with the marker it leaves.
fn activity(
    marker: JsonlMarker,
    head: Option<String>,
    tally: ScanTally,
    meta: &std::fs::Metadata,
    cls: &mut dyn RowClassifier,
) -> CheckOutcome {
    let mut next = JsonlMarker {
        offset: tally.end,
        humans: marker.humans.map(|_| tally.humans),
        floor: if tally.humans >= marker.floor { 0 } else { marker.floor },
        head: head.or(marker.head),
        extra: Map::new(),
    };
    if marker.humans.is_none() {
        next.floor = 0;
    }
    cls.save(&mut next.extra);
    let counted = tally.counted;
    let occurred = if counted.turns > 0 { counted.max_ts.or_else(|| mtime_ms(meta)) } else { None };
    CheckOutcome::Activity {
        human_turns: counted.turns,
        dedupe_id: cls.dedupe_id(tally.end, tally.humans),
        next_marker_json: next.to_json(),
        occurred_at_ms: occurred,
        turn_id: counted.last_turn,
    }
}

/// Offset just after the last `\n` of the file (0 if none).
pub fn last_complete_line_end(file: &mut File, size: u64) -> io::Result<u64> {
    let mut end = size;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let len = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        let n = read_full(file, &mut buf[..len])?;
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// Build the baseline marker at adoption: the end of the last complete line, with the number of
/// human-shaped rows before it (full pass over the file, bounded memory).
pub fn baseline(path: &Path, cls: &mut dyn RowClassifier) -> io::Result<JsonlMarker> {
    let mut file = File::open(path)?;
    let size = file.metadata()?.len();
    let head = head_fingerprint(&mut file)?;
    let end = last_complete_line_end(&mut file, size)?;
    let own = OwnTexts::default();
    let mut offset = 0u64;
    let mut humans = 0u64;
    while offset < end {
        let t = classify_window(&mut file, end, offset, humans, 0, WINDOW, cls, &own)?;
        humans = t.humans;
        if t.end == offset {
            // Stopped (Pi non-object row, or a row that cannot complete): baseline here.
            break;
        }
        offset = t.end;
    }
    let mut m = JsonlMarker { offset: end, humans: Some(humans), floor: 0, head, extra: Map::new() };
    if offset < end {
        // Rows after a stop point are not classifiable; the cursor stays at the stop point.
        m.offset = offset;
    }
    cls.save(&mut m.extra);
    Ok(m)
}

/// Iterate all complete rows of a file (bounded memory) with a callback; used by discovery.
/// Stops after `max_bytes` or when the callback returns false.
pub fn for_each_row(
    path: &Path,
    max_bytes: u64,
    f: &mut dyn FnMut(Option<&Value>) -> bool,
) -> io::Result<()> {
    let mut file = File::open(path)?;
    let size = file.metadata()?.len();
    let limit = size.min(max_bytes);
    let mut offset = 0u64;
    let mut stop = false;
    while offset < limit && !stop {
        let end = scan_window(&mut file, size, offset, WINDOW, &|_| true, &mut |row| {
            if stop || row.end > limit + WINDOW as u64 {
                return false;
            }
            if !f(row.value) {
                stop = true;
            }
            true
        })?;
        if end == offset {
            break;
        }
        offset = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::MarkerEnd;

    #[test]
    fn a_file_is_idle_only_at_its_marker_s_end() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.jsonl");
        std::fs::write(&file, "{\"a\":1}\n").unwrap();
        let idle = |marker: &str, path: &std::path::Path| {
            MarkerEnd::parse(marker).is_some_and(|e| e.is_idle_at(path))
        };
        assert!(idle(r#"{"offset":8,"humans":0}"#, &file));
        assert!(idle(r#"{"size":8}"#, &file), "older markers name the end `size`");
        assert!(!idle(r#"{"offset":4}"#, &file), "grown since");
        assert!(!idle(r#"{"offset":9}"#, &file), "shrunk since");
        assert!(!idle(r#"{"offset":8,"awaitingFile":true}"#, &file));
        assert!(!idle(r#"{"offset":8,"awaitingFile":null}"#, &file), "the flag counts whatever its value");
        assert!(!idle(r#"{"humans":0}"#, &file), "no end");
        assert!(!idle(r#"{"offset":"8"}"#, &file), "not a number");
        assert!(!idle("not json", &file));
        assert!(!idle(r#"{"offset":8}"#, &dir.path().join("gone.jsonl")));
        assert!(!idle(r#"{"offset":4096}"#, dir.path()), "a directory is no file, whatever its size");
    }
}
