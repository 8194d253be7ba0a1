//! The CLI as a user runs it: `demo`, `db …`, and client commands against a running gateway.

use crate::support::{Server, bin};
use std::process::Command;

fn run(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(bin()).args(args).envs(env.iter().copied()).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn demo_tells_the_story() {
    let (ok, out, err) = run(&["demo"], &[]);
    assert!(ok, "{err}");
    assert!(out.contains("exactly one notice"));
    assert!(out.contains("changed (other actor)"));
    assert!(out.contains("\"historyGap\": false"));
    // Each notice as the watcher sees it: plain text, not only inside escaped JSON.
    assert_eq!(out.matches("\n   Session \"agent:main:subagent:").count(), 2, "{out}");
    assert!(out.contains("sessionwatch demo --open"));
}

#[test]
fn db_commands_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("log.db");
    let db = db.to_str().unwrap();
    let (ok, out, err) = run(&["db", "--db", db, "--json", "record", "agent:main:worker", "human"], &[]);
    assert!(ok, "{err}");
    assert!(out.contains("\"recorded\": false"), "an unwatched human turn writes nothing: {out}");
    let (ok, out, _) =
        run(&["db", "--db", db, "--json", "watch", "agent:main:main", "agent:main:worker"], &[]);
    assert!(ok && out.contains("\"watched\": true"), "{out}");
    for _ in 0..3 {
        let (ok, out, _) = run(
            &["db", "--db", db, "--json", "record", "agent:main:worker", "human", "--channel", "slack"],
            &[],
        );
        assert!(ok && out.contains("\"recorded\": true"), "{out}");
    }
    let (ok, out, _) = run(&["db", "--db", db, "--json", "drain", "agent:main:main"], &[]);
    assert!(ok);
    assert_eq!(out.matches("changed (other actor)").count(), 1, "{out}");
    assert!(out.contains("changesSince 0"));
    let (ok, out, _) = run(&["db", "--db", db, "--json", "status", "agent:main:worker", "--since", "1"], &[]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["stateVersion"], 3);
    assert_eq!(v["stateChanges"]["events"].as_array().unwrap().len(), 2);
    let (ok, _, _) = run(&["db", "--db", db, "prune"], &[]);
    assert!(ok);
    // A corrupt file is refused, not replaced.
    let bad = dir.path().join("bad.db");
    std::fs::write(&bad, b"definitely not sqlite").unwrap();
    let (ok, _, err) = run(&["db", "--db", bad.to_str().unwrap(), "status", "agent:main:x"], &[]);
    assert!(!ok);
    assert!(err.contains("not a usable sessionwatch database"), "{err}");
    assert_eq!(std::fs::read(&bad).unwrap(), b"definitely not sqlite");
}

