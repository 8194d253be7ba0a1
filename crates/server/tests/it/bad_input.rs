//! Malformed and hostile requests: each gets its status code and changes nothing.

use crate::support::*;
use reqwest::Method;
use serde_json::json;

/// Every row of every table, so "changed nothing" is checked on the database itself.
pub(crate) fn dump(h: &Harness) -> String {
    let conn = rusqlite::Connection::open(h.dir.path().join("sessionwatch.db")).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut out = String::new();
    for t in tables {
        let mut stmt = conn.prepare(&format!("SELECT * FROM {t} ORDER BY 1, 2")).unwrap();
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                Ok((0..n).map(|i| format!("{:?}", r.get_ref(i).unwrap())).collect::<Vec<_>>().join("|"))
            })
            .unwrap();
        for row in rows {
            out.push_str(&format!("{t}: {}\n", row.unwrap()));
        }
    }
    out
}

struct Case {
    name: &'static str,
    method: Method,
    path: String,
    body: Vec<u8>,
    token: Option<&'static str>,
    status: u16,
    error_type: Option<&'static str>,
    /// Extra headers; a `content-type` here replaces the default `application/json`.
    headers: Vec<(&'static str, &'static str)>,
}

impl Case {
    /// The case with one more header.
    fn with_header(mut self, name: &'static str, value: &'static str) -> Case {
        self.headers.push((name, value));
        self
    }
}

fn case(
    name: &'static str,
    method: Method,
    path: &str,
    body: impl Into<Vec<u8>>,
    status: u16,
    error_type: Option<&'static str>,
) -> Case {
    Case {
        name,
        method,
        path: path.to_string(),
        body: body.into(),
        token: Some(TOKEN),
        status,
        error_type,
        headers: Vec::new(),
    }
}

fn tool(name: &'static str, body: serde_json::Value, status: u16, error_type: Option<&'static str>) -> Case {
    case(name, Method::POST, "/tools/invoke", body.to_string(), status, error_type)
}

