//! Reading a tool call's arguments by their one definition ([`super::tool_spec`]): names and aliases,
//! kinds, ranges, clamps and required fields all come from there. Wrong types and out-of-range values
//! are errors naming the field; nothing is read twice or guessed. An unknown field is ignored and
//! reported ([`ArgNotes::ignored_args`]), as OpenClaw ignores it: a model's tool call often adds one.
//! A value above a clamped argument's cap is lowered to it and reported ([`ArgNotes::clamped_args`]).

use super::tool_spec::{DEFAULT_LIST_LIMIT, Kind, SESSION_KINDS, ToolSpec, spec};
use crate::args::Args;
use crate::error::{ApiError, ApiResult};
use serde_json::Value;
use sessionwatch_core::{Limit, is_valid_agent_id};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// What a call's arguments did not do as given: reported in its result's `details`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ArgNotes {
    /// Arguments that had no effect: unknown ones, and those accepted only for compatibility.
    pub ignored_args: Vec<String>,
    /// Arguments lowered to their cap: name → (requested, applied).
    pub clamped_args: BTreeMap<String, (i64, i64)>,
}

/// Whom `sessions_send` addresses: a key, a session label, or an agent's main session.
pub(crate) enum SendTarget {
    Key(String),
    Label(String),
    Agent(String),
}

/// A parsed, validated tool call.
pub(crate) enum ToolCall {
    Status { session_key: Option<String>, changes_since: Option<u64>, limit: Limit },
    List { kinds: Option<Vec<String>>, limit: u32, offset: u32, active_minutes: Option<i64> },
    History { session_key: String, limit: u32, include_tools: bool },
    Send { target: SendTarget, message: String, timeout_seconds: u64, watch: Option<bool> },
    Spawn { task: String, label: Option<String>, agent_id: Option<String>, run_timeout_seconds: Option<u64> },
    Unwatch { session_key: String },
}

/// The arguments of one call, read through its tool's spec.
struct Fields<'a> {
    spec: &'static ToolSpec,
    args: Args<'a>,
    notes: RefCell<ArgNotes>,
}

impl<'a> Fields<'a> {
    fn new(spec: &'static ToolSpec, args: &'a Value) -> ApiResult<Fields<'a>> {
        let accepted = spec.accepted();
        let unknown: Vec<&str> = match args {
            Value::Object(m) => m.keys().map(String::as_str).filter(|k| !accepted.contains(k)).collect(),
            _ => Vec::new(),
        };
        let allowed: Vec<&str> = accepted.iter().copied().chain(unknown.iter().copied()).collect();
        let notes =
            ArgNotes { ignored_args: unknown.iter().map(|k| k.to_string()).collect(), ..ArgNotes::default() };
        Ok(Fields { spec, args: Args::new("args", args, &allowed)?, notes: RefCell::new(notes) })
    }

    /// The one value given for `name` under its name or an alias (two different values disagree).
    fn pick<T: PartialEq>(
        &self,
        name: &str,
        read: impl Fn(&str) -> ApiResult<Option<T>>,
    ) -> ApiResult<Option<T>> {
        let arg = self.spec.arg(name);
        let mut found: Option<(T, &str)> = None;
        for n in std::iter::once(arg.name).chain(arg.aliases.iter().copied()) {
            if let Some(v) = read(n)? {
                match &found {
                    Some((f, other)) if *f != v => {
                        return Err(ApiError::invalid(format!("args.{other} and args.{n} disagree")));
                    }
                    Some(_) => {}
                    None => found = Some((v, n)),
                }
            }
        }
        let value = found.map(|(v, _)| v);
        if value.is_none() && arg.required {
            return Err(ApiError::invalid(format!("args.{name} is required")));
        }
        Ok(value)
    }

    fn int(&self, name: &str) -> ApiResult<Option<i64>> {
        let Kind::Int { min, max, clamp } = self.spec.arg(name).kind else {
            unreachable!("{name} is an integer")
        };
        let upper = if clamp { i64::MAX } else { max };
        let n = self.pick(name, |n| {
            self.args.opt_int_lenient(n, min, upper).map_err(|e| match (clamp, min) {
                (true, 1) => ApiError::invalid(format!("args.{n} must be a positive integer")),
                _ => e,
            })
        })?;
        if let Some(n) = n.filter(|n| *n > max) {
            self.notes.borrow_mut().clamped_args.insert(name.to_string(), (n, max));
        }
        Ok(n.map(|n| n.min(max)))
    }

    fn text(&self, name: &str) -> ApiResult<Option<String>> {
        let max_bytes = match self.spec.arg(name).kind {
            Kind::Text { max_bytes } => max_bytes,
            _ => usize::MAX,
        };
        let s = self.pick(name, |n| self.args.opt_str(n).map(|s| s.map(str::to_string)))?;
        match s {
            Some(s) if s.trim().is_empty() => {
                Err(ApiError::invalid(format!("args.{name} must not be empty")))
            }
            Some(s) if s.len() > max_bytes => {
                Err(ApiError::invalid(format!("args.{name} is over {max_bytes} bytes")))
            }
            other => Ok(other),
        }
    }

    fn flag(&self, name: &str) -> ApiResult<Option<bool>> {
        self.pick(name, |n| self.args.opt_bool(n))
    }

    fn agent(&self, name: &str) -> ApiResult<Option<String>> {
        let id = self.text(name)?.map(|s| s.trim().to_ascii_lowercase());
        if let Some(id) = &id
            && !is_valid_agent_id(id)
        {
            return Err(ApiError::invalid(format!("args.{name} \"{id}\" is not a valid agent id")));
        }
        Ok(id)
    }

    fn kinds(&self, name: &str) -> ApiResult<Option<Vec<String>>> {
        let kinds = self.pick(name, |n| {
            self.args
                .opt_str_or_list(n)
                .map(|k| k.map(|k| k.into_iter().map(str::to_string).collect::<Vec<_>>()))
        })?;
        if let Some(bad) = kinds.iter().flatten().find(|k| !SESSION_KINDS.contains(&k.as_str())) {
            return Err(ApiError::invalid(format!(
                "args.{name}: unknown kind \"{bad}\" ({})",
                SESSION_KINDS.join(", ")
            )));
        }
        Ok(kinds)
    }

    /// Checks the arguments accepted only for compatibility (strings, then ignored).
    fn ignored(&self) -> ApiResult<()> {
        for a in self.spec.args.iter().filter(|a| a.kind == Kind::Ignored) {
            if self.args.opt_str(a.name)?.is_some() {
                self.notes.borrow_mut().ignored_args.push(a.name.to_string());
            }
        }
        Ok(())
    }
}

