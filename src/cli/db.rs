//! `sessionwatch db …`: the signal log, watches and notices directly on a database file.

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;
use serde_json::Value;
use sessionwatch_core::{
    Actor, AgentSessionKey, GoalChange, Limit, NewEvent, Provenance, RunOutcome, RunStatus, SystemClock,
};
use sessionwatch_core::{HumanTurnSource, RecordPolicy};
use sessionwatch_kernel::{Kernel, KernelConfig, RecordOutcome};
use sessionwatch_server::wire;
use sessionwatch_store::sqlite::GatewayLock;
use sessionwatch_store::{RetentionPolicy, SqliteOptions, SqliteStore};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct DbArgs {
    /// The database file (default: the data dir's sessionwatch.db).
    #[arg(long, global = true)]
    db: Option<PathBuf>,
    /// Print JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: DbCommand,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Kind {
    Human,
    Goal,
    Compacted,
    RunOk,
    RunFailed,
    Missing,
}

#[derive(Subcommand, Debug)]
enum DbCommand {
    /// Append an event to a session's log.
    Record {
        key: String,
        kind: Kind,
        /// Channel (human) or catalog id (missing).
        #[arg(long, default_value = "cli")]
        channel: String,
        /// The session that acted (an agent), for self-suppression.
        #[arg(long)]
        actor_id: Option<String>,
        /// The session's parent (its spawner), who watches it implicitly.
        #[arg(long)]
        parent: Option<String>,
        /// Dedupe key / operation id / run id, depending on the kind.
        #[arg(long)]
        id: Option<String>,
    },
    /// Watch TARGET as WATCHER from its current state version.
    Watch {
        watcher: String,
        target: String,
        #[arg(long)]
        ambient: bool,
    },
    /// Drop a watch.
    Unwatch { watcher: String, target: String },
    /// Drain a session's notices (pending ones are restored from the durable cursors) and acknowledge them.
    Drain { session: String },
    /// A session's state version and the changes since N.
    Status {
        key: String,
        #[arg(long, default_value_t = 0)]
        since: u64,
        #[arg(long, default_value_t = 200)]
        limit: u32,
    },
    /// Apply retention now.
    Prune {
        #[arg(long, default_value_t = 30)]
        days: u64,
        #[arg(long, default_value_t = 50_000)]
        max_rows: u64,
    },
}

