//! Conformance checks of what the dashboard and remote nodes read: watch edges, session pages, nodes.

use super::*;

pub async fn watch_edges_name_both_ends<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    register(s, W, T2, Provenance::AmbientGroup, STORE, NOW).await;
    register(s, W2, T, Provenance::Explicit, STORE, NOW).await;
    register(s, T2, W2, Provenance::Explicit, STORE, NOW).await;
    record(s, req(human(T)), NOW + 1).await;
    let ends = |edges: Vec<WatchEdge>| -> Vec<(String, String)> {
        edges.into_iter().map(|e| (e.watcher, e.target)).collect()
    };
    let of_t = s.watch_edges(vec![T.into()], 100).await.unwrap();
    assert_eq!(
        ends(of_t.clone()),
        vec![(W.to_string(), T.to_string()), (W2.to_string(), T.to_string())],
        "both watchers of T, ordered by watcher"
    );
    assert_eq!(lnm(&of_t[0].cursor), (0, 1, 1), "the cursor comes with the edge");
    let both = s.watch_edges(vec![W2.into(), T2.into()], 100).await.unwrap();
    assert_eq!(
        ends(both),
        vec![
            (W.to_string(), T2.to_string()),
            (W2.to_string(), T.to_string()),
            (T2.to_string(), W2.to_string()),
        ],
        "an edge with both ends in the set is answered once"
    );
    assert_eq!(s.watch_edges(vec![T.into()], 1).await.unwrap().len(), 1, "at most limit");
    assert!(s.watch_edges(vec![], 10).await.unwrap().is_empty());
    assert!(!of_t[0].spawned, "no session row names W as T's spawner");
    let child = NewSession {
        session_key: T.into(),
        agent_id: AGENT.into(),
        session_id: "t-1".into(),
        kind: "subagent".into(),
        spawned_by: Some(W2.into()),
        ..NewSession::default()
    };
    s.ensure_session(child, NOW).await.unwrap();
    let spawned: Vec<bool> =
        s.watch_edges(vec![T.into()], 100).await.unwrap().iter().map(|e| e.spawned).collect();
    assert_eq!(spawned, vec![false, true], "W2 spawned T, W only watches it");
}

pub async fn list_sessions_filters_by_agent_and_pages<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    for (i, k) in ["agent:main:a", "agent:ops:b", "agent:main:c", "agent:main:d"].iter().enumerate() {
        let k = key(k);
        let new = NewSession {
            session_key: k.as_str().into(),
            agent_id: k.agent_id().into(),
            session_id: format!("{k}-1"),
            kind: "other".into(),
            ..NewSession::default()
        };
        s.ensure_session(new, NOW + i as i64).await.unwrap();
    }
    let keys = |rows: Vec<SessionRow>| -> Vec<String> { rows.into_iter().map(|r| r.session_key).collect() };
    let main = SessionFilter { agent_id: Some("main".into()), limit: 10, ..SessionFilter::default() };
    assert_eq!(
        keys(s.list_sessions(main.clone()).await.unwrap()),
        vec!["agent:main:d", "agent:main:c", "agent:main:a"],
        "newest first, one agent"
    );
    let second_page = SessionFilter { offset: 1, limit: 1, ..main };
    assert_eq!(keys(s.list_sessions(second_page).await.unwrap()), vec!["agent:main:c"]);
    let past_the_end = SessionFilter { offset: 4, limit: 10, ..SessionFilter::default() };
    assert!(s.list_sessions(past_the_end).await.unwrap().is_empty());
    // Native sessions under way: a working directory, and not idle.
    s.set_native_state("agent:main:a".into(), "main".into(), Some("/w".into()), Some("running".into()))
        .await
        .unwrap();
    s.set_native_state("agent:main:c".into(), "main".into(), Some("/w".into()), None).await.unwrap();
    s.set_native_state("agent:main:d".into(), "main".into(), Some("/w".into()), Some("idle".into()))
        .await
        .unwrap();
    let active = SessionFilter { native_active: true, limit: 10, ..SessionFilter::default() };
    let mut found = keys(s.list_sessions(active).await.unwrap());
    found.sort();
    assert_eq!(found, vec!["agent:main:a", "agent:main:c"], "no idle one, none without a directory");
}

