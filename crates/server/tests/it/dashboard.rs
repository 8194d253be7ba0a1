//! The dashboard over HTTP: login and cookie, what the cookie opens and what it does not, the page a
//! notice links to, escaping of everything a client chose, and a snapshot of the pages for a fixed story.

use crate::support::{Harness, TOKEN, since_of};
use serde_json::json;
use sessionwatch_core::ManualClock;
use sessionwatch_server::Config;
use std::sync::Arc;

const MANAGER: &str = "agent:main:main";
const WORKER: &str = "agent:main:worker";

/// A browser-like client: no redirects followed, cookies sent by hand.
fn browser() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// A browser's `method` request to `path` carrying the login `cookie`.
fn with_cookie(h: &Harness, method: reqwest::Method, path: &str, cookie: &str) -> reqwest::RequestBuilder {
    browser().request(method, format!("{}{path}", h.base)).header("cookie", cookie)
}

fn enc_path(key: &str) -> String {
    percent_encoding::utf8_percent_encode(key, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Logs in with the form; answers the cookie pair (`name=value`).
async fn log_in(h: &Harness, token: &str) -> reqwest::Response {
    let body = format!("token={}&next=%2Fchat%2Fmain%2Fworker", enc_path(token));
    browser()
        .post(format!("{}/login", h.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap()
}

fn cookie_of(resp: &reqwest::Response) -> String {
    let set = resp.headers().get("set-cookie").expect("a cookie").to_str().unwrap().to_string();
    set.split(';').next().unwrap().to_string()
}

async fn get(h: &Harness, path: &str, cookie: Option<&str>) -> (u16, String, reqwest::header::HeaderMap) {
    let mut req = browser().get(format!("{}{path}", h.base));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    let resp = req.send().await.unwrap();
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    (status, resp.text().await.unwrap(), headers)
}

async fn get_bearer(h: &Harness, path: &str) -> (u16, String) {
    let resp = h.client.get(format!("{}{path}", h.base)).bearer_auth(TOKEN).send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The manager sends the worker a message and watches it; a human then types into the worker.
async fn story(h: &Harness) -> String {
    h.create(MANAGER).await;
    h.create(WORKER).await;
    h.tool(
        MANAGER,
        "sessions_send",
        json!({ "sessionKey": WORKER, "message": "do it", "timeoutSeconds": 0, "watch": true }),
    )
    .await;
    h.human_turn(WORKER, "stop, do the other thing").await;
    h.gateway
        .kernel()
        .peek(MANAGER)
        .into_iter()
        .map(|e| e.text)
        .find(|t| t.starts_with(&format!("Session \"{WORKER}\" changed")))
        .expect("a pending notice")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_need_a_login_and_the_cookie_opens_only_them() {
    let h = Harness::start().await;
    story(&h).await;
    let (status, _, headers) = get(&h, "/chat/main/worker?since=0", None).await;
    assert_eq!(status, 303, "no cookie: to the login page");
    assert_eq!(headers["location"], "/login?next=%2Fchat%2Fmain%2Fworker%3Fsince%3D0");
    let (status, page, _) = get(&h, "/login", None).await;
    assert_eq!(status, 200);
    assert!(page.contains("name=\"token\"") && page.contains("type=\"password\""), "{page}");

    let wrong = log_in(&h, "not-the-token").await;
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());
    assert!(wrong.text().await.unwrap().contains("Wrong token."));

    let ok = log_in(&h, TOKEN).await;
    assert_eq!(ok.status(), 303);
    assert_eq!(ok.headers()["location"], "/chat/main/worker");
    let set = ok.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"), "{set}");
    assert!(!set.contains(TOKEN), "the cookie is not the token");
    let cookie = cookie_of(&ok);

    let (status, page, headers) = get(&h, "/", Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(page.contains(WORKER));
    assert!(headers["content-security-policy"].to_str().unwrap().contains("script-src 'self'"));
    assert_eq!(headers["x-frame-options"], "DENY");

    // The cookie is for looking: the API's writing and reading routes still want the bearer token.
    let invoke = with_cookie(&h, reqwest::Method::POST, "/tools/invoke", &cookie)
        .json(&json!({ "tool": "sessions_list", "args": {} }))
        .send()
        .await
        .unwrap();
    assert_eq!(invoke.status(), 401);
    assert_eq!(get(&h, "/v1/catalog", Some(&cookie)).await.0, 401);
    let stream =
        with_cookie(&h, reqwest::Method::GET, "/v1/stream?include=changes", &cookie).send().await.unwrap();
    assert_eq!(stream.status(), 200, "the live stream opens with the cookie");
    drop(stream);

    // A bearer client sees the pages too; a forged cookie does not.
    assert_eq!(get_bearer(&h, "/").await.0, 200);
    assert_eq!(get(&h, "/", Some("sessionwatch_login=forged")).await.0, 303);

    let out = with_cookie(&h, reqwest::Method::POST, "/logout", &cookie).send().await.unwrap();
    assert_eq!(out.status(), 303);
    assert!(out.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
    assert_eq!(get(&h, "/", Some(&cookie)).await.0, 303, "logged out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_from_another_site_is_refused() {
    let h = Harness::start().await;
    let resp = browser()
        .post(format!("{}/login", h.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", "http://evil.example")
        .body(format!("token={TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert!(resp.headers().get("set-cookie").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_time_link_logs_in_once() {
    let h = Harness::start().await;
    let r = h.post("/v1/ui/login-links", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let path = r.body["path"].as_str().unwrap().to_string();
    assert!(path.starts_with("/login?code=") && !path.contains(TOKEN), "{path}");
    assert!(r.body["expiresInSeconds"].as_u64().unwrap() > 0);
    let (status, _, headers) = get(&h, &path, None).await;
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/");
    let cookie = headers["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    assert_eq!(get(&h, "/", Some(&cookie)).await.0, 200);
    let (again, page, _) = get(&h, &path, None).await;
    assert_eq!(again, 401, "used up");
    assert!(page.contains("used already or has expired"));
    // Only the bearer token issues links.
    let anon = with_cookie(&h, reqwest::Method::POST, "/v1/ui/login-links", &cookie).send().await.unwrap();
    assert_eq!(anon.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_in_a_notice_opens_that_sessions_page() {
    let h = Harness::start().await;
    let notice = story(&h).await;
    let link = notice.split("](").nth(1).unwrap().split(')').next().unwrap().to_string();
    assert_eq!(link, "/chat/main/worker");
    let (status, page) = get_bearer(&h, &link).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("human_direct_message"), "the timeline shows the human turn: {page}");
    assert!(page.contains("human message via telegram"), "{page}");
    assert!(!page.contains("stop, do the other thing"), "no message content on the page");
    assert!(page.contains("data-pending=\"true\""), "the manager's watch is pending");
    // The reconcile view answers what `session_status changesSince` would.
    let since = since_of(&notice);
    let (_, reconcile) = get_bearer(&h, &format!("{link}?since={since}")).await;
    assert!(reconcile.contains(&format!("changesSince {since}")), "{reconcile}");
    assert!(reconcile.contains("id=\"reconcile-events\""));
    // After the manager's turn, nothing is pending on either page.
    assert_eq!(h.turn(MANAGER).await.len(), 1);
    let (_, after) = get_bearer(&h, &link).await;
    assert!(!after.contains("data-pending=\"true\""), "acknowledged");
    let (_, manager) = get_bearer(&h, "/chat/main/main").await;
    assert!(manager.contains("Pending notices (0)"), "{manager}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_queries_and_unknown_sessions_are_refused() {
    let h = Harness::start().await;
    story(&h).await;
    for path in [
        "/?kind=bogus",
        "/?page=-1",
        "/?agent=a%20b",
        "/chat/main/worker?before=x",
        "/chat/main/worker?since=-3",
    ] {
        assert_eq!(get_bearer(&h, path).await.0, 400, "{path}");
    }
    assert_eq!(get_bearer(&h, "/chat/main/nobody").await.0, 404);
    assert_eq!(get_bearer(&h, "/?kind=main&agent=main&page=0").await.0, 200);
}

/// Every field a client chooses (session keys, labels, channels) is escaped wherever it appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_chosen_fields_are_escaped() {
    let h = Harness::start().await;
    let payloads = [
        "<script>alert(1)</script>",
        "\"><img/src=x/onerror=alert(1)>",
        "'><svg/onload=alert(1)>",
        "</textarea><b>bold</b>",
        "javascript:alert(1)",
        "&lt;already-escaped&gt;",
    ];
    h.create(MANAGER).await;
    for (i, p) in payloads.iter().enumerate() {
        let key = format!("agent:main:x{i}{}", p.replace(' ', ""));
        let r = h.post("/v1/sessions", json!({ "sessionKey": key, "label": p, "channel": p })).await;
        assert_eq!(r.status, 200, "{key}: {}", r.body);
        h.tool(
            MANAGER,
            "sessions_send",
            json!({ "sessionKey": key, "message": "m", "timeoutSeconds": 0, "watch": true }),
        )
        .await;
        let r = h
            .post(
                &format!("/v1/sessions/{}/inbound", enc_path(&key)),
                json!({ "text": "x", "channel": p, "actor": { "type": "human" } }),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let (status, page) = get_bearer(&h, &crate::support::chat_path(&key)).await;
        assert_eq!(status, 200, "{key}");
        assert_no_markup_from(p, &page);
    }
    let (_, overview) = get_bearer(&h, "/").await;
    let (_, manager) = get_bearer(&h, "/chat/main/main").await;
    for p in payloads {
        assert_no_markup_from(p, &overview);
        assert_no_markup_from(p, &manager);
    }
    assert!(overview.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "shown, escaped");
}

fn assert_no_markup_from(payload: &str, page: &str) {
    for needle in
        ["<script>alert", "<img/src", "<svg/onload", "<b>bold", "</textarea>", "&lt;already-escaped&gt;"]
    {
        if payload.contains(needle) {
            assert!(!page.contains(needle), "{needle:?} reached the page unescaped");
        }
    }
    assert!(!page.contains("href=\"javascript:"), "no javascript: links");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_of_a_fixed_story() {
    let clock = Arc::new(ManualClock::new(1_764_662_400_000));
    let h = Harness::start_with(Config::default(), Some(clock.clone())).await;
    story(&h).await;
    clock.advance(60_000);
    let (_, overview) = get_bearer(&h, "/").await;
    let (_, worker) = get_bearer(&h, "/chat/main/worker?since=0").await;
    // One element a line, so a change reads as a diff.
    insta::assert_snapshot!("dashboard_overview", overview.replace("><", ">\n<"));
    insta::assert_snapshot!("dashboard_worker", worker.replace("><", ">\n<"));
}

/// The timeline pages back, newest first, to the floor, and says where retention cut history off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_pages_back_to_a_pruned_floor() {
    let config = Config { retention_max_rows: 60, ..Config::default() };
    let h = Harness::start_with(config, None).await;
    story(&h).await;
    for i in 0..118 {
        h.human_turn(WORKER, &format!("turn {i}")).await;
    }
    h.gateway.kernel().prune_now().await.unwrap();
    let head = h.gateway.kernel().head(WORKER, "main").await.expect("head");
    assert_eq!(head.head, 120);
    assert!(head.floor > 0 && head.floor < 70, "some history was pruned: {head:?}");

    let sequences = |page: &str| -> Vec<u64> {
        page.split("class=\"event\" data-sequence=\"")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap().parse().unwrap())
            .collect()
    };
    let (_, newest) = get_bearer(&h, "/chat/main/worker").await;
    assert_eq!(sequences(&newest), (71..=120).rev().collect::<Vec<_>>(), "the newest 50, newest first");
    assert!(newest.contains("href=\"/chat/main/worker?before=71\""), "a link to older events");
    assert!(!newest.contains("id=\"pruned\""));

    let (_, oldest) = get_bearer(&h, "/chat/main/worker?before=71").await;
    assert_eq!(sequences(&oldest), (head.floor + 1..=70).rev().collect::<Vec<_>>(), "down to the floor");
    assert!(oldest.contains(&format!("History up to #{} was pruned", head.floor)), "the marker");
    assert!(!oldest.contains("?before=") || oldest.contains("rel=\"prev\""), "no older page past the floor");
    assert!(!oldest.contains("rel=\"next\""));

    // Reconciling from before the floor says so, as session_status does.
    let (_, gap) = get_bearer(&h, "/chat/main/worker?since=0").await;
    assert!(gap.contains("id=\"history-gap\""), "a history gap is shown");
}

/// An adopted session shows its source on the overview whether or not anybody watches it yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_names_the_source_of_an_unwatched_adopted_session() {
    let h = Harness::start().await;
    let key = "agent:main:claude:5ae04bcf";
    h.create(key).await;
    let link = sessionwatch_store::UpstreamLinkRow {
        session_key: key.into(),
        agent_id: "main".into(),
        catalog_id: "claude".into(),
        host_id: "gateway:local".into(),
        thread_id: "5ae04bcf".into(),
        upstream_kind: "claude-jsonl".into(),
        reference_json: "{}".into(),
        marker_json: "{}".into(),
        last_scanned_at: None,
        missing_streak: 0,
        created_at: 1,
        updated_at: 1,
    };
    use sessionwatch_store::Links;
    h.gateway.store().upsert_link(link).await.unwrap();
    let (_, overview) = get_bearer(&h, "/").await;
    assert!(overview.contains("claude-jsonl 5ae04bcf"), "{overview}");
}
