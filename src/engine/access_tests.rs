//! In-process tests of access by held claims (src/engine/access.rs): who may
//! reach a socket's directory, and for how long.

use std::sync::Arc;

use nix::errno::Errno;

use super::tests::{engine, put_all, user};
use super::*;

/// Passes `x` over `a` to `b`; the entry `b`'s reader (`uid`) gets.
fn pass_to(e: &Engine, a: &Arc<Socket>, b: &Arc<Socket>, x: &Arc<Socket>, c: &Caller) -> u64 {
    e.hold(x);
    let mut rights = vec![x.clone()];
    e.sendmsg(a, SendMsg::new(b"x").rights(&mut rights), c, None)
        .unwrap();
    let got = e.recvmsg(b, RecvFlags::new(10), None).unwrap();
    let ids = e.deliver_rights(b, got.rights, c.fsuid, c.fsgid, 16);
    assert_eq!(ids.len(), 1);
    ids[0]
}

#[test]
fn a_received_entry_lives_while_claimed_then_goes() {
    let e = engine();
    let u = user(1000);
    let (a, b) = e.socketpair(SockType::Dgram, &u);
    let x = e.socket(SockType::Stream, &u);
    let h = pass_to(&e, &a, &b, &x, &u);
    let d = e.dir(h).unwrap();
    assert!(d.refs.live(), "an unopened entry is its receiver's");
    assert_eq!(e.aliases.user_used(1000), 1, "charged to the receiver");
    // The owner's open: a claim of its own, then the adoption.
    let claim = e.more_claim(h, &d).unwrap();
    assert!(e.try_hold(&d.sock));
    e.adopt(h);
    assert!(e.dir(h).is_some_and(|d| d.refs.live()));
    assert!(e.hold_for_passing(&[h], &u).is_ok_and(|v| {
        v.iter().for_each(|s| e.put(s));
        true
    }));
    // Its close: nothing reaches the entry any more.
    e.release_claim(claim);
    assert!(e.dir(h).is_none(), "the entry is removed");
    assert_eq!(e.aliases.user_used(1000), 0);
    assert!(
        !d.refs.claim_more() && !d.refs.claim_first(),
        "revoked for good"
    );
    assert_eq!(e.hold_for_passing(&[h], &u).err(), Some(Errno::EBADF));
    put_all(&e, &[&d.sock, &x, &a, &b]);
    assert_eq!(e.live_sockets(), 0);
}

#[test]
fn a_socket_passed_away_and_closed_is_revoked_for_its_maker() {
    let e = engine();
    let u = user(1000);
    let (a, b) = e.socketpair(SockType::Dgram, &u);
    let x = e.try_socket(SockType::Stream, &u).unwrap();
    let handle = e.first_claim(x.id).unwrap();
    let _h = pass_to(&e, &a, &b, &x, &u);
    // The maker still holds its handle: its directory is open to it.
    assert!(e.dir(x.id).unwrap().refs.live());
    e.release_claim(handle);
    e.put(&x);
    let d = e.dir(x.id).expect("the socket lives, received");
    assert!(!d.refs.live(), "its maker kept nothing");
    assert!(e.more_claim(x.id, &d).is_none());
    assert_eq!(e.hold_for_passing(&[x.id], &u).err(), Some(Errno::EBADF));
    put_all(&e, &[&a, &b]);
}

#[test]
fn an_embryo_is_the_listeners_and_shut_until_accept() {
    let e = engine();
    let (srv, cli) = (user(1000), user(2000));
    let l = e.try_socket(SockType::Stream, &srv).unwrap();
    let _lc = e.first_claim(l.id).unwrap();
    e.bind(&l, &Addr::Abstract(b"emb".to_vec()), &srv).unwrap();
    e.listen(&l, 4, &srv).unwrap();
    let k = e.try_socket(SockType::Stream, &cli).unwrap();
    e.connect(&k, &Addr::Abstract(b"emb".to_vec()), &cli, None)
        .unwrap();
    let emb = e
        .dirs()
        .into_iter()
        .find(|(id, _)| *id != l.id && *id != k.id)
        .map(|(_, d)| d)
        .expect("the embryo's directory");
    assert_eq!((emb.uid, emb.gid), (1000, 1000), "the listener's side");
    assert_eq!(
        e.sockets.user_used(2000),
        2,
        "the client pays for its own and the embryo"
    );
    assert_eq!(e.sockets.user_used(1000), 1, "not the listener's owner");
    assert!(!emb.refs.live() && e.more_claim(emb.sock.id, &emb).is_none());
    let got = e.accept(&l, None).unwrap();
    assert_eq!(got.id, emb.sock.id);
    e.set_owner(got.id, 1000, 1000);
    assert_eq!(e.sockets.user_used(2000), 1, "accepted: the acceptor's");
    assert_eq!(e.sockets.user_used(1000), 2);
    assert!(
        e.first_claim(got.id).is_some(),
        "the accept's handle claims it"
    );
    assert!(e.dir(got.id).unwrap().refs.live());
    put_all(&e, &[&got, &k, &l]);
}

/// Who may open a socket now, as the captures ask it (`Engine::openers`):
/// its maker while it holds it, the user it was passed to once received,
/// never the maker once it let go; its close goes to the last holder.
#[test]
fn openers_follow_the_held_references() {
    let e = engine();
    let (ua, ub) = (user(1000), user(2000));
    let (a, b) = e.socketpair(SockType::Dgram, &ua);
    let x = e.try_socket(SockType::Stream, &ub).unwrap();
    let handle = e.first_claim(x.id).unwrap();
    assert_eq!(e.openers(&x), vec![2000], "its maker's");
    let h = pass_to(&e, &a, &b, &x, &ua);
    assert_eq!(e.openers(&x), vec![2000, 1000], "both hold it");
    e.release_claim(handle);
    e.put(&x);
    assert_eq!(e.openers(&x), vec![1000], "the maker let go");
    let d = e.dir(h).unwrap();
    let claim = e.more_claim(h, &d).unwrap();
    assert!(e.try_hold(&d.sock));
    e.adopt(h);
    e.release_claim(claim);
    assert!(e.openers(&x).is_empty(), "nobody may open it");
    assert_eq!(e.last_openers(&x), vec![1000], "who held it last");
    put_all(&e, &[&d.sock, &a, &b]);
    assert_eq!(e.live_sockets(), 0);
}
