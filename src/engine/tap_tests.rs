//! The taps see every message once queued and once read, with its ends,
//! its sender, what it carries and how it was read, and the connection
//! events in the order they happen.

use std::sync::Arc;

use parking_lot::Mutex;

use super::tap::{Delivered, Event, Origin, Queued, Tap};
use super::tests::{engine, pipe_end, root, root_pair};
use super::*;

#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Queued {
        id: u64,
        from: u64,
        to: u64,
        pid: u32,
        creds: Option<(i32, u32, u32)>,
        sockets: Vec<u64>,
        files: Vec<&'static str>,
        oob: bool,
        data: Vec<u8>,
    },
    Delivered {
        id: u64,
        reader: u64,
        pid: u32,
        len: usize,
        truncated: bool,
        ctrunc: bool,
        peek: bool,
    },
    Event(String),
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Seen>>);

impl Tap for Recorder {
    fn queued(&self, q: &Queued<'_>) {
        self.0.lock().push(Seen::Queued {
            id: q.msg_id,
            from: q.from.id,
            to: q.to.id,
            pid: q.origin.pid,
            creds: q.creds.map(|c| (c.pid, c.uid, c.gid)),
            sockets: q.sockets.iter().map(|s| s.id).collect(),
            files: q.files.to_vec(),
            oob: q.oob,
            data: q.data.to_vec(),
        });
    }

    fn delivered(&self, d: &Delivered<'_>) {
        self.0.lock().push(Seen::Delivered {
            id: d.msg_id,
            reader: d.reader.id,
            pid: d.origin.pid,
            len: d.len,
            truncated: d.truncated,
            ctrunc: d.ctrunc,
            peek: d.peek,
        });
    }

    fn event(&self, _: Origin, e: &Event) {
        let word = match e {
            Event::Connected {
                client,
                server,
                accepted,
            } => format!(
                "connect {} {} {:?}",
                client.id,
                server.id,
                accepted.as_ref().map(|a| a.id)
            ),
            Event::Accepted { listener, sock } => format!("accept {} {}", listener.id, sock.id),
            Event::Shutdown { sock, how } => format!("shutdown {} {how}", sock.id),
            Event::Closed { sock } => format!("close {}", sock.id),
            Event::Reset { sock } => format!("reset {}", sock.id),
            Event::Collected { sock } => format!("collected {}", sock.id),
            Event::Fault { sock, rule, .. } => format!("fault {} rule {rule}", sock.id),
        };
        self.0.lock().push(Seen::Event(word));
    }
}

fn attach(e: &Engine) -> Arc<Recorder> {
    let r = Arc::new(Recorder::default());
    e.taps.attach(r.clone());
    r
}

fn take(r: &Recorder) -> Vec<Seen> {
    std::mem::take(&mut *r.0.lock())
}

