#!/usr/bin/env bash
# Attacks on access by reference (reopening after a handoff, opening
# /proc/self/fd/N), on an --allow-other mount, by root, nobody (65534) and a second
# user (40001). A socket's directory opens only while its owner holds a claim on it
# (src/engine/access.rs); each attack prints what it tried and what it got, and the
# script fails if one gets through:
#  1. reopen after handoff: root passes x1 of a pair to nobody, nobody opens the
#     received entry, closes everything; root writes SECRET into x2; nobody opens the
#     entry again (and its ctl, msg, status; stats and lists it; passes it by number);
#     root reopens x1, which it passed away;
#  2. reopen of a socket created then passed away: nobody passes its own socket to
#     40001 and closes it, then reopens it; 40001 reopens it by its first number;
#  3. reopen of an embryo by the client's user (and by the listener's before accept);
#     the embryo's directory is the listener owner's;
#  4. reopen through /proc/self/fd/N of data, ctl and msg (Linux: ENXIO), also after
#     another thread, or the parent before a fork, looked the file up; through an
#     O_PATH descriptor of the file or of its directory kept past the close, and root
#     through /proc/PID/fd/N;
#  5. received entries past the receiver's share (--max-sockets 64, --user-share 50:
#     32) are closed at delivery (flags=ctrunc); room comes back once they go;
#  6. 40001 connects to nobody's listener until refused: the embryos are 40001's to
#     pay for, so nobody's own clone still works;
#  7. a process in a new network namespace reopens, through /proc/PID/fd/N, nobody's
#     open view of an abstract name of the host's namespace (a reopen does no lookup);
#  8. 40001 looks up a file of nobody's directory 100 times (lookups are kept per
#     directory, 64 at most): the kernel refuses them, nobody's open still works;
#  9. passing by number a socket of another user, and an embryo not yet accepted;
# 10. .udsfs/graph shows other users no sockets in flight; `udsfs ss -xa` as nobody
#     shows other users' states from .udsfs/unix;
# 11. 40001 sends nobody 320 sockets, which nobody reads from `data` (as recv with no
#     control buffer, that drops them): nobody's share of entries stays free for a
#     socket root passes it next;
# 12. callers outside the daemon's pid namespace (all tid 0, on a second daemon in a
#     new pid namespace): four threads opening one file at once must not take each
#     other's lookups; a reopen with no lookup still gets ENXIO; one in a new network
#     namespace must not reach the host namespace's abstract names (its namespace
#     cannot be read, so it finds none).
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other --max-sockets 64)
source "$(dirname "$0")/lib.sh"
export UDSFS_BIN

chmod o+x "$TMP" # mktemp -d made it 0700; other users must reach $MNT inside it

py "$(
    cat <<'EOF'
import subprocess
NOBODY, OTHER = 65534, 40001
CHECKS = 0
THROUGH = []

