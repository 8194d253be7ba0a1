//! Model-based property test: random interleavings of recording, registering, draining, restarting and
//! pruning against a small in-memory reference model of the log, the heads/floors, the L/N/M cursors and
//! the watchers' queues.
//!
//! Checked after every step:
//! - the kernel's queues, cursors, heads and floors equal the model's;
//! - at most one pending notice per (watcher, target) in a queue;
//! - every notify-worthy event not caused by the watcher is covered by a queued notice (`changesSince`
//!   below it) and not acknowledged past, until a drain hands it to the watcher;
//! - history before registration never notifies (every queued notice has a material event after its
//!   `since` and at or after the registration point);
//! - `historyGap ⇔ since < floor`, and paging from any `since` yields exactly `(max(since, floor), head]`,
//!   once each, in order.
//!
//! `PROPTEST_CASES` raises the number of cases (default 48).

use crate::common::{Env, notices};
use proptest::prelude::*;
use sessionwatch_core::HumanTurnSource;
use sessionwatch_core::RecordPolicy;
use sessionwatch_core::{Actor, EventKind, GoalChange, Limit, NewEvent, Provenance, RunStatus};
use sessionwatch_kernel::{Kernel, RecordOutcome};
use sessionwatch_store::{RetentionPolicy, Store};
use std::collections::{BTreeMap, BTreeSet, HashMap};

const WATCHERS: [&str; 2] = ["agent:main:main", "agent:main:subagent:w1"];
const TARGETS: [(&str, &str); 3] = [
    ("agent:main:subagent:t0", "main"),
    ("agent:main:telegram:group:t1", "main"),
    ("agent:ops:subagent:t2", "ops"),
];
const NW: usize = WATCHERS.len();
const NT: usize = TARGETS.len();

#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// A human turn (recorded only when watched).
    Human {
        t: usize,
    },
    /// A goal change, by a human or by one of the watchers (self-caused for that watcher).
    Goal {
        t: usize,
        by: Option<usize>,
    },
    /// A log-only event with a dedupe key from a small set (so duplicates happen).
    LogOnly {
        t: usize,
        run: bool,
        id: u8,
    },
    Register {
        w: usize,
        t: usize,
    },
    Drain {
        w: usize,
    },
    Restart,
    Prune,
    Read {
        t: usize,
        since_pct: u8,
        limit: u8,
    },
}

pub(crate) fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..NT).prop_map(|t| Op::Human { t }),
        2 => (0..NT, prop::option::of(0..NW)).prop_map(|(t, by)| Op::Goal { t, by }),
        2 => (0..NT, any::<bool>(), 0..3u8).prop_map(|(t, run, id)| Op::LogOnly { t, run, id }),
        3 => (0..NW, 0..NT).prop_map(|(w, t)| Op::Register { w, t }),
        3 => (0..NW).prop_map(|w| Op::Drain { w }),
        1 => Just(Op::Restart),
        1 => Just(Op::Prune),
        2 => (0..NT, 0..=100u8, 1..6u8).prop_map(|(t, since_pct, limit)| Op::Read { t, since_pct, limit }),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lnm {
    l: u64,
    n: u64,
    m: u64,
}

#[derive(Default)]
struct Model {
    /// Retained rows in append order: (target, sequence, kind, dedupe key).
    rows: Vec<(usize, u64, EventKind, Option<String>)>,
    head: [u64; NT],
    floor: [u64; NT],
    /// Every event ever recorded per target: (sequence, kind, watcher who caused it).
    history: [Vec<(u64, EventKind, Option<usize>)>; NT],
    cursors: BTreeMap<(usize, usize), Lnm>,
    registered_at: BTreeMap<(usize, usize), u64>,
    queues: [BTreeMap<usize, u64>; NW],
    /// Notify-worthy events not caused by the watcher that no drained notice has handed over yet.
    uncovered: BTreeMap<(usize, usize), BTreeSet<u64>>,
}

