use super::editors::*;
use super::manifest::{Added, EditKind};
use super::service::{ServiceKind, service_file};
use super::{remove_text, same_value};
use std::path::Path;

const EXE: &str = "/opt/sw bin/sessionwatch";

#[test]
fn the_systemd_unit_runs_this_binary_serve() {
    let f = service_file(ServiceKind::Systemd, Path::new(EXE), Path::new("/home/u"));
    if std::env::var_os("XDG_CONFIG_HOME").is_none() {
        assert_eq!(f.path, Path::new("/home/u/.config/systemd/user/sessionwatch.service"));
    }
    insta::assert_snapshot!(f.text);
}

#[test]
fn the_launchd_plist_runs_this_binary_serve() {
    let f =
        service_file(ServiceKind::Launchd, Path::new("/Users/a&b/bin/sessionwatch"), Path::new("/Users/a&b"));
    assert_eq!(f.path, Path::new("/Users/a&b/Library/LaunchAgents/dev.sessionwatch.gateway.plist"));
    insta::assert_snapshot!(f.text);
}

/// Adds the entry, checks the second add changes nothing, and undoes it: the bytes come back.
fn round_trip(edit: EditKind, before: Option<&str>) -> String {
    let after = super::edit_text(edit, before, Path::new(EXE)).unwrap().expect("a change");
    assert_eq!(super::edit_text(edit, Some(&after), Path::new(EXE)).unwrap(), None, "idempotent");
    let removed = remove_text(edit, &after, EXE, before).unwrap();
    assert!(same_value(edit, &removed, before), "undo gives the value back:\n{removed}");
    after
}

#[test]
fn claude_json_with_four_space_indent_keeps_its_format() {
    let before = "{\n    \"theme\": \"dark\",\n    \"projects\": {\"/x\": {\"allowedTools\": []}}\n}\n";
    let after = round_trip(EditKind::ClaudeMcp, Some(before));
    assert!(
        after.starts_with("{\n    \"theme\": \"dark\",\n    \"projects\": {\"/x\": {\"allowedTools\": []}},"),
        "{after}"
    );
    assert!(after.contains("\n    \"mcpServers\": {\n        \"sessionwatch\": {"), "{after}");
    let v: serde_json::Value = serde_json::from_str(&after).unwrap();
    assert_eq!(v["mcpServers"]["sessionwatch"], claude_server_value(EXE));
}

#[test]
fn claude_json_keeps_the_users_other_servers() {
    let before = "{\"mcpServers\": {\"other\": {\"command\": \"x\"}}}";
    let after = round_trip(EditKind::ClaudeMcp, Some(before));
    let v: serde_json::Value = serde_json::from_str(&after).unwrap();
    assert_eq!(v["mcpServers"]["other"]["command"], "x");
}

#[test]
fn a_file_that_is_not_the_shape_the_cli_reads_is_reported() {
    for (edit, text) in [
        (EditKind::ClaudeMcp, "[1, 2]"),
        (EditKind::ClaudeMcp, "{\"mcpServers\": []}"),
        (EditKind::ClaudeMcp, "{\"theme\": "),
        (EditKind::ClaudeAllow, "{\"permissions\": {\"allow\": \"mcp__x\"}}"),
        (EditKind::ClaudeAllow, "{\"permissions\": true}"),
        (EditKind::CodexMcp, "mcp_servers = 3\n"),
        (EditKind::CodexMcp, "model = \n"),
        (EditKind::CodexMcp, "[mcp_servers]\nsessionwatch = \"x\"\n"),
    ] {
        assert!(super::edit_text(edit, Some(text), Path::new(EXE)).is_err(), "{edit:?} {text:?}");
    }
}

#[test]
fn another_server_under_our_name_is_left_alone() {
    let claude =
        "{\"mcpServers\": {\"sessionwatch\": {\"command\": \"/usr/bin/python3\", \"args\": [\"x.py\"]}}}";
    let e = super::edit_text(EditKind::ClaudeMcp, Some(claude), Path::new(EXE)).unwrap_err();
    assert!(e.to_string().contains("another server"), "{e}");
    let codex = "[mcp_servers.sessionwatch]\ncommand = \"node\"\n";
    assert!(super::edit_text(EditKind::CodexMcp, Some(codex), Path::new(EXE)).is_err());
}

#[test]
fn our_server_from_another_install_is_repointed_and_undo_puts_it_back() {
    let before = "{\"mcpServers\": {\"sessionwatch\": {\"type\": \"stdio\", \"command\": \"/old/sessionwatch\", \"args\": [\"mcp\"]}}}";
    let after = round_trip(EditKind::ClaudeMcp, Some(before));
    assert!(after.contains(EXE) && !after.contains("/old/"), "{after}");
}

#[test]
fn a_missing_claude_json_is_created_and_undo_empties_it() {
    let after = round_trip(EditKind::ClaudeMcp, None);
    assert!(after.ends_with("}\n"), "{after}");
}

#[test]
fn claude_settings_get_the_allow_rule_once() {
    let before = "{\n  \"permissions\": {\n    \"allow\": [\"Bash(ls)\"]\n  },\n  \"model\": \"opus\"\n}\n";
    let after = round_trip(EditKind::ClaudeAllow, Some(before));
    let v: serde_json::Value = serde_json::from_str(&after).unwrap();
    assert_eq!(v["permissions"]["allow"], serde_json::Value::from(vec!["Bash(ls)", CLAUDE_ALLOW_RULE]));
    round_trip(EditKind::ClaudeAllow, Some("{}"));
    // Already allowed (by the user, with the wildcard spelling): nothing to do.
    let mine = "{\"permissions\": {\"allow\": [\"mcp__sessionwatch__*\"]}}";
    assert_eq!(super::edit_text(EditKind::ClaudeAllow, Some(mine), Path::new(EXE)).unwrap(), None);
}

