//! Strict argument reading for the tools (OpenClaw's lenient shapes: an integer as text, one kind as a
//! list; the host and hook bodies are typed, `request_body`): wrong types and out-of-range numbers are
//! `invalid_argument` errors that name the field, as are fields `Args::new` was not told of.

use crate::error::{ApiError, ApiResult};
use serde_json::{Map, Value};

pub(crate) struct Args<'a> {
    what: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// `value` must be an object (or null/absent, read as empty) holding only `allowed` keys.
    pub(crate) fn new(what: &'a str, value: &'a Value, allowed: &[&str]) -> ApiResult<Args<'a>> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        let map = match value {
            Value::Object(m) => m,
            Value::Null => EMPTY.get_or_init(Map::new),
            _ => return Err(ApiError::invalid(format!("{what} must be a JSON object"))),
        };
        if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(ApiError::invalid(format!(
                "{what}: unknown field \"{k}\" (allowed: {})",
                allowed.join(", ")
            )));
        }
        Ok(Args { what, map })
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn opt_str(&self, key: &str) -> ApiResult<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(ApiError::invalid(format!("{}.{key} must be a string", self.what))),
        }
    }

    pub(crate) fn opt_bool(&self, key: &str) -> ApiResult<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(ApiError::invalid(format!("{}.{key} must be a boolean", self.what))),
        }
    }

    /// An integer in `[min, max]`.
    pub(crate) fn opt_int(&self, key: &str, min: i64, max: i64) -> ApiResult<Option<i64>> {
        let Some(v) = self.get(key) else { return Ok(None) };
        let n = v
            .as_i64()
            .filter(|_| v.is_i64() || v.is_u64())
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i64));
        match n {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            Some(_) => Err(ApiError::invalid(format!("{}.{key} must be between {min} and {max}", self.what))),
            None => Err(ApiError::invalid(format!("{}.{key} must be an integer", self.what))),
        }
    }

    /// [`Args::opt_int`], also accepting the integer as a decimal string (`"0"`), as OpenClaw does.
    pub(crate) fn opt_int_lenient(&self, key: &str, min: i64, max: i64) -> ApiResult<Option<i64>> {
        match self.get(key) {
            Some(Value::String(s)) => match s.trim().parse::<i64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
                Ok(_) => {
                    Err(ApiError::invalid(format!("{}.{key} must be between {min} and {max}", self.what)))
                }
                Err(_) => Err(ApiError::invalid(format!("{}.{key} must be an integer", self.what))),
            },
            _ => self.opt_int(key, min, max),
        }
    }

    /// A list of strings, or one string (read as a list of one), as OpenClaw does for `kinds`.
    pub(crate) fn opt_str_or_list(&self, key: &str) -> ApiResult<Option<Vec<&'a str>>> {
        match self.get(key) {
            Some(Value::String(s)) => Ok(Some(vec![s.as_str()])),
            _ => self.opt_str_list(key),
        }
    }

    pub(crate) fn opt_str_list(&self, key: &str) -> ApiResult<Option<Vec<&'a str>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| {
                    i.as_str().ok_or_else(|| {
                        ApiError::invalid(format!("{}.{key} must be a list of strings", self.what))
                    })
                })
                .collect::<ApiResult<Vec<_>>>()
                .map(Some),
            Some(_) => Err(ApiError::invalid(format!("{}.{key} must be a list of strings", self.what))),
        }
    }
}