#[tokio::test]
async fn hostile_requests_get_clear_errors_and_change_nothing() {
    let h = Harness::start().await;
    let main = "agent:main:main";
    let child = h.spawn_child(main).await;
    h.human_turn(&child, "pending notice for main").await;
    let ch = enc(&child);
    let cases = vec![
        tool("malformed json", json!(null), 400, Some("invalid_request")),
        case(
            "truncated json",
            Method::POST,
            "/tools/invoke",
            "{\"tool\": \"session_status\"",
            400,
            Some("invalid_request_error"),
        ),
        case(
            "invalid utf-8",
            Method::POST,
            "/tools/invoke",
            b"{\"tool\": \"\xff\xfe\"}".to_vec(),
            400,
            Some("invalid_request_error"),
        ),
        case("array body", Method::POST, "/tools/invoke", "[1,2]", 400, Some("invalid_request")),
        tool("tool not a string", json!({ "tool": 5 }), 400, Some("invalid_request")),
        tool("missing tool", json!({ "args": {} }), 400, Some("invalid_request")),
        tool("unknown tool", json!({ "tool": "rm_rf", "args": {} }), 404, Some("not_found")),
        tool(
            "args not an object",
            json!({ "tool": "session_status", "args": 5 }),
            400,
            Some("invalid_request"),
        ),
        tool(
            "changesSince not a number",
            json!({ "tool": "session_status", "sessionKey": main, "args": { "sessionKey": child, "changesSince": "three" } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "negative changesSince",
            json!({ "tool": "session_status", "sessionKey": main, "args": { "sessionKey": child, "changesSince": -1 } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "huge changesSince",
            json!({ "tool": "session_status", "sessionKey": main, "args": { "sessionKey": child, "changesSince": 1e300 } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "fractional changesSince",
            json!({ "tool": "session_status", "sessionKey": main, "args": { "sessionKey": child, "changesSince": 1.5 } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "limit zero",
            json!({ "tool": "session_status", "sessionKey": main, "args": { "sessionKey": child, "changesSince": 0, "limit": 0 } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "limit 201",
            json!({ "tool": "session_status", "sessionKey": main, "args": { "sessionKey": child, "changesSince": 0, "limit": 201 } }),
            400,
            Some("tool_error"),
        ),
        // An unknown field is ignored (issue 33 item 10), but never excuses a known one of the wrong type.
        tool(
            "unknown field beside a wrong type",
            json!({ "tool": "sessions_send", "sessionKey": main, "args": { "sessionKey": child, "message": 5, "since": 1 } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "unknown session",
            json!({ "tool": "session_status", "sessionKey": main, "args": { "sessionKey": "agent:main:nobody" } }),
            404,
            Some("tool_error"),
        ),
        tool(
            "invalid key",
            json!({ "tool": "session_status", "sessionKey": main, "args": { "sessionKey": "agent::x" } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "key with spaces",
            json!({ "tool": "sessions_history", "sessionKey": main, "args": { "sessionKey": "agent:main:a b" } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "invalid caller",
            json!({ "tool": "sessions_list", "sessionKey": "agent:!!:x", "args": {} }),
            400,
            Some("tool_error"),
        ),
        tool(
            "send to unknown session",
            json!({ "tool": "sessions_send", "sessionKey": main, "args": { "sessionKey": "agent:main:nobody", "message": "hi", "watch": true } }),
            404,
            Some("tool_error"),
        ),
        tool(
            "send without message",
            json!({ "tool": "sessions_send", "sessionKey": main, "args": { "sessionKey": child } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "watch not a bool",
            json!({ "tool": "sessions_send", "sessionKey": main, "args": { "sessionKey": child, "message": "x", "watch": "yes" } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "spawn with a bad agent",
            json!({ "tool": "sessions_spawn", "sessionKey": main, "args": { "task": "x", "agentId": "Bad Agent!" } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "list with an unknown kind",
            json!({ "tool": "sessions_list", "sessionKey": main, "args": { "kinds": ["robots"] } }),
            400,
            Some("tool_error"),
        ),
        tool(
            "list limit zero",
            json!({ "tool": "sessions_list", "sessionKey": main, "args": { "limit": 0 } }),
            400,
            Some("tool_error"),
        ),
        case(
            "three megabytes",
            Method::POST,
            "/tools/invoke",
            format!("{{\"tool\":\"session_status\",\"args\":{{\"x\":\"{}\"}}}}", "a".repeat(3 * 1024 * 1024)),
            413,
            Some("invalid_request_error"),
        ),
        Case {
            token: None,
            ..tool("no token", json!({ "tool": "sessions_list" }), 401, Some("unauthorized"))
        },
        Case {
            token: Some("wrong"),
            ..tool("wrong token", json!({ "tool": "sessions_list" }), 401, Some("unauthorized"))
        },
        case("wrong method", Method::GET, "/tools/invoke", "", 405, None),
        case("wrong method on a host call", Method::GET, &format!("/v1/sessions/{ch}/turns"), "", 405, None),
        case(
            "turn on an unknown session",
            Method::POST,
            "/v1/sessions/agent%3Amain%3Anobody/turns",
            "{}",
            404,
            Some("not_found"),
        ),
        case(
            "turn with a body field",
            Method::POST,
            &format!("/v1/sessions/{}/turns", enc(main)),
            "{\"drain\":false}",
            400,
            Some("invalid_argument"),
        ),
        case(
            "inbound to an invalid key",
            Method::POST,
            "/v1/sessions/agent%3A%3A/inbound",
            "{\"text\":\"x\"}",
            400,
            Some("invalid_argument"),
        ),
        case(
            "inbound without text",
            Method::POST,
            &format!("/v1/sessions/{ch}/inbound"),
            "{\"channel\":\"x\"}",
            400,
            Some("invalid_argument"),
        ),
        case(
            "inbound with a bad actor",
            Method::POST,
            &format!("/v1/sessions/{ch}/inbound"),
            "{\"text\":\"x\",\"actor\":{\"type\":\"robot\"}}",
            400,
            Some("invalid_argument"),
        ),
        case(
            "goal with a number",
            Method::PUT,
            &format!("/v1/sessions/{ch}/goal"),
            "{\"objective\":7}",
            400,
            Some("invalid_argument"),
        ),
        case(
            "goal on an unknown session",
            Method::PUT,
            "/v1/sessions/agent%3Amain%3Anobody/goal",
            "{\"objective\":\"x\"}",
            404,
            Some("not_found"),
        ),
        case(
            "compaction without id",
            Method::POST,
            &format!("/v1/sessions/{ch}/compactions"),
            "{}",
            400,
            Some("invalid_argument"),
        ),
        case(
            "reset an unknown session",
            Method::POST,
            "/v1/sessions/agent%3Amain%3Anobody/reset",
            "",
            404,
            Some("not_found"),
        ),
        case(
            "delete an unknown session",
            Method::DELETE,
            "/v1/sessions/agent%3Amain%3Anobody",
            "",
            404,
            Some("not_found"),
        ),
        case(
            "run result with a bad status",
            Method::POST,
            "/v1/runs/r1/result",
            "{\"status\":\"great\"}",
            400,
            Some("invalid_argument"),
        ),
        case(
            "unknown run",
            Method::POST,
            "/v1/runs/r1/result",
            "{\"status\":\"ok\"}",
            404,
            Some("not_found"),
        ),
        case(
            "create with a bad agent id",
            Method::POST,
            "/v1/sessions",
            "{\"sessionKey\":\"x\",\"agentId\":\"-bad\"}",
            400,
            Some("invalid_argument"),
        ),
        case(
            "stream with an invalid key",
            Method::GET,
            "/v1/stream?sessionKey=agent%3A%3A",
            "",
            400,
            Some("invalid_argument"),
        ),
        case("unknown route", Method::GET, "/v2/everything", "", 404, None),
        case(
            "node name with a space",
            Method::POST,
            "/v1/nodes",
            r#"{"name":"build box"}"#,
            400,
            Some("invalid_argument"),
        ),
        case(
            "node name in capitals",
            Method::POST,
            "/v1/nodes",
            r#"{"name":"Box"}"#,
            400,
            Some("invalid_argument"),
        ),
        case("node without a name", Method::POST, "/v1/nodes", "{}", 400, Some("invalid_argument")),
        case(
            "node with an unknown field",
            Method::POST,
            "/v1/nodes",
            r#"{"name":"b","x":1}"#,
            400,
            Some("invalid_argument"),
        ),
        case("revoke an unknown node", Method::DELETE, "/v1/nodes/nobody", "", 404, Some("not_found")),
        case(
            "the admin token is not a node",
            Method::POST,
            "/v1/node/sync",
            r#"{"catalog":[]}"#,
            401,
            Some("unauthorized"),
        ),
        Case {
            token: None,
            ..case(
                "a node call without a token",
                Method::POST,
                "/v1/node/outcomes",
                "[]",
                401,
                Some("unauthorized"),
            )
        },
        case(
            "adoption on an unknown node",
            Method::POST,
            "/v1/catalog/continue",
            r#"{"catalogId":"claude","threadId":"5ae04bcf","node":"nobody"}"#,
            404,
            Some("not_found"),
        ),
        case(
            "adoption on a node with a bad thread id",
            Method::POST,
            "/v1/catalog/continue",
            r#"{"catalogId":"claude","threadId":"a b","node":"nobody"}"#,
            400,
            Some("invalid_argument"),
        ),
        case("dashboard with a bad kind", Method::GET, "/?kind=bogus", "", 400, None),
        case("login with a JSON body", Method::POST, "/login", r#"{"token":"x"}"#, 400, None)
            .with_header("content-type", "application/json"),
        case(
            "invalid utf-8 in the path",
            Method::POST,
            "/v1/sessions/agent%3Amain%3A%FF%FE/turns",
            "",
            400,
            Some("invalid_argument"),
        ),
        spawn_case("foreign host", 403, Some("forbidden")).with_header("host", "evil.example"),
        spawn_case("foreign origin", 403, Some("forbidden")).with_header("origin", "http://evil.example"),
        spawn_case("null origin", 403, Some("forbidden")).with_header("origin", "null"),
        spawn_case("text/plain body", 415, Some("unsupported_media_type"))
            .with_header("content-type", "text/plain"),
        spawn_case("form body", 415, Some("unsupported_media_type"))
            .with_header("content-type", "application/x-www-form-urlencoded"),
        spawn_case("empty content type", 415, Some("unsupported_media_type")).with_header("content-type", ""),
    ];
    let queue_before = h.gateway.kernel().peek(main);
    assert_eq!(queue_before.len(), 1);
    let before = dump(&h);
    for c in cases {
        let mut req =
            h.client.request(c.method.clone(), format!("{}{}", h.base, c.path)).body(c.body.clone());
        if let Some(t) = c.token {
            req = req.bearer_auth(t);
        }
        if !c.body.is_empty() && !c.headers.iter().any(|(k, _)| *k == "content-type") {
            req = req.header("content-type", "application/json");
        }
        for (k, v) in &c.headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        assert_eq!(status, c.status, "{}: {text}", c.name);
        if let Some(t) = c.error_type {
            let body: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|_| panic!("{}: not JSON: {text}", c.name));
            assert_eq!(body["ok"], false, "{}", c.name);
            assert_eq!(body["error"]["type"], t, "{}: {text}", c.name);
            assert!(!body["error"]["message"].as_str().unwrap().is_empty(), "{}", c.name);
        }
        assert_eq!(dump(&h), before, "{} changed the database", c.name);
        assert_eq!(h.gateway.kernel().peek(main), queue_before, "{} changed the queue", c.name);
    }
}

/// A valid spawn for `agent:main:main`: only the headers of the case make it invalid.
fn spawn_case(name: &'static str, status: u16, error_type: Option<&'static str>) -> Case {
    tool(
        name,
        json!({ "tool": "sessions_spawn", "sessionKey": "agent:main:main", "args": { "task": "x" } }),
        status,
        error_type,
    )
}

/// Issue 11 item 7: with `--auth none` on loopback, the cross-site request a web page can send
/// (a `text/plain` POST with a foreign Host and Origin) spawned a child. Each of its parts is refused.
#[tokio::test]
async fn cross_site_requests_are_refused_without_auth() {
    let dir = tempfile::tempdir().unwrap();
    let config = sessionwatch_server::Config { data_dir: dir.path().to_path_buf(), ..Default::default() };
    let h = Harness::start_with_token(dir, config, None, None).await;
    let body = r#"{"tool":"sessions_spawn","sessionKey":"agent:main:main","args":{"task":"x"}}"#;
    let send = |headers: &'static [(&'static str, &'static str)]| {
        let mut req = h.client.post(format!("{}/tools/invoke", h.base)).body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send()
    };
    let before = dump(&h);
    let attack: &[(&str, &str)] =
        &[("content-type", "text/plain"), ("host", "evil.example"), ("origin", "http://evil.example")];
    assert_eq!(send(attack).await.unwrap().status(), 403);
    let same_host_text: &[(&str, &str)] = &[("content-type", "text/plain")];
    assert_eq!(send(same_host_text).await.unwrap().status(), 415);
    let foreign_origin_json: &[(&str, &str)] =
        &[("content-type", "application/json"), ("origin", "http://evil.example")];
    assert_eq!(send(foreign_origin_json).await.unwrap().status(), 403);
    assert_eq!(dump(&h), before, "a refused cross-site request changed the database");
    // The same request from a loopback page of our own origin is served.
    let own_origin: &[(&str, &str)] =
        &[("content-type", "application/json; charset=utf-8"), ("origin", "http://127.0.0.1")];
    assert_eq!(send(own_origin).await.unwrap().status(), 200);
}

/// The `Bearer` scheme is case-insensitive (RFC 9110 §11.1); the token itself is not.
#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let h = Harness::start().await;
    for (auth, status) in [
        (format!("bearer {TOKEN}"), 200),
        (format!("BEARER  {TOKEN}"), 200),
        (format!("Bearer {}", TOKEN.to_uppercase()), 401),
        (format!("Basic {TOKEN}"), 401),
    ] {
        let resp = h
            .client
            .post(format!("{}/tools/invoke", h.base))
            .header("authorization", &auth)
            .json(&json!({ "tool": "sessions_list", "sessionKey": "agent:main:main" }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), status, "{auth}");
    }
}

/// Issue 11 item 2: a rejected tool call from a caller that does not exist yet used to create that
/// caller (a session row, a `created` event, a head row) before the target was resolved.
#[tokio::test]
async fn a_rejected_tool_call_from_a_new_caller_writes_nothing() {
    let h = Harness::start().await;
    let child = h.spawn_child("agent:main:main").await;
    let caller = "agent:evil:one";
    let rows = [
        ("unwatch an invalid key", json!({ "tool": "sessions_unwatch", "args": { "sessionKey": "agent:" } })),
        (
            "status of an invalid key",
            json!({ "tool": "session_status", "args": { "sessionKey": "agent::x" } }),
        ),
        (
            "status of an unknown session",
            json!({ "tool": "session_status", "args": { "sessionKey": "agent:main:nobody" } }),
        ),
        (
            "history of an invalid key",
            json!({ "tool": "sessions_history", "args": { "sessionKey": "agent:main:a b" } }),
        ),
        (
            "history of an unknown session",
            json!({ "tool": "sessions_history", "args": { "sessionKey": "agent:main:nobody" } }),
        ),
        (
            "send to an invalid key",
            json!({ "tool": "sessions_send", "args": { "sessionKey": "agent:", "message": "hi" } }),
        ),
        (
            "send to an unknown session",
            json!({ "tool": "sessions_send", "args": { "sessionKey": "agent:main:nobody", "message": "hi", "watch": true } }),
        ),
        ("send without a message", json!({ "tool": "sessions_send", "args": { "sessionKey": child } })),
        (
            "spawn with a bad agent",
            json!({ "tool": "sessions_spawn", "args": { "task": "x", "agentId": "Bad Agent!" } }),
        ),
        ("list with an unknown kind", json!({ "tool": "sessions_list", "args": { "kinds": ["robots"] } })),
    ];
    let before = dump(&h);
    for (name, mut body) in rows {
        body["sessionKey"] = caller.into();
        let reply = h.post("/tools/invoke", body).await;
        assert!(matches!(reply.status, 400 | 404), "{name}: {:?}", reply.body);
        assert_eq!(reply.body["error"]["type"], "tool_error", "{name}: {:?}", reply.body);
        assert_eq!(dump(&h), before, "{name} wrote to the database");
    }
    // The same caller with a valid call is created as before.
    let ok =
        h.post("/tools/invoke", json!({ "tool": "sessions_list", "sessionKey": caller, "args": {} })).await;
    assert_eq!(ok.status, 200);
    assert_ne!(dump(&h), before);
}
