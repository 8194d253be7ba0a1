//! Upstream awareness end to end: catalog, adoption and the monitor over real Claude Code, Codex,
//! OpenCode and Pi stores (copies of `crates/upstream/tests/fixtures` in a temporary HOME).

use crate::support::*;
use serde_json::{Value, json};
use sessionwatch_server::Config;
use sessionwatch_store::Links;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
#[path = "../../../upstream/tests/it/fixture_tree.rs"]
mod fixture_tree;
use fixture_tree::copy_dir;

const MAIN: &str = "agent:main:main";
const ECHO: &str = "Please   run the tests\nagain, then report.";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    Claude,
    Codex,
    OpenCode,
    Pi,
}

impl Src {
    fn cli(self) -> &'static str {
        match self {
            Src::Claude => "claude",
            Src::Codex => "codex",
            Src::OpenCode => "opencode",
            Src::Pi => "pi",
        }
    }

    /// The TUI session of each fixture.
    fn thread(self) -> &'static str {
        match self {
            Src::Claude => "5ae04bcf-dcae-4d38-b508-e94477a366c6",
            Src::Codex => "01a2361a-e5e2-70d2-8b99-d92b15fbab55",
            Src::OpenCode => "ses_dc9e48c29ffeenYd5m2nMLeVFi",
            Src::Pi => "01a2361b-e99f-7755-a26e-cb8e6819ce44",
        }
    }
}

fn fixture_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../upstream/tests/fixtures")
}

/// A writable HOME holding the fixture stores of `srcs`.
fn home_with(srcs: &[Src]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for s in srcs {
        copy_dir(&fixture_root().join(s.cli()).join("home"), dir.path());
    }
    dir
}

async fn harness_at(home: &Path) -> Harness {
    let h = Harness::start_with(Config::default(), None).await;
    h.set_home(home);
    h
}

async fn tick(h: &Harness) -> Value {
    let r = h.post("/v1/monitor/tick", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["skipped"], false);
    r.body
}

