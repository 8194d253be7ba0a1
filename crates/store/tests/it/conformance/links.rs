//! Conformance checks of `Links`: upstream links and their markers, remote nodes.

use super::*;
use sessionwatch_store::LinkVersion;

/// T's link as last written at `updated_at`.
fn t_at(updated_at: Millis) -> LinkVersion {
    LinkVersion { session_key: T.into(), agent_id: AGENT.into(), updated_at }
}

pub async fn nodes_are_found_by_token_and_revoked<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    assert!(s.create_node("buildbox".into(), "hash-b".into(), NOW).await.unwrap());
    assert!(s.create_node("laptop".into(), "hash-l".into(), NOW + 1).await.unwrap());
    assert!(!s.create_node("buildbox".into(), "hash-other".into(), NOW).await.unwrap(), "the name is taken");
    let found = s.node_by_token("hash-b".into()).await.unwrap().expect("by its token");
    assert_eq!((found.name.as_str(), found.last_seen_at), ("buildbox", None));
    assert_eq!(s.node_by_token("hash-other".into()).await.unwrap(), None, "a refused token is not kept");
    assert!(s.touch_node("buildbox".into(), NOW + 5).await.unwrap());
    assert!(!s.touch_node("nobody".into(), NOW + 5).await.unwrap());
    let names: Vec<(String, Option<Millis>)> =
        s.list_nodes().await.unwrap().into_iter().map(|n| (n.name, n.last_seen_at)).collect();
    assert_eq!(names, vec![("buildbox".to_string(), Some(NOW + 5)), ("laptop".to_string(), None)]);
    assert!(s.revoke_node("buildbox".into()).await.unwrap());
    assert!(!s.revoke_node("buildbox".into()).await.unwrap());
    assert_eq!(s.node_by_token("hash-b".into()).await.unwrap(), None, "a revoked token opens nothing");
    assert!(
        s.create_node("buildbox".into(), "hash-b2".into(), NOW).await.unwrap(),
        "the name can be issued again"
    );
}

