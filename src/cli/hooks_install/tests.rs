//! Install / uninstall on settings files that already hold the user's own hooks.

use super::*;

fn ours(cli: HookCli) -> Ours {
    Ours { cli, command_prefix: "/opt/sw/bin/sessionwatch".into(), agent: None }
}

/// A settings file as Claude Code writes it, with the user's own hooks and other settings.
const USER_CLAUDE: &str = r#"{
  "permissions": {
    "allow": [
      "Bash(npm test)"
    ]
  },
  "hooks": {
    "UserPromptSubmit": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "python3 $HOME/bin/log-prompt.py"
          }
        ]
      }
    ],
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "/usr/local/bin/guard",
            "timeout": 3
          }
        ]
      }
    ]
  },
  "model": "opus"
}
"#;

fn round_trip(cli: HookCli, original: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("settings.json");
    if let Some(o) = original {
        std::fs::write(&file, o).unwrap();
    }
    let o = ours(cli);
    assert!(edit(&file, |d| install(d, &o)).unwrap(), "installed");
    let installed = std::fs::read_to_string(&file).unwrap();
    assert!(!edit(&file, |d| install(d, &o)).unwrap(), "a second install changes nothing");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), installed);
    let doc: serde_json::Value = serde_json::from_str(&installed).unwrap();
    for event in EVENTS {
        let groups = doc["hooks"][event.as_str()].as_array().unwrap();
        let commands: Vec<&str> = groups
            .iter()
            .flat_map(|g| g["hooks"].as_array().unwrap())
            .filter_map(|h| h["command"].as_str())
            .filter(|c| is_our_command(c))
            .collect();
        assert_eq!(
            commands,
            [format!("/opt/sw/bin/sessionwatch hook {} --agent {}", event.as_str(), cli.as_str())],
            "{event:?}"
        );
    }
    if let Some(o) = original {
        // The user's hooks stay first, in their order.
        let first_ours = installed.find("/opt/sw/bin/sessionwatch").unwrap();
        for theirs in ["log-prompt.py", "notify-send"].into_iter().filter(|t| o.contains(t)) {
            assert!(installed.find(theirs).unwrap() < first_ours, "{theirs} stays first");
        }
    }
    assert!(edit(&file, uninstall).unwrap(), "uninstalled");
    match original {
        Some(o) => assert_eq!(std::fs::read_to_string(&file).unwrap(), o, "byte-identical after uninstall"),
        None => assert_eq!(std::fs::read_to_string(&file).unwrap(), "{}\n"),
    }
    assert!(!edit(&file, uninstall).unwrap(), "nothing left to remove");
}

#[test]
fn install_and_uninstall_round_trip_on_a_claude_settings_file_with_user_hooks() {
    round_trip(HookCli::Claude, Some(USER_CLAUDE));
}

#[test]
fn install_and_uninstall_round_trip_on_a_codex_hooks_file_with_user_hooks() {
    let codex = r#"{
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "notify-send done",
            "timeout": 30
          }
        ]
      }
    ]
  }
}"#;
    round_trip(HookCli::Codex, Some(codex));
}

#[test]
fn install_and_uninstall_without_a_file() {
    round_trip(HookCli::Claude, None);
}

#[test]
fn an_old_install_location_is_replaced_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("settings.json");
    let old = Ours { cli: HookCli::Claude, command_prefix: "/old/sessionwatch".into(), agent: None };
    edit(&file, |d| install(d, &old)).unwrap();
    let new = Ours { agent: Some("ops".into()), ..ours(HookCli::Claude) };
    assert!(edit(&file, |d| install(d, &new)).unwrap());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("/old/sessionwatch"), "{text}");
    assert_eq!(text.matches("hook Stop").count(), 1, "{text}");
    assert!(text.contains("--agent claude --agent-id ops"), "{text}");
}

#[test]
fn a_malformed_settings_file_is_reported_and_left_alone() {
    let cases = [
        ("{ not json", "not valid JSON"),
        ("[1]", "not a hook settings file"),
        (r#"{"hooks": []}"#, "not a hook settings file"),
        (r#"{"hooks": {"Stop": {}}}"#, "not a hook settings file"),
        (r#"{"hooks": {"Stop": [{"command": "x"}]}}"#, "not a hook settings file"),
    ];
    for (text, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        std::fs::write(&file, text).unwrap();
        for action in ["install", "uninstall"] {
            let err = match action {
                "install" => edit(&file, |d| install(d, &ours(HookCli::Claude))),
                _ => edit(&file, uninstall),
            }
            .expect_err(text);
            assert!(format!("{err:#}").contains(want), "{text}: {err:#}");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "{action} left {text} alone");
        }
    }
}

#[test]
fn our_command_is_recognised_wherever_it_is_installed() {
    for cmd in [
        "sessionwatch hook Stop",
        "/usr/bin/sessionwatch hook Stop --agent claude",
        "'/a b/sessionwatch' hook Stop",
    ] {
        assert!(is_our_command(cmd), "{cmd}");
    }
    for cmd in ["sessionwatch serve", "python3 hook.py Stop", "/usr/bin/not-sessionwatch hook Stop", ""] {
        assert!(!is_our_command(cmd), "{cmd}");
    }
    assert_eq!(shell_quote("/a b/sessionwatch"), "'/a b/sessionwatch'");
}