async fn catalog(h: &Harness) -> Vec<Value> {
    let r = h.request(reqwest::Method::GET, "/v1/catalog", None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["sessions"].as_array().unwrap().clone()
}

async fn adopt(h: &Harness, src: Src) -> Value {
    let r = h.post("/v1/catalog/continue", json!({ "catalogId": src.cli(), "threadId": src.thread() })).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

/// The catalog row of `src`'s thread.
async fn entry(h: &Harness, src: Src) -> Value {
    catalog(h)
        .await
        .into_iter()
        .find(|e| e["catalogId"] == src.cli() && e["threadId"] == src.thread())
        .unwrap_or_else(|| panic!("{src:?} thread not in the catalog"))
}

/// `src`'s thread adopted, then sent `message` by the main session, which watches it: where the thread's
/// file lies, and its session key.
async fn adopt_watched(h: &Harness, src: Src, message: &str) -> (PathBuf, String) {
    let location = PathBuf::from(entry(h, src).await["location"].as_str().unwrap());
    let key = adopt(h, src).await["sessionKey"].as_str().unwrap().to_string();
    h.tool(MAIN, "sessions_send", json!({ "sessionKey": key, "message": message, "watch": true })).await;
    (location, key)
}

/// Events of `key` after `since`.
async fn changes(h: &Harness, key: &str, since: u64) -> Vec<Value> {
    let s = h.tool(MAIN, "session_status", json!({ "sessionKey": key, "changesSince": since })).await;
    s["stateChanges"]["events"].as_array().cloned().unwrap_or_default()
}

async fn state_version(h: &Harness, key: &str) -> u64 {
    let s = h.tool(MAIN, "session_status", json!({ "sessionKey": key })).await;
    s["stateVersion"].as_u64().unwrap()
}

fn append(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

fn line(v: Value) -> Vec<u8> {
    format!("{v}\n").into_bytes()
}

const TS: &str = "2026-12-02T10:00:00.000Z";

/// A user turn in the source's own format (a human's, or ours echoed back when `text` is ours).
fn append_user(src: Src, location: &Path, text: &str, n: u32) {
    match src {
        Src::Claude => append(
            location,
            &line(json!({"type":"user","uuid":format!("u-new-{n}"),"sessionId":src.thread(),"timestamp":TS,
                "userType":"external","promptSource":"typed","origin":{"kind":"human"},
                "message":{"role":"user","content":text}})),
        ),
        Src::Codex => {
            let turn = format!("01a2361b-aaaa-7000-8000-00000000000{n}");
            let mut b = line(
                json!({"timestamp":TS,"type":"event_msg","payload":{"type":"task_started","turn_id":turn}}),
            );
            b.extend(line(
                json!({"timestamp":TS,"type":"response_item","payload":{"type":"message","role":"user",
                "content":[{"type":"input_text","text":text}]}}),
            ));
            b.extend(line(
                json!({"timestamp":TS,"type":"event_msg","payload":{"type":"item_completed","turn_id":turn,
                "item":{"type":"UserMessage","content":[{"type":"text","text":text}]}}}),
            ));
            append(location, &b);
        }
        Src::Pi => append(
            location,
            &line(json!({"type":"message","id":format!("n{n}"),"parentId":null,"timestamp":TS,
                "message":{"role":"user","content":[{"type":"text","text":text}],
                // Pi stamps each message in ms; the monitor's turn id is that stamp (`pi::turn_id`).
                "timestamp":1796205600000u64 + u64::from(n)}})),
        ),
        Src::OpenCode => {
            // OpenCode writes the user message with all its parts, then starts the reply: only then is
            // the user message known to be complete.
            opencode_message(location, "user", text, n);
            opencode_message(location, "assistant", "Hello from the fake LLM.", n + 100);
        }
    }
}

fn append_assistant(src: Src, location: &Path, n: u32) {
    let text = "Hello from the fake LLM. This is a fixed reply.";
    match src {
        Src::Claude => append(
            location,
            &line(json!({"type":"assistant","uuid":format!("a-new-{n}"),"timestamp":TS,
                "message":{"role":"assistant","content":[{"type":"text","text":text}]}})),
        ),
        Src::Codex => append(
            location,
            &line(
                json!({"timestamp":TS,"type":"response_item","payload":{"type":"message","role":"assistant",
                "content":[{"type":"output_text","text":text}]}}),
            ),
        ),
        Src::Pi => append(
            location,
            &line(json!({"type":"message","id":format!("a{n}"),"parentId":null,"timestamp":TS,
                "message":{"role":"assistant","content":[{"type":"text","text":text}]}})),
        ),
        Src::OpenCode => opencode_message(location, "assistant", text, n),
    }
}

/// One OpenCode message with one text part; the session's event sequence moves on.
fn opencode_message(db: &Path, role: &str, text: &str, n: u32) {
    let id = format!("msg_2361bffff{n:03}zzzzzzzzzzzzzz");
    let session = Src::OpenCode.thread();
    let created = 1_796_205_600_000u64 + u64::from(n);
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
        rusqlite::params![
            id,
            session,
            created as i64,
            json!({"role":role,"time":{"created":created}}).to_string()
        ],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
        rusqlite::params![format!("prt_new{n:03}"), id, session, created as i64, json!({"type":"text","text":text}).to_string()],
    )
    .unwrap();
    conn.execute("UPDATE event_sequence SET seq = seq + 2 WHERE aggregate_id = ?1", [session]).unwrap();
}

fn remove_source(src: Src, location: &Path) {
    match src {
        Src::OpenCode => {
            let conn = rusqlite::Connection::open(location).unwrap();
            conn.execute("DELETE FROM session WHERE id = ?1", [src.thread()]).unwrap();
        }
        _ => std::fs::remove_file(location).unwrap(),
    }
}

/// The whole story for one source.
async fn end_to_end(src: Src) {
    let home = home_with(&[src]);
    let h = harness_at(home.path()).await;

    // Catalog: the thread is listed, not adopted yet.
    let e = entry(&h, src).await;
    assert!(e.get("adopted").is_none(), "{e}");
    let location = PathBuf::from(e["location"].as_str().unwrap());

    // Adoption: an agent-qualified key, an `adopted` event, a link.
    let a = adopt(&h, src).await;
    let key = format!("agent:main:{}:{}", src.cli(), src.thread().to_ascii_lowercase());
    assert_eq!(a["sessionKey"], key);
    assert_eq!(a["linked"], true);
    assert_eq!(a["link"], "created");
    let adopted_events = changes(&h, &key, 0).await;
    assert!(
        adopted_events
            .iter()
            .any(|e| e["kind"] == "adopted" && e["summary"] == format!("adopted from {}", src.cli())),
        "{adopted_events:?}"
    );
    assert_eq!(entry(&h, src).await["adopted"], key);
    let link = h.gateway.store().get_link(key.clone(), "main".into()).await.unwrap().unwrap();
    assert_eq!(link.catalog_id, src.cli());
    assert_eq!(link.thread_id, src.thread());

    // An unwatched adopted session is not checked at all.
    assert_eq!(tick(&h).await["links"], 0);

    // The manager talks to it (our own text) and watches it.
    let sent =
        h.tool(MAIN, "sessions_send", json!({ "sessionKey": key, "message": ECHO, "watch": true })).await;
    assert_eq!(sent["watched"], true);

    // History before adoption never notifies.
    let t = tick(&h).await;
    assert_eq!(t["links"], 1, "{t}");
    assert_eq!(t["events"], 0, "{t}");
    assert!(h.turn(MAIN).await.is_empty());

    // A human types upstream: exactly one notice, and the event in changesSince.
    let before = state_version(&h, &key).await;
    append_user(src, &location, "A human typed this straight into the upstream CLI.", 1);
    let t = tick(&h).await;
    assert_eq!(t["events"], 1, "{t}");
    assert_eq!(t["humanTurns"], 1, "{t}");
    let notices = h.turn(MAIN).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains(&format!("\"{key}\"")), "{}", notices[0]);
    let since = since_of(&notices[0]);
    assert_eq!(since, before);
    let evs = changes(&h, &key, since).await;
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0]["kind"], "human_direct_message");
    assert_eq!(evs[0]["actorType"], "human");
    assert_eq!(evs[0]["summary"], format!("human message via {}", src.cli()));
    assert!(evs[0].get("payload").and_then(|p| p.get("turns")).is_none(), "a single turn has no burst count");

    // The marker moved: the same turn is not reported again.
    let t = tick(&h).await;
    assert_eq!(t["events"], 0, "{t}");
    assert!(h.turn(MAIN).await.is_empty());

    // Continuing the same source again keeps the marker (nothing re-reported, nothing skipped).
    append_user(src, &location, "Another human line, typed before the re-continue.", 2);
    let again = adopt(&h, src).await;
    assert_eq!(again["link"], "kept");
    assert_eq!(again["sessionKey"], key);
    let t = tick(&h).await;
    assert_eq!(t["events"], 1, "the turn typed before re-continuing is still seen: {t}");
    assert_eq!(h.turn(MAIN).await.len(), 1);

    // An assistant turn and our own text echoed back: nothing.
    append_assistant(src, &location, 3);
    append_user(src, &location, ECHO, 4);
    let t = tick(&h).await;
    assert_eq!(t["events"], 0, "{t}");
    assert!(h.turn(MAIN).await.is_empty(), "assistant turns and self-echo never notify");
    let v = state_version(&h, &key).await;

    // The source disappears: upstream_missing after the third check, not before.
    remove_source(src, &location);
    for n in 1..=2 {
        let t = tick(&h).await;
        assert_eq!(t["missing"], 1, "{t}");
        assert_eq!(t["removed"], 0, "{t}");
        assert!(h.turn(MAIN).await.is_empty(), "no notice after {n} missing checks");
        let l = h.gateway.store().get_link(key.clone(), "main".into()).await.unwrap().unwrap();
        assert_eq!(l.missing_streak, n);
    }
    assert_eq!(state_version(&h, &key).await, v);
    let t = tick(&h).await;
    assert_eq!(t["removed"], 1, "{t}");
    let notices = h.turn(MAIN).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    let evs = changes(&h, &key, since_of(&notices[0])).await;
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0]["kind"], "upstream_missing");
    assert_eq!(evs[0]["summary"], format!("upstream missing via {}", src.cli()));
    assert!(h.gateway.store().get_link(key.clone(), "main".into()).await.unwrap().is_none());

    // No link, no more checks.
    let t = tick(&h).await;
    assert_eq!(t["links"], 0, "{t}");
    assert!(h.turn(MAIN).await.is_empty());
}