#[test]
fn each_message_is_seen_once_queued_and_once_read() {
    let (e, c, a, b) = root_pair(SockType::Dgram);
    let passed = e.socket(SockType::Stream, &c);
    let rec = attach(&e);
    // A message passing a socket and a pipe, with explicit credentials,
    // read into a short buffer: truncated.
    let tag = e.depot.deposit(1, 0, pipe_end()).unwrap();
    let mut out = e.prepare_send(None, &[passed.id, tag], &c, true).unwrap();
    out.creds = Some(Ucred {
        pid: 1,
        uid: 0,
        gid: 0,
    });
    assert_eq!(
        e.sendmsg(&a, out.msg(b"hello", None, false), &c, None),
        Ok(5)
    );
    assert!(out.is_empty());
    e.put_back(out);
    let got = e.recvmsg(&b, RecvFlags::peek(10), None).unwrap();
    got.rights.iter().for_each(|r| e.put(r));
    let got = e.recvmsg(&b, RecvFlags::new(3), None).unwrap();
    assert_eq!(got.data, b"hel");
    got.rights.iter().for_each(|r| e.put(r));
    let seen = take(&rec);
    let Seen::Queued { id, .. } = seen[0] else {
        panic!("queued first: {seen:?}")
    };
    assert!(id != 0);
    assert_eq!(
        seen,
        vec![
            Seen::Queued {
                id,
                from: a.id,
                to: b.id,
                pid: 1,
                creds: Some((1, 0, 0)),
                sockets: vec![passed.id],
                files: vec!["socket"],
                oob: false,
                data: b"hello".to_vec(),
            },
            Seen::Delivered {
                id,
                reader: b.id,
                pid: 1,
                len: 5,
                truncated: false,
                ctrunc: false,
                peek: true,
            },
            Seen::Delivered {
                id,
                reader: b.id,
                pid: 1,
                len: 3,
                truncated: true,
                ctrunc: false,
                peek: false,
            },
        ]
    );
    // A reader with no room for what a message passes: MSG_CTRUNC.
    let mut rights = vec![passed.clone()];
    e.hold(&passed);
    e.sendmsg(&b, SendMsg::new(b"x").rights(&mut rights), &c, None)
        .unwrap();
    let f = RecvFlags {
        room: Some(RightsRoom::NONE),
        ..RecvFlags::new(10)
    };
    assert!(e.recvmsg(&a, f, None).unwrap().ctrunc);
    let seen = take(&rec);
    assert!(
        matches!(&seen[..], [Seen::Queued { from, sockets, .. }, Seen::Delivered { ctrunc: true, truncated: false, .. }] if *from == b.id && *sockets == vec![passed.id]),
        "{seen:?}"
    );
    // Stream: each chunk is seen, the OOB byte as a message of its own.
    let (x, y) = e.socketpair(SockType::Stream, &c);
    e.sendmsg(&x, SendMsg::new(b"ab"), &c, None).unwrap();
    e.sendmsg(&x, SendMsg::new(b"cd").oob(), &c, None).unwrap();
    assert_eq!(
        e.recvmsg(&y, RecvFlags::new(10), None).unwrap().data,
        b"abc"
    );
    let oob = RecvFlags {
        oob: true,
        ..RecvFlags::new(1)
    };
    assert_eq!(e.recvmsg(&y, oob, None).unwrap().data, b"d");
    let seen = take(&rec);
    let queued: Vec<(u64, bool, Vec<u8>)> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Queued {
                id, oob, data, to, ..
            } if *to == y.id => Some((*id, *oob, data.clone())),
            _ => None,
        })
        .collect();
    let read: Vec<(u64, usize)> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Delivered {
                id, len, reader, ..
            } if *reader == y.id => Some((*id, *len)),
            _ => None,
        })
        .collect();
    assert_eq!(queued.len(), 3, "{seen:?}");
    assert_eq!(
        (queued[0].1, queued[1].1, queued[2].1),
        (false, false, true),
        "only the last byte is the OOB one"
    );
    assert_eq!(
        read,
        vec![(queued[0].0, 2), (queued[1].0, 1), (queued[2].0, 1)]
    );
    for s in [a, b, x, y, passed] {
        e.put(&s);
    }
}

#[test]
fn events_come_in_order() {
    let (e, c) = (engine(), root());
    let srv = e.socket(SockType::Stream, &c);
    e.bind(&srv, &Addr::Abstract(b"tapped".to_vec()), &c)
        .unwrap();
    e.listen(&srv, 5, &c).unwrap();
    let cli = e.socket(SockType::Stream, &c);
    let rec = attach(&e);
    e.connect(&cli, &Addr::Abstract(b"tapped".to_vec()), &c, None)
        .unwrap();
    let acc = e.accept(&srv, None).unwrap();
    e.sendmsg(&cli, SendMsg::new(b"unread"), &c, None).unwrap();
    e.shutdown(&cli, 2).unwrap();
    e.put(&acc);
    e.put(&cli);
    let seen: Vec<String> = take(&rec)
        .into_iter()
        .filter_map(|s| match s {
            Seen::Event(w) => Some(w),
            _ => None,
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            format!("connect {} {} {:?}", cli.id, srv.id, Some(acc.id)),
            format!("accept {} {}", srv.id, acc.id),
            format!("shutdown {} 2", cli.id),
            // The accepted end closes with data unread: its peer is reset.
            format!("close {}", acc.id),
            format!("reset {}", cli.id),
            format!("close {}", cli.id),
        ]
    );
    e.put(&srv);
}

#[test]
fn nothing_is_numbered_without_a_tap() {
    let (e, c, a, b) = root_pair(SockType::Seqpacket);
    e.sendmsg(&a, SendMsg::new(b"x"), &c, None).unwrap();
    assert_eq!(b.lock().queue.msgs().front().map(|m| m.msg_id), Some(0));
    let got = e.recvmsg(&b, RecvFlags::new(1), None).unwrap();
    assert!(got.pieces.is_empty());
    e.put(&a);
    e.put(&b);
}
