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

/// A scratch settings file and record store.
struct Scratch {
    dir: tempfile::TempDir,
    records: Records,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::new(dir.path().join("data/hooks-install"));
        Scratch { dir, records }
    }
    fn file(&self) -> PathBuf {
        self.dir.path().join("settings.json")
    }
    fn read(&self) -> Option<String> {
        std::fs::read_to_string(self.file()).ok()
    }
    fn install(&self, o: &Ours) -> bool {
        install_file(&self.file(), o, &self.records, None).unwrap().changed
    }
    fn uninstall(&self) -> bool {
        self.uninstall_as(HookCli::Claude)
    }
    fn uninstall_as(&self, cli: HookCli) -> bool {
        uninstall_file(&self.file(), cli, &self.records).unwrap()
    }
}

fn round_trip(cli: HookCli, original: Option<&str>) {
    let sc = Scratch::new();
    if let Some(o) = original {
        std::fs::write(sc.file(), o).unwrap();
    }
    let o = ours(cli);
    assert!(sc.install(&o), "installed");
    let installed = sc.read().unwrap();
    assert!(!sc.install(&o), "a second install changes nothing");
    assert_eq!(sc.read().unwrap(), installed);
    // Gemini's file may hold comments: read as the installer does.
    let doc = settings::value_of(&installed);
    for &event in cli.events() {
        let Some(Json::Array(groups)) = doc.get("hooks").and_then(|h| h.get(event.as_str())) else {
            panic!("{event:?} installed in {installed}")
        };
        let commands: Vec<&str> = groups
            .iter()
            .flat_map(|g| match g.get("hooks") {
                Some(Json::Array(hs)) => hs.as_slice(),
                _ => &[],
            })
            .filter_map(|h| h.get("command").and_then(Json::as_str))
            .filter(|c| is_our_command(c))
            .collect();
        assert_eq!(
            commands,
            [format!("/opt/sw/bin/sessionwatch hook {} --agent {}", event.as_str(), cli.as_str())],
            "{event:?}"
        );
    }
    if let Some(o) = original {
        // The user's text is not reformatted: each of its lines is still there as written (only a
        // closing bracket may gain our entries before it), and their hooks stay first.
        // (A one-line file gains line breaks where our entries go: compare it without whitespace.)
        let squeeze = |t: &str| t.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        let (o_cmp, installed_cmp) = if o.trim_end().contains('\n') {
            (o.to_string(), installed.clone())
        } else {
            (squeeze(o), squeeze(&installed))
        };
        for line in o_cmp.lines() {
            let kept = line.trim_end_matches(|c| "]},\r".contains(c));
            assert!(installed_cmp.contains(kept), "{kept:?} kept as written in:\n{installed}");
        }
        let first_ours = installed.find("/opt/sw/bin/sessionwatch").unwrap();
        for theirs in ["log-prompt.py", "notify-send"].into_iter().filter(|t| o.contains(t)) {
            assert!(installed.find(theirs).unwrap() < first_ours, "{theirs} stays first");
        }
    }
    assert!(sc.uninstall_as(cli), "uninstalled");
    assert_eq!(sc.read().as_deref(), original, "byte-identical after uninstall (no file: removed)");
    assert!(!sc.uninstall_as(cli), "nothing left to remove");
    assert_eq!(sc.read().as_deref(), original);
}

/// Hand-formatted files: 4-space indent, inline arrays and objects, CRLF, no final newline.
const HAND_FORMATTED: [&str; 4] = [
    "{\n    \"permissions\": {\"allow\": [\"Bash(npm test)\"]},\n    \"hooks\": {\n        \"UserPromptSubmit\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"log-prompt.py\"}]}]\n    },\n    \"model\": \"opus\"\n}\n",
    "{\r\n  \"model\": \"opus\",\r\n  \"env\": {\"A\": \"1\"}\r\n}\r\n",
    "{\"model\":\"opus\",\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"notify-send done\"}]}]}}",
    "{\n\t\"z\": 1,\n\t\"a\": [1, 2, 3],\n\t\"hooks\": {}\n}",
];

#[test]
fn hand_formatted_files_are_edited_in_place_and_given_back_byte_for_byte() {
    for (i, text) in HAND_FORMATTED.iter().enumerate() {
        for cli in [HookCli::Claude, HookCli::Codex] {
            println!("case {i} {cli:?}");
            round_trip(cli, Some(text));
        }
    }
}

