//! Conformance checks of the `SessionStore`: session pages, activity and inbox, the transcript, the
//! native state, and a delivered turn's one transaction.

use super::*;
use sessionwatch_store::{FinishRunRequest, RunRow};

/// An unfinished run `id` of `T`'s first incarnation, asked for by `W`.
fn run_of_t(id: &str, created_at: Millis) -> RunRow {
    RunRow {
        run_id: id.into(),
        session_key: T.into(),
        agent_id: AGENT.into(),
        session_id: format!("{T}-1"),
        requester: Some(W.into()),
        is_child: false,
        status: None,
        reply: None,
        superseded: false,
        created_at,
        finished_at: None,
    }
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
    use sessionwatch_store::{InboxItem, SessionActivity};
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
    let run = |id: &str, created_at: Millis| RunRow { is_child: true, ..run_of_t(id, created_at) };
    s.create_run(run("r1", NOW)).await.unwrap();
    let finish =
        FinishRunRequest { run_id: "r1".into(), status: "error".into(), reply: None, session_id: None };
    s.finish_run(finish, NOW + 1).await.unwrap();
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
    assert!(texts(T, 10).await.is_empty(), "an empty transcript");
    for i in 0..appended {
        s.append_message(T.into(), AGENT.into(), message(format!("m{i}")), NOW + i as i64).await.unwrap();
        if i == 0 {
            // SQLite answers an empty transcript from a probe on the calling thread: it sees the first
            // message as soon as it is written.
            assert_eq!(texts(T, 10).await, ["m0"], "the first message, at once");
        }
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

/// A session row read before a write reads as written after it, whichever write changed it, the one
/// hidden in a sweep included (it claims an unhosted pending watcher for its host): a backend that keeps
/// rows in memory must never answer one older than the last write.
pub async fn a_session_read_before_a_write_reads_as_written_after_it<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    ensure_session(s, T).await;
    let row = |k: &'static str| async move { s.get_session(k.into(), AGENT.into()).await.unwrap().unwrap() };
    assert_eq!(row(T).await.goal_objective, None);
    s.update_goal(T.into(), AGENT.into(), Some("ship".into()), Some("active".into()), NOW + 1).await.unwrap();
    assert_eq!(row(T).await.goal_objective.as_deref(), Some("ship"), "a goal");
    assert!(s.reset_session(T.into(), AGENT.into(), format!("{T}-2"), NOW + 2).await.unwrap());
    assert_eq!(row(T).await.session_id, format!("{T}-2"), "a reset");
    assert!(
        s.set_native_state(T.into(), AGENT.into(), Some("/w".into()), Some("running".into())).await.unwrap()
    );
    assert_eq!(row(T).await.native_state.as_deref(), Some("running"), "a native state");
    s.touch_session(T.into(), AGENT.into(), Some("host-1".into()), NOW + 3).await.unwrap();
    let touched = row(T).await;
    assert_eq!((touched.host_id.as_deref(), touched.updated_at), (Some("host-1"), NOW + 3), "a touch");
    let mut delivered = turn("hello", None);
    (delivered.session_id, delivered.touch, delivered.host_id) =
        (format!("{T}-2"), true, Some("host-2".into()));
    s.record_turn(delivered, NOW + 4).await.unwrap();
    let turned = row(T).await;
    assert_eq!((turned.host_id.as_deref(), turned.updated_at), (Some("host-2"), NOW + 4), "a turn");
    s.touch_session(T.into(), AGENT.into(), None, NOW + 5).await.unwrap();
    let touched = row(T).await;
    assert_eq!((touched.host_id.as_deref(), touched.updated_at), (Some("host-2"), NOW + 5), "no host: kept");

    ensure_session(s, W).await;
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    record(s, req(human(T)), NOW + 5).await;
    assert_eq!(row(W).await.host_id, None, "the watcher is hosted nowhere yet");
    s.sweep_for_host(STORE.into(), Some("host-3".into()), NOW + 6).await.unwrap();
    assert_eq!(row(W).await.host_id.as_deref(), Some("host-3"), "claimed by the sweep");
}

fn turn(text: &str, event: Option<AppendRequest>) -> sessionwatch_store::Turn {
    sessionwatch_store::Turn {
        session_key: T.into(),
        agent_id: AGENT.into(),
        session_id: format!("{T}-1"),
        text: text.into(),
        run_id: None,
        from_session: Some(W.into()),
        run: None,
        event,
        touch: false,
        host_id: None,
    }
}

/// A delivered turn writes its run, its event (with the notices it causes), the session's host, the
/// inbox item and the transcript message together, and answers the head its event left.
pub async fn a_turn_writes_its_run_event_host_inbox_and_message_together<S: Store>(h: &Harness<S>) {
    use sessionwatch_store::InboxItem;
    let s = &h.store;
    ensure_session(s, T).await;
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    let run = run_of_t("r1", NOW);
    let mut t = turn("hello", Some(req(human(T))));
    t.run_id = Some("r1".into());
    t.run = Some(run.clone());
    t.touch = true;
    t.host_id = Some("gw-a".into());
    let out = s.record_turn(t, NOW + 10).await.expect("turn");

    match out.event {
        Some(Ok(AppendOutcome::Recorded { event, notices })) => {
            assert_eq!((event.sequence, event.kind), (1, EventKind::HumanDirectMessage));
            assert_eq!(notices, vec![notice(W, T, 0)]);
        }
        other => panic!("expected a recorded event, got {other:?}"),
    }
    assert_eq!(out.head, Head { head: 1, floor: 0 });
    assert_eq!(head(s, T).await, out.head);
    assert_eq!(seqs(s, T).await, vec![1]);
    assert!(cursor(s, W, T).await.unwrap().is_pending(), "the watcher's notice is pending");
    assert_eq!(s.get_run("r1".into()).await.unwrap(), Some(run));
    let row = s.get_session(T.into(), AGENT.into()).await.unwrap().unwrap();
    assert_eq!((row.host_id.as_deref(), row.updated_at), (Some("gw-a"), NOW + 10), "touched");
    assert_eq!(
        s.pending_inbox(T.into(), AGENT.into()).await.unwrap(),
        vec![InboxItem {
            id: out.inbox_id,
            run_id: Some("r1".into()),
            from_session: Some(W.into()),
            text: "hello".into(),
            created_at: NOW + 10,
        }]
    );
    let messages = s.messages(T.into(), AGENT.into(), 10).await.unwrap();
    let shown: Vec<_> = messages
        .iter()
        .map(|m| (m.id, m.role.as_str(), m.text.as_str(), m.run_id.as_deref(), m.from_session.as_deref()))
        .collect();
    assert_eq!(shown, vec![(out.message_id, "user", "hello", Some("r1"), Some(W))]);
}

/// A turn whose event is not written (nobody watches, or its dedupe key was recorded) still delivers its
/// message, and leaves no head row behind; without `touch` the session row is left as it was.
pub async fn a_turn_keeps_its_delivery_when_its_event_is_not_written<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    ensure_session(s, T).await;
    let mut unwatched = req(human(T));
    unwatched.policy.only_if_watched = true;
    let out = s.record_turn(turn("first", Some(unwatched)), NOW + 10).await.expect("turn");
    assert!(matches!(out.event, Some(Ok(AppendOutcome::Unwatched))), "{:?}", out.event);
    assert_eq!(out.head, Head::default());
    assert!(s.state_versions(vec![(T.into(), AGENT.into())]).await.unwrap().is_empty(), "no head row");
    let row = s.get_session(T.into(), AGENT.into()).await.unwrap().unwrap();
    assert_eq!((row.host_id, row.updated_at), (None, NOW), "not touched");

    let deduped = || req(human(T).with_dedupe_key(Some("d1".into())));
    let (first, _) = record(s, deduped(), NOW + 11).await;
    let out = s.record_turn(turn("second", Some(deduped())), NOW + 12).await.expect("turn");
    match out.event {
        Some(Ok(AppendOutcome::Duplicate(existing))) => assert_eq!(*existing, first),
        other => panic!("expected Duplicate, got {other:?}"),
    }
    assert_eq!(out.head.head, 1);
    let out = s.record_turn(turn("third", None), NOW + 13).await.expect("turn");
    assert!(out.event.is_none());
    assert_eq!(out.head.head, 1, "a turn without an event answers the head as it is");

    let inbox = s.pending_inbox(T.into(), AGENT.into()).await.unwrap();
    assert_eq!(inbox.iter().map(|i| i.text.as_str()).collect::<Vec<_>>(), ["first", "second", "third"]);
    let messages = s.messages(T.into(), AGENT.into(), 10).await.unwrap();
    assert_eq!(messages.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), ["first", "second", "third"]);
}

