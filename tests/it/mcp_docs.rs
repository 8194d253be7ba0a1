//! The agent configuration snippets of `docs/mcp.md` are tested: each parses, names `sessionwatch mcp
//! --session KEY` (stdio) or the `/mcp` endpoint with the caller-session header (HTTP), and each stdio
//! command line, started as written (with the gateway given by environment), answers MCP with the six
//! tools as the session it names.

use crate::mcp_stdio::{BIN, TOKEN, start_gateway};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};
use std::collections::BTreeMap;

const DOC: &str = include_str!("../../docs/mcp.md");
const SNIPPETS: [&str; 8] = [
    "claude-stdio",
    "claude-mcp-json",
    "claude-http",
    "codex-stdio",
    "codex-http",
    "opencode-local",
    "opencode-remote",
    "pi-mcp-json",
];

/// `<!-- snippet: NAME -->` followed by a fenced block: name → (language, body).
fn snippets() -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    let mut rest = DOC;
    while let Some(i) = rest.find("<!-- snippet: ") {
        rest = &rest[i + "<!-- snippet: ".len()..];
        let name = rest[..rest.find(" -->").unwrap()].to_string();
        let fence = rest.find("```").unwrap();
        let after = &rest[fence + 3..];
        let lang_end = after.find('\n').unwrap();
        let lang = after[..lang_end].trim().to_string();
        let body_end = after[lang_end..].find("```").unwrap();
        let body = after[lang_end + 1..lang_end + body_end].to_string();
        assert!(out.insert(name.clone(), (lang, body)).is_none(), "snippet {name} twice");
        rest = &after[lang_end + body_end..];
    }
    out
}

/// Splits a shell line into words (double quotes group; `${VAR}` stays as written).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.trim().chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    assert!(!quoted, "unbalanced quotes in {line:?}");
    if any {
        words.push(cur);
    }
    words
}

