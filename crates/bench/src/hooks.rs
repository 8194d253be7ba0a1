//! `sessionwatch bench hooks`: the wall time of one `sessionwatch hook UserPromptSubmit` process against a
//! running gateway, as a Claude Code or Codex turn pays it, with and without a pending notice; beside it,
//! the start-up of the same binary doing nothing (`sessionwatch --version`), measured in the same run.

use crate::{Figure, percentile};
use serde_json::{Value, json};
use sessionwatch_core::AgentSessionKey;
use sessionwatch_server::embedded::Embedded;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MANAGER: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const WORKER: &str = "bbbbbbbb-0000-4000-8000-000000000002";

/// Runs `sessionwatch hook …` processes against one gateway, for Claude sessions whose transcripts would
/// lie under `dir`.
struct Hooks {
    exe: PathBuf,
    base: String,
    token: String,
    dir: tempfile::TempDir,
}

impl Hooks {
    /// A hook's stdin: `event` of `session`, with `extra` fields.
    fn input(&self, session: &str, event: &str, extra: Value) -> String {
        let transcript = self.dir.path().join(format!(".claude/projects/p/{session}.jsonl"));
        let mut v = json!({ "session_id": session, "transcript_path": transcript.to_string_lossy(), "hook_event_name": event });
        v.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        v.to_string()
    }

    /// One hook process for `event`, fed `stdin`: its wall time (spawn to exit) and its stdout.
    async fn run(&self, event: &str, stdin: String) -> anyhow::Result<(Duration, String)> {
        let (exe, base, token, event) =
            (self.exe.clone(), self.base.clone(), self.token.clone(), event.to_string());
        tokio::task::spawn_blocking(move || {
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
        })
        .await?
    }

    /// A prompt typed into `session`, its id `id`.
    async fn prompt(&self, session: &str, id: String, text: String) -> anyhow::Result<(Duration, String)> {
        let stdin = self.input(session, "UserPromptSubmit", json!({ "prompt_id": id, "prompt": text }));
        self.run("UserPromptSubmit", stdin).await
    }
}

/// `exe`: the `sessionwatch` binary to run.
pub async fn run(exe: &Path, quick: bool) -> anyhow::Result<Vec<Figure>> {
    let runs = if quick { 20 } else { 200 };
    let gw = Embedded::start().await?;
    let hooks = Hooks {
        exe: exe.to_path_buf(),
        base: gw.base.clone(),
        token: gw.token.clone(),
        dir: tempfile::tempdir()?,
    };
    for s in [MANAGER, WORKER] {
        hooks.run("SessionStart", hooks.input(s, "SessionStart", json!({ "source": "startup" }))).await?;
    }
    let watch = json!({ "tool": "sessions_send", "sessionKey": AgentSessionKey::build_adopted("main", "claude", MANAGER),
        "args": { "sessionKey": AgentSessionKey::build_adopted("main", "claude", WORKER), "message": "work", "watch": true } });
    let r = gw.http().post("/tools/invoke", &watch).await?;
    anyhow::ensure!(r.status().is_success(), "watch: {}", r.status());

    let (mut quiet, mut pending, mut start) = (vec![], vec![], vec![]);
    for i in 0..runs {
        let t = Instant::now();
        let out = Command::new(exe).arg("--version").output()?;
        anyhow::ensure!(out.status.success(), "--version failed");
        start.push(t.elapsed());

        let (took, out) = hooks.prompt(MANAGER, format!("q{i}"), format!("quiet {i}")).await?;
        anyhow::ensure!(out.is_empty(), "no notice was pending: {out}");
        quiet.push(took);

        // A human types into the worker: the manager's next prompt carries one notice.
        hooks.prompt(WORKER, format!("w{i}"), format!("typed {i}")).await?;
        let (took, out) = hooks.prompt(MANAGER, format!("p{i}"), format!("next {i}")).await?;
        anyhow::ensure!(out.contains("additionalContext"), "the notice was not delivered: {out}");
        pending.push(took);
    }
    gw.stop().await?;
    Ok(figures(runs, quiet, pending, start))
}

/// The figures of `runs` rounds: hook processes without and with a pending notice, bare starts.
fn figures(
    runs: usize,
    mut quiet: Vec<Duration>,
    mut pending: Vec<Duration>,
    mut start: Vec<Duration>,
) -> Vec<Figure> {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for v in [&mut quiet, &mut pending, &mut start] {
        v.sort();
    }
    let (p50_quiet, p50_start) = (ms(percentile(&quiet, 0.5)), ms(percentile(&start, 0.5)));
    vec![
        Figure::new("hook_runs", runs as f64, "runs"),
        Figure::new("hook_user_prompt_submit_p50_ms", p50_quiet, "ms"),
        Figure::new("hook_user_prompt_submit_p99_ms", ms(percentile(&quiet, 0.99)), "ms"),
        Figure::new("hook_user_prompt_submit_notice_p50_ms", ms(percentile(&pending, 0.5)), "ms"),
        Figure::new("hook_user_prompt_submit_notice_p99_ms", ms(percentile(&pending, 0.99)), "ms"),
        Figure::new("process_start_p50_ms", p50_start, "ms"),
        Figure::new("hook_vs_process_start_p50", p50_quiet / p50_start.max(1e-9), "x"),
    ]
}