impl Model {
    fn watched(&self, t: usize) -> bool {
        self.cursors.keys().any(|&(_, tt)| tt == t)
    }

    fn append(&mut self, t: usize, kind: EventKind, by: Option<usize>, dedupe: Option<String>) -> u64 {
        self.head[t] += 1;
        let seq = self.head[t];
        self.rows.push((t, seq, kind, dedupe));
        self.history[t].push((seq, kind, by));
        if kind.notifies() {
            for w in 0..NW {
                if by == Some(w) {
                    continue;
                }
                if let Some(c) = self.cursors.get_mut(&(w, t)) {
                    if c.n == c.l {
                        c.n = seq;
                    }
                    c.m = seq;
                    let since = c.l;
                    self.queues[w].insert(t, since);
                    self.uncovered.entry((w, t)).or_default().insert(seq);
                }
            }
        }
        seq
    }

    fn drain(&mut self, w: usize) -> Vec<(usize, u64)> {
        let drained: Vec<(usize, u64)> = std::mem::take(&mut self.queues[w]).into_iter().collect();
        for &(t, _) in &drained {
            // Acknowledged through the present: whatever arrived while the notice was pending is
            // covered by it, nothing reopens.
            let c = self.cursors.get_mut(&(w, t)).expect("a queued notice has a cursor");
            c.l = c.m;
            c.n = c.m;
            // The watcher reconciles from the notice up to the head: everything so far is handed over.
            self.uncovered.remove(&(w, t));
        }
        drained
    }

    fn restart(&mut self, max_rows: usize) {
        for q in &mut self.queues {
            q.clear();
        }
        for (&(w, t), c) in self.cursors.iter_mut() {
            if c.m > c.l {
                c.n = c.m;
                self.queues[w].insert(t, c.l);
            }
        }
        self.prune(max_rows);
    }

    fn prune(&mut self, max_rows: usize) {
        if self.rows.len() > max_rows {
            let cut = self.rows.len() - max_rows;
            for (t, seq, _, _) in self.rows.drain(..cut) {
                self.floor[t] = self.floor[t].max(seq);
            }
        }
    }
}

/// Where the kernel under test keeps its state: the model test runs against every store.
pub(crate) trait Backend {
    type S: Store;
    /// A (re)start of the process on the same durable state: a fresh store handle and kernel.
    fn start(&self) -> impl std::future::Future<Output = Kernel<Self::S>>;
    fn clock(&self) -> &sessionwatch_core::ManualClock;
}

impl Backend for Env {
    type S = sessionwatch_store::SqliteStore;
    async fn start(&self) -> Kernel<Self::S> {
        Env::start(self).await
    }
    fn clock(&self) -> &sessionwatch_core::ManualClock {
        &self.clock
    }
}

/// The retention the model expects for a run.
pub(crate) fn retention(max_rows: usize) -> RetentionPolicy {
    RetentionPolicy { max_rows: max_rows as u64, ..RetentionPolicy::default() }
}

struct Sut<B: Backend> {
    env: B,
    kernel: Option<Kernel<B::S>>,
    max_rows: usize,
}

impl<B: Backend> Sut<B> {
    fn k(&self) -> &Kernel<B::S> {
        self.kernel.as_ref().unwrap()
    }
}

/// Runs `ops` on `env` (whose retention keeps `max_rows` rows) and checks the model after every step.
pub(crate) async fn run<B: Backend>(env: B, ops: Vec<Op>, max_rows: usize) {
    let kernel = env.start().await;
    let mut sut = Sut { env, kernel: Some(kernel), max_rows };
    let mut m = Model::default();
    for (step, op) in ops.into_iter().enumerate() {
        sut.env.clock().advance(1000);
        apply(&mut sut, &mut m, &op, step).await;
        check(&sut, &m, step, &op).await;
    }
}

