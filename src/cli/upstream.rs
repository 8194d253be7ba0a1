//! `sessionwatch catalog` (local discovery), `sessionwatch adopt` and `sessionwatch monitor-tick`
//! (through the running gateway).

use super::client::{Client, Conn, print_answer};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sessionwatch_server::host_protocol::{CatalogContinueRequest, CatalogJson};
use sessionwatch_upstream::Homes;
use std::io::IsTerminal;
use std::process::ExitCode;

/// A progress bar on stderr, hidden when stderr is not a terminal.
pub fn progress_bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    if std::io::stderr().is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::stderr());
    } else {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    if let Ok(style) = ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} ({elapsed})") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}

/// `sessionwatch catalog`: the native sessions on this machine (read-only; no gateway needed).
pub fn catalog(json_out: bool) -> anyhow::Result<ExitCode> {
    let homes = Homes::from_env();
    let pb = progress_bar(0, "discovering");
    let entries = sessionwatch_upstream::discover(&homes, &mut |done, total| {
        pb.set_length(total as u64);
        pb.set_position(done as u64);
    });
    pb.finish_and_clear();
    if json_out {
        let sessions = entries.iter().map(|e| sessionwatch_server::wire::catalog_entry(e, None)).collect();
        println!("{}", serde_json::to_string(&CatalogJson { sessions })?);
        return Ok(ExitCode::SUCCESS);
    }
    if entries.is_empty() {
        println!("no Claude Code, Codex, OpenCode or Pi sessions found under {}", homes.home.display());
        return Ok(ExitCode::SUCCESS);
    }
    for e in &entries {
        let title = e.title.as_deref().unwrap_or("");
        let title: String = title.chars().take(60).collect();
        println!(
            "{:<9} {:<40} {:<24} {}",
            e.catalog_id.as_str(),
            e.thread_id,
            format_ms(e.updated_at_ms),
            title
        );
    }
    println!("\n{} sessions; adopt one with: sessionwatch adopt CATALOG THREAD", entries.len());
    Ok(ExitCode::SUCCESS)
}

/// `sessionwatch catalog --all`: `GET /v1/catalog?all=true` on the running gateway (its machine's
/// sessions and those its nodes last reported).
pub async fn catalog_all(conn: Conn) -> anyhow::Result<ExitCode> {
    let json_out = conn.json;
    let c = Client::new(conn)?;
    let (status, answer) = c.call(reqwest::Method::GET, "/v1/catalog?all=true").await?;
    if status != 200 {
        anyhow::bail!("the gateway answered {status}: {answer}");
    }
    if json_out {
        println!("{answer}");
        return Ok(ExitCode::SUCCESS);
    }
    let sessions = answer["sessions"].as_array().cloned().unwrap_or_default();
    for s in &sessions {
        println!(
            "{:<12} {:<9} {:<40} {:<24} {}",
            s["node"].as_str().unwrap_or("(gateway)"),
            s["catalogId"].as_str().unwrap_or("?"),
            s["threadId"].as_str().unwrap_or("?"),
            format_ms(s["updatedAt"].as_i64().unwrap_or(0)),
            s["adopted"].as_str().map(|k| format!("adopted as {k}")).unwrap_or_default(),
        );
    }
    println!(
        "\n{} sessions; adopt one with: sessionwatch adopt CATALOG THREAD [--node NODE]",
        sessions.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `sessionwatch adopt CATALOG THREAD [--agent A]`: `POST /v1/catalog/continue`.
pub async fn adopt(
    catalog: String,
    thread: String,
    agent: Option<String>,
    node: Option<String>,
    conn: Conn,
) -> anyhow::Result<ExitCode> {
    let raw = conn.json;
    let c = Client::new(conn)?;
    let body = CatalogContinueRequest { catalog_id: catalog, thread_id: thread, agent_id: agent, node };
    let (status, answer) = c.call_with(reqwest::Method::POST, "/v1/catalog/continue", &body).await?;
    print_answer(&answer, raw);
    Ok(if (200..300).contains(&status) { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

/// `sessionwatch monitor-tick`: `POST /v1/monitor/tick`.
pub async fn monitor_tick(conn: Conn) -> anyhow::Result<ExitCode> {
    let raw = conn.json;
    let c = Client::new(conn)?;
    let (status, answer) = c.call(reqwest::Method::POST, "/v1/monitor/tick").await?;
    print_answer(&answer, raw);
    Ok(if (200..300).contains(&status) { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC` (`-` for none).
fn format_ms(ms: i64) -> String {
    if ms <= 0 {
        return "-".into();
    }
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| "-".into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_times() {
        assert_eq!(super::format_ms(0), "-");
        assert_eq!(super::format_ms(1_796_205_600_000), "2026-12-02 10:00:00 UTC");
    }
}
