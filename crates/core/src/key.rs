//! Session keys: parsing agent-qualified keys and classifying the kind of a session.

use std::fmt;

/// An agent-qualified session key `agent:<agentId>:<rest>`, normalised to lower case.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentSessionKey {
    key: String,
    agent_id_end: usize,
}

impl AgentSessionKey {
    /// Parses `agent:<agentId>:<rest>` case-insensitively. Empty parts are dropped (so `agent::main::x`
    /// reads as `agent:main:x`); at least three parts are needed and the agent id must match
    /// `^[a-z0-9][a-z0-9_-]{0,63}$`.
    pub fn parse(raw: &str) -> Option<AgentSessionKey> {
        match AgentSessionKey::parse_canonical(raw) {
            Canonical::Yes(key) => Some(key),
            Canonical::Invalid => None,
            Canonical::No => AgentSessionKey::parse_any(raw),
        }
    }

    /// A key already as [`parse`](Self::parse) writes it (trimmed, lower case, no empty part), read in
    /// place: one allocation instead of three. Every event a gateway records is parsed once more this way.
    fn parse_canonical(raw: &str) -> Canonical {
        let canonical = !raw.starts_with(char::is_whitespace)
            && !raw.ends_with(char::is_whitespace)
            && !raw.starts_with(':')
            && !raw.ends_with(':')
            && !raw.contains("::")
            && !raw.bytes().any(|b| b.is_ascii_uppercase());
        if !canonical {
            return Canonical::No;
        }
        let Some((agent, rest)) = raw.strip_prefix("agent:").and_then(|r| r.split_once(':')) else {
            return Canonical::Invalid;
        };
        if rest.is_empty() || !is_valid_agent_id(agent) {
            return Canonical::Invalid;
        }
        Canonical::Yes(AgentSessionKey { key: raw.to_string(), agent_id_end: "agent:".len() + agent.len() })
    }

    fn parse_any(raw: &str) -> Option<AgentSessionKey> {
        let lower = raw.trim().to_ascii_lowercase();
        let parts: Vec<&str> = lower.split(':').filter(|p| !p.is_empty()).collect();
        if parts.len() < 3 || parts[0] != "agent" || !is_valid_agent_id(parts[1]) {
            return None;
        }
        let key = parts.join(":");
        let agent_id_end = "agent:".len() + parts[1].len();
        Some(AgentSessionKey { key, agent_id_end })
    }

    /// The agent's main session key, `agent:<agentId>:<mainKey>`.
    pub fn main_of(agent_id: &str, main_key: &str) -> Option<AgentSessionKey> {
        AgentSessionKey::parse(&AgentSessionKey::build(agent_id, main_key))
    }

    /// The text of `agent:<agentId>:<rest>`. Every key is built here (the key is the join between the hooks,
    /// the monitors, the catalog and the MCP identity, so its spelling must not drift); the builders answer
    /// text, not a parsed key, so a caller that passes an invalid agent id gets a key that does not parse
    /// and is refused where keys are checked, as before.
    pub fn build(agent_id: &str, rest: &str) -> String {
        format!("agent:{agent_id}:{rest}")
    }

    /// A sub-agent session: `agent:<agentId>:subagent:<id>`.
    pub fn build_subagent(agent_id: &str, id: &str) -> String {
        AgentSessionKey::build(agent_id, &format!("subagent:{id}"))
    }

    /// A session of another CLI adopted here: `agent:<agentId>:<catalog>:<thread id, lower case>`.
    pub fn build_adopted(agent_id: &str, catalog: &str, thread_id: &str) -> String {
        AgentSessionKey::build(agent_id, &format!("{catalog}:{}", thread_id.to_ascii_lowercase()))
    }

    /// A session of another CLI on a remote node: `agent:<agentId>:<catalog>@<node>:<thread id>`.
    pub fn build_remote(agent_id: &str, catalog: &str, node: &str, thread_id: &str) -> String {
        AgentSessionKey::build_adopted(agent_id, &format!("{catalog}@{node}"), thread_id)
    }

    /// A workspace session, shared by the sessions working in one git worktree:
    /// `agent:<agentId>:workspace:<name>-<hash>`. `name` (the worktree's directory name) is reduced to
    /// the key alphabet (lower case letters, digits, `-`, `_`, `.`; anything else becomes `-`, at most 48
    /// characters, `ws` when nothing is left); `hash` tells two worktrees of one name apart.
    pub fn build_workspace(agent_id: &str, name: &str, hash: &str) -> String {
        let mut clean: String = name
            .chars()
            .map(|c| c.to_ascii_lowercase())
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' })
            .take(48)
            .collect();
        if clean.trim_matches('-').is_empty() {
            clean = "ws".into();
        }
        AgentSessionKey::build(agent_id, &format!("workspace:{clean}-{}", hash.to_ascii_lowercase()))
    }