def die(msg):
    print(f"FAIL: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)

def attack(who, what, got, refused):
    """An attack must end in one of the errnos `refused`."""
    global CHECKS
    ok = got in refused
    through = got == "OK" or got == "listed" or got.startswith("opened")
    verdict = "refused" if ok else "GOT THROUGH" if through else "refused, wrong errno"
    print(f"attack by {who}: {what} -> {got} ({verdict}; want {' or '.join(refused)})",
          flush=True)
    # Every attack runs (so a run shows all that got through); the script
    # fails at the end.
    if not ok:
        THROUGH.append(f"{who}: {what}: {got}")
    CHECKS += 1

def holds(what, got, want):
    """A property the attacks rely on, counted and reported like one."""
    global CHECKS
    print(f"check: {what} -> {got!r} (want {want!r})", flush=True)
    if got != want:
        THROUGH.append(f"{what}: {got!r}, want {want!r}")
    CHECKS += 1

def expect(what, got, want):
    if got != want:
        die(f"{what}: got {got!r}, want {want!r}")
    print(f"ok: {what} = {want!r}", flush=True)

# Helpers, run by root and by the actors alike.
def reopen(path, flags=None):
    """Opens `path` (read-write, a status file read-only): its errno name,
    or what a read of it gave."""
    if flags is None:
        ro = path.endswith("/status")
        flags = (os.O_RDONLY if ro else os.O_RDWR) | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    try:
        try:
            data = os.read(fd, 100).decode(errors="replace")
        except OSError as e:
            data = errno.errorcode.get(e.errno, str(e.errno))
        return f"opened, read {data!r}"
    finally:
        os.close(fd)

def sock_file(n, f):
    return f"{U}/sock/{n}/{f}"

def listed(n):
    return str(n) in os.listdir(f"{U}/sock")

def stat_of(path):
    return err(os.stat, path)

nobody, other = Actor(NOBODY), Actor(OTHER)

# ---- 1. reopen after handoff
nobody.do("Lfd, L = clone('stream'); ctl(Lfd, 'bind a.sock'); ctl(Lfd, 'listen');"
          "os.chmod(M + '/a.sock', 0o777)")
pfd, x1, x2 = pair("stream")
x1d, x2d = opn(x1, "data"), opn(x2, "data")
cfd, C = clone("stream")
ctl(cfd, "connect a.sock")
cm = opn(C, "msg")
os.write(cm, f"len=1 rights={x1}\nx".encode())
nobody.do("afd = os.open(sock_file(L, 'accept'), os.O_RDWR); A = int(os.read(afd, 64));"
          "am = opn(A, 'msg'); h, _ = record(am); H = int(h['rights'])")
H = nobody.ev("H")
nobody.do("hd = opn(H, 'data')")
expect("nobody lists its entry while it holds it", nobody.ev("listed(H)"), True)
expect("nobody opens the entry again while it holds it",
       nobody.ev("reopen(sock_file(H, 'data'))"), "opened, read 'EAGAIN'")
nobody.do("[os.close(f) for f in (hd, am, afd, Lfd)]")
os.write(x2d, b"SECRET")
for f in ("data", "ctl", "msg", "status"):
    attack("nobody", f"reopen of the closed received entry {H}/{f} after SECRET was sent",
           nobody.ev(f"reopen(sock_file(H, {f!r}))"), ["ENOENT"])
attack("nobody", f"stat of {H}/", nobody.ev("stat_of(sock_file(H, ''))"), ["ENOENT"])
attack("nobody", f"stat of {H}/data", nobody.ev("stat_of(sock_file(H, 'data'))"), ["ENOENT"])
attack("nobody", f"listing .udsfs/sock for {H}",
       "listed" if nobody.ev("listed(H)") else "ENOENT", ["ENOENT"])
nobody.do("qf, qa, qb = pair('dgram'); qm = opn(qa, 'msg')")
attack("nobody", f"passing the closed entry {H} by number (rights={H})",
       nobody.ev(f"err(os.write, qm, b'len=1 rights={H}\\nz')"), ["EBADF"])
holds(f"the entry {H} is removed once nothing reaches it", os.path.exists(sock_file(H, "")), False)
os.write(x2d, b"AGAIN")
expect("root's own x1 handle still works (it holds x1)", os.read(x1d, 100)[-5:], b"AGAIN")

# ---- 2. a socket created, passed away and closed
other.do("Rfd, R = clone('dgram'); ctl(Rfd, 'bind b.sock'); os.chmod(M + '/b.sock', 0o777);"
         "rm = opn(R, 'msg')")
nobody.do("Pfd, P = clone('stream'); pd = opn(P, 'data'); Tfd, T = clone('dgram');"
          "tm = opn(T, 'msg'); os.write(tm, f'len=1 to=b.sock rights={P}\\ny'.encode());"
          "[os.close(f) for f in (pd, Pfd, tm, Tfd)]")
P = nobody.ev("P")
other.do("h, _ = record(rm); H2 = int(h['rights']); h2d = opn(H2, 'data')")
H2 = other.ev("H2")
zf, z1, z2 = pair("stream")
z1d = opn(z1, "data")
Sfd, S = clone("dgram")
sm = opn(S, "msg")
os.write(sm, f"len=1 to=b.sock rights={z1}\nz".encode())
os.close(z1d)
os.close(zf)
other.do("h, _ = record(rm); H3 = int(h['rights']); h3d = opn(H3, 'data')")
attack("root", f"reopen of {z1}/data, which root made, passed away and closed",
       reopen(sock_file(z1, "data")), ["EACCES"])
attack("root", f"passing {z1} again by number",
       err(os.write, sm, f"len=1 to=b.sock rights={z1}\nz".encode()), ["EBADF"])
for f in ("data", "ctl", "msg", "accept", "status"):
    attack("nobody", f"reopen of its own socket {P}/{f} after passing it away",
           nobody.ev(f"reopen(sock_file(P, {f!r}))"), ["ENOENT"])
attack("nobody", f"listing .udsfs/sock for {P}",
       "listed" if nobody.ev("listed(P)") else "ENOENT", ["ENOENT"])
attack("40001", f"reopen of {P}/data by the socket's first number",
       other.ev(f"reopen(sock_file({P}, 'data'))"), ["ENOENT"])

# ---- 3. embryos are the listener's side
nobody.do("ELfd, EL = clone('stream'); ctl(ELfd, 'bind e.sock'); ctl(ELfd, 'listen');"
          "os.chmod(M + '/e.sock', 0o777)")
before = set(os.listdir(f"{U}/sock"))
other.do("Kfd, K = clone('stream'); ctl(Kfd, 'connect e.sock'); kd = opn(K, 'data');"
         "os.write(kd, b'hi')")
K = other.ev("K")
new = set(os.listdir(f"{U}/sock")) - before - {str(K)}
expect("one embryo made by the connect", len(new), 1)
E = int(new.pop())
holds(f"the embryo {E}'s directory belongs to the listener's owner",
       os.stat(sock_file(E, "")).st_uid, NOBODY)
for f in ("data", "ctl", "msg", "status"):
    attack("40001", f"reopen of the embryo {E}/{f} (the client's user)",
           other.ev(f"reopen(sock_file({E}, {f!r}))"), ["ENOENT"])
attack("40001", f"stat of the embryo {E}/", other.ev(f"stat_of(sock_file({E}, ''))"), ["ENOENT"])
attack("40001", f"listing .udsfs/sock for the embryo {E}",
       "listed" if other.ev(f"listed({E})") else "ENOENT", ["ENOENT"])
attack("nobody", f"open of the embryo {E}/data before accept (no reference yet)",
       nobody.ev(f"reopen(sock_file({E}, 'data'))"), ["ENOENT"])
nobody.do("eafd = os.open(sock_file(EL, 'accept'), os.O_RDWR); EA = int(os.read(eafd, 64))")
expect("the accept gives the embryo", nobody.ev("EA"), E)
holds("nobody reads the accepted connection", nobody.ev(f"reopen(sock_file({E}, 'data'))"),
       "opened, read 'hi'")
attack("40001", f"open of the accepted {E}/data", other.ev(f"reopen(sock_file({E}, 'data'))"),
       ["EACCES", "ENOENT"])

# ---- 4. reopen through /proc
nobody.do("gf, g1, g2 = pair('stream'); g1d = opn(g1, 'data'); g1c = opn(g1, 'ctl');"
          "g1m = opn(g1, 'msg'); g2d = opn(g2, 'data'); os.close(gf)")
for f, var in (("data", "g1d"), ("ctl", "g1c"), ("msg", "g1m")):
    attack("nobody", f"open of /proc/self/fd/N of an open {f} file",
           nobody.ev(f"reopen(f'/proc/self/fd/{{{var}}}')"), ["ENXIO"])
expect("nobody opens the same file by its path", nobody.ev("reopen(sock_file(g1, 'data'))"),
       "opened, read 'EAGAIN'")
# A lookup by one thread (or by the parent before a fork) is no lookup by another.
nobody.do("st = threading.Thread(target=os.stat, args=(sock_file(g1, 'data'),));"
          "st.start(); st.join()")
attack("nobody", "open of /proc/self/fd/N of a data file another thread just looked up",
       nobody.ev("reopen(f'/proc/self/fd/{g1d}')"), ["ENXIO"])
nobody.do("os.stat(sock_file(g1, 'ctl')); fr, fw = os.pipe(); kid = os.fork()\n"
          "if kid == 0:\n"
          "    os.write(fw, reopen(f'/proc/self/fd/{g1c}').encode()); os._exit(0)\n"
          "os.waitpid(kid, 0); forked = os.read(fr, 100).decode(); os.close(fr); os.close(fw)")
attack("nobody", "open of /proc/self/fd/N of a ctl file by a child forked after the lookup",
       nobody.ev("forked"), ["ENXIO"])
g1d = nobody.ev("g1d")
attack("root", f"open of /proc/{nobody.pid}/fd/{g1d} (nobody's data file)",
       reopen(f"/proc/{nobody.pid}/fd/{g1d}"), ["ENXIO"])
# g2 lives on at 40001's; nobody keeps only O_PATH descriptors of it.
other.do("Ofd, O = clone('dgram'); ctl(Ofd, 'bind o.sock'); os.chmod(M + '/o.sock', 0o777);"
         "om = opn(O, 'msg')")
nobody.do("op = os.open(sock_file(g2, 'data'), os.O_PATH);"
          "od = os.open(sock_file(g2, ''), os.O_PATH | os.O_DIRECTORY);"
          "wfd, W = clone('dgram'); wm = opn(W, 'msg');"
          "os.write(wm, f'len=1 to=o.sock rights={g2}\\ng'.encode());"
          "[os.close(f) for f in (wm, wfd, g2d)]")
other.do("h, _ = record(om); H4 = int(h['rights']); h4d = opn(H4, 'data')")
attack("nobody", "open of /proc/self/fd/N of an O_PATH descriptor kept past the close",
       nobody.ev("reopen(f'/proc/self/fd/{op}')"), ["ENOENT", "ENXIO"])
attack("nobody", "openat(data) in the socket's directory, held by an O_PATH descriptor",
       nobody.ev("err(lambda: os.open('data', os.O_RDWR, dir_fd=od))"), ["ENOENT"])

# ---- 5. received entries count against the receiver's share
nobody.do("Vfd, V = clone('dgram'); ctl(Vfd, 'bind v.sock'); os.chmod(M + '/v.sock', 0o777);"
          "vm = opn(V, 'msg')")
yf, y1, y2 = pair("stream")
tfd, T2 = clone("dgram")
tm = opn(T2, "msg")
rights = ",".join([str(y1)] * 40)
os.write(tm, f"len=1 to=v.sock rights={rights}\nw".encode())
os.write(tm, f"len=1 to=v.sock rights={rights}\nw".encode())
nobody.do("h1, _ = record(vm); n1 = len(h1.get('rights', '').split(',')) if 'rights' in h1 else 0")
n1, h1 = nobody.ev("n1"), nobody.ev("h1")
attack("nobody", "taking 40 received entries at once (share: 32)",
       f"{n1} entries, {h1.get('flags', 'no flags')}" if n1 > 32 else "ctrunc",
       ["ctrunc"])
holds("the record says entries were dropped", h1.get("flags"), "ctrunc")
nobody.do("[os.close(opn(int(i), 'data')) for i in h1['rights'].split(',')]")
# The kernel sends each release a moment after close() returns: wait (5 s at most)
# until the entries are gone before counting the room they left.
nobody.do("import time; t0 = time.time()\n"
          "while any(os.path.exists(f'{U}/sock/{i}') for i in h1['rights'].split(',')) "
          "and time.time() - t0 < 5: time.sleep(0.01)")
nobody.do("h2, _ = record(vm); n2 = len(h2['rights'].split(','))")
holds("room comes back once the entries were opened and closed", nobody.ev("n2"), n1)

# ---- 6. connecting cannot spend the listener owner's share of sockets
# (an embryo is the client's to pay for until it is accepted)
expect("sockets alive before the flood leave room for both shares",
       int(dict(l.split("=") for l in open(f"{U}/gc").read().split())["sockets"]) <= 30, True)
nobody.do("FLfd, FL = clone('stream'); ctl(FLfd, 'bind f.sock'); ctl(FLfd, 'listen 100');"
          "os.chmod(M + '/f.sock', 0o777)")
other.do("fl, fl_err = [], 'none'\n"
         "for i in range(40):\n"
         "    try: fl.append(os.open(M + '/.udsfs/connect/f.sock', os.O_RDWR | os.O_NONBLOCK))\n"
         "    except OSError as e: fl_err = errno.errorcode[e.errno]; break")
print(f"40001 made {other.ev('len(fl)')} connections to nobody's f.sock, then "
      f"{other.ev('fl_err')}", flush=True)
own = nobody.ev("err(clone, 'stream')")
print(f"nobody's own clone after them: {own}", flush=True)
attack("40001", "spending nobody's share of sockets by connecting to its listener",
       "OK" if own == "ENFILE" else "refused", ["refused"])
other.do("[os.close(f) for f in fl]")
nobody.do("os.close(FLfd)")

# ---- 7. an abstract view reopened through /proc from another network namespace
nobody.do("ABfd, AB = clone('stream'); ctl(ABfd, 'bind @adv_abs'); ctl(ABfd, 'listen');"
          "abv = os.open(U + '/abstract/adv_abs', os.O_RDWR)")
path = f"/proc/{nobody.pid}/fd/{nobody.ev('abv')}"
probe = ("import errno, os, sys\n"
         "try: os.close(os.open(sys.argv[1], os.O_RDWR)); print('opened')\n"
         "except OSError as e: print(errno.errorcode[e.errno])")
got = subprocess.run(["unshare", "-n", "python3", "-c", probe, path],
                     capture_output=True, text=True).stdout.strip()
attack("root in a new netns", f"open of {path} (nobody's @adv_abs view, the host's netns)",
       got, ["ECONNREFUSED"])
holds("the listener saw no connection from the other namespace",
      nobody.ev("int(dict(l.split('=', 1) for l in open(sock_file(AB, 'status')).read()"
                ".splitlines())['pending'])"), 1)
nobody.do("os.close(abv); os.close(ABfd)")

# ---- 8. lookups in another user's directory never reach the daemon
nobody.do("LKf, LK, LK2 = pair('stream')")
LK = nobody.ev("LK")
other.do(f"lk = [err(os.stat, sock_file({LK}, 'data')) for i in range(100)]")
attack("40001", f"100 lookups of nobody's {LK}/data (to crowd out nobody's)",
       ",".join(sorted(set(other.ev("lk")))), ["EACCES"])
holds("nobody still opens its own file", nobody.ev(f"reopen(sock_file({LK}, 'data'))"),
      "opened, read 'EAGAIN'")

# ---- 9. passing by number what one does not hold
other.do("PNf, PNa, PNb = pair('dgram'); pnm = opn(PNa, 'msg')")
attack("40001", f"passing nobody's socket {LK} by number",
       other.ev(f"err(os.write, pnm, b'len=1 rights={LK}\\nz')"), ["EACCES"])
nobody.do("EBfd, EB = clone('stream'); ctl(EBfd, 'bind eb.sock'); ctl(EBfd, 'listen');"
          "os.chmod(M + '/eb.sock', 0o777); ebm_f, ebm, _ = pair('dgram'); ebmm = opn(ebm, 'msg')")
before = set(os.listdir(f"{U}/sock"))
other.do("EBc = os.open(M + '/.udsfs/connect/eb.sock', os.O_RDWR)")
emb = [int(n) for n in set(os.listdir(f"{U}/sock")) - before
       if os.stat(sock_file(n, "")).st_uid == NOBODY]
for n in emb:
    attack("nobody", f"passing {n} (an embryo on its listener, not accepted) by number",
           nobody.ev(f"err(os.write, ebmm, b'len=1 rights={n}\\nz')"), ["EBADF", "EACCES"])
nobody.do("[os.close(f) for f in (EBfd, ebmm, ebm_f, LKf)]")
other.do("[os.close(f) for f in (EBc, pnm, PNf)]")

# ---- 10. what the listings tell another user
gf, g1, g2 = pair("dgram")
g1m = opn(g1, "msg")
jf, j1, j2 = pair("stream")
os.write(g1m, f"len=1 rights={j1}\nq".encode())  # j1 waits in g2's queue
graph = nobody.ev("open(U + '/graph').read()")
attack("nobody", "reading in .udsfs/graph which socket is in flight where (Linux shows no user)",
       "OK" if "in queue of" in graph or "in flight" in graph else "not shown", ["not shown"])
holds("root's graph shows it", "in queue of" in open(f"{U}/graph").read(), True)
ss = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                     os.environ["UDSFS_BIN"], "ss", "-xa", M], capture_output=True, text=True)
rows = {l.split()[5]: l.split()[1] for l in ss.stdout.splitlines()[1:] if len(l.split()) > 5}
holds("nobody's `udsfs ss -xa` shows root's pair end as ESTAB, as ss -x shows any user",
      rows.get(str(j2)), "ESTAB")
