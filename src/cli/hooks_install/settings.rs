//! Our entries edited in place in the CLI's settings file, on its concrete syntax tree (`jsonc-parser`'s
//! CST): the user's text — indentation, inline arrays, key order, line endings — stays as it was; install
//! only inserts our handlers, uninstall only removes them.

use super::json::Json;
use super::{Ours, is_our_command};
use anyhow::{Context, bail};
use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstNode, CstObject, CstRootNode};
use sessionwatch_upstream::hook::{HookCli, HookEvent};
use std::path::Path;

/// A settings file read and checked: its bytes (`None`: no file) and its syntax tree.
pub struct Settings {
    pub original: Option<String>,
    pub root: CstRootNode,
}

impl Settings {
    /// Reads the file and checks it is the JSON shape the CLI reads; otherwise an error, nothing changed.
    pub fn load(file: &Path, cli: HookCli) -> anyhow::Result<Settings> {
        let original = match std::fs::read_to_string(file) {
            Ok(s) => Some(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
        };
        let text = original.as_deref().unwrap_or("");
        let comments = super::settings_hooks(cli).is_some_and(|h| h.comments);
        let doc = match (text.trim(), comments) {
            ("", _) => Json::Object(vec![]),
            // Gemini strips comments before it parses its settings.
            (_, true) => Json::from_jsonc(text).with_context(|| {
                format!("{} is not valid JSON (with comments); it was not changed", file.display())
            })?,
            // Strict JSON (what Claude and Codex read), not JSONC.
            _ => serde_json::from_str::<Json>(text)
                .with_context(|| format!("{} is not valid JSON; it was not changed", file.display()))?,
        };
        check_shape(&doc)
            .with_context(|| format!("{} is not a hook settings file; it was not changed", file.display()))?;
        let root = CstRootNode::parse(text, &ParseOptions::default())
            .map_err(|e| anyhow::anyhow!("{} cannot be edited: {e}; it was not changed", file.display()))?;
        Ok(Settings { original, root })
    }

    pub fn text(&self) -> String {
        let mut text = self.root.to_string();
        // A file we create ends with a newline, as the CLIs write theirs.
        if self.original.is_none() && !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }

    /// The file's value now (keys in file order).
    pub fn value(&self) -> Json {
        value_of(&self.root.to_string())
    }
}

/// The value of a JSON text (keys in file order, comments skipped: only texts that `load` accepted,
/// or that we wrote, are read here); `{}` for an empty text, `null` for an unreadable one.
pub fn value_of(text: &str) -> Json {
    match text.trim() {
        "" => Json::Object(vec![]),
        t => serde_json::from_str(t).or_else(|_| Json::from_jsonc(t)).unwrap_or(Json::Null),
    }
}

/// `{"hooks": {"<Event>": [{"matcher"?, "hooks": [{"type", "command", …}]}]}}`, other keys free.
fn check_shape(doc: &Json) -> anyhow::Result<()> {
    let Json::Object(_) = doc else { bail!("the top level is not an object") };
    let Some(hooks) = doc.get("hooks") else { return Ok(()) };
    let Json::Object(events) = hooks else { bail!("\"hooks\" is not an object") };
    for (event, groups) in events {
        let Json::Array(groups) = groups else { bail!("hooks.{event} is not an array") };
        for g in groups {
            match g.get("hooks") {
                Some(Json::Array(_)) => {}
                _ => bail!("a hooks.{event} entry has no \"hooks\" array"),
            }
        }
    }
    Ok(())
}

/// The handlers of one matcher group (`{"hooks": [...]}`).
fn handlers(group: &CstNode) -> Vec<CstNode> {
    group.as_object().and_then(|g| g.array_value("hooks")).map(|a| a.elements()).unwrap_or_default()
}

fn is_ours(handler: &CstNode) -> bool {
    handler
        .as_object()
        .and_then(|h| h.get("command"))
        .and_then(|c| c.value())
        .and_then(|v| v.as_string_lit())
        .and_then(|s| s.decoded_value().ok())
        .is_some_and(|c| is_our_command(&c))
}

/// Adds (or updates in place) our handler for every event. Answers whether the text changed.
pub fn install(s: &Settings, ours: &Ours) -> anyhow::Result<bool> {
    let before = s.root.to_string();
    let hooks = s.root.object_value_or_set().object_value_or_create("hooks").context("checked: an object")?;
    for &event in ours.cli.events() {
        let groups = hooks.array_value_or_create(event.as_str()).context("checked: an array")?;
        let existing = groups.elements().iter().flat_map(handlers).find(is_ours);
        match existing {
            Some(h) => {
                if value_of(&h.to_string()) != ours.handler(event) {
                    h.as_object().context("a handler")?.replace_with(ours.handler_input(event));
                }
            }
            None => {
                groups.append(group_input(ours, event));
            }
        }
    }
    Ok(s.root.to_string() != before)
}

fn group_input(ours: &Ours, event: HookEvent) -> jsonc_parser::cst::CstInputValue {
    use jsonc_parser::cst::CstInputValue;
    let mut group: Vec<(String, CstInputValue)> = vec![];
    match event {
        HookEvent::PostToolUse => group.push(("matcher".into(), "*".into())),
        // Gemini's matchers are regular expressions.
        HookEvent::AfterTool => group.push(("matcher".into(), ".*".into())),
        // Only MCP calls: it announces the call's tool-use id, so our MCP server knows its caller (one
        // identity for hooks and tools).
        HookEvent::PreToolUse => group.push(("matcher".into(), "mcp__.*".into())),
        // Gemini names MCP tools `mcp_<server>_<tool>`: the same, for `sessionwatch mcp`'s caller.
        HookEvent::BeforeTool => group.push(("matcher".into(), "mcp_.*".into())),
        _ => {}
    }
    group.push(("hooks".into(), CstInputValue::Array(vec![ours.handler_input(event)])));
    CstInputValue::Object(group)
}

/// Removes our handlers (and a group, an event array or the `hooks` object only they held, unless the
/// file had it before our install: `before`). Answers whether the text changed.
pub fn uninstall(s: &Settings, before: Option<&Json>) -> anyhow::Result<bool> {
    let had_before = |event: Option<&str>| {
        let hooks = before.and_then(|b| b.get("hooks"));
        match event {
            None => hooks.is_some(),
            Some(e) => hooks.and_then(|h| h.get(e)).is_some(),
        }
    };
    let before = s.root.to_string();
    let Some(hooks) = s.root.object_value().and_then(|o| o.object_value("hooks")) else { return Ok(false) };
    let hooks_was_empty = hooks.properties().is_empty();
    for prop in hooks.properties() {
        let Some(groups) = prop.array_value() else { continue };
        let had = groups.elements().len();
        for group in groups.elements() {
            let hs = handlers(&group);
            let ours: Vec<CstNode> = hs.iter().filter(|h| is_ours(h)).cloned().collect();
            // A group that only held ours goes; one the user left empty stays.
            if !ours.is_empty() && ours.len() == hs.len() {
                group.remove();
            } else {
                ours.into_iter().for_each(CstNode::remove);
            }
        }
        let name = prop.name().and_then(|n| n.decoded_value().ok());
        if had > 0 && groups.elements().is_empty() && !had_before(name.as_deref()) {
            prop.remove();
        }
    }
    if !hooks_was_empty && hooks.properties().is_empty() && !had_before(None) {
        remove_prop(&s.root.object_value().context("checked: an object")?, "hooks");
    }
    Ok(s.root.to_string() != before)
}

fn remove_prop(obj: &CstObject, name: &str) {
    if let Some(p) = obj.get(name) {
        p.remove();
    }
}

/// The command of our handler for `event`, if installed.
pub fn installed_command(doc: &Json, event: HookEvent) -> Option<String> {
    let Json::Array(groups) = doc.get("hooks")?.get(event.as_str())? else { return None };
    groups.iter().find_map(|g| match g.get("hooks") {
        Some(Json::Array(hs)) => hs
            .iter()
            .filter_map(|h| h.get("command").and_then(Json::as_str))
            .find(|c| is_our_command(c))
            .map(str::to_string),
        _ => None,
    })
}
