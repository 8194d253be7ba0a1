//! The cross-site guard every route sits behind: a `Host` we answer to, no foreign `Origin`, and JSON
//! bodies only as `application/json`.
//!
//! Why: with `--auth none` on loopback, a web page in the user's browser can otherwise reach the gateway
//! (a `text/plain` form POST needs no preflight; DNS rebinding gives a foreign `Host`). Browsers always
//! send `Origin` on cross-origin POSTs, so refusing foreign origins closes the CSRF path; requiring
//! `application/json` means a request a page can send without a CORS preflight never carries a body.

use crate::error::ApiError;
use axum::extract::Request;
use axum::http::{Method, header};
use std::sync::Arc;

/// The hosts (`name` or `name:port`) requests may name in `Host` and `Origin`.
#[derive(Debug, Clone)]
pub(crate) struct AllowedHosts(Arc<Vec<String>>);

impl AllowedHosts {
    /// Loopback names, the listen address (unless unspecified) and the configured extra hosts.
    pub(crate) fn new(listen: Option<std::net::SocketAddr>, extra: &[String]) -> AllowedHosts {
        let mut hosts: Vec<String> =
            crate::mcp::LOOPBACK_HOSTS.iter().map(|h| h.to_string()).chain(extra.iter().cloned()).collect();
        if let Some(addr) = listen.filter(|a| !a.ip().is_unspecified()) {
            hosts.push(addr.ip().to_string());
        }
        AllowedHosts(Arc::new(hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect()))
    }

    /// True when `authority` (`host`, `host:port`, `[v6]:port`) names an allowed host.
    pub(crate) fn allows(&self, authority: &str) -> bool {
        // Compared without case, not lowercased: every request asks, and a copy per request adds up.
        let authority = authority.trim();
        let name = host_name(authority);
        self.0.iter().any(|h| {
            h.eq_ignore_ascii_case(authority)
                || h.trim_start_matches('[').trim_end_matches(']').eq_ignore_ascii_case(name)
        })
    }
}

/// The host part of an authority, without port or IPv6 brackets.
fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match authority.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => authority,
    }
}

/// The authority of an `Origin` value (`scheme://authority`), `None` for `null` or anything else.
fn origin_authority(origin: &str) -> Option<&str> {
    let (_, rest) = origin.split_once("://")?;
    Some(rest.split('/').next().unwrap_or(rest)).filter(|a| !a.is_empty())
}

/// Refuses a request naming a host we do not answer to, from a foreign origin, or carrying a body
/// that is not `application/json` (where the route expects JSON).
pub(crate) fn check(allowed: &AllowedHosts, req: &Request) -> Result<(), ApiError> {
    let headers = req.headers();
    // A request without `Host` (HTTP/1.0, in-process calls) names no foreign host.
    if let Some(host) = headers.get(header::HOST) {
        let ok = host.to_str().is_ok_and(|h| allowed.allows(h));
        if !ok {
            return Err(ApiError::Forbidden(
                "this Host is not served here (add it to gateway.mcpAllowedHosts to allow it)".into(),
            ));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin.to_str().ok().and_then(origin_authority).is_some_and(|a| allowed.allows(a));
        if !ok {
            return Err(ApiError::Forbidden("cross-site requests are refused (foreign Origin)".into()));
        }
    }
    // `/mcp` checks its own media types (rmcp answers them per the MCP transport spec); the dashboard's
    // login and logout are HTML forms (same-origin only: the Origin check above, and its cookie is
    // SameSite=Strict).
    let writes = matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH);
    let path = req.uri().path();
    if writes && !path.starts_with("/mcp") && !crate::dashboard::FORM_PATHS.contains(&path) {
        match headers.get(header::CONTENT_TYPE) {
            Some(ct) => {
                let essence = ct.to_str().unwrap_or("").split(';').next().unwrap_or("").trim();
                if !essence.eq_ignore_ascii_case("application/json") {
                    return Err(ApiError::UnsupportedMediaType(
                        "the body must be sent as Content-Type: application/json".into(),
                    ));
                }
            }
            None if has_body(req) => {
                return Err(ApiError::UnsupportedMediaType(
                    "a body needs Content-Type: application/json".into(),
                ));
            }
            None => {}
        }
    }
    Ok(())
}

fn has_body(req: &Request) -> bool {
    let headers = req.headers();
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim() != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_matched_without_port_and_brackets() {
        let a = AllowedHosts::new(None, &["gw.example".into(), "box:7420".into()]);
        for ok in ["127.0.0.1:7420", "localhost", "LOCALHOST:1", "[::1]:7420", "gw.example:80", "box:7420"] {
            assert!(a.allows(ok), "{ok}");
        }
        for bad in ["evil.example", "127.0.0.1.evil.example", "box:7421", "", "gw.example.evil"] {
            assert!(!a.allows(bad), "{bad}");
        }
    }

    #[test]
    fn origins_name_an_authority() {
        assert_eq!(origin_authority("http://127.0.0.1:7420"), Some("127.0.0.1:7420"));
        assert_eq!(origin_authority("null"), None);
        assert_eq!(origin_authority("https://x.example/"), Some("x.example"));
    }

    #[test]
    fn the_listen_address_is_allowed_unless_unspecified() {
        let a = AllowedHosts::new(Some("10.0.0.5:7420".parse().unwrap()), &[]);
        assert!(a.allows("10.0.0.5:7420"));
        let b = AllowedHosts::new(Some("0.0.0.0:7420".parse().unwrap()), &[]);
        assert!(!b.allows("0.0.0.0"));
    }
}
