#!/usr/bin/env bash
# Hostile use of the mount through files; each attempt must fail with the errno Linux
# (tmpfs for the tree, procfs for the control tree) gives, and nothing may break:
# - garbage command lines on ctl: EINVAL each, one daemon log line each; a 1 MiB and a
#   4 MiB line: EINVAL; 1 MiB without a newline on msg: EINVAL; a 1 MiB datagram:
#   EMSGSIZE;
# - writes to status and .udsfs/unix: EBADF (root), EACCES (another user);
# - truncating control files: nothing changes (a no-op or a refusal); renaming them:
#   EXDEV; unlinking them or removing .udsfs/sock/N: EPERM; chmod/chown: EPERM; hard
#   links: EXDEV; .udsfs itself cannot be removed or renamed;
# - mkdir inside .udsfs: EPERM; regular files anywhere: EPERM; FIFOs, character and
#   block devices: EPERM (socket nodes are fine and refuse connections);
# - symlink loops and chains: ELOOP both through the kernel and through `connect`, at
#   the same length (40 links); symlinks out of the mount and `..` create nothing
#   outside it; find -L over the whole mount terminates;
# - 256-byte components: ENAMETOOLONG in the tree and the connect view;
# - lseek/pread/pwrite on data and msg: ESPIPE; opening a socket node: ENXIO; accept
#   on a dgram socket: EOPNOTSUPP, on an unlistening stream socket: EINVAL;
# - socket directories only under their canonical numbers (.udsfs/sock/0N, +N: ENOENT,
#   as /proc/0PID);
# - 2000 clone and pair handles opened and closed: no socket left.
# After all of it the daemon still runs, never panicked, and a dgram round trip works.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other) # one check is another user's
source "$(dirname "$0")/lib.sh"

PY3=$(python3 -c 'import sys; print(sys.executable)')
chmod o+x "$TMP"
CHECKS=0
# failures found on the way, reported at the end so that every check runs
DEFERRED=()

# pyq EXPR [ARGS...]: print the value of a python expression (lib.sh's prelude: err()).
# pyc CODE [ARGS...]: run python code with the prelude. Both run the interpreter itself,
# not a wrapper (a pyenv shim costs 100 ms a call).
pyc() {
    local code=$1
    shift
    "$PY3" -c "$PY_PRELUDE
$code" "$@"
}
pyq() {
    local e=$1
    shift
    pyc "print($e)" "$@"
}
# want WHAT GOT WANT...: GOT must be one of the WANTs.
want() {
    local what=$1 got=$2 w
    shift 2
    for w in "$@"; do
        if [ "$got" == "$w" ]; then
            ok "$what: $got"
            CHECKS=$((CHECKS + 1))
            return 0
        fi
    done
    fail "$what: got '$got', want $(printf "'%s' " "$@")"
}
alive() {
    proc_alive "$DAEMON_PID" || fail "the daemon died ($1)"
}

new_sock D dgram
ctl "$D_FD" "bind d.sock" || fail "bind d.sock"
new_sock S stream
ctl "$S_FD" "connect d.sock" 2>/dev/null && fail "a stream socket connected to a dgram node"
new_pair P dgram
exec {pm}<>"$U/sock/$P_M/data" # holds M: other processes open and close its files below
send "$P_N" "queued" || fail "queue a message on $P_M"
ok "dgram $D at d.sock; stream $S (unconnected); dgram pair $P_N <-> $P_M with one message queued"

