//! Configuration: one TOML file, overridden by environment variables and flags.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    PerSender,
    Global,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupScope {
    PerGroup,
    Main,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthMode {
    Token,
    None,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub scope: Scope,
    pub group_scope: GroupScope,
    pub main_key: String,
    pub notify_on_create: bool,
    pub retention_days: u64,
    pub retention_max_rows: u64,
    pub monitor_first_tick_secs: u64,
    pub monitor_interval_secs: u64,
    pub listen: SocketAddr,
    /// `sqlite:PATH`, a plain path, or `postgres://…`; `None` means the data dir's SQLite file.
    pub database: Option<String>,
    pub data_dir: PathBuf,
    pub auth: AuthMode,
    /// Extra `Host` names (or `host:port`) the MCP endpoint `/mcp` accepts besides loopback
    /// (`gateway.mcpAllowedHosts`). Loopback (`localhost`, `127.0.0.1`, `::1`) is always allowed.
    pub mcp_allowed_hosts: Vec<String>,
    pub limits: Limits,
    /// Sessions working in one git worktree share a workspace session and learn of each other's changes
    /// (`[workspace] awareness = "on" | "off"`, default on).
    pub workspace_awareness: bool,
}

/// Bounds on what one client can hold (`gateway.*`): slow or abandoned clients never exhaust the gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A connection must finish its request headers within this (`gateway.headerTimeoutSeconds`).
    pub header_timeout: std::time::Duration,
    /// A request body must arrive in full within this (`gateway.bodyTimeoutSeconds`).
    pub body_timeout: std::time::Duration,
    /// Connections open at once (`gateway.maxConnections`, lowered to what the fd limit allows). At the
    /// cap, a newcomer takes the slot of the connection idle the longest; when every one has a request in
    /// flight, it waits in the listen backlog.
    pub max_connections: usize,
    /// Live MCP sessions on `/mcp` (`gateway.mcpMaxSessions`); a new one evicts the least recently used.
    pub mcp_max_sessions: usize,
    /// An MCP session unused this long is closed (`gateway.mcpIdleSeconds`).
    pub mcp_idle: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: std::time::Duration::from_secs(10),
            body_timeout: std::time::Duration::from_secs(30),
            max_connections: 512,
            mcp_max_sessions: 256,
            mcp_idle: std::time::Duration::from_secs(600),
        }
    }
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7420";

impl Default for Config {
    fn default() -> Self {
        Config {
            scope: Scope::PerSender,
            group_scope: GroupScope::PerGroup,
            main_key: "main".into(),
            notify_on_create: true,
            retention_days: 30,
            retention_max_rows: 50_000,
            monitor_first_tick_secs: 15,
            monitor_interval_secs: 60,
            listen: DEFAULT_LISTEN.parse().expect("valid default address"),
            database: None,
            data_dir: default_data_dir(),
            auth: AuthMode::Token,
            mcp_allowed_hosts: Vec::new(),
            limits: Limits::default(),
            workspace_awareness: true,
        }
    }
}

