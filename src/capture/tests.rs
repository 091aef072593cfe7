//! A capture fed through its tap, read back as pcapng.

use super::pcapng::{self, codes};
use super::reader::{Access, Reader};
use super::*;
use crate::engine::tap::{Delivered, Endpoint, Event, Origin, PassedSocket, Queued, Tap};
use crate::engine::{Addr, SockType, Ucred};

fn ep(id: u64, ty: SockType, name: Option<&str>, owner_uid: u32) -> Endpoint {
    Endpoint {
        id,
        ty,
        name: name.map(|n| Addr::Path(n.as_bytes().to_vec())),
        owner_uid,
        openers: vec![owner_uid],
        proto: None,
        accepted: false,
    }
}

fn origin(pid: u32) -> Origin {
    Origin {
        pid,
        tid: pid,
        uid: 0,
        gid: 0,
    }
}

/// Two unnamed root-owned sockets of type `ty`, numbered 1 and 2.
fn pair(ty: SockType) -> (Endpoint, Endpoint) {
    (ep(1, ty, None, 0), ep(2, ty, None, 0))
}

/// A root-owned stream socket.
fn stream(id: u64, name: Option<&str>) -> Endpoint {
    ep(id, SockType::Stream, name, 0)
}

/// A reader for root with no filter.
fn reader() -> std::sync::Arc<Reader> {
    Reader::new(root(), None, Filter::default()).unwrap()
}

/// A reader for root with no filter, configured with `lines`.
fn configured(lines: &[u8]) -> std::sync::Arc<Reader> {
    let r = reader();
    r.configure(lines).unwrap();
    r
}

fn send(r: &Reader, id: u64, from: &Endpoint, to: &Endpoint, pid: u32, data: &[u8]) {
    r.queued(&Queued {
        msg_id: id,
        from,
        to,
        origin: origin(pid),
        creds: None,
        sockets: &[],
        files: &[],
        oob: false,
        data,
    });
}

fn read_all(r: &Reader) -> Vec<u8> {
    let mut out = Vec::new();
    while let Ok(b) = r.read(1 << 20, None) {
        if b.is_empty() {
            break;
        }
        out.extend(b);
    }
    out
}

fn root() -> Access {
    Access { uid: 0, all: true }
}