for f in (g1m, gf, jf):
    os.close(f)

# ---- 11. another user's share of received entries: a reader of `data` takes none
nobody.do("os.close(vm); os.close(Vfd)")  # gives back §5's entries
nobody.do("Wfd, W = clone('dgram'); ctl(Wfd, 'bind w.sock'); os.chmod(M + '/w.sock', 0o777);"
          "wd = opn(W, 'data', os.O_RDWR | os.O_NONBLOCK); wm = opn(W, 'msg')")
other.do("Xf, X1, X2 = pair('stream'); Sf, S1 = clone('dgram'); sm1 = opn(S1, 'msg');"
         "sent = sum(err(os.write, sm1, f'len=1 to=w.sock rights={\",\".join([str(X1)] * 40)}\\nf'"
         ".encode()) == 'OK' for _ in range(8))")
nobody.do("got_data = [err(os.read, wd, 100) for _ in range(8)]")
print(f"40001 sent {other.ev('sent')} records of 40 sockets each; nobody read them from data",
      flush=True)
other.do("[os.close(f) for f in (sm1, Sf, Xf)]")
rf, r1, r2 = pair("stream")
os.write(tm, f"len=1 to=w.sock rights={r1}\nr".encode())
nobody.do("hw, _ = record(wm)")
attack("40001", "filling nobody's share of received entries (nobody reads data only)",
       "OK" if "rights" not in nobody.ev("hw") else "refused", ["refused"])