/// `$SESSIONWATCH_HOME`, else `$XDG_DATA_HOME/sessionwatch`, else `~/.local/share/sessionwatch`.
pub fn default_data_dir() -> PathBuf {
    if let Some(h) = std::env::var_os("SESSIONWATCH_HOME") {
        return PathBuf::from(h);
    }
    if let Some(x) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(x).join("sessionwatch");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/share/sessionwatch")
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config file {path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{key}: {message}")]
    Value { key: String, message: String },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    session: Option<FileSession>,
    retention: Option<FileRetention>,
    monitor: Option<FileMonitor>,
    gateway: Option<FileGateway>,
    workspace: Option<FileWorkspace>,
    /// Shorthands at the top level.
    listen: Option<String>,
    database: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileSession {
    scope: Option<Scope>,
    group_scope: Option<GroupScope>,
    main_key: Option<String>,
    notify_on_create: Option<bool>,
    dm_scope: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileRetention {
    days: Option<u64>,
    max_rows: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileMonitor {
    first_tick_seconds: Option<u64>,
    interval_seconds: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileWorkspace {
    awareness: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileGateway {
    listen: Option<String>,
    database: Option<String>,
    auth: Option<String>,
    data_dir: Option<PathBuf>,
    mcp_allowed_hosts: Option<Vec<String>>,
    header_timeout_seconds: Option<u64>,
    body_timeout_seconds: Option<u64>,
    max_connections: Option<u64>,
    mcp_max_sessions: Option<u64>,
    mcp_idle_seconds: Option<u64>,
}

impl Config {
    /// Reads a TOML file over the defaults. Unknown keys and bad values are errors naming the key.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        Config::from_toml(&text).map_err(|e| match e {
            ConfigError::Invalid { message, .. } => {
                ConfigError::Invalid { path: path.display().to_string(), message }
            }
            other => other,
        })
    }

    pub(crate) fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let file: FileConfig = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: String::new(),
            message: e.to_string().trim().to_string(),
        })?;
        let mut c = Config::default();
        if let Some(s) = file.session {
            if let Some(v) = s.scope {
                c.scope = v;
            }
            if let Some(v) = s.group_scope {
                c.group_scope = v;
            }
            if let Some(v) = s.main_key {
                c.set("session.mainKey", &v)?;
            }
            if let Some(v) = s.notify_on_create {
                c.notify_on_create = v;
            }
            let _ = s.dm_scope; // independent of watching; accepted for compatibility
        }
        if let Some(r) = file.retention {
            if let Some(v) = r.days {
                c.set("retention.days", &v.to_string())?;
            }
            if let Some(v) = r.max_rows {
                c.set("retention.maxRows", &v.to_string())?;
            }
        }
        if let Some(m) = file.monitor {
            if let Some(v) = m.first_tick_seconds {
                c.monitor_first_tick_secs = v;
            }
            if let Some(v) = m.interval_seconds {
                c.set("monitor.intervalSeconds", &v.to_string())?;
            }
        }
        if let Some(v) = file.workspace.and_then(|w| w.awareness) {
            c.set("workspace.awareness", &v)?;
        }
        let gateway = file.gateway.unwrap_or_default();
        if let Some(v) = gateway.listen.or(file.listen) {
            c.set("gateway.listen", &v)?;
        }
        if let Some(v) = gateway.database.or(file.database) {
            c.set("gateway.database", &v)?;
        }
        if let Some(v) = gateway.auth {
            c.set("gateway.auth", &v)?;
        }
        if let Some(v) = gateway.data_dir {
            c.data_dir = v;
        }
        if let Some(v) = gateway.mcp_allowed_hosts {
            c.set("gateway.mcpAllowedHosts", &v.join(","))?;
        }
        for (key, v) in [
            ("gateway.headerTimeoutSeconds", gateway.header_timeout_seconds),
            ("gateway.bodyTimeoutSeconds", gateway.body_timeout_seconds),
            ("gateway.maxConnections", gateway.max_connections),
            ("gateway.mcpMaxSessions", gateway.mcp_max_sessions),
            ("gateway.mcpIdleSeconds", gateway.mcp_idle_seconds),
        ] {
            if let Some(v) = v {
                c.set(key, &v.to_string())?;
            }
        }
        Ok(c)
    }

    /// Sets one key from a string (environment variables and flags use the same names and checks).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let v = KeyValue { key, text: value };
        match key {
            "retention.days" => self.retention_days = v.count(" of days", Some(3650))?,
            "retention.maxRows" => self.retention_max_rows = v.count("", None)?,
            "monitor.intervalSeconds" => self.monitor_interval_secs = v.count(" of seconds", None)?,
            "workspace.awareness" => self.workspace_awareness = v.one_of([("on", true), ("off", false)])?,
            _ if key.starts_with("session.") => self.set_session(v)?,
            _ if key.starts_with("gateway.") => self.set_gateway(v)?,
            _ => return Err(v.error("unknown key")),
        }
        Ok(())
    }

    /// [`set`](Config::set) for the `session.*` keys.
    fn set_session(&mut self, v: KeyValue<'_>) -> Result<(), ConfigError> {
        match v.key {
            "session.scope" => {
                self.scope = v.one_of([("per-sender", Scope::PerSender), ("global", Scope::Global)])?;
            }
            "session.groupScope" => {
                self.group_scope =
                    v.one_of([("per-group", GroupScope::PerGroup), ("main", GroupScope::Main)])?;
            }
            "session.mainKey" => {
                let main_key = v.text.trim().to_ascii_lowercase();
                if main_key.is_empty() || main_key.contains(char::is_whitespace) {
                    return Err(v.error("must be a non-empty key part without spaces"));
                }
                self.main_key = main_key;
            }
            "session.notifyOnCreate" => {
                self.notify_on_create = v.text.parse().map_err(|_| v.error("expected true or false"))?;
            }
            _ => return Err(v.error("unknown key")),
        }
        Ok(())
    }

    /// [`set`](Config::set) for the `gateway.*` keys.
    fn set_gateway(&mut self, v: KeyValue<'_>) -> Result<(), ConfigError> {
        match v.key {
            "gateway.listen" => {
                self.listen =
                    v.text.parse().map_err(|_| v.error("expected an address such as 127.0.0.1:7420"))?;
            }
            "gateway.database" => {
                if v.text.trim().is_empty() {
                    return Err(v.error("must not be empty"));
                }
                self.database = Some(v.text.trim().to_string());
            }
            "gateway.auth" => self.auth = v.one_of([("token", AuthMode::Token), ("none", AuthMode::None)])?,
            "gateway.mcpAllowedHosts" => {
                let hosts: Vec<String> = v
                    .text
                    .split(',')
                    .map(|h| h.trim().to_ascii_lowercase())
                    .filter(|h| !h.is_empty())
                    .collect();
                if let Some(bad) = hosts.iter().find(|h| h.contains(['/', '*', ' ', '@'])) {
                    return Err(v.error(&format!("\"{bad}\" is not a host name or host:port")));
                }
                self.mcp_allowed_hosts = hosts;
            }
            "gateway.headerTimeoutSeconds" | "gateway.bodyTimeoutSeconds" | "gateway.mcpIdleSeconds" => {
                let d = std::time::Duration::from_secs(v.count(" of seconds", Some(86_400))?);
                match v.key {
                    "gateway.headerTimeoutSeconds" => self.limits.header_timeout = d,
                    "gateway.bodyTimeoutSeconds" => self.limits.body_timeout = d,
                    _ => self.limits.mcp_idle = d,
                }
            }
            "gateway.maxConnections" | "gateway.mcpMaxSessions" => {
                // At most 100000, so it fits any `usize`.
                let n = v.count("", Some(100_000))? as usize;
                match v.key {
                    "gateway.maxConnections" => self.limits.max_connections = n,
                    _ => self.limits.mcp_max_sessions = n,
                }
            }
            _ => return Err(v.error("unknown key")),
        }
        Ok(())
    }

    /// Applies `SESSIONWATCH_*` environment variables.
    pub fn apply_env(&mut self) -> Result<(), ConfigError> {
        const VARS: &[(&str, &str)] = &[
            ("SESSIONWATCH_SCOPE", "session.scope"),
            ("SESSIONWATCH_GROUP_SCOPE", "session.groupScope"),
            ("SESSIONWATCH_MAIN_KEY", "session.mainKey"),
            ("SESSIONWATCH_NOTIFY_ON_CREATE", "session.notifyOnCreate"),
            ("SESSIONWATCH_RETENTION_DAYS", "retention.days"),
            ("SESSIONWATCH_RETENTION_MAX_ROWS", "retention.maxRows"),
            ("SESSIONWATCH_LISTEN", "gateway.listen"),
            ("SESSIONWATCH_DATABASE", "gateway.database"),
            ("SESSIONWATCH_AUTH", "gateway.auth"),
            ("SESSIONWATCH_MCP_ALLOWED_HOSTS", "gateway.mcpAllowedHosts"),
            ("SESSIONWATCH_MAX_CONNECTIONS", "gateway.maxConnections"),
            ("SESSIONWATCH_WORKSPACE_AWARENESS", "workspace.awareness"),
        ];
        for (var, key) in VARS {
            if let Ok(v) = std::env::var(var) {
                self.set(key, &v)
                    .map_err(|e| ConfigError::Value { key: (*var).to_string(), message: e.to_string() })?;
            }
        }
        Ok(())
    }

    /// `--auth none` is only allowed on a loopback address.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.auth == AuthMode::None && !self.listen.ip().is_loopback() {
            return Err(ConfigError::Value {
                key: "gateway.auth".into(),
                message: format!("\"none\" is refused on the non-loopback address {}", self.listen),
            });
        }
        Ok(())
    }

    pub fn sqlite_path(&self) -> PathBuf {
        match &self.database {
            Some(d) if !d.starts_with("postgres://") && !d.starts_with("postgresql://") => {
                PathBuf::from(d.strip_prefix("sqlite:").unwrap_or(d))
            }
            _ => self.data_dir.join("sessionwatch.db"),
        }
    }

    pub fn postgres_url(&self) -> Option<&str> {
        self.database.as_deref().filter(|d| is_postgres_url(d))
    }
}

