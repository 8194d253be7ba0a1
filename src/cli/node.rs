//! `sessionwatch node`: runs on another machine, watches the Claude Code, Codex, OpenCode, Pi and Gemini CLI
//! sessions there with the same classifiers as the gateway's own monitor, and reports to a central
//! gateway with a node token (`sessionwatch nodes add NAME` on the gateway issues one). It keeps no
//! state: the gateway holds every link and marker, so a restarted node (or gateway) goes on from the
//! last marker the gateway stored. It also follows the git dirs of its sessions' workspaces for the
//! gateway (`node_workspaces.rs`), reporting HEAD moves as they happen.

use super::node_workspaces::Followers;
use anyhow::{Context, bail};
use clap::Args;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sessionwatch_server::node_protocol::{
    BaselineReport, BaselineResult, NodeLink, OutcomeReport, RemoteEntry, SyncAnswer, SyncRequest,
};
use sessionwatch_upstream::{CatalogId, Homes, Probe, UpstreamError};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct NodeArgs {
    /// The central gateway's URL (HTTP or HTTPS) [default: $SESSIONWATCH_URL, else the gateway running on
    /// this machine (its runtime file in the data dir), else the config's listen address, else
    /// http://127.0.0.1:7420].
    #[arg(long, env = "SESSIONWATCH_GATEWAY")]
    gateway: Option<String>,
    /// The file holding this node's token (default: `node-token` in the data dir).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// The node's name, checked against the token's (the gateway refuses a mismatch).
    #[arg(long)]
    name: Option<String>,
    /// Seconds between ticks.
    #[arg(long, default_value_t = 60)]
    interval_seconds: u64,
    /// One tick, then exit (non-zero when it failed).
    #[arg(long)]
    once: bool,
    /// Data dir holding the default token file.
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

struct Gateway {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Gateway {
    async fn post<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> anyhow::Result<T> {
        let resp = self
            .http
            .post(format!("{}{path}", self.base.trim_end_matches('/')))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .with_context(|| format!("cannot reach the gateway at {}", self.base))?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            bail!("{path} answered {status}: {text}");
        }
        serde_json::from_str(&text).with_context(|| format!("{path}: unexpected answer {text}"))
    }
}

/// What one tick did.
#[derive(Debug, Default)]
struct NodeTick {
    catalog: usize,
    links: usize,
    baselined: usize,
    checked: usize,
    /// Head reports on followed git dirs.
    heads: usize,
    applied: serde_json::Value,
}

pub async fn run(args: NodeArgs) -> anyhow::Result<ExitCode> {
    super::init_tracing("info");
    let found = super::resolve_gateway(sessionwatch_server::discovery::ClientContext {
        flag: args.gateway.clone().map(|u| (u, "--gateway".to_string())),
        data_dir: args.data_dir.clone(),
        config: None,
    });
    tracing::info!(url = %found.url.url, source = %found.url.source, "central gateway");
    let token_file = args.token_file.clone().unwrap_or_else(|| found.data_dir.join("node-token"));
    let token = std::fs::read_to_string(&token_file)
        .with_context(|| {
            format!(
                "no node token at {}: issue one on the gateway (`sessionwatch nodes add NAME`) and save it there",
                token_file.display()
            )
        })?
        .trim()
        .to_string();
    let gateway = Gateway {
        http: reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?,
        base: found.url.url,
        token,
    };
    let homes = Homes::from_env();
    let (mut followers, mut moved) = Followers::new();
    loop {
        match tick(&gateway, &homes, args.name.clone(), &mut followers).await {
            Ok(t) => {
                tracing::info!(catalog = t.catalog, links = t.links, baselined = t.baselined, checked = t.checked, heads = t.heads, applied = %t.applied, "node tick");
                if args.once {
                    return Ok(ExitCode::SUCCESS);
                }
            }
            Err(e) => {
                // The gateway keeps the markers: the next tick catches up from where it stopped.
                tracing::warn!(error = %format!("{e:#}"), "node tick failed; retrying next tick");
                if args.once {
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        let next_tick = tokio::time::Instant::now() + Duration::from_secs(args.interval_seconds.max(1));
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next_tick) => break,
                _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
                // A followed git dir was written: its move is reported now, not at the next tick.
                Some(key) = moved.recv() => {
                    if let Err(e) = report_heads(&gateway, &mut followers, Some(&key)).await {
                        tracing::warn!(error = %format!("{e:#}"), "head report failed; retrying next tick");
                    }
                }
            }
        }
    }
}

/// Reports what the followed git dirs (`only`: that one) hold that the gateway does not know yet;
/// answers how many reports it sent.
async fn report_heads(
    gateway: &Gateway,
    followers: &mut Followers,
    only: Option<&str>,
) -> anyhow::Result<usize> {
    let reports = followers.poll(only);
    if reports.is_empty() {
        return Ok(0);
    }
    match gateway.post::<_, serde_json::Value>("/v1/node/heads", &reports).await {
        Ok(answer) => {
            tracing::debug!(reports = reports.len(), %answer, "head reports");
            followers.reported(&reports);
            Ok(reports.len())
        }
        Err(e) => {
            followers.forget();
            Err(e)
        }
    }
}

async fn tick(
    gateway: &Gateway,
    homes: &Homes,
    name: Option<String>,
    followers: &mut Followers,
) -> anyhow::Result<NodeTick> {
    let h = homes.clone();
    let entries =
        tokio::task::spawn_blocking(move || sessionwatch_upstream::discover(&h, &mut |_, _| {})).await?;
    let catalog: Vec<RemoteEntry> = entries
        .iter()
        .map(|e| RemoteEntry {
            catalog_id: e.catalog_id.as_str().to_string(),
            thread_id: e.thread_id.clone(),
            updated_at: e.updated_at_ms,
        })
        .collect();
    let mut t = NodeTick { catalog: catalog.len(), ..NodeTick::default() };
    let answer: SyncAnswer = gateway.post("/v1/node/sync", &SyncRequest { name, catalog }).await?;
    t.links = answer.links.len();
    followers.update(answer.workspaces);
    t.heads = report_heads(gateway, followers, None).await?;

    let baselines = baseline(homes, answer.links.iter().filter(|l| l.baseline).cloned().collect()).await?;
    if !baselines.is_empty() {
        let linked: serde_json::Value = gateway.post("/v1/node/baselines", &baselines).await?;
        t.baselined = linked["linked"].as_u64().unwrap_or(0) as usize;
    }

    let mut by_catalog: BTreeMap<CatalogId, Vec<NodeLink>> = BTreeMap::new();
    for l in answer.links.into_iter().filter(|l| l.watched && !l.baseline) {
        if let Some(c) = CatalogId::parse(&l.catalog_id) {
            by_catalog.entry(c).or_default().push(l);
        }
    }
    let mut reports = vec![];
    for (catalog, links) in by_catalog {
        let (links, outcomes) = tokio::task::spawn_blocking(move || {
            let probes: Vec<Probe<'_>> = links
                .iter()
                .map(|l| Probe {
                    reference_json: &l.reference_json,
                    marker_json: &l.marker_json,
                    own_recent_user_texts: &l.own_texts,
                })
                .collect();
            let outcomes = sessionwatch_upstream::check_many(catalog, &probes);
            (links, outcomes)
        })
        .await?;
        for (l, o) in links.into_iter().zip(outcomes) {
            reports.push(OutcomeReport {
                session_key: l.session_key,
                agent_id: l.agent_id,
                updated_at: l.updated_at,
                outcome: o.into(),
            });
        }
    }
    t.checked = reports.len();
    if !reports.is_empty() {
        t.applied = gateway.post("/v1/node/outcomes", &reports).await?;
    }
    Ok(t)
}

/// Adopts locally what the gateway adopted for this node: the baseline is the source's current end.
async fn baseline(homes: &Homes, links: Vec<NodeLink>) -> anyhow::Result<Vec<BaselineReport>> {
    let homes = homes.clone();
    tokio::task::spawn_blocking(move || {
        let mut out = vec![];
        for l in links {
            let Some(catalog) = CatalogId::parse(&l.catalog_id) else { continue };
            let result = match sessionwatch_upstream::adopt(&homes, catalog, &l.thread_id) {
                Ok(a) => BaselineResult::Linked {
                    upstream_kind: a.link.upstream_kind.to_string(),
                    reference_json: a.link.reference_json,
                    marker_json: a.link.marker_json,
                },
                Err(e @ UpstreamError::NotFound { .. }) => {
                    BaselineResult::NotFound { message: e.to_string() }
                }
                Err(e) => {
                    // A read error is not "gone": try again next tick.
                    tracing::warn!(error = %e, session = %l.session_key, "baseline deferred");
                    continue;
                }
            };
            out.push(BaselineReport {
                session_key: l.session_key,
                agent_id: l.agent_id,
                updated_at: l.updated_at,
                result,
            });
        }
        out
    })
    .await
    .map_err(Into::into)
}
