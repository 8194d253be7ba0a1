//! The entries setup adds to the CLIs' own config files, edited in place: JSON on its syntax tree
//! (jsonc-parser's CST, as `hooks install` does), TOML with toml_edit. The user's text — indentation,
//! comments, key order — stays as it was.
//!
//! Each `add_*` answers `Ok(None)` when the entry is already there (nothing to do), `Ok(Some(text))`
//! with the new text, or an error when the file is not the shape the CLI reads (or holds a different
//! server under our name): the caller reports it and leaves the file untouched. Each `remove_*` takes
//! out only what `add_*` put in (and a container it created, judged against the text from before).

use anyhow::{Context, bail};
use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstRootNode};
use serde_json::Value;
use std::path::Path;

/// Our server's name in every CLI's MCP config, and Claude's permission rule for all its tools.
pub const SERVER: &str = "sessionwatch";
pub const CLAUDE_ALLOW_RULE: &str = "mcp__sessionwatch";

/// A command that runs a sessionwatch binary (any install location).
fn is_sessionwatch_binary(command: &str) -> bool {
    Path::new(command).file_name().is_some_and(|n| n == "sessionwatch")
}

/// The strict JSON value of a file's text (`{}` when empty); an error when it is not JSON or not an
/// object (both CLIs read an object).
pub fn json_object(text: Option<&str>) -> anyhow::Result<Value> {
    object_of(text, |t| serde_json::from_str(t).context("not valid JSON"))
}

/// The same for a file the CLI reads as JSON with comments (Gemini CLI strips them before parsing).
pub fn jsonc_object(text: Option<&str>) -> anyhow::Result<Value> {
    let options = ParseOptions {
        allow_comments: true,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        ..Default::default()
    };
    object_of(text, |t| {
        jsonc_parser::parse_to_serde_value(t, &options).context("not valid JSON (with comments)")
    })
}

/// `parse`'s value of a non-empty text (`{}` for an empty one), which must be an object.
fn object_of(text: Option<&str>, parse: impl Fn(&str) -> anyhow::Result<Value>) -> anyhow::Result<Value> {
    let v = match text.map(str::trim).unwrap_or("") {
        "" => Value::Object(Default::default()),
        t => parse(t)?,
    };
    if !v.is_object() {
        bail!("the top level is not an object");
    }
    Ok(v)
}

fn parse_cst(text: Option<&str>) -> anyhow::Result<CstRootNode> {
    CstRootNode::parse(text.unwrap_or(""), &ParseOptions::default()).map_err(|e| anyhow::anyhow!("{e}"))
}

