//! How clients find the gateway: the runtime file `serve` writes into its data dir, and the one function
//! every client (`hook`, `mcp`, `node`, the tool and host commands, `ui`, `doctor`) asks for the URL.
//!
//! The order is `--url`, `SESSIONWATCH_URL`, the runtime file, the config's listen address, the
//! default. The runtime file is what lets a gateway on another port need no environment variable: Codex
//! passes its MCP servers only a short list of variables, and installed hook commands carry no URL.

use crate::config::{self, Config, DEFAULT_LISTEN};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// The runtime file's name in the data dir.
pub(crate) const RUNTIME_FILE_NAME: &str = "gateway.json";

pub(crate) fn runtime_file_path(data_dir: &Path) -> PathBuf {
    data_dir.join(RUNTIME_FILE_NAME)
}

/// What a running `serve` says about itself in `<data dir>/gateway.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeFile {
    /// The URL a client on this machine connects to (an unspecified listen address becomes loopback).
    pub url: String,
    pub pid: u32,
    /// RFC 3339.
    pub started_at: String,
}

impl RuntimeFile {
    /// This process, serving at `addr`.
    pub fn for_this_process(addr: SocketAddr) -> RuntimeFile {
        RuntimeFile {
            url: url_for_listen(addr),
            pid: std::process::id(),
            started_at: jiff::Timestamp::now().to_string(),
        }
    }

    /// Writes the file atomically (a temporary file renamed over it) with mode 0600; answers a guard
    /// that removes it when dropped, if it is still this process's.
    pub fn publish(&self, data_dir: &Path) -> std::io::Result<PublishedRuntimeFile> {
        std::fs::create_dir_all(data_dir)?;
        // tempfile creates with mode 0600 on Unix: nobody else ever sees a readable copy.
        let mut tmp = tempfile::Builder::new().prefix(".gateway.json.").tempfile_in(data_dir)?;
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        tmp.write_all(json.as_bytes())?;
        tmp.write_all(b"\n")?;
        tmp.as_file().sync_all()?;
        let path = runtime_file_path(data_dir);
        tmp.persist(&path).map_err(|e| e.error)?;
        Ok(PublishedRuntimeFile { path, pid: self.pid })
    }

    /// Reads the runtime file of `data_dir`: `Ok(None)` when there is none.
    pub fn read(data_dir: &Path) -> Result<Option<RuntimeFile>, String> {
        let path = runtime_file_path(data_dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let file: RuntimeFile = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a gateway runtime file ({e})", path.display()))?;
        if !file.url.starts_with("http://") && !file.url.starts_with("https://") {
            return Err(format!("{}: url {:?} is not an http(s) URL", path.display(), file.url));
        }
        Ok(Some(file))
    }

    /// Whether the process that wrote it still runs (a file left by a killed gateway is stale).
    pub fn is_live(&self) -> bool {
        pid_is_alive(self.pid)
    }
}

/// Removes the runtime file on drop (a clean exit), unless another gateway has since replaced it.
#[derive(Debug)]
pub struct PublishedRuntimeFile {
    path: PathBuf,
    pid: u32,
}

impl PublishedRuntimeFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PublishedRuntimeFile {
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| serde_json::from_str::<RuntimeFile>(&t).ok())
            .is_some_and(|f| f.pid == self.pid);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Whether a process with this pid exists (signal 0 checks without sending anything).
pub(crate) fn pid_is_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
        if pid <= 0 {
            return false;
        }
        // SAFETY: kill with signal 0 sends nothing; it only checks the pid.
        let rc = unsafe { libc::kill(pid, 0) };
        // EPERM: it exists, owned by another user.
        rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// The URL a local client uses for a listen address: `0.0.0.0` and `::` become loopback.
pub fn url_for_listen(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

/// Where the gateway URL came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UrlSource {
    /// A command-line flag (its name, e.g. `--url`).
    Flag(String),
    /// An environment variable (its name).
    Env(String),
    /// A live gateway's runtime file.
    RuntimeFile { path: PathBuf, pid: u32 },
    /// The listen address of the config (the file's path, or the variable that set it).
    Config(String),
    /// Nothing else said: the default address.
    Default,
}

impl fmt::Display for UrlSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlSource::Flag(name) => write!(f, "the {name} flag"),
            UrlSource::Env(name) => write!(f, "${name}"),
            UrlSource::RuntimeFile { path, pid } => {
                write!(f, "the runtime file {} (gateway pid {pid})", path.display())
            }
            UrlSource::Config(from) => write!(f, "the config's listen address ({from})"),
            UrlSource::Default => write!(f, "the default {DEFAULT_LISTEN}"),
        }
    }
}

/// The resolved gateway URL, where it came from, and what was skipped on the way (a stale or malformed
/// runtime file, an unreadable config): the caller shows the warnings, never fails on them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayUrl {
    pub url: String,
    pub source: UrlSource,
    pub warnings: Vec<String>,
}

/// A listen address set by the config, and by what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConfiguredListen {
    pub addr: SocketAddr,
    pub origin: String,
}

