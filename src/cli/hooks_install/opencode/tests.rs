//! The OpenCode plugin file: its exact text, and install / status / uninstall next to a user's files.

use super::*;

fn config() -> PluginConfig {
    PluginConfig {
        data_dir: PathBuf::from("/home/u/.local/share/sessionwatch"),
        url: "http://127.0.0.1:7420".into(),
        agent: None,
    }
}

#[test]
fn the_plugin_file_exact_text() {
    insta::assert_snapshot!(render(&PluginConfig { agent: Some("Builder".into()), ..config() }));
}

#[test]
fn the_plugin_is_plain_javascript_whose_only_export_is_the_plugin_function() {
    let text = render(&config());
    assert!(text.starts_with(MARKER), "the marker is the first line");
    assert!(!text.contains("import ") && !text.contains("require("), "no import, no npm");
    let exports: Vec<&str> = text.lines().filter(|l| l.starts_with("export ")).collect();
    assert_eq!(exports, ["export const SessionwatchPlugin = async ({ directory }) => {"]);
    assert!(text.contains("AbortSignal.timeout(TIMEOUT_MS)") && text.contains("const TIMEOUT_MS = 1000"));
    assert!(!text.contains("__CONFIG__"));
    let line = text.lines().find(|l| l.starts_with("const SESSIONWATCH = ")).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(line.trim_start_matches("const SESSIONWATCH = ")).unwrap();
    assert_eq!(
        v,
        serde_json::from_str::<serde_json::Value>(
            r#"{"dataDir": "/home/u/.local/share/sessionwatch", "url": "http://127.0.0.1:7420", "agentId": null}"#
        )
        .unwrap()
    );
}

#[test]
fn install_status_and_uninstall_are_idempotent() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join(".config/opencode/plugins/sessionwatch.js");
    assert_eq!(inspect(&file).unwrap(), Found::Missing);
    assert!(!uninstall(&file).unwrap(), "nothing to remove");
    assert!(install(&file, &config()).unwrap(), "written");
    assert!(!install(&file, &config()).unwrap(), "the second install changes nothing");
    assert!(is_current(&file, &config()));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), render(&config()));
    // Another agent (or data dir, address, version) rewrites our file in place.
    let other = PluginConfig { agent: Some("ops".into()), ..config() };
    assert!(!is_current(&file, &other));
    assert!(install(&file, &other).unwrap());
    assert!(is_current(&file, &other));
    assert!(uninstall(&file).unwrap(), "removed");
    assert!(!file.exists());
    assert!(!uninstall(&file).unwrap(), "a second uninstall changes nothing");
}

#[test]
fn a_users_file_of_that_name_is_never_written_over_nor_removed() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("sessionwatch.js");
    let theirs = "// my own plugin\nexport const Mine = async () => ({})\n";
    std::fs::write(&file, theirs).unwrap();
    let err = install(&file, &config()).unwrap_err().to_string();
    assert!(err.contains("is not sessionwatch's plugin") && err.contains("left untouched"), "{err}");
    assert_eq!(inspect(&file).unwrap(), Found::Theirs);
    assert!(!uninstall(&file).unwrap());
    assert!(!is_current(&file, &config()));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), theirs, "byte for byte");
}

#[test]
fn the_user_and_project_plugin_folders_are_opencodes() {
    assert_eq!(
        project_plugin_file(Path::new("/w/demo")),
        PathBuf::from("/w/demo/.opencode/plugins/sessionwatch.js")
    );
    let user = user_plugin_file(Path::new("/home/u"));
    assert!(user.ends_with("opencode/plugins/sessionwatch.js"), "{}", user.display());
}
