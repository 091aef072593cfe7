#!/usr/bin/env bash
# accept after the process dropped its uid (issue 29): a server listens as root and its
# worker, now nobody, accepts on the listener it inherited (php-fpm's pool, nginx's
# workers). On Linux the descriptor is all accept needs; through udsfs the listener's own
# `accept` file is root's, so the library's open of it gave EACCES. Now accept asks a
# ticket on the listener's descriptor and opens `.udsfs/accept/TICKET`
# (src/engine/tickets.rs, calls/src/accept.rs).
#
# 1. tests/conformance/accept_setuid.py on kernel sockets, through `udsfs run` (the
#    library) and `udsfs run --front seccomp` (the supervisor): equal outputs; and a
#    static C program (integration/c/accept_setuid.c) on the kernel and through udsfs.
# 2. Attacks on tickets, on the mount's files with the raw ioctl: another user with the
#    ticket's number, a forked child of its holder, a replay, guessed numbers, the
#    directory listed, a ticket for a socket that is not listening, 60,000 requests.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
chmod o+x "$TMP" # mktemp -d made it 0700; nobody must reach $MNT inside it
kernel_vs_fronts "$ROOT/tests/conformance/accept_setuid.py"

# 1b. The same in a static C program (integration/c/accept_setuid.c), which only the
# supervisor carries: kernel and udsfs run give the same lines.
need_cmd gcc gcc
gcc -static -O2 -o "$TMP/accept_setuid" "$ROOT/integration/c/accept_setuid.c" ||
    fail "gcc -static accept_setuid.c failed"
mkdir "$TMP/kc" "$MNT/static"
kc=$(timeout 30 "$TMP/accept_setuid" "$TMP/kc/s.sock" 2>&1) || fail "the static program fails on kernel sockets: $kc"
uc=$(UDSFS_PRELOAD=$PRELOAD_LIB timeout 60 "$UDSFS_BIN" run --mount "$MNT" -- \
    "$TMP/accept_setuid" "$MNT/static/s.sock" 2>&1) || fail "the static program fails through udsfs run: $uc"
printf '%s\n' "$uc"
grep -qx 'where: kernel' <<<"$kc" || fail "the kernel run's listener was not a kernel socket"
grep -qx 'where: udsfs' <<<"$uc" || fail "the static program's listener was not a udsfs socket"
expect_eq "the static program through udsfs run (the supervisor)" "$(grep -v '^where: ' <<<"$uc")" \
    "$(grep -v '^where: ' <<<"$kc")"

# 2. The attacks. The ticket ioctl by hand: UDSFS_IOC_CTL with op AcceptTicket (41).
out=$(py '
import random, socket, struct
NOBODY = 65534
CTL_SIZE = 496
IOC_CTL = (3 << 30) | (CTL_SIZE << 16) | (ord("U") << 8) | 1
OP_TICKET = 41

def ticket(fd):
    buf = bytearray(CTL_SIZE)
    struct.pack_into("=Ii", buf, 0, OP_TICKET, 0)
    fcntl.ioctl(fd, IOC_CTL, buf)
    return "%016x" % struct.unpack_from("=Q", buf, 16)[0]

def opened(path, flags=os.O_RDONLY | os.O_NONBLOCK):
    """The accepted socket number, or the errno name."""
    try:
        fd = os.open(path, flags)
    except OSError as e:
        return errno.errorcode[e.errno]
    n = os.read(fd, 64).split()[0].decode()
    os.close(fd)
    return "socket " + n

def in_child(fn, uid=None):
    """fn() in a forked child (as uid): its answer."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        if uid is not None:
            os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
        try:
            a = fn()
        except Exception as e:
            a = repr(e)
        os.write(w, str(a).encode())
        os._exit(0)
    os.close(w)
    a = os.read(r, 4096).decode()
    os.waitpid(pid, 0)
    return a

lfd, l = listening("@ticket-attacks", 64)
ldata = opn(l, "data")
cfd, c = clone("stream")
ctl(cfd, "connect @ticket-attacks")
t = ticket(ldata)
path = f"{U}/accept/{t}"
print("a ticket for root, one connection queued")
print("another user with its number:", in_child(lambda: opened(path), NOBODY))
print("a forked child of its holder:", in_child(lambda: opened(path)))
print("listed by root:", sorted(os.listdir(f"{U}/accept")))
print("listed by nobody:", in_child(lambda: err(os.listdir, f"{U}/accept"), NOBODY))
print("its holder, after those:", opened(path).split()[0])
print("its holder again (a replay):", opened(path))
t2 = ticket(ldata)
misses = sum(opened(f"{U}/accept/{random.getrandbits(64):016x}") == "ENOENT" for _ in range(2000))
print("2000 guessed numbers by the holder: ENOENT for", misses)
t3 = ticket(ldata)
print("other spellings of a ticket:", {opened(f"{U}/accept/{t3.upper()}"), opened(f"{U}/accept/00{t3}")})
print("the ticket itself, no connection queued:", opened(f"{U}/accept/{t3}"))
ufd, un = clone("stream")
print("a ticket for an unbound socket:", err(ticket, opn(un, "data")))
dfd, dn = clone("dgram")
print("a ticket for a dgram socket:", err(ticket, opn(dn, "data")))
first = ticket(ldata)
for _ in range(60000):
    last = ticket(ldata)
print("60,000 requests by one thread; the first:", opened(f"{U}/accept/{first}"))
c2fd, c2 = clone("stream")
ctl(c2fd, "connect @ticket-attacks")
print("the last:", opened(f"{U}/accept/{last}").split()[0])
')
printf '%s\n' "$out"
want='a ticket for root, one connection queued
another user with its number: ENOENT
a forked child of its holder: ENOENT
listed by root: []
listed by nobody: EACCES
its holder, after those: socket
its holder again (a replay): ENOENT
2000 guessed numbers by the holder: ENOENT for 2000
other spellings of a ticket: {'"'ENOENT'"'}
the ticket itself, no connection queued: EAGAIN
a ticket for an unbound socket: EINVAL
a ticket for a dgram socket: ENOTSUP
60,000 requests by one thread; the first: ENOENT
the last: socket'
expect_eq "the attacks on tickets" "$out" "$want"
grep -q "panicked" "$LOG" && fail "the daemon panicked: $(grep -m3 panicked "$LOG")"
ok "tickets: only their holder's thread opens them, once; 60,000 requests leave one"
