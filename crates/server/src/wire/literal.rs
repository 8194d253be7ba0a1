//! A JSON string literal built in one pass: text and indented JSON written straight in their escaped form.
//!
//! `/tools/invoke` answers a readable text holding indented JSON (a status's page of changes), itself as
//! a JSON string. Serializing the indented JSON to a `String` and escaping that string was the costliest
//! part of a `session_status` answer (callgrind: 40k of the 86k instructions that built it were the escape
//! pass). Here the pretty printer writes its output already escaped: its structure (quotes, newlines) in
//! escaped form, and the text between a string's escapes needs no second escape, so nothing is scanned
//! twice. The bytes are exactly those of `serde_json::to_string(&serde_json::to_string_pretty(v))`.

use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};
use serde_json::value::RawValue;
use std::io::{self, Write};

/// A JSON string literal being written: opened by [`with_capacity`](Self::with_capacity), closed by
/// [`finish`](Self::finish).
pub(crate) struct StringLiteral {
    out: Vec<u8>,
}

impl StringLiteral {
    pub(crate) fn with_capacity(bytes: usize) -> StringLiteral {
        let mut out = Vec::with_capacity(bytes);
        out.push(b'"');
        StringLiteral { out }
    }

    /// Appends `text`, escaped.
    pub(crate) fn push_text(&mut self, text: &str) {
        let mut ser = serde_json::Serializer::with_formatter(&mut self.out, Unquoted);
        text.serialize(&mut ser).expect("writing to a Vec never fails");
    }

    /// Appends `value` as `serde_json::to_string_pretty` writes it, escaped.
    pub(crate) fn push_pretty(&mut self, value: &impl Serialize) -> serde_json::Result<()> {
        let mut ser = serde_json::Serializer::with_formatter(&mut self.out, EscapedPretty::default());
        value.serialize(&mut ser)
    }

    /// Appends `escaped`, already a JSON string's contents (a rendered event's indented form).
    pub(crate) fn push_escaped(&mut self, escaped: &str) {
        self.out.extend_from_slice(escaped.as_bytes());
    }

    pub(crate) fn finish(mut self) -> Box<RawValue> {
        self.out.push(b'"');
        let json = String::from_utf8(self.out).expect("serde_json writes UTF-8 only");
        // SAFETY: `json` is one JSON string: a quote, what serde_json's serializer wrote through
        // `Unquoted` and `EscapedPretty` (a string's escaped contents; the pretty printer's output with
        // every byte a string escapes written escaped), and a quote. Re-parsing it to check cost as much
        // as building it (debug builds still check it).
        unsafe { RawValue::from_string_unchecked(json) }
    }
}

/// `value` as `serde_json::to_string_pretty` writes it when nested `depth` levels deep (its inner lines
/// indented past that depth, its first line not indented), escaped as a JSON string's contents.
pub(crate) fn escaped_pretty_at(value: &impl Serialize, depth: usize) -> serde_json::Result<Box<str>> {
    let mut out = Vec::with_capacity(512);
    let mut ser =
        serde_json::Serializer::with_formatter(&mut out, EscapedPretty { indent: depth, has_value: false });
    value.serialize(&mut ser)?;
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8 only").into_boxed_str())
}

/// Writes a string's contents escaped, without its quotes: text appended to the literal.
struct Unquoted;

impl Formatter for Unquoted {
    fn begin_string<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        Ok(())
    }

    fn end_string<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        Ok(())
    }
}

/// How many levels of indentation [`COMMA_NEWLINE_INDENT`] holds; deeper ones add the rest a level at a time.
const INDENT_LEVELS: usize = 16;

/// `,\n` (escaped) and [`INDENT_LEVELS`] levels of two spaces: a line's start is a slice of it.
const COMMA_NEWLINE_INDENT: &[u8; 3 + 2 * INDENT_LEVELS] = b",\\n                                ";

/// serde_json's `PrettyFormatter` (two spaces), its output escaped as the contents of a JSON string:
/// newlines as `\n`, a string's quotes as `\"`, and its escapes escaped again. The text between a
/// string's escapes has nothing to escape (that is why it lies between them) and is written as it is.
#[derive(Default)]
struct EscapedPretty {
    indent: usize,
    has_value: bool,
}

