//! A page of changes' events rendered once each: compact for `details.stateChanges`, indented and escaped
//! for the status text.
//!
//! A `session_status` answer carries its page twice, and serializing its events twice was 56k of the 125k
//! instructions of a request (callgrind of `bench gateway --part status`). A stored event never changes,
//! and a recent page shares its events with the store's tail (`Arc<StoredEvent>`), so both renderings
//! are kept per event allocation ([`render`]) and a later page that shares the event copies them.

use super::literal::escaped_pretty_at;
use crate::host_protocol::EventJson;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use sessionwatch_core::StoredEvent;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// How deep a page's events sit in the status text's block (`{` → `stateChanges` → `events` → the event).
const EVENT_DEPTH: usize = 3;

/// One event of a page, rendered.
#[derive(Clone, Debug)]
pub struct RenderedEvent(Arc<Renderings>);

#[derive(Debug)]
struct Renderings {
    /// `EventJson`, compact.
    compact: Box<RawValue>,
    /// `EventJson` as `to_string_pretty` writes it at [`EVENT_DEPTH`], escaped as a JSON string's contents.
    in_text: Box<str>,
}

impl RenderedEvent {
    fn of(event: &EventJson) -> RenderedEvent {
        let compact = serde_json::value::to_raw_value(event).expect("an event always serializes");
        let in_text = escaped_pretty_at(event, EVENT_DEPTH).expect("an event always serializes");
        RenderedEvent(Arc::new(Renderings { compact, in_text }))
    }

    /// The event indented as it sits in a status text's page, escaped.
    pub(crate) fn in_text(&self) -> &str {
        &self.0.in_text
    }

    /// The event's fields, read back.
    #[cfg(test)]
    fn event(&self) -> EventJson {
        serde_json::from_str(self.0.compact.get()).expect("a rendered event parses back")
    }
}

/// Equal compact renderings are equal events: serde_json writes a value one way only.
impl PartialEq for RenderedEvent {
    fn eq(&self, other: &RenderedEvent) -> bool {
        self.0.compact.get() == other.0.compact.get()
    }
}

impl Serialize for RenderedEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.compact.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RenderedEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RenderedEvent, D::Error> {
        EventJson::deserialize(deserializer).map(|e| RenderedEvent::of(&e))
    }
}

/// At most this many events' renderings are kept (some 600 bytes each, and the event's allocation).
const KEPT: usize = 4096;

/// The renderings kept, by the address of the event's allocation. Each entry holds a `Weak` to that
/// allocation, so it cannot be freed and its address reused while the entry exists: an `Arc` found at a
/// kept address is the very event rendered. Only shared events are kept (a page read from the database
/// holds the only reference to its events; the tail's are read again and again).
struct Kept {
    by_address: HashMap<usize, (Weak<StoredEvent>, RenderedEvent)>,
    /// Addresses in the order they were kept: the oldest goes first when full.
    order: VecDeque<usize>,
}

static KEPT_RENDERINGS: LazyLock<Mutex<Kept>> =
    LazyLock::new(|| Mutex::new(Kept { by_address: HashMap::new(), order: VecDeque::new() }));

fn kept() -> std::sync::MutexGuard<'static, Kept> {
    KEPT_RENDERINGS.lock().unwrap_or_else(|p| p.into_inner())
}

/// `events` rendered: those kept are copied (a reference), the rest rendered outside the lock and kept
/// when shared.
pub(crate) fn render(events: &[Arc<StoredEvent>]) -> Vec<RenderedEvent> {
    let address = |e: &Arc<StoredEvent>| Arc::as_ptr(e) as usize;
    let found: Vec<Option<RenderedEvent>> = {
        let kept = kept();
        events.iter().map(|e| kept.by_address.get(&address(e)).map(|(_, r)| r.clone())).collect()
    };
    if found.iter().all(Option::is_some) {
        return found.into_iter().flatten().collect();
    }
    let mut fresh = vec![];
    let rendered: Vec<RenderedEvent> = events
        .iter()
        .zip(found)
        .map(|(e, found)| {
            found.unwrap_or_else(|| {
                let r = RenderedEvent::of(&EventJson::from(&**e));
                // Two references: the page's and another holder's (the tail).
                if Arc::strong_count(e) > 1 {
                    fresh.push((Arc::downgrade(e), r.clone()));
                }
                r
            })
        })
        .collect();
    let mut kept = kept();
    for (weak, r) in fresh {
        let at = weak.as_ptr() as usize;
        if kept.by_address.insert(at, (weak, r)).is_none() {
            kept.order.push_back(at);
        }
        while kept.order.len() > KEPT {
            if let Some(oldest) = kept.order.pop_front() {
                kept.by_address.remove(&oldest);
            }
        }
    }
    rendered
}

#[cfg(test)]
mod tests {
    use super::*;
    use sessionwatch_core::NewEvent;

    fn stored(sequence: u64, channel: &str) -> Arc<StoredEvent> {
        Arc::new(
            NewEvent::human_message("agent:main:w", "main", channel, Some("u\"1".into()))
                .into_stored(sequence, 1_700_000_000_000 + sequence as i64),
        )
    }

    #[test]
    fn a_shared_event_is_rendered_once_and_a_lone_one_each_time() {
        let shared = stored(1, "telegram");
        let _tail = shared.clone();
        let first = render(std::slice::from_ref(&shared));
        let again = render(std::slice::from_ref(&shared));
        assert!(Arc::ptr_eq(&first[0].0, &again[0].0), "the kept rendering is copied");
        assert_eq!(first[0].event(), EventJson::from(&*shared));

        let lone = stored(2, "slack");
        let a = render(std::slice::from_ref(&lone));
        let b = render(std::slice::from_ref(&lone));
        assert!(!Arc::ptr_eq(&a[0].0, &b[0].0), "an unshared event is not kept");
        assert_eq!(a[0], b[0]);
    }

    /// A new event at a kept event's old address is never given the old one's rendering: the entry's
    /// `Weak` keeps that address from being reused while it is kept.
    #[test]
    fn a_dropped_events_address_is_not_reused_while_its_rendering_is_kept() {
        let mut seen = std::collections::HashSet::new();
        for sequence in 0..200u64 {
            let e = stored(sequence, &format!("c{sequence}"));
            let _tail = e.clone();
            let page = render(std::slice::from_ref(&e));
            assert_eq!(page[0].event(), EventJson::from(&*e), "sequence {sequence}");
            assert!(seen.insert(Arc::as_ptr(&e) as usize), "an address came back while kept");
        }
    }
}