/// `sessions_list`'s run state and children, and `sessions_history`'s unread inbox (issue 33 item 10).
pub async fn session_activity_and_the_pending_inbox<S: Store>(h: &Harness<S>) {
    use sessionwatch_store::{InboxItem, RunRow, SessionActivity};
    let s = &h.store;
    let session = |k: &str, parent: Option<&str>| NewSession {
        session_key: k.into(),
        agent_id: AGENT.into(),
        session_id: format!("{k}-1"),
        kind: "other".into(),
        spawned_by: parent.map(str::to_string),
        ..NewSession::default()
    };
    s.ensure_session(session(W, None), NOW).await.unwrap();
    s.ensure_session(session(T2, Some(W)), NOW).await.unwrap();
    s.ensure_session(session(T, Some(W)), NOW).await.unwrap();
    let run = |id: &str, created_at: Millis| RunRow {
        run_id: id.into(),
        session_key: T.into(),
        agent_id: AGENT.into(),
        session_id: format!("{T}-1"),
        requester: Some(W.into()),
        is_child: true,
        status: None,
        reply: None,
        superseded: false,
        created_at,
        finished_at: None,
    };
    s.create_run(run("r1", NOW)).await.unwrap();
    s.finish_run("r1".into(), "error".into(), None, None, NOW + 1).await.unwrap();
    let ids = vec![(W.to_string(), AGENT.to_string()), (T.to_string(), AGENT.to_string())];
    let activity = s.session_activity(ids.clone()).await.unwrap();
    let mut children = vec![T.to_string(), T2.to_string()];
    children.sort();
    assert_eq!(
        activity.get(&ids[0]),
        Some(&SessionActivity { latest_run: None, children }),
        "W spawned both, ran nothing"
    );
    assert_eq!(activity[&ids[1]].latest_run, Some(Some("error".to_string())));
    s.create_run(run("r2", NOW + 2)).await.unwrap();
    let activity = s.session_activity(ids.clone()).await.unwrap();
    assert_eq!(activity[&ids[1]].latest_run, Some(None), "the latest run is running");
    assert!(s.session_activity(vec![]).await.unwrap().is_empty());

    let item = |text: &str| InboxItem {
        id: 0,
        run_id: Some("r2".into()),
        from_session: Some(W.into()),
        text: text.into(),
        created_at: NOW,
    };
    s.push_inbox(T.into(), AGENT.into(), item("first")).await.unwrap();
    s.push_inbox(T.into(), AGENT.into(), item("second")).await.unwrap();
    let texts = |items: Vec<InboxItem>| items.into_iter().map(|i| i.text).collect::<Vec<_>>();
    assert_eq!(texts(s.pending_inbox(T.into(), AGENT.into()).await.unwrap()), ["first", "second"]);
    assert_eq!(
        texts(s.pending_inbox(T.into(), AGENT.into()).await.unwrap()),
        ["first", "second"],
        "reading leaves it in place"
    );
    assert_eq!(texts(s.take_inbox(T.into(), AGENT.into()).await.unwrap()), ["first", "second"]);
    assert!(s.pending_inbox(T.into(), AGENT.into()).await.unwrap().is_empty());
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

/// `sessions_history` reads the transcript: the newest messages, oldest first, never more than
/// `TRANSCRIPT_CAP` however many were appended (the trim may run in steps, the answer may not show it).
pub async fn a_transcript_answers_its_newest_messages_up_to_the_cap<S: Store>(h: &Harness<S>) {
    use sessionwatch_store::TRANSCRIPT_CAP;
    let s = &h.store;
    let texts = |session: &str, limit: u32| {
        let session = session.to_string();
        async move {
            let answered = s.messages(session, AGENT.into(), limit).await.unwrap();
            answered.into_iter().map(|m| m.text).collect::<Vec<String>>()
        }
    };
    let cap = TRANSCRIPT_CAP as usize;
    let appended = cap + 150;
    for i in 0..appended {
        s.append_message(T.into(), AGENT.into(), message(format!("m{i}")), NOW + i as i64).await.unwrap();
        if i == 9 {
            let all: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
            assert_eq!(texts(T, 1_000).await, all, "under the cap: all");
        }
    }
    let newest: Vec<String> = (appended - cap..appended).map(|i| format!("m{i}")).collect();
    assert_eq!(texts(T, 10_000).await, newest, "the newest {cap}, oldest first");
    assert_eq!(texts(T, 3).await, newest[cap - 3..].to_vec());
    assert!(texts(T2, 10).await.is_empty(), "per session");
}

/// `sessionwatch sessions`: a native session's working directory and state are kept on its row, each
/// set alone, and a listing answers them (issue 34 item 5).
pub async fn native_state_and_cwd_are_kept_on_the_row<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    ensure_session(s, T).await;
    let row = || async { s.get_session(T.into(), AGENT.into()).await.unwrap().unwrap() };
    assert_eq!((row().await.cwd, row().await.native_state), (None, None), "nothing said yet");
    assert!(s.set_native_state(T.into(), AGENT.into(), Some("/w/a".into()), None).await.unwrap());
    assert!(s.set_native_state(T.into(), AGENT.into(), None, Some("running".into())).await.unwrap());
    let r = row().await;
    assert_eq!((r.cwd.as_deref(), r.native_state.as_deref()), (Some("/w/a"), Some("running")));
    assert_eq!(r.updated_at, NOW, "a state is not an update of the session");
    assert!(s.set_native_state(T.into(), AGENT.into(), None, Some("waiting".into())).await.unwrap());
    let listed = s.list_sessions(SessionFilter { limit: 10, ..SessionFilter::default() }).await.unwrap();
    let r = listed.iter().find(|r| r.session_key == T).unwrap();
    assert_eq!((r.cwd.as_deref(), r.native_state.as_deref()), (Some("/w/a"), Some("waiting")), "kept cwd");
    assert!(
        s.set_native_state(T.into(), AGENT.into(), None, Some("asleep".into())).await.is_err(),
        "a state the schema does not know is refused"
    );
    assert_eq!(row().await.native_state.as_deref(), Some("waiting"), "and changes nothing");
    assert!(!s.set_native_state(T2.into(), AGENT.into(), Some("/x".into()), None).await.unwrap(), "unknown");
}
