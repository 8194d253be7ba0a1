//! Text normalisation and digests.
//!
//! Self-echo and replay comparisons work on the *normalised* text (trimmed, every whitespace run
//! collapsed to one space). Texts that arrive inside oversized rows are never held whole: the
//! streaming parser feeds them through [`Normalizer`] and keeps only a [`NormText`] digest
//! (length, polynomial hash, short prefix). Small texts go through the same normaliser, so both
//! paths compare equal for equal texts.

/// Trim and collapse whitespace runs (Unicode `White_Space`) into single spaces.
pub fn normalize_user_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

const MOD: u64 = (1u64 << 61) - 1;
const BASE: u64 = 0x1f3d_5b79_a6c1_e2d5 % MOD;
/// Characters of the normalised text kept verbatim in a digest (for prefix rules).
pub(crate) const PREFIX_CHARS: usize = 512;

fn mulmod(a: u64, b: u64) -> u64 {
    let p = (a as u128) * (b as u128);
    let lo = (p as u64) & MOD;
    let hi = (p >> 61) as u64;
    let s = lo + hi;
    if s >= MOD { s - MOD } else { s }
}

fn addmod(a: u64, b: u64) -> u64 {
    let s = a + b;
    if s >= MOD { s - MOD } else { s }
}

fn powmod(mut b: u64, mut e: u64) -> u64 {
    let mut r = 1u64;
    while e > 0 {
        if e & 1 == 1 {
            r = mulmod(r, b);
        }
        b = mulmod(b, b);
        e >>= 1;
    }
    r
}

/// Digest of a normalised text: equal normalised texts give equal digests; digests of parts can
/// be joined (with one space) without the parts' bytes.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NormText {
    /// Byte length of the normalised text.
    pub len: u64,
    /// Polynomial hash (mod 2^61-1) over the normalised UTF-8 bytes.
    pub hash: u64,
    /// The first [`PREFIX_CHARS`] characters of the normalised text.
    pub prefix: String,
    /// True when `prefix` is the whole normalised text.
    pub complete: bool,
}

impl NormText {
    pub fn of(s: &str) -> NormText {
        let mut n = Normalizer::default();
        n.push_str(s);
        n.finish()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn starts_with(&self, p: &str) -> bool {
        self.prefix.starts_with(p)
    }

    /// Join normalised texts with one space, skipping empty ones (what normalising the texts
    /// joined by any whitespace gives).
    pub fn join<'a>(parts: impl IntoIterator<Item = &'a NormText>) -> NormText {
        let mut acc = NormText { complete: true, ..NormText::default() };
        for p in parts {
            if p.is_empty() {
                continue;
            }
            if !acc.is_empty() {
                acc.append_bytes(b" ");
                if acc.complete && acc.prefix.chars().count() < PREFIX_CHARS {
                    acc.prefix.push(' ');
                } else {
                    acc.complete = false;
                }
            }
            acc.hash = addmod(mulmod(acc.hash, powmod(BASE, p.len)), p.hash);
            acc.len += p.len;
            let have = acc.prefix.chars().count();
            if acc.complete {
                let room = PREFIX_CHARS.saturating_sub(have);
                let take: String = p.prefix.chars().take(room).collect();
                let took_all = take.chars().count() == p.prefix.chars().count();
                acc.prefix.push_str(&take);
                acc.complete = took_all && p.complete;
            }
        }
        acc
    }

    fn append_bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.hash = addmod(mulmod(self.hash, BASE), x as u64 + 1);
        }
        self.len += b.len() as u64;
    }
}

/// Streaming normaliser: push characters, get a [`NormText`].
#[derive(Debug)]
pub struct Normalizer {
    out: NormText,
    prefix_chars: usize,
    pending_ws: bool,
}

impl Default for Normalizer {
    fn default() -> Self {
        Normalizer {
            out: NormText { complete: true, ..NormText::default() },
            prefix_chars: 0,
            pending_ws: false,
        }
    }
}

impl Normalizer {
    pub fn push_char(&mut self, c: char) {
        if c.is_whitespace() {
            if self.out.len > 0 {
                self.pending_ws = true;
            }
            return;
        }
        if self.pending_ws {
            self.pending_ws = false;
            self.emit(' ');
        }
        self.emit(c);
    }

    pub fn push_str(&mut self, s: &str) {
        for c in s.chars() {
            self.push_char(c);
        }
    }

    fn emit(&mut self, c: char) {
        let mut buf = [0u8; 4];
        self.out.append_bytes(c.encode_utf8(&mut buf).as_bytes());
        if self.prefix_chars < PREFIX_CHARS {
            self.out.prefix.push(c);
            self.prefix_chars += 1;
        } else {
            self.out.complete = false;
        }
    }

    pub fn finish(self) -> NormText {
        self.out
    }
}

/// The normalised set of texts the gateway itself sent (self-echo filter).
#[derive(Debug, Default, Clone)]
pub struct OwnTexts {
    digests: Vec<NormText>,
}

impl OwnTexts {
    pub fn new(texts: &[String]) -> OwnTexts {
        OwnTexts { digests: texts.iter().map(|t| NormText::of(t)).filter(|d| !d.is_empty()).collect() }
    }

    pub fn contains(&self, t: &NormText) -> bool {
        self.digests.iter().any(|d| d.len == t.len && d.hash == t.hash)
    }

    /// A candidate is external (human) iff its normalised text is not one of ours.
    pub fn is_external(&self, t: &NormText) -> bool {
        !self.contains(t)
    }
}
