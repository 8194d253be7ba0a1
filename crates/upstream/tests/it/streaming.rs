//! The streaming row reader agrees with serde_json on rows that fit, and digests long texts.

use proptest::prelude::*;
use serde_json::{Value, json};
use sessionwatch_upstream::json_stream::{StreamLimits, StreamedRow, stream_row, text_of};
use sessionwatch_upstream::text::NormText;

fn stream(bytes: &[u8], lim: StreamLimits) -> StreamedRow {
    stream_row(bytes, lim).unwrap()
}

fn big() -> StreamLimits {
    StreamLimits {
        string_cap: usize::MAX / 2,
        retained_bytes: usize::MAX / 2,
        retained_nodes: usize::MAX / 2,
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn agrees_with_serde_on_valid_rows(v in arb_json(), ws in "[ \t\r]{0,3}") {
        let line = format!("{ws}{v}{ws}\n");
        match stream(line.as_bytes(), big()) {
            StreamedRow::Row { value, truncated, len } => {
                prop_assert_eq!(len as usize, line.len());
                prop_assert!(!truncated);
                let serde: Value = serde_json::from_str(&line).unwrap();
                prop_assert_eq!(value, Some(serde));
                let _ = v;
            }
            StreamedRow::Partial => prop_assert!(false, "partial"),
        }
    }

    #[test]
    fn agrees_with_serde_on_validity(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut line: Vec<u8> = bytes.into_iter().filter(|b| *b != b'\n').collect();
        line.push(b'\n');
        let serde_ok = serde_json::from_slice::<Value>(&line[..line.len() - 1]).ok();
        match stream(&line, big()) {
            StreamedRow::Row { value, len, .. } => {
                prop_assert_eq!(len as usize, line.len());
                prop_assert_eq!(value, serde_ok);
            }
            StreamedRow::Partial => prop_assert!(false, "partial"),
        }
    }

    #[test]
    fn long_strings_digest_like_short_ones(s in "[a-z \\t\\n\u{00e9}\u{4e2d}]{0,300}", cap in 1usize..64) {
        let line = format!("{}\n", json!({"t": s}));
        let lim = StreamLimits { string_cap: cap, ..StreamLimits::default() };
        match stream(line.as_bytes(), lim) {
            StreamedRow::Row { value: Some(v), .. } => {
                let t = text_of(&v["t"]).unwrap();
                prop_assert_eq!(t.norm(), NormText::of(&s));
            }
            o => prop_assert!(false, "{:?}", o),
        }
    }
}

#[test]
fn partial_and_garbage_rows() {
    assert!(matches!(stream(b"{\"a\":1", big()), StreamedRow::Partial));
    assert!(matches!(stream(b"{\"a\":1}", big()), StreamedRow::Partial), "no newline yet");
    match stream(b"{\"a\":\n{\"b\":2}\n", big()) {
        StreamedRow::Row { value: None, len: 6, .. } => {}
        o => panic!("{o:?}"),
    }
    match stream(b"garbage here\nnext\n", big()) {
        StreamedRow::Row { value: None, len: 13, .. } => {}
        o => panic!("{o:?}"),
    }
    let deep = format!("{}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    assert!(matches!(stream(deep.as_bytes(), big()), StreamedRow::Row { value: None, .. }));
    // Budget exhaustion flags truncation instead of growing memory.
    let many = format!("[{}]\n", vec!["1"; 5000].join(","));
    let lim = StreamLimits { retained_nodes: 100, ..StreamLimits::default() };
    assert!(matches!(stream(many.as_bytes(), lim), StreamedRow::Row { truncated: true, value: Some(_), .. }));
}

#[test]
fn joined_digests_equal_normalised_join() {
    let parts = ["  hello   world ", "", "\tsecond\npart  "];
    let digests: Vec<NormText> = parts.iter().map(|p| NormText::of(p)).collect();
    assert_eq!(NormText::join(digests.iter()), NormText::of(&parts.join("\n")));
    assert_eq!(sessionwatch_upstream::normalize_user_text("  a \n\t b  "), "a b");
}
