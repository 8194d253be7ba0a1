use super::*;
use crate::cursor::{MaterialDecision, on_material};

const STORE: &str = "default";
const W: &str = "agent:main:main";
const T: &str = "agent:main:subagent:t";

fn key(s: &str) -> AgentSessionKey {
    AgentSessionKey::parse(s).unwrap()
}

fn cursor(l: u64, n: u64, m: u64) -> Cursor {
    Cursor { last_seen: l, notified: n, material: m, ..Cursor::seeded(l, Provenance::Explicit, STORE, 0) }
}

#[test]
fn the_human_turn_rule() {
    use HumanTurnSource::*;
    assert_eq!(
        RecordPolicy::human_turn(Gateway, Some(W)),
        RecordPolicy { producer_watchers: vec![W.into()], only_if_watched: false },
        "a sub-agent's human turn is written and names its parent"
    );
    assert_eq!(
        RecordPolicy::human_turn(Gateway, None),
        RecordPolicy { producer_watchers: vec![], only_if_watched: true },
        "an unwatched gateway session's human turn writes nothing"
    );
    for parent in [None, Some(W)] {
        assert_eq!(
            RecordPolicy::human_turn(Adopted, parent),
            RecordPolicy::always(),
            "adopted: always written"
        );
    }
}

#[test]
fn a_spawn_seeds_its_valid_producer_watchers() {
    let policy =
        RecordPolicy { producer_watchers: vec![W.into(), "global".into(), T.into()], only_if_watched: false };
    // `global` is not agent-qualified and T cannot watch itself.
    assert_eq!(on_append(EventKind::ChildSpawned, T, &policy), AppendCursors::Seed(vec![W.to_string()]));
}

#[test]
fn a_spawn_seeds_at_its_sequence_unless_a_notice_is_pending() {
    let fresh = Cursor::seeded(7, Provenance::Explicit, STORE, 5);
    assert_eq!(spawn_seed(None, 7, STORE, 5), fresh, "no cursor: seeded at the spawn");
    assert_eq!(
        spawn_seed(Some(&cursor(3, 3, 3)), 7, STORE, 5),
        fresh,
        "nothing pending: seeded at the spawn"
    );
    let mut other_store = cursor(1, 2, 3);
    other_store.store_path = Some("old".into());
    assert_eq!(spawn_seed(Some(&other_store), 7, STORE, 5), fresh, "a replaced store's cursor is replaced");
    // A respawn never hides what the watcher has not seen: L=1, N=2, M=3 (two turns it never saw).
    let mut ambient = cursor(1, 2, 3);
    ambient.provenance = Provenance::AmbientGroup;
    let mut kept = spawn_seed(Some(&ambient), 4, STORE, 5);
    assert_eq!((kept.last_seen, kept.notified, kept.material), (1, 2, 4), "still pending at changesSince 1");
    assert_eq!(kept.provenance, Provenance::Explicit, "a spawn edge is explicit");
    assert_eq!(kept.claim(6), Some(1), "delivered once, changesSince 1");
    assert_eq!((kept.last_seen, kept.notified, kept.material), (4, 4, 4), "acknowledged through the spawn");
}

#[test]
fn material_kinds_fan_out_and_the_rest_touch_nothing() {
    let policy = RecordPolicy::spawned_by(W);
    for kind in EventKind::ALL {
        let step = on_append(kind, T, &policy);
        let expected = match kind {
            EventKind::ChildSpawned => "seed",
            k if k.notifies() => "fan-out",
            _ => "untouched",
        };
        let got = match step {
            AppendCursors::Seed(_) => "seed",
            AppendCursors::FanOut => "fan-out",
            AppendCursors::Untouched => "untouched",
        };
        assert_eq!(got, expected, "{kind:?}");
    }
}

#[test]
fn fan_out_notifies_every_other_watcher_at_its_acknowledged_position() {
    let other = "agent:main:subagent:o";
    let cursors = vec![(W.to_string(), cursor(2, 2, 2)), (other.to_string(), cursor(1, 1, 1))];
    let out = fan_out(T, Some(other), 5, STORE, 9, cursors);
    // The actor's own cursor does not move; the watcher's notice says changesSince L.
    assert_eq!(out.moved.len(), 1);
    assert_eq!(out.moved[0].0, W);
    assert_eq!((out.moved[0].1.last_seen, out.moved[0].1.notified, out.moved[0].1.material), (2, 5, 5));
    assert_eq!(out.notices, vec![Notice { watcher: key(W), target: key(T), since: 2, queue_only: false }]);
}

#[test]
fn a_pending_cursor_is_neither_written_nor_notified_again() {
    let out = fan_out(T, None, 6, STORE, 9, vec![(W.to_string(), cursor(1, 3, 4))]);
    assert_eq!(out, FanOut::default(), "one write and one notice per burst: on the transition to pending");
}

