//! The hook's one request to the gateway. A hook process runs on every prompt and every tool call, so
//! it pays only for what it uses: to a gateway on plain HTTP (the usual loopback case) it speaks HTTP/1
//! with hyper on one TCP connection; reqwest, whose client sets up TLS (certificate verifier, roots)
//! before the first request, is left for an `https://` gateway.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;

/// The gateway's answer: status and body.
pub struct Answer {
    pub status: hyper::StatusCode,
    pub body: Bytes,
}

/// Why no answer came: for the user's line, the cause itself.
pub struct NoAnswer(pub String);

/// POSTs `body` (JSON) to `url` + `path`, bearer `token` if any.
pub async fn post_json(url: &str, path: &str, token: Option<&str>, body: Bytes) -> Result<Answer, NoAnswer> {
    match url.parse::<hyper::Uri>() {
        Ok(uri) if uri.scheme_str() == Some("http") && uri.host().is_some() => {
            post_plain(&uri, path, token, body).await
        }
        _ => post_reqwest(url, path, token, body).await,
    }
}

async fn post_plain(
    base: &hyper::Uri,
    path: &str,
    token: Option<&str>,
    body: Bytes,
) -> Result<Answer, NoAnswer> {
    let host = base.host().unwrap_or_default();
    let port = base.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host.trim_start_matches('[').trim_end_matches(']'), port))
        .await
        .map_err(|e| NoAnswer(format!("connection refused or no route ({e})")))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| NoAnswer(e.to_string()))?;
    tokio::spawn(connection);
    let authority = base.authority().map(|a| a.as_str()).unwrap_or(host);
    let mut request = hyper::Request::post(format!("{}{path}", base.path().trim_end_matches('/')))
        .header(HOST, authority)
        .header(CONTENT_TYPE, "application/json");
    if let Some(t) = token {
        request = request.header(AUTHORIZATION, format!("Bearer {t}"));
    }
    let request = request.body(Full::new(body)).map_err(|e| NoAnswer(e.to_string()))?;
    let response = sender.send_request(request).await.map_err(|e| NoAnswer(e.to_string()))?;
    let status = response.status();
    let body = response.into_body().collect().await.map_err(|e| NoAnswer(e.to_string()))?.to_bytes();
    Ok(Answer { status, body })
}

async fn post_reqwest(url: &str, path: &str, token: Option<&str>, body: Bytes) -> Result<Answer, NoAnswer> {
    let http = reqwest::Client::new();
    let mut req = http
        .post(format!("{}{path}", url.trim_end_matches('/')))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|e| NoAnswer(describe(&e)))?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(|e| NoAnswer(describe(&e)))?;
    Ok(Answer { status, body })
}

/// reqwest's top-level message ("error sending request") hides the cause the user needs.
fn describe(e: &reqwest::Error) -> String {
    if e.is_connect() {
        return "connection refused or no route".into();
    }
    if e.is_timeout() {
        return "timed out".into();
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}
