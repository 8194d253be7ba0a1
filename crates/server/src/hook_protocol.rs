//! What a hook says to the gateway (`POST /v1/hooks`) and what the gateway answers, defined once for both
//! ends: `sessionwatch hook <event>` (`src/cli/hook.rs`) sends a [`HookRequest`] whose `input` is the
//! hook's stdin, forwarded byte for byte; Pi's extension and OpenCode's plugin post the same shape
//! themselves. The handler (`host_api.rs` `hook`) decodes the body once into a `HookRequest<Value>` and maps
//! `input` with `sessionwatch_upstream::hook` (no second parse); it answers a [`HookAnswer`], from which
//! the hook process renders what its CLI reads.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// `POST /v1/hooks`: `cli` is `claude`, `codex`, `gemini`, `pi` or `opencode`; `event` the hook event
/// (OpenCode: its hook's name, `chat.message` or `tool.execute.after`); `input` the hook's JSON object
/// (`serde_json::value::RawValue` where it is forwarded unread, `Value` where it is read).
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookRequest<I> {
    pub cli: String,
    pub event: String,
    /// The sessionwatch agent owning the session (default `main`).
    pub agent_id: Option<String>,
    /// The remote node this hook runs on, if any.
    pub node: Option<String>,
    /// With `node`: the worktree the hook's cwd lies in, resolved on the node (the gateway cannot read
    /// the node's files).
    pub workspace: Option<crate::node_protocol::HookWorkspace>,
    /// Absent reads as `null`, which the handler refuses with the same words as any other non-object.
    #[serde(default)]
    pub input: I,
}

/// The gateway's answer to a hook: the notices to add to the model's context, or (`Stop`) the reason to
/// keep going. Both are `null` when there is nothing to say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookAnswer {
    pub additional_context: Option<String>,
    pub block: Option<String>,
    /// A prompt hook's human turn was recorded (false: our own echo, already recorded, or left to the
    /// file monitor).
    pub recorded: bool,
    pub session_key: String,
}

/// `GET /v1/hooks/tool-uses/{id}`: the session whose `PreToolUse` hook announced this MCP tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolUseJson {
    pub session_key: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer's JSON as the hook command, the Pi extension and the OpenCode plugin have always read
    /// it: both texts present, `null` when there is nothing to say.
    #[test]
    fn the_answer_keeps_its_shape() {
        let answer = HookAnswer { session_key: "agent:main:claude:s".into(), ..HookAnswer::default() };
        assert_eq!(
            serde_json::to_string(&answer).unwrap(),
            r#"{"additionalContext":null,"block":null,"recorded":false,"sessionKey":"agent:main:claude:s"}"#
        );
    }

    #[test]
    fn a_hook_body_is_refused_in_the_words_of_before() {
        use crate::request_body::decode;
        let refusal =
            |body: &str| decode::<HookRequest<serde_json::Value>>(body.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            refusal(r#"{"cli":"claude","event":"Stop","input":{},"x":1}"#),
            r#"body: unknown field "x" (allowed: cli, event, agentId, node, workspace, input)"#
        );
        assert_eq!(refusal(r#"{"event":"Stop","input":{}}"#), "body.cli is required");
        assert_eq!(refusal(r#"{"cli":5,"event":"Stop"}"#), "body.cli must be a string");
        let no_input =
            decode::<HookRequest<serde_json::Value>>(br#"{"cli":"claude","event":"Stop"}"#).unwrap();
        assert!(no_input.input.is_null(), "refused by the handler as not the hook's object");
    }
}