nobody.do("[os.close(f) for f in (wd, wm, Wfd)]")
os.close(rf)

if THROUGH:
    die(f"{len(THROUGH)} of {CHECKS} attacks got through:\n  " + "\n  ".join(THROUGH))
print(f"ok: {CHECKS} attacks, all refused", flush=True)
EOF
)"

# ---- 12. callers outside the daemon's pid namespace (FUSE gives them pid 0, so
# they cannot be told apart): a second daemon in a new pid namespace, where every
# caller of this script arrives as tid 0.
MNT0=$TMP/mnt0
mkdir "$MNT0"
chmod o+x "$MNT0"
setsid unshare -p -f "$UDSFS_BIN" mount --allow-other --log-file "$TMP/log0" "$MNT0" </dev/null &
NS_JOB=$!
_adv_cleanup() {
    local rc=$?
    mounted "$MNT0" && umount "$MNT0" 2>/dev/null
    ended_within "$NS_JOB" 3000 || kill -KILL "$NS_JOB" 2>/dev/null
    (exit "$rc")
    _lib_cleanup
}
trap _adv_cleanup EXIT
for _ in $(seq 300); do
    [ -d "$MNT0/.udsfs" ] && break
    sleep 0.01
done
[ -d "$MNT0/.udsfs" ] || fail "the daemon in a new pid namespace did not mount $MNT0"

