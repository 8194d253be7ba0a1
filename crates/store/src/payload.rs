//! The payload column: a JSON object holding only `outcome`, `channel`, `turns`, `paths`, `from` and
//! `to`. The same object is
//! what the wire shows as an event's `payload` ([`PayloadJson`], used by both).

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;
use sessionwatch_core::{Payload, RunOutcome};

/// An event's payload as JSON: the stored column and the wire's `payload` field.
/// Every field may be missing, and an empty one is left out.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PayloadJson {
    pub outcome: Option<String>,
    pub channel: Option<String>,
    pub turns: Option<u32>,
    /// `files_changed`: paths relative to the workspace's worktree.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// `head_moved`: where HEAD was and is.
    pub from: Option<String>,
    pub to: Option<String>,
}

impl PayloadJson {
    /// `None` for an empty payload (the column is NULL and the wire leaves `payload` out).
    pub fn of(p: &Payload) -> Option<PayloadJson> {
        (!p.is_empty()).then(|| PayloadJson {
            outcome: p.outcome.map(|o| o.as_str().to_string()),
            channel: p.channel.clone(),
            turns: p.turns,
            paths: p.paths.clone(),
            from: p.from.clone(),
            to: p.to.clone(),
        })
    }
}

pub(crate) fn encode(p: &Payload) -> Option<String> {
    PayloadJson::of(p).map(|j| serde_json::to_string(&j).expect("a payload always serializes"))
}

/// Unknown fields and wrong types are dropped: the payload exposes only the known fields.
pub(crate) fn decode(s: Option<&str>) -> Payload {
    let Some(v) = s.and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok()) else {
        return Payload::default();
    };
    Payload {
        outcome: v.get("outcome").and_then(|o| o.as_str()).and_then(RunOutcome::parse),
        channel: v.get("channel").and_then(|c| c.as_str()).map(str::to_string),
        turns: v.get("turns").and_then(|t| t.as_u64()).filter(|t| *t > 0).and_then(|t| u32::try_from(t).ok()),
        paths: v
            .get("paths")
            .and_then(|p| p.as_array())
            .map(|a| a.iter().filter_map(|p| p.as_str().map(str::to_string)).collect())
            .unwrap_or_default(),
        from: v.get("from").and_then(|c| c.as_str()).map(str::to_string),
        to: v.get("to").and_then(|c| c.as_str()).map(str::to_string),
    }
}
