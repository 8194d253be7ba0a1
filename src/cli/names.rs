//! Sessions by name: a key, a unique session-id prefix or a label, resolved against the gateway's
//! listing (`GET /v1/sessions`), and the `sessionwatch sessions` table.

use sessionwatch_server::host_protocol::ListedSessionJson;
use std::fmt;

/// Why a name names no one session.
#[derive(Debug, PartialEq, Eq)]
pub enum NameError {
    NoMatch(String),
    /// The name matches several sessions: their keys.
    Ambiguous(String, Vec<String>),
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::NoMatch(name) => write!(
                f,
                "no session is named {name:?}: no key, session-id prefix or label matches (see `sessionwatch sessions`)"
            ),
            NameError::Ambiguous(name, keys) => {
                write!(f, "{name:?} names {} sessions; give more of the id, or the key:", keys.len())?;
                keys.iter().try_for_each(|k| write!(f, "\n  {k}"))
            }
        }
    }
}

impl std::error::Error for NameError {}

/// The key `name` stands for: an exact key wins; else the one session whose native session id starts
/// with it (case-insensitively) or whose label is it; else, when it has the shape of a key (a `:`,
/// or the gateway's `main` alias), itself, for the gateway to resolve (a session to create, or an
/// error of its own).
pub fn resolve_name(name: &str, sessions: &[ListedSessionJson]) -> Result<String, NameError> {
    let name = name.trim();
    if let Some(s) = sessions.iter().find(|s| s.session_key == name) {
        return Ok(s.session_key.clone());
    }
    let lower = name.to_ascii_lowercase();
    let mut matching: Vec<&str> = sessions
        .iter()
        .filter(|s| {
            let by_id = !lower.is_empty() && s.native_id.to_ascii_lowercase().starts_with(&lower);
            by_id || s.label.as_deref() == Some(name)
        })
        .map(|s| s.session_key.as_str())
        .collect();
    matching.dedup();
    match matching.as_slice() {
        [one] => Ok(one.to_string()),
        [] if name.contains(':') || name == "main" => Ok(name.to_string()),
        [] => Err(NameError::NoMatch(name.to_string())),
        many => Err(NameError::Ambiguous(name.to_string(), many.iter().map(|k| k.to_string()).collect())),
    }
}

/// The listing as a table for people: one session a line, newest first.
pub fn table(sessions: &[ListedSessionJson], home: Option<&str>) -> String {
    let rows: Vec<[String; 7]> = sessions
        .iter()
        .map(|s| {
            let cwd = s.cwd.as_deref().map_or_else(|| "-".to_string(), |c| tilde(c, home));
            [
                s.source.clone() + &s.node.as_ref().map(|n| format!("@{n}")).unwrap_or_default(),
                s.native_id.chars().take(8).collect(),
                s.state.clone(),
                s.state_version.to_string(),
                cwd,
                s.label.as_deref().map_or_else(|| "-".to_string(), |l| shorten(l, 40)),
                s.session_key.clone(),
            ]
        })
        .collect();
    let header = ["SOURCE", "ID", "STATE", "VERSION", "CWD", "TITLE", "KEY"].map(str::to_string);
    let mut widths = header.clone().map(|h| h.chars().count());
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |r: &[String; 7]| {
        let cells: Vec<String> = r.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        cells.join("  ").trim_end().to_string() + "\n"
    };
    std::iter::once(&header).chain(&rows).map(line).collect()
}

fn tilde(path: &str, home: Option<&str>) -> String {
    match home.filter(|h| !h.is_empty()).and_then(|h| path.strip_prefix(h)) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("~{rest}"),
        _ => path.to_string(),
    }
}

fn shorten(s: &str, max: usize) -> String {
    let one_line = s.replace(['\n', '\r', '\t'], " ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    one_line.chars().take(max - 1).collect::<String>() + "…"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(key: &str, native_id: &str, label: Option<&str>) -> ListedSessionJson {
        ListedSessionJson {
            session_key: key.into(),
            agent_id: "main".into(),
            source: "claude".into(),
            native_id: native_id.into(),
            node: None,
            kind: "other".into(),
            label: label.map(str::to_string),
            cwd: Some("/home/u/work".into()),
            state: "waiting".into(),
            state_version: 3,
            parent_session_key: None,
            updated_at: 0,
        }
    }

    fn fleet() -> Vec<ListedSessionJson> {
        vec![
            session("agent:main:claude:3f2a9c", "3f2a9c", Some("worker-a")),
            session("agent:main:claude:3f77d0", "3f77d0", None),
            session("agent:main:codex:019abc", "019abc", Some("worker-b")),
            // A label that is also another session's id prefix.
            session("agent:main:main", "5e1d-uuid", Some("019")),
        ]
    }

    #[test]
    fn an_exact_key_wins() {
        let mut f = fleet();
        // Even over a session whose label is that key.
        f.push(session("agent:main:subagent:x", "x", Some("agent:main:main")));
        assert_eq!(resolve_name("agent:main:main", &f).unwrap(), "agent:main:main");
    }

    #[test]
    fn a_unique_id_prefix_names_its_session() {
        assert_eq!(resolve_name("3f2a", &fleet()).unwrap(), "agent:main:claude:3f2a9c");
        assert_eq!(resolve_name("3F77", &fleet()).unwrap(), "agent:main:claude:3f77d0", "any case");
        assert_eq!(resolve_name("3f77d0", &fleet()).unwrap(), "agent:main:claude:3f77d0", "the whole id");
    }

    #[test]
    fn a_label_names_its_session() {
        assert_eq!(resolve_name("worker-b", &fleet()).unwrap(), "agent:main:codex:019abc");
        assert_eq!(resolve_name(" worker-a ", &fleet()).unwrap(), "agent:main:claude:3f2a9c");
    }

    #[test]
    fn an_ambiguous_name_lists_the_candidates() {
        let err = resolve_name("3f", &fleet()).unwrap_err();
        assert_eq!(
            err,
            NameError::Ambiguous(
                "3f".into(),
                vec!["agent:main:claude:3f2a9c".into(), "agent:main:claude:3f77d0".into()]
            )
        );
        assert!(err.to_string().contains("\n  agent:main:claude:3f77d0"), "{err}");
        // A label and another session's id prefix.
        assert!(matches!(resolve_name("019", &fleet()), Err(NameError::Ambiguous(_, k)) if k.len() == 2));
    }

    #[test]
    fn no_match_is_an_error_unless_it_is_a_key_for_the_gateway() {
        let err = resolve_name("worker-z", &fleet()).unwrap_err();
        assert_eq!(err, NameError::NoMatch("worker-z".into()));
        assert!(err.to_string().contains("sessionwatch sessions"));
        assert!(matches!(resolve_name("", &fleet()), Err(NameError::NoMatch(_))), "empty names nothing");
        assert_eq!(resolve_name("agent:ops:new", &fleet()).unwrap(), "agent:ops:new", "a key to create");
        assert_eq!(resolve_name("main", &[]).unwrap(), "main", "the gateway's own alias");
    }

    #[test]
    fn the_table_is_aligned_and_shortens_home() {
        let t = table(&fleet()[..1], Some("/home/u"));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("SOURCE  ID "), "{t}");
        assert!(lines[1].contains("~/work"), "{t}");
        assert_eq!(lines[0].find("KEY"), lines[1].find("agent:"), "{t}");
        assert_eq!(tilde("/home/user2/x", Some("/home/u")), "/home/user2/x", "not a prefix of a name");
    }
}
