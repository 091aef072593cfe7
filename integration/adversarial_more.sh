#!/usr/bin/env bash
# adversarial_more.sh: a user B of an --allow-other mount making the daemon hold memory
# it does not count, through what every user may do to its own sockets:
#  1. slicer pieces (src/engine/msgpath/enqueue.rs): a `fault slicer average_size=1` on B's
#     own stream pair cuts each chunk of a send (up to 36544 bytes) into one queued
#     message per byte, about 200 bytes of the daemon's memory each, while the sender
#     was charged one chunk's truesize: B's 8 pairs filled to EAGAIN made the daemon
#     hold some 400 MB for 1.8 MB of data. Each piece is now charged as an sk_buff of
#     its own (256 bytes), so SO_SNDBUF and --max-queued-bytes (here 67108864: B's
#     share 32 MiB) bound them: B's fills end with ENOBUFS and the daemon grows by
#     less than 48 MB; every byte still arrives, in order, one piece per read.
#  2. the listing of .udsfs/sock (src/fuse/readdir.rs): every user sees every socket
#     there, and each readdir chunk (some 128 entries) used to copy and sort the whole
#     socket table, so a listing cost the square of the sockets: B holding 38000
#     sockets (19000 pairs) made one `ls` of A's cost the daemon over a second of CPU
#     (a user may hold half of --max-sockets, 524288: minutes per `ls`, on as many
#     workers as listers). A chunk now looks at the sockets it returns only: A's
#     listing shows all 38000 and costs the daemon less than 0.4 s of CPU.
#  3. the listing of .udsfs/abstract (src/fuse/readdir.rs) the same way: each chunk
#     (some 34 names of 100 bytes) gathered, escaped and sorted every name bound, so
#     B's 19000 names made one `ls` of A's cost the daemon over 5 s of CPU. An open
#     listing now gathers them once, at its first chunk, and keeps them, charged to
#     its opener as an open listing's text is (--max-held-bytes): A's listing shows
#     all 19000 for less than 0.4 s of the daemon's CPU.
#  4. open tree directories (src/fuse/readdir.rs): each chunk of a listing handed out
#     up to 1024 entries and its open handle kept every one's name until the next
#     chunk, though a reply (one page) takes a dozen 255-byte names: B's 2000 handles
#     on a directory of 1024 such names, each read once with getdents64, made the
#     daemon hold 680 MB. A chunk now holds what one page of dirents takes: the
#     daemon grows by less than 48 MB, and a whole listing still shows every name.
#  5. records read in pieces (src/fuse/files.rs MsgReader): a read of a `msg` file
#     takes a whole record (a stream's: all that is queued, up to 1 MiB) out of the
#     queue, and the handle keeps what is not read yet, uncounted: B's 1000 handles on
#     its own pair, each reading 1 byte of a record of 1 MiB, made the daemon hold
#     1 GB. What a handle keeps now counts as an open listing's text (on
#     --max-held-bytes 67108864: B's share 32 MiB): past it a read that needs a new
#     record fails with ENOMEM (recvmsg's errno when it cannot allocate), nothing
#     taken from the queue; reading a record to its end makes room again, bytes intact.
#  6. odd abstract names (src/fuse/readdir.rs): B binding @a/b, the empty name @ or a
#     name of 107 bytes 0xff made every user's listing of .udsfs/abstract fail with
#     EIO (a directory entry may not hold '/', be empty or pass 255 bytes). A name is
#     now listed with '/' (and a name that is `.` or `..`) as \xHH, which a lookup
#     takes back; one that cannot be listed is left out with a log line: A's listing
#     works, shows A's name and B's `a\x2fb`, and that entry stats.
UDSFS_MOUNT_ARGS=(--allow-other --max-queued-bytes 67108864 --max-held-bytes 67108864)
A=62001
source "$(dirname "$0")/lib.sh"

