//! The dashboard in a real headless Chromium (Debian's `chromium` and `chromedriver`, driven over
//! WebDriver by fantoccini) against `sessionwatch serve`: log in, open the link from a real notice, see
//! the timeline; a human turn posted over HTTP appears without a reload; the graph shows the pending
//! notice and clears it after the watcher's turn. Screenshots go to `target/browser-screenshots/`.
//! Skipped (and said so) without the browser, unless `SESSIONWATCH_REQUIRE_BROWSER=1` (CI).

use crate::support::Server;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const MANAGER: &str = "agent:main:main";
const WORKER: &str = "agent:main:worker";

fn tool_path(env: &str, default: &str) -> PathBuf {
    std::env::var_os(env).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(default))
}

struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn start_driver(chromedriver: &Path) -> (Driver, String) {
    let port = free_port();
    // Held by `Driver`, whose drop kills and waits for it.
    let driver = Driver(
        Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver"),
    );
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return (driver, url);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not start on {url}");
}

async fn browser(driver: &str, chromium: &Path, profile: &Path) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-quic", "--window-size=1280,1100", format!("--user-data-dir={}", profile.display()),
            ]
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(driver)
        .await
        .expect("a WebDriver session")
}

/// Polls `script` (a JS expression) in the page until it is true.
async fn wait_for(c: &Client, what: &str, script: &str) {
    for _ in 0..100 {
        if c.execute(&format!("return !!({script});"), vec![]).await.unwrap() == Value::Bool(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let html = c.source().await.unwrap_or_default();
    panic!("timed out waiting for {what} ({script}); the page:\n{html}");
}

async fn screenshot(c: &Client, name: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("browser-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = c.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

async fn inbound(s: &Server, key: &str) {
    let (status, body) = s
        .post(
            &format!("/v1/sessions/{}/inbound", key.replace(':', "%3A")),
            json!({ "text": "a human types", "channel": "telegram", "actor": { "type": "human" } }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_real_browser() {
    let chromium = tool_path("SESSIONWATCH_CHROMIUM", "/usr/bin/chromium");
    let chromedriver = tool_path("SESSIONWATCH_CHROMEDRIVER", "/usr/bin/chromedriver");
    let required = std::env::var("SESSIONWATCH_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
    if !chromium.exists() || !chromedriver.exists() {
        assert!(!required, "Chromium and ChromeDriver are required: {chromium:?}, {chromedriver:?}");
        eprintln!("SKIPPED: no {chromium:?} or {chromedriver:?} (apt-get install chromium chromium-driver)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    let (status, _) = s.post("/v1/sessions", json!({ "sessionKey": MANAGER })).await;
    assert_eq!(status, 200);
    let (status, _) = s.post("/v1/sessions", json!({ "sessionKey": WORKER, "label": "worker" })).await;
    assert_eq!(status, 200);
    s.tool(
        MANAGER,
        "sessions_send",
        json!({ "sessionKey": WORKER, "message": "go", "timeoutSeconds": 0, "watch": true }),
    )
    .await;
    let mut manager_stream = s.stream(MANAGER).await;
    inbound(&s, WORKER).await;
    // The real notice, as the manager's stream carries it.
    let notice = loop {
        let (event, data) = tokio::time::timeout(Duration::from_secs(10), manager_stream.recv())
            .await
            .expect("a notice")
            .unwrap();
        if event == "notice" {
            break data["text"].as_str().unwrap().to_string();
        }
    };
    let link = notice.split("](").nth(1).unwrap().split(')').next().unwrap().to_string();

    let (_driver, driver_url) = start_driver(&chromedriver).await;
    let profile = tempfile::tempdir().unwrap();
    let c = browser(&driver_url, &chromium, profile.path()).await;

    // Not logged in: the notice's link leads to the login form, and back to the page after it.
    c.goto(&format!("{}{link}", s.base)).await.unwrap();
    wait_for(&c, "the login form", "document.querySelector('input[name=token]')").await;
    c.find(Locator::Css("input[name=token]")).await.unwrap().send_keys(&s.token).await.unwrap();
    c.find(Locator::Css("form.login button")).await.unwrap().click().await.unwrap();
    wait_for(&c, "the session page", "document.getElementById('session-key')").await;
    assert_eq!(c.current_url().await.unwrap().path(), link);
    let key = c.find(Locator::Id("session-key")).await.unwrap().text().await.unwrap();
    assert_eq!(key, WORKER);
    let timeline = c.find(Locator::Id("timeline")).await.unwrap().text().await.unwrap();
    assert!(timeline.contains("human_direct_message"), "{timeline}");
    assert!(!c.source().await.unwrap().contains("a human types"), "no message content on the page");
    let cookies = c.get_all_cookies().await.unwrap();
    let login = cookies.iter().find(|k| k.name() == "sessionwatch_login").expect("the login cookie");
    assert_eq!(login.http_only(), Some(true));
    assert_ne!(login.value(), s.token, "the cookie is not the token");
    screenshot(&c, "session").await;

    // Live: a human turn posted over HTTP appears without a reload.
    wait_for(&c, "the live stream", "document.body.dataset.liveReady === 'true'").await;
    c.execute("window.__noReload = true; return true;", vec![]).await.unwrap();
    inbound(&s, WORKER).await;
    wait_for(&c, "the new event", "document.querySelector('#timeline li[data-sequence=\"3\"]')").await;
    assert_eq!(c.execute("return window.__noReload === true;", vec![]).await.unwrap(), Value::Bool(true));
    screenshot(&c, "session-live").await;

    // The graph shows the manager's pending notice and clears it after the manager's turn.
    c.goto(&format!("{}/", s.base)).await.unwrap();
    let pending_edge = format!("#watch-graph g.edge[data-watcher=\"{MANAGER}\"][data-target=\"{WORKER}\"]");
    wait_for(
        &c,
        "the pending edge",
        &format!("document.querySelector('{pending_edge}[data-pending=\"true\"]')"),
    )
    .await;
    wait_for(&c, "the live stream", "document.body.dataset.liveReady === 'true'").await;
    screenshot(&c, "overview-pending").await;
    c.execute("window.__noReload = true; return true;", vec![]).await.unwrap();
    // The human typed again after the notice was queued: one turn takes one notice covering both, and
    // the next turn finds nothing (acknowledged through the present).
    assert_eq!(s.turn(MANAGER).await.len(), 1);
    assert!(s.turn(MANAGER).await.is_empty());
    wait_for(
        &c,
        "the edge to clear",
        &format!("document.querySelector('{pending_edge}[data-pending=\"false\"]')"),
    )
    .await;
    assert_eq!(c.execute("return window.__noReload === true;", vec![]).await.unwrap(), Value::Bool(true));
    screenshot(&c, "overview-acknowledged").await;
    c.close().await.unwrap();
}
