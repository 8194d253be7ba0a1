use super::*;
use sessionwatch_core::NewEvent;

fn event(key: &str, sequence: u64) -> StoredEvent {
    NewEvent::human_message(key, "main", "telegram", None).stored(sequence, 1_000)
}

fn row(head: u64, floor: u64) -> HeadRow {
    HeadRow { head, floor, updated_at: 0, head_id: head as i64, head_at: head as Millis }
}

fn fill(tail: &Tail, key: &str, from: u64, to: u64, floor: u64) {
    for s in from..=to {
        tail.committed(Arc::new(event(key, s)), row(s, floor));
    }
}

fn sequences(page: &ChangesPage) -> Vec<u64> {
    page.events.iter().map(|e| e.sequence).collect()
}

#[test]
fn a_recent_window_is_the_page_the_log_would_give() {
    let tail = Tail::default();
    fill(&tail, "agent:main:a", 1, 300, 0);
    let limit = Limit::new(200).unwrap();
    let page = tail.page("agent:main:a", "main", 100, limit, row(300, 0), None).expect("held");
    assert_eq!(sequences(&page), (101..=300).collect::<Vec<_>>());
    assert!(!page.truncated);
    let page = tail.page("agent:main:a", "main", 99, limit, row(300, 0), None).expect("held");
    assert_eq!(sequences(&page), (100..=299).collect::<Vec<_>>());
    assert!(page.truncated, "the 201st event is held, so truncation is known");
    assert_eq!(page.earliest_available_sequence, 1);
    assert!(!page.history_gap);
    let past_head = tail.page("agent:main:a", "main", u64::MAX, limit, row(300, 0), None).expect("held");
    assert!(past_head.events.is_empty());
}

#[test]
fn a_window_older_than_the_tail_falls_back() {
    let tail = Tail::default();
    fill(&tail, "agent:main:a", 1, 300, 0);
    let first = 300 - EVENTS_PER_SESSION as u64 + 1;
    let limit = Limit::new(10).unwrap();
    assert!(tail.page("agent:main:a", "main", first - 2, limit, row(300, 0), None).is_none());
    let page = tail.page("agent:main:a", "main", first - 1, limit, row(300, 0), None).expect("held");
    assert_eq!(page.events[0].sequence, first);
}

#[test]
fn a_durable_row_that_moved_on_is_not_answered_from_memory() {
    let tail = Tail::default();
    fill(&tail, "agent:main:a", 1, 5, 0);
    let limit = Limit::new(10).unwrap();
    assert!(
        tail.page("agent:main:a", "main", 0, limit, row(6, 0), None).is_none(),
        "another writer appended"
    );
    assert!(tail.page("agent:main:a", "main", 0, limit, row(5, 3), None).is_none(), "pruned elsewhere");
    let stale = HeadRow { updated_at: 99, ..row(5, 0) };
    assert!(
        tail.page("agent:main:a", "main", 0, limit, stale, None).is_none(),
        "its head row rewritten elsewhere"
    );
    let reappended = HeadRow { head_at: 99, ..row(5, 0) };
    assert!(
        tail.page("agent:main:a", "main", 0, limit, reappended, None).is_none(),
        "deleted and appended again"
    );
    let reappended = HeadRow { head_id: 99, ..row(5, 0) };
    assert!(
        tail.page("agent:main:a", "main", 0, limit, reappended, None).is_none(),
        "deleted and appended again"
    );
}

#[test]
fn a_gap_in_the_commits_starts_the_entry_over() {
    let tail = Tail::default();
    fill(&tail, "agent:main:a", 1, 5, 0);
    tail.committed(Arc::new(event("agent:main:a", 8)), row(8, 0)); // 6 and 7 were written by someone else
    let limit = Limit::new(10).unwrap();
    assert!(tail.page("agent:main:a", "main", 5, limit, row(8, 0), None).is_none());
    assert_eq!(sequences(&tail.page("agent:main:a", "main", 7, limit, row(8, 0), None).unwrap()), vec![8]);
}

#[test]
fn forget_and_clear_drop_entries_and_the_session_count_is_bounded() {
    let tail = Tail::default();
    let limit = Limit::new(10).unwrap();
    fill(&tail, "agent:main:a", 1, 2, 0);
    tail.forget("agent:main:a", "main");
    assert!(tail.page("agent:main:a", "main", 0, limit, row(2, 0), None).is_none());
    for i in 0..SESSIONS + 10 {
        fill(&tail, &format!("agent:main:s{i}"), 1, 1, 0);
    }
    let held: usize = tail.lock().values().map(HashMap::len).sum();
    assert_eq!(held, SESSIONS);
    let last = format!("agent:main:s{}", SESSIONS + 9);
    assert!(tail.page(&last, "main", 0, limit, row(1, 0), None).is_some(), "the newest entry is kept");
    tail.clear();
    assert!(tail.page(&last, "main", 0, limit, row(1, 0), None).is_none());
}

#[test]
fn a_page_is_served_unread_only_while_no_commit_came_after_its_check() {
    let tail = Tail::default();
    let limit = Limit::new(10).unwrap();
    fill(&tail, "agent:main:a", 1, 3, 0);
    assert!(tail.page_unchanged("agent:main:a", "main", 0, limit, 7).is_none(), "never checked");
    assert!(tail.page("agent:main:a", "main", 0, limit, row(3, 0), Some(7)).is_some(), "checked at 7");
    assert_eq!(sequences(&tail.page_unchanged("agent:main:a", "main", 1, limit, 7).unwrap()), vec![2, 3]);
    assert!(tail.page_unchanged("agent:main:a", "main", 0, limit, 8).is_none(), "a commit came since");
    assert!(
        tail.page("agent:main:a", "main", 0, limit, row(4, 0), Some(8)).is_none(),
        "a mismatch keeps no check"
    );
    assert!(tail.page_unchanged("agent:main:a", "main", 0, limit, 7).is_some(), "the earlier check stands");
    tail.committed(Arc::new(event("agent:main:a", 4)), row(4, 0));
    assert!(tail.page_unchanged("agent:main:a", "main", 0, limit, 7).is_none(), "an applied commit unchecks");
}
