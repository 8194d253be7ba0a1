//! The dashboard's HTML (maud: every interpolated value is escaped). Only ids, kinds, counts, fixed
//! summaries and notice texts appear here: the log holds no message content and no transcript is shown.

use super::graph;
use super::view::{Edge, Overview, OverviewQuery, SessionView, chat_path};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use sessionwatch_core::{Millis, SessionKind};

fn time(ms: Millis) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| ms.to_string())
}

/// The frame of every page. `live` pages refresh their `[data-live]` part from the stream.
fn frame(title: &str, logged_in: bool, live: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (title) " · sessionwatch" }
                link rel="stylesheet" href="/assets/dashboard.css";
                @if live { script src="/assets/dashboard.js" defer {} }
            }
            body {
                header {
                    a.brand href="/" { "sessionwatch" }
                    @if live { span #live-status .status data-state="connecting" { "connecting…" } }
                    @if logged_in {
                        form.logout method="post" action="/logout" { button type="submit" { "Log out" } }
                    }
                }
                main data-live[live] { (body) }
            }
        }
    }
}

pub(crate) fn login(error: Option<&str>, next: &str) -> Markup {
    frame(
        "Log in",
        false,
        false,
        html! {
            h1 { "Log in" }
            p { "Paste the gateway's token (the file " code { "token" } " in its data directory), or run "
                code { "sessionwatch ui" } " for a one-time link." }
            @if let Some(e) = error { p.error role="alert" { (e) } }
            form.login method="post" action="/login" {
                input type="hidden" name="next" value=(next);
                label for="token" { "Token" }
                input #token type="password" name="token" autocomplete="current-password" required autofocus;
                button type="submit" { "Log in" }
            }
        },
    )
}

pub(crate) fn not_found(logged_in: bool, what: &str) -> Markup {
    frame(
        "Not found",
        logged_in,
        false,
        html! { h1 { "Not found" } p { (what) } p { a href="/" { "Overview" } } },
    )
}

/// What a workspace event changed: the paths written, or where HEAD went (empty for other events).
fn what_changed(p: &sessionwatch_core::Payload) -> Markup {
    html! {
        @if !p.paths.is_empty() {
            " " span.paths { @for (i, path) in p.paths.iter().enumerate() { @if i > 0 { ", " } code { (path) } } }
        }
        @if let (Some(from), Some(to)) = (&p.from, &p.to) {
            " " span.head { code { (from) } " → " code { (to) } }
        }
    }
}

fn session_link(key: &str) -> Markup {
    html! { a.key href=(chat_path(key)) title=(key) { (key) } }
}

fn edge_positions(e: &Edge) -> Markup {
    html! {
        span.lnm title="L acknowledged · N notified (frozen while pending) · M latest material" {
            "L" (e.last_seen) " N" (e.notified) " M" (e.material)
        }
    }
}

fn graph(edges: &[Edge], order: &[&str]) -> Markup {
    let l = graph::layout(edges, order);
    if l.nodes.is_empty() {
        return html! { p.empty { "No watches among these sessions." } };
    }
    let f = |v: f64| format!("{v:.1}");
    html! {
        svg.graph #watch-graph xmlns="http://www.w3.org/2000/svg" role="img"
            aria-label="Watch graph: watcher → target"
            viewBox=(format!("0 0 {} {}", f(l.width), f(l.height))) width=(f(l.width)) height=(f(l.height)) {
            defs {
                marker #arrow viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                    path d="M 0 0 L 10 5 L 0 10 z" {}
                }
                marker #arrow-pending viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                    path.pending d="M 0 0 L 10 5 L 0 10 z" {}
                }
            }
            @for a in &l.arrows {
                g.edge.(a.edge.origin.as_str()).pending[a.edge.pending]
                    data-watcher=(a.edge.watcher) data-target=(a.edge.target)
                    data-pending=(if a.edge.pending { "true" } else { "false" }) {
                    title { (a.edge.watcher) " → " (a.edge.target) " (" (a.edge.origin.as_str()) ")"
                        @if a.edge.pending { ": notice pending" } }
                    line x1=(f(a.from.0)) y1=(f(a.from.1)) x2=(f(a.to.0)) y2=(f(a.to.1))
                        marker-end=(if a.edge.pending { "url(#arrow-pending)" } else { "url(#arrow)" }) {}
                    text x=(f(a.label_at.0)) y=(f(a.label_at.1)) {
                        "N" (a.edge.notified) " · M" (a.edge.material)
                    }
                }
            }
            @for n in &l.nodes {
                a href=(chat_path(&n.key)) {
                    g.node {
                        title { (n.key) }
                        circle cx=(f(n.x)) cy=(f(n.y)) r="7" {}
                        text x=(f(n.x + 10.0)) y=(f(n.y + 4.0)) { (short(&n.key)) }
                    }
                }
            }
        }
    }
}

