//! The Pi extension file: what is written, and that a user's file of that name is never touched.

use super::*;

fn config() -> ExtensionConfig {
    ExtensionConfig {
        agent_id: Some("ops".into()),
        data_dir: PathBuf::from("/home/u/.local/share/sessionwatch"),
        url: "http://127.0.0.1:7420".into(),
    }
}

#[test]
fn the_extension_file_is_the_template_with_the_install_time_values() {
    let text = render(&config());
    assert!(is_ours(&text), "the marker is on the first line");
    assert!(!text.contains(CONFIG_PLACEHOLDER), "the placeholder was replaced");
    let values = installed_config(&text).unwrap();
    assert_eq!(values["agentId"], "ops");
    assert_eq!(values["dataDir"], "/home/u/.local/share/sessionwatch");
    assert_eq!(values["url"], "http://127.0.0.1:7420");
    let imports: Vec<&str> = text.lines().filter(|l| l.starts_with("import ")).collect();
    assert!(!imports.is_empty());
    for line in imports {
        assert!(line.contains("\"node:"), "only Node built-ins: {line}");
    }
    let default = render(&ExtensionConfig { agent_id: None, ..config() });
    assert_eq!(installed_config(&default).unwrap()["agentId"], serde_json::Value::Null);
    insta::assert_snapshot!("pi_extension", text);
}

#[test]
fn the_template_holds_the_placeholder_exactly_once() {
    assert_eq!(TEMPLATE.matches(CONFIG_PLACEHOLDER).count(), 1);
    assert!(is_ours(TEMPLATE));
}

#[test]
fn install_is_idempotent_and_uninstall_removes_only_ours() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(".pi/agent/extensions").join(FILE_NAME);
    assert_eq!(inspect(&file).unwrap(), Found::Missing);
    assert!(install(&file, &config()).unwrap(), "installed");
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written, render(&config()));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(!install(&file, &config()).unwrap(), "a second install changes nothing");
    // Another agent: ours is replaced.
    let other = ExtensionConfig { agent_id: None, ..config() };
    assert!(install(&file, &other).unwrap());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), render(&other));
    assert!(uninstall(&file).unwrap(), "removed");
    assert!(!file.exists());
    assert!(!uninstall(&file).unwrap(), "nothing left to remove");
    let leftovers: Vec<_> = std::fs::read_dir(file.parent().unwrap()).unwrap().collect();
    assert!(leftovers.is_empty(), "no temporary file left: {leftovers:?}");
}

#[test]
fn a_users_file_of_that_name_is_never_overwritten_nor_removed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(FILE_NAME);
    let theirs = "// my own sessionwatch helper\nexport default function (pi) {}\n";
    std::fs::write(&file, theirs).unwrap();
    assert_eq!(inspect(&file).unwrap(), Found::Theirs);
    let err = install(&file, &config()).unwrap_err().to_string();
    assert!(err.contains("was not written by sessionwatch") && err.contains("Nothing was changed"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), theirs);
    let err = uninstall(&file).unwrap_err().to_string();
    assert!(err.contains("left alone"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), theirs);
    // The marker counts only on the first line.
    std::fs::write(&file, format!("export default function (pi) {{}}\n// {MARKER}\n")).unwrap();
    assert_eq!(inspect(&file).unwrap(), Found::Theirs);
}

#[test]
fn the_extension_lives_in_pis_agent_dir_or_the_project() {
    let project = extension_file(Some(Path::new("/w/demo"))).unwrap();
    assert_eq!(project, PathBuf::from("/w/demo/.pi/extensions/sessionwatch.ts"));
    let user = extension_file(None).unwrap();
    assert!(user.ends_with("extensions/sessionwatch.ts"), "{}", user.display());
}
