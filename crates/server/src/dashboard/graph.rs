//! The watch graph's layout: sessions on a circle, an arrow per watch (watcher → target). Pure
//! arithmetic; `pages.rs` draws it as inline SVG.

use super::view::Edge;

/// Nodes drawn at most; edges to sessions past this are listed, not drawn.
pub(crate) const MAX_NODES: usize = 80;
const NODE_RADIUS: f64 = 7.0;
const MARGIN: f64 = 190.0;

pub(crate) struct Node {
    pub key: String,
    pub x: f64,
    pub y: f64,
}

pub(crate) struct Arrow<'a> {
    pub edge: &'a Edge,
    pub from: (f64, f64),
    pub to: (f64, f64),
    pub label_at: (f64, f64),
}

pub(crate) struct Layout<'a> {
    pub width: f64,
    pub height: f64,
    pub nodes: Vec<Node>,
    pub arrows: Vec<Arrow<'a>>,
}

/// Lays out `edges`; `order` puts those sessions first (the page's own).
pub(crate) fn layout<'a>(edges: &'a [Edge], order: &[&str]) -> Layout<'a> {
    let mut keys: Vec<String> = vec![];
    let mut add = |k: &str| {
        if !keys.iter().any(|x| x == k) && keys.len() < MAX_NODES {
            keys.push(k.to_string());
        }
    };
    for k in order.iter().filter(|k| edges.iter().any(|e| e.watcher == **k || e.target == **k)) {
        add(k);
    }
    for e in edges {
        add(&e.watcher);
        add(&e.target);
    }
    let n = keys.len().max(1) as f64;
    let radius = (n * 18.0 / std::f64::consts::TAU).max(90.0);
    let (cx, cy) = (radius + MARGIN, radius + 40.0);
    let nodes: Vec<Node> = keys
        .into_iter()
        .enumerate()
        .map(|(i, key)| {
            let angle = std::f64::consts::TAU * i as f64 / n - std::f64::consts::FRAC_PI_2;
            Node { key, x: cx + radius * angle.cos(), y: cy + radius * angle.sin() }
        })
        .collect();
    let at = |k: &str| nodes.iter().find(|n| n.key == k).map(|n| (n.x, n.y));
    let arrows = edges
        .iter()
        .filter_map(|edge| {
            let (a, b) = (at(&edge.watcher)?, at(&edge.target)?);
            let (dx, dy) = (b.0 - a.0, b.1 - a.1);
            let len = (dx * dx + dy * dy).sqrt().max(1.0);
            let (ux, uy) = (dx / len, dy / len);
            let from = (a.0 + ux * NODE_RADIUS, a.1 + uy * NODE_RADIUS);
            let to = (b.0 - ux * (NODE_RADIUS + 3.0), b.1 - uy * (NODE_RADIUS + 3.0));
            Some(Arrow { edge, from, to, label_at: ((a.0 + b.0) / 2.0, (a.1 + b.1) / 2.0 - 4.0) })
        })
        .collect();
    Layout { width: 2.0 * (radius + MARGIN), height: 2.0 * radius + 80.0, nodes, arrows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::view::EdgeOrigin;

    fn edge(w: &str, t: &str) -> Edge {
        Edge {
            watcher: w.into(),
            target: t.into(),
            origin: EdgeOrigin::Explicit,
            last_seen: 0,
            notified: 0,
            material: 0,
            pending: false,
        }
    }

    #[test]
    fn every_endpoint_is_a_node_once_and_every_edge_an_arrow() {
        let edges = vec![edge("a", "b"), edge("c", "b"), edge("b", "a")];
        let l = layout(&edges, &["b"]);
        let keys: Vec<&str> = l.nodes.iter().map(|n| n.key.as_str()).collect();
        assert_eq!(keys, vec!["b", "a", "c"], "the page's sessions first");
        assert_eq!(l.arrows.len(), 3);
        for n in &l.nodes {
            assert!(n.x > 0.0 && n.x < l.width && n.y > 0.0 && n.y < l.height, "inside the picture");
        }
    }

    #[test]
    fn nodes_past_the_cap_are_not_drawn() {
        let edges: Vec<Edge> = (0..MAX_NODES + 10).map(|i| edge("hub", &format!("t{i}"))).collect();
        let l = layout(&edges, &[]);
        assert_eq!(l.nodes.len(), MAX_NODES);
        assert_eq!(l.arrows.len(), MAX_NODES - 1);
    }
}