async fn apply<B: Backend>(sut: &mut Sut<B>, m: &mut Model, op: &Op, step: usize) {
    match *op {
        Op::Human { t } => {
            let (key, agent) = TARGETS[t];
            let out = sut
                .k()
                .record(
                    NewEvent::human_message(key, agent, "web", None),
                    RecordPolicy::human_turn(HumanTurnSource::Gateway, None),
                )
                .await;
            if m.watched(t) {
                let seq = m.append(t, EventKind::HumanDirectMessage, None, None);
                assert!(
                    matches!(&out, RecordOutcome::Recorded(e) if e.sequence == seq),
                    "step {step}: {out:?}"
                );
            } else {
                assert_eq!(out, RecordOutcome::Unwatched, "step {step}: an unwatched human turn is free");
            }
        }
        Op::Goal { t, by } => {
            let (key, agent) = TARGETS[t];
            let actor = by.map_or(Actor::human(None), |w| Actor::agent(WATCHERS[w]));
            let ev = NewEvent::goal_changed(key, agent, &GoalChange::Updated, actor);
            let out = sut.k().record(ev, RecordPolicy::always()).await;
            let seq = m.append(t, EventKind::GoalChanged, by, None);
            assert!(matches!(&out, RecordOutcome::Recorded(e) if e.sequence == seq), "step {step}: {out:?}");
        }
        Op::LogOnly { t, run, id } => {
            let (key, agent) = TARGETS[t];
            let ev = if run {
                NewEvent::run_terminal(key, agent, &format!("r{id}"), RunStatus::Ok)
            } else {
                NewEvent::compacted(key, agent, &format!("op{id}"))
            };
            let dedupe = ev.dedupe_key.clone();
            let kind = ev.kind;
            let out = sut.k().record(ev, RecordPolicy::always()).await;
            let existing = m.rows.iter().find(|r| r.0 == t && r.3 == dedupe).map(|r| r.1);
            match existing {
                Some(seq) => assert!(
                    matches!(&out, RecordOutcome::Duplicate(e) if e.sequence == seq),
                    "step {step}: a retained dedupe key is a duplicate: {out:?}"
                ),
                None => {
                    let seq = m.append(t, kind, None, dedupe);
                    assert!(
                        matches!(&out, RecordOutcome::Recorded(e) if e.sequence == seq),
                        "step {step}: {out:?}"
                    );
                }
            }
        }
        Op::Register { w, t } => {
            assert!(
                sut.k().register_watch(WATCHERS[w], TARGETS[t].0, Provenance::Explicit).await.is_watching()
            );
            if !m.cursors.contains_key(&(w, t)) {
                let h = m.head[t];
                m.cursors.insert((w, t), Lnm { l: h, n: h, m: h });
                m.registered_at.insert((w, t), h);
            }
        }
        Op::Drain { w } => {
            let drained = notices(&sut.k().drain(WATCHERS[w]).await);
            let want: Vec<(String, u64)> =
                m.drain(w).into_iter().map(|(t, since)| (TARGETS[t].0.to_string(), since)).collect();
            let mut got = drained.clone();
            got.sort();
            let mut want_sorted = want;
            want_sorted.sort();
            assert_eq!(got, want_sorted, "step {step}: drained notices of {}", WATCHERS[w]);
        }
        Op::Restart => {
            if let Some(k) = sut.kernel.take() {
                k.shutdown().await;
            }
            sut.kernel = Some(sut.env.start().await);
            // The start-up prune runs in the background; the model's restart includes it.
            sut.k().background_prune_done().await;
            m.restart(sut.max_rows);
        }
        Op::Prune => {
            sut.k().prune_now().await.expect("prune");
            m.prune(sut.max_rows);
        }
        Op::Read { t, since_pct, limit } => {
            let (key, agent) = TARGETS[t];
            let since = m.head[t] * since_pct as u64 / 100;
            let limit = Limit::new(limit as i64).unwrap();
            let mut got = vec![];
            let mut cursor = since;
            for page_no in 0.. {
                assert!(page_no <= m.head[t] + 1, "step {step}: paging must end");
                let page = sut.k().changes_since(key, agent, cursor, limit).await.expect("page");
                assert_eq!(page.history_gap, cursor < m.floor[t], "step {step}: historyGap ⇔ since < floor");
                let want_earliest = if m.head[t] == 0 { 0 } else { m.floor[t] + 1 };
                assert_eq!(page.earliest_available_sequence, want_earliest, "step {step}");
                for e in &page.events {
                    let (_, kind, _) = m.history[t][e.sequence as usize - 1];
                    assert_eq!(e.kind, kind, "step {step}: seq {}", e.sequence);
                }
                got.extend(page.events.iter().map(|e| e.sequence));
                cursor = page.next_since(cursor);
                if !page.truncated {
                    break;
                }
            }
            let want: Vec<u64> = (since.max(m.floor[t]) + 1..=m.head[t]).collect();
            assert_eq!(
                got, want,
                "step {step}: paging from {since} yields (max(since, floor), head] once, in order"
            );
        }
    }
}

