//! Exhaustive checks of the L/N/M machine over every small cursor state.

use super::*;

const W: &str = "agent:main:main";
const T: &str = "agent:main:subagent:child";
const S: &str = "store-a";

fn cursor(l: u64, n: u64, m: u64) -> Cursor {
    Cursor {
        last_seen: l,
        notified: n,
        material: m,
        provenance: Provenance::Explicit,
        store_path: Some(S.into()),
        updated_at: 0,
    }
}

/// Every state reachable in principle with positions below `max` that respects L <= N <= M.
fn all_states(max: u64) -> Vec<Cursor> {
    let mut out = vec![];
    for l in 0..max {
        for n in l..max {
            for m in n..max {
                out.push(cursor(l, n, m));
            }
        }
    }
    out
}

fn notify(c: Option<&Cursor>, seq: u64) -> Cursor {
    match on_material(c, W, T, None, seq, S, 7) {
        MaterialDecision::Notify(c) => c,
        other => panic!("expected notify, got {other:?}"),
    }
}

#[test]
fn material_freezes_n_while_pending_and_keeps_invariant() {
    for c in all_states(6) {
        let e = c.material + 1;
        let next = notify(Some(&c), e);
        assert_eq!(next.material, e);
        assert_eq!(next.last_seen, c.last_seen, "material never moves L");
        if c.notified == c.last_seen {
            assert_eq!(next.notified, e, "nothing pending: N follows the event");
        } else {
            assert_eq!(next.notified, c.notified, "pending: N is frozen");
        }
        assert!(next.last_seen <= next.notified && next.notified <= next.material);
        assert!(next.is_pending());
        assert_eq!(next.updated_at, 7);
    }
}

#[test]
fn acknowledge_moves_to_the_frozen_watermark_and_reopens_once() {
    for c in all_states(6) {
        let mut a = c.clone();
        let reopen = a.acknowledge(9);
        assert_eq!(a.last_seen, c.notified, "L moves to the frozen N, never to the head");
        assert_eq!(a.notified, c.material.max(c.notified));
        assert_eq!(reopen.is_some(), c.material > c.notified);
        assert_eq!(reopen, (c.material > c.notified).then_some(c.notified));
        assert_eq!(a.is_pending(), reopen.is_some(), "pending after ack exactly when it reopened");
        // A second acknowledgement of the reopened notice settles everything.
        let mut b = a.clone();
        assert_eq!(b.acknowledge(10), None, "a reopen happens at most once per interleaving");
        assert!(!b.is_pending());
        assert_eq!(b.last_seen, c.material);
    }
}

#[test]
fn a_claim_delivers_only_a_pending_notice_and_only_once() {
    for c in all_states(6) {
        let mut a = c.clone();
        match a.claim(9) {
            None => {
                assert!(!c.is_pending());
                assert_eq!(a, c, "a settled cursor is left alone");
            }
            Some(claim) => {
                let mut acked = c.clone();
                let reopen = acked.acknowledge(9);
                assert_eq!(claim, Claim { since: c.last_seen, reopen });
                assert_eq!(a, acked, "a claim acknowledges");
                // A second claim of the same notice (another gateway's stale queue) gets only the
                // reopened remainder, never the same notice again.
                let mut again = a.clone();
                assert_eq!(again.claim(10).map(|c| c.since), reopen);
            }
        }
    }
}

#[test]
fn sweep_restores_exactly_the_pending_cursors() {
    for c in all_states(6) {
        let mut s = c.clone();
        let reopened = s.sweep(3);
        assert_eq!(reopened, c.is_pending().then_some(c.last_seen));
        if reopened.is_some() {
            assert_eq!(s.notified, c.material);
            let mut acked = s.clone();
            assert_eq!(acked.acknowledge(4), None);
            assert_eq!(acked.last_seen, c.material);
        } else {
            assert_eq!(s, c, "sweep leaves settled cursors alone");
        }
    }
}

#[test]
fn material_without_cursor_notifies_nobody() {
    assert_eq!(on_material(None, W, T, None, 5, S, 0), MaterialDecision::Skip(SkipReason::NotWatching));
}

