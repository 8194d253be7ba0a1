//! `sessionwatch bench hooks`: the wall time of one `sessionwatch hook UserPromptSubmit` process against a
//! running gateway, as a Claude Code or Codex turn pays it, with and without a pending notice; beside it,
//! the start-up of the same binary doing nothing (`sessionwatch --version`), measured in the same run.

use crate::{Figure, percentile};
use serde_json::{Value, json};
use sessionwatch_core::AgentSessionKey;
use sessionwatch_server::embedded::Embedded;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MANAGER: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const WORKER: &str = "bbbbbbbb-0000-4000-8000-000000000002";

/// `exe`: the `sessionwatch` binary to run.
pub async fn run(exe: &Path, quick: bool) -> anyhow::Result<Vec<Figure>> {
    let runs = if quick { 20 } else { 200 };
    let gw = Embedded::start().await?;
    let exe = exe.to_path_buf();
    let dir = tempfile::tempdir()?;
    let transcript =
        |s: &str| dir.path().join(format!(".claude/projects/p/{s}.jsonl")).to_string_lossy().into_owned();
    let input = |session: &str, event: &str, extra: Value| {
        let mut v = json!({ "session_id": session, "transcript_path": transcript(session), "hook_event_name": event });
        v.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        v.to_string()
    };
    let hook = |event: &str, stdin: String| {
        let exe = exe.clone();
        let (base, token, event) = (gw.base.clone(), gw.token.clone(), event.to_string());
        move || -> anyhow::Result<(Duration, String)> {
            let started = Instant::now();
            let mut child = Command::new(&exe)
                .args(["hook", &event, "--agent", "claude", "--url", &base, "--token", &token])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            child.stdin.take().expect("piped").write_all(stdin.as_bytes())?;
            let out = child.wait_with_output()?;
            let took = started.elapsed();
            anyhow::ensure!(
                out.stderr.is_empty(),
                "the hook failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            Ok((took, String::from_utf8_lossy(&out.stdout).into_owned()))
        }
    };
    let blocking = |f: Box<dyn FnOnce() -> anyhow::Result<(Duration, String)> + Send>| async move {
        tokio::task::spawn_blocking(f).await?
    };
    for s in [MANAGER, WORKER] {
        blocking(Box::new(hook("SessionStart", input(s, "SessionStart", json!({ "source": "startup" })))))
            .await?;
    }
    let watch = json!({ "tool": "sessions_send", "sessionKey": AgentSessionKey::build_adopted("main", "claude", MANAGER),
        "args": { "sessionKey": AgentSessionKey::build_adopted("main", "claude", WORKER), "message": "work", "watch": true } });
    let r = gw.http().post("/tools/invoke", &watch).await?;
    anyhow::ensure!(r.status().is_success(), "watch: {}", r.status());

    let (mut quiet, mut pending, mut start) = (vec![], vec![], vec![]);
    for i in 0..runs {
        let t = Instant::now();
        let out = Command::new(&exe).arg("--version").output()?;
        anyhow::ensure!(out.status.success(), "--version failed");
        start.push(t.elapsed());

        let stdin = input(
            MANAGER,
            "UserPromptSubmit",
            json!({ "prompt_id": format!("q{i}"), "prompt": format!("quiet {i}") }),
        );
        let (took, out) = blocking(Box::new(hook("UserPromptSubmit", stdin))).await?;
        anyhow::ensure!(out.is_empty(), "no notice was pending: {out}");
        quiet.push(took);

        // A human types into the worker: the manager's next prompt carries one notice.
        let typed = input(
            WORKER,
            "UserPromptSubmit",
            json!({ "prompt_id": format!("w{i}"), "prompt": format!("typed {i}") }),
        );
        blocking(Box::new(hook("UserPromptSubmit", typed))).await?;
        let stdin = input(
            MANAGER,
            "UserPromptSubmit",
            json!({ "prompt_id": format!("p{i}"), "prompt": format!("next {i}") }),
        );
        let (took, out) = blocking(Box::new(hook("UserPromptSubmit", stdin))).await?;
        anyhow::ensure!(out.contains("additionalContext"), "the notice was not delivered: {out}");
        pending.push(took);
    }
    gw.stop().await?;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for v in [&mut quiet, &mut pending, &mut start] {
        v.sort();
    }
    let p50_quiet = ms(percentile(&quiet, 0.5));
    let p50_start = ms(percentile(&start, 0.5));
    Ok(vec![
        Figure { name: "hook_runs".into(), value: runs as f64, unit: "runs" },
        Figure { name: "hook_user_prompt_submit_p50_ms".into(), value: p50_quiet, unit: "ms" },
        Figure {
            name: "hook_user_prompt_submit_p99_ms".into(),
            value: ms(percentile(&quiet, 0.99)),
            unit: "ms",
        },
        Figure {
            name: "hook_user_prompt_submit_notice_p50_ms".into(),
            value: ms(percentile(&pending, 0.5)),
            unit: "ms",
        },
        Figure {
            name: "hook_user_prompt_submit_notice_p99_ms".into(),
            value: ms(percentile(&pending, 0.99)),
            unit: "ms",
        },
        Figure { name: "process_start_p50_ms".into(), value: p50_start, unit: "ms" },
        Figure {
            name: "hook_vs_process_start_p50".into(),
            value: p50_quiet / p50_start.max(1e-9),
            unit: "x",
        },
    ])
}