    /// The workspace session of a git worktree on remote node `node`:
    /// `agent:<agentId>:workspace@<node>:<name>-<hash>`. The node is part of the key because the hash is
    /// over a path on the node's filesystem: the same path on the gateway's machine (or another node's)
    /// is another worktree.
    pub fn build_node_workspace(agent_id: &str, node: &str, name: &str, hash: &str) -> String {
        let local = AgentSessionKey::build_workspace(agent_id, name, hash);
        let rest = local.strip_prefix(&AgentSessionKey::build(agent_id, "workspace:")).unwrap_or(&local);
        AgentSessionKey::build(agent_id, &format!("workspace@{node}:{rest}"))
    }

    /// The remote node a session of this key lives on: the `<node>` of a key [`build_remote`] or
    /// [`build_node_workspace`] built (`<catalog>@<node>:…`); `None` for a session of this machine.
    ///
    /// [`build_remote`]: AgentSessionKey::build_remote
    /// [`build_node_workspace`]: AgentSessionKey::build_node_workspace
    pub fn node(&self) -> Option<&str> {
        let (first, rest) = self.rest().split_once(':')?;
        let (_, node) = first.split_once('@')?;
        (!node.is_empty() && !rest.is_empty()).then_some(node)
    }

    pub fn as_str(&self) -> &str {
        &self.key
    }

    pub fn agent_id(&self) -> &str {
        &self.key["agent:".len()..self.agent_id_end]
    }

    /// Everything after `agent:<agentId>:`.
    pub fn rest(&self) -> &str {
        &self.key[self.agent_id_end + 1..]
    }

    /// Nested sub-agent sessions are never woken; their notices wait for their next turn.
    pub fn is_subagent(&self) -> bool {
        self.rest().starts_with("subagent:")
    }
}

/// What [`AgentSessionKey::parse_canonical`] found.
enum Canonical {
    Yes(AgentSessionKey),
    /// Canonical, and not a valid key however read.
    Invalid,
    /// Not canonical: the general parse decides.
    No,
}

impl fmt::Display for AgentSessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

pub fn is_valid_agent_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    if bytes.is_empty() || bytes.len() > 64 {
        return false;
    }
    let first_ok = bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit();
    first_ok
        && bytes[1..].iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}

/// What kind of session a key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionKind {
    Main,
    Group,
    Subagent,
    Acp,
    Cron,
    Hook,
    Node,
    /// The shared session of a git worktree (`agent:<agentId>:workspace:…`).
    Workspace,
    Other,
}