#[test]
fn crlf_and_indentation_of_the_file_are_used_for_our_entries() {
    let sc = Scratch::new();
    std::fs::write(sc.file(), HAND_FORMATTED[1]).unwrap();
    sc.install(&ours(HookCli::Claude));
    let installed = sc.read().unwrap();
    assert_eq!(installed.matches('\n').count(), installed.matches("\r\n").count(), "CRLF only:\n{installed}");
    let sc = Scratch::new();
    std::fs::write(sc.file(), HAND_FORMATTED[0]).unwrap();
    sc.install(&ours(HookCli::Claude));
    assert!(sc.read().unwrap().contains("\n        \"Stop\": ["), "4-space indent: {}", sc.read().unwrap());
}

/// The user edits the file between install and uninstall: uninstall removes only ours, their edit stays.
#[test]
fn an_edit_between_install_and_uninstall_is_kept() {
    let sc = Scratch::new();
    std::fs::write(sc.file(), HAND_FORMATTED[0]).unwrap();
    sc.install(&ours(HookCli::Claude));
    let edited = sc.read().unwrap().replace("\"opus\"", "\"sonnet\"");
    std::fs::write(sc.file(), &edited).unwrap();
    assert!(sc.uninstall());
    let after = sc.read().unwrap();
    assert!(!after.contains("sessionwatch"), "{after}");
    assert_eq!(
        settings::value_of(&after),
        settings::value_of(&HAND_FORMATTED[0].replace("\"opus\"", "\"sonnet\"")),
        "{after}"
    );
    assert!(after.starts_with("{\n    \"permissions\": {\"allow\": [\"Bash(npm test)\"]},\n"), "{after}");
}

/// A file installed into before records existed (or whose record is gone): uninstall still removes ours.
#[test]
fn uninstall_without_a_record_removes_only_ours() {
    let sc = Scratch::new();
    std::fs::write(sc.file(), USER_CLAUDE).unwrap();
    sc.install(&ours(HookCli::Claude));
    sc.records.remove(&sc.file());
    assert!(sc.uninstall());
    assert_eq!(settings::value_of(&sc.read().unwrap()), settings::value_of(USER_CLAUDE));
}

#[test]
fn the_record_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let sc = Scratch::new();
    sc.install(&ours(HookCli::Claude));
    let dir = sc.dir.path().join("data/hooks-install");
    let entry = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap();
    assert_eq!(entry.metadata().unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
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
    let sc = Scratch::new();
    let old = Ours { cli: HookCli::Claude, command_prefix: "/old/sessionwatch".into(), agent: None };
    sc.install(&old);
    let new = Ours { agent: Some("ops".into()), ..ours(HookCli::Claude) };
    assert!(sc.install(&new));
    let text = sc.read().unwrap();
    assert!(!text.contains("/old/sessionwatch"), "{text}");
    assert_eq!(text.matches("hook Stop").count(), 1, "{text}");
    assert!(text.contains("--agent claude --agent-id ops"), "{text}");
    assert!(sc.uninstall());
    assert_eq!(sc.read(), None, "the file we created is gone");
}

