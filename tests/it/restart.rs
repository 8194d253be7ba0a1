//! A pending notice survives a SIGKILL of the gateway, and comes back exactly once.

use crate::support::Server;
use serde_json::json;

const MAIN: &str = "agent:main:main";

#[tokio::test]
async fn pending_notice_survives_sigkill_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let child = server.spawn_child(MAIN).await;
    for i in 0..3 {
        let (status, _) = server
            .post(
                &format!("/v1/sessions/{}/inbound", child.replace(':', "%3A")),
                json!({ "text": format!("human {i}"), "channel": "telegram", "actor": { "type": "human" } }),
            )
            .await;
        assert_eq!(status, 200);
    }
    server.kill();

    let server = Server::start(dir.path());
    let notices = server.turn(MAIN).await;
    assert_eq!(notices.len(), 1, "the pending notice is back: {notices:?}");
    assert!(notices[0].contains(&child));
    server.kill();

    // Acknowledged before the kill: nothing comes back.
    let server = Server::start(dir.path());
    assert_eq!(server.turn(MAIN).await, Vec::<String>::new());
}

#[tokio::test]
async fn graceful_shutdown_on_sigterm_keeps_pending_notices() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path());
    let target = "agent:main:worker";
    let (status, _) = server.post("/v1/sessions", json!({ "sessionKey": target })).await;
    assert_eq!(status, 200);
    server.tool(MAIN, "sessions_send", json!({ "sessionKey": target, "message": "hi", "watch": true })).await;
    server
        .post(
            &format!("/v1/sessions/{}/inbound", target.replace(':', "%3A")),
            json!({ "text": "x", "channel": "slack" }),
        )
        .await;
    let pid = server.child.id() as i32;
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc_kill(pid, 15) }, 0);
    let status = server.child.wait().unwrap();
    assert!(status.success(), "a clean exit on SIGTERM: {status:?}");
    let server = Server::start(dir.path());
    assert_eq!(server.turn(MAIN).await.len(), 1);
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