impl SessionKind {
    pub const ALL: [SessionKind; 9] = [
        SessionKind::Main,
        SessionKind::Group,
        SessionKind::Subagent,
        SessionKind::Acp,
        SessionKind::Cron,
        SessionKind::Hook,
        SessionKind::Node,
        SessionKind::Workspace,
        SessionKind::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Main => "main",
            SessionKind::Group => "group",
            SessionKind::Subagent => "subagent",
            SessionKind::Acp => "acp",
            SessionKind::Cron => "cron",
            SessionKind::Hook => "hook",
            SessionKind::Node => "node",
            SessionKind::Workspace => "workspace",
            SessionKind::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<SessionKind> {
        SessionKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Classifies a session from its key and, when known, its chat type (`group`/`channel` make a group).
/// `main_key` is the configured main key name (`session.mainKey`, default `main`).
pub fn classify_session_kind(key: &str, chat_type: Option<&str>, main_key: &str) -> SessionKind {
    let lower = key.trim().to_ascii_lowercase();
    if lower.starts_with("cron:") || lower.contains(":cron:") {
        return SessionKind::Cron;
    }
    let parsed = AgentSessionKey::parse(&lower);
    let rest = parsed.as_ref().map(|k| k.rest().to_string()).unwrap_or_else(|| lower.clone());
    if rest == main_key || lower == "main" || lower == "global" {
        return SessionKind::Main;
    }
    if rest.starts_with("workspace:") || rest.starts_with("workspace@") {
        return SessionKind::Workspace;
    }
    let has = |segment: &str| rest.split(':').any(|p| p == segment);
    if has("subagent") {
        return SessionKind::Subagent;
    }
    if has("acp") {
        return SessionKind::Acp;
    }
    if has("group") || has("channel") || matches!(chat_type, Some("group" | "channel")) {
        return SessionKind::Group;
    }
    if rest.starts_with("hook:") || has("hook") {
        return SessionKind::Hook;
    }
    if rest.starts_with("node:") || has("node") {
        return SessionKind::Node;
    }
    SessionKind::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_agent_qualified_keys() {
        let k = AgentSessionKey::parse("Agent:Main:SubAgent:7F3C").unwrap();
        assert_eq!(k.as_str(), "agent:main:subagent:7f3c");
        assert_eq!(k.agent_id(), "main");
        assert_eq!(k.rest(), "subagent:7f3c");
        assert!(k.is_subagent());
        let g = AgentSessionKey::parse("agent:ops:telegram:group:-100123").unwrap();
        assert_eq!(g.rest(), "telegram:group:-100123");
        assert!(!g.is_subagent());
    }

    /// The in-place reading of a canonical key answers what the general parse answers, for every string
    /// made of the characters that matter (case, separators, whitespace, agent-id characters, non-ASCII).
    #[test]
    fn a_canonical_key_parses_as_any_key_does() {
        let alphabet = ['a', 'A', 'g', 'e', 'n', 't', ':', ' ', '\u{a0}', '-', '_', '1', 'é', 'K'];
        let mut checked = 0;
        let mut check = |s: &str| {
            assert_eq!(AgentSessionKey::parse(s), AgentSessionKey::parse_any(s), "{s:?}");
            checked += 1;
        };
        // Every string up to 4 characters over the alphabet, after each prefix that reaches the agent id.
        let mut words = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> =
                words.iter().flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}"))).collect();
            words.extend(longer);
        }
        words.sort();
        words.dedup();
        for w in &words {
            for prefix in [
                "",
                "agent:",
                "agent:main:",
                "agent:Main",
                "Agent:main:",
                " agent:m:",
                ":agent:m:",
                "agent::m:",
            ] {
                check(&format!("{prefix}{w}"));
            }
        }
        assert!(checked > 200_000, "{checked}");
    }

    #[test]
    fn rejects_invalid_keys() {
        for bad in [
            "main",
            "global",
            "agent:main",
            "agent::main",
            "agent:-x:main",
            "agnt:main:main",
            "",
            "agent:a b:c",
        ] {
            assert!(AgentSessionKey::parse(bad).is_none(), "{bad} should not parse");
        }
        let long = format!("agent:{}:main", "a".repeat(65));
        assert!(AgentSessionKey::parse(&long).is_none());
        let ok = format!("agent:{}:main", "a".repeat(64));
        assert!(AgentSessionKey::parse(&ok).is_some());
    }

    #[test]
    fn classifies_kinds() {
        let cases = [
            ("agent:main:main", None, SessionKind::Main),
            ("agent:main:subagent:1", None, SessionKind::Subagent),
            ("agent:main:acp:1", None, SessionKind::Acp),
            ("cron:nightly", None, SessionKind::Cron),
            ("agent:ops:telegram:group:-1", None, SessionKind::Group),
            ("agent:ops:slack:channel:c1", None, SessionKind::Group),
            ("agent:ops:telegram:dm:42", Some("group"), SessionKind::Group),
            ("agent:ops:telegram:dm:42", None, SessionKind::Other),
            ("agent:main:hook:gmail", None, SessionKind::Hook),
            ("agent:main:node:n1", None, SessionKind::Node),
            ("global", None, SessionKind::Main),
            ("agent:main:workspace:demo-1a2b3c4d", None, SessionKind::Workspace),
            ("agent:main:workspace@buildbox:demo-1a2b3c4d", None, SessionKind::Workspace),
            ("agent:main:claude@buildbox:abc", None, SessionKind::Other),
        ];
        for (key, chat, want) in cases {
            assert_eq!(classify_session_kind(key, chat, "main"), want, "{key}");
        }
    }

    #[test]
    fn workspace_keys_parse_and_stay_in_the_key_alphabet() {
        let k = AgentSessionKey::build_workspace("main", "My Repo:x", "1A2B3C4D");
        assert_eq!(k, "agent:main:workspace:my-repo-x-1a2b3c4d");
        assert_eq!(AgentSessionKey::parse(&k).unwrap().as_str(), k, "already canonical");
        assert_eq!(AgentSessionKey::build_workspace("main", "::", "ab"), "agent:main:workspace:ws-ab");
        let long = AgentSessionKey::build_workspace("main", &"ab".repeat(60), "ab");
        assert_eq!(long.len(), "agent:main:workspace:".len() + 48 + 3);
    }

    #[test]
    fn a_node_s_keys_name_the_node() {
        let w = AgentSessionKey::build_node_workspace("main", "buildbox", "My Repo", "1A2B3C4D");
        assert_eq!(w, "agent:main:workspace@buildbox:my-repo-1a2b3c4d");
        let parsed = AgentSessionKey::parse(&w).unwrap();
        assert_eq!((parsed.as_str(), parsed.node()), (w.as_str(), Some("buildbox")));
        let remote = AgentSessionKey::build_remote("main", "claude", "gpu-1", "ABC");
        assert_eq!(AgentSessionKey::parse(&remote).unwrap().node(), Some("gpu-1"));
        for local in [
            AgentSessionKey::build_workspace("main", "r", "ab"),
            AgentSessionKey::build_adopted("main", "claude", "abc"),
            "agent:main:main".to_string(),
            "agent:main:a@b".to_string(),
        ] {
            assert_eq!(AgentSessionKey::parse(&local).unwrap().node(), None, "{local}");
        }
    }
}
