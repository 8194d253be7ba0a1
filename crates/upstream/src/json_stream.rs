//! Bounded-memory streaming reader for one JSONL row of any size.
//!
//! Used for rows larger than the scan window. It reads the row through a small buffer and builds
//! a *pruned* `serde_json::Value`: strings longer than `string_cap` bytes are replaced by a
//! digest object (see [`LONG_KEY`]) holding the length, hash and prefix of their normalised
//! text, and once the retained budget is spent further values are parsed but dropped (the row is
//! then flagged `truncated`). Memory is bounded by the caps, not by the row.
//!
//! Line semantics match the windowed path exactly: a row ends at the first `\n` byte; a raw
//! newline anywhere inside a value makes the row invalid (as `serde_json` would reject that
//! line); invalid UTF-8 inside strings, lone surrogates, control characters, nesting deeper than
//! 128 levels and trailing garbage make the row invalid.

use crate::text::{NormText, Normalizer};
use serde_json::{Map, Value};
use std::io::{self, Read};

/// Key of the object that stands for a long string in a pruned value.
pub const LONG_KEY: &str = "\u{0}sw_long";
const MAX_DEPTH: usize = 128;

/// Limits for the pruned value.
#[derive(Clone, Copy, Debug)]
pub struct StreamLimits {
    /// Strings longer than this (bytes, decoded) become digests.
    pub string_cap: usize,
    /// Total bytes of retained strings and keys.
    pub retained_bytes: usize,
    /// Total retained JSON nodes.
    pub retained_nodes: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits { string_cap: 16 * 1024, retained_bytes: 1024 * 1024, retained_nodes: 100_000 }
    }
}

/// Result of streaming one row.
#[derive(Debug)]
pub enum StreamedRow {
    /// The row is complete; `len` counts its bytes including the terminating `\n`.
    Row { value: Option<Value>, truncated: bool, len: u64 },
    /// End of data before the row's newline: the row is not complete yet.
    Partial,
}

struct Src<R> {
    r: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    consumed: u64,
}