/// A key short enough for a graph label (the full key is the node's title).
fn short(key: &str) -> String {
    let rest = key.strip_prefix("agent:").unwrap_or(key);
    if rest.chars().count() <= 32 {
        rest.to_string()
    } else {
        format!("{}…", rest.chars().take(31).collect::<String>())
    }
}

fn overview_href(q: &OverviewQuery, page: u32) -> String {
    let mut parts = vec![];
    if let Some(k) = q.kind {
        parts.push(format!("kind={}", k.as_str()));
    }
    if let Some(a) = &q.agent {
        parts.push(format!(
            "agent={}",
            percent_encoding::utf8_percent_encode(a, percent_encoding::NON_ALPHANUMERIC)
        ));
    }
    if page > 0 {
        parts.push(format!("page={page}"));
    }
    if parts.is_empty() { "/".into() } else { format!("/?{}", parts.join("&")) }
}

pub(crate) fn overview(o: &Overview, logged_in: bool) -> Markup {
    let order: Vec<&str> = o.sessions.iter().map(|s| s.row.session_key.as_str()).collect();
    let pending = o.edges.iter().filter(|e| e.pending).count();
    frame(
        "Overview",
        logged_in,
        true,
        html! {
            h1 { "Sessions" }
            dl.counts #counts {
                div { dt { "events recorded" } dd data-count="events" { (o.counts.events_recorded) } }
                div { dt { "notices queued" } dd data-count="queued" { (o.counts.notices_queued) } }
                div { dt { "notices acknowledged" } dd data-count="acknowledged" { (o.counts.notices_acknowledged) } }
                div { dt { "wakes" } dd { (o.counts.wakes) } }
                div { dt { "in queues now" } dd data-count="queued-now" { (o.counts.queued_now) } }
                div { dt { "pending edges (this page)" } dd data-count="pending" { (pending) } }
            }
            form.filters method="get" action="/" {
                label { "Kind "
                    select name="kind" {
                        option value="" selected[o.query.kind.is_none()] { "all" }
                        @for k in SessionKind::ALL {
                            option value=(k.as_str()) selected[o.query.kind == Some(k)] { (k.as_str()) }
                        }
                    }
                }
                label { "Agent " input type="text" name="agent" value=(o.query.agent.as_deref().unwrap_or("")) placeholder="any"; }
                button type="submit" { "Filter" }
            }
            table.sessions #sessions {
                thead { tr { th { "Session" } th { "Kind" } th { "Channel" } th { "State version" } th { "Last change" } th { "Adopted source" } } }
                tbody {
                    @for s in &o.sessions {
                        tr data-session=(s.row.session_key) {
                            td { (session_link(&s.row.session_key))
                                @if let Some(label) = &s.row.label { " " span.label { (label) } } }
                            td { (s.row.kind) }
                            td { (s.row.channel.as_deref().unwrap_or("—")) }
                            td.num data-state-version=(s.state_version) { (s.state_version) }
                            td { (time(s.row.updated_at)) }
                            td { (s.adopted.as_deref().unwrap_or("—")) }
                        }
                    }
                    @if o.sessions.is_empty() { tr { td colspan="6" { "No sessions." } } }
                }
            }
            nav.pager {
                @if o.query.page > 0 { a rel="prev" href=(overview_href(&o.query, o.query.page - 1)) { "← newer" } }
                span { "page " (o.query.page + 1) }
                @if o.has_more { a rel="next" href=(overview_href(&o.query, o.query.page + 1)) { "older →" } }
            }
            @if !o.nodes.is_empty() {
                h2 { "Remote nodes" }
                table.nodes #nodes {
                    thead { tr { th { "Node" } th { "Last seen" } th { "Sessions" } th { "Watched" } th { "Monitor lag" } } }
                    tbody {
                        @for n in &o.nodes {
                            tr data-node=(n.node.name) {
                                td { (n.node.name) }
                                td { (n.node.last_seen_at.map(time).unwrap_or_else(|| "never".into())) }
                                td.num { (n.sessions) }
                                td.num { (n.watched) }
                                td.num { (n.monitor_lag_ms.map(|ms| format!("{:.0} s", ms as f64 / 1000.0)).unwrap_or_else(|| "—".into())) }
                            }
                        }
                    }
                }
            }
            h2 { "Who watches whom" }
            p.legend { "An arrow goes from the watcher to the session it watches; red: a notice is pending (the watcher has not seen up to M). "
                "Labels: N, the frozen watermark of the pending notice, and M, the latest change. "
                "Solid: explicit; dashed: spawn; dotted: ambient (a group, or the members of a workspace)." }
            (graph(&o.edges, &order))
        },
    )
}