#[test]
fn settling_derives_m_from_the_newest_material_event_the_watcher_did_not_cause() {
    let human = |seq, at| (seq, EventKind::HumanDirectMessage, None, at);
    let by = |seq, who: &str| (seq, EventKind::GoalChanged, Some(who.to_string()), 50);
    let log = |seq| (seq, EventKind::RunCompleted, None, 50);
    let c = cursor(1, 3, 4);
    // Newest first: 9 (not material), 8 (the watcher itself), 7 (counts).
    let settled = settle_material(&c, W, vec![log(9), by(8, W), human(7, 70), human(6, 60)]).unwrap();
    assert_eq!((settled.last_seen, settled.notified, settled.material, settled.updated_at), (1, 3, 7, 70));
    // Another agent's change counts; the watcher's spelled in capitals is still the watcher.
    assert_eq!(settle_material(&c, W, vec![by(8, "agent:main:other")]).unwrap().material, 8);
    assert_eq!(settle_material(&c, W, vec![by(8, "AGENT:MAIN:MAIN")]), None);
    assert_eq!(settle_material(&c, W, vec![log(9)]), None, "nothing material after M");
    assert_eq!(settle_material(&cursor(4, 4, 4), W, vec![human(7, 70)]), None, "a settled cursor is exact");
    // Equivalent to moving M on every event: the same L/N/M as on_material would have written.
    let mut eager = c.clone();
    for seq in [6, 7] {
        eager = match on_material(Some(&eager), W, T, None, seq, STORE, 0) {
            MaterialDecision::Notify(c) => c,
            other => panic!("{other:?}"),
        };
    }
    let lazy = settle_material(&c, W, vec![human(7, 0), human(6, 0)]).unwrap();
    assert_eq!(
        (lazy.last_seen, lazy.notified, lazy.material),
        (eager.last_seen, eager.notified, eager.material)
    );
}

#[test]
fn a_pending_notice_needs_a_pending_cursor_of_this_store_with_exact_keys() {
    assert_eq!(
        pending_notice(W, T, &cursor(2, 4, 4), STORE),
        Some(Notice { watcher: key(W), target: key(T), since: 2, queue_only: false })
    );
    assert_eq!(pending_notice(W, T, &cursor(4, 4, 4), STORE), None, "nothing pending");
    assert_eq!(pending_notice(W, T, &cursor(2, 4, 4), "other"), None, "another store's cursor");
    assert_eq!(pending_notice("global", T, &cursor(2, 4, 4), STORE), None, "not agent-qualified");
    assert_eq!(
        pending_notice("agent:MAIN:main", T, &cursor(2, 4, 4), STORE),
        None,
        "not the canonical spelling"
    );
}

#[test]
fn acknowledging_claims_only_pending_cursors_through_the_present() {
    let (a, b, c, d) =
        (key("agent:main:a:1"), key("agent:main:b:1"), key("agent:main:c:1"), key("agent:main:d:1"));
    let rows = vec![
        (a.clone(), Some(cursor(2, 4, 4))), // pending: delivered, nothing left
        (b.clone(), Some(cursor(2, 4, 6))), // more arrived while pending: covered by the same notice
        (c.clone(), None),                  // no cursor
        (d.clone(), Some(cursor(3, 3, 3))), // already settled elsewhere
    ];
    let (writes, ack) = acknowledge(&key(W), rows, STORE, 10);
    let positions: Vec<_> =
        writes.iter().map(|(t, c)| (t.clone(), c.last_seen, c.notified, c.material)).collect();
    assert_eq!(positions, vec![(a.clone(), 4, 4, 4), (b.clone(), 6, 6, 6)]);
    let n =
        |t: &AgentSessionKey, since| Notice { watcher: key(W), target: t.clone(), since, queue_only: false };
    assert_eq!(ack.delivered, vec![n(&a, 2), n(&b, 2)]);
    let (writes, ack) = acknowledge(&key(W), vec![(a, Some(cursor(2, 4, 4)))], "other", 10);
    assert!(writes.is_empty() && ack == Acknowledged::default(), "another store's cursor claims nothing");
}

#[test]
fn the_sweep_reopens_every_pending_cursor_with_n_at_m() {
    let rows = vec![
        (W.to_string(), T.to_string(), cursor(2, 3, 5)),
        (W.to_string(), "agent:main:x:1".to_string(), cursor(5, 5, 5)),
        ("global".to_string(), T.to_string(), cursor(1, 2, 2)),
    ];
    let (writes, notices) = sweep(rows, STORE, 11);
    assert_eq!(writes.len(), 1);
    assert_eq!(
        (writes[0].2.last_seen, writes[0].2.notified, writes[0].2.material, writes[0].2.updated_at),
        (2, 5, 5, 11)
    );
    assert_eq!(notices, vec![Notice { watcher: key(W), target: key(T), since: 2, queue_only: false }]);
}
