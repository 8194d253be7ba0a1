//! What every handler shares: the state behind the router, and the small HTTP helpers handlers and
//! middlewares use (bearer credentials, query parameters). A leaf of the server's modules: it knows the
//! gateway, not the routes (`http.rs` builds those).

use crate::gateway::Gateway;
use crate::login::Logins;
use crate::metrics::HttpMetrics;
use axum::http::{HeaderMap, Uri, header};
use sessionwatch_store::Store;
use std::sync::Arc;

/// The largest request body any route reads.
pub(crate) const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// What every handler shares.
pub struct AppState<S: Store> {
    pub gateway: Arc<Gateway<S>>,
    /// `None`: no auth (loopback only).
    pub token: Option<String>,
    pub metrics: HttpMetrics,
    /// Browser logins of the dashboard.
    pub logins: Logins,
}

impl<S: Store> AppState<S> {
    pub fn new(gateway: Arc<Gateway<S>>, token: Option<String>) -> AppState<S> {
        AppState { gateway, token, metrics: HttpMetrics::default(), logins: Default::default() }
    }
}

/// The state as handlers extract it.
pub(crate) type Shared<S> = Arc<AppState<S>>;

/// The credentials of the request's `Authorization: Bearer …` header.
pub(crate) fn bearer_of(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_credentials)
}

/// True when the request's bearer credentials are `token` (compared in constant time).
pub(crate) fn carries_token(headers: &HeaderMap, token: &str) -> bool {
    bearer_of(headers).is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes()))
}

/// The credentials of an `Authorization: Bearer …` value; the scheme is case-insensitive (RFC 9110 §11.1).
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Parses `?a=b&c=d` (percent-decoded).
pub(crate) fn query_param(headers_uri: &Uri, name: &str) -> Option<String> {
    let q = headers_uri.query()?;
    q.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| {
            percent_encoding::percent_decode_str(&v.replace('+', " ")).decode_utf8_lossy().into_owned()
        })
    })
}