/// Whether a `--database` value names a PostgreSQL server rather than a SQLite file.
pub fn is_postgres_url(database: &str) -> bool {
    database.starts_with("postgres://") || database.starts_with("postgresql://")
}

/// A key's value as given (a flag, a variable, a file's entry), with the refusals [`Config::set`] words.
#[derive(Clone, Copy)]
struct KeyValue<'a> {
    key: &'a str,
    text: &'a str,
}

impl KeyValue<'_> {
    fn error(&self, message: &str) -> ConfigError {
        ConfigError::Value { key: self.key.to_string(), message: message.to_string() }
    }

    /// A whole number (`unit`: " of days", …, as the refusal words it) from 1 to `max`, if any.
    fn count(&self, unit: &str, max: Option<u64>) -> Result<u64, ConfigError> {
        match self.text.parse::<u64>() {
            Err(_) => Err(self.error(&format!("expected a whole number{unit}"))),
            Ok(v) if v == 0 || max.is_some_and(|max| v > max) => Err(self.error(&match max {
                Some(max) => format!("must be between 1 and {max}"),
                None => "must be at least 1".to_string(),
            })),
            Ok(v) => Ok(v),
        }
    }

    /// The value as one of a key's two words, refused as `expected "a" or "b"`.
    fn one_of<T>(&self, [(a, when_a), (b, when_b)]: [(&str, T); 2]) -> Result<T, ConfigError> {
        if self.text == a {
            Ok(when_a)
        } else if self.text == b {
            Ok(when_b)
        } else {
            Err(self.error(&format!("expected \"{a}\" or \"{b}\"")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_full_file() {
        let c = Config::from_toml(
            r#"
            [session]
            scope = "global"
            groupScope = "main"
            mainKey = "home"
            notifyOnCreate = false
            [retention]
            days = 7
            maxRows = 1000
            [gateway]
            listen = "127.0.0.1:9999"
            database = "/tmp/x.db"
            "#,
        )
        .unwrap();
        assert_eq!(c.scope, Scope::Global);
        assert_eq!(c.group_scope, GroupScope::Main);
        assert_eq!(c.main_key, "home");
        assert!(!c.notify_on_create);
        assert_eq!((c.retention_days, c.retention_max_rows), (7, 1000));
        assert_eq!(c.listen.port(), 9999);
        assert_eq!(c.sqlite_path(), PathBuf::from("/tmp/x.db"));
    }

    #[test]
    fn bad_files_name_the_key() {
        let cases = [
            ("[session]\nscope = \"everyone\"", "scope"),
            ("[session]\nbogus = 1", "bogus"),
            ("[retention]\ndays = 0", "retention.days"),
            ("[gateway]\nlisten = \"nowhere\"", "gateway.listen"),
            ("[session]\nnotifyOnCreate = \"yes\"", "notifyOnCreate"),
            ("not toml at all [", ""),
        ];
        for (text, key) in cases {
            let e = Config::from_toml(text).unwrap_err().to_string();
            assert!(e.contains(key), "{text:?}: {e}");
        }
    }

    #[test]
    fn mcp_allowed_hosts_are_explicit() {
        assert!(Config::default().mcp_allowed_hosts.is_empty());
        let c = Config::from_toml("[gateway]\nmcpAllowedHosts = [\"gw.example\", \"Box:7420\"]").unwrap();
        assert_eq!(c.mcp_allowed_hosts, vec!["gw.example", "box:7420"]);
        let e = Config::from_toml("[gateway]\nmcpAllowedHosts = [\"*\"]").unwrap_err().to_string();
        assert!(e.contains("gateway.mcpAllowedHosts"), "{e}");
    }

    #[test]
    fn workspace_awareness_is_on_unless_turned_off() {
        assert!(Config::default().workspace_awareness);
        assert!(!Config::from_toml("[workspace]\nawareness = \"off\"").unwrap().workspace_awareness);
        assert!(Config::from_toml("[workspace]\nawareness = \"on\"").unwrap().workspace_awareness);
        let e = Config::from_toml("[workspace]\nawareness = \"yes\"").unwrap_err().to_string();
        assert!(e.contains("workspace.awareness"), "{e}");
    }

    /// The keys of two words take either and refuse anything else naming both.
    #[test]
    fn two_word_keys_name_both_words() {
        let mut c = Config::default();
        let keys = [
            ("session.scope", "per-sender", "global"),
            ("session.groupScope", "per-group", "main"),
            ("workspace.awareness", "on", "off"),
            ("gateway.auth", "token", "none"),
        ];
        for (key, a, b) in keys {
            c.set(key, a).unwrap();
            c.set(key, b).unwrap();
            let e = c.set(key, "other").unwrap_err().to_string();
            assert_eq!(e, format!("{key}: expected \"{a}\" or \"{b}\""));
        }
        assert_eq!((c.scope, c.group_scope, c.workspace_awareness), (Scope::Global, GroupScope::Main, false));
        assert_eq!(c.auth, AuthMode::None);
    }

    /// The numeric keys: their bounds and their refusals' words.
    #[test]
    fn numbers_are_whole_and_bounded() {
        let refused = [
            ("retention.days", "x", "expected a whole number of days"),
            ("retention.days", "0", "must be between 1 and 3650"),
            ("retention.days", "3651", "must be between 1 and 3650"),
            ("retention.maxRows", "-1", "expected a whole number"),
            ("retention.maxRows", "0", "must be at least 1"),
            ("monitor.intervalSeconds", "1.5", "expected a whole number of seconds"),
            ("monitor.intervalSeconds", "0", "must be at least 1"),
            ("gateway.bodyTimeoutSeconds", "", "expected a whole number of seconds"),
            ("gateway.mcpIdleSeconds", "86401", "must be between 1 and 86400"),
            ("gateway.maxConnections", "many", "expected a whole number"),
            ("gateway.mcpMaxSessions", "100001", "must be between 1 and 100000"),
        ];
        for (key, value, words) in refused {
            let e = Config::default().set(key, value).unwrap_err().to_string();
            assert_eq!(e, format!("{key}: {words}"), "{key} = {value:?}");
        }
        let mut c = Config::default();
        for (key, value) in [
            ("retention.days", "3650"),
            ("retention.maxRows", "1"),
            ("monitor.intervalSeconds", "1"),
            ("gateway.headerTimeoutSeconds", "86400"),
            ("gateway.maxConnections", "100000"),
        ] {
            c.set(key, value).unwrap();
        }
        assert_eq!((c.retention_days, c.retention_max_rows, c.monitor_interval_secs), (3650, 1, 1));
        assert_eq!(c.limits.header_timeout, std::time::Duration::from_secs(86_400));
        assert_eq!(c.limits.max_connections, 100_000);
    }

    #[test]
    fn auth_none_only_on_loopback() {
        let mut c = Config::default();
        c.set("gateway.auth", "none").unwrap();
        assert!(c.validate().is_ok());
        c.set("gateway.listen", "0.0.0.0:7420").unwrap();
        assert!(c.validate().is_err());
    }
}
