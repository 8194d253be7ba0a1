//! Stale-state notices: the exact text and the queue context key.

use crate::key::AgentSessionKey;

const CONTEXT_PREFIX: &str = "session-state:";

/// A notice for `watcher` that `target` changed; the text says `changesSince since` (the cursor's L).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Notice {
    pub watcher: AgentSessionKey,
    pub target: AgentSessionKey,
    pub since: u64,
    /// Ambient watches only queue; they never wake.
    pub queue_only: bool,
}

impl Notice {
    pub fn text(&self) -> String {
        notice_text(&self.target, self.since)
    }

    pub fn context_key(&self) -> String {
        context_key(&self.target)
    }

    /// Main-session watchers are woken at once; nested sub-agents and ambient watches wait for their
    /// next turn.
    pub fn wakes(&self) -> bool {
        !self.queue_only && !self.watcher.is_subagent()
    }
}

/// The byte-stable notice text. It depends only on the target and L.
pub fn notice_text(target: &AgentSessionKey, since: u64) -> String {
    format!(
        "Session \"{t}\" changed (other actor). Open: [session](/chat/{a}/{r}). Reconcile before acting: session_status sessionKey \"{t}\" changesSince {since}.",
        t = target.as_str(),
        a = target.agent_id(),
        r = target.rest().replace(':', "/"),
    )
}

/// `session-state:` + lowercase hex of the target key's UTF-8 bytes.
pub fn context_key(target: &AgentSessionKey) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(CONTEXT_PREFIX.len() + target.as_str().len() * 2);
    out.push_str(CONTEXT_PREFIX);
    for b in target.as_str().bytes() {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 0xf) as usize] as char);
    }
    out
}

/// Decodes a context key back to its target. Fails closed: wrong prefix, empty, odd-length, upper-case
/// or non-hex digits, invalid UTF-8, or a target that is not an agent-qualified key give `None`.
pub fn decode_context_key(context: &str) -> Option<AgentSessionKey> {
    let hex = context.strip_prefix(CONTEXT_PREFIX)?;
    if hex.is_empty() || hex.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let bytes: Option<Vec<u8>> =
        hex.as_bytes().chunks(2).map(|p| Some(digit(p[0])? << 4 | digit(p[1])?)).collect();
    let text = String::from_utf8(bytes?).ok()?;
    let key = AgentSessionKey::parse(&text)?;
    (key.as_str() == text).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> AgentSessionKey {
        AgentSessionKey::parse(s).unwrap()
    }

    #[test]
    fn exact_text() {
        let t = key("agent:main:dashboard:7ac7cf4b");
        assert_eq!(
            notice_text(&t, 4),
            "Session \"agent:main:dashboard:7ac7cf4b\" changed (other actor). Open: [session](/chat/main/dashboard/7ac7cf4b). Reconcile before acting: session_status sessionKey \"agent:main:dashboard:7ac7cf4b\" changesSince 4."
        );
    }

    #[test]
    fn context_keys_round_trip_and_fail_closed() {
        let t = key("agent:main:subagent:child");
        let ck = context_key(&t);
        assert!(ck.starts_with("session-state:6167656e74"));
        assert_eq!(decode_context_key(&ck), Some(t));
        for bad in [
            "session-state:",
            "session-state:6",
            "session-state:6G",
            "session-state:6167656E743A6D61696E3A78", // upper-case hex
            "other:6167",
            "session-state:ff",
            "session-state:676c6f62616c", // "global": not agent-qualified
        ] {
            assert_eq!(decode_context_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn wake_rules() {
        let main = key("agent:main:main");
        let sub = key("agent:main:subagent:a");
        let t = key("agent:main:subagent:b");
        let n = |w: &AgentSessionKey, q| Notice {
            watcher: w.clone(),
            target: t.clone(),
            since: 0,
            queue_only: q,
        };
        assert!(n(&main, false).wakes());
        assert!(!n(&main, true).wakes(), "ambient watches never wake");
        assert!(!n(&sub, false).wakes(), "nested sub-agents wait for their next turn");
    }
}