fn edges_table(id: &str, edges: &[Edge], other_end: fn(&Edge) -> &str, heading: &str) -> Markup {
    html! {
        table.edges id=(id) {
            thead { tr { th { (heading) } th { "Origin" } th { "Cursor" } th { "Notice" } } }
            tbody {
                @for e in edges {
                    tr data-pending=(if e.pending { "true" } else { "false" }) {
                        td { (session_link(other_end(e))) }
                        td { (e.origin.as_str()) }
                        td { (edge_positions(e)) }
                        td { @if e.pending { strong.pending { "pending" } } @else { "—" } }
                    }
                }
                @if edges.is_empty() { tr { td colspan="4" { "None." } } }
            }
        }
    }
}

pub(crate) fn session(v: &SessionView, logged_in: bool) -> Markup {
    let path = chat_path(&v.key);
    frame(
        &v.key,
        logged_in,
        true,
        html! {
            h1 { "Session " code #session-key { (v.key) } }
            (session_facts(v))
            @if let Some(members) = &v.members {
                section #members {
                    h2 { "Members (" (members.len()) ")" }
                    @if members.is_empty() { p.empty { "No session works in this worktree now." } }
                    ul { @for m in members { li { (session_link(m)) } } }
                }
            }
            (pending_notices(v))
            (upstream_link(v))
            section {
                h2 { "Watched by" }
                (edges_table("watchers", &v.watches.watchers, |e| &e.watcher, "Watcher"))
                h2 { "Watches" }
                (edges_table("targets", &v.watches.targets, |e| &e.target, "Target"))
            }
            (timeline(v, &path))
            (reconcile(v, &path))
        },
    )
}

/// What the session is: its row's facts, its state version and how far back its history goes.
fn session_facts(v: &SessionView) -> Markup {
    html! {
        dl.facts {
            @if let Some(r) = &v.row {
                div { dt { "Kind" } dd { (r.kind) } }
                div { dt { "Channel" } dd { (r.channel.as_deref().unwrap_or("—")) } }
                @if let Some(l) = &r.label { div { dt { "Label" } dd { (l) } } }
                @if let Some(p) = &r.spawned_by { div { dt { "Spawned by" } dd { (session_link(p)) } } }
                div { dt { "Last change" } dd { (time(r.updated_at)) } }
            }
            div { dt { "State version" } dd #state-version { (v.timeline.head.head) } }
            div { dt { "History kept from" } dd { "#" (v.timeline.head.floor + 1) } }
        }
    }
}

/// The notices the session has not acknowledged yet.
fn pending_notices(v: &SessionView) -> Markup {
    html! {
        section #pending {
            h2 { "Pending notices (" (v.watches.pending.len()) ")" }
            @if v.watches.pending.is_empty() { p.empty { "None: this session has seen every change it watches." } }
            @for n in &v.watches.pending {
                blockquote.notice data-target=(n.target) { (n.text) }
            }
        }
    }
}