/// (interface, payload after the upper-PDU header, comment) of each packet.
fn packets(bytes: &[u8]) -> Vec<(u32, Vec<u8>, String)> {
    let blocks = pcapng::parse(bytes).expect("well-formed pcapng");
    assert_eq!(blocks[0].ty, codes::SHB);
    blocks
        .iter()
        .filter(|b| b.ty == codes::EPB)
        .map(|b| {
            let d = b.packet_data();
            // Skip the tags: up to and including the end tag (0, 0).
            let mut i = 0;
            loop {
                let ty = u16::from_be_bytes([d[i], d[i + 1]]);
                let len = u16::from_be_bytes([d[i + 2], d[i + 3]]) as usize;
                i += 4 + len;
                if ty == 0 {
                    break;
                }
            }
            let iface = u32::from_le_bytes(b.body[0..4].try_into().unwrap());
            (
                iface,
                d[i..].to_vec(),
                b.comment().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn messages_come_out_in_order_with_their_comments() {
    let r = reader();
    let (a, b) = pair(SockType::Seqpacket);
    send(&r, 1, &a, &b, 10, b"one");
    let passed = [PassedSocket {
        id: 9,
        ty: SockType::Stream,
        name: Some(Addr::Path(b"run/x".to_vec())),
    }];
    r.queued(&Queued {
        msg_id: 2,
        from: &b,
        to: &a,
        origin: origin(11),
        creds: Some(Ucred {
            pid: 11,
            uid: 5,
            gid: 6,
        }),
        sockets: &passed,
        files: &["pipe"],
        oob: false,
        data: b"two",
    });
    r.event(origin(10), &Event::Closed { sock: a.clone() });
    let bytes = read_all(&r);
    let p = packets(&bytes);
    assert_eq!(p.len(), 3);
    assert_eq!(p[0].1, b"one");
    assert_eq!(p[1].1, b"two");
    assert!(
        p[1].2.contains("SCM_CREDENTIALS pid 11 uid 5 gid 6"),
        "{}",
        p[1].2
    );
    assert!(
        p[1].2
            .contains("SCM_RIGHTS socket 9 stream run/x, file pipe")
    );
    assert!(p[2].2.starts_with("close: socket 1"));
    assert!(
        p.iter().all(|x| x.0 == 0),
        "one conversation, one interface"
    );
    let blocks = pcapng::parse(&bytes).unwrap();
    let flags: Vec<_> = blocks
        .iter()
        .filter(|b| b.ty == codes::EPB)
        .map(|b| b.option(codes::EPB_FLAGS).map(|v| v[0]))
        .collect();
    assert_eq!(flags[..2], [Some(2), Some(1)], "out, then in");
    assert!(r.read(100, None) == Err(nix::errno::Errno::EAGAIN));
}

#[test]
fn a_full_buffer_drops_and_counts_exactly() {
    let r = configured(b"buffer 2000\n");
    let (a, b) = pair(SockType::Dgram);
    let n = 100;
    for i in 0..n {
        send(&r, i + 1, &a, &b, 1, &[i as u8; 100]);
    }
    let (kept, lost) = r.counts();
    assert_eq!(kept + lost, n);
    assert!(lost > 0 && kept > 0);
    let bytes = read_all(&r);
    let blocks = pcapng::parse(&bytes).unwrap();
    let epbs = blocks.iter().filter(|b| b.ty == codes::EPB).count() as u64;
    let isb = blocks
        .iter()
        .rfind(|b| b.ty == codes::ISB)
        .expect("statistics");
    assert_eq!(epbs, kept);
    assert_eq!(isb.u64_option(codes::ISB_IFDROP), Some(lost));
    assert_eq!(isb.u64_option(codes::ISB_IFRECV), Some(n));
    // Sending on: the next packet carries no drops, the buffer has room again.
    send(&r, 1000, &a, &b, 1, b"after");
    let more = read_all(&r);
    let blocks = pcapng::parse(&more).unwrap();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].u64_option(codes::EPB_DROPCOUNT), None);
}

#[test]
fn a_full_buffer_counts_undescribed_messages_as_the_described_ones() {
    let r = configured(b"buffer 2000\n");
    let (a, b) = pair(SockType::Dgram);
    let (c, d) = pair(SockType::Stream);
    // Nothing lost yet, or a conversation not seen: the whole report is wanted.
    assert!(!r.lost_undescribed(SockType::Dgram, a.id, b.id, 100));
    send(&r, 1, &c, &d, 1, b"s");
    let mut sent = 1;
    let mut cheap = 0;
    for i in 0..100u64 {
        if !r.lost_undescribed(SockType::Dgram, a.id, b.id, 100) {
            send(&r, i + 10, &a, &b, 1, &[i as u8; 100]);
        } else {
            cheap += 1;
        }
        sent += 1;
    }
    assert!(
        cheap > 0,
        "once full, the engine need not describe messages"
    );
    // An unknown conversation (sockets 7 and 8) is never dropped undescribed.
    assert!(!r.lost_undescribed(SockType::Stream, 7, 8, 100));
    let (kept, lost) = r.counts();
    assert_eq!(kept + lost, sent);
    let bytes = read_all(&r);
    let blocks = pcapng::parse(&bytes).unwrap();
    let epbs = blocks.iter().filter(|b| b.ty == codes::EPB).count() as u64;
    assert_eq!(epbs, kept);
    // The drop counts in the stream add up to what was lost, cheaply or not.
    let dropped: u64 = blocks
        .iter()
        .filter_map(|b| b.u64_option(codes::EPB_DROPCOUNT))
        .sum();
    let isb_drops: u64 = blocks
        .iter()
        .filter(|b| b.ty == codes::ISB)
        .filter_map(|b| b.u64_option(codes::ISB_IFDROP))
        .max()
        .unwrap_or(0);
    assert!(
        dropped == lost || isb_drops == lost,
        "{dropped} {isb_drops} {lost}"
    );
    // Read: room again, so the next message is described and kept.
    assert!(!r.lost_undescribed(SockType::Dgram, a.id, b.id, 100));
    // A user's capture always takes the whole path.
    let user = Reader::new(Access { uid: 5, all: false }, None, Filter::default()).unwrap();
    assert!(!user.lost_undescribed(SockType::Dgram, a.id, b.id, 100));
}

#[test]
fn drops_are_counted_per_conversation() {
    let r = configured(b"buffer 400\n");
    let d = |id| ep(id, SockType::Dgram, None, 0);
    let (a, b, c) = (d(1), d(2), d(3));
    send(&r, 1, &a, &b, 1, &[0; 100]);
    for i in 0..3 {
        send(&r, 2 + i, &a, &b, 1, &[0; 100]);
        send(&r, 10 + i, &a, &c, 1, &[0; 100]);
    }
    let bytes = read_all(&r);
    let blocks = pcapng::parse(&bytes).unwrap();
    let mut kept = [0u64; 2];
    let mut lost = [0u64; 2];
    for b in &blocks {
        let iface = || u32::from_le_bytes(b.body[0..4].try_into().unwrap()) as usize;
        match b.ty {
            codes::EPB => kept[iface()] += 1,
            codes::ISB => lost[iface()] = b.u64_option(codes::ISB_IFDROP).unwrap(),
            _ => {}
        }
    }
    assert_eq!(kept[0] + lost[0], 4, "to socket 2");
    assert_eq!(kept[1] + lost[1], 3, "to socket 3");
    assert!(lost[1] > 0);
}

#[test]
fn filters_keep_exactly_the_matching_conversations() {
    // Three conversations: a pid filter keeps both directions of pid 7's.
    let r = configured(b"pid 7\n");
    let (a1, b1) = (stream(1, None), stream(2, Some("run/a.sock")));
    let (a2, b2) = (stream(3, None), stream(4, Some("run/b.sock")));
    let (a3, b3) = (stream(5, None), stream(6, Some("other/c.sock")));
    for i in 0..3 {
        send(&r, 10 + i, &a1, &b1, 7, b"req1");
        send(&r, 20 + i, &b1, &a1, 8, b"rep1");
        send(&r, 30 + i, &a2, &b2, 9, b"req2");
        send(&r, 40 + i, &b2, &a2, 8, b"rep2");
        send(&r, 50 + i, &a3, &b3, 7, b"req3");
        send(&r, 60 + i, &b3, &a3, 6, b"rep3");
    }
    let got: Vec<_> = packets(&read_all(&r)).into_iter().map(|p| p.1).collect();
    let want: Vec<Vec<u8>> = [b"req1", b"rep1", b"req3", b"rep3"]
        .repeat(3)
        .into_iter()
        .map(|x| x.to_vec())
        .collect();
    assert_eq!(got, want);

    let r = configured(b"name run/*.sock\n");
    send(&r, 1, &a1, &b1, 1, b"x1");
    send(&r, 2, &a2, &b2, 1, b"x2");
    send(&r, 3, &a3, &b3, 1, b"x3");
    let got: Vec<_> = packets(&read_all(&r)).into_iter().map(|p| p.1).collect();
    assert_eq!(got, [b"x1", b"x2"]);

    let r = Reader::new(root(), Some(4), Filter::default()).unwrap();
    send(&r, 1, &a1, &b1, 1, b"x1");
    send(&r, 2, &b2, &a2, 1, b"x2");
    send(&r, 3, &a3, &b3, 1, b"x3");
    let got: Vec<_> = packets(&read_all(&r)).into_iter().map(|p| p.1).collect();
    assert_eq!(got, [b"x2"], "a socket's own capture");
}

#[test]
fn a_user_sees_only_messages_of_sockets_it_owns() {
    let r = Reader::new(
        Access {
            uid: 1000,
            all: false,
        },
        None,
        Filter::default(),
    )
    .unwrap();
    let mine = ep(1, SockType::Dgram, None, 1000);
    let theirs = ep(2, SockType::Dgram, None, 1001);
    let other = ep(3, SockType::Dgram, None, 1001);
    send(&r, 1, &mine, &theirs, 1, b"to them");
    send(&r, 2, &theirs, &mine, 1, b"to me");
    send(&r, 3, &theirs, &other, 1, b"not mine");
    let got: Vec<_> = packets(&read_all(&r)).into_iter().map(|p| p.1).collect();
    assert_eq!(got, [&b"to them"[..], b"to me"]);
}

#[test]
fn snaplen_cuts_payloads_but_keeps_their_length() {
    let r = configured(b"snaplen 4\n");
    let (a, b) = pair(SockType::Dgram);
    send(&r, 1, &a, &b, 1, b"0123456789");
    let bytes = read_all(&r);
    let p = packets(&bytes);
    assert_eq!(p[0].1, b"0123");
    let blocks = pcapng::parse(&bytes).unwrap();
    let epb = blocks.iter().find(|b| b.ty == codes::EPB).unwrap();
    let orig = u32::from_le_bytes(epb.body[16..20].try_into().unwrap()) as usize;
    assert_eq!(orig, epb.packet_data().len() + 6);
}

#[test]
fn the_tcp_encoding_counts_the_bytes() {
    let r = configured(b"format tcp\nproto http\n");
    let (a, b) = pair(SockType::Stream);
    send(&r, 1, &a, &b, 1, b"GET / HTTP/1.0\r\n\r\n");
    send(&r, 2, &b, &a, 1, b"HTTP/1.0 200 OK\r\n\r\n");
    let bytes = read_all(&r);
    let blocks = pcapng::parse(&bytes).unwrap();
    let idb = blocks.iter().find(|b| b.ty == codes::IDB).unwrap();
    assert_eq!(&idb.body[..2], &pcapng::LINKTYPE_RAW.to_le_bytes());
    let epbs: Vec<_> = blocks.iter().filter(|b| b.ty == codes::EPB).collect();
    assert_eq!(epbs.len(), 5, "handshake, request, response");
    let resp = epbs[4].packet_data();
    assert_eq!(&resp[20..22], &80u16.to_be_bytes());
    assert_eq!(&resp[40..], b"HTTP/1.0 200 OK\r\n\r\n");
}

#[test]
fn filter_lines_are_refused_once_reading_began() {
    let r = reader();
    assert_eq!(r.configure(b"colour red\n"), Err(nix::errno::Errno::EINVAL));
    let shb = r.read(4096, None).unwrap();
    assert_eq!(pcapng::parse(&shb).unwrap()[0].ty, codes::SHB);
    assert_eq!(r.configure(b"pid 1\n"), Err(nix::errno::Errno::EBUSY));
}

#[test]
fn each_conversation_gets_the_protocol_of_its_name() {
    let r = configured(b"proto json\nproto http run/*.sock\n");
    let (a, b) = (stream(1, None), stream(2, Some("run/api.sock")));
    let (c, d) = (stream(3, None), stream(4, Some("var/other")));
    send(&r, 1, &a, &b, 1, b"GET / HTTP/1.0\r\n\r\n");
    send(&r, 2, &c, &d, 1, b"{}");
    assert_eq!(dissectors(&read_all(&r)), ["http", "json"]);
}

/// The dissector names of the EPBs in `bytes`, in order.
fn dissectors(bytes: &[u8]) -> Vec<String> {
    let blocks = pcapng::parse(bytes).unwrap();
    blocks
        .iter()
        .filter(|b| b.ty == codes::EPB)
        .map(|b| {
            let d = b.packet_data();
            let len = u16::from_be_bytes([d[2], d[3]]) as usize;
            String::from_utf8_lossy(&d[4..4 + len])
                .trim_end_matches('\0')
                .to_string()
        })
        .collect()
}

#[test]
fn a_socket_s_own_protocol_wins_over_the_readers() {
    let r = configured(b"proto json\nproto http run/*.sock\n");
    let own = |mut e: Endpoint, p: &str| {
        e.proto = Some(p.into());
        e
    };
    let (a, b) = (
        stream(1, None),
        own(stream(2, Some("run/api.sock")), "grpc"),
    );
    let (c, d) = (own(stream(3, None), "dns"), stream(4, Some("var/other")));
    let (e, f) = (stream(5, None), stream(6, Some("run/web.sock")));
    send(&r, 1, &a, &b, 1, b"x");
    send(&r, 2, &c, &d, 1, b"y");
    send(&r, 3, &e, &f, 1, b"z");
    assert_eq!(dissectors(&read_all(&r)), ["grpc", "dns", "http"]);
}

/// The tap's cost per 100-byte message, kept (and encoded) or dropped:
/// `cargo test --release --lib cost_per_message -- --ignored --nocapture`.
#[test]
#[ignore]
fn cost_per_message() {
    let (a, b) = pair(SockType::Stream);
    let data = [7u8; 100];
    for (label, stalled) in [("kept and encoded", false), ("dropped", true)] {
        let r = reader();
        if stalled {
            r.configure(b"buffer 1000\n").unwrap();
        }
        let n = 1_000_000;
        let t = std::time::Instant::now();
        for i in 0..n {
            send(&r, i, &a, &b, 1, &data);
            if !stalled && i % 10000 == 0 {
                let _ = r.read(1 << 30, None);
            }
        }
        eprintln!("{label}: {:?} per message", t.elapsed() / n as u32);
    }
}

/// A user's capture numbers the messages it shows itself: ids 1, 2, 3 and
/// a cut read's note naming its own id, whatever the engine's ids (other
/// users' messages in between), and nothing of a message it may not see.
#[test]
fn a_users_capture_numbers_what_it_sees_itself() {
    let user = Reader::new(Access { uid: 5, all: false }, None, Filter::default()).unwrap();
    let d = |id, uid| ep(id, SockType::Dgram, None, uid);
    let (mine, theirs, other) = (d(1, 5), d(2, 5), d(3, 6));
    for engine_id in [3, 9, 20] {
        send(&user, engine_id, &mine, &theirs, 1, b"mine");
        send(&user, engine_id + 1, &other, &other, 2, b"not mine");
    }
    user.delivered(&Delivered {
        msg_id: 9,
        reader: &theirs,
        origin: origin(1),
        len: 2,
        truncated: true,
        ctrunc: false,
        peek: false,
    });
    let bytes = read_all(&user);
    let blocks = pcapng::parse(&bytes).unwrap();
    let ids: Vec<Option<u64>> = blocks
        .iter()
        .filter(|b| b.ty == codes::EPB)
        .map(|b| b.u64_option(codes::EPB_PACKETID))
        .collect();
    assert_eq!(ids, [Some(1), Some(2), Some(3), None]);
    let got = packets(&bytes);
    assert!(got.iter().all(|(_, data, _)| data != b"not mine"));
    let note = &got.last().unwrap().2;
    assert!(note.starts_with("message 2 read by socket 2"), "{note}");
}