/// One test per source, each named for it.
macro_rules! end_to_end_tests {
    ($($test:ident: $src:expr),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $test() {
                end_to_end($src).await;
            }
        )*
    };
}

end_to_end_tests! {
    claude_end_to_end: Src::Claude,
    codex_end_to_end: Src::Codex,
    opencode_end_to_end: Src::OpenCode,
    pi_end_to_end: Src::Pi,
}

#[tokio::test]
async fn a_burst_is_one_event_with_turns() {
    let home = home_with(&[Src::Pi]);
    let h = harness_at(home.path()).await;
    let (location, key) = adopt_watched(&h, Src::Pi, "hi").await;
    for n in 1..=3 {
        append_user(Src::Pi, &location, &format!("human line {n}"), n);
    }
    let t = tick(&h).await;
    assert_eq!(t["events"], 1, "{t}");
    assert_eq!(t["humanTurns"], 3, "{t}");
    let notices = h.turn(MAIN).await;
    assert_eq!(notices.len(), 1);
    let evs = changes(&h, &key, since_of(&notices[0])).await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0]["payload"]["turns"], 3);
}

/// A watched Claude session whose transcript was then deleted, with the bytes to put back.
struct Deleted {
    home: tempfile::TempDir,
    h: Harness,
    location: PathBuf,
    saved: Vec<u8>,
    key: String,
}

