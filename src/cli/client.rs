//! Client subcommands: every tool and host call against a running gateway.

use super::names;
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sessionwatch_server::host_protocol::{
    ActorJson, AddMessageRequest, CompactionRequest, CreateSessionRequest, InboundRequest, IssueNodeRequest,
    LoginLinkJson, NodeTokenJson, RunResultRequest, SessionListingJson, SetGoalRequest, ToolCall, WatchJson,
};
use std::process::ExitCode;

#[derive(Args, Debug, Clone)]
pub struct Conn {
    /// Gateway URL [default: $SESSIONWATCH_URL, else the running gateway's runtime file in the data
    /// dir, else the config's listen address, else http://127.0.0.1:7420].
    #[arg(long, global = true)]
    pub url: Option<String>,
    /// Bearer token (default: read from the data dir).
    #[arg(long, global = true, env = "SESSIONWATCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Data dir holding the token.
    #[arg(long, global = true)]
    pub data_dir: Option<std::path::PathBuf>,
    /// Print the raw JSON answer.
    #[arg(long, global = true)]
    pub json: bool,
    /// The calling session for tools (default: main), or the watcher of `watch`: a key, a unique
    /// session-id prefix or a label.
    #[arg(long = "as", global = true)]
    pub caller: Option<String>,
}

