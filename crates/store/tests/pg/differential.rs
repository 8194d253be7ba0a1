//! The same random operations on SQLite (the reference) and PostgreSQL give the same answers, for every
//! method of the `Store` trait. Transcript and inbox ids are compared by position only (SQLite may
//! reuse a deleted rowid; PostgreSQL never does).

use crate::{NOW, pg_schema};
use sessionwatch_core::{
    Actor, AgentSessionKey, DAY_MS, GoalChange, HOUR_MS, Limit, Millis, NewEvent, Provenance, RecordPolicy,
    RunStatus,
};
use sessionwatch_store::{
    AppendRequest, FinishRunRequest, InboxItem, LinkVersion, NewMessage, NewSession, RetentionPolicy, RunRow,
    SessionFilter, SqliteOptions, SqliteStore, Store, UpstreamLinkRow, WatchRequest,
};

const KEYS: &[&str] = &[
    "agent:main:main",
    "agent:main:subagent:a",
    "agent:ops:main",
    "agent:main:subagent:t1",
    "agent:main:telegram:group:g",
    "global",
];
const STORES: &[&str] = &["store-a", "store-a", "store-a", "store-b"];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn agent_of(k: &str) -> String {
    AgentSessionKey::parse(k).map_or("main".to_string(), |k| k.agent_id().to_string())
}

fn show<T: std::fmt::Debug>(r: sessionwatch_store::Result<T>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error: {e}"),
    }
}