# ---- 1. garbage on ctl (of an unbound socket G, so that each line fails for itself)
new_sock G dgram
# shellcheck disable=SC2153 # LOG is lib.sh's
log_before=$(grep -c "socket $G: " "$LOG" || true)
garbage=$(pyc '
lines = [b"frobnicate", b"bind @\\x4", b"bind @\\xZZ", b"bind @\\q", b"connect @\\",
         b"listen -", b"listen abc", b"listen 99999999999999999999", b"shutdown", b"shutdown 3",
         b"passcred maybe", b"passcred", b"bind " + b"a" * 200, b"connect " + b"b" * 109,
         b"connect @" + b"n" * 108, b"\x01\x02\x7f\xff\xfe", b"BIND x", b"bind a\x00b",
         b"\x00", b"bind\x00", b"listen 5\x00"]
fd = int(sys.argv[1])
for l in lines:
    print(repr(l)[2:-1][:50], err(os.write, fd, l + b"\n"))
' "$G_FD")
n_garbage=0
while read -r line; do
    want "garbage on ctl: ${line% *}" "${line##* }" EINVAL
    n_garbage=$((n_garbage + 1))
done <<<"$garbage"
log_after=$(grep -c "socket $G: " "$LOG" || true)
want "daemon log lines about socket $G for $n_garbage garbage commands" "$((log_after - log_before))" "$n_garbage"
say "  e.g. $(grep "socket $G: " "$LOG" | tail -n 1 | cut -c1-160)"
alive "after garbage on ctl"
expect_status "$G" local ""
ctl "$G_FD" "bind @after-garbage" || fail "bind on $G after the garbage"
expect_status "$G" local @after-garbage

# Megabyte lines go to a second mount with its own log, so that this script's log (printed
# when it fails) stays readable; the log of that mount may grow by at most 64 KiB.
MNT2=$TMP/mnt2
LOG2=$TMP/log2
mkdir "$MNT2"
pid2=$(timeout 30 "$UDSFS_BIN" mount --background --log-file "$LOG2" "$MNT2" </dev/null | tail -n 1)
[[ $pid2 =~ ^[0-9]+$ ]] || fail "mounting a second udsfs on $MNT2"
big=$(pyc '
c = os.open(sys.argv[1] + "/.udsfs/dgram/clone", os.O_RDWR)
n = int(os.read(c, 64))
before = os.stat(sys.argv[2]).st_size
for size in (1 << 20, 4 << 20):
    print(f"a {size}-byte line on ctl:", err(os.write, c, b"x" * size + b"\n"))
    print(f"bind with a {size}-byte path on ctl:", err(os.write, c, b"bind " + b"y" * size + b"\n"))
print("bind after them:", err(os.write, c, b"bind @after-megabytes\n"))
print("log growth:", os.stat(sys.argv[2]).st_size - before)
' "$MNT2" "$LOG2") || true
alive2=yes
proc_alive "$pid2" || alive2=no
timeout 10 "$UDSFS_BIN" umount "$MNT2" >/dev/null 2>&1 || true
ended_within "$pid2" 3000 || kill -KILL "$pid2"
mounted "$MNT2" && umount -l "$MNT2"
say "$big" | sed 's/^/  second mount: /'
[ "$alive2" == yes ] || fail "the second daemon died from megabyte lines on ctl"
for size in 1048576 4194304; do
    want "a $size-byte line on ctl" "$(sed -n "s/^a $size-byte line on ctl: //p" <<<"$big")" EINVAL
    want "bind with a $size-byte path on ctl" "$(sed -n "s/^bind with a $size-byte path on ctl: //p" <<<"$big")" EINVAL
done
want "bind @after-megabytes on the same handle" "$(sed -n 's/^bind after them: //p' <<<"$big")" OK
grown=$(sed -n 's/^log growth: //p' <<<"$big")
if [ "$grown" -le 65536 ]; then
    ok "the daemon log grew by $grown bytes for the four megabyte lines"
else
    say "  FAILED: the daemon log grew by $grown bytes"
    DEFERRED+=("four failing ctl writes of 1 and 4 MiB made the daemon log grow by $grown bytes (limit 64 KiB): a failing line is logged whole, so any user of an --allow-other mount can fill the disk through the log at write() speed")
fi
CHECKS=$((CHECKS + 1))
got=$(pyq 'err(os.write, os.open(sys.argv[1], os.O_WRONLY), b"len=" + b"9" * (1 << 20))' "$U/sock/$P_N/msg")
want "1 MiB without a newline on msg" "$got" EINVAL
got=$(pyq 'err(os.write, os.open(sys.argv[1], os.O_WRONLY), b"x" * (1 << 20))' "$U/sock/$P_N/data")
want "a 1 MiB datagram on data" "$got" EMSGSIZE
got=$(pyq 'err(os.write, int(sys.argv[1]), b"passcred on\nfrobnicate\n")' "$D_FD")
want "a good command, then garbage, in one write" "$got" EINVAL
say "  (passcred of $D after it: $(status_of "$D" passcred): the good line ran)"
expect_status "$P_M" rcvq_msgs 1

# ---- 2. writes to read-only files
for f in "$U/sock/$D/status" "$U/unix"; do
    want "root writing ${f#"$MNT"/}" "$(pyq 'err(lambda: os.write(os.open(sys.argv[1], os.O_WRONLY), b"x\n"))' "$f")" EBADF
    want "nobody writing ${f#"$MNT"/}" "$(setpriv --reuid=65534 --regid=65534 --clear-groups "$PY3" -c "$PY_PRELUDE
print(err(lambda: os.write(os.open(sys.argv[1], os.O_WRONLY), b'x')))" "$f")" EACCES
done
# shellcheck disable=SC2016 # expanded by the inner bash
expect_errno EBADF bash -c 'echo hello >"$1"' bash "$U/unix"
want "garbage to .udsfs/gc" "$(pyq 'err(lambda: os.write(os.open(sys.argv[1], os.O_WRONLY), b"collect!\n"))' "$U/gc")" EINVAL
want "writing a socket number to accept's file" "$(pyq 'err(lambda: os.write(os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK), b"1\n"))' "$U/sock/$S/accept")" EINVAL

# ---- 3. truncate, rename, unlink, chmod, link of control files
unix_before=$(cat "$U/unix")
for f in "sock/$P_M/ctl" "sock/$P_M/data" "sock/$P_M/msg" "sock/$P_M/status" "sock/$P_M/accept" unix gc dgram/clone; do
    got=$(pyq 'err(os.truncate, sys.argv[1], 0)' "$U/$f")
    want "truncate .udsfs/$f (a no-op or refused)" "$got" OK EPERM EACCES EINVAL
    got=$(pyq 'err(os.truncate, sys.argv[1], 4096)' "$U/$f")
    want "truncate .udsfs/$f to 4096" "$got" OK EPERM EACCES EINVAL
done
got=$(pyq 'err(os.ftruncate, os.open(sys.argv[1], os.O_RDWR), 0)' "$U/sock/$P_M/data")
want "ftruncate of an open data file" "$got" OK EPERM EINVAL
expect_status "$P_M" rcvq_msgs 1
[ "$(cat "$U/unix")" == "$unix_before" ] || fail ".udsfs/unix changed after the truncations"
ok "the truncations changed nothing (the queued message and .udsfs/unix are intact)"
for f in "sock/$D/ctl" "sock/$D/status" unix gc dgram/clone; do
    want "rename .udsfs/$f within its directory" "$(pyq 'err(os.rename, sys.argv[1], sys.argv[1] + "2")' "$U/$f")" EXDEV EPERM
    want "rename .udsfs/$f into the tree" "$(pyq 'err(os.rename, sys.argv[1], sys.argv[2])' "$U/$f" "$MNT/stolen")" EXDEV
    want "unlink .udsfs/$f" "$(pyq 'err(os.unlink, sys.argv[1])' "$U/$f")" EPERM
    want "chmod .udsfs/$f" "$(pyq 'err(os.chmod, sys.argv[1], 0o777)' "$U/$f")" EPERM
    want "chown .udsfs/$f" "$(pyq 'err(os.chown, sys.argv[1], 65534, 65534)' "$U/$f")" EPERM
    want "hard link .udsfs/$f into the tree" "$(pyq 'err(os.link, sys.argv[1], sys.argv[2])' "$U/$f" "$MNT/linked")" EXDEV
done
want "rename the node d.sock into .udsfs" "$(pyq 'err(os.rename, sys.argv[1], sys.argv[2])' "$MNT/d.sock" "$U/d.sock")" EXDEV
want "rename the node d.sock into .udsfs/sock/$D" "$(pyq 'err(os.rename, sys.argv[1], sys.argv[2])' "$MNT/d.sock" "$U/sock/$D/ctl")" EXDEV
want "rmdir .udsfs/sock/$D" "$(pyq 'err(os.rmdir, sys.argv[1])' "$U/sock/$D")" EPERM
want "rmdir .udsfs/sock" "$(pyq 'err(os.rmdir, sys.argv[1])' "$U/sock")" EPERM ENOTEMPTY
want "chmod .udsfs/sock/$D" "$(pyq 'err(os.chmod, sys.argv[1], 0o777)' "$U/sock/$D")" EPERM
want "symlink inside .udsfs/sock/$D" "$(pyq 'err(os.symlink, "ctl", sys.argv[1])' "$U/sock/$D/evil")" EPERM
got=$(pyq 'err(os.rmdir, sys.argv[1]), err(os.rename, sys.argv[1], sys.argv[2]), err(os.unlink, sys.argv[1])' "$U" "$MNT/moved")
say "  rmdir .udsfs, mv .udsfs moved, unlink .udsfs: $got"
[[ $got != *OK* ]] || fail ".udsfs could be removed or renamed: $got"
if [ ! -d "$U/sock/$D" ] || [ -e "$MNT/moved" ]; then
    fail ".udsfs is not where it was after rmdir/mv/unlink attempts"
fi
ok ".udsfs can be neither removed nor renamed"
expect_status "$D" local d.sock
[ -S "$MNT/d.sock" ] || fail "d.sock is gone"
alive "after truncate/rename/unlink of control files"

# ---- 4. mkdir in .udsfs, regular files, FIFOs, devices
for d in x sock/x "sock/$D/x" dgram/x abstract/x; do
    want "mkdir .udsfs/$d" "$(pyq 'err(os.mkdir, sys.argv[1])' "$U/$d")" EPERM
done
want "mkdir .udsfs" "$(pyq 'err(os.mkdir, sys.argv[1])' "$U")" EEXIST
want "mkdir in the connect view" "$(pyq 'err(os.mkdir, sys.argv[1])' "$U/connect/newdir")" EPERM
for f in "$MNT/file" "$U/file" "$U/sock/$D/file" "$U/connect/file" "$U/dgram/file"; do
    want "create ${f#"$MNT"/}" "$(pyq 'err(os.open, sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)' "$f")" EPERM
done
expect_errno EPERM touch "$MNT/touched"
expect_errno EPERM cp /etc/hostname "$MNT/"
want "O_CREAT|O_EXCL on an existing ctl" "$(pyq 'err(os.open, sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_RDWR)' "$U/sock/$D/ctl")" EEXIST
want "O_DIRECTORY on ctl" "$(pyq 'err(os.open, sys.argv[1], os.O_DIRECTORY)' "$U/sock/$D/ctl")" ENOTDIR
want "open .udsfs/sock/$D for writing" "$(pyq 'err(os.open, sys.argv[1], os.O_WRONLY)' "$U/sock/$D")" EISDIR
want "mkfifo" "$(pyq 'err(os.mkfifo, sys.argv[1])' "$MNT/fifo")" EPERM
want "mknod S_IFCHR 1:3" "$(pyq 'err(os.mknod, sys.argv[1], stat.S_IFCHR | 0o666, os.makedev(1, 3))' "$MNT/null")" EPERM
want "mknod S_IFBLK 7:0" "$(pyq 'err(os.mknod, sys.argv[1], stat.S_IFBLK | 0o666, os.makedev(7, 0))' "$MNT/loop")" EPERM
want "mknod S_IFREG" "$(pyq 'err(os.mknod, sys.argv[1], stat.S_IFREG | 0o644)' "$MNT/reg")" EPERM
want "mkfifo in .udsfs" "$(pyq 'err(os.mkfifo, sys.argv[1])' "$U/fifo")" EPERM
want "mknod S_IFSOCK (a node with no socket)" "$(pyq 'err(os.mknod, sys.argv[1], stat.S_IFSOCK | 0o666)' "$MNT/bare.sock")" OK
want "connect to the bare node" "$(pyq 'err(os.write, os.open(sys.argv[1] + "/dgram/clone", os.O_RDWR), b"connect bare.sock\n")' "$U")" ECONNREFUSED
listing=$(find "$MNT" -mindepth 1 -maxdepth 1 ! -name .udsfs -printf '%f ' | tr ' ' '\n' | sort | tr '\n' ' ')
want "what the mount root holds" "$listing" "bare.sock d.sock "

# ---- 5. symlinks: loops, chains, ways out
ln -s loop-b "$MNT/loop-a"
ln -s loop-a "$MNT/loop-b"
ln -s self "$MNT/self"
ctlw='err(os.write, os.open(U + "/" + sys.argv[1] + "/clone", os.O_RDWR), (sys.argv[2] + "\n").encode())'
for l in loop-a self; do
    want "stat $l (a symlink loop)" "$(pyq 'err(os.stat, sys.argv[1])' "$MNT/$l")" ELOOP
    want "open .udsfs/connect/$l" "$(pyq 'err(os.open, sys.argv[1], os.O_RDWR)' "$U/connect/$l")" ELOOP
    want "connect $l" "$(pyq "$ctlw" dgram "connect $l")" ELOOP
    want "bind $l/x.sock" "$(pyq "$ctlw" dgram "bind $l/x.sock")" ELOOP
done
# a chain of N symlinks to d.sock: the kernel (stat) and connect must agree
chain() { # chain PREFIX N: PREFIX1 -> PREFIX2 -> ... -> PREFIXN -> d.sock
    local i
    ln -s d.sock "$MNT/$1$2"
    for ((i = $2 - 1; i >= 1; i--)); do ln -s "$1$((i + 1))" "$MNT/$1$i"; done
}
chain c 40
chain e 41
want "stat through a chain of 40 symlinks" "$(pyq 'err(os.stat, sys.argv[1])' "$MNT/c1")" OK
want "connect through a chain of 40 symlinks" "$(pyq "$ctlw" dgram "connect c1")" OK
want "stat through a chain of 41 symlinks" "$(pyq 'err(os.stat, sys.argv[1])' "$MNT/e1")" ELOOP
want "connect through a chain of 41 symlinks" "$(pyq "$ctlw" dgram "connect e1")" ELOOP
mkdir "$TMP/outside"
chmod 0777 "$TMP/outside"
ln -s "$TMP/outside" "$MNT/out"
ln -s /etc/hostname "$MNT/etc-file"
ln -s ../../.. "$MNT/up"
for cmd in "bind out/x.sock" "bind up/y.sock" "bind ../../z.sock" "connect etc-file" "connect out/x.sock" "bind $TMP/outside/w.sock"; do
    got=$(pyq "$ctlw" dgram "$cmd")
    say "  $cmd: $got"
done
left=$(find "$TMP/outside" "$TMP" -maxdepth 1 -name '*.sock' | tr '\n' ' ')
[ -z "$left" ] || fail "binds through symlinks and .. made files outside the mount: $left"
ok "nothing was made outside the mount"
rm "$MNT/out" "$MNT/etc-file" "$MNT/up" # the kernel follows them out of the mount
got=$(timeout 20 find -L "$MNT" 2>/dev/null | wc -l) || true
[ "${PIPESTATUS[0]:-0}" != 124 ] || fail "find -L over the mount did not end within 20 s"
ok "find -L over the whole mount (loops, the connect view, .udsfs) ends ($got paths)"
alive "after the symlinks"

# ---- 6. long names
n255=$(printf 'n%.0s' {1..255})
n256=${n255}n
want "mkdir with a 255-byte name" "$(pyq 'err(os.mkdir, sys.argv[1])' "$MNT/$n255")" OK
want "mkdir with a 256-byte name" "$(pyq 'err(os.mkdir, sys.argv[1])' "$MNT/$n256")" ENAMETOOLONG
want "symlink with a 256-byte name" "$(pyq 'err(os.symlink, "x", sys.argv[1])' "$MNT/$n256")" ENAMETOOLONG
want "mknod socket with a 256-byte name" "$(pyq 'err(os.mknod, sys.argv[1], stat.S_IFSOCK | 0o666)' "$MNT/$n256")" ENAMETOOLONG
want "rename to a 256-byte name" "$(pyq 'err(os.rename, sys.argv[1], sys.argv[2])' "$MNT/$n255" "$MNT/$n256")" ENAMETOOLONG
want "stat of a 256-byte name" "$(pyq 'err(os.stat, sys.argv[1])' "$MNT/$n256")" ENAMETOOLONG
want "stat of a 256-byte name under a directory" "$(pyq 'err(os.stat, sys.argv[1])' "$MNT/$n255/$n256")" ENAMETOOLONG
want "open of a 256-byte name in the connect view" "$(pyq 'err(os.open, sys.argv[1], os.O_RDWR)' "$U/connect/$n256")" ENAMETOOLONG
want "stat of a 256-byte name in .udsfs/sock (procfs says ENOENT)" "$(pyq 'err(os.stat, sys.argv[1])' "$U/sock/$n256")" ENOENT ENAMETOOLONG
want "stat of a 1000-byte name" "$(pyq 'err(os.stat, sys.argv[1] + "/" + "m" * 1000)' "$MNT")" ENAMETOOLONG
want "connect with a 108-byte path of a missing name" "$(pyq "$ctlw" dgram "connect $(printf 'q%.0s' {1..108})")" ENOENT
want "connect with a 109-byte path" "$(pyq "$ctlw" dgram "connect $(printf 'q%.0s' {1..109})")" EINVAL

# ---- 7. seeking, opening nodes, accepting where one cannot
seek_probe='
fd = os.open(sys.argv[1], os.O_RDWR | os.O_NONBLOCK)
print(err(os.lseek, fd, 10, os.SEEK_SET), err(os.lseek, fd, 0, os.SEEK_END), err(os.pread, fd, 10, 5), err(os.pwrite, fd, b"x", 5))'
for f in data msg; do
    want "lseek, lseek SEEK_END, pread, pwrite on .udsfs/sock/$P_M/$f" "$(pyc "$seek_probe" "$U/sock/$P_M/$f")" "ESPIPE ESPIPE ESPIPE ESPIPE"
done
expect_status "$P_M" rcvq_msgs 1
for mode in O_RDONLY O_WRONLY O_RDWR; do
    want "open the socket node d.sock $mode" "$(pyq "err(os.open, sys.argv[1], os.$mode)" "$MNT/d.sock")" ENXIO
done
expect_errno ENXIO cat "$MNT/d.sock"
# (python names errno 95 ENOTSUP; EOPNOTSUPP is the same number on Linux)
want "accept on a dgram socket" "$(pyq 'err(os.open, sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)' "$U/sock/$D/accept")" ENOTSUP EOPNOTSUPP
want "accept on a stream socket that does not listen" "$(pyq 'err(os.open, sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)' "$U/sock/$S/accept")" EINVAL

# ---- 8. socket numbers only in canonical form (as /proc/0PID, /proc/+PID: ENOENT)
ALIASES=()
for alias in "0$D" "+$D" "00$D" " $D" "$D " "-$D" "99999999999999999999" "0x$D"; do
    got=$(pyq 'err(os.stat, sys.argv[1])' "$U/sock/$alias")
    if [ "$got" == ENOENT ]; then
        ok "lookup .udsfs/sock/'$alias': ENOENT"
    else
        say "  FAILED: lookup .udsfs/sock/'$alias': $got, want ENOENT"
        ALIASES+=("'$alias'")
    fi
    CHECKS=$((CHECKS + 1))
done

# ---- 9. many clone and pair handles
before=$(sed -n 's/^sockets=//p' "$U/gc")
pyc '
# clone handles and socketpair handles (whose second socket nobody opens)
fds = [os.open(U + "/" + ("dgram", "stream", "seqpacket")[i % 3] + ("/clone", "/pair")[i % 2], os.O_RDWR)
       for i in range(2000)]
for fd in fds:
    os.close(fd)
' || fail "opening 2000 clone handles"
start=$(now_ms)
until [ "$(sed -n 's/^sockets=//p' "$U/gc")" == "$before" ]; do
    [ $(($(now_ms) - start)) -le 5000 ] || fail "sockets=$(sed -n 's/^sockets=//p' "$U/gc") 5 s after closing 2000 clone and pair handles, was $before"
    sleep 0.01
done
ok "2000 clone and pair handles opened and closed: sockets=$before again after $(($(now_ms) - start)) ms"

# ---- after all of it
alive "at the end"
expect_status "$D" local d.sock
new_sock A dgram
ctl "$A_FD" "connect d.sock" || fail "connect d.sock at the end"
send "$A" "still here" || fail "send at the end"
expect_eq "dgram round trip at the end" "$(recv "$D")" "still here"
expect_eq "what was queued at the start" "$(recv "$P_M")" queued
[ "${#ALIASES[@]}" -eq 0 ] ||
    DEFERRED+=(".udsfs/sock/N answers under non-canonical names ${ALIASES[*]} (socket $D): want ENOENT, as /proc/0PID and /proc/+PID give")
[ "${#DEFERRED[@]}" -eq 0 ] || fail "$(printf '%s\n' "${DEFERRED[@]}")"
say "hostile files: $CHECKS hostile operations checked; daemon $DAEMON_PID alive"