/// A link keeps its marker for the same source and starts again for another; the marker advances and the
/// missing streak is stored only against the `updated_at` the caller read.
pub async fn links_keep_their_marker_by_compare_and_set<S: Store>(h: &Harness<S>) {
    use sessionwatch_store::{LinkUpsert, UpstreamLinkRow};
    let s = &h.store;
    let link = UpstreamLinkRow {
        session_key: T.into(),
        agent_id: AGENT.into(),
        catalog_id: "claude".into(),
        host_id: "local".into(),
        thread_id: "thread-1".into(),
        upstream_kind: "claude".into(),
        reference_json: r#"{"path":"/a"}"#.into(),
        marker_json: r#"{"offset":1}"#.into(),
        last_scanned_at: None,
        missing_streak: 0,
        created_at: NOW,
        updated_at: NOW,
    };
    let get = || async { s.get_link(T.into(), AGENT.into()).await.unwrap() };
    assert_eq!(s.upsert_link(link.clone()).await.unwrap(), LinkUpsert::Created);
    assert_eq!(get().await, Some(link.clone()));
    let same = UpstreamLinkRow { marker_json: r#"{"offset":9}"#.into(), updated_at: NOW + 1, ..link.clone() };
    assert_eq!(s.upsert_link(same).await.unwrap(), LinkUpsert::Kept);
    assert_eq!(get().await, Some(link.clone()), "the same source keeps its marker");

    assert!(!s.advance_link_marker(t_at(NOW + 5), "{}".into(), NOW + 6).await.unwrap());
    assert!(s.advance_link_marker(t_at(NOW), r#"{"offset":2}"#.into(), NOW + 6).await.unwrap());
    assert!(!s.set_link_missing_streak(t_at(NOW), 3).await.unwrap(), "a stale read");
    assert!(s.set_link_missing_streak(t_at(NOW + 6), 3).await.unwrap());
    let advanced = get().await.unwrap();
    assert_eq!(
        (
            advanced.marker_json.as_str(),
            advanced.last_scanned_at,
            advanced.updated_at,
            advanced.missing_streak
        ),
        (r#"{"offset":2}"#, Some(NOW + 6), NOW + 6, 3)
    );
    assert!(s.advance_link_marker(t_at(NOW + 6), r#"{"offset":3}"#.into(), NOW + 7).await.unwrap());
    assert_eq!(get().await.unwrap().missing_streak, 0, "an advance resets the streak");

    let moved = UpstreamLinkRow { thread_id: "thread-2".into(), updated_at: NOW + 8, ..link.clone() };
    assert_eq!(s.upsert_link(moved.clone()).await.unwrap(), LinkUpsert::Rebaselined);
    assert_eq!(get().await, Some(moved), "another source starts from its own marker");

    assert!(s.watched_links().await.unwrap().is_empty(), "nobody watches T");
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    let keys = |links: Vec<UpstreamLinkRow>| links.into_iter().map(|l| l.session_key).collect::<Vec<_>>();
    assert_eq!(keys(s.watched_links().await.unwrap()), [T]);
    assert_eq!(keys(s.links_of_host("local".into()).await.unwrap()), [T]);
    assert!(s.links_of_host("elsewhere".into()).await.unwrap().is_empty());
    assert!(s.delete_link(T.into(), AGENT.into()).await.unwrap());
    assert!(!s.delete_link(T.into(), AGENT.into()).await.unwrap());
    assert_eq!(get().await, None);
}

/// `watched_links_since` reads the links again after every change `watched_links` depends on (a link
/// written or removed, a watch of a linked session registered or dropped), each answer exactly
/// `watched_links`; while nothing of that changed (a cursor moved by an append, a watch of a session
/// without a link) a backend that keeps a version answers `Unchanged`.
pub async fn watched_links_since_reads_again_after_every_change<S: Store>(h: &Harness<S>) {
    use sessionwatch_store::{UpstreamLinkRow, WatchedLinks};
    let s = &h.store;
    let link = |key: &str| UpstreamLinkRow {
        session_key: key.into(),
        agent_id: AGENT.into(),
        catalog_id: "claude".into(),
        host_id: "local".into(),
        thread_id: format!("thread-of-{key}"),
        upstream_kind: "claude".into(),
        reference_json: format!(r#"{{"filePath":"/{key}"}}"#),
        marker_json: r#"{"offset":1}"#.into(),
        last_scanned_at: None,
        missing_streak: 0,
        created_at: NOW,
        updated_at: NOW,
    };
    // A change: the links are read again, as `watched_links` answers them.
    let read = |known: Option<i64>| async move {
        match s.watched_links_since(known).await.unwrap() {
            WatchedLinks::Read { links, version } => {
                assert_eq!(links, s.watched_links().await.unwrap());
                (links, version)
            }
            WatchedLinks::Unchanged => panic!("a change answered Unchanged (held version {known:?})"),
        }
    };
    // No change: `Unchanged` when there is a version to hold.
    let unchanged = |known: Option<i64>| async move {
        match s.watched_links_since(known).await.unwrap() {
            WatchedLinks::Unchanged => assert!(known.is_some(), "Unchanged without a version"),
            WatchedLinks::Read { links, version: None } => {
                assert_eq!(links, s.watched_links().await.unwrap())
            }
            read => panic!("nothing changed since version {known:?}: {read:?}"),
        }
    };
    let keys = |links: &[UpstreamLinkRow]| links.iter().map(|l| l.session_key.clone()).collect::<Vec<_>>();

    let (links, v) = read(None).await;
    assert!(links.is_empty());
    unchanged(v).await;
    s.upsert_link(link(T)).await.unwrap();
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    let (links, v) = read(v).await;
    assert_eq!(keys(&links), [T]);
    unchanged(v).await;

    // Neither a cursor's moves nor a watch of a session without a link change what is watched.
    append(s, req(human(T)), NOW + 1).await;
    assert_eq!(lnm(&cursor(s, W, T).await.unwrap()).2, 1, "the append moved the cursor");
    register(s, W2, T2, Provenance::Explicit, STORE, NOW).await;
    unchanged(v).await;

    assert!(s.advance_link_marker(t_at(NOW), r#"{"offset":2}"#.into(), NOW + 2).await.unwrap());
    let (links, v) = read(v).await;
    assert_eq!(links[0].marker_json, r#"{"offset":2}"#);
    assert!(s.set_link_missing_streak(t_at(NOW + 2), 1).await.unwrap());
    let (links, v) = read(v).await;
    assert_eq!(links[0].missing_streak, 1);
    s.upsert_link(link(T2)).await.unwrap();
    let (links, v) = read(v).await;
    assert_eq!(keys(&links), [T, T2], "T2 is watched by W2");
    let moved = UpstreamLinkRow { reference_json: r#"{"filePath":"/moved"}"#.into(), ..link(T2) };
    s.upsert_link(moved).await.unwrap();
    let (links, v) = read(v).await;
    assert_eq!(links[1].reference_json, r#"{"filePath":"/moved"}"#);
    assert!(s.unwatch(W.into(), T.into()).await.unwrap());
    let (links, v) = read(v).await;
    assert_eq!(keys(&links), [T2]);
    register(s, W, T, Provenance::Explicit, STORE, NOW + 3).await;
    let (links, v) = read(v).await;
    assert_eq!(keys(&links), [T, T2]);
    assert!(s.delete_link(T2.into(), AGENT.into()).await.unwrap());
    let (links, v) = read(v).await;
    assert_eq!(keys(&links), [T]);
    unchanged(v).await;
}
