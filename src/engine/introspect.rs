//! What a socket looks like from outside: the status file and the
//! `/proc/net/unix` table.

use super::timeo::Direction;
use std::fmt::Write;
use std::sync::Arc;

use super::socket::{Conn, Socket};
use super::{Addr, Engine, SockType};

impl Engine {
    /// `.udsfs/sock/N/status`: one key=value per line.
    pub fn status(&self, s: &Arc<Socket>) -> String {
        self.status_for(s, None)
    }

    /// The status as thread `viewer` reads it: `peercred=` in its pid and
    /// user namespaces, as SO_PEERCRED gives them (an observer shows no
    /// more than its reader may see).
    pub fn status_for(&self, s: &Arc<Socket>, viewer: Option<u32>) -> String {
        let st = s.lock();
        let local = st
            .name
            .as_ref()
            .map(|n| n.addr.display())
            .unwrap_or_default();
        let peer_sock = Socket::peer(&st).cloned();
        let state = s.state_name(&st);
        let passcred = st.passcred as u8;
        let passpidfd = st.passpidfd as u8;
        let peer_cred = st.conn.cred().cloned();
        let (msgs, bytes, sndbuf, rcvbuf) = (
            st.queue.msgs().len(),
            st.queue.bytes(),
            st.sndbuf,
            st.rcvbuf,
        );
        // What FIONREAD (and ss's Recv-Q) gives a dgram socket: the first message.
        let head = st.queue.msgs().front().map_or(0, |m| m.remaining());
        let pending = match &st.conn {
            Conn::Listening {
                pending, backlog, ..
            } => Some((pending.clone(), *backlog)),
            _ => None,
        };
        drop(st);
        // Mapped for the viewer outside the socket's lock (it reads /proc).
        let peercred = peer_cred
            .map(|c| match viewer {
                Some(v) => c.shown_to(v),
                None => c.cred,
            })
            .map(|c| format!("{}:{}:{}", c.pid, c.uid, c.gid))
            .unwrap_or_default();
        // SIOCINQ as the socket API answers it (empty on a listener: EINVAL).
        let inq = self.info(s).inq.map(|n| n.to_string()).unwrap_or_default();
        // getpeername reads the peer's current name; an embryo has no inode yet.
        let (peer, peer_id) = peer_sock
            .map(|p| {
                let pt = p.lock();
                let name = pt.name.as_ref().map(|n| n.addr.display());
                (
                    name.unwrap_or_default(),
                    if pt.conn.is_embryo() { 0 } else { p.id },
                )
            })
            .unwrap_or_default();
        let mut out = String::new();
        let wmem = s.wmem();
        let fields: [(&str, &dyn std::fmt::Display); 15] = [
            ("type", &s.ty.name()),
            ("state", &state),
            ("local", &local),
            ("peer", &peer),
            ("peer_id", &peer_id),
            ("passcred", &passcred),
            ("passpidfd", &passpidfd),
            ("peercred", &peercred),
            ("rcvq_msgs", &msgs),
            ("rcvq_bytes", &bytes),
            ("rcvq_head", &head),
            ("inq", &inq),
            ("sndbuf", &sndbuf),
            ("rcvbuf", &rcvbuf),
            // wmem is SIOCOUTQ.
            ("wmem", &wmem),
        ];
        for (key, value) in fields {
            let _ = writeln!(out, "{key}={value}");
        }
        if let Some((embryos, b)) = pending {
            // The clients waiting in the backlog (ss -e shows them as "peers:").
            let clients: Vec<String> = embryos
                .iter()
                .filter_map(|e| Socket::peer(&e.lock()).map(|c| c.id.to_string()))
                .collect();
            let _ = writeln!(out, "pending={}", embryos.len());
            let _ = writeln!(out, "pending_peers={}", clients.join(","));
            let _ = writeln!(out, "backlog={b}");
        }
        let _ = writeln!(out, "inflight={}", s.inflight());
        let _ = write!(out, "{}", self.oob_status(s));
        let _ = writeln!(out, "refs={}", s.refs());
        // SO_RCVTIMEO, SO_SNDTIMEO in ms (0: none).
        let _ = writeln!(out, "rcvtimeo={}", s.timeouts.millis(Direction::Recv));
        let _ = writeln!(out, "sndtimeo={}", s.timeouts.millis(Direction::Send));
        let _ = writeln!(out, "lane={}", self.lane_status(s));
        out
    }

    /// Every socket of network namespace `ns` (the reader's) as Linux's
    /// /proc/net/unix prints it: another namespace's sockets and names are
    /// not the reader's to see (a container's, say).
    pub fn proc_net_unix(&self, ns: super::netns::NetNs) -> String {
        let mut out = String::from("Num       RefCount Protocol Flags    Type St Inode Path\n");
        for (id, dir) in self.dirs() {
            let s = &dir.sock;
            if s.id != id || s.netns != ns {
                continue;
            }
            let st = s.lock();
            let listening = matches!(st.conn, Conn::Listening { .. });
            let connected = st.conn.is_connected();
            // SS_UNCONNECTED 1, SS_CONNECTING 2 (embryo), SS_CONNECTED 3.
            let ss = if st.conn.is_embryo() {
                2
            } else if connected {
                3
            } else {
                1
            };
            let flags = if listening { 0x10000 } else { 0 };
            let _ = write!(
                out,
                "{:016x}: {:08X} {:08X} {:08X} {:04X} {:02X} {:5}",
                0,
                2 + connected as usize,
                0,
                flags,
                s.ty.number(),
                ss,
                // An embryo has no inode yet.
                if st.conn.is_embryo() { 0 } else { s.id }
            );
            if let Some(n) = &st.name {
                out.push(' ');
                match &n.addr {
                    Addr::Path(p) => out.push_str(&String::from_utf8_lossy(p)),
                    Addr::Abstract(a) => {
                        out.push('@');
                        let shown: Vec<u8> =
                            a.iter().map(|&b| if b == 0 { b'@' } else { b }).collect();
                        out.push_str(&String::from_utf8_lossy(&shown));
                    }
                }
            }
            out.push('\n');
        }
        out
    }

    /// The abstract names bound in network namespace `ns` (the reader's),
    /// for `.udsfs/abstract/`.
    pub fn abstract_names(&self, ns: super::netns::NetNs) -> Vec<(SockType, Vec<u8>, Arc<Socket>)> {
        let all = self.names.abstract_names().into_iter();
        all.filter(|(n, ..)| *n == ns)
            .map(|(_, t, name, s)| (t, name, s))
            .collect()
    }
}
