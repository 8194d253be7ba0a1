//! What `sessionwatch node` and the gateway say to each other (`/v1/node/*`), defined once for both
//! ends. No transcript content travels node → gateway: catalog ids, markers, counts and kinds only.

use serde::{Deserialize, Serialize};

mod workspaces;
pub use workspaces::{
    FollowedWorkspace, HeadReport, HeadReportAnswer, HookWorkspace, MAX_HEAD_REPORTS, MAX_HOOK_PATHS,
    RemoteHead, RemoteHeadMove, RemoteHeadPosition,
};

/// `POST /v1/node/sync`: the node's catalog; the answer is the work for this tick.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncRequest {
    /// The name the node believes it has (checked against its token's).
    #[serde(default)]
    pub name: Option<String>,
    pub catalog: Vec<RemoteEntry>,
}

/// One native session on the node (ids and times only: no title, path or text).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemoteEntry {
    pub catalog_id: String,
    pub thread_id: String,
    pub updated_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SyncAnswer {
    /// The node's name, as its token says.
    pub node: String,
    pub links: Vec<NodeLink>,
    /// The git dirs on the node whose HEAD moves the gateway wants (absent from an older gateway).
    #[serde(default)]
    pub workspaces: Vec<FollowedWorkspace>,
}

/// A link whose source lives on the node.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeLink {
    pub session_key: String,
    pub agent_id: String,
    pub catalog_id: String,
    pub thread_id: String,
    pub reference_json: String,
    pub marker_json: String,
    /// The link's version: reports name it, so one computed from a stale marker is not applied.
    pub updated_at: i64,
    /// Up to 10 recent user messages the gateway delivered into the session (self-echo filter).
    pub own_texts: Vec<String>,
    /// Adopted through the gateway and not yet baselined: the node adopts it locally and reports the
    /// baseline; it is not checked until then.
    pub baseline: bool,
    /// Somebody watches the session: check it this tick.
    pub watched: bool,
}

/// `POST /v1/node/baselines`: the baseline of links adopted through the gateway.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BaselineReport {
    pub session_key: String,
    pub agent_id: String,
    pub updated_at: i64,
    pub result: BaselineResult,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum BaselineResult {
    #[serde(rename_all = "camelCase")]
    Linked { upstream_kind: String, reference_json: String, marker_json: String },
    /// The node has no such session.
    NotFound { message: String },
}

/// `POST /v1/node/outcomes`: what the node's checks found.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutcomeReport {
    pub session_key: String,
    pub agent_id: String,
    pub updated_at: i64,
    pub outcome: RemoteOutcome,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum RemoteOutcome {
    NoChange,
    Inconclusive {
        reason: String,
    },
    Missing,
    #[serde(rename_all = "camelCase")]
    Activity {
        human_turns: u32,
        next_marker_json: String,
        occurred_at_ms: Option<i64>,
        dedupe_id: String,
        turn_id: Option<String>,
    },
}

impl From<sessionwatch_upstream::CheckOutcome> for RemoteOutcome {
    fn from(o: sessionwatch_upstream::CheckOutcome) -> RemoteOutcome {
        use sessionwatch_upstream::CheckOutcome as C;
        match o {
            C::NoChange => RemoteOutcome::NoChange,
            C::Inconclusive(reason) => RemoteOutcome::Inconclusive { reason },
            C::Missing => RemoteOutcome::Missing,
            C::Activity { human_turns, next_marker_json, occurred_at_ms, dedupe_id, turn_id } => {
                RemoteOutcome::Activity { human_turns, next_marker_json, occurred_at_ms, dedupe_id, turn_id }
            }
        }
    }
}

impl From<RemoteOutcome> for sessionwatch_upstream::CheckOutcome {
    fn from(o: RemoteOutcome) -> sessionwatch_upstream::CheckOutcome {
        use sessionwatch_upstream::CheckOutcome as C;
        match o {
            RemoteOutcome::NoChange => C::NoChange,
            RemoteOutcome::Inconclusive { reason } => C::Inconclusive(reason),
            RemoteOutcome::Missing => C::Missing,
            RemoteOutcome::Activity { human_turns, next_marker_json, occurred_at_ms, dedupe_id, turn_id } => {
                C::Activity { human_turns, next_marker_json, occurred_at_ms, dedupe_id, turn_id }
            }
        }
    }
}