#[test]
fn codex_config_with_comments_keeps_them() {
    let before = "# my codex\nmodel = \"gpt-5.5\"  # the model\n\n[mcp_servers.other]\ncommand = \"x\" # theirs\n\n[features]\nplugins = false\n";
    let after = round_trip(EditKind::CodexMcp, Some(before));
    let ours = format!("[mcp_servers.sessionwatch]\ncommand = \"{EXE}\"\nargs = [\"mcp\"]\n\n");
    assert_eq!(after.replacen(&ours, "", 1), before, "our table inserted, nothing else touched:\n{after}");
    let doc: toml::Table = after.parse().unwrap();
    assert_eq!(doc["mcp_servers"]["sessionwatch"]["command"].as_str(), Some(EXE));
    assert_eq!(doc["mcp_servers"]["sessionwatch"]["args"], toml::Value::Array(vec!["mcp".into()]));
    round_trip(EditKind::CodexMcp, Some("model = \"x\"\n"));
}

/// Undo after the CLI wrote its own state into the file: only our entry goes.
#[test]
fn undo_after_the_cli_changed_the_file_removes_only_ours() {
    let before = "{\n  \"theme\": \"dark\"\n}\n";
    let after = super::edit_text(EditKind::ClaudeMcp, Some(before), Path::new(EXE)).unwrap().unwrap();
    let now = after.replacen("\"theme\": \"dark\"", "\"theme\": \"dark\",\n  \"numStartups\": 3", 1);
    let removed = remove_text(EditKind::ClaudeMcp, &now, EXE, Some(before)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&removed).unwrap();
    assert_eq!(
        v,
        serde_json::from_str::<serde_json::Value>(r#"{"theme": "dark", "numStartups": 3}"#).unwrap()
    );
    // A user who repointed our entry since keeps theirs.
    let theirs = now.replace(EXE, "/elsewhere/sessionwatch");
    assert_eq!(remove_text(EditKind::ClaudeMcp, &theirs, EXE, Some(before)).unwrap(), theirs);
}

/// The whole undo of one recorded edit, on disk: an untouched file gets its very bytes back; a file
/// that is not ours to touch stays as it is.
#[test]
fn undo_of_a_recorded_edit_restores_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let before = "# keep me\r\nmodel = 'x'   \r\n";
    std::fs::write(&path, before).unwrap();
    let after = super::edit_text(EditKind::CodexMcp, Some(before), Path::new(EXE)).unwrap().unwrap();
    std::fs::write(&path, &after).unwrap();
    let added =
        Added::Edit { edit: EditKind::CodexMcp, path: path.clone(), before: Some(before.into()), after };
    super::undo_one(&added, EXE).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before.as_bytes());
    // A file setup created goes again.
    let created = dir.path().join("new.json");
    let after = super::edit_text(EditKind::ClaudeMcp, None, Path::new(EXE)).unwrap().unwrap();
    std::fs::write(&created, &after).unwrap();
    let added = Added::Edit { edit: EditKind::ClaudeMcp, path: created.clone(), before: None, after };
    super::undo_one(&added, EXE).unwrap();
    assert!(!created.exists());
}

#[test]
fn the_manifest_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let m = super::Manifest { exe: EXE.into(), added: vec![Added::Hooks { cli: "claude".into() }] };
    m.write(dir.path()).unwrap();
    let meta = std::fs::metadata(super::manifest::manifest_path(dir.path())).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(super::Manifest::read(dir.path()).unwrap(), Some(m));
}

#[test]
fn gemini_settings_with_comments_and_hooks_get_the_mcp_server_and_give_it_back() {
    let before = "{\n  // mine\n  \"model\": { \"name\": \"gemini-2.5-flash\" },\n  \"hooks\": {}\n}\n";
    let after = round_trip(EditKind::GeminiMcp, Some(before));
    assert!(after.starts_with("{\n  // mine\n  \"model\": { \"name\": \"gemini-2.5-flash\" },"), "{after}");
    let v = jsonc_object(Some(&after)).unwrap();
    assert_eq!(v["mcpServers"]["sessionwatch"], gemini_server_value(EXE));
    let none = round_trip(EditKind::GeminiMcp, None);
    assert_eq!(jsonc_object(Some(&none)).unwrap()["mcpServers"]["sessionwatch"], gemini_server_value(EXE));
    // Another server under our name is the user's: reported, left alone.
    let theirs = "{\"mcpServers\": {\"sessionwatch\": {\"command\": \"/usr/bin/other\"}}}";
    assert!(super::edit_text(EditKind::GeminiMcp, Some(theirs), Path::new(EXE)).is_err());
}

#[test]
fn setup_checks_each_clis_own_hook_events() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("settings.json");
    let exe = Path::new("/opt/sw/sessionwatch");
    let entry = |e: &str, cli: &str| {
        format!(
            "{{\"hooks\":[{{\"type\":\"command\",\"command\":\"/opt/sw/sessionwatch hook {e} --agent {cli}\"}}]}}"
        )
    };
    let events = ["SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "SessionEnd"];
    let hooks: Vec<String> = events.iter().map(|e| format!("\"{e}\": [{}]", entry(e, "gemini"))).collect();
    std::fs::write(&file, format!("{{ // c\n\"hooks\": {{{}}}}}", hooks.join(","))).unwrap();
    assert!(super::hooks_installed(&file, exe, "gemini"), "Gemini's five events, in a file with a comment");
    assert!(!super::hooks_installed(&file, exe, "claude"));
}
