//! The payload column: a JSON object holding only `outcome`, `channel` and `turns`.

use sessionwatch_core::{Payload, RunOutcome};

pub(crate) fn encode(p: &Payload) -> Option<String> {
    if p.is_empty() {
        return None;
    }
    let mut m = serde_json::Map::new();
    if let Some(o) = p.outcome {
        m.insert("outcome".into(), o.as_str().into());
    }
    if let Some(c) = &p.channel {
        m.insert("channel".into(), c.clone().into());
    }
    if let Some(t) = p.turns {
        m.insert("turns".into(), t.into());
    }
    Some(serde_json::Value::Object(m).to_string())
}

/// Unknown fields and wrong types are dropped: the payload exposes only the three known fields.
pub(crate) fn decode(s: Option<&str>) -> Payload {
    let Some(v) = s.and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok()) else {
        return Payload::default();
    };
    Payload {
        outcome: v.get("outcome").and_then(|o| o.as_str()).and_then(RunOutcome::parse),
        channel: v.get("channel").and_then(|c| c.as_str()).map(str::to_string),
        turns: v.get("turns").and_then(|t| t.as_u64()).filter(|t| *t > 0).and_then(|t| u32::try_from(t).ok()),
    }
}
