//! Arbitrary bytes into every classifier and scanner: no panic, the marker never moves
//! backwards, never past the data, and always stops on a row boundary.

use proptest::prelude::*;
use serde_json::Value;
use sessionwatch_upstream::jsonl::{RowClassifier, check_file_with_window};
use sessionwatch_upstream::{CheckOutcome, claude, codex, pi};

fn classifier(k: u8) -> Box<dyn RowClassifier> {
    match k % 3 {
        0 => Box::new(claude::ClaudeClassifier::default()),
        1 => Box::new(codex::CodexClassifier::default()),
        _ => Box::new(pi::PiClassifier),
    }
}

fn chunk() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        Just(b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n".to_vec()),
        Just(
            b"{\"type\":\"event_msg\",\"payload\":{\"type\":\"user_message\",\"message\":\"hi\"}}\n".to_vec()
        ),
        Just(b"{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n".to_vec()),
        Just(
            b"{\"type\":\"event_msg\",\"payload\":{\"type\":\"task_started\",\"turn_id\":\"t\"}}\n".to_vec()
        ),
        Just(b"\n".to_vec()),
        Just(b"\xff\xfe\n".to_vec()),
        Just(b"[1,2]\n".to_vec()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn scanners_never_panic_and_markers_are_sane(
        chunks in prop::collection::vec(chunk(), 0..40),
        k in any::<u8>(),
        window in 8usize..256,
        own in prop::collection::vec("[a-z ]{0,4}", 0..3),
    ) {
        let data: Vec<u8> = chunks.concat();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.jsonl");
        std::fs::write(&p, &data).unwrap();
        let mut marker = r#"{"offset":0,"humans":0}"#.to_string();
        let mut last = 0u64;
        for _ in 0..(data.len() + 5) {
            let mut cls = classifier(k);
            match check_file_with_window(&p, &marker, &own, cls.as_mut(), window) {
                CheckOutcome::Activity { next_marker_json, .. } => {
                    let v: Value = serde_json::from_str(&next_marker_json).unwrap();
                    let off = v["offset"].as_u64().unwrap();
                    prop_assert!(off > last, "moves forward");
                    prop_assert!(off <= data.len() as u64, "never past the data");
                    prop_assert_eq!(data[off as usize - 1], b'\n', "ends on a row boundary");
                    last = off;
                    marker = next_marker_json;
                }
                CheckOutcome::NoChange => break,
                o => prop_assert!(false, "{:?}", o),
            }
        }
        // Everything up to the last newline is classified, unless Pi stopped on a non-object.
        let last_nl = data.iter().rposition(|b| *b == b'\n').map_or(0, |i| i as u64 + 1);
        if k % 3 != 2 {
            prop_assert_eq!(last, last_nl);
        } else {
            prop_assert!(last <= last_nl);
        }
    }

    #[test]
    fn row_classifiers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
            let _ = claude::classify_row(&v);
            let _ = codex::classify_row(&v);
            let _ = pi::classify_row(Some(&v));
        }
        let _ = pi::classify_row(None);
    }

    #[test]
    fn arbitrary_markers_and_references_never_panic(m in ".{0,40}", r in ".{0,40}") {
        let probe = sessionwatch_upstream::Probe { reference_json: &r, marker_json: &m, own_recent_user_texts: &[] };
        for c in sessionwatch_upstream::CatalogId::ALL {
            let _ = sessionwatch_upstream::check(c, &probe);
        }
    }
}
