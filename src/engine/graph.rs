//! `.udsfs/graph`: every socket and what ties them together, as Graphviz DOT.
//! Connections, listeners with their not-yet-accepted embryos, and sockets in
//! flight inside other sockets' queues (the collector's graph); the sockets
//! the collector would free now are drawn as dead.

use std::collections::HashSet;
use std::fmt::Write;

use super::Engine;
use super::socket::{Conn, Socket};

/// DOT string literal: quotes and backslashes escaped.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Engine {
    pub fn graph_dot(&self) -> String {
        self.graph_dot_for(true, None)
    }

    /// The graph; `flight`: with what is in flight and the collector's
    /// verdict, which Linux shows no user (only root reads them here).
    /// `ns`: only the sockets of that network namespace (a reader other
    /// than root: as `.udsfs/unix`, another namespace's are not its to see).
    pub fn graph_dot_for(&self, flight: bool, ns: Option<super::netns::NetNs>) -> String {
        let shown = |s: &Socket| ns.is_none_or(|ns| s.netns == ns);
        let view = self.gc.view();
        let mut out = String::from(
            "digraph udsfs {\n  rankdir=LR;\n  node [shape=box, style=rounded, fontname=\"monospace\"];\n",
        );
        let mut edges = String::new();
        let mut seen = HashSet::new();
        for (id, dir) in self.dirs() {
            let s = &dir.sock;
            // Received entries are further names of a socket listed under its own number.
            if s.id != id || !shown(s) {
                continue;
            }
            seen.insert(id);
            let st = s.lock();
            let name = st.name.as_ref().map(|n| n.addr.display());
            let state = if st.conn.is_embryo() {
                "embryo"
            } else {
                s.state_name(&st)
            };
            let dead = flight && view.dead.contains(&id);
            let mut label = format!("{id} {}\n{state}", s.ty.name());
            if let Some(n) = &name {
                let _ = write!(label, "\n{n}");
            }
            let inflight = s.inflight();
            if flight && inflight > 0 {
                let _ = write!(label, "\nin flight x{inflight}");
            }
            if dead {
                label.push_str("\nDEAD (collector)");
            }
            let mut attrs = format!("label={}", quoted(&label));
            if dead {
                attrs.push_str(
                    ", color=red, fontcolor=red, style=\"rounded,filled\", fillcolor=\"#ffe0e0\"",
                );
            } else if st.conn.is_embryo() {
                attrs.push_str(", style=\"rounded,dashed\"");
            } else if matches!(st.conn, Conn::Listening { .. }) {
                attrs.push_str(", penwidth=2");
            }
            let _ = writeln!(out, "  s{id} [{attrs}];");
            let (peer, pending) = match &st.conn {
                Conn::Listening { pending, .. } => {
                    let shown = pending.iter().filter(|e| shown(e));
                    (None, shown.map(|e| e.id).collect())
                }
                Conn::Connected { peer, .. } => (Some(peer.clone()), Vec::new()),
                Conn::Unconnected { .. } | Conn::Closed => (None, Vec::new()),
            };
            // One socket lock at a time: the peer is looked at after this one is free.
            drop(st);
            for e in pending {
                let _ = writeln!(
                    edges,
                    "  s{id} -> s{e} [label=\"pending\", style=dashed, arrowhead=odiamond];"
                );
            }
            if let Some(peer) = peer.filter(|p| shown(p)) {
                let mutual = Socket::peer(&peer.lock()).is_some_and(|p| p.id == id);
                if !mutual {
                    let _ = writeln!(edges, "  s{id} -> s{} [label=\"peer\"];", peer.id);
                } else if id < peer.id {
                    let _ = writeln!(
                        edges,
                        "  s{id} -> s{} [label=\"connected\", dir=both];",
                        peer.id
                    );
                }
            }
        }
        for (sock, receivers) in view.inflight.iter().filter(|_| flight) {
            let dead = view.dead.contains(sock);
            for r in receivers {
                // A queue may hold a socket whose directory is already gone.
                if !seen.contains(sock) {
                    let _ = writeln!(out, "  s{sock} [label=\"{sock}\\n(closed)\"];");
                    seen.insert(*sock);
                }
                let colour = if dead { "red" } else { "blue" };
                let _ = writeln!(
                    edges,
                    "  s{sock} -> s{r} [label=\"in queue of\", color={colour}, fontcolor={colour}, style=bold];"
                );
            }
        }
        out.push_str(&edges);
        out.push_str("}\n");
        out
    }
}
