//! The dashboard: `GET /` (sessions, counts, the watch graph) and `GET /chat/<agent>/<rest>` (one
//! session: timeline, watchers and targets, pending notices, upstream, reconcile), the exact path every
//! notice links to. Server-rendered HTML (`pages.rs`, maud) with one small embedded script that
//! refreshes the page's live part from `/v1/stream?include=changes`. Read-only.
//!
//! Auth: the bearer token as everywhere, or, for a browser, the cookie a login sets (`login.rs`). The
//! cookie opens only these pages and the stream (`GET`), never a writing route.

mod graph;
mod pages;
mod view;

use crate::login;
use crate::state::{AppState, carries_token, constant_time_eq};
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use sessionwatch_core::{SessionKind, is_valid_agent_id};
use sessionwatch_store::Store;
use std::sync::Arc;

pub use view::chat_path;

type Shared<S> = Arc<AppState<S>>;

const SCRIPT: &str = include_str!("assets/dashboard.js");
const STYLE: &str = include_str!("assets/dashboard.css");
/// Pages load only our own script and style; no frames, no foreign form targets.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The dashboard's routes (each checks the browser's access itself).
pub(crate) fn routes<S: Store>() -> Router<Shared<S>> {
    Router::new()
        .route("/", get(overview::<S>))
        .route("/chat/{agent}/{*rest}", get(session::<S>))
        .route("/login", get(login_page::<S>).post(log_in::<S>))
        .route("/logout", post(log_out::<S>))
        .route("/assets/dashboard.js", get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }))
        .route("/assets/dashboard.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
}

/// Paths a form POST may reach (the cross-site guard lets these through without a JSON body).
pub(crate) const FORM_PATHS: [&str; 2] = ["/login", "/logout"];

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "max-age=300")], body).into_response()
}

/// How a request may see the pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// No token is configured (`--auth none`, loopback only).
    Open,
    Bearer,
    Cookie,
    Denied,
}

fn login_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| login::cookie_value(v, login::COOKIE_NAME))
}

fn access<S: Store>(state: &AppState<S>, headers: &HeaderMap) -> Access {
    let Some(token) = &state.token else { return Access::Open };
    if carries_token(headers, token) {
        return Access::Bearer;
    }
    if has_login_cookie(state, headers) {
        return Access::Cookie;
    }
    Access::Denied
}

/// A page's request: whether it may be shown, `Ok((true, _))` for a logged-in browser (its pages offer a
/// logout), with its query; else a redirect to the login form, or a malformed query's refusal.
#[allow(clippy::result_large_err)]
fn page_request<S: Store, P>(
    state: &AppState<S>,
    headers: &HeaderMap,
    uri: &axum::http::Uri,
    params: Result<Query<P>, QueryRejection>,
) -> Result<(bool, P), Response> {
    let logged_in = match access(state, headers) {
        Access::Denied => return Err(to_login(uri)),
        a => a == Access::Cookie,
    };
    let Ok(Query(p)) = params else { return Err(bad_request(false, "the query string is malformed")) };
    Ok((logged_in, p))
}

/// True when a browser's login cookie opens this request (the stream's check).
pub(crate) fn has_login_cookie<S: Store>(state: &AppState<S>, headers: &HeaderMap) -> bool {
    login_cookie(headers).is_some_and(|c| state.logins.is_valid(c))
}

fn html_page(status: StatusCode, markup: maud::Markup) -> Response {
    let mut resp = (status, pages::into_string(markup)).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // `same-origin`, not `no-referrer`: under `no-referrer` Chromium sends `Origin: null` with the login
    // form, which the cross-site guard rightly refuses.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn redirect(to: &str, cookie: Option<String>) -> Response {
    let mut resp = StatusCode::SEE_OTHER.into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(to) {
        h.insert(header::LOCATION, v);
    }
    if let Some(c) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        h.insert(header::SET_COOKIE, c);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// A local path to return to after logging in; anything else (another site, `//host`) is `/`.
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.starts_with("/\\")
                && !n.chars().any(|c| c.is_control()) =>
        {
            n.to_string()
        }
        _ => "/".into(),
    }
}

fn to_login(here: &axum::http::Uri) -> Response {
    let next = here.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let encoded = percent_encoding::utf8_percent_encode(next, percent_encoding::NON_ALPHANUMERIC);
    redirect(&format!("/login?next={encoded}"), None)
}

fn bad_request(logged_in: bool, what: &str) -> Response {
    html_page(StatusCode::BAD_REQUEST, pages::not_found(logged_in, what))
}

fn internal(e: anyhow::Error) -> Response {
    tracing::warn!(error = %e, "dashboard read failed");
    html_page(
        StatusCode::INTERNAL_SERVER_ERROR,
        pages::not_found(false, "The store could not be read; see the gateway's log."),
    )
}

#[derive(Deserialize, Default)]
struct OverviewParams {
    kind: Option<String>,
    agent: Option<String>,
    page: Option<String>,
}