/// Everything the resolution reads, gathered by the caller (so tests need no environment).
#[derive(Clone, Debug, Default)]
pub(crate) struct UrlInputs {
    /// The command line's URL and the flag's name (`--url`, or `--gateway` for `node`).
    pub flag: Option<(String, String)>,
    /// `SESSIONWATCH_URL` (empty counts as unset).
    pub env: Option<String>,
    /// The data dir whose runtime file is read.
    pub data_dir: PathBuf,
    /// The config's listen address, when a config file or `SESSIONWATCH_LISTEN` set one.
    pub listen: Option<ConfiguredListen>,
    /// Problems met while gathering the inputs, passed through as warnings.
    pub warnings: Vec<String>,
}

/// The one resolution: `--url`, `SESSIONWATCH_URL`, the runtime file, the config, the default.
pub(crate) fn resolve_gateway_url(inputs: UrlInputs) -> GatewayUrl {
    let mut warnings = inputs.warnings;
    let answer = |url: String, source: UrlSource, warnings: Vec<String>| GatewayUrl {
        url: url.trim_end_matches('/').to_string(),
        source,
        warnings,
    };
    if let Some((url, flag)) = inputs.flag.filter(|(u, _)| !u.trim().is_empty()) {
        return answer(url, UrlSource::Flag(flag), warnings);
    }
    if let Some(url) = inputs.env.filter(|u| !u.trim().is_empty()) {
        return answer(url, UrlSource::Env("SESSIONWATCH_URL".into()), warnings);
    }
    let path = runtime_file_path(&inputs.data_dir);
    match RuntimeFile::read(&inputs.data_dir) {
        Ok(Some(file)) if file.is_live() => {
            return answer(file.url, UrlSource::RuntimeFile { path, pid: file.pid }, warnings);
        }
        Ok(Some(file)) => warnings.push(format!(
            "ignoring the stale runtime file {} (its gateway, pid {}, is gone)",
            path.display(),
            file.pid
        )),
        Ok(None) => {}
        Err(e) => warnings.push(format!("ignoring the runtime file: {e}")),
    }
    if let Some(listen) = inputs.listen {
        return answer(url_for_listen(listen.addr), UrlSource::Config(listen.origin), warnings);
    }
    let default: SocketAddr = DEFAULT_LISTEN.parse().expect("valid default address");
    answer(url_for_listen(default), UrlSource::Default, warnings)
}

/// What a client knows about where its gateway is: its data dir and the config it may name.
#[derive(Clone, Debug, Default)]
pub struct ClientContext {
    /// `--url` (or `node`'s `--gateway`) and the flag's name.
    pub flag: Option<(String, String)>,
    /// `--data-dir`; else the config file's `gateway.dataDir`, else the default data dir.
    pub data_dir: Option<PathBuf>,
    /// `--config`; else `SESSIONWATCH_CONFIG`.
    pub config: Option<PathBuf>,
}

/// A client's gateway URL and data dir, from its flags and the process environment.
#[derive(Clone, Debug)]
pub struct ClientGateway {
    pub url: GatewayUrl,
    pub data_dir: PathBuf,
}

impl ClientContext {
    /// Gathers the inputs from the environment and the config file, then resolves.
    pub fn resolve(self) -> ClientGateway {
        let mut warnings = vec![];
        let config_path = self.config.or_else(|| std::env::var_os("SESSIONWATCH_CONFIG").map(PathBuf::from));
        let mut listen = None;
        let mut config_data_dir = None;
        if let Some(path) = &config_path {
            match Config::from_file(path) {
                Ok(c) => {
                    if file_sets_listen(path) {
                        listen =
                            Some(ConfiguredListen { addr: c.listen, origin: path.display().to_string() });
                    }
                    if c.data_dir != config::default_data_dir() {
                        config_data_dir = Some(c.data_dir);
                    }
                }
                Err(e) => warnings.push(format!("ignoring the config for the gateway URL: {e}")),
            }
        }
        if let Some(v) = std::env::var("SESSIONWATCH_LISTEN").ok().filter(|v| !v.trim().is_empty()) {
            match v.trim().parse() {
                Ok(addr) => listen = Some(ConfiguredListen { addr, origin: "$SESSIONWATCH_LISTEN".into() }),
                Err(_) => warnings.push(format!("ignoring SESSIONWATCH_LISTEN={v:?}: not an address")),
            }
        }
        let data_dir = self.data_dir.or(config_data_dir).unwrap_or_else(config::default_data_dir);
        let url = resolve_gateway_url(UrlInputs {
            flag: self.flag,
            env: std::env::var("SESSIONWATCH_URL").ok(),
            data_dir: data_dir.clone(),
            listen,
            warnings,
        });
        ClientGateway { url, data_dir }
    }
}

/// Whether the config file names a listen address itself (else its `listen` is only the default).
fn file_sets_listen(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else { return false };
    let Ok(value) = text.parse::<toml::Table>() else { return false };
    value.contains_key("listen")
        || value.get("gateway").and_then(|g| g.as_table()).is_some_and(|g| g.contains_key("listen"))
}

#[cfg(test)]
mod tests;