/// One random operation, applied to `s`; answers a comparable rendering of its result.
async fn apply<S: Store>(s: &S, op: u64, r: &mut Rng, now: Millis) -> String {
    let k = r.pick(KEYS);
    let k2 = r.pick(KEYS);
    let agent = agent_of(k);
    let store = r.pick(STORES).to_string();
    match op {
        0..=29 => {
            let actor = match r.below(3) {
                0 => Actor::human(None),
                1 => Actor::agent(k2),
                _ => Actor::system(),
            };
            let mut event = match r.below(6) {
                0 | 1 => NewEvent::human_message(k, &agent, "telegram", None),
                2 => NewEvent::goal_changed(k, &agent, &GoalChange::Updated, actor),
                3 => NewEvent::compacted(k, &agent, &format!("op-{}", r.below(4))),
                4 => NewEvent::child_spawned(k, &agent, k2, &format!("run-{}", r.below(4))),
                _ => NewEvent::upstream_missing(k, &agent, "claude"),
            };
            event = event.with_occurred_at(Some(now - r.below(3) as i64 * DAY_MS));
            let req = AppendRequest {
                event,
                policy: RecordPolicy {
                    producer_watchers: if r.chance(30) { vec![k2.to_string()] } else { vec![] },
                    only_if_watched: r.chance(30),
                },
                watcher_store: store,
                host_id: None,
            };
            show(s.append(req, now).await)
        }
        30..=39 => match (AgentSessionKey::parse(k), AgentSessionKey::parse(k2)) {
            (Some(w), Some(t)) => {
                let p = if r.chance(50) { Provenance::Explicit } else { Provenance::AmbientGroup };
                show(s.register_watch(WatchRequest::new(w, t, p, store), now).await)
            }
            _ => String::new(),
        },
        40..=46 => match AgentSessionKey::parse(k) {
            Some(w) => {
                let targets =
                    KEYS.iter().filter_map(|t| AgentSessionKey::parse(t)).filter(|_| r.chance(50)).collect();
                show(s.acknowledge(w, targets, store, now).await)
            }
            None => String::new(),
        },
        47..=49 => show(s.sweep(store, now).await),
        50..=52 => {
            let policy = RetentionPolicy {
                max_age_ms: DAY_MS + r.below(2) as i64 * DAY_MS,
                max_rows: 5 + r.below(30),
            };
            show(s.prune(policy, now).await)
        }
        53..=59 => {
            let since = r.below(12);
            let limit = Limit::new(1 + r.below(6) as i64).unwrap();
            show(s.changes_since(k.into(), agent, since, limit).await)
        }
        60..=61 => show(s.head(k.into(), agent).await),
        62 => {
            let all: Vec<(String, String)> = KEYS.iter().map(|k| (k.to_string(), agent_of(k))).collect();
            let mut v: Vec<_> = s.state_versions(all).await.unwrap().into_iter().collect();
            v.sort();
            format!("{v:?}")
        }
        63..=65 => show(s.cursor(k.into(), k2.into()).await),
        66 if r.chance(50) => show(s.cursors_of_watcher(k.into()).await),
        66 => show(s.watch_edges(vec![k.into(), k2.into()], 1 + r.below(4) as u32).await),
        67 => show(s.unwatch(k.into(), k2.into()).await),
        68 => show(s.clear_watcher(k.into()).await),
        69 => show(s.delete_session_state(k.into(), agent).await),
        70..=73 => {
            let new = NewSession {
                session_key: k.into(),
                agent_id: agent,
                session_id: format!("sid-{}", r.below(3)),
                kind: "other".into(),
                channel: Some("telegram".into()),
                host_id: r.chance(50).then(|| "gw".to_string()),
                ..NewSession::default()
            };
            show(s.ensure_session(new, now).await)
        }
        74 => show(s.get_session(k.into(), agent).await),
        75 => {
            let kinds = r.chance(50).then(|| vec!["other".to_string()]);
            let agent_id = r.chance(30).then(|| "main".to_string());
            let offset = if r.chance(30) { 1 } else { 0 };
            let filter = SessionFilter {
                kinds,
                agent_id,
                updated_since: Some(now - HOUR_MS),
                offset,
                limit: 3,
                native_active: false,
            };
            show(s.list_sessions(filter).await)
        }
        76 => {
            let obj = r.chance(70).then(|| "ship it".to_string());
            show(s.update_goal(k.into(), agent, obj, Some("active".into()), now).await)
        }
        77 => show(s.reset_session(k.into(), agent, format!("sid-{}", r.below(3)), now).await),
        78 => show(s.touch_session(k.into(), agent, r.chance(50).then(|| "gw2".to_string()), now).await),
        79..=80 => {
            let m = NewMessage {
                session_id: "sid-0".into(),
                role: "user".into(),
                text: format!("m{}", r.below(100)),
                run_id: None,
                from_session: None,
            };
            s.append_message(k.into(), agent, m, now)
                .await
                .map(|_| ())
                .map_or_else(|e| e.to_string(), |_| "ok".into())
        }
        81 => s
            .messages(k.into(), agent, 1 + r.below(4) as u32)
            .await
            .map(|v| v.into_iter().map(|m| (m.session_id, m.role, m.text, m.created_at)).collect::<Vec<_>>())
            .map_or_else(|e| e.to_string(), |v| format!("{v:?}")),
        82 => {
            let item = InboxItem {
                id: 0,
                run_id: None,
                from_session: Some(k2.into()),
                text: "hi".into(),
                created_at: now,
            };
            s.push_inbox(k.into(), agent, item).await.map_or_else(|e| e.to_string(), |_| "ok".into())
        }
        83 => s
            .take_inbox(k.into(), agent)
            .await
            .map(|v| v.into_iter().map(|i| (i.from_session, i.text, i.created_at)).collect::<Vec<_>>())
            .map_or_else(|e| e.to_string(), |v| format!("{v:?}")),
        84 => {
            let run = RunRow {
                run_id: format!("run-{}", r.below(1_000_000)),
                session_key: k.into(),
                agent_id: agent,
                session_id: format!("sid-{}", r.below(3)),
                requester: Some(k2.into()),
                is_child: r.chance(50),
                status: None,
                reply: None,
                superseded: false,
                created_at: now,
                finished_at: None,
            };
            show(s.create_run(run).await)
        }
        85..=86 => {
            // Finish the newest run of the session, if any (run ids are random: find it by listing).
            let status = RunStatus::Ok.as_str().to_string();
            let sid = r.chance(50).then(|| format!("sid-{}", r.below(3)));
            let run_id = format!("run-{}", r.below(4));
            show(s.finish_run(FinishRunRequest { run_id, status, reply: None, session_id: sid }, now).await)
        }
        87 => {
            let link = UpstreamLinkRow {
                session_key: k.into(),
                agent_id: agent,
                catalog_id: "claude".into(),
                host_id: if r.chance(50) { "local".into() } else { "node:box".into() },
                thread_id: format!("th-{}", r.below(2)),
                upstream_kind: "jsonl".into(),
                reference_json: "{}".into(),
                marker_json: "{\"offset\":0}".into(),
                last_scanned_at: None,
                missing_streak: 0,
                created_at: now,
                updated_at: now,
            };
            show(s.upsert_link(link).await)
        }
        88 => show(s.get_link(k.into(), agent).await),
        89 if r.chance(50) => show(s.watched_links().await),
        89 => show(s.links_of_host("node:box".into()).await),
        90 => show(
            s.advance_link_marker(
                LinkVersion { session_key: k.into(), agent_id: agent, updated_at: now - r.below(2) as i64 },
                "{\"offset\":9}".into(),
                now,
            )
            .await,
        ),
        91 => {
            let link = LinkVersion { session_key: k.into(), agent_id: agent, updated_at: now };
            show(s.set_link_missing_streak(link, r.below(4) as u32).await)
        }
        92 => show(s.delete_link(k.into(), agent).await),
        93..=94 => show(s.get_run(format!("run-{}", r.below(4))).await),
        _ => {
            // A run with a predictable id so finish_run and get_run find it.
            let run = RunRow {
                run_id: format!("run-{}", r.below(4)),
                session_key: k.into(),
                agent_id: agent,
                session_id: format!("sid-{}", r.below(3)),
                requester: None,
                is_child: true,
                status: None,
                reply: None,
                superseded: false,
                created_at: now,
                finished_at: None,
            };
            // A duplicate run id is an error on both; compare only success.
            s.create_run(run).await.is_ok().to_string()
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_answers_like_sqlite() {
    let seeds: Vec<u64> = match std::env::var("SESSIONWATCH_DIFF_SEEDS") {
        Ok(n) => (1..=n.parse::<u64>().unwrap()).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect(),
        Err(_) => vec![0x9e37_79b9_7f4a_7c15u64, 0x0123_4567_89ab_cdef, 42],
    };
    for seed in seeds {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteStore::open(dir.path().join("ref.db"), SqliteOptions::default()).unwrap();
        let fresh = pg_schema!("postgres_answers_like_sqlite");
        let pg = fresh.store().await;
        let (mut r1, mut r2) = (Rng(seed), Rng(seed));
        let mut now = NOW;
        let mut history = vec![];
        for step in 0..400 {
            let op = r1.below(100);
            assert_eq!(op, r2.below(100));
            now += r1.below(3) as i64 * HOUR_MS;
            r2.below(3);
            let a = apply(&sqlite, op, &mut r1, now).await;
            let b = apply(&pg, op, &mut r2, now).await;
            history.push(format!("{step}: op {op}: {a}"));
            assert_eq!(
                a,
                b,
                "seed {seed:#x} step {step} op {op} differs (sqlite left, postgres right); last steps:\n{}",
                history.iter().rev().take(8).rev().cloned().collect::<Vec<_>>().join("\n")
            );
        }
    }
}