impl<R: Read> Src<R> {
    fn fill(&mut self) -> io::Result<bool> {
        if self.pos < self.end {
            return Ok(true);
        }
        loop {
            match self.r.read(&mut self.buf) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.pos = 0;
                    self.end = n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
    fn next(&mut self) -> io::Result<Option<u8>> {
        if !self.fill()? {
            return Ok(None);
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        self.consumed += 1;
        Ok(Some(b))
    }
    fn peek(&mut self) -> io::Result<Option<u8>> {
        if !self.fill()? {
            return Ok(None);
        }
        Ok(Some(self.buf[self.pos]))
    }
}

/// Why parsing stopped early.
enum Stop {
    /// Syntax error; the byte that caused it was already consumed (and was `\n` if `at_newline`).
    Invalid {
        at_newline: bool,
    },
    /// Data ended before the row did.
    Eof,
    Io(io::Error),
}

impl From<io::Error> for Stop {
    fn from(e: io::Error) -> Self {
        Stop::Io(e)
    }
}

enum Frame {
    Arr(Vec<Value>),
    Obj(Map<String, Value>, Option<String>),
}

struct Budget {
    lim: StreamLimits,
    bytes: usize,
    nodes: usize,
    truncated: bool,
}

impl Budget {
    fn take(&mut self, bytes: usize) -> bool {
        if self.truncated
            || self.nodes + 1 > self.lim.retained_nodes
            || self.bytes + bytes > self.lim.retained_bytes
        {
            self.truncated = true;
            return false;
        }
        self.nodes += 1;
        self.bytes += bytes;
        true
    }
}

/// Stream one row starting at the reader's position.
pub fn stream_row<R: Read>(r: R, lim: StreamLimits) -> io::Result<StreamedRow> {
    let mut src = Src { r, buf: vec![0u8; 64 * 1024], pos: 0, end: 0, consumed: 0 };
    let mut budget = Budget { lim, bytes: 0, nodes: 0, truncated: false };
    match parse_row(&mut src, &mut budget) {
        Ok(v) => Ok(StreamedRow::Row { value: Some(v), truncated: budget.truncated, len: src.consumed }),
        Err(Stop::Io(e)) => Err(e),
        Err(Stop::Eof) => Ok(StreamedRow::Partial),
        Err(Stop::Invalid { at_newline }) => {
            if !at_newline {
                // Skip to the end of the line.
                loop {
                    match src.next()? {
                        None => return Ok(StreamedRow::Partial),
                        Some(b'\n') => break,
                        Some(_) => {}
                    }
                }
            }
            Ok(StreamedRow::Row { value: None, truncated: false, len: src.consumed })
        }
    }
}

/// A container may open inside `stack` only below `MAX_DEPTH`.
fn room_to_nest(stack: &[Frame]) -> Result<(), Stop> {
    if stack.len() >= MAX_DEPTH {
        return Err(Stop::Invalid { at_newline: false });
    }
    Ok(())
}

fn invalid(b: u8) -> Stop {
    Stop::Invalid { at_newline: b == b'\n' }
}

fn skip_ws<R: Read>(src: &mut Src<R>) -> Result<u8, Stop> {
    loop {
        match src.next()? {
            None => return Err(Stop::Eof),
            Some(b' ' | b'\t' | b'\r') => continue,
            Some(b) => return Ok(b),
        }
    }
}

fn parse_row<R: Read>(src: &mut Src<R>, budget: &mut Budget) -> Result<Value, Stop> {
    let first = skip_ws(src)?;
    let v = parse_value(src, budget, first)?;
    // Trailing whitespace, then the newline.
    match skip_ws(src)? {
        b'\n' => Ok(v),
        b => Err(invalid(b)),
    }
}

/// Iterative value parser (explicit stack, no recursion).
fn parse_value<R: Read>(src: &mut Src<R>, budget: &mut Budget, first: u8) -> Result<Value, Stop> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut b = first;
    loop {
        b = match start_value(src, budget, &mut stack, b)? {
            Started::Opened(next) => next,
            Started::Value(value) => match attach(src, budget, &mut stack, value)? {
                Attached::Next(next) => next,
                Attached::Done(value) => return Ok(value),
            },
        };
    }
}

/// What the byte that starts a value began.
enum Started {
    /// A whole value (a scalar or an empty container).
    Value(Value),
    /// A container, pushed on the stack; its first member starts at this byte.
    Opened(u8),
}

/// Parses the value starting at byte `b` (already consumed), or opens a container.
fn start_value<R: Read>(
    src: &mut Src<R>,
    budget: &mut Budget,
    stack: &mut Vec<Frame>,
    b: u8,
) -> Result<Started, Stop> {
    let value = match b {
        b'{' => {
            room_to_nest(stack)?;
            let c = skip_ws(src)?;
            if c == b'}' {
                Value::Object(Map::new())
            } else if c == b'"' {
                let key = parse_key(src, budget)?;
                expect_colon(src)?;
                stack.push(Frame::Obj(Map::new(), Some(key)));
                return Ok(Started::Opened(skip_ws(src)?));
            } else {
                return Err(invalid(c));
            }
        }
        b'[' => {
            room_to_nest(stack)?;
            let c = skip_ws(src)?;
            if c == b']' {
                Value::Array(Vec::new())
            } else {
                stack.push(Frame::Arr(Vec::new()));
                return Ok(Started::Opened(c));
            }
        }
        b'"' => parse_string_value(src, budget)?,
        b't' => literal(src, b"rue", Value::Bool(true))?,
        b'f' => literal(src, b"alse", Value::Bool(false))?,
        b'n' => literal(src, b"ull", Value::Null)?,
        b'-' | b'0'..=b'9' => parse_number(src, b)?,
        other => return Err(invalid(other)),
    };
    Ok(Started::Value(value))
}

/// Where a finished value went.
enum Attached {
    /// It was the whole row's value.
    Done(Value),
    /// Into its parent, whose next member starts at this byte.
    Next(u8),
}

/// Attaches `value` to its parent, closing containers as their ends arrive.
fn attach<R: Read>(
    src: &mut Src<R>,
    budget: &mut Budget,
    stack: &mut Vec<Frame>,
    mut value: Value,
) -> Result<Attached, Stop> {
    loop {
        let Some(top) = stack.last_mut() else {
            return Ok(Attached::Done(value));
        };
        let keep = budget.take(0);
        match top {
            Frame::Arr(items) => {
                if keep {
                    items.push(value);
                }
                match skip_ws(src)? {
                    b',' => return Ok(Attached::Next(skip_ws(src)?)),
                    b']' => {
                        let Some(Frame::Arr(items)) = stack.pop() else { unreachable!() };
                        value = Value::Array(items);
                    }
                    c => return Err(invalid(c)),
                }
            }
            Frame::Obj(map, key) => {
                if let Some(k) = key.take()
                    && keep
                {
                    map.insert(k, value);
                }
                match skip_ws(src)? {
                    b',' => {
                        let c = skip_ws(src)?;
                        if c != b'"' {
                            return Err(invalid(c));
                        }
                        *key = Some(parse_key(src, budget)?);
                        expect_colon(src)?;
                        return Ok(Attached::Next(skip_ws(src)?));
                    }
                    b'}' => {
                        let Some(Frame::Obj(map, _)) = stack.pop() else { unreachable!() };
                        value = Value::Object(map);
                    }
                    c => return Err(invalid(c)),
                }
            }
        }
    }
}

fn expect_colon<R: Read>(src: &mut Src<R>) -> Result<(), Stop> {
    match skip_ws(src)? {
        b':' => Ok(()),
        c => Err(invalid(c)),
    }
}

fn literal<R: Read>(src: &mut Src<R>, rest: &[u8], v: Value) -> Result<Value, Stop> {
    for &want in rest {
        match src.next()? {
            None => return Err(Stop::Eof),
            Some(c) if c == want => {}
            Some(c) => return Err(invalid(c)),
        }
    }
    Ok(v)
}

fn parse_number<R: Read>(src: &mut Src<R>, first: u8) -> Result<Value, Stop> {
    let mut tok = vec![first];
    loop {
        match src.peek()? {
            Some(c @ (b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')) => {
                src.next()?;
                if tok.len() < 4096 {
                    tok.push(c);
                } else {
                    return Err(Stop::Invalid { at_newline: false });
                }
            }
            Some(_) => break,
            None => return Err(Stop::Eof),
        }
    }
    match serde_json::from_slice::<serde_json::Number>(&tok) {
        Ok(n) => Ok(Value::Number(n)),
        Err(_) => Err(Stop::Invalid { at_newline: false }),
    }
}

/// Decoded characters of one JSON string, delivered to a sink.
fn parse_string_chars<R: Read>(src: &mut Src<R>, sink: &mut dyn FnMut(char)) -> Result<(), Stop> {
    loop {
        let b = match src.next()? {
            None => return Err(Stop::Eof),
            Some(b) => b,
        };
        match b {
            b'"' => return Ok(()),
            b'\\' => {
                let e = src.next()?.ok_or(Stop::Eof)?;
                let c = match e {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        let hi = hex4(src)?;
                        if (0xD800..0xDC00).contains(&hi) {
                            // Needs a low surrogate.
                            match src.next()?.ok_or(Stop::Eof)? {
                                b'\\' => {}
                                c => return Err(invalid(c)),
                            }
                            match src.next()?.ok_or(Stop::Eof)? {
                                b'u' => {}
                                c => return Err(invalid(c)),
                            }
                            let lo = hex4(src)?;
                            if !(0xDC00..0xE000).contains(&lo) {
                                return Err(Stop::Invalid { at_newline: false });
                            }
                            let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                            char::from_u32(cp).ok_or(Stop::Invalid { at_newline: false })?
                        } else if (0xDC00..0xE000).contains(&hi) {
                            return Err(Stop::Invalid { at_newline: false });
                        } else {
                            char::from_u32(hi).ok_or(Stop::Invalid { at_newline: false })?
                        }
                    }
                    c => return Err(invalid(c)),
                };
                sink(c);
            }
            0x00..=0x1f => return Err(invalid(b)),
            0x20..=0x7f => sink(b as char),
            _ => {
                let need = match b {
                    0xC2..=0xDF => 1,
                    0xE0..=0xEF => 2,
                    0xF0..=0xF4 => 3,
                    _ => return Err(Stop::Invalid { at_newline: false }),
                };
                let mut bytes = [b, 0, 0, 0];
                for slot in bytes.iter_mut().skip(1).take(need) {
                    match src.next()? {
                        None => return Err(Stop::Eof),
                        Some(c) if (0x80..0xC0).contains(&c) => *slot = c,
                        Some(c) => return Err(invalid(c)),
                    }
                }
                match std::str::from_utf8(&bytes[..need + 1]) {
                    Ok(s) => {
                        for c in s.chars() {
                            sink(c)
                        }
                    }
                    Err(_) => return Err(Stop::Invalid { at_newline: false }),
                }
            }
        }
    }
}

fn hex4<R: Read>(src: &mut Src<R>) -> Result<u32, Stop> {
    let mut v = 0u32;
    for _ in 0..4 {
        let c = src.next()?.ok_or(Stop::Eof)?;
        let d = (c as char).to_digit(16).ok_or(invalid(c))?;
        v = v * 16 + d;
    }
    Ok(v)
}

/// Parse a string value: kept whole up to the cap, otherwise a digest object.
fn parse_string_value<R: Read>(src: &mut Src<R>, budget: &mut Budget) -> Result<Value, Stop> {
    let cap = budget.lim.string_cap;
    let mut raw = String::new();
    let mut norm: Option<Normalizer> = None;
    let mut raw_len = 0u64;
    parse_string_chars(src, &mut |c| {
        raw_len += c.len_utf8() as u64;
        if let Some(n) = norm.as_mut() {
            n.push_char(c);
        } else if raw.len() + c.len_utf8() > cap {
            let mut n = Normalizer::default();
            n.push_str(&raw);
            n.push_char(c);
            raw = String::new();
            norm = Some(n);
        } else {
            raw.push(c);
        }
    })?;
    match norm {
        None => {
            if budget.take(raw.len()) {
                Ok(Value::String(raw))
            } else {
                Ok(Value::Null)
            }
        }
        Some(n) => Ok(long_value(n.finish(), raw_len)),
    }
}

fn parse_key<R: Read>(src: &mut Src<R>, budget: &mut Budget) -> Result<String, Stop> {
    let cap = budget.lim.string_cap.min(4096);
    let mut k = String::new();
    let mut over = false;
    parse_string_chars(src, &mut |c| {
        if k.len() + c.len_utf8() <= cap {
            k.push(c);
        } else {
            over = true;
        }
    })?;
    if over {
        budget.truncated = true;
    }
    Ok(k)
}

/// The digest object that stands for a long string.
pub fn long_value(n: NormText, raw_len: u64) -> Value {
    let mut m = Map::new();
    m.insert("len".into(), Value::from(n.len));
    m.insert("hash".into(), Value::from(n.hash));
    m.insert("prefix".into(), Value::String(n.prefix));
    m.insert("complete".into(), Value::Bool(n.complete));
    m.insert("rawLen".into(), Value::from(raw_len));
    let mut outer = Map::new();
    outer.insert(LONG_KEY.into(), Value::Object(m));
    Value::Object(outer)
}

/// Text of a JSON value that is a string or a long-string digest.
pub fn text_of(v: &Value) -> Option<TextRef<'_>> {
    match v {
        Value::String(s) => Some(TextRef::Full(s)),
        Value::Object(m) => {
            let d = m.get(LONG_KEY)?.as_object()?;
            Some(TextRef::Digest(NormText {
                len: d.get("len")?.as_u64()?,
                hash: d.get("hash")?.as_u64()?,
                prefix: d.get("prefix")?.as_str()?.to_string(),
                complete: d.get("complete")?.as_bool()?,
            }))
        }
        _ => None,
    }
}

/// A text found in a row: whole, or only its digest (from an oversized row).
#[derive(Debug, Clone)]
pub enum TextRef<'a> {
    Full(&'a str),
    Digest(NormText),
}

impl TextRef<'_> {
    pub fn norm(&self) -> NormText {
        match self {
            TextRef::Full(s) => NormText::of(s),
            TextRef::Digest(d) => d.clone(),
        }
    }
    pub fn full(&self) -> Option<&str> {
        match self {
            TextRef::Full(s) => Some(s),
            TextRef::Digest(_) => None,
        }
    }
}
