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
fn acknowledge_moves_through_the_present_and_never_reopens() {
    for c in all_states(6) {
        let mut a = c.clone();
        a.acknowledge(9);
        assert_eq!((a.last_seen, a.notified, a.material), (c.material, c.material, c.material), "L = N = M");
        assert!(!a.is_pending(), "work that arrived while the notice was pending is covered by it");
        assert_eq!(a.updated_at, 9);
        // The next material event opens exactly one fresh notice, from the acknowledged present.
        let next = notify(Some(&a), c.material + 1);
        assert_eq!((next.last_seen, next.notified), (c.material, c.material + 1));
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
            Some(since) => {
                assert_eq!(since, c.last_seen, "delivered at the changesSince it was pending at");
                let mut acked = c.clone();
                acked.acknowledge(9);
                assert_eq!(a, acked, "a claim acknowledges");
                // A second claim of the same notice (another gateway's stale queue, a second drain point
                // in the same turn) gets nothing.
                let mut again = a.clone();
                assert_eq!(again.claim(10), None);
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
            assert_eq!(s.last_seen, c.last_seen, "the swept notice's text is the one that was pending");
            let mut acked = s.clone();
            assert_eq!(acked.claim(4), Some(c.last_seen));
            assert_eq!(acked.last_seen, c.material);
            assert!(!acked.is_pending());
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
    let workspace = Cursor { provenance: Provenance::Workspace, ..pending.clone() };
    assert!(workspace.queue_only(), "a workspace watch never wakes its member");
    assert_eq!(
        decide_registration(Some(&workspace), W, T, Provenance::Explicit, S, 9, 0),
        RegisterDecision::UpgradeToExplicit,
        "an explicit sessions_watch of one's workspace makes it explicit"
    );
    assert_eq!(
        decide_registration(Some(&pending), W, T, Provenance::Workspace, S, 9, 0),
        RegisterDecision::Keep
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
/// after `Done`, then the queue is empty. Here `Get` is the drain, which claims (acknowledges through the
/// present) at once: the change that lands while the watcher processes is after the claim, so it opens
/// exactly one fresh notice.
#[test]
fn reinsert_while_processing() {
    let mut c = Cursor::seeded(3, Provenance::Explicit, S, 0);
    c = notify(Some(&c), 4); // Add
    assert_eq!((c.last_seen, c.notified), (3, 4));
    c = notify(Some(&c), 5); // Add again before Get: coalesced into the pending notice
    assert_eq!(c.notified, 4, "frozen while pending");
    // Get: the notice is drained and claimed, covering 4 and 5.
    assert_eq!(c.claim(1), Some(3));
    assert_eq!((c.last_seen, c.notified, c.material), (5, 5, 5));
    // Add while processing: one fresh notice.
    c = notify(Some(&c), 6);
    assert_eq!(c.claim(2), Some(5), "re-added exactly once");
    // Get again: nothing left.
    assert_eq!(c.claim(3), None);
    assert_eq!(c.last_seen, 6);
}

/// In the spirit of client-go's `TestAddWhileProcessing`: producers add before and while the consumer
/// processes. Everything added before a drain is one notice; anything added after the drain (while the
/// consumer works) is exactly one more, and the cursor always drains to the head.
#[test]
fn add_while_processing_drains() {
    let mut c = Cursor::seeded(0, Provenance::Explicit, S, 0);
    let mut seq = 0;
    for round in 0..200u64 {
        let before = round % 3;
        let during = (round / 3) % 3;
        let mut delivered = 0;
        for _ in 0..before {
            seq += 1;
            c = notify(Some(&c), seq);
        }
        let seen = c.last_seen;
        if let Some(since) = c.claim(round as i64) {
            assert_eq!(since, seen, "the notice says reconcile from what was acknowledged");
            delivered += 1;
        }
        for _ in 0..during {
            seq += 1;
            c = notify(Some(&c), seq);
        }
        if c.claim(round as i64).is_some() {
            delivered += 1;
        }
        assert_eq!(delivered, u64::from(before > 0) + u64::from(during > 0), "one notice per burst");
        assert!(!c.is_pending());
        assert_eq!(c.last_seen, seq);
    }
}