/// The other agent's store the session was adopted from, and how its checks go.
fn upstream_link(v: &SessionView) -> Markup {
    html! {
        section #upstream {
            h2 { "Upstream" }
            @match &v.link {
                Some(l) => dl.facts {
                    div { dt { "Source" } dd { (l.upstream_kind) " " code { (l.thread_id) } } }
                    div { dt { "Host" } dd { (l.host_id) } }
                    div { dt { "Last check" } dd { (l.last_scanned_at.map(time).unwrap_or_else(|| "never".into())) } }
                    div { dt { "Missing checks in a row" } dd { (l.missing_streak) } }
                },
                None => p.empty { "Not adopted from another agent's store." },
            }
        }
    }
}

/// The session's events, newest first, a page at a time.
fn timeline(v: &SessionView, path: &str) -> Markup {
    html! {
        section #timeline {
            h2 { "Timeline (newest first)" }
            nav.pager {
                @if let Some(b) = v.timeline.newer { a rel="prev" href=(format!("{path}?before={b}")) { "← newer" } }
                @if let Some(b) = v.timeline.older { a rel="next" href=(format!("{path}?before={b}")) { "older →" } }
            }
            ol.events reversed {
                @for e in &v.timeline.events {
                    li.event data-sequence=(e.sequence) value=(e.sequence) {
                        span.seq { "#" (e.sequence) }
                        " " time { (time(e.occurred_at)) }
                        " " span.actor.(e.actor.kind.as_str()) { (e.actor.kind.as_str())
                            @if let Some(id) = &e.actor.id { " " code { (id) } } }
                        " " span.kind { (e.kind.as_str()) }
                        " " span.summary { (e.summary) }
                        (what_changed(&e.payload))
                    }
                }
                @if let Some(floor) = v.timeline.pruned_through {
                    li.pruned #pruned { "History up to #" (floor) " was pruned (retention)." }
                }
                @if v.timeline.events.is_empty() && v.timeline.pruned_through.is_none() {
                    li.empty { "No events yet." }
                }
            }
        }
    }
}

/// The `changesSince` form and, once asked, the page `session_status` answers.
fn reconcile(v: &SessionView, path: &str) -> Markup {
    html! {
        section #reconcile {
            h2 { "Reconcile" }
            form method="get" action=(path) {
                label { "What changed since " input type="number" name="since" min="0" value=(v.reconcile.as_ref().map(|r| r.since).unwrap_or(0)); }
                button type="submit" { "Show" }
            }
            @if let Some(r) = &v.reconcile {
                p { "As " code { "session_status sessionKey \"" (v.key) "\" changesSince " (r.since) } " answers:" }
                @if r.page.history_gap {
                    p.warning #history-gap { "History gap: events after " (r.since) " were pruned; the earliest kept is #"
                        (r.page.earliest_available_sequence) ". Refresh the whole session." }
                }
                ol.events #reconcile-events {
                    @for e in &r.page.events {
                        li.event data-sequence=(e.sequence) value=(e.sequence) {
                            span.seq { "#" (e.sequence) } " " span.kind { (e.kind.as_str()) } " " span.summary { (e.summary) }
                        }
                    }
                    @if r.page.events.is_empty() { li.empty { "Nothing changed since " (r.since) "." } }
                }
                @if r.page.truncated { p { "More events follow; ask again from the last one." } }
            }
        }
    }
}

/// Rendered pages are plain strings (the handlers add headers).
pub(crate) fn into_string(m: Markup) -> String {
    let PreEscaped(s) = m;
    s
}