impl ToolCall {
    /// The call and what its arguments did not do as given.
    pub(super) fn parse(tool: &str, args: &Value) -> ApiResult<(ToolCall, ArgNotes)> {
        let spec = spec(tool).ok_or_else(|| ApiError::UnknownTool(format!("unknown tool \"{tool}\"")))?;
        let f = Fields::new(spec, args)?;
        f.ignored()?;
        let call = ToolCall::read(tool, &f)?;
        let mut notes = f.notes.into_inner();
        notes.ignored_args.sort();
        Ok((call, notes))
    }

    fn read(tool: &str, f: &Fields<'_>) -> ApiResult<ToolCall> {
        let required = |v: Option<String>| v.expect("required arguments are checked by Fields::pick");
        Ok(match tool {
            "session_status" => ToolCall::Status {
                session_key: f.text("sessionKey")?,
                changes_since: f.int("changesSince")?.map(|n| n as u64),
                limit: match f.int("limit")? {
                    Some(n) => Limit::new(n)
                        .map_err(|_| ApiError::invalid("args.limit must be between 1 and 200"))?,
                    None => Limit::MAX,
                },
            },
            "sessions_list" => ToolCall::List {
                kinds: f.kinds("kinds")?,
                limit: f.int("limit")?.map_or(DEFAULT_LIST_LIMIT, |n| n as u32),
                offset: f.int("offset")?.unwrap_or(0) as u32,
                active_minutes: f.int("activeMinutes")?,
            },
            "sessions_history" => ToolCall::History {
                session_key: required(f.text("sessionKey")?),
                limit: f.int("limit")?.map_or(50, |n| n as u32),
                include_tools: f.flag("includeTools")?.unwrap_or(false),
            },
            "sessions_send" => {
                let target = match (f.text("sessionKey")?, f.text("label")?, f.agent("agentId")?) {
                    (Some(k), None, None) => SendTarget::Key(k),
                    (None, Some(l), None) => SendTarget::Label(l.trim().to_string()),
                    (None, None, Some(g)) => SendTarget::Agent(g),
                    (None, None, None) => return Err(ApiError::invalid("args.sessionKey is required")),
                    _ => {
                        return Err(ApiError::invalid(
                            "give one of args.sessionKey, args.label, args.agentId",
                        ));
                    }
                };
                ToolCall::Send {
                    target,
                    message: required(f.text("message")?),
                    timeout_seconds: f.int("timeoutSeconds")?.unwrap_or(0) as u64,
                    watch: f.flag("watch")?,
                }
            }
            "sessions_spawn" => ToolCall::Spawn {
                task: required(f.text("task")?),
                label: f.text("label")?,
                agent_id: f.agent("agentId")?,
                run_timeout_seconds: f.int("runTimeoutSeconds")?.map(|n| n as u64),
            },
            "sessions_unwatch" => ToolCall::Unwatch { session_key: required(f.text("sessionKey")?) },
            _ => unreachable!("every spec has a parser"),
        })
    }
}