#[test]
fn a_malformed_settings_file_is_reported_and_left_alone() {
    let cases = [
        ("{ not json", "not valid JSON"),
        ("{\"a\": 1, // comment\n}", "not valid JSON"),
        (r#"{"hooks": "sessionwatch hook Stop"}"#, "not a hook settings file"),
        ("[1]", "not a hook settings file"),
        (r#"{"hooks": []}"#, "not a hook settings file"),
        (r#"{"hooks": {"Stop": {}}}"#, "not a hook settings file"),
        (r#"{"hooks": {"Stop": [{"command": "x"}]}}"#, "not a hook settings file"),
    ];
    for (text, want) in cases {
        let sc = Scratch::new();
        let file = sc.file();
        std::fs::write(&file, text).unwrap();
        for action in ["install", "uninstall"] {
            let err = match action {
                "install" => install_file(&file, &ours(HookCli::Claude), &sc.records, None).map(|_| true),
                _ => uninstall_file(&file, HookCli::Claude, &sc.records),
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

/// Codex without a codex binary to trust the hooks with: install refuses, saying how to fix it.
#[test]
fn codex_install_without_a_usable_codex_fails_and_says_how_to_fix_it() {
    let err = codex_to_trust_with(Some(Path::new("/nonexistent/codex"))).unwrap_err().to_string();
    for hint in ["--codex PATH", "PATH", "--untrusted", "Nothing was changed"] {
        assert!(err.contains(hint), "{hint}: {err}");
    }
}

/// A Gemini CLI `settings.json` as a user has it: other settings, a comment (Gemini strips comments
/// before parsing), and a hook of their own.
const USER_GEMINI: &str = r#"{
  // set up by hand
  "security": { "auth": { "selectedType": "gemini-api-key" } },
  "hooks": {
    "BeforeAgent": [
      {
        "hooks": [
          { "type": "command", "name": "log-prompt", "command": "python3 $HOME/bin/log-prompt.py", "timeout": 2000 }
        ]
      }
    ]
  },
  "model": { "name": "gemini-2.5-flash" }
}
"#;

#[test]
fn install_and_uninstall_round_trip_on_a_gemini_settings_file_with_comments_and_user_hooks() {
    round_trip(HookCli::Gemini, Some(USER_GEMINI));
    round_trip(HookCli::Gemini, None);
}

/// The exact entries Gemini gets (NATIVE.md 3.2's shape: a `name`, `timeout` in milliseconds, a
/// regular-expression matcher on AfterTool), and nothing of Claude's events.
#[test]
fn gemini_entries_exact_text() {
    let sc = Scratch::new();
    sc.install(&ours(HookCli::Gemini));
    let text = sc.read().unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let entry = |event: &str, matcher: Option<&str>| {
        let name = match event {
            "SessionStart" => "sessionwatch-session-start",
            "BeforeAgent" => "sessionwatch-before-agent",
            "AfterTool" => "sessionwatch-after-tool",
            "BeforeTool" => "sessionwatch-before-tool",
            _ => "sessionwatch-session-end",
        };
        let matcher = matcher.map(|m| format!("\"matcher\": \"{m}\", ")).unwrap_or_default();
        let command = format!("/opt/sw/bin/sessionwatch hook {event} --agent gemini");
        let text = format!(
            "[{{{matcher}\"hooks\": [{{\"type\": \"command\", \"name\": \"{name}\", \"command\": \"{command}\", \"timeout\": 5000}}]}}]"
        );
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let mut hooks = serde_json::Map::new();
    for (event, matcher) in [
        ("SessionStart", None),
        ("BeforeAgent", None),
        ("BeforeTool", Some("mcp_.*")),
        ("AfterTool", Some(".*")),
        ("SessionEnd", None),
    ] {
        hooks.insert(event.to_string(), entry(event, matcher));
    }
    let mut expected = serde_json::Map::new();
    expected.insert("hooks".into(), hooks.into());
    assert_eq!(doc, serde_json::Value::Object(expected), "{text}");
    // Key order as written (serde_json's Value would hide it).
    let order: Vec<usize> = ["\"type\":", "\"name\":", "\"command\":", "\"timeout\":"]
        .iter()
        .map(|k| text.find(k).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(text.find("\"matcher\": \".*\"").is_some(), "{text}");
}

#[test]
fn claude_gets_session_end_and_codex_does_not() {
    for (cli, has_end) in [(HookCli::Claude, true), (HookCli::Codex, false)] {
        let sc = Scratch::new();
        sc.install(&ours(cli));
        let doc: serde_json::Value = serde_json::from_str(&sc.read().unwrap()).unwrap();
        assert_eq!(doc["hooks"].get("SessionEnd").is_some(), has_end, "{cli:?}");
        assert_eq!(doc["hooks"].as_object().unwrap().len(), cli.events().len(), "{cli:?}");
    }
}

#[test]
fn a_malformed_gemini_settings_file_is_reported_and_left_alone() {
    for (text, want) in [
        ("{ \"a\": 1, }", "not valid JSON"),
        ("{ a: 1 }", "not valid JSON"),
        (r#"{"hooks": {"BeforeAgent": {}}}"#, "not a hook settings file"),
    ] {
        let sc = Scratch::new();
        let file = sc.file();
        std::fs::write(&file, text).unwrap();
        let err = install_file(&file, &ours(HookCli::Gemini), &sc.records, None).map(|_| ()).expect_err(text);
        assert!(format!("{err:#}").contains(want), "{text}: {err:#}");
        let err = uninstall_file(&file, HookCli::Gemini, &sc.records).expect_err(text);
        assert!(format!("{err:#}").contains(want), "{text}: {err:#}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    }
}
