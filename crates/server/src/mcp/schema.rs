//! The six tools as MCP sees them: names, descriptions written for a model, and JSON schemas generated
//! from the tools' one definition (`gateway/tool_spec.rs`), which the gateway's parser also reads. The
//! gateway still validates every call; the schemas only help the model get it right.

use crate::gateway::tool_spec::{Kind, SESSION_KINDS, TOOL_SPECS, ToolSpec};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

const KEY_HELP: &str = "A session key such as \"agent:main:subagent:7f3c\" (from sessions_list, \
sessions_spawn or a notice). \"main\" means your agent's main session.";

/// Instructions sent at `initialize`.
pub(crate) const INSTRUCTIONS: &str = "sessionwatch tells you when another actor (a human, another agent) \
changed a session you watch, and lets you catch up exactly before you act. You watch the sub-agents \
you spawn (sessions_spawn) and the sessions you message with watch=true (sessions_send). When a watched \
session changes, the next tool result carries a one-time \"Session notices\" block; each notice names \
the session_status call (sessionKey + changesSince) that returns exactly what changed. Call it before \
acting on that session. Every notice is shown once: it is acknowledged when it is delivered to you.";

/// The input schema of one tool, from its spec (aliases are accepted but not advertised).
fn input_schema(spec: &ToolSpec) -> JsonObject {
    let mut properties = serde_json::Map::new();
    for a in spec.args {
        let p = match a.kind {
            Kind::SessionKey => {
                json!({ "type": "string", "minLength": 1, "maxLength": 512, "description": format!("{} {KEY_HELP}", a.help) })
            }
            Kind::Text { .. } => json!({ "type": "string", "minLength": 1, "description": a.help }),
            Kind::Label | Kind::Ignored => json!({ "type": "string", "description": a.help }),
            Kind::Int { min, max, .. } => {
                let mut p = json!({ "type": "integer", "minimum": min, "description": a.help });
                if max < i64::MAX {
                    p["maximum"] = max.into();
                }
                p
            }
            Kind::Bool => json!({ "type": "boolean", "description": a.help }),
            Kind::Kinds => json!({
                "type": "array", "items": { "type": "string", "enum": SESSION_KINDS }, "description": a.help
            }),
            Kind::AgentId => {
                json!({ "type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$", "description": a.help })
            }
        };
        properties.insert(a.name.to_string(), p);
    }
    let required: Vec<&str> = spec.args.iter().filter(|a| a.required).map(|a| a.name).collect();
    let schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        // An unknown argument is ignored and reported in the result's `ignoredArgs`, not refused.
        "additionalProperties": true,
    });
    match schema {
        Value::Object(m) => m,
        _ => unreachable!("a JSON object literal"),
    }
}

/// Every tool, in the gateway's order, from [`TOOL_SPECS`].
pub(crate) fn tools() -> Vec<Tool> {
    TOOL_SPECS
        .iter()
        .map(|spec| {
            let annotations = if spec.writes {
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(false)
                    .idempotent(spec.idempotent)
                    .open_world(false)
            } else {
                ToolAnnotations::new().read_only(true).idempotent(true).open_world(false)
            };
            Tool::new(spec.name, spec.description, input_schema(spec))
                .with_title(spec.title)
                .with_annotations(annotations)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::TOOL_NAMES;

    #[test]
    fn one_schema_per_gateway_tool() {
        let names: Vec<String> = tools().iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, TOOL_NAMES.map(str::to_string).to_vec());
        for t in tools() {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            assert_eq!(t.input_schema["additionalProperties"], true, "{}", t.name);
            assert!(t.description.as_deref().is_some_and(|d| d.len() > 40), "{}", t.name);
        }
    }
}
