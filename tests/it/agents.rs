//! The hooks with the REAL Claude Code, Codex and Gemini CLIs, and the Pi extension with the real Pi
//! (`tests/agents/*-e2e.sh`): offline, in a loopback-only network namespace, against a fake model. Skipped
//! (and said so) when the CLIs (or, for the TUI turns, tmux) are not installed, unless
//! `SESSIONWATCH_REQUIRE_AGENTS=1` (CI), where a missing one fails.

use crate::support::bin;
use std::process::Command;

/// Runs `tests/agents/<script> ARGS` with this build's binary; passes when the script does, with no
/// `FAIL ` line and at least `passes` `PASS ` lines. Exit 77 (the agent CLIs are not installed) skips,
/// unless `SESSIONWATCH_REQUIRE_AGENTS=1`.
fn run_e2e(script: &str, args: &[&str], passes: usize) {
    let path = format!("{}/tests/agents/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash").arg(path).args(args).env("SESSIONWATCH_BIN", bin()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let required = std::env::var("SESSIONWATCH_REQUIRE_AGENTS").is_ok_and(|v| v == "1");
    if out.status.code() == Some(77) {
        assert!(!required, "the agent CLIs are required but not installed:\n{text}");
        eprintln!("SKIPPED: {}", text.trim());
        return;
    }
    println!("{text}");
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("FAIL "), "{text}");
    assert!(text.matches("PASS ").count() >= passes, "every check ran:\n{text}");
}

/// The tests, one per script: `test: script, its arguments, the least number of checks that pass;`.
macro_rules! e2e_tests {
    ($($(#[$doc:meta])* $test:ident: $script:literal, $args:expr, $passes:literal;)*) => {
        $(
            $(#[$doc])*
            #[test]
            fn $test() {
                run_e2e($script, $args, $passes);
            }
        )*
    };
}

e2e_tests! {
    hooks_with_the_real_claude_code_and_codex_clis: "hooks-e2e.sh", &["all"], 22;

    /// Issue 33: a manager in one CLI watching a worker in the other; bursts of 1, 2 and 3 prompts typed into
    /// the worker (print mode and its TUI); the manager's next turn (resumed in print mode, and with its TUI
    /// open) holds exactly one notice per burst in the model's request, Stop never blocks, quiet turns hold
    /// none. Both directions.
    one_notice_per_burst_with_the_real_clis_both_directions: "burst-e2e.sh", &["all"], 44;

    /// Issue 34: from a fresh HOME to a watching fleet with `sessionwatch setup --yes` and the real CLIs on
    /// PATH, no SESSIONWATCH_* variable; `doctor` passes, then names a stopped gateway; the next Claude turn
    /// shows the user the outage line once; `setup --undo` gives every file its bytes back
    /// (`tests/agents/setup-e2e.sh`).
    setup_from_a_fresh_home_with_the_real_clis: "setup-e2e.sh", &[], 23;

    /// Issue 38: the REAL Gemini CLI (0.61.0) with `sessionwatch hooks install gemini`: a Gemini manager
    /// watching a Gemini worker; a prompt into the worker (print mode, and typed into its TUI through tmux)
    /// is one human turn (also after the file monitor ticks), a `sessions_send` text is none; the manager's
    /// next model request holds the notice once, a change during its tool call comes back in that tool's
    /// function response (AfterTool); the gateway down changes nothing (`tests/agents/gemini-hooks-e2e.sh`).
    gemini_hooks_with_the_real_gemini_cli: "gemini-hooks-e2e.sh", &["all"], 11;

    /// Issue 38: the REAL OpenCode (1.18.33) with `sessionwatch hooks install opencode`: an OpenCode manager
    /// watching an OpenCode worker; a prompt typed into the worker's TUI is one human turn at once (also
    /// after the file monitor ticks), a `sessions_send` text typed there is none; the manager's next model
    /// request holds the notice once, a change during its tool call comes back in that tool's output; the
    /// gateway down changes nothing (`tests/agents/opencode-plugin-e2e.sh`).
    opencode_plugin_with_the_real_opencode: "opencode-plugin-e2e.sh", &["all"], 14;

    /// Issue 38: the REAL Pi (0.73.1) with the extension `sessionwatch hooks install pi` writes: a Pi manager
    /// watching a Pi worker; a prompt typed into the worker's TUI is one human turn at once (also after the
    /// file monitor ticks), a `sessions_send` text is none; the manager's next model request holds the notice
    /// once, a change during its tool call arrives in that tool's result, an idle manager TUI gets it queued
    /// for its next turn; the gateway down changes nothing for Pi (`tests/agents/pi-extension-e2e.sh`).
    pi_extension_with_the_real_pi: "pi-extension-e2e.sh", &["all"], 18;

    /// Issue 35: A (Claude Code) and B (Codex) in one git repository; B's model edits a file with
    /// `apply_patch`, A's next model request holds exactly one notice about the workspace session whose
    /// reconcile names the file and B; and the reverse with Claude's `Write`, A's own turn holding no new
    /// notice (`tests/agents/workspace-e2e.sh`).
    workspace_edits_reach_the_other_real_cli_once: "workspace-e2e.sh", &["all"], 8;
}