MNT=$MNT0 U=$MNT0/.udsfs py "$(
    cat <<'EOF'
import subprocess
THROUGH = []
def attack(who, what, got, refused):
    ok = got in refused
    print(f"attack by {who}: {what} -> {got} ({'refused' if ok else 'GOT THROUGH'};"
          f" want {' or '.join(refused)})", flush=True)
    if not ok:
        THROUGH.append(f"{who}: {what}: {got}")

fd = os.open(f"{U}/stream/pair", os.O_RDWR)
a, b = map(int, os.read(fd, 64).split())
ad = os.open(f"{U}/sock/{a}/data", os.O_RDWR | os.O_NONBLOCK)
fails = []
def opener():
    for _ in range(100):
        try:
            os.close(os.open(f"{U}/sock/{a}/data", os.O_RDWR | os.O_NONBLOCK))
        except OSError as e:
            fails.append(errno.errorcode[e.errno])
ts = [threading.Thread(target=opener) for _ in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
attack("4 threads (tid 0)", f"making each other's opens of {a}/data fail (400 opens)",
       f"{len(fails)} failed {sorted(set(fails))}" if fails else "all opened", ["all opened"])
attack("root (tid 0)", f"open of /proc/self/fd/{ad} without a lookup",
       err(os.open, f"/proc/self/fd/{ad}", os.O_RDWR), ["ENXIO"])

lfd = os.open(f"{U}/stream/clone", os.O_RDWR)
os.write(lfd, b"bind @adv_ns0\n")
os.write(lfd, b"listen\n")
probe = ("import errno, os, sys\n"
         "def e(f, *a):\n"
         "    try: f(*a); return 'OK'\n"
         "    except OSError as x: return errno.errorcode[x.errno]\n"
         "c = os.open(sys.argv[1] + '/stream/clone', os.O_RDWR)\n"
         "print(e(os.stat, sys.argv[1] + '/abstract/adv_ns0'),"
         " e(os.open, sys.argv[1] + '/abstract/adv_ns0', os.O_RDWR),"
         " e(os.write, c, b'connect @adv_ns0\\n'))")
got = subprocess.run(["unshare", "-n", "python3", "-c", probe, U],
                     capture_output=True, text=True)
attack("root in a new netns (tid 0)", "lookup, view open and ctl connect of @adv_ns0 of the"
       " host's netns", got.stdout.strip() or got.stderr.strip(),
       ["ENOENT ENOENT ECONNREFUSED"])
if THROUGH:
    print(f"FAIL: {len(THROUGH)} attacks got through:\n  " + "\n  ".join(THROUGH),
          file=sys.stderr)
    sys.exit(1)
print("ok: callers outside the daemon's pid namespace", flush=True)
EOF
)"