#[test]
fn skips() {
    let c = cursor(1, 1, 1);
    assert_eq!(on_material(Some(&c), W, T, Some(W), 2, S, 0), MaterialDecision::Skip(SkipReason::SelfCaused));
    assert_eq!(
        on_material(Some(&c), W, T, Some("AGENT:MAIN:MAIN"), 2, S, 0),
        MaterialDecision::Skip(SkipReason::SelfCaused)
    );
    assert_eq!(on_material(Some(&c), W, W, None, 2, S, 0), MaterialDecision::Skip(SkipReason::SelfWatch));
    assert_eq!(
        on_material(Some(&c), "global", T, None, 2, S, 0),
        MaterialDecision::Skip(SkipReason::InvalidAddress)
    );
    assert_eq!(
        on_material(Some(&c), W, "global", None, 2, S, 0),
        MaterialDecision::Skip(SkipReason::InvalidAddress)
    );
    assert_eq!(
        on_material(Some(&c), W, T, None, 2, "store-b", 0),
        MaterialDecision::Skip(SkipReason::StoreReplaced)
    );
    let legacy = Cursor { store_path: None, ..c.clone() };
    assert_eq!(
        on_material(Some(&legacy), W, T, None, 2, S, 0),
        MaterialDecision::Skip(SkipReason::StoreReplaced)
    );
    assert!(matches!(
        on_material(Some(&c), W, T, Some("agent:other:main"), 2, S, 0),
        MaterialDecision::Notify(_)
    ));
}

#[test]
fn registration_keeps_upgrades_and_seeds() {
    let pending = cursor(2, 4, 6);
    assert_eq!(
        decide_registration(Some(&pending), W, T, Provenance::Explicit, S, 9, 0),
        RegisterDecision::Keep
    );
    let ambient = Cursor { provenance: Provenance::AmbientGroup, ..pending.clone() };
    assert_eq!(
        decide_registration(Some(&ambient), W, T, Provenance::Explicit, S, 9, 0),
        RegisterDecision::UpgradeToExplicit
    );
    assert_eq!(
        decide_registration(Some(&pending), W, T, Provenance::AmbientGroup, S, 9, 0),
        RegisterDecision::Keep,
        "ambient never downgrades explicit"
    );
    assert_eq!(
        decide_registration(None, W, T, Provenance::Explicit, S, 9, 5),
        RegisterDecision::Seed(Cursor::seeded(9, Provenance::Explicit, S, 5)),
        "a new watch starts at the current head"
    );
    assert_eq!(
        decide_registration(Some(&pending), W, T, Provenance::Explicit, "store-b", 9, 5),
        RegisterDecision::Seed(Cursor::seeded(9, Provenance::Explicit, "store-b", 5)),
        "a replaced store re-seeds"
    );
    assert_eq!(
        decide_registration(None, W, W, Provenance::Explicit, S, 9, 0),
        RegisterDecision::Refused(SkipReason::SelfWatch)
    );
    assert_eq!(
        decide_registration(None, W, "global", Provenance::Explicit, S, 9, 0),
        RegisterDecision::Refused(SkipReason::InvalidAddress)
    );
}

/// Port of client-go's `TestReinsert`: an item re-added while processing comes back exactly once
/// after `Done`, then the queue is empty.
#[test]
fn reinsert_while_processing() {
    let mut c = Cursor::seeded(3, Provenance::Explicit, S, 0);
    c = notify(Some(&c), 4); // Add
    assert_eq!((c.last_seen, c.notified), (3, 4));
    // Get: the notice is drained (processing); a change lands meanwhile (Add while processing).
    c = notify(Some(&c), 5);
    assert_eq!(c.notified, 4, "frozen while pending");
    // Done: acknowledge reopens exactly one notice for the remainder.
    assert_eq!(c.acknowledge(1), Some(4));
    // Get + Done again: nothing left.
    assert_eq!(c.acknowledge(2), None);
    assert!(!c.is_pending());
    assert_eq!(c.last_seen, 5);
}

/// In the spirit of client-go's `TestAddWhileProcessing`: producers add before and while the consumer
/// processes. The first add freezes N; anything after it (a burst before the drain, or work during it)
/// reopens exactly one notice on acknowledgement, never more, and the cursor always drains to the head.
#[test]
fn add_while_processing_drains() {
    let mut c = Cursor::seeded(0, Provenance::Explicit, S, 0);
    let mut seq = 0;
    for round in 0..200u64 {
        let before = round % 3;
        let during = (round / 3) % 3;
        for _ in 0..before {
            seq += 1;
            c = notify(Some(&c), seq);
        }
        if !c.is_pending() {
            continue;
        }
        let drained_since = c.last_seen; // the text the consumer saw
        for _ in 0..during {
            seq += 1;
            c = notify(Some(&c), seq);
        }
        let reopen = c.acknowledge(round as i64);
        assert_eq!(reopen.is_some(), before + during > 1, "reopen exactly when work followed the frozen N");
        if let Some(since) = reopen {
            assert!(since > drained_since, "the reopened notice starts after what was drained");
            assert_eq!(c.acknowledge(round as i64), None);
        }
        assert!(!c.is_pending());
        assert_eq!(c.last_seen, seq);
    }
}
