//! `sessionwatch demo`: the whole story through an embedded gateway over HTTP, so a newcomer sees the
//! real wire shapes.

use super::client::ToolArgs;
use anyhow::{Context, ensure};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sessionwatch_server::embedded::{Embedded, GatewayHttp};
use sessionwatch_server::host_protocol::{
    ActorJson, DrainedJson, InboundRequest, LoginLinkJson, NoFields, ToolCall,
};
use sessionwatch_server::wire::SpawnJson;
use std::process::ExitCode;

struct Http(GatewayHttp);

impl Http {
    async fn post(&self, path: &str, body: &impl Serialize) -> anyhow::Result<Value> {
        let resp = self.0.post(path, body).await?;
        let status = resp.status();
        let v: Value = resp.json().await?;
        ensure!(status.is_success(), "{path} answered {status}: {v}");
        Ok(v)
    }

    async fn tool(&self, caller: &str, tool: &str, args: ToolArgs) -> anyhow::Result<Value> {
        let call = ToolCall { tool: tool.to_string(), args, session_key: Some(caller.to_string()) };
        let v = self.post("/tools/invoke", &call).await?;
        Ok(v["result"]["details"].clone())
    }

    /// `key` begins its turn, which must hold exactly one notice; answers its text.
    async fn one_notice(&self, key: &str, show: &impl Fn(&str, &Value)) -> anyhow::Result<String> {
        let turn = self.post(&format!("/v1/sessions/{}/turns", enc(key)), &NoFields {}).await?;
        show("turn", &turn);
        let drained: DrainedJson = read(&turn, "turn")?;
        let notices = drained.system_events.len();
        ensure!(notices == 1, "expected exactly one notice, got {notices}");
        Ok(drained.system_events.into_iter().next().map(|e| e.text).unwrap_or_default())
    }

    /// A human's turn in `key`'s chat on Telegram.
    async fn inbound(&self, key: &str, text: String, human: Option<&str>) -> anyhow::Result<Value> {
        let actor = ActorJson { kind: "human".into(), id: human.map(str::to_string), label: None };
        let body = InboundRequest {
            text,
            channel: Some("telegram".into()),
            actor: Some(actor),
            ..Default::default()
        };
        self.post(&format!("/v1/sessions/{}/inbound", enc(key)), &body).await
    }
}

/// An answer read as what it is.
fn read<T: DeserializeOwned>(answer: &Value, what: &str) -> anyhow::Result<T> {
    T::deserialize(answer)
        .with_context(|| format!("the gateway's {what} answer is not as expected: {answer}"))
}

/// One step of `demo --json`.
#[derive(Serialize)]
struct Step<'a, T> {
    answer: T,
    step: &'a str,
}

/// The last step of `demo --json --open`: where to look.
#[derive(Serialize)]
struct DashboardLinks {
    session: String,
    url: String,
}

fn enc(key: &str) -> String {
    key.replace(':', "%3A")
}

pub async fn run(json_only: bool, open: bool) -> anyhow::Result<ExitCode> {
    let gateway = Embedded::start().await?;
    let base = gateway.base.clone();
    let http = Http(gateway.http());
    let say = |text: &str| {
        if !json_only {
            println!("{text}");
        }
    };
    let show = |label: &str, v: &Value| {
        if json_only {
            println!("{}", serde_json::to_string(&Step { answer: v, step: label }).unwrap_or_default());
        } else {
            println!("{}\n", serde_json::to_string_pretty(v).unwrap_or_default());
        }
    };
    say(&format!("sessionwatch demo: an embedded gateway on {base}, a temporary database.\n"));
    let child = tell(&http, &say, &show).await?;
    if !open {
        say("Run `sessionwatch demo --open` to look at this story in the dashboard.");
        gateway.stop().await?;
        return Ok(ExitCode::SUCCESS);
    }
    let link: LoginLinkJson = read(&http.post("/v1/ui/login-links", &NoFields {}).await?, "login link")?;
    let path = link.path;
    let chat = sessionwatch_server::dashboard::chat_path(&child);
    if json_only {
        let links = DashboardLinks { session: format!("{base}{chat}"), url: format!("{base}{path}") };
        println!("{}", serde_json::to_string(&Step { answer: links, step: "dashboard" })?);
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

/// The story, step by step (`say` narrates, `show` prints each answer): a manager spawns a worker, a
/// human types into the worker twenty times, the manager's next turn holds one notice and it reconciles;
/// one more message, one more notice. Answers the worker's key.
async fn tell(http: &Http, say: &impl Fn(&str), show: &impl Fn(&str, &Value)) -> anyhow::Result<String> {
    let main = "agent:main:main";
    say("1. The manager session agent:main:main spawns a worker (tool sessions_spawn):");
    let task = Some("Summarise the incident report".to_string());
    let spawned = http
        .tool(main, "sessions_spawn", ToolArgs { task, label: Some("worker".into()), ..ToolArgs::default() })
        .await?;
    show("spawn", &spawned);
    let child = read::<SpawnJson>(&spawned, "sessions_spawn")?.child_session_key;

    say(
        "2. A human jumps straight into the worker and types twenty times (POST /v1/sessions/{key}/inbound):",
    );
    let mut last = Value::Null;
    for i in 1..=20 {
        last = http.inbound(&child, format!("human message {i}"), Some("alice")).await?;
    }
    say("   (the last answer)");
    show("inbound", &last);

    say(
        "3. The manager begins its next turn (POST /v1/sessions/{key}/turns): exactly one notice, not twenty:",
    );
    let text = http.one_notice(main, show).await?;
    say(&format!("   The manager sees, inside its turn:\n\n   {text}\n"));
    let since: u64 =
        text.rsplit("changesSince ").next().and_then(|s| s.trim_end_matches('.').parse().ok()).unwrap_or(0);

    say(&format!("4. It reconciles before acting (tool session_status, changesSince {since}, limit 5):"));
    let args = ToolArgs {
        session_key: Some(child.clone()),
        changes_since: Some(since),
        limit: Some(5),
        ..ToolArgs::default()
    };
    let status = http.tool(main, "session_status", args).await?;
    let mut shown = status.clone();
    if let Some(o) = shown.as_object_mut() {
        o.remove("statusText");
    }
    show("status", &shown);

    say("5. The human writes once more; the manager's next turn holds exactly one notice again:");
    http.inbound(&child, "one more thing".into(), None).await?;
    let text = http.one_notice(main, show).await?;
    say(&format!("   The manager sees, inside its turn:\n\n   {text}\n"));
    say("Done: one coalesced notice per burst, an exact delta on demand.");
    Ok(child)
}