/// Regression: `db --db postgres://…` took the URL for a file path, made a `postgres:` directory in the
/// working directory and a SQLite database inside it, and answered as if it had used the shared state.
#[test]
fn db_commands_refuse_a_postgres_url() {
    let dir = tempfile::tempdir().unwrap();
    for url in ["postgres://postgres@127.0.0.1:5432/test", "postgresql://db-host/sessionwatch"] {
        for args in [vec!["record", "agent:main:worker", "human"], vec!["status", "agent:main:worker"]] {
            let out =
                Command::new(bin()).current_dir(dir.path()).args(["db", "--db", url]).args(&args).output();
            let out = out.unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{url} {args:?}");
            assert!(err.contains("works on a SQLite file"), "{err}");
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing was created");
}

#[tokio::test]
async fn client_commands_against_a_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let data = dir.path().to_str().unwrap().to_string();
    let url = server.base.clone();
    // The subcommand first, then the connection flags, then its own arguments.
    let cli = move |args: &[&str]| {
        let out = Command::new(bin())
            .arg(args[0])
            .args(["--url", url.as_str(), "--data-dir", data.as_str()])
            .args(&args[1..])
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (ok, out) = cli(&["create", "agent:main:worker", "--json"]);
    assert!(ok, "{out}");
    let (ok, out) = cli(&["send", "agent:main:worker", "hello", "--watch", "--as", "agent:main:main"]);
    assert!(ok, "{out}");
    assert!(out.contains("watched: true"), "{out}");
    let (ok, _) = cli(&["inbound", "agent:main:worker", "a human", "--channel", "slack"]);
    assert!(ok);
    let (ok, out) = cli(&["turn", "agent:main:main"]);
    assert!(ok);
    assert!(out.contains("changed (other actor)"), "{out}");
    let (ok, out) = cli(&["status", "agent:main:worker", "--since", "0"]);
    assert!(ok);
    assert!(out.contains("Session state changes:"), "{out}");
    let (ok, _) = cli(&["status", "agent:main:nobody"]);
    assert!(!ok, "an unknown session is an error exit");
}

/// Runs `sessionwatch` to completion, or fails if it is still running after 20 s (it served instead
/// of refusing).
fn run_expecting_exit(args: &[&str]) -> (bool, String) {
    let mut child = Command::new(bin())
        .args(args)
        .env("SESSIONWATCH_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("{args:?} kept running: {}", String::from_utf8_lossy(&out.stdout));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Issue 11: a second `serve` on the same SQLite file used to start and silently split notices between
/// two processes. It refuses, naming the holder; after a kill -9 of the first, a restart works.
#[test]
fn a_second_gateway_on_one_sqlite_file_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let first = Server::start(dir.path());
    let data_dir = dir.path().to_str().unwrap();
    let (ok, out) = run_expecting_exit(&["serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir]);
    assert!(!ok, "{out}");
    assert!(!out.contains("listening on"), "{out}");
    assert!(out.contains("another sessionwatch gateway"), "{out}");
    assert!(out.contains(&format!("pid {}", first.child.id())), "{out}");
    let db = dir.path().join("sessionwatch.db");
    let (ok, out) =
        run_expecting_exit(&["db", "--db", db.to_str().unwrap(), "watch", "agent:main:a", "agent:main:b"]);
    assert!(!ok && out.contains("another sessionwatch gateway"), "a writing db command refuses too: {out}");
    // `db status` writes too (its kernel sweeps and prunes at start): it refuses, and says how to read.
    let (ok, out) = run_expecting_exit(&["db", "--db", db.to_str().unwrap(), "status", "agent:main:a"]);
    assert!(!ok && out.contains("another sessionwatch gateway"), "{out}");
    assert!(out.contains("sessionwatch status KEY"), "{out}");
    first.kill();
    drop(Server::start(dir.path()));
}

/// Issue 11 item 1: a foreign SQLite file (here: only a view) was opened; the gateway printed
/// "listening" and answered 500, and `db status` created our schema inside it.
#[test]
fn a_foreign_sqlite_file_is_refused_by_serve_and_db_status() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessionwatch.db");
    rusqlite::Connection::open(&db).unwrap().execute_batch("CREATE VIEW answers AS SELECT 42 AS n;").unwrap();
    let before = std::fs::read(&db).unwrap();
    let (ok, out) =
        run_expecting_exit(&["serve", "--listen", "127.0.0.1:0", "--data-dir", dir.path().to_str().unwrap()]);
    assert!(!ok && !out.contains("listening on"), "{out}");
    assert!(out.contains("not a usable sessionwatch database") && out.contains("answers"), "{out}");
    let (ok, out) = run_expecting_exit(&["db", "--db", db.to_str().unwrap(), "status", "agent:main:a"]);
    assert!(!ok && out.contains("not a usable sessionwatch database"), "{out}");
    assert!(std::fs::read(&db).unwrap() == before, "the file is untouched");
    assert!(!dir.path().join("sessionwatch.db-wal").exists());
}

/// Runs `sessionwatch hook <event>` with `stdin` and a fresh data dir (never the user's); answers
/// (exit ok, stdout, stderr).
fn hook(args: &[&str], stdin: &str) -> (bool, String, String) {
    let home = tempfile::tempdir().unwrap();
    hook_in(home.path(), args, stdin, &[])
}

/// Runs `sessionwatch hook <event>` with `stdin`, the data dir `home` and `env`, no SESSIONWATCH_URL.
pub fn hook_in(
    home: &std::path::Path,
    args: &[&str],
    stdin: &str,
    env: &[(&str, &str)],
) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new(bin())
        .arg("hook")
        .args(args)
        .env("SESSIONWATCH_HOME", home)
        .env_remove("SESSIONWATCH_URL")
        .env_remove("SESSIONWATCH_DATA_DIR")
        .env_remove("SESSIONWATCH_LISTEN")
        .env_remove("SESSIONWATCH_CONFIG")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const STOP: &str = r#"{"session_id":"c1714f83-3b2e-4f0e-9d51-7a1f3c9e2b10","transcript_path":"/h/.claude/projects/p/c1714f83-3b2e-4f0e-9d51-7a1f3c9e2b10.jsonl","hook_event_name":"Stop","stop_hook_active":false}"#;

/// A hook never breaks the agent that runs it: gateway down, bad stdin or a gateway that never answers
/// give exit 0 and one line on stderr; stdout carries nothing but, when the gateway cannot be reached,
/// the user's one `systemMessage` line (each case runs in a fresh data dir: its first report).
#[test]
fn the_hook_command_never_fails_the_agent() {
    const GEMINI_BEFORE_AGENT: &str = r#"{"session_id":"fb2901fb-5c2e-4a7d-9b1e-3c4d5e6f7a8b","transcript_path":"/h/.gemini/tmp/demo/chats/session-2026-12-05T00-09-fb2901fb.jsonl","cwd":"/h/demo","hook_event_name":"BeforeAgent","timestamp":"2026-12-05T00:09:58.817Z","prompt":"hi"}"#;
    // Nothing listens on this port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    // Accepts and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let closed_url = format!("http://{closed}");
    let cases: Vec<(&str, Vec<&str>, &str, &str)> = vec![
        (
            "gateway down",
            vec!["Stop", "--url", &closed_url, "--token", "t"],
            STOP,
            "cannot reach the gateway",
        ),
        ("not JSON", vec!["Stop", "--url", &closed_url, "--token", "t"], "{oops", "not a JSON object"),
        ("empty stdin", vec!["Stop", "--url", &closed_url, "--token", "t"], "", "not a JSON object"),
        (
            "wrong event",
            vec!["UserPromptSubmit", "--url", &closed_url, "--token", "t"],
            STOP,
            "started for UserPromptSubmit",
        ),
        (
            "unknown cli",
            vec!["Stop", "--agent", "cursor", "--url", &closed_url],
            STOP,
            "--agent must be claude, codex or gemini",
        ),
        (
            "gemini, gateway down",
            vec!["BeforeAgent", "--agent", "gemini", "--url", &closed_url, "--token", "t"],
            GEMINI_BEFORE_AGENT,
            "cannot reach the gateway",
        ),
        (
            "silent gateway",
            vec!["Stop", "--url", &silent_url, "--token", "t", "--timeout-ms", "300"],
            STOP,
            "gave up after 300 ms",
        ),
    ];
    for (name, args, stdin, want) in cases {
        let started = std::time::Instant::now();
        let (ok, out, err) = hook(&args, stdin);
        assert!(ok, "{name}: exit 0");
        if matches!(name, "gateway down" | "silent gateway" | "gemini, gateway down") {
            let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON line");
            let line = v["systemMessage"].as_str().unwrap();
            assert!(line.contains("cannot reach the gateway") && !line.contains('\n'), "{name}: {line}");
            assert_eq!(v.as_object().unwrap().len(), 1, "{name}: nothing for the model: {out}");
        } else {
            assert_eq!(out, "", "{name}: nothing on stdout");
        }
        assert_eq!(err.lines().count(), 1, "{name}: one line on stderr: {err:?}");
        assert!(err.contains(want), "{name}: {err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{name}: bounded");
    }
}

/// With a gateway up, the hook prints what the CLI reads: a Stop with nothing pending prints nothing;
/// a prompt is recorded at once.
/// A CLI that never closes the hook's stdin: the hook gives up at its deadline and exits 0, instead of
/// waiting at exit for a read that never ends (tokio's stdin read on its blocking pool, which the
/// runtime's shutdown waited for).
#[test]
fn a_hook_whose_stdin_stays_open_gives_up_and_exits() {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin())
        .args(["hook", "Stop", "--url", "http://127.0.0.1:9", "--token", "t", "--timeout-ms", "300"])
        .env("SESSIONWATCH_HOME", home.path())
        .env_remove("SESSIONWATCH_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Held open, never written, until the hook has exited.
    let _stdin = child.stdin.take().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the hook still waits for its stdin after 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gave up after 300 ms"), "{err}");
    assert!(out.stdout.is_empty(), "nothing for the model");
}

#[test]
fn the_hook_command_talks_to_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let session = "c1714f83-3b2e-4f0e-9d51-7a1f3c9e2b10";
    let prompt = format!(
        r#"{{"session_id":"{session}","transcript_path":"{}/t/{session}.jsonl","hook_event_name":"UserPromptSubmit","prompt_id":"p1","prompt":"typed"}}"#,
        dir.path().display()
    );
    let conn = ["--url", &server.base, "--token", &server.token, "--agent", "claude"];
    let (ok, out, err) = hook(&[&["UserPromptSubmit"][..], &conn].concat(), &prompt);
    assert!(ok && out.is_empty() && err.is_empty(), "{out} {err}");
    let (ok, out, err) = hook(&[&["Stop"][..], &conn].concat(), STOP);
    assert!(ok && out.is_empty() && err.is_empty(), "{out} {err}");
    let (ok, out, err) =
        hook(&["Stop", "--url", &server.base, "--token", "wrong", "--agent", "claude"], STOP);
    assert!(ok && err.contains("401"), "a refused call is one stderr line: {out} {err}");
    assert!(
        out.contains("systemMessage") && out.contains("refused this hook"),
        "and the user is told: {out}"
    );
    let (ok, out, _) = run(
        &[
            "status",
            &format!("agent:main:claude:{session}"),
            "--since",
            "0",
            "--json",
            "--url",
            &server.base,
            "--token",
            &server.token,
        ],
        &[],
    );
    assert!(ok && out.contains("human message via claude"), "{out}");
}

/// `sessionwatch ui` prints a one-time link that logs a browser in (a cookie, then the overview).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_prints_a_one_time_login_link() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(dir.path());
    let data_dir = dir.path().to_str().unwrap();
    let (ok, out, err) = run(&["ui", "--url", &s.base, "--data-dir", data_dir], &[]);
    assert!(ok, "{err}");
    let url = out.trim();
    assert!(url.starts_with(&format!("{}/login?code=", s.base)), "{out}");
    assert!(!url.contains(&s.token), "the token is not in the link");
    let browser = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let resp = browser.get(url).send().await.unwrap();
    assert_eq!(resp.status(), 303);
    let cookie = resp.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let page = browser.get(format!("{}/", s.base)).header("cookie", cookie).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(browser.get(url).send().await.unwrap().status(), 401, "one time only");
}

/// `sessionwatch demo --open` keeps its gateway up and prints a login link to the worker's page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_open_leaves_the_dashboard_running() {
    use std::io::BufRead;
    let mut child = Command::new(bin())
        .args(["demo", "--open"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut link = None;
    let mut session = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.trim_start().starts_with("http://") && line.contains("/login?code=") {
            link = Some(line.trim().to_string());
        }
        if let Some(u) = line.strip_prefix("The worker's page, where the notice links: ") {
            session = Some(u.trim().to_string());
            break;
        }
    }
    let (link, session) = (link.expect("a login link"), session.expect("the worker's page"));
    let browser = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let resp = browser.get(&link).send().await.unwrap();
    assert_eq!(resp.status(), 303);
    let cookie = resp.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let page = browser.get(&session).header("cookie", cookie).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("human_direct_message"), "the story's human turns are on the page");
    interrupt(child.id());
    let status = child.wait().unwrap();
    assert!(status.success(), "Ctrl-C ends the demo cleanly: {status:?}");
}

/// SIGINT, as Ctrl-C sends it.
fn interrupt(pid: u32) {
    let _ = Command::new("kill").args(["-INT", &pid.to_string()]).status();
}

/// Issue 34 item 6: `--version` names the commit the binary was built from.
#[test]
fn version_names_the_commit() {
    let (ok, out, _) = run(&["--version"], &[]);
    assert!(ok);
    let want = format!("sessionwatch {} (", env!("CARGO_PKG_VERSION"));
    assert!(out.starts_with(&want) && out.trim_end().ends_with(')'), "{out}");
    let git = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    if let Some(git) = git.ok().filter(|g| g.status.success()) {
        let commit = String::from_utf8_lossy(&git.stdout).trim().to_string();
        assert!(out.contains(&format!("({commit})")), "{out} should name {commit}");
    }
}

/// `hooks install codex` with no codex to trust the hooks with fails (Codex would skip them silently)
/// and changes nothing; `--untrusted` installs them anyway.
#[test]
fn hooks_install_codex_without_codex_fails_unless_untrusted() {
    let home = tempfile::tempdir().unwrap();
    let codex_home = home.path().join(".codex");
    let h = home.path().to_str().unwrap();
    let env = [("HOME", h), ("PATH", "/nonexistent"), ("CODEX_HOME", codex_home.to_str().unwrap())];
    let (ok, _, err) = run(&["hooks", "install", "codex"], &env);
    assert!(!ok, "must fail: {err}");
    assert!(err.contains("--codex PATH") && err.contains("--untrusted"), "{err}");
    assert!(!codex_home.join("hooks.json").exists(), "nothing changed");
    let (ok, out, err) = run(&["hooks", "install", "codex", "--untrusted"], &env);
    assert!(ok, "{err}");
    assert!(out.contains("untrusted"), "{out}");
    assert!(codex_home.join("hooks.json").exists());
    let (ok, _, err) = run(&["hooks", "uninstall", "codex"], &env);
    assert!(ok, "{err}");
    assert!(!codex_home.join("hooks.json").exists(), "the file install created is gone");
}

/// With the real Codex (tests/agents/install.sh): install trusts our hooks in config.toml, uninstall
/// gives config.toml back byte for byte (comments and all) and removes the hooks.json it created.
#[test]
fn hooks_uninstall_codex_removes_the_trust_it_added() {
    let agents =
        std::env::var("SESSIONWATCH_AGENTS_DIR").map(std::path::PathBuf::from).unwrap_or_else(|_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/sessionwatch/agents")
        });
    let codex =
        agents.join("node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex");
    if !codex.exists() {
        eprintln!("SKIPPED: codex is not installed in {}", agents.display());
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let codex_home = home.path().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = "# my settings\nmodel = \"gpt-5.5\"   # the model\n\n[features]\nplugins = false\n";
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    let env = [("HOME", home.path().to_str().unwrap()), ("CODEX_HOME", codex_home.to_str().unwrap())];
    let (ok, out, err) = run(&["hooks", "install", "codex", "--codex", codex.to_str().unwrap()], &env);
    assert!(ok, "{err}");
    assert!(out.contains("codex: trusted 7"), "{out}");
    let trusted = std::fs::read_to_string(codex_home.join("config.toml")).unwrap();
    assert_eq!(trusted.matches("trusted_hash").count(), 7, "{trusted}");
    assert!(trusted.starts_with(config), "the user's config stays as written: {trusted}");
    let (ok, _, err) = run(&["hooks", "uninstall", "codex"], &env);
    assert!(ok, "{err}");
    assert_eq!(std::fs::read_to_string(codex_home.join("config.toml")).unwrap(), config);
    assert!(!codex_home.join("hooks.json").exists());
}
