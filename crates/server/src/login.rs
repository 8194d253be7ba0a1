//! Browser logins: the bearer token typed once into a form (or a one-time link from `sessionwatch ui`)
//! becomes an opaque cookie. The token itself never travels in a URL or a cookie.
//!
//! Why in memory: a login is cheap to repeat, and a gateway restart that logs browsers out is safer
//! than cookie ids that outlive the process in a file. Both maps are bounded, so a client that logs in
//! in a loop cannot grow the gateway's memory.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) const COOKIE_NAME: &str = "sessionwatch_login";
/// How long a browser stays logged in.
pub(crate) const LOGIN_TTL: Duration = Duration::from_secs(12 * 3600);
/// How long a one-time link from `sessionwatch ui` can be used.
pub(crate) const LINK_TTL: Duration = Duration::from_secs(120);
const MAX_LOGINS: usize = 1024;
const MAX_LINKS: usize = 64;

#[derive(Default)]
pub struct Logins {
    /// SHA-256 of a cookie value → when it expires (the value itself is not kept).
    cookies: Mutex<HashMap<[u8; 32], Instant>>,
    /// SHA-256 of a one-time code → when it expires.
    links: Mutex<HashMap<[u8; 32], Instant>>,
}

fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

fn random_secret() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Inserts `key` valid for `ttl`, dropping expired entries and, when full, the one expiring first.
fn insert_bounded(map: &mut HashMap<[u8; 32], Instant>, key: [u8; 32], ttl: Duration, cap: usize) {
    let now = Instant::now();
    map.retain(|_, expires| *expires > now);
    if map.len() >= cap
        && let Some(oldest) = map.iter().min_by_key(|(_, e)| **e).map(|(k, _)| *k)
    {
        map.remove(&oldest);
    }
    map.insert(key, now + ttl);
}

impl Logins {
    /// A new browser login: the cookie value to set.
    pub fn open(&self) -> String {
        let value = random_secret();
        let mut cookies = self.cookies.lock().unwrap_or_else(|p| p.into_inner());
        insert_bounded(&mut cookies, digest(&value), LOGIN_TTL, MAX_LOGINS);
        value
    }

    /// True when `value` is a live login.
    pub fn is_valid(&self, value: &str) -> bool {
        let cookies = self.cookies.lock().unwrap_or_else(|p| p.into_inner());
        cookies.get(&digest(value)).is_some_and(|expires| *expires > Instant::now())
    }

    pub fn close(&self, value: &str) {
        self.cookies.lock().unwrap_or_else(|p| p.into_inner()).remove(&digest(value));
    }

    /// A one-time login code (for a link printed by `sessionwatch ui`).
    pub fn issue_link(&self) -> String {
        let code = random_secret();
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        insert_bounded(&mut links, digest(&code), LINK_TTL, MAX_LINKS);
        code
    }

    /// Uses up a one-time code: true the first time, while it is fresh.
    pub fn redeem_link(&self, code: &str) -> bool {
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        links.remove(&digest(code)).is_some_and(|expires| expires > Instant::now())
    }
}

/// The value of cookie `name` in a `Cookie` header.
pub(crate) fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then_some(v.trim())
    })
}

/// The `Set-Cookie` value for a login: never readable by scripts, never sent cross-site.
pub(crate) fn set_cookie(value: &str) -> String {
    format!("{COOKIE_NAME}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}", LOGIN_TTL.as_secs())
}

pub(crate) fn clear_cookie() -> String {
    format!("{COOKIE_NAME}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_is_valid_until_closed() {
        let logins = Logins::default();
        let cookie = logins.open();
        assert!(logins.is_valid(&cookie));
        assert!(!logins.is_valid("forged"));
        logins.close(&cookie);
        assert!(!logins.is_valid(&cookie));
    }

    #[test]
    fn a_link_is_redeemed_once() {
        let logins = Logins::default();
        let code = logins.issue_link();
        assert!(logins.redeem_link(&code));
        assert!(!logins.redeem_link(&code), "one time only");
        assert!(!logins.redeem_link("guess"));
    }

    #[test]
    fn logins_are_bounded() {
        let logins = Logins::default();
        let first = logins.open();
        for _ in 0..MAX_LOGINS {
            logins.open();
        }
        assert!(!logins.is_valid(&first), "the oldest login made room");
        assert_eq!(logins.cookies.lock().unwrap().len(), MAX_LOGINS);
    }

    #[test]
    fn cookies_are_found_among_others() {
        assert_eq!(cookie_value("a=1; sessionwatch_login=xyz; b=2", COOKIE_NAME), Some("xyz"));
        assert_eq!(cookie_value("sessionwatch_loginx=1", COOKIE_NAME), None);
        assert!(set_cookie("v").contains("HttpOnly; SameSite=Strict"));
    }
}
