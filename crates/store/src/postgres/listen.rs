//! Cross-gateway push: one dedicated (non-pooled) LISTEN connection per gateway.
//!
//! NOTIFY is only a wake-up: it is delivered at commit, may be folded, and is lost while the listener
//! is not connected. So the listener reports [`HostSignal::Listening`] once LISTEN is in place, at
//! start and after every reconnect, and the gateway then reconciles from the durable cursors; a lost
//! connection loses no notice.

use super::PostgresStore;
use crate::HostSignal;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A quiet listener checks its connection this often (a half-open socket otherwise goes unnoticed).
const PING_EVERY: Duration = Duration::from_secs(15);

impl PostgresStore {
    /// Starts listening for the gateway `host_id` on a dedicated connection (reconnecting with backoff)
    /// and answers the stream of [`HostSignal`]s. The task ends when the receiver is dropped. Must be
    /// called inside a tokio runtime.
    pub fn listen(&self, host_id: &str) -> mpsc::Receiver<HostSignal> {
        let (tx, rx) = mpsc::channel(1024);
        let mut config = self.inner.config.clone();
        config.application_name(self.listener_application_name(host_id));
        let channel = self.channel_for_host(host_id);
        tokio::spawn(run(config, channel, tx));
        rx
    }
}

async fn run(config: tokio_postgres::Config, channel: String, out: mpsc::Sender<HostSignal>) {
    let mut backoff = BACKOFF_MIN;
    loop {
        if out.is_closed() {
            return;
        }
        match listen_once(&config, &channel, &out, &mut backoff).await {
            Ok(()) => return, // the receiver went away
            Err(e) => tracing::warn!(error = %e, channel, "LISTEN connection lost; reconnecting"),
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = out.closed() => return,
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// One connection's life: answers `Ok` when the receiver is gone, `Err` when the connection failed.
async fn listen_once(
    config: &tokio_postgres::Config,
    channel: &str,
    out: &mpsc::Sender<HostSignal>,
    backoff: &mut Duration,
) -> Result<(), String> {
    let (client, mut connection) =
        config.connect(super::tls::connector()).await.map_err(|e| e.to_string())?;
    let (note_tx, mut notes) = mpsc::unbounded_channel::<Result<String, String>>();
    // Drive the connection: forward notifications, report how it ended.
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if note_tx.send(Ok(n.payload().to_string())).is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    let _ = note_tx.send(Err(e.to_string()));
                    return;
                }
                None => {
                    let _ = note_tx.send(Err("connection closed".into()));
                    return;
                }
            }
        }
    });
    let _abort = AbortOnDrop(driver);
    client.batch_execute(&format!("LISTEN {channel}")).await.map_err(|e| e.to_string())?;
    // LISTEN is in place: anything committed from now on wakes us; the receiver reconciles the rest.
    if out.send(HostSignal::Listening).await.is_err() {
        return Ok(());
    }
    *backoff = BACKOFF_MIN;
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    loop {
        tokio::select! {
            note = notes.recv() => match note {
                Some(Ok(key)) => {
                    if out.send(HostSignal::Watcher(key)).await.is_err() {
                        return Ok(());
                    }
                }
                Some(Err(e)) => return Err(e),
                None => return Err("connection task ended".into()),
            },
            _ = ping.tick() => {
                match tokio::time::timeout(Duration::from_secs(10), client.simple_query("")).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(e.to_string()),
                    Err(_) => return Err("ping timed out".into()),
                }
            }
            _ = out.closed() => return Ok(()),
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