async fn watched_then_deleted() -> Deleted {
    let home = home_with(&[Src::Claude]);
    let h = harness_at(home.path()).await;
    let (location, key) = adopt_watched(&h, Src::Claude, "hi").await;
    let saved = std::fs::read(&location).unwrap();
    std::fs::remove_file(&location).unwrap();
    Deleted { home, h, location, saved, key }
}

#[tokio::test]
async fn missing_streak_survives_a_restart_and_continuing_again_makes_a_fresh_link() {
    let Deleted { home, h, location, saved, key } = watched_then_deleted().await;
    for _ in 0..2 {
        assert_eq!(tick(&h).await["missing"], 1);
    }
    assert!(h.turn(MAIN).await.is_empty());

    // Restart on the same database: the streak is durable, so one more check is the third.
    let dir = h.stop().await;
    let config = Config { data_dir: dir.path().to_path_buf(), ..Config::default() };
    let h = Harness::start_in(dir, config, None).await;
    h.set_home(home.path());
    let t = tick(&h).await;
    assert_eq!(t["removed"], 1, "{t}");
    let notices = h.turn(MAIN).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    let evs = changes(&h, &key, since_of(&notices[0])).await;
    assert_eq!(evs[0]["kind"], "upstream_missing");

    // The source comes back and is continued again: a fresh link with a fresh streak.
    std::fs::write(&location, &saved).unwrap();
    let a = adopt(&h, Src::Claude).await;
    assert_eq!(a["link"], "created");
    let l = h.gateway.store().get_link(key.clone(), "main".into()).await.unwrap().unwrap();
    assert_eq!(l.missing_streak, 0);
    assert_eq!(tick(&h).await["events"], 0, "re-baselined at the current end");
}