/// A file we create ends with a newline, as the CLIs write theirs.
fn finish(text: Option<&str>, root: &CstRootNode) -> String {
    let mut out = root.to_string();
    if text.is_none_or(|t| t.trim().is_empty()) && !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// What `claude mcp add --scope user sessionwatch -- <exe> mcp` writes (Claude Code 2.1).
#[cfg(test)]
pub fn claude_server_value(exe: &str) -> Value {
    let mut v: Value = serde_json::from_str(r#"{"type": "stdio", "args": ["mcp"], "env": {}}"#).unwrap();
    v["command"] = exe.into();
    v
}

fn claude_server_input(exe: &str) -> CstInputValue {
    CstInputValue::Object(vec![
        ("type".into(), "stdio".into()),
        ("command".into(), exe.into()),
        ("args".into(), CstInputValue::Array(vec!["mcp".into()])),
        ("env".into(), CstInputValue::Object(vec![])),
    ])
}

/// What `gemini mcp add sessionwatch <exe> mcp` writes into `settings.json` (no `type`: stdio is
/// told by `command`).
#[cfg(test)]
pub fn gemini_server_value(exe: &str) -> Value {
    let mut v: Value = serde_json::from_str(r#"{"args": ["mcp"]}"#).unwrap();
    v["command"] = exe.into();
    v
}

fn gemini_server_input(exe: &str) -> CstInputValue {
    CstInputValue::Object(vec![
        ("command".into(), exe.into()),
        ("args".into(), CstInputValue::Array(vec!["mcp".into()])),
    ])
}

/// `["mcp"]`: the arguments our server entry runs with.
fn is_mcp_args(args: Option<&Value>) -> bool {
    args.and_then(Value::as_array).is_some_and(|a| a.len() == 1 && a[0] == "mcp")
}

/// `~/.claude.json`: `mcpServers.sessionwatch` runs `<exe> mcp`.
pub fn add_claude_mcp(text: Option<&str>, exe: &str) -> anyhow::Result<Option<String>> {
    add_mcp_server(json_object(text)?, text, claude_server_input(exe), exe)
}

/// `~/.gemini/settings.json`: `mcpServers.sessionwatch` runs `<exe> mcp`.
pub fn add_gemini_mcp(text: Option<&str>, exe: &str) -> anyhow::Result<Option<String>> {
    add_mcp_server(jsonc_object(text)?, text, gemini_server_input(exe), exe)
}

fn add_mcp_server(
    v: Value,
    text: Option<&str>,
    server: CstInputValue,
    exe: &str,
) -> anyhow::Result<Option<String>> {
    match v.get("mcpServers") {
        None => {}
        Some(Value::Object(servers)) => {
            if let Some(existing) = servers.get(SERVER) {
                let command = existing.get("command").and_then(Value::as_str).unwrap_or("");
                if command == exe && is_mcp_args(existing.get("args")) {
                    return Ok(None);
                }
                if !is_sessionwatch_binary(command) {
                    bail!("mcpServers.{SERVER} is another server (command {command:?}); left as is");
                }
                // Ours from another install location: point it at this binary (below).
            }
        }
        Some(_) => bail!("\"mcpServers\" is not an object"),
    }
    let root = parse_cst(text)?;
    let servers = root.object_value_or_set().object_value_or_create("mcpServers").context("an object")?;
    match servers.get(SERVER) {
        Some(prop) => prop.set_value(server),
        None => {
            servers.append(SERVER, server);
        }
    }
    Ok(Some(finish(text, &root)))
}

/// Takes out `mcpServers.sessionwatch` if it is still ours (put back the one `before` had, if any),
/// and `mcpServers` if we created it and it is now empty.
pub fn remove_claude_mcp(text: &str, exe: &str, before: Option<&str>) -> anyhow::Result<String> {
    remove_mcp_server(text, exe, json_object(before).unwrap_or_default())
}

/// The same in Gemini's `settings.json`.
pub fn remove_gemini_mcp(text: &str, exe: &str, before: Option<&str>) -> anyhow::Result<String> {
    remove_mcp_server(text, exe, jsonc_object(before).unwrap_or_default())
}

fn remove_mcp_server(text: &str, exe: &str, before: Value) -> anyhow::Result<String> {
    let root = parse_cst(Some(text))?;
    let Some(servers) = root.object_value().and_then(|o| o.object_value("mcpServers")) else {
        return Ok(text.to_string());
    };
    let Some(prop) = servers.get(SERVER) else { return Ok(text.to_string()) };
    let current: Value =
        serde_json::from_str(&prop.value().map(|v| v.to_string()).unwrap_or_default()).unwrap_or(Value::Null);
    if current.get("command").and_then(Value::as_str) != Some(exe) {
        return Ok(text.to_string()); // changed since: the user's now
    }
    match before.pointer(&format!("/mcpServers/{SERVER}")) {
        Some(previous) => prop.set_value(to_input(previous)),
        None => prop.remove(),
    }
    if servers.properties().is_empty()
        && before.get("mcpServers").is_none()
        && let Some(p) = root.object_value().and_then(|o| o.get("mcpServers"))
    {
        p.remove();
    }
    Ok(root.to_string())
}

fn to_input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(to_input).collect()),
        Value::Object(m) => CstInputValue::Object(m.iter().map(|(k, v)| (k.clone(), to_input(v))).collect()),
    }
}

fn allows_all_our_tools(rule: &str) -> bool {
    rule == CLAUDE_ALLOW_RULE || rule == format!("{CLAUDE_ALLOW_RULE}__*")
}

/// `~/.claude/settings.json`: `permissions.allow` holds `mcp__sessionwatch` (every tool of our server),
/// so the tools do not ask on each call.
pub fn add_claude_allow(text: Option<&str>) -> anyhow::Result<Option<String>> {
    let v = json_object(text)?;
    match v.get("permissions") {
        None => {}
        Some(Value::Object(p)) => match p.get("allow") {
            None => {}
            Some(Value::Array(rules)) if rules.iter().filter_map(Value::as_str).any(allows_all_our_tools) => {
                return Ok(None);
            }
            Some(Value::Array(_)) => {}
            Some(_) => bail!("\"permissions.allow\" is not an array"),
        },
        Some(_) => bail!("\"permissions\" is not an object"),
    }
    let root = parse_cst(text)?;
    let permissions =
        root.object_value_or_set().object_value_or_create("permissions").context("an object")?;
    permissions.array_value_or_create("allow").context("an array")?.append(CLAUDE_ALLOW_RULE.into());
    Ok(Some(finish(text, &root)))
}

