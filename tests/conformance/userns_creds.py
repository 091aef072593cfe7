"""Credentials across user namespaces: a process as uid 65534 in a user namespace of
its own (`unshare -U -r`: uid_map and gid_map "0 65534 1", a full CapEff there) talks
to a root process in the initial one. Linux maps ids through the sender's namespace
(SCM_CREDENTIALS: uid 0 claimed in the namespace is 65534 outside, an unmapped claim
is EINVAL) and into the receiver's (SO_PEERCRED and received SCM_CREDENTIALS: an id
with no mapping there is the overflow id 65534); capabilities count only in the
namespace they are held in (another pid: EPERM; SO_*BUFFORCE need CAP_NET_ADMIN in
the initial namespace: EPERM). Run once on kernel sockets and once through `udsfs
run` (integration/adversarial_userns.sh); the outputs must be equal. Needs root,
setpriv and unshare (util-linux). Usage: userns_creds.py DIR (unused: every name here
is abstract)."""

import os
import socket
import struct
import subprocess
import sys

from differential import res, say, where

UCRED = "iII"
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)


def creds_msg(pid, uid, gid):
    return [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack(UCRED, pid, uid, gid))]


def recv_creds(s):
    """One datagram's payload and its SCM_CREDENTIALS (pid, uid, gid), or None."""
    data, anc, _, _ = s.recvmsg(256, socket.CMSG_SPACE(struct.calcsize(UCRED)))
    for level, ty, body in anc:
        if level == socket.SOL_SOCKET and ty == socket.SCM_CREDENTIALS:
            return data.decode(), struct.unpack(UCRED, body[:12])
    return data.decode(), None


def peercred(s):
    return struct.unpack(UCRED, s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))


def show(who, c, pid):
    """Creds with the pid as "the expected one" or not (pids differ run to run)."""
    if c is None:
        return "no creds"
    p, uid, gid = c
    return f"pid {'is ' + who if p == pid else '%d, not %s' % (p, who)} uid {uid} gid {gid}"


def receiver(name):
    """A datagram socket with SO_PASSCRED bound at the abstract `name`, its receives
    given up after 10 s."""
    r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    r.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    r.bind(f"\0{name}")
    r.settimeout(10)
    return r


def child(tag, parent_pid):
    """As uid 65534 in a user namespace of its own."""
    me = os.getpid()
    say("child: ids in its namespace:", os.getuid(), os.getgid(), os.geteuid())
    with open("/proc/self/uid_map") as f:
        say("child: uid_map:", " ".join(f.read().split()))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    to = f"\0{tag}-R"
    say("child: implicit send:", res(lambda: s.sendto(b"implicit", to) and None))
    tries = [
        ("own pid, uid 0, gid 0", (me, 0, 0)),
        ("uid 1000 (unmapped)", (me, 1000, 0)),
        ("gid 1000 (unmapped)", (me, 0, 1000)),
        ("uid -1", (me, 0xFFFFFFFF, 0)),
        ("pid 1", (1, 0, 0)),
        ("the parent's pid", (parent_pid, 0, 0)),
    ]
    for what, c in tries:
        r = res(lambda: s.sendmsg([what.encode()], creds_msg(*c), 0, to) and None)
        say(f"child: send claiming {what}:", r)
    for name, opt in (("SO_RCVBUFFORCE", SO_RCVBUFFORCE), ("SO_SNDBUFFORCE", SO_SNDBUFFORCE)):
        say(f"child: {name}:", res(lambda: s.setsockopt(socket.SOL_SOCKET, opt, 65536)))
    say("child: SO_SNDBUF:", res(lambda: s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)))
    # A receiver in the namespace: the parent's message comes to it.
    c = receiver(f"{tag}-C")
    st = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    st.connect(f"\0{tag}-L")
    say("child: SO_PEERCRED of root's listener:", show("the parent's", peercred(st), parent_pid))
    for _ in range(3):
        data, got = recv_creds(c)
        say(f"child: received {data!r}:", show("the parent's", got, parent_pid))
    # Its own socketpair: its ids come back as it knows them.
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    a.send(b"self")
    say("child: own socketpair, implicit:", show("its own", recv_creds(b)[1], me))
    a.sendmsg([b"self0"], creds_msg(me, 0, 0))
    say("child: own socketpair, claiming uid 0:", show("its own", recv_creds(b)[1], me))
    say("child: own socketpair SO_PEERCRED:", show("its own", peercred(a), me))
    st.close()


def parent():
    tag = f"userns-{os.getpid()}"
    r = receiver(f"{tag}-R")
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(f"\0{tag}-L")
    lst.listen()
    lst.settimeout(10)
    say("root: SO_RCVBUFFORCE:", res(lambda: r.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 65536)))
    # An interpreter uid 65534 may run (one under /root may not be).
    py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
           "unshare", "-U", "-r", py, __file__, "child", tag, str(os.getpid())]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    # What the child sends: the implicit one, its own claim and the claim of the
    # parent's pid, which must not arrive (every other claim fails).
    for _ in range(2):
        data, got = recv_creds(r)
        say(f"root: received {data!r}:", show("the child's", got, p.pid))
    conn, _ = lst.accept()
    say("root: SO_PEERCRED of the child's connection:", show("the child's", peercred(conn), p.pid))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b"root-implicit", f"\0{tag}-C")
    s.sendmsg([b"root-claims-1000"], creds_msg(os.getpid(), 1000, 1000), 0, f"\0{tag}-C")
    s.sendmsg([b"root-claims-65534"], creds_msg(os.getpid(), 65534, 65534), 0, f"\0{tag}-C")
    out, _ = p.communicate(timeout=30)
    print(out, end="", flush=True)
    say("child exit status:", p.returncode)
    r.setblocking(False)
    say("root: anything more queued:", res(lambda: recv_creds(r)))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2], int(sys.argv[3]))
    else:
        where()
        parent()
        say("done")