#[tokio::test]
async fn activity_resets_the_missing_streak() {
    let Deleted { home: _home, h, location, saved, key } = watched_then_deleted().await;
    tick(&h).await;
    tick(&h).await;
    // Back before the third check (e.g. a rename and back): the streak starts over.
    std::fs::write(&location, &saved).unwrap();
    append_user(Src::Claude, &location, "still here", 1);
    assert_eq!(tick(&h).await["events"], 1);
    let l = h.gateway.store().get_link(key.clone(), "main".into()).await.unwrap().unwrap();
    assert_eq!(l.missing_streak, 0);
    std::fs::remove_file(&location).unwrap();
    tick(&h).await;
    tick(&h).await;
    assert_eq!(h.turn(MAIN).await.len(), 1, "only the human turn's notice");
    assert_eq!(tick(&h).await["removed"], 1);
}

#[tokio::test]
async fn garbage_in_one_link_does_not_stop_another() {
    let home = home_with(&[Src::Claude, Src::Pi, Src::Codex]);
    let h = harness_at(home.path()).await;
    // Two Claude sessions, a Pi and a Codex session: three get garbage, one gets a human turn.
    let bad_claude = "dabdface-a74f-47e7-a565-02a8eb260f31";
    let r = h.post("/v1/catalog/continue", json!({ "catalogId": "claude", "threadId": bad_claude })).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let bad_key = r.body["sessionKey"].as_str().unwrap().to_string();
    let bad_loc = catalog(&h).await.into_iter().find(|e| e["threadId"] == bad_claude).unwrap()["location"]
        .as_str()
        .unwrap()
        .to_string();
    h.tool(MAIN, "sessions_send", json!({ "sessionKey": bad_key, "message": "hi", "watch": true })).await;
    let (good_loc, good_key) = adopt_watched(&h, Src::Claude, "hi").await;
    let (pi_loc, pi_key) = adopt_watched(&h, Src::Pi, "hi").await;
    let (codex_loc, codex_key) = adopt_watched(&h, Src::Codex, "hi").await;

    let mut garbage: Vec<u8> = b"\xff\xfe\x00 not json at all \xc3\x28\n".to_vec();
    garbage.extend(b"{\"type\":\"user\",\"message\":\n");
    garbage.extend(b"[1,2,3]\n");
    garbage.extend(line(json!({"type":"user","message":{"role":"user","content":12345}})));
    garbage.extend(line(
        json!({"type":"user","message":{"role":"user","content":"x".repeat(3 << 20)},"userType":"external"}),
    ));
    garbage.extend(vec![b'{'; 2 << 20]);
    garbage.push(b'\n');
    garbage.extend(vec![b'z'; 1 << 20]); // an unterminated tail
    for p in [Path::new(&bad_loc), pi_loc.as_path(), codex_loc.as_path()] {
        append(p, &garbage);
    }
    append_user(Src::Claude, &good_loc, "the good one", 1);

    let mut events = 0;
    for _ in 0..8 {
        let t = tick(&h).await;
        assert_eq!(t["links"], 4, "{t}");
        events += t["events"].as_u64().unwrap();
    }
    let notices = h.turn(MAIN).await;
    assert!(notices.iter().any(|n| n.contains(&format!("\"{good_key}\""))), "{notices:?}");
    let evs = changes(&h, &good_key, 0).await;
    assert_eq!(evs.iter().filter(|e| e["kind"] == "human_direct_message").count(), 1, "{evs:?}");
    // Whatever the garbage counted as, it never stopped the monitor (ticks kept answering) and every
    // link is still in place.
    assert!(events >= 1);
    for k in [&bad_key, &good_key, &pi_key, &codex_key] {
        assert!(h.gateway.store().get_link(k.to_string(), "main".into()).await.unwrap().is_some());
    }
}

