//! `sessionwatch demo`: the whole story through an embedded gateway over HTTP, so a newcomer sees the
//! real wire shapes.

use anyhow::{Context, ensure};
use serde_json::{Value, json};
use std::process::ExitCode;

struct Http {
    client: reqwest::Client,
    base: String,
    token: String,
}

impl Http {
    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?;
        let status = resp.status();
        let v: Value = resp.json().await?;
        ensure!(status.is_success(), "{path} answered {status}: {v}");
        Ok(v)
    }

    async fn tool(&self, caller: &str, tool: &str, args: Value) -> anyhow::Result<Value> {
        let v =
            self.post("/tools/invoke", json!({ "tool": tool, "args": args, "sessionKey": caller })).await?;
        Ok(v["result"]["details"].clone())
    }
}

fn enc(key: &str) -> String {
    key.replace(':', "%3A")
}

pub async fn run(json_only: bool, open: bool) -> anyhow::Result<ExitCode> {
    let gateway = sessionwatch_server::embedded::Embedded::start().await?;
    let base = gateway.base.clone();
    let http = Http { client: reqwest::Client::new(), base: base.clone(), token: gateway.token.clone() };
    let say = |text: &str| {
        if !json_only {
            println!("{text}");
        }
    };
    let show = |label: &str, v: &Value| {
        if json_only {
            println!("{}", json!({ "step": label, "answer": v }));
        } else {
            println!("{}\n", serde_json::to_string_pretty(v).unwrap_or_default());
        }
    };

    let main = "agent:main:main";
    say(&format!("sessionwatch demo: an embedded gateway on {base}, a temporary database.\n"));
    say("1. The manager session agent:main:main spawns a worker (tool sessions_spawn):");
    let spawned = http
        .tool(main, "sessions_spawn", json!({ "task": "Summarise the incident report", "label": "worker" }))
        .await?;
    show("spawn", &spawned);
    let child = spawned["childSessionKey"].as_str().context("no childSessionKey")?.to_string();

    say(
        "2. A human jumps straight into the worker and types twenty times (POST /v1/sessions/{key}/inbound):",
    );
    let mut last = Value::Null;
    for i in 1..=20 {
        last = http
            .post(
                &format!("/v1/sessions/{}/inbound", enc(&child)),
                json!({ "text": format!("human message {i}"), "channel": "telegram", "actor": { "type": "human", "id": "alice" } }),
            )
            .await?;
    }
    say("   (the last answer)");
    show("inbound", &last);

    say(
        "3. The manager begins its next turn (POST /v1/sessions/{key}/turns): exactly one notice, not twenty:",
    );
    let turn = http.post(&format!("/v1/sessions/{}/turns", enc(main)), json!({})).await?;
    show("turn", &turn);
    let notices = turn["systemEvents"].as_array().map_or(0, Vec::len);
    ensure!(notices == 1, "expected exactly one notice, got {notices}");
    let text = turn["systemEvents"][0]["text"].as_str().unwrap_or_default().to_string();
    say(&format!("   The manager sees, inside its turn:\n\n   {text}\n"));
    let since: u64 =
        text.rsplit("changesSince ").next().and_then(|s| s.trim_end_matches('.').parse().ok()).unwrap_or(0);

    say(&format!("4. It reconciles before acting (tool session_status, changesSince {since}, limit 5):"));
    let status = http
        .tool(main, "session_status", json!({ "sessionKey": child, "changesSince": since, "limit": 5 }))
        .await?;
    let mut shown = status.clone();
    if let Some(o) = shown.as_object_mut() {
        o.remove("statusText");
    }
    show("status", &shown);

    say("5. The human writes once more; the manager's next turn holds exactly one notice again:");
    http.post(
        &format!("/v1/sessions/{}/inbound", enc(&child)),
        json!({ "text": "one more thing", "channel": "telegram", "actor": { "type": "human" } }),
    )
    .await?;
    let turn = http.post(&format!("/v1/sessions/{}/turns", enc(main)), json!({})).await?;
    show("turn", &turn);
    let notices = turn["systemEvents"].as_array().map_or(0, Vec::len);
    ensure!(notices == 1, "expected exactly one notice, got {notices}");
    let text = turn["systemEvents"][0]["text"].as_str().unwrap_or_default();
    say(&format!("   The manager sees, inside its turn:\n\n   {text}\n"));
    say("Done: one coalesced notice per burst, an exact delta on demand.");

    if !open {
        say("Run `sessionwatch demo --open` to look at this story in the dashboard.");
        gateway.stop().await?;
        return Ok(ExitCode::SUCCESS);
    }
    let link = http.post("/v1/ui/login-links", json!({})).await?;
    let path = link["path"].as_str().context("no login link")?;
    let chat = sessionwatch_server::dashboard::chat_path(&child);
    if json_only {
        println!(
            "{}",
            json!({ "step": "dashboard", "answer": { "url": format!("{base}{path}"), "session": format!("{base}{chat}") } })
        );
    } else {
        println!(
            "\nThe demo gateway keeps running. Open its dashboard (a one-time login link):\n\n   {base}{path}\n"
        );
        println!("The worker's page, where the notice links: {base}{chat}");
        println!("Ctrl-C ends the demo (its database is temporary).");
    }
    tokio::signal::ctrl_c().await?;
    gateway.stop().await?;
    Ok(ExitCode::SUCCESS)
}