/// An append that fails inside a turn rolls back alone: the turn commits its delivery (and its touch)
/// without the event, no head row or cursor moved (recording is best effort; the turn goes on).
pub async fn a_turn_whose_append_fails_delivers_without_it<S: Store>(h: &Harness<S>) {
    let s = &h.store;
    ensure_session(s, T).await;
    register(s, W, T, Provenance::Explicit, STORE, NOW).await;
    let (head_before, cursor_before) = (head(s, T).await, cursor(s, W, T).await);
    (h.fail_appends)(s);
    let mut t = turn("hello", Some(req(human(T))));
    t.touch = true;
    t.host_id = Some("gw-a".into());
    let out = s.record_turn(t, NOW + 10).await.expect("the turn commits");
    assert!(matches!(out.event, Some(Err(_))), "{:?}", out.event);
    assert_eq!((out.head, head(s, T).await), (head_before, head_before), "no head moved");
    assert_eq!(cursor(s, W, T).await, cursor_before, "no cursor moved");
    assert!(seqs(s, T).await.is_empty());
    let inbox = s.pending_inbox(T.into(), AGENT.into()).await.unwrap();
    assert_eq!(inbox.iter().map(|i| i.text.as_str()).collect::<Vec<_>>(), ["hello"]);
    let messages = s.messages(T.into(), AGENT.into(), 10).await.unwrap();
    assert_eq!(messages.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), ["hello"]);
    let row = s.get_session(T.into(), AGENT.into()).await.unwrap().unwrap();
    assert_eq!((row.host_id.as_deref(), row.updated_at), (Some("gw-a"), NOW + 10), "touched");
}