async fn check<B: Backend>(sut: &Sut<B>, m: &Model, step: usize, op: &Op) {
    let k = sut.k();
    for (t, (key, agent)) in TARGETS.iter().enumerate() {
        let h = k.head(key, agent).await.expect("head");
        assert_eq!((h.head, h.floor), (m.head[t], m.floor[t]), "step {step} ({op:?}): head/floor of {key}");
    }
    for (w, watcher) in WATCHERS.iter().enumerate() {
        let queued = notices(&k.peek(watcher));
        // At most one pending notice per (watcher, target).
        let targets: BTreeSet<&String> = queued.iter().map(|(t, _)| t).collect();
        assert_eq!(
            targets.len(),
            queued.len(),
            "step {step} ({op:?}): one line per target in {watcher}: {queued:?}"
        );
        let mut sorted = queued.clone();
        sorted.sort();
        let want: Vec<(String, u64)> =
            m.queues[w].iter().map(|(&t, &s)| (TARGETS[t].0.to_string(), s)).collect();
        assert_eq!(sorted, want, "step {step} ({op:?}): queue of {watcher}");
        let by_target: HashMap<&str, u64> = queued.iter().map(|(t, s)| (t.as_str(), *s)).collect();

        for (t, (key, _)) in TARGETS.iter().enumerate() {
            let cursor = k.cursor(watcher, key).await.unwrap();
            let model = m.cursors.get(&(w, t));
            assert_eq!(
                cursor.as_ref().map(|c| Lnm { l: c.last_seen, n: c.notified, m: c.material }),
                model.copied(),
                "step {step} ({op:?}): cursor {watcher} -> {key}"
            );
            // Coverage: every uncovered notify-worthy event is behind a queued notice and not acknowledged.
            for &e in m.uncovered.get(&(w, t)).into_iter().flatten() {
                let since = by_target.get(key).copied();
                assert!(
                    since.is_some_and(|s| s < e),
                    "step {step} ({op:?}): event {e} on {key} not covered for {watcher}: {queued:?}"
                );
                assert!(cursor.as_ref().unwrap().last_seen < e, "step {step}: acknowledged past event {e}");
            }
            // History before registration never notifies: a queued notice needs a material event by another
            // actor after its `since`, at or after registration.
            if let Some(&since) = by_target.get(key) {
                let reg = m.registered_at[&(w, t)];
                assert!(since >= reg, "step {step}: notice since {since} predates registration at {reg}");
                let material = m.history[t]
                    .iter()
                    .any(|&(seq, kind, by)| seq > since && kind.notifies() && by != Some(w));
                assert!(
                    material,
                    "step {step} ({op:?}): a notice for {watcher} on {key} without material work"
                );
            }
        }
    }
}

/// `PROPTEST_CASES`, else `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