pub async fn run(args: DbArgs) -> anyhow::Result<ExitCode> {
    super::init_tracing("warn");
    let path = args.db.clone().unwrap_or_else(|| super::default_data_dir().join("sessionwatch.db"));
    // Not echoed: a URL may carry a password.
    if path.to_str().is_some_and(sessionwatch_server::config::is_postgres_url) {
        anyhow::bail!(
            "`sessionwatch db` works on a SQLite file, and --db names a PostgreSQL URL: use the client \
             commands (`sessionwatch status …`) against a gateway serving it"
        );
    }
    // One writer per database: every command holds the lock, `status` too (opening the store starts a
    // kernel that sweeps and prunes, and the store's writer folds when idle). Beside a running gateway,
    // reading goes through it.
    let lock = GatewayLock::acquire(&path).map_err(|e| match e {
        sessionwatch_store::StoreError::Locked(held) => anyhow::anyhow!(
            "{held}\n(to read a session while that gateway runs, ask it: `sessionwatch status KEY`)"
        ),
        e => e.into(),
    })?;
    let store = SqliteStore::open_locked(lock, SqliteOptions::default())?;
    let mut config = KernelConfig { store_identity: "sessionwatch".into(), ..KernelConfig::default() };
    if let DbCommand::Prune { days, max_rows } = &args.command {
        config.retention =
            RetentionPolicy { max_age_ms: *days as i64 * sessionwatch_core::DAY_MS, max_rows: *max_rows };
    }
    let kernel = Kernel::start(store, Arc::new(SystemClock), config).await;
    // A maintenance command acts on the database as its start-up prune leaves it.
    kernel.background_prune_done().await;
    let out: Value = match args.command {
        DbCommand::Record { key, kind, channel, actor_id, parent, id } => {
            record(&kernel, &key, kind, &channel, actor_id, parent, id).await?
        }
        DbCommand::Watch { watcher, target, ambient } => {
            let provenance = if ambient { Provenance::AmbientGroup } else { Provenance::Explicit };
            let watched = kernel
                .register_watch(&watcher.to_ascii_lowercase(), &target.to_ascii_lowercase(), provenance)
                .await;
            wire::watch_outcome(&watched)
        }
        DbCommand::Unwatch { watcher, target } => {
            let unwatched = kernel.unwatch(&watcher.to_ascii_lowercase(), &target.to_ascii_lowercase()).await;
            value(UnwatchedJson { unwatched })
        }
        DbCommand::Drain { session } => {
            let session = AgentSessionKey::parse(&session).map_or(session, |k| k.as_str().to_string());
            let drained = kernel.drain(&session).await;
            value(DrainJson { system_events: drained.iter().map(wire::SystemEventJson::from).collect() })
        }
        DbCommand::Status { key, since, limit } => {
            let limit =
                Limit::new(limit as i64).map_err(|_| anyhow::anyhow!("--limit must be between 1 and 200"))?;
            let (key, agent) = match AgentSessionKey::parse(&key) {
                Some(k) => (k.as_str().to_string(), k.agent_id().to_string()),
                None => (key, "main".into()),
            };
            let page = kernel.changes_since(&key, &agent, since, limit).await?;
            let state_changes = wire::StateChangesJson::from(&page);
            value(StatusJson { session_key: key, state_version: page.head, state_changes })
        }
        DbCommand::Prune { .. } => {
            let r = kernel.prune_now().await?;
            value(PruneJson {
                events_by_age: r.events_by_age,
                events_by_cap: r.events_by_cap,
                cursors_expired: r.cursors_expired,
            })
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        super::client::print_answer(&out, false);
    }
    Ok(if out.get("failed") == Some(&Value::Bool(true)) { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

/// `db record`: an event of `kind` on `key` (an agent key, or a bare key of agent `main`), recorded as
/// the gateway would record it.
async fn record(
    kernel: &Kernel<SqliteStore>,
    key: &str,
    kind: Kind,
    channel: &str,
    actor_id: Option<String>,
    parent: Option<String>,
    id: Option<String>,
) -> anyhow::Result<Value> {
    let k = AgentSessionKey::parse(key);
    let (key, agent) = match &k {
        Some(k) => (k.as_str().to_string(), k.agent_id().to_string()),
        None => (key.to_string(), "main".to_string()),
    };
    let parent = parent.map(|p| AgentSessionKey::parse(&p).map_or(p, |k| k.as_str().to_string()));
    let actor = match actor_id {
        Some(a) => Actor::agent(a.to_ascii_lowercase()),
        None => Actor::human(None),
    };
    let outcome = match kind {
        Kind::Human => {
            let mut e = NewEvent::human_message(&key, &agent, channel, None);
            e.actor = actor;
            let policy = RecordPolicy::human_turn(HumanTurnSource::Gateway, parent.as_deref());
            kernel.record(e.with_dedupe_key(id), policy).await
        }
        Kind::Goal => {
            kernel
                .record(
                    NewEvent::goal_changed(&key, &agent, &GoalChange::Updated, actor),
                    RecordPolicy::always(),
                )
                .await
        }
        Kind::Compacted => {
            let op = id.context("--id OPERATION_ID is required for compacted")?;
            kernel.record(NewEvent::compacted(&key, &agent, &op), RecordPolicy::always()).await
        }
        Kind::RunOk | Kind::RunFailed => {
            let run = id.context("--id RUN_ID is required for run events")?;
            let status = if matches!(kind, Kind::RunOk) {
                RunStatus::Ok
            } else {
                RunStatus::Failed(RunOutcome::Error)
            };
            kernel.record(NewEvent::run_terminal(&key, &agent, &run, status), RecordPolicy::always()).await
        }
        Kind::Missing => {
            kernel.record(NewEvent::upstream_missing(&key, &agent, channel), RecordPolicy::always()).await
        }
    };
    Ok(value(RecordJson::of(outcome)))
}

/// What a `db` command answers, as a JSON value (printed as JSON or as readable lines).
fn value(answer: impl Serialize) -> Value {
    serde_json::to_value(answer).expect("db answers always serialize")
}

/// `db record`: whether the event was written, the event, or why not.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct RecordJson {
    recorded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    duplicate: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<wire::EventJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl RecordJson {
    fn of(outcome: RecordOutcome) -> RecordJson {
        match outcome {
            RecordOutcome::Recorded(e) => RecordJson {
                recorded: true,
                event: Some(wire::EventJson::from(&*e)),
                ..RecordJson::default()
            },
            RecordOutcome::Duplicate(e) => RecordJson {
                duplicate: Some(true),
                event: Some(wire::EventJson::from(&*e)),
                ..RecordJson::default()
            },
            RecordOutcome::Unwatched => RecordJson {
                reason: Some("nobody watches this session and it has no parent".into()),
                ..RecordJson::default()
            },
            RecordOutcome::NotRecorded(why) => {
                RecordJson { failed: Some(true), reason: Some(why), ..RecordJson::default() }
            }
        }
    }
}

#[derive(Serialize)]
struct UnwatchedJson {
    unwatched: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DrainJson {
    system_events: Vec<wire::SystemEventJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusJson {
    session_key: String,
    state_version: u64,
    state_changes: wire::StateChangesJson,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PruneJson {
    events_by_age: u64,
    events_by_cap: u64,
    cursors_expired: Vec<(String, String)>,
}