/// Wherever a command asks for a session (`KEY`, `--as`), a unique session-id prefix or a label does as
/// well (resolved through `GET /v1/sessions`, see `names`).
#[derive(Subcommand, Debug)]
pub enum ClientCommand {
    /// Every session the gateway knows: source CLI, id, state (running, waiting for its user, idle),
    /// state version, working directory, title and key (a table; --json for scripts).
    Sessions {
        #[command(flatten)]
        conn: Conn,
    },
    /// Make the session given with --as watch TARGET (an explicit watch, as `sessions_send` with
    /// `watch: true` registers): it is told, once, when another actor changes TARGET.
    Watch {
        target: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Tool session_status: a session's state version, and the changes since N.
    Status {
        key: Option<String>,
        #[arg(long)]
        since: Option<u64>,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Tool sessions_list.
    List {
        #[arg(long, value_delimiter = ',')]
        kinds: Vec<String>,
        #[arg(long)]
        limit: Option<u32>,
        #[arg(long)]
        active_minutes: Option<u64>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Tool sessions_history.
    History {
        key: String,
        #[arg(long)]
        limit: Option<u32>,
        #[arg(long)]
        include_tools: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Tool sessions_send (fire and forget unless --timeout).
    Send {
        key: String,
        message: String,
        #[arg(long)]
        timeout: Option<u64>,
        /// Watch the session that receives the message.
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Tool sessions_spawn.
    Spawn {
        task: String,
        #[arg(long)]
        label: Option<String>,
        #[arg(long)]
        agent: Option<String>,
        #[arg(long)]
        run_timeout: Option<u64>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Tool sessions_unwatch: the session given with --as stops watching KEY.
    Unwatch {
        key: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Any tool with raw JSON arguments.
    Tool {
        name: String,
        #[arg(default_value = "{}")]
        args: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Host: create a session.
    Create {
        key: String,
        #[arg(long)]
        agent: Option<String>,
        #[arg(long)]
        chat_type: Option<String>,
        #[arg(long)]
        channel: Option<String>,
        #[arg(long)]
        label: Option<String>,
        #[arg(long)]
        created_via: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Host: an inbound turn (a human's by default).
    Inbound {
        key: String,
        text: String,
        #[arg(long, default_value = "cli")]
        channel: String,
        #[arg(long, default_value = "human")]
        actor: String,
        #[arg(long)]
        actor_id: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Host: begin a turn (drains and acknowledges notices, takes the inbox).
    Turn {
        key: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Host: report a transcript message.
    Message {
        key: String,
        role: String,
        text: String,
        #[arg(long)]
        run_id: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Host: set the goal (or clear it with --clear).
    Goal {
        key: String,
        #[arg(long)]
        objective: Option<String>,
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        clear: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Host: record a compaction.
    Compact {
        key: String,
        operation_id: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Host: reset a session (new session id, its watches cleared).
    Reset {
        key: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Host: delete a session (history, head, cursors).
    Delete {
        key: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Host: the terminal outcome of a run.
    RunResult {
        run_id: String,
        /// ok, error, timeout or cancelled
        status: String,
        #[arg(long)]
        reply: Option<String>,
        #[arg(long)]
        session_id: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Host: follow the live stream (wake, notice, message).
    Stream {
        key: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Gateway health.
    Health {
        #[command(flatten)]
        conn: Conn,
    },
    /// The dashboard's URL on the running gateway, with a one-time login link (exchanged for a cookie).
    Ui {
        #[command(flatten)]
        conn: Conn,
    },
}

pub(super) struct Client {
    http: reqwest::Client,
    conn: Conn,
    /// The gateway's base URL, resolved once (see `discovery`).
    base: String,
    token: Option<String>,
    /// The gateway's sessions, read once when a name is to be resolved.
    listing: tokio::sync::OnceCell<SessionListingJson>,
}

fn enc(key: &str) -> String {
    percent_encode(key)
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Client {
    pub(super) fn new(conn: Conn) -> anyhow::Result<Client> {
        let found = super::resolve_gateway(super::client_context(conn.url.clone(), conn.data_dir.clone()));
        let token = match &conn.token {
            Some(t) => Some(t.clone()),
            None => sessionwatch_server::auth::read_token(&found.data_dir)
                .context("cannot read the gateway token")?,
        };
        Ok(Client {
            http: reqwest::Client::new(),
            conn,
            base: found.url.url,
            token,
            listing: tokio::sync::OnceCell::new(),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A call without a body; answers the status and the answer (text when it is not JSON).
    pub(super) async fn call(&self, method: reqwest::Method, path: &str) -> anyhow::Result<(u16, Value)> {
        self.send(self.request(method, path)).await
    }

    /// A call with a JSON body (a `host_protocol` request).
    pub(super) async fn call_with(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &impl Serialize,
    ) -> anyhow::Result<(u16, Value)> {
        self.send(self.request(method, path).json(body)).await
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.request(method, self.url(path));
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> anyhow::Result<(u16, Value)> {
        let resp = req.send().await.with_context(|| format!("cannot reach the gateway at {}", self.base))?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, v))
    }

    /// `GET /v1/sessions`, once per command.
    async fn listing(&self) -> anyhow::Result<&SessionListingJson> {
        self.listing
            .get_or_try_init(|| async {
                let (status, answer) = self.call(reqwest::Method::GET, "/v1/sessions").await?;
                if status != 200 {
                    bail!("cannot list the gateway's sessions: it answered {status}: {answer}");
                }
                serde_json::from_value(answer).context("the gateway's session listing is not as expected")
            })
            .await
    }

    /// The key a session name stands for ([`names::resolve_name`]).
    async fn key(&self, name: &str) -> anyhow::Result<String> {
        Ok(names::resolve_name(name, &self.listing().await?.sessions)?)
    }

    async fn opt_key(&self, name: Option<String>) -> anyhow::Result<Option<String>> {
        Ok(match name {
            Some(n) => Some(self.key(&n).await?),
            None => None,
        })
    }

    async fn tool(&self, name: &str, args: impl Serialize) -> anyhow::Result<(u16, Value)> {
        let call = ToolCall { tool: name.to_string(), args, session_key: self.conn.caller.clone() };
        self.call_with(reqwest::Method::POST, "/tools/invoke", &call).await
    }
}

/// A struct whose fields are all `Option`s that serde leaves out when `None` (each field gets
/// `skip_serializing_if`).
macro_rules! optional_fields {
    ($(#[$m:meta])* $vis:vis struct $name:ident {
        $($(#[$fm:meta])* $fvis:vis $field:ident: Option<$ty:ty>,)*
    }) => {
        $(#[$m])*
        $vis struct $name {
            $($(#[$fm])* #[serde(skip_serializing_if = "Option::is_none")] $fvis $field: Option<$ty>,)*
        }
    };
}

optional_fields! {
    /// The tools' arguments as the CLI gives them (`gateway/tool_spec.rs` defines them all); an absent
    /// option is left out, so the tool applies its default.
    #[derive(Serialize, Default)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct ToolArgs {
        pub(super) session_key: Option<String>,
        pub(super) changes_since: Option<u64>,
        pub(super) limit: Option<u32>,
        pub(super) kinds: Option<Vec<String>>,
        pub(super) active_minutes: Option<u64>,
        pub(super) include_tools: Option<bool>,
        pub(super) message: Option<String>,
        pub(super) timeout_seconds: Option<u64>,
        pub(super) watch: Option<bool>,
        pub(super) task: Option<String>,
        pub(super) label: Option<String>,
        pub(super) agent_id: Option<String>,
        pub(super) run_timeout_seconds: Option<u64>,
    }
}

impl ClientCommand {
    fn conn(&self) -> &Conn {
        use ClientCommand::*;
        match self {
            Sessions { conn }
            | Watch { conn, .. }
            | Status { conn, .. }
            | List { conn, .. }
            | History { conn, .. }
            | Send { conn, .. }
            | Spawn { conn, .. }
            | Unwatch { conn, .. }
            | Tool { conn, .. }
            | Create { conn, .. }
            | Inbound { conn, .. }
            | Turn { conn, .. }
            | Message { conn, .. }
            | Goal { conn, .. }
            | Compact { conn, .. }
            | Reset { conn, .. }
            | Delete { conn, .. }
            | RunResult { conn, .. }
            | Stream { conn, .. }
            | Health { conn, .. }
            | Ui { conn, .. } => conn,
        }
    }
}

pub async fn run(cmd: ClientCommand) -> anyhow::Result<ExitCode> {
    use reqwest::Method;
    let mut c = Client::new(cmd.conn().clone())?;
    let caller = c.opt_key(c.conn.caller.clone()).await?;
    c.conn.caller = caller;
    let (status, answer) = match cmd {
        ClientCommand::Sessions { .. } => return sessions(&c).await,
        ClientCommand::Watch { target, .. } => return watch(&c, &target).await,
        ClientCommand::Status { key, since, limit, .. } => {
            let session_key = c.opt_key(key).await?;
            c.tool(
                "session_status",
                ToolArgs { session_key, changes_since: since, limit, ..ToolArgs::default() },
            )
            .await?
        }
        ClientCommand::List { kinds, limit, active_minutes, .. } => {
            let kinds = (!kinds.is_empty()).then_some(kinds);
            c.tool("sessions_list", ToolArgs { kinds, limit, active_minutes, ..ToolArgs::default() }).await?
        }
        ClientCommand::History { key, limit, include_tools, .. } => {
            let session_key = Some(c.key(&key).await?);
            let include_tools = Some(include_tools);
            c.tool("sessions_history", ToolArgs { session_key, limit, include_tools, ..ToolArgs::default() })
                .await?
        }
        ClientCommand::Send { key, message, timeout, watch, .. } => {
            let args = ToolArgs {
                session_key: Some(c.key(&key).await?),
                message: Some(message),
                timeout_seconds: timeout,
                watch: watch.then_some(true),
                ..ToolArgs::default()
            };
            c.tool("sessions_send", args).await?
        }
        ClientCommand::Spawn { task, label, agent, run_timeout, .. } => {
            let args = ToolArgs {
                task: Some(task),
                label,
                agent_id: agent,
                run_timeout_seconds: run_timeout,
                ..ToolArgs::default()
            };
            c.tool("sessions_spawn", args).await?
        }
        ClientCommand::Unwatch { key, .. } => {
            let session_key = Some(c.key(&key).await?);
            c.tool("sessions_unwatch", ToolArgs { session_key, ..ToolArgs::default() }).await?
        }
        ClientCommand::Tool { name, args, .. } => {
            let args: Value = serde_json::from_str(&args).context("ARGS must be a JSON object")?;
            c.tool(&name, args).await?
        }
        ClientCommand::Create { key, agent, chat_type, channel, label, created_via, .. } => {
            let body = CreateSessionRequest {
                session_key: key,
                agent_id: agent,
                chat_type,
                channel,
                label,
                created_via,
                ..CreateSessionRequest::default()
            };
            c.call_with(Method::POST, "/v1/sessions", &body).await?
        }
        ClientCommand::Inbound { key, text, channel, actor, actor_id, .. } => {
            let key = c.key(&key).await?;
            let actor = ActorJson { kind: actor, id: actor_id, label: None };
            let body = InboundRequest {
                text,
                channel: Some(channel),
                actor: Some(actor),
                ..InboundRequest::default()
            };
            c.call_with(Method::POST, &format!("/v1/sessions/{}/inbound", enc(&key)), &body).await?
        }
        ClientCommand::Turn { key, .. } => {
            let key = c.key(&key).await?;
            c.call(Method::POST, &format!("/v1/sessions/{}/turns", enc(&key))).await?
        }
        ClientCommand::Message { key, role, text, run_id, .. } => {
            let key = c.key(&key).await?;
            let body = AddMessageRequest { role, text, run_id };
            c.call_with(Method::POST, &format!("/v1/sessions/{}/messages", enc(&key)), &body).await?
        }
        ClientCommand::Goal { key, objective, status, clear, .. } => {
            let key = c.key(&key).await?;
            let path = format!("/v1/sessions/{}/goal", enc(&key));
            if clear {
                c.call(Method::DELETE, &path).await?
            } else {
                let actor = Some(ActorJson { kind: "human".into(), ..ActorJson::default() });
                c.call_with(Method::PUT, &path, &SetGoalRequest { objective, status, actor }).await?
            }
        }
        ClientCommand::Compact { key, operation_id, .. } => {
            let key = c.key(&key).await?;
            let body = CompactionRequest { operation_id, run_id: None };
            c.call_with(Method::POST, &format!("/v1/sessions/{}/compactions", enc(&key)), &body).await?
        }
        ClientCommand::Reset { key, .. } => {
            let key = c.key(&key).await?;
            c.call(Method::POST, &format!("/v1/sessions/{}/reset", enc(&key))).await?
        }
        ClientCommand::Delete { key, .. } => {
            let key = c.key(&key).await?;
            c.call(Method::DELETE, &format!("/v1/sessions/{}", enc(&key))).await?
        }
        ClientCommand::RunResult { run_id, status, reply, session_id, .. } => {
            let body = RunResultRequest { status, reply, session_id };
            c.call_with(Method::POST, &format!("/v1/runs/{}/result", enc(&run_id)), &body).await?
        }
        ClientCommand::Health { .. } => c.call(Method::GET, "/healthz").await?,
        ClientCommand::Stream { key, .. } => return stream(&c, c.opt_key(key).await?).await,
        ClientCommand::Ui { .. } => return ui(&c).await,
    };
    print_answer(&answer, c.conn.json);
    Ok(if (200..300).contains(&status) { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

#[derive(Subcommand, Debug)]
pub enum NodesCommand {
    /// Issue a token for a new remote node (printed once: save it as the node's `node-token`).
    Add {
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// The nodes: last seen, sessions, monitor lag.
    List {
        #[command(flatten)]
        conn: Conn,
    },
    /// Revoke a node's token.
    Revoke {
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
}

pub async fn nodes(cmd: NodesCommand) -> anyhow::Result<ExitCode> {
    use reqwest::Method;
    let (conn, name) = match cmd {
        NodesCommand::Add { name, conn } => (conn, Some(name)),
        NodesCommand::List { conn } => (conn, None),
        NodesCommand::Revoke { name, conn } => {
            let raw = conn.json;
            let c = Client::new(conn)?;
            let (status, answer) = c.call(Method::DELETE, &format!("/v1/nodes/{}", enc(&name))).await?;
            print_answer(&answer, raw);
            return Ok(if (200..300).contains(&status) { ExitCode::SUCCESS } else { ExitCode::from(2) });
        }
    };
    let raw = conn.json;
    let c = Client::new(conn)?;
    let (status, answer) = match name {
        Some(name) => c.call_with(Method::POST, "/v1/nodes", &IssueNodeRequest { name }).await?,
        None => c.call(Method::GET, "/v1/nodes").await?,
    };
    if status == 200
        && let Ok(issued) = NodeTokenJson::deserialize(&answer)
    {
        if raw {
            println!("{answer}");
        } else {
            // The token alone on stdout, so it can be piped into the node's token file.
            println!("{}", issued.token);
            eprintln!("Save it on the node as its node-token (mode 0600); it is not shown again.");
        }
        return Ok(ExitCode::SUCCESS);
    }
    print_answer(&answer, raw);
    Ok(if (200..300).contains(&status) { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

/// `sessionwatch sessions`: the listing as a table, or as the gateway's JSON with --json.
async fn sessions(c: &Client) -> anyhow::Result<ExitCode> {
    let listing = c.listing().await?;
    if c.conn.json {
        println!("{}", serde_json::to_string_pretty(listing)?);
        return Ok(ExitCode::SUCCESS);
    }
    let home = std::env::var("HOME").ok();
    print!("{}", names::table(&listing.sessions, home.as_deref()));
    if listing.has_more {
        eprintln!("(more sessions exist than one listing answers)");
    }
    Ok(ExitCode::SUCCESS)
}

/// `sessionwatch watch TARGET --as WATCHER`: says what happened; a refusal exits 2.
async fn watch(c: &Client, target: &str) -> anyhow::Result<ExitCode> {
    let Some(watcher) = &c.conn.caller else {
        bail!("say which session watches with --as WATCHER (a key, a session-id prefix or a label)");
    };
    let target = c.key(target).await?;
    let path = format!("/v1/sessions/{}/watchers/{}", enc(&target), enc(watcher));
    let (status, answer) = c.call(reqwest::Method::PUT, &path).await?;
    if c.conn.json || status != 200 {
        print_answer(&answer, c.conn.json);
        return Ok(if status == 200 { ExitCode::SUCCESS } else { ExitCode::from(2) });
    }
    let w: WatchJson =
        serde_json::from_value(answer).context("the gateway's watch answer is not as expected")?;
    let (watcher, target) = (&w.watcher, &w.target);
    match (w.outcome.as_str(), w.from_state_version) {
        ("watching", Some(v)) => println!("{watcher} watches {target} from state version {v}"),
        ("already-watching", _) => println!("{watcher} was already watching {target}"),
        ("upgraded", _) => println!("{watcher} watches {target} (its ambient watch is now explicit)"),
        (other, _) => {
            let why = w.reason.as_deref().unwrap_or("no reason given");
            eprintln!("{watcher} cannot watch {target}: {other} ({why})");
            return Ok(ExitCode::from(2));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the dashboard's one-time login URL (the token itself never goes into a URL).
async fn ui(c: &Client) -> anyhow::Result<ExitCode> {
    let (status, answer) = c.call(reqwest::Method::POST, "/v1/ui/login-links").await?;
    let link = match LoginLinkJson::deserialize(&answer) {
        Ok(link) if status == 200 => link,
        _ => bail!("the gateway answered {status}: {answer}"),
    };
    let url = c.url(&link.path);
    if c.conn.json {
        /// `--json`: the link as a full URL.
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct UiLink<'a> {
            expires_in_seconds: u64,
            url: &'a str,
        }
        println!(
            "{}",
            serde_json::to_string(&UiLink { expires_in_seconds: link.expires_in_seconds, url: &url })?
        );
    } else {
        println!("{url}");
        eprintln!(
            "Open it within {} s: it logs this browser in once. Later, log in at {} with the token.",
            link.expires_in_seconds,
            c.url("/login")
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn stream(c: &Client, key: Option<String>) -> anyhow::Result<ExitCode> {
    let path = match &key {
        Some(k) => format!("/v1/stream?sessionKey={}", enc(k)),
        None => "/v1/stream".to_string(),
    };
    let mut req = c.http.get(c.url(&path));
    if let Some(t) = &c.token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.with_context(|| format!("cannot reach the gateway at {}", c.base))?;
    if !resp.status().is_success() {
        bail!("the gateway answered {}", resp.status());
    }
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        print!("{}", String::from_utf8_lossy(&chunk?));
    }
    Ok(ExitCode::SUCCESS)
}

/// Readable by default: tool results unwrapped, `statusText` shown as text, other fields as lines.
pub fn print_answer(v: &Value, raw: bool) {
    if raw {
        println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
        return;
    }
    if v.get("ok") == Some(&Value::Bool(false)) {
        let e = &v["error"];
        eprintln!("error ({}): {}", e["type"].as_str().unwrap_or("?"), e["message"].as_str().unwrap_or("?"));
        return;
    }
    // A tool answer: `result.details` (OpenClaw's envelope).
    let v = v.get("result").map(|r| r.get("details").unwrap_or(r)).unwrap_or(v);
    if let Some(text) = v.get("statusText").and_then(Value::as_str) {
        println!("{text}");
        return;
    }
    print_readable(v, 0);
}

fn print_readable(v: &Value, indent: usize) {
    let pad = "  ".repeat(indent);
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match x {
                    Value::Object(_) | Value::Array(_) if !is_empty(x) => {
                        println!("{pad}{k}:");
                        print_readable(x, indent + 1);
                    }
                    _ => println!("{pad}{k}: {}", scalar(x)),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Object(_) => {
                        println!("{pad}-");
                        print_readable(item, indent + 1);
                    }
                    _ => println!("{pad}- {}", scalar(item)),
                }
            }
        }
        other => println!("{pad}{}", scalar(other)),
    }
}

fn is_empty(v: &Value) -> bool {
    matches!(v, Value::Array(a) if a.is_empty()) || matches!(v, Value::Object(o) if o.is_empty())
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) if a.is_empty() => "(none)".into(),
        other => other.to_string(),
    }
}