#[tokio::test]
async fn ambiguous_keys_are_skipped() {
    let home = home_with(&[Src::Claude]);
    let h = harness_at(home.path()).await;
    let (location, key) = adopt_watched(&h, Src::Claude, "hi").await;
    let store = h.gateway.store();
    let mut other = store.get_link(key.clone(), "main".into()).await.unwrap().unwrap();
    other.agent_id = "ops".into();
    store.upsert_link(other).await.unwrap();
    append_user(Src::Claude, &location, "who owns this?", 1);
    let t = tick(&h).await;
    assert_eq!(t["ambiguous"], 2, "{t}");
    assert_eq!(t["events"], 0, "{t}");
    assert!(h.turn(MAIN).await.is_empty());
}

#[tokio::test]
async fn agent_qualified_adoption_and_bad_requests() {
    let home = home_with(&[Src::Codex]);
    let h = harness_at(home.path()).await;
    let r = h
        .post(
            "/v1/catalog/continue",
            json!({ "catalogId": "codex", "threadId": Src::Codex.thread(), "agentId": "ops" }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["sessionKey"], format!("agent:ops:codex:{}", Src::Codex.thread()));

    let bad = [
        (json!({ "catalogId": "emacs", "threadId": "x" }), 400, "invalid_argument"),
        (
            json!({ "catalogId": "codex", "threadId": "01a2361a-0000-0000-0000-000000000000" }),
            404,
            "not_found",
        ),
        (json!({ "catalogId": "claude", "threadId": "../../etc/passwd" }), 400, "invalid_argument"),
        (
            json!({ "catalogId": "codex", "threadId": Src::Codex.thread(), "agentId": "Bad Agent!" }),
            400,
            "invalid_argument",
        ),
        (json!({ "catalogId": "codex" }), 400, "invalid_argument"),
        (json!({ "catalogId": "codex", "threadId": "x", "extra": 1 }), 400, "invalid_argument"),
    ];
    for (body, status, kind) in bad {
        let r = h.post("/v1/catalog/continue", body.clone()).await;
        assert_eq!(r.status, status, "{body}: {}", r.body);
        assert_eq!(r.body["ok"], false);
        assert_eq!(r.body["error"]["type"], kind, "{body}");
    }
    // Discovery never writes: the store files are byte-identical after a catalog and a tick.
    let before = snapshot(home.path());
    catalog(&h).await;
    tick(&h).await;
    assert_eq!(snapshot(home.path()), before);
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(snapshot(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn the_background_monitor_ticks_on_its_own() {
    let home = home_with(&[Src::Pi]);
    let h = harness_at(home.path()).await;
    let (location, key) = adopt_watched(&h, Src::Pi, "hi").await;
    append_user(Src::Pi, &location, "typed while nobody ticked by hand", 1);
    let monitor = h.gateway.spawn_monitor(Duration::from_millis(20), Duration::from_millis(100));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut notices = vec![];
    while notices.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        notices = h.turn(MAIN).await;
    }
    monitor.abort();
    assert_eq!(notices.len(), 1, "the monitor recorded the turn on its own cadence");
    assert!(notices[0].contains(&format!("\"{key}\"")));
}

/// Issue 37 (an idle tick costs about a `stat()` per link): a tick reads our own texts (the self-echo
/// filter) only for a link whose source has new human rows. With the transcript table unreadable, idle
/// links are still checked; a link with a new human turn is left for the next tick (never counted
/// without the filter), and counted once the store answers again.
#[tokio::test]
async fn a_tick_reads_our_own_texts_only_for_links_with_new_human_rows() {
    let home = home_with(&[Src::Pi]);
    let h = harness_at(home.path()).await;
    let (location, _) = adopt_watched(&h, Src::Pi, ECHO).await;
    tick(&h).await;
    let db = rusqlite::Connection::open(h.dir.path().join("sessionwatch.db")).unwrap();
    db.execute_batch("ALTER TABLE session_messages RENAME TO messages_away;").unwrap();
    let idle = tick(&h).await;
    assert_eq!(
        (idle["checked"].clone(), idle["noChange"].clone(), idle["deferred"].clone()),
        (json!(1), json!(1), json!(0)),
        "{idle}"
    );

    append_user(Src::Pi, &location, ECHO, 1);
    append_user(Src::Pi, &location, "typed by the human", 2);
    let blind = tick(&h).await;
    assert_eq!((blind["events"].clone(), blind["deferred"].clone()), (json!(0), json!(1)), "{blind}");
    db.execute_batch("ALTER TABLE messages_away RENAME TO session_messages;").unwrap();
    let seen = tick(&h).await;
    assert_eq!(
        (seen["events"].clone(), seen["humanTurns"].clone()),
        (json!(1), json!(1)),
        "our echo is not a human turn: {seen}"
    );
}

/// Issue 37: ticks keep the watched links they read while the store answers that nothing changed, yet
/// each change is seen by the very next tick: a link added, re-pointed (its file moved) or removed, a
/// watch dropped or taken again; and the tick after a new turn at the new place still classifies it.
#[tokio::test]
async fn the_next_tick_sees_every_change_of_the_watched_links() {
    use sessionwatch_store::{LinkUpsert, UpstreamLinkRow};
    let home = home_with(&[Src::Claude, Src::Pi]);
    let h = harness_at(home.path()).await;
    let store = h.gateway.store();
    let (location, key) = adopt_watched(&h, Src::Claude, "hi").await;
    let counts = |t: &Value| (t["links"].clone(), t["noChange"].clone(), t["missing"].clone());
    assert_eq!(counts(&tick(&h).await), (json!(1), json!(1), json!(0)));
    assert_eq!(counts(&tick(&h).await), (json!(1), json!(1), json!(0)), "an idle tick");

    let (_, pi_key) = adopt_watched(&h, Src::Pi, "hi").await;
    assert_eq!(counts(&tick(&h).await), (json!(2), json!(2), json!(0)), "a link added");

    // The Claude file moves and its link follows it: the old place is not checked any more.
    let moved = location.with_file_name("moved.jsonl");
    std::fs::rename(&location, &moved).unwrap();
    let link = store.get_link(key.clone(), "main".into()).await.unwrap().unwrap();
    let reference = json!({ "filePath": moved.to_string_lossy() }).to_string();
    let repointed = UpstreamLinkRow { reference_json: reference, updated_at: link.updated_at + 1, ..link };
    assert_eq!(store.upsert_link(repointed).await.unwrap(), LinkUpsert::Rebaselined);
    assert_eq!(counts(&tick(&h).await), (json!(2), json!(2), json!(0)), "a link re-pointed");
    append_user(Src::Claude, &moved, "typed at the new place", 1);
    let t = tick(&h).await;
    assert_eq!((t["events"].clone(), t["humanTurns"].clone()), (json!(1), json!(1)), "{t}");
    assert_eq!(counts(&tick(&h).await), (json!(2), json!(2), json!(0)), "the marker advanced");

    assert!(store.delete_link(pi_key, "main".into()).await.unwrap());
    assert_eq!(counts(&tick(&h).await), (json!(1), json!(1), json!(0)), "a link removed");
    let r = h.tool(MAIN, "sessions_unwatch", json!({ "sessionKey": key })).await;
    assert_eq!(r["unwatched"], true);
    assert_eq!(counts(&tick(&h).await), (json!(0), json!(0), json!(0)), "a watch dropped");
    h.tool(MAIN, "sessions_send", json!({ "sessionKey": key, "message": "back", "watch": true })).await;
    assert_eq!(counts(&tick(&h).await), (json!(1), json!(1), json!(0)), "a watch taken again");
}

/// Issue 37: an idle tick asks the store whether the watched links changed instead of reading them
/// again. With the links' table unreadable the tick still checks the links it holds; a new link is
/// seen once the table is back.
#[tokio::test]
async fn an_idle_tick_does_not_read_the_links_again() {
    let home = home_with(&[Src::Claude, Src::Pi]);
    let h = harness_at(home.path()).await;
    adopt_watched(&h, Src::Claude, "hi").await;
    assert_eq!(tick(&h).await["checked"], 1);
    let db = rusqlite::Connection::open(h.dir.path().join("sessionwatch.db")).unwrap();
    db.execute_batch("ALTER TABLE session_upstream_links RENAME TO links_away;").unwrap();
    let idle = tick(&h).await;
    assert_eq!((idle["links"].clone(), idle["noChange"].clone()), (json!(1), json!(1)), "{idle}");
    db.execute_batch("ALTER TABLE links_away RENAME TO session_upstream_links;").unwrap();
    adopt_watched(&h, Src::Pi, "hi").await;
    assert_eq!(tick(&h).await["checked"], 2);
}

/// Issue 37: a tick that advanced a marker keeps the links it holds, changed as it changed the stored
/// one, instead of having the next tick read every link again. With the links' table unreadable the
/// next tick still checks its link; and what it holds is what is stored (the marker, and the version a
/// compare-and-set expects), so the next turn is counted once and its marker advances.
#[tokio::test]
async fn a_ticks_own_marker_advance_does_not_make_the_next_tick_read_the_links() {
    let home = home_with(&[Src::Claude]);
    let h = harness_at(home.path()).await;
    let (location, _) = adopt_watched(&h, Src::Claude, "hi").await;
    assert_eq!(tick(&h).await["checked"], 1);
    let applied = |t: &Value| {
        (t["events"].clone(), t["humanTurns"].clone(), t["advanced"].clone(), t["deferred"].clone())
    };
    append_user(Src::Claude, &location, "typed by the human", 1);
    let t = tick(&h).await;
    assert_eq!(applied(&t), (json!(1), json!(1), json!(1), json!(0)), "{t}");

    let db = rusqlite::Connection::open(h.dir.path().join("sessionwatch.db")).unwrap();
    db.execute_batch("ALTER TABLE session_upstream_links RENAME TO links_away;").unwrap();
    let idle = tick(&h).await;
    assert_eq!((idle["links"].clone(), idle["noChange"].clone()), (json!(1), json!(1)), "{idle}");
    db.execute_batch("ALTER TABLE links_away RENAME TO session_upstream_links;").unwrap();

    append_user(Src::Claude, &location, "typed again", 2);
    let t = tick(&h).await;
    assert_eq!(applied(&t), (json!(1), json!(1), json!(1), json!(0)), "{t}");
    let idle = tick(&h).await;
    assert_eq!((idle["noChange"].clone(), idle["deferred"].clone()), (json!(1), json!(0)), "{idle}");
}

/// Issue 37: a link with new human rows is checked again with our own texts only when we ever wrote into
/// its session (they tell our echoes from a human); for a session we never wrote to, the first pass's
/// answer stands, and each turn is counted once and its marker advanced.
#[tokio::test]
async fn a_session_we_never_wrote_to_is_counted_from_the_first_check() {
    let home = home_with(&[Src::Claude]);
    let h = harness_at(home.path()).await;
    let location = PathBuf::from(entry(&h, Src::Claude).await["location"].as_str().unwrap());
    let key = adopt(&h, Src::Claude).await["sessionKey"].as_str().unwrap().to_string();
    let watch = h.gateway.kernel().register_watch(MAIN, &key, sessionwatch_core::Provenance::Explicit).await;
    assert!(watch.is_watching(), "{watch:?}");
    assert_eq!(tick(&h).await["noChange"], 1);
    let before = state_version(&h, &key).await;
    for n in 1..=2 {
        append_user(Src::Claude, &location, &format!("typed by the human, turn {n}"), n);
        let t = tick(&h).await;
        let applied =
            (t["events"].clone(), t["humanTurns"].clone(), t["advanced"].clone(), t["deferred"].clone());
        assert_eq!(applied, (json!(1), json!(1), json!(1), json!(0)), "turn {n}: {t}");
    }
    let kinds: Vec<Value> = changes(&h, &key, before).await.iter().map(|e| e["kind"].clone()).collect();
    assert_eq!(kinds, [json!("human_direct_message"), json!("human_direct_message")]);
    assert_eq!(tick(&h).await["noChange"], 1);
}
