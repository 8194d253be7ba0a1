//! Issue 11 item 6: slow and hostile connections. Headers that never finish, a body that never arrives
//! and a 10 GB `Content-Length` each used to hold a connection (and its file descriptor) forever; 1,100
//! of them exhausted the fd limit and `/healthz` timed out. Issue 33 item 8: idle connections at the
//! connection cap gave way to nobody, so `/healthz` still waited for their header timeout.

use crate::support::*;
use sessionwatch_server::Config;
use sessionwatch_server::config::Limits;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start(limits: Limits) -> Harness {
    Harness::start_with(Config { limits, ..Config::default() }, None).await
}

fn addr(h: &Harness) -> String {
    h.base.trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection (or `wait` passes); answers what arrived, or `None` if
/// the connection was still open.
async fn read_until_closed(tcp: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&got).into_owned()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

async fn healthz(h: &Harness, wait: Duration) -> bool {
    let probe = h.client.get(format!("{}/healthz", h.base)).send();
    matches!(tokio::time::timeout(wait, probe).await, Ok(Ok(r)) if r.status() == 200)
}

/// A connection that sent the head of an authorized `POST /tools/invoke` whose body `framing` frames
/// (`Content-Length: N` or `Transfer-Encoding: chunked`), and then `body_start`.
async fn invoke_head_sent(h: &Harness, framing: &str, body_start: &str) -> TcpStream {
    let mut tcp = TcpStream::connect(addr(h)).await.unwrap();
    let head = format!(
        "POST /tools/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\n{framing}\r\n\r\n{body_start}"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_their_headers_are_closed() {
    let h = start(Limits { header_timeout: Duration::from_millis(300), ..Limits::default() }).await;
    let mut slow = Vec::new();
    for i in 0..40 {
        let mut tcp = TcpStream::connect(addr(&h)).await.unwrap();
        if i % 2 == 0 {
            tcp.write_all(b"POST /tools/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").await.unwrap();
        } // the others send nothing at all
        slow.push(tcp);
    }
    assert!(healthz(&h, Duration::from_secs(2)).await, "the gateway answers while they hang");
    for (i, tcp) in slow.iter_mut().enumerate() {
        let closed = read_until_closed(tcp, Duration::from_secs(5)).await;
        assert!(closed.is_some(), "connection {i} is still open after the header timeout");
    }
}

/// A kept-alive connection owes its next request's headers within the header timeout too: one idle
/// after its answer is closed, as one that never sent a request is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_idle_after_its_answer_is_closed_at_the_header_timeout() {
    let h = start(Limits { header_timeout: Duration::from_millis(300), ..Limits::default() }).await;
    let mut tcp = TcpStream::connect(addr(&h)).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 4096];
    let n = tcp.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "answered first");
    let started = std::time::Instant::now();
    assert!(read_until_closed(&mut tcp, Duration::from_secs(5)).await.is_some(), "closed while idle");
    assert!(started.elapsed() >= Duration::from_millis(200), "not before the header timeout");
}