impl EscapedPretty {
    /// A new line (escaped) at the current indentation: one write, not one per level (a page of
    /// changes has some 130 lines, four or five levels deep).
    fn newline<W: ?Sized + Write>(&self, writer: &mut W, comma: bool) -> io::Result<()> {
        let line = &COMMA_NEWLINE_INDENT[usize::from(!comma)..];
        match line.get(..3 + 2 * self.indent - usize::from(!comma)) {
            Some(line) => writer.write_all(line),
            None => {
                writer.write_all(line)?;
                (INDENT_LEVELS..self.indent).try_for_each(|_| writer.write_all(b"  "))
            }
        }
    }

    fn open<W: ?Sized + Write>(&mut self, writer: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.indent += 1;
        self.has_value = false;
        writer.write_all(bracket)
    }

    fn close<W: ?Sized + Write>(&mut self, writer: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.indent -= 1;
        if self.has_value {
            self.newline(writer, false)?;
        }
        writer.write_all(bracket)
    }
}

impl Formatter for EscapedPretty {
    fn begin_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.open(writer, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.close(writer, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        self.newline(writer, !first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.open(writer, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.close(writer, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        self.newline(writer, !first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_string<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b"\\\"")
    }

    fn end_string<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b"\\\"")
    }

    fn write_char_escape<W: ?Sized + Write>(&mut self, writer: &mut W, escape: CharEscape) -> io::Result<()> {
        // At most `\u001f`.
        let mut inner = [0u8; 6];
        let mut rest = &mut inner[..];
        CompactFormatter.write_char_escape(&mut rest, escape)?;
        let written = 6 - rest.len();
        for &b in &inner[..written] {
            match b {
                b'\\' => writer.write_all(b"\\\\")?,
                b'"' => writer.write_all(b"\\\"")?,
                other => writer.write_all(&[other])?,
            }
        }
        Ok(())
    }

    fn write_raw_fragment<W: ?Sized + Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        let escaped = serde_json::to_vec(fragment).map_err(io::Error::other)?;
        writer.write_all(&escaped[1..escaped.len() - 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn literal_of(prefix: &str, value: &impl Serialize, suffix: &str) -> String {
        let mut l = StringLiteral::with_capacity(0);
        l.push_text(prefix);
        l.push_pretty(value).unwrap();
        l.push_text(suffix);
        l.finish().get().to_string()
    }

    fn expected(prefix: &str, value: &impl Serialize, suffix: &str) -> String {
        let text = format!("{prefix}{}{suffix}", serde_json::to_string_pretty(value).unwrap());
        serde_json::to_string(&text).unwrap()
    }

    #[test]
    fn the_literal_is_byte_for_byte_the_escaped_pretty_text() {
        let nasty =
            "quote \" backslash \\ slash / newline \n tab \t cr \r bell \u{7} nul \u{0} del \u{7f} é 💥";
        let values = [
            json!(null),
            json!(true),
            json!(-12),
            json!(1.5e300),
            json!(nasty),
            json!([]),
            json!({}),
            json!([[], {}, [1, [2, []]], { "a": {} }]),
            json!({ nasty: [nasty, { "k\n": nasty }], "n": 18446744073709551615u64, "f": -0.25 }),
        ];
        // Deeper than the indentation held in one slice.
        let deep = (0..INDENT_LEVELS + 4).fold(json!({ "a": [1, 2] }), |v, _| json!([v, { "k": 0 }]));
        for v in values.iter().chain([&deep]) {
            for (prefix, suffix) in [("", ""), ("Session \"x\"\n\n```json\n", "\n```"), (nasty, nasty)] {
                assert_eq!(literal_of(prefix, v, suffix), expected(prefix, v, suffix), "{v}");
            }
        }
    }

    #[test]
    fn a_raw_fragment_is_escaped_whole() {
        let raw = RawValue::from_string(r#"{"a":"b\n\"c\""}"#.to_string()).unwrap();
        let value = json!({ "x": 1 });
        #[derive(Serialize)]
        struct WithRaw<'a> {
            raw: &'a RawValue,
            value: &'a serde_json::Value,
        }
        let v = WithRaw { raw: &raw, value: &value };
        assert_eq!(literal_of("", &v, ""), expected("", &v, ""));
    }

    #[test]
    fn text_alone_is_escaped_as_a_string() {
        let mut l = StringLiteral::with_capacity(0);
        l.push_text("a\"b\\c\nd\u{1}");
        assert_eq!(l.finish().get(), serde_json::to_string("a\"b\\c\nd\u{1}").unwrap());
    }
}
