//! Codex runs a hook only once it is trusted, and says nothing about the ones it skips. The trust
//! record is `[hooks.state."<source path>:<event>:<group>:<handler>"] trusted_hash = "<hash>"` in
//! `$CODEX_HOME/config.toml`; the key and hash come from Codex itself (`codex app-server`, JSON-RPC
//! `hooks/list`), so we never guess Codex's hashing.

use anyhow::{Context, bail};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIST_TIMEOUT: Duration = Duration::from_secs(20);

/// Trusts every sessionwatch hook that Codex lists from `hooks_file`; answers how many, and the
/// `[hooks.state]` keys that were not there before (what uninstall removes again).
pub fn trust(
    codex: &Path,
    hooks_file: &Path,
    project_dir: Option<&Path>,
) -> anyhow::Result<(usize, Vec<String>)> {
    let hooks = list_hooks(codex, project_dir)?;
    let file = std::fs::canonicalize(hooks_file).unwrap_or_else(|_| hooks_file.to_path_buf());
    let ours: Vec<(String, String)> = hooks
        .iter()
        .filter(|h| {
            let src = h.get("sourcePath").and_then(Value::as_str).map(PathBuf::from);
            src.map(|s| std::fs::canonicalize(&s).unwrap_or(s)) == Some(file.clone())
                && h.get("command").and_then(Value::as_str).is_some_and(super::is_our_command)
        })
        .filter_map(|h| {
            Some((h.get("key")?.as_str()?.to_string(), h.get("currentHash")?.as_str()?.to_string()))
        })
        .collect();
    if ours.is_empty() {
        bail!("codex lists no sessionwatch hook from {}", file.display());
    }
    let config = config_file()?;
    let text = match std::fs::read_to_string(&config) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", config.display())),
    };
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("{} is not valid TOML; it was not changed", config.display()))?;
    let hooks_table = doc.entry("hooks").or_insert(toml_edit::table());
    let hooks_table = hooks_table.as_table_mut().context("[hooks] in config.toml is not a table")?;
    hooks_table.set_implicit(true);
    let state = hooks_table.entry("state").or_insert(toml_edit::table());
    let state = state.as_table_mut().context("[hooks.state] in config.toml is not a table")?;
    state.set_implicit(true);
    let mut added = vec![];
    for (key, hash) in &ours {
        if !state.contains_key(key) {
            added.push(key.clone());
        }
        let entry = state.entry(key).or_insert(toml_edit::table());
        let entry = entry.as_table_mut().context("a [hooks.state] entry is not a table")?;
        entry["trusted_hash"] = toml_edit::value(hash.as_str());
    }
    if doc.to_string() != text {
        std::fs::write(&config, doc.to_string())
            .with_context(|| format!("cannot write {}", config.display()))?;
    }
    Ok((ours.len(), added))
}

/// Removes the `[hooks.state]` entries `keys` from `config` (toml_edit keeps the rest as written);
/// answers how many were there.
pub fn untrust(config: &Path, keys: &[String]) -> anyhow::Result<usize> {
    let text = match std::fs::read_to_string(config) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", config.display())),
    };
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("{} is not valid TOML; it was not changed", config.display()))?;
    let Some(state) = doc
        .get_mut("hooks")
        .and_then(|h| h.as_table_like_mut())
        .and_then(|h| h.get_mut("state"))
        .and_then(|s| s.as_table_like_mut())
    else {
        return Ok(0);
    };
    let removed = keys.iter().filter(|k| state.remove(k).is_some()).count();
    let state_empty = state.is_empty();
    if state_empty && let Some(hooks) = doc.get_mut("hooks").and_then(|h| h.as_table_like_mut()) {
        // Tables that only held our entries go too (an implicit one prints nothing either way).
        hooks.remove("state");
        if hooks.is_empty() {
            doc.remove("hooks");
        }
    }
    if removed > 0 {
        std::fs::write(config, doc.to_string())
            .with_context(|| format!("cannot write {}", config.display()))?;
    }
    Ok(removed)
}

/// `$CODEX_HOME/config.toml` (default `~/.codex`).
pub fn config_file() -> anyhow::Result<PathBuf> {
    let home = match std::env::var_os("CODEX_HOME") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".codex"),
    };
    Ok(home.join("config.toml"))
}

/// The codex binary to ask: `--codex PATH`, else `codex` on `PATH`; `None` when there is none.
pub fn find_codex(given: Option<&Path>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    match given {
        Some(p) => runnable(p).then(|| p.to_path_buf()),
        None => {
            std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("codex")).find(|p| runnable(p))
        }
    }
}

/// A JSON-RPC message to `codex app-server` (a notification has no `id`).
#[derive(serde::Serialize)]
struct Rpc<P> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<P>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Initialize {
    client_info: ClientInfo,
}

#[derive(serde::Serialize)]
struct ClientInfo {
    name: &'static str,
    version: &'static str,
}

/// `{}`.
#[derive(serde::Serialize)]
struct NoParams {}

/// `codex app-server` on stdio: `initialize`, `initialized`, then `hooks/list`.
pub fn list_hooks(codex: &Path, project_dir: Option<&Path>) -> anyhow::Result<Vec<Value>> {
    let mut cmd = Command::new(codex);
    cmd.arg("app-server").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    if let Some(d) = project_dir {
        cmd.current_dir(d);
    }
    let mut child = cmd.spawn().with_context(|| format!("cannot run {} app-server", codex.display()))?;
    let result = (|| {
        let mut stdin = child.stdin.take().context("no stdin")?;
        let version = env!("CARGO_PKG_VERSION");
        let client_info = ClientInfo { name: "sessionwatch", version };
        let messages = [
            serde_json::to_string(&Rpc {
                id: Some(1),
                method: "initialize",
                params: Some(Initialize { client_info }),
            })?,
            serde_json::to_string(&Rpc::<()> { id: None, method: "initialized", params: None })?,
            serde_json::to_string(&Rpc { id: Some(2), method: "hooks/list", params: Some(NoParams {}) })?,
        ];
        for msg in messages {
            writeln!(stdin, "{msg}")?;
        }
        stdin.flush()?;
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().context("no stdout")?;
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let deadline = Instant::now() + LIST_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).context("codex app-server did not answer hooks/list in time")?;
            let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
            if v.get("id").and_then(Value::as_u64) != Some(2) {
                continue;
            }
            if let Some(e) = v.get("error") {
                bail!("hooks/list failed: {e}");
            }
            let data =
                v.pointer("/result/data").and_then(Value::as_array).context("hooks/list answered no data")?;
            return Ok(data
                .iter()
                .flat_map(|d| d.get("hooks").and_then(Value::as_array).cloned().unwrap_or_default())
                .collect());
        }
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}