/// Takes out our rule, and `allow` / `permissions` if we created them and they are now empty.
pub fn remove_claude_allow(text: &str, before: Option<&str>) -> anyhow::Result<String> {
    let before = json_object(before).unwrap_or_default();
    let root = parse_cst(Some(text))?;
    let Some(permissions) = root.object_value().and_then(|o| o.object_value("permissions")) else {
        return Ok(text.to_string());
    };
    let Some(allow) = permissions.array_value("allow") else { return Ok(text.to_string()) };
    let had = |rule: &str| {
        before
            .pointer("/permissions/allow")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|r| r == rule))
    };
    if had(CLAUDE_ALLOW_RULE) {
        return Ok(text.to_string());
    }
    for el in allow.elements() {
        let is_ours =
            el.as_string_lit().and_then(|s| s.decoded_value().ok()).is_some_and(|s| s == CLAUDE_ALLOW_RULE);
        if is_ours {
            el.remove();
        }
    }
    if allow.elements().is_empty()
        && before.pointer("/permissions/allow").is_none()
        && let Some(p) = permissions.get("allow")
    {
        p.remove();
    }
    if permissions.properties().is_empty()
        && before.get("permissions").is_none()
        && let Some(p) = root.object_value().and_then(|o| o.get("permissions"))
    {
        p.remove();
    }
    Ok(root.to_string())
}

fn parse_toml(text: Option<&str>) -> anyhow::Result<toml_edit::DocumentMut> {
    text.unwrap_or("").parse().context("not valid TOML")
}

/// `~/.codex/config.toml`: `[mcp_servers.sessionwatch] command = <exe>, args = ["mcp"]` (what
/// `codex mcp add sessionwatch -- <exe> mcp` writes).
pub fn add_codex_mcp(text: Option<&str>, exe: &str) -> anyhow::Result<Option<String>> {
    let mut doc = parse_toml(text)?;
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        toml_edit::Item::Table(t)
    });
    let servers = servers.as_table_like_mut().context("mcp_servers is not a table")?;
    if let Some(existing) = servers.get(SERVER) {
        let existing = existing.as_table_like().context("mcp_servers.sessionwatch is not a table")?;
        let command = existing.get("command").and_then(|c| c.as_str()).unwrap_or("");
        let args: Vec<&str> = existing
            .get("args")
            .and_then(|a| a.as_array())
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        if command == exe && args == ["mcp"] {
            return Ok(None);
        }
        if !is_sessionwatch_binary(command) {
            bail!("[mcp_servers.{SERVER}] is another server (command {command:?}); left as is");
        }
        let existing = servers.get_mut(SERVER).and_then(|i| i.as_table_like_mut()).context("a table")?;
        existing.insert("command", toml_edit::value(exe));
        existing.insert("args", toml_edit::value(toml_edit::Array::from_iter(["mcp"])));
        return Ok(Some(doc.to_string()));
    }
    let mut ours = toml_edit::Table::new();
    ours.insert("command", toml_edit::value(exe));
    ours.insert("args", toml_edit::value(toml_edit::Array::from_iter(["mcp"])));
    servers.insert(SERVER, toml_edit::Item::Table(ours));
    Ok(Some(doc.to_string()))
}

/// Takes out `[mcp_servers.sessionwatch]` if it still runs `exe`, and an `mcp_servers` left empty that
/// `before` did not have.
pub fn remove_codex_mcp(text: &str, exe: &str, before: Option<&str>) -> anyhow::Result<String> {
    let had_servers = parse_toml(before).ok().is_some_and(|d| d.contains_key("mcp_servers"));
    let mut doc = parse_toml(Some(text))?;
    let Some(servers) = doc.get_mut("mcp_servers").and_then(|s| s.as_table_like_mut()) else {
        return Ok(text.to_string());
    };
    let ours = servers
        .get(SERVER)
        .and_then(|s| s.as_table_like())
        .and_then(|s| s.get("command"))
        .and_then(|c| c.as_str())
        .is_some_and(|c| c == exe);
    if !ours {
        return Ok(text.to_string());
    }
    servers.remove(SERVER);
    if servers.is_empty() && !had_servers {
        doc.remove("mcp_servers");
    }
    Ok(doc.to_string())
}