async fn overview<S: Store>(
    State(state): State<Shared<S>>,
    headers: HeaderMap,
    uri: axum::http::Uri,
    params: Result<Query<OverviewParams>, QueryRejection>,
) -> Response {
    let (logged_in, p) = match page_request(&state, &headers, &uri, params) {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let kind = match p.kind.as_deref().filter(|k| !k.is_empty()) {
        None => None,
        Some(k) => match SessionKind::parse(k) {
            Some(k) => Some(k),
            None => return bad_request(logged_in, "kind: not a session kind"),
        },
    };
    let agent = match p.agent.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
        None => None,
        Some(a) if is_valid_agent_id(a) => Some(a.to_string()),
        Some(_) => return bad_request(logged_in, "agent: not an agent id"),
    };
    let page = match p.page.as_deref().filter(|p| !p.is_empty()).map(str::parse::<u32>) {
        None => 0,
        Some(Ok(n)) if n <= 1_000_000 => n,
        Some(_) => return bad_request(logged_in, "page: not a page number"),
    };
    match view::overview(&state.gateway, view::OverviewQuery { kind, agent, page }).await {
        Ok(o) => html_page(StatusCode::OK, pages::overview(&o, logged_in)),
        Err(e) => internal(e),
    }
}

#[derive(Deserialize, Default)]
struct SessionParams {
    before: Option<String>,
    since: Option<String>,
}

fn sequence_param(raw: Option<&str>) -> Result<Option<u64>, ()> {
    match raw.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s.parse::<u64>().map(Some).map_err(|_| ()),
    }
}

async fn session<S: Store>(
    State(state): State<Shared<S>>,
    headers: HeaderMap,
    uri: axum::http::Uri,
    Path((agent, rest)): Path<(String, String)>,
    params: Result<Query<SessionParams>, QueryRejection>,
) -> Response {
    let (logged_in, p) = match page_request(&state, &headers, &uri, params) {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let (Ok(before), Ok(since)) = (sequence_param(p.before.as_deref()), sequence_param(p.since.as_deref()))
    else {
        return bad_request(logged_in, "before and since are sequence numbers (0 or more)");
    };
    let Some(key) = view::key_of_path(&state.gateway, &agent, &rest).await else {
        return html_page(StatusCode::NOT_FOUND, pages::not_found(logged_in, "No such session here."));
    };
    match view::session(&state.gateway, &key, before, since).await {
        Ok(v) => html_page(StatusCode::OK, pages::session(&v, logged_in)),
        Err(e) => internal(e),
    }
}

#[derive(Deserialize, Default)]
struct LoginParams {
    next: Option<String>,
    code: Option<String>,
}

/// The login form, or the exchange of a one-time link for the cookie.
async fn login_page<S: Store>(
    State(state): State<Shared<S>>,
    params: Result<Query<LoginParams>, QueryRejection>,
) -> Response {
    let Ok(Query(p)) = params else { return bad_request(false, "the query string is malformed") };
    let next = safe_next(p.next.as_deref());
    if let Some(code) = p.code {
        if state.logins.redeem_link(&code) {
            return redirect(&next, Some(login::set_cookie(&state.logins.open())));
        }
        return html_page(
            StatusCode::UNAUTHORIZED,
            pages::login(
                Some("This login link was used already or has expired. Run `sessionwatch ui` again."),
                &next,
            ),
        );
    }
    html_page(StatusCode::OK, pages::login(None, &next))
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
    next: Option<String>,
}

async fn log_in<S: Store>(
    State(state): State<Shared<S>>,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return html_page(StatusCode::BAD_REQUEST, pages::login(Some("Send the login form."), "/"));
    };
    let next = safe_next(form.next.as_deref());
    let ok = match &state.token {
        None => true,
        Some(token) => constant_time_eq(form.token.trim().as_bytes(), token.as_bytes()),
    };
    if !ok {
        return html_page(StatusCode::UNAUTHORIZED, pages::login(Some("Wrong token."), &next));
    }
    redirect(&next, Some(login::set_cookie(&state.logins.open())))
}

async fn log_out<S: Store>(State(state): State<Shared<S>>, headers: HeaderMap) -> Response {
    if let Some(c) = login_cookie(&headers) {
        state.logins.close(c);
    }
    redirect("/login", Some(login::clear_cookie()))
}

/// `POST /v1/ui/login-links` (bearer): a one-time login path for `sessionwatch ui`.
pub(crate) async fn issue_login_link<S: Store>(State(state): State<Shared<S>>) -> Response {
    let code = state.logins.issue_link();
    Json(crate::wire::login_link(&format!("/login?code={code}"), login::LINK_TTL.as_secs())).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next(Some("/chat/main/x")), "/chat/main/x");
        for bad in ["//evil.example/", "https://evil.example/", "/\\evil", "javascript:alert(1)", "/a\nb"] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(safe_next(None), "/");
    }
}
