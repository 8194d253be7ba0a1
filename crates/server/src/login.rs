//! Browser logins: the bearer token typed once into a form (or a one-time link from `sessionwatch ui`)
//! becomes an opaque cookie. The token itself never travels in a URL or a cookie.
//!
//! Why in memory: a login is cheap to repeat, and a gateway restart that logs browsers out is safer
//! than cookie ids that outlive the process in a file. Both maps are bounded, so a client that logs in
//! in a loop cannot grow the gateway's memory.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub(crate) const COOKIE_NAME: &str = "sessionwatch_login";
/// How long a browser stays logged in.
pub(crate) const LOGIN_TTL: Duration = Duration::from_secs(12 * 3600);
/// How long a one-time link from `sessionwatch ui` can be used.
pub(crate) const LINK_TTL: Duration = Duration::from_secs(120);
const MAX_LOGINS: usize = 1024;
const MAX_LINKS: usize = 64;

pub struct Logins {
    /// Browser logins (cookie values).
    cookies: Secrets,
    /// One-time login codes.
    links: Secrets,
}

impl Default for Logins {
    fn default() -> Logins {
        Logins { cookies: Secrets::new(LOGIN_TTL, MAX_LOGINS), links: Secrets::new(LINK_TTL, MAX_LINKS) }
    }
}

/// Random secrets handed out, each valid for `ttl`, at most `cap` at once; only their SHA-256 is kept.
struct Secrets {
    /// SHA-256 of a secret → when it expires.
    expiry: Mutex<HashMap<[u8; 32], Instant>>,
    ttl: Duration,
    cap: usize,
}

impl Secrets {
    fn new(ttl: Duration, cap: usize) -> Secrets {
        Secrets { expiry: Mutex::default(), ttl, cap }
    }

    fn expiry(&self) -> MutexGuard<'_, HashMap<[u8; 32], Instant>> {
        self.expiry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new secret, dropping expired ones and, when full, the one expiring first.
    fn issue(&self) -> String {
        let value = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        let now = Instant::now();
        let mut map = self.expiry();
        map.retain(|_, expires| *expires > now);
        if map.len() >= self.cap
            && let Some(oldest) = map.iter().min_by_key(|(_, e)| **e).map(|(k, _)| *k)
        {
            map.remove(&oldest);
        }
        map.insert(digest(&value), now + self.ttl);
        value
    }

    fn is_live(&self, value: &str) -> bool {
        self.expiry().get(&digest(value)).is_some_and(|expires| *expires > Instant::now())
    }

    /// Forgets `value`; answers whether it was live.
    fn take(&self, value: &str) -> bool {
        self.expiry().remove(&digest(value)).is_some_and(|expires| expires > Instant::now())
    }
}

fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

impl Logins {
    /// A new browser login: the cookie value to set.
    pub fn open(&self) -> String {
        self.cookies.issue()
    }

    /// True when `value` is a live login.
    pub fn is_valid(&self, value: &str) -> bool {
        self.cookies.is_live(value)
    }

    pub fn close(&self, value: &str) {
        self.cookies.take(value);
    }

    /// A one-time login code (for a link printed by `sessionwatch ui`).
    pub fn issue_link(&self) -> String {
        self.links.issue()
    }

    /// Uses up a one-time code: true the first time, while it is fresh.
    pub fn redeem_link(&self, code: &str) -> bool {
        self.links.take(code)
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
        assert_eq!(logins.cookies.expiry().len(), MAX_LOGINS);
    }

    #[test]
    fn cookies_are_found_among_others() {
        assert_eq!(cookie_value("a=1; sessionwatch_login=xyz; b=2", COOKIE_NAME), Some("xyz"));
        assert_eq!(cookie_value("sessionwatch_loginx=1", COOKIE_NAME), None);
        assert!(set_cookie("v").contains("HttpOnly; SameSite=Strict"));
    }
}