/// A request whose body is still arriving: in flight, so its connection is never shed.
async fn request_in_flight(h: &Harness) -> TcpStream {
    invoke_head_sent(h, "Content-Length: 100", "{\"tool\":").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_while_every_slot_has_a_request_in_flight() {
    let h =
        start(Limits { max_connections: 4, header_timeout: Duration::from_secs(60), ..Limits::default() })
            .await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(request_in_flight(&h).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !healthz(&h, Duration::from_millis(700)).await,
        "a fifth connection is not served while 4 requests are in flight"
    );
    drop(held.pop());
    assert!(healthz(&h, Duration::from_secs(5)).await, "served as soon as a slot frees");
}

/// Issue 33 item 8: at the cap, the connection idle the longest (no request in flight: headers not
/// finished, or between keep-alive requests) gives its slot to a client that sends its request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_the_longest_idle_connection_gives_its_slot_up() {
    let h =
        start(Limits { max_connections: 4, header_timeout: Duration::from_secs(60), ..Limits::default() })
            .await;
    let mut busy = request_in_flight(&h).await;
    let mut idle = Vec::new();
    for _ in 0..3 {
        let mut tcp = TcpStream::connect(addr(&h)).await.unwrap();
        tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
        idle.push(tcp);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(healthz(&h, Duration::from_secs(2)).await, "served at once, not after the header timeout");
    assert!(
        read_until_closed(&mut idle[0], Duration::from_secs(2)).await.is_some(),
        "the oldest idle connection was closed to make room"
    );
    for (i, tcp) in idle.iter_mut().enumerate().skip(1) {
        assert!(read_until_closed(tcp, Duration::from_millis(200)).await.is_none(), "idle {i} kept");
    }
    assert!(
        read_until_closed(&mut busy, Duration::from_millis(200)).await.is_none(),
        "a request in flight is never shed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_declared_content_length_is_refused_before_the_body() {
    let h = start(Limits::default()).await;
    let mut tcp = invoke_head_sent(&h, "Content-Length: 10000000000", "").await;
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(3), tcp.read(&mut buf))
        .await
        .expect("answered without waiting for the body")
        .unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.contains("application/json") && answer.contains("\"type\":\"invalid_request_error\""),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_arrives_is_given_up() {
    let h = start(Limits { body_timeout: Duration::from_millis(300), ..Limits::default() }).await;
    let mut tcp = request_in_flight(&h).await;
    let answer =
        read_until_closed(&mut tcp, Duration::from_secs(5)).await.expect("the connection was given up");
    assert!(!answer.contains(" 200 "), "{answer}");
}

/// Issue 33 item 9: a client that writes its whole oversized body before reading (Python's
/// `http.client`) got a broken pipe or a reset instead of the 413.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_writes_a_whole_oversized_body_first_reads_the_413() {
    let h = start(Limits::default()).await;
    let body = vec![b'a'; 3 * 1024 * 1024];
    let mut tcp = invoke_head_sent(&h, &format!("Content-Length: {}", body.len()), "").await;
    tcp.write_all(&body).await.expect("the whole body is taken");
    let answer = read_until_closed(&mut tcp, Duration::from_secs(5)).await.expect("closed after the answer");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer:?}");
    assert!(answer.contains("\"type\":\"invalid_request_error\""), "{answer}");
}

/// The same for a body sent without a length (chunked), refused once 2 MB of it arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_streams_a_whole_oversized_body_first_reads_the_413() {
    let answer = streamed_oversized_body_answer(None).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer:?}");
}

/// The same, with the body still arriving well after the refusal: the rest of a streamed body is read
/// and dropped as a declared one's is, so the client's last writes are taken and the 413 read (the
/// connection was closed with the rest unread, and a client still writing was reset).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_oversized_body_still_arriving_after_the_refusal_is_taken_and_answered_413() {
    let answer = streamed_oversized_body_answer(Some(Duration::from_millis(50))).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer:?}");
}

/// Streams a 3 MB chunked invoke body, its last eight chunks `pause` apart (the refusal goes out
/// meanwhile), and answers what the server wrote before closing.
async fn streamed_oversized_body_answer(pause: Option<Duration>) -> String {
    let h = start(Limits::default()).await;
    let mut tcp = invoke_head_sent(&h, "Transfer-Encoding: chunked", "").await;
    let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, "a".repeat(64 * 1024));
    for i in 0..48 {
        if let Some(pause) = pause.filter(|_| i >= 40) {
            tokio::time::sleep(pause).await;
        }
        tcp.write_all(chunk.as_bytes()).await.expect("the whole body is taken");
    }
    tcp.write_all(b"0\r\n\r\n").await.expect("the end of the body is taken");
    read_until_closed(&mut tcp, Duration::from_secs(5)).await.expect("closed after the answer")
}