/// What a snippet configures.
#[derive(Debug)]
enum Server {
    Stdio(Vec<String>),
    Http { url: String, headers: BTreeMap<String, String>, token_env: Option<String> },
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// A table of strings (a JSON object, a TOML table) as a map; `as_str` reads one value.
fn string_map<'a, V: 'a>(
    table: impl IntoIterator<Item = (&'a String, &'a V)>,
    as_str: impl Fn(&V) -> Option<&str>,
) -> BTreeMap<String, String> {
    table.into_iter().map(|(k, v)| (k.clone(), as_str(v).unwrap().to_string())).collect()
}

fn server_of(name: &str, lang: &str, body: &str) -> Server {
    match lang {
        "sh" => {
            let words = shell_words(body);
            assert_eq!(&words[..3], ["claude", "mcp", "add"], "{name}");
            if let Some(dash) = words.iter().position(|w| w == "--") {
                assert_eq!(words[dash - 1], "sessionwatch", "{name}: the server name");
                return Server::Stdio(words[dash + 1..].to_vec());
            }
            let transport = words.iter().position(|w| w == "--transport").expect("a transport");
            assert_eq!(words[transport + 1], "http", "{name}");
            let url = words.iter().find(|w| w.starts_with("http://")).expect("a URL").clone();
            let mut headers = BTreeMap::new();
            for (i, w) in words.iter().enumerate() {
                if w == "--header" {
                    let (k, v) = words[i + 1].split_once(':').expect("Name: value");
                    headers.insert(k.trim().to_string(), v.trim().to_string());
                }
            }
            Server::Http { url, headers, token_env: None }
        }
        "json" => {
            let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{name}: {e}"));
            let s = v.get("mcpServers").or(v.get("mcp")).expect("mcpServers or mcp")["sessionwatch"].clone();
            assert!(s.is_object(), "{name}: a server named sessionwatch");
            if let Some(url) = s.get("url") {
                let headers = string_map(s["headers"].as_object().unwrap(), Value::as_str);
                return Server::Http { url: url.as_str().unwrap().to_string(), headers, token_env: None };
            }
            match &s["command"] {
                Value::String(c) => {
                    Server::Stdio(std::iter::once(c.clone()).chain(strings(&s["args"])).collect())
                }
                c @ Value::Array(_) => Server::Stdio(strings(c)),
                other => panic!("{name}: command {other}"),
            }
        }
        "toml" => {
            let v: toml::Table = toml::from_str(body).unwrap_or_else(|e| panic!("{name}: {e}"));
            let s = &v["mcp_servers"]["sessionwatch"];
            if let Some(url) = s.get("url") {
                let headers = string_map(s["http_headers"].as_table().unwrap(), toml::Value::as_str);
                let token_env = s.get("bearer_token_env_var").map(|t| t.as_str().unwrap().to_string());
                return Server::Http { url: url.as_str().unwrap().to_string(), headers, token_env };
            }
            let args = s["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string());
            Server::Stdio(std::iter::once(s["command"].as_str().unwrap().to_string()).chain(args).collect())
        }
        other => panic!("{name}: unexpected language {other:?}"),
    }
}

fn session_of(cmd: &[String]) -> String {
    let i = cmd.iter().position(|a| a == "--session").expect("--session");
    cmd[i + 1].clone()
}

#[test]
fn mcp_doc_snippets_parse_and_name_sessionwatch_mcp() {
    let found = snippets();
    assert_eq!(found.keys().cloned().collect::<Vec<_>>().len(), SNIPPETS.len(), "{:?}", found.keys());
    for name in SNIPPETS {
        let (lang, body) = found.get(name).unwrap_or_else(|| panic!("snippet {name} is missing"));
        match server_of(name, lang, body) {
            Server::Stdio(cmd) => {
                assert_eq!(&cmd[..2], ["sessionwatch", "mcp"], "{name}");
                assert!(session_of(&cmd).starts_with("agent:"), "{name}: {cmd:?}");
            }
            Server::Http { url, headers, token_env } => {
                assert_eq!(url, "http://127.0.0.1:7420/mcp", "{name}");
                let session = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(sessionwatch_server::mcp::SESSION_HEADER))
                    .map(|(_, v)| v.clone());
                assert!(session.is_some_and(|s| s.starts_with("agent:")), "{name}: {headers:?}");
                let auth = headers.get("Authorization").cloned().or(token_env.clone());
                assert!(auth.is_some_and(|a| a.contains("SESSIONWATCH_TOKEN")), "{name}: the token");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_doc_stdio_commands_run_as_written() {
    let gw = start_gateway().await;
    let home = tempfile::tempdir().unwrap();
    for (name, (lang, body)) in snippets() {
        let Server::Stdio(cmd) = server_of(&name, &lang, &body) else { continue };
        let command = tokio::process::Command::new(BIN).configure(|c| {
            c.args(&cmd[1..])
                .env("SESSIONWATCH_HOME", home.path())
                .env("SESSIONWATCH_URL", &gw.url)
                .env("SESSIONWATCH_TOKEN", TOKEN)
                .env_remove("SESSIONWATCH_SESSION");
        });
        let client = ().serve(TokioChildProcess::new(command).unwrap()).await.expect(&name);
        assert_eq!(client.list_all_tools().await.unwrap().len(), 6, "{name}");
        let Value::Object(args) = json!({}) else { unreachable!() };
        let status = client
            .call_tool(CallToolRequestParams::new("session_status").with_arguments(args))
            .await
            .unwrap();
        let key = &status.structured_content.as_ref().unwrap()["sessionKey"];
        assert_eq!(key.as_str(), Some(session_of(&cmd).as_str()), "{name}");
        client.cancel().await.unwrap();
    }
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_doc_http_headers_are_accepted() {
    let gw = start_gateway().await;
    let http = reqwest::Client::new();
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "docs", "version": "1" } } });
    for (name, (lang, body)) in snippets() {
        let Server::Http { url, headers, token_env } = server_of(&name, &lang, &body) else { continue };
        let url = url.replace("http://127.0.0.1:7420", &gw.url);
        let mut req = http.post(url).header("accept", "application/json, text/event-stream").json(&init);
        for (k, v) in &headers {
            let v = v.replace("${SESSIONWATCH_TOKEN}", TOKEN).replace("{env:SESSIONWATCH_TOKEN}", TOKEN);
            req = req.header(k.as_str(), v);
        }
        if token_env.is_some() {
            req = req.bearer_auth(TOKEN);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "{name}");
    }
    gw.stop().await;
}