[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
B=62002
chmod o+x "$TMP" # mktemp -d made it 0700; other users must reach $MNT inside it
OUT=$TMP/out
mkdir -m 1777 "$OUT"
alive() { kill -0 "$DAEMON_PID" 2>/dev/null || fail "the daemon died ($1)"; }
rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$DAEMON_PID/status"; }

# 1. Slicer pieces.
with_helpers "$TMP/slice_fill.py" <<'PY'
# slice_fill.py MOST DONE: stream pairs, each with `fault slicer average_size=1`, filled
# with non-blocking 65536-byte writes to EAGAIN until a write fails otherwise or MOST
# pairs are full; prints that errno, the pairs and the bytes written, makes DONE.held,
# waits for DONE, then reads the first pair back and prints "intact" and the largest
# read (one piece: 1 byte) if every byte came back in order.
pairs, why = [], None
while why is None and len(pairs) < int(sys.argv[1]):
    fd, a, b = pair("stream")
    ctl(fd, "fault slicer average_size=1")
    w = os.open(f"{U}/sock/{a}/data", os.O_WRONLY | os.O_NONBLOCK)
    r = os.open(f"{U}/sock/{b}/data", os.O_RDONLY | os.O_NONBLOCK)
    sent, why = fill_bytes(w, bytes(range(256)) * 256)
    pairs.append((fd, w, r, sent))
print(why or "none", len(pairs), sum(p[3] for p in pairs), flush=True)
hold(sys.argv[2])
fd, w, r, sent = pairs[0]
got, most = bytearray(), 0
while len(got) < sent:
    try:
        piece = os.read(r, 65536)
    except BlockingIOError:
        time.sleep(0.001)
        continue
    most = max(most, len(piece))
    got += piece
want = (bytes(range(256)) * 256 * (sent // 65536 + 1))[:sent]
print("intact" if bytes(got) == want else f"{len(got)} of {sent}, differing", most)
PY
chmod 644 "$TMP"/*.py
before=$(rss_kb)
as_uid $B timeout 300 /usr/bin/python3 "$TMP/slice_fill.py" 8 "$OUT/slice" >"$OUT/slice_b" &
FILLER=$!
wait_for "$OUT/slice.held" 30 "B's sliced fills did not end" "$OUT/slice_b"
after=$(rss_kb)
read -r why pairs total <"$OUT/slice_b"
grown=$(((after - before) / 1024))
say "B filled $pairs sliced pairs with $total bytes ($why); the daemon grew by $grown MB (VmRSS $before kB -> $after kB)"
[ "$grown" -lt 48 ] || fail "B's $total sliced bytes made the daemon hold $grown MB more (its share of queued bytes: 32 MiB)"
ok "B's sliced sends: the daemon grew by $grown MB"
expect_eq "B's sliced fills end with" "$why" "ENOBUFS"
let_go "$OUT/slice" "$FILLER" "B's sliced filler failed" "$OUT/slice_b"
expect_eq "B reads its first sliced pair back (bytes, largest read)" "$(tail -1 "$OUT/slice_b")" "intact 1"
alive "slicer pieces"
ok "slicer pieces: counted as the sender's queued memory"

# b_holds NOFILE TAG WHAT SCRIPT [ARGS...]: user B runs SCRIPT ARGS... $OUT/TAG in the
# background (HOLDER; at most NOFILE descriptors; its output in $OUT/TAG_b) and it must
# hold WHAT (it makes $OUT/TAG.held) within 120 s; let_go "$OUT/TAG" ends it.
b_holds() {
    local nofile=$1 tag=$2 what=$3
    shift 3
    prlimit --nofile="$nofile:$nofile" -- setpriv --reuid=$B --regid=$B --clear-groups \
        timeout 300 /usr/bin/python3 "$@" "$OUT/$tag" >"$OUT/${tag}_b" 2>&1 &
    HOLDER=$!
    wait_for "$OUT/$tag.held" 120 "B did not get to hold $what" "$OUT/${tag}_b"
}

# 2. The listing of .udsfs/sock.
with_helpers "$TMP/hold_pairs.py" <<'PY'
# hold_pairs.py N DONE: holds N stream pairs (2N sockets), makes DONE.held, waits for DONE.
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]) + 64,) * 2)
fds = [os.open(f"{U}/stream/pair", os.O_RDWR) for _ in range(int(sys.argv[1]))]
hold(sys.argv[2])
PY
chmod 644 "$TMP/hold_pairs.py"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$DAEMON_PID/stat"; }
# a_lists DIR PATTERN WHAT: user A lists .udsfs/DIR once; `listed` is set to the entries
# that match PATTERN (WHAT: what they are); that listing may cost the daemon 400 ms of
# CPU at the most.
a_lists() {
    local t0 t1 cpu_ms
    t0=$(cpu_ticks)
    listed=$(as_uid $A ls -f "$U/$1" | grep -c "$2")
    t1=$(cpu_ticks)
    cpu_ms=$(((t1 - t0) * 1000 / $(getconf CLK_TCK)))
    say "A's listing of .udsfs/$1: $listed $3, $cpu_ms ms of the daemon's CPU"
    [ "$cpu_ms" -lt 400 ] || fail "one listing of $listed $3 in .udsfs/$1 cost the daemon $cpu_ms ms of CPU"
    ok "a listing of .udsfs/$1 costs the daemon $cpu_ms ms for $listed $3"
}
b_holds 19100 pairs "its 19000 pairs" "$TMP/hold_pairs.py" 19000
a_lists sock '^[0-9]' sockets
[ "$listed" -ge 38000 ] || fail "A's listing showed $listed sockets, want B's 38000"
let_go "$OUT/pairs" "$HOLDER" "B's pair holder failed" "$OUT/pairs_b"
alive "sock listing"

# 3. The listing of .udsfs/abstract.
with_helpers "$TMP/hold_names.py" <<'PY'
# hold_names.py N DONE: N dgram sockets bound at 100-byte abstract names, makes
# DONE.held, waits for DONE.
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]) + 64,) * 2)
fds = []
for i in range(int(sys.argv[1])):
    fd, n = clone("dgram")
    ctl(fd, f"bind @more{i:06d}{os.getpid()}" + "x" * 80)
    fds.append(fd)
hold(sys.argv[2])
PY
chmod 644 "$TMP/hold_names.py"
b_holds 19100 names "its 19000 names" "$TMP/hold_names.py" 19000
a_lists abstract '^more' names
expect_eq "names in A's listing of .udsfs/abstract" "$listed" 19000
let_go "$OUT/names" "$HOLDER" "B's name holder failed" "$OUT/names_b"
alive "abstract listing"

# 4. Open tree directories.
with_helpers "$TMP/hold_dirs.py" <<'PY'
# hold_dirs.py N DONE: a directory of 1024 subdirectories with 255-byte names; N
# handles on it, each read once (one getdents64 of 4096 bytes); prints how many names a
# whole listing shows, makes DONE.held, waits for DONE.
import ctypes, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]) + 64,) * 2)
libc = ctypes.CDLL(None, use_errno=True)
d = f"{M}/d{os.getpid()}"
os.mkdir(d)
for i in range(1024):
    os.mkdir(f"{d}/{i:05d}" + "n" * 250)
buf = ctypes.create_string_buffer(4096)
fds = []
for _ in range(int(sys.argv[1])):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    assert libc.syscall(217, fd, buf, 4096) > 0  # SYS_getdents64
    fds.append(fd)
print(len(os.listdir(d)), flush=True)
hold(sys.argv[2])
PY
chmod 644 "$TMP/hold_dirs.py"
before=$(rss_kb)
b_holds 2100 dirs "its 2000 directory handles" "$TMP/hold_dirs.py" 2000
after=$(rss_kb)
grown=$(((after - before) / 1024))
say "B's 2000 handles on a directory of 1024 long names, each read once: the daemon grew by $grown MB"
expect_eq "names in a whole listing of B's directory" "$(cat "$OUT/dirs_b")" 1024
[ "$grown" -lt 48 ] || fail "B's 2000 open directories made the daemon hold $grown MB more"
ok "open directories: the daemon grew by $grown MB"
let_go "$OUT/dirs" "$HOLDER" "B's directory holder failed" "$OUT/dirs_b"
alive "open directories"

# 5. Records read in pieces.
with_helpers "$TMP/msg_pieces.py" <<'PY'
# msg_pieces.py N: a stream pair with a send buffer of 1 MB; N times: fill the queue,
# open the receiver's msg file and read 1 byte; stops at the first read that fails.
# Prints that errno and the handles that read; then reads the first handle's record to
# its end and closes it, and prints what a new handle's first read gives and whether
# that record's payload is the first bytes sent.
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]) + 64,) * 2)
fd, a, b = pair("stream")
ctl(fd, "sndbuf 1000000")
w = os.open(f"{U}/sock/{a}/data", os.O_WRONLY | os.O_NONBLOCK)
pattern = bytes(i % 251 for i in range(251 + 65536))
sent = 0
def fill():
    global sent
    while True:
        try:
            sent += os.write(w, pattern[sent % 251 : sent % 251 + 65536])
        except BlockingIOError:
            return
handles, why, first = [], "none", b""
for _ in range(int(sys.argv[1])):
    fill()
    h = os.open(f"{U}/sock/{b}/msg", os.O_RDONLY)
    try:
        byte = os.read(h, 1)
    except OSError as e:
        why = errno.errorcode[e.errno]
        os.close(h)
        break
    first = first or byte
    handles.append(h)
print(why, len(handles), flush=True)
# The rest of the first handle's record: its header, then exactly len payload bytes.
rec = first
while not rec.endswith(b"\n"):
    rec += os.read(handles[0], 1)
n = int(rec.split(b" ")[0].split(b"=")[1])
payload = b""
while len(payload) < n:
    payload += os.read(handles[0], n - len(payload))
os.close(handles[0])
time.sleep(0.2)  # the release reaches the daemon a moment after close
h = os.open(f"{U}/sock/{b}/msg", os.O_RDONLY)
print(err(os.read, h, 1), "intact" if payload == (pattern[:251] * (n // 251 + 1))[:n] else "differ")
PY
chmod 644 "$TMP/msg_pieces.py"
before=$(rss_kb)
got=$(prlimit --nofile=1100:1100 -- setpriv --reuid=$B --regid=$B --clear-groups \
    timeout 300 /usr/bin/python3 "$TMP/msg_pieces.py" 1000) || fail "B's msg reads: $got"
after=$(rss_kb)
grown=$(((after - before) / 1024))
read -r why handles <<<"$(head -1 <<<"$got")"
say "B's msg handles each reading 1 byte of a record: $handles read, then $why; the daemon grew by $grown MB"
[ "$grown" -lt 64 ] || fail "B's $handles handles with records read in part made the daemon hold $grown MB more"
expect_eq "B's reads end with" "$why" "ENOMEM"
[ "$handles" -ge 16 ] && [ "$handles" -le 32 ] || fail "B kept $handles records read in part (its share: 32 MiB)"
expect_eq "after B reads a record to its end: a new handle's read; the bytes" "$(tail -1 <<<"$got")" "OK intact"
grep -q "cannot be kept" "$LOG" || fail "no log line for the refused read"
alive "records read in pieces"
ok "records read in pieces: counted as open listings' text"

# 6. Odd abstract names.
with_helpers "$TMP/odd_names.py" <<'PY'
# odd_names.py DONE: binds dgram sockets at odd abstract names, makes DONE.held,
# waits for DONE.
fds = []
for name in ["a/b", "", "\\xff" * 107, ".", ".."]:
    fd, n = clone("dgram")
    ctl(fd, "bind @" + name)
    fds.append(fd)
hold(sys.argv[1])
PY
chmod 644 "$TMP/odd_names.py"
as_uid $B timeout 300 /usr/bin/python3 "$TMP/odd_names.py" "$OUT/odd" >"$OUT/odd_b" 2>&1 &
HOLDER=$!
wait_for "$OUT/odd.held" 30 "B did not bind its odd names" "$OUT/odd_b"
got=$(as_uid $A /usr/bin/python3 -c "$PY_PRELUDE
fd, n = clone('dgram')
ctl(fd, 'bind @fine%d' % os.getpid())
try:
    names = os.listdir(U + '/abstract')
except OSError as e:
    print(errno.errorcode[e.errno]); sys.exit()
print('listed', 'fine%d' % os.getpid() in names, 'a\\\\x2fb' in names, err(os.stat, U + '/abstract/a\\\\x2fb'))")
expect_eq "A lists .udsfs/abstract with B's odd names bound (A's name, B's a/b, its stat)" "$got" "listed True True OK"
grep -q "cannot be a directory entry: not listed" "$LOG" || fail "no log line for the names left out"
let_go "$OUT/odd" "$HOLDER" "B's odd names failed" "$OUT/odd_b"
alive "odd abstract names"
