#!/usr/bin/env bash
# adversarial_lanes3.sh: user B (uid 61062) against user A (uid 61061) through the fast
# lanes that are on by default on a shared --allow-other mount, each case first on kernel
# sockets (what Linux does on the same steps), then through `udsfs run` on the mount.
# The programs are integration/adversarial_lanes3.c (built here with gcc). Each case
# prints what it tried and what it got:
#  fd_leak      A's server (RLIMIT_NOFILE 256) echoes B's 40 connections one after the
#               other, each closed by B after 20 one-byte ping-pongs (laned); then A
#               opens /dev/null until refused: as many opens as on kernel sockets (give
#               or take the library's own 4). A laned end's three eventfds were kept for
#               A's process's life after the connection closed (preload/src/lane.rs: a
#               slot's End is dropped without closing them), in the top quarter of A's
#               descriptors: 40 brief connections of B's cost A 64 descriptors for good.
#  mem_pin      the same run: after B's connections (64 KiB each way after the ping-
#               pongs) are all closed, A's process keeps no memory of them (Linux frees a
#               connection's buffers with it): the Rss of A's lane region mappings at
#               most 1 MiB. Each region stays mapped for A's process's life (at most 256:
#               docs/LANE.md), its touched pages with it.
#  sndtimeo     A's SO_SNDTIMEO 500 ms on a laned socketpair end whose peer (a forked
#               child) reads one byte and then never again: A's first 1 MiB write returns
#               a part after ~500 ms, its second EAGAIN after ~500 ms, as on Linux.
#  netns_asks   B as root of a user, pid and network namespace of its own (unshare
#               -Urpfn) with the library: its fd channel's abstract name is not the
#               daemon's there. B's 10 connections to A's server (20 ping-pongs each): A
#               holds at most one lane's eventfds (3) after them. B's library asked for
#               each connection's lane before finding it could not claim it: the daemon
#               made the lane, A's end claimed its own (30 eventfds and 10 regions in A
#               for good). Fixed: the library connects to the channel before it asks,
#               and asks no more once refused.
#  rlimit20     B's own program at RLIMIT_NOFILE 20: laned socketpairs (a byte each
#               way) until refused, then opens of /dev/null until refused: the same
#               counts and errnos (EMFILE) as on kernel sockets.
#  dup2hi       a program at RLIMIT_NOFILE 64 puts a file of its own at descriptor 49
#               (dup2) in the middle of a laned socketpair's ping-pong with its forked
#               child (each end's SO_RCVTIMEO 200 ms): all 20 ping-pongs come back and the
#               file keeps its 6 bytes, as on Linux. The lane's eventfds sit from 48 up
#               (3/4 of the limit): the library's wake-ups of the child went into the file
#               (8 bytes each) and the child slept each round until its timeout.
#  eintr        A's blocking recv on a laned socketpair end (a first byte through the
#               lane before), SIGUSR1 at 300 ms: with SA_RESTART and no SO_RCVTIMEO it
#               restarts (the byte at 1.5 s), with SO_RCVTIMEO 3 s or without SA_RESTART
#               EINTR at 300 ms (sock_intr_errno), as Linux; storm: a SIGUSR1 every ms
#               for 800 ms with SA_RESTART, no timeout: the byte at 1.5 s; with
#               SO_RCVTIMEO 1 s: EINTR at 300 ms.
#  region_kept  B's laned connection to A's server closes; its library keeps the region
#               mapped (docs/LANE.md); A's server then sends 63000 bytes to A's own client
#               on a laned connection: none of them is in any lane region B still maps
#               (each lane is a new memfd; holds).
#  eintr_write  A's two blocking 1 MiB writes on a laned socketpair end whose peer reads
#               nothing until 1.5 s, SIGUSR1 300 ms into each: the first returns a part
#               (bytes went), the second restarts with SA_RESTART and no SO_SNDTIMEO (all,
#               once the peer reads) and is EINTR without SA_RESTART or with SO_SNDTIMEO
#               3 s, as Linux.
#  pass_stall   B makes 8 laned socketpairs with the library's raw requests, holds each
#               region's busy word up and passes one end of each to A's server in one
#               message (SCM_RIGHTS); A reads each once, nonblocking: EAGAIN at once, as on
#               Linux and as when B holds nothing (checked first). With the busy words up
#               A's first read waited the way down's BUSY_WAIT (500 ms) and each got
#               ECONNRESET (the stuck ends reset): a nonblocking call of A's parked in the
#               daemon by B.
#  wait_eintr   A waits for input on a quiet laned socketpair end by poll, ppoll, select
#               and epoll_wait (1.5 s), SIGUSR1 300 ms in, with SA_RESTART and without:
#               EINTR at the signal each time, as Linux (these waits never restart).
#  closerace    A's threads in a blocking read, a poll and an epoll_wait on a laned
#               socketpair end when another thread closes it, puts a pipe holding 'P' at
#               its number and makes new laned pairs (a byte 'N' left unread in each, 100
#               bytes each way checked), the later ones once the old lane's eventfds are
#               given back (their numbers reused), 5 rounds: the old end's read gets no
#               byte (0 at its peer's close, as Linux: the laned read keeps a copy of its
#               file while it waits, preload/src/lane.rs `Kept`; it got EBADF at the
#               close before, which took the lane down), its epoll registration reports nothing before the old
#               peer's close, every new pair is reported by the set and every 'N' and 'P'
#               read back, some later lane's eventfd took a number of the old lane's, and
#               no eventfd is left once the round's sockets are all closed. Before, every
#               lane's eventfds stayed (4 a round: 20 left, none reused); the woken read,
#               on through the daemon by number, could take the pipe's 'P' (it found the
#               number closed, EBADF, in the runs here).
# A case listed in integration/adversarial_lanes3_exceptions.txt is a known defect: it
# must fail as listed, and the script fails once it passes (then unlist it).
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"

L3=$TMP/l3
build_attack_c adversarial_lanes3 "$L3"
# on UID kernel|udsfs ARGS...: the program as UID on kernel sockets or through `udsfs run`.
on() {
    local uid=$1 where=$2
    shift 2
    if [ "$where" = kernel ]; then
        as_uid "$uid" "$L3" "$@"
    else
        as_uid "$uid" env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- "$L3" "$@"
    fi
}

# fd_leak WHERE DIR: sets opens (A's count after B's connections) and prints both sides.
fd_leak() {
    local where=$1 path=$2/a$1.sock out=$TMP/fd_leak.$1 sp
    on $A "$where" server "$path" 40 256 >"$out" 2>&1 &
    sp=$!
    for _ in $(seq 1000); do grep -q listening "$out" && break; sleep 0.01; done
    grep -q listening "$out" || fail "fd_leak: A's server on $where: $(cat "$out")"
    local b
    b=$(on $B "$where" client "$path" 40 20 2>&1) || fail "fd_leak: B's client on $where: $b"
    wait $sp || fail "fd_leak: A's server on $where: $(cat "$out")"
    say "$where: $b; $(grep -v listening "$out" | tr '\n' ' ')"
    opens=$(sed -n 's/^A: opens of \/dev\/null: \([0-9]*\) .*/\1/p' "$out")
    rss=$(sed -n 's/.*their Rss \([0-9]*\) kB.*/\1/p' "$out")
    a_out=$(grep -v listening "$out" | tr '\n' ' ')
    b_out=$b
}
fd_leak kernel "$TMP/k"
k_opens=$opens
fd_leak udsfs "$MNT"
grep -q "40 of them laned" <<<"$b_out" || say "fd_leak: not every connection of B's was laned: $b_out"
verdict fd_leak "$([ "${opens:-0}" -ge $((k_opens - 4)) ] && echo 1)" \
    "A's opens after B's 40 laned connections came and went: $opens (A: $a_out; B: $b_out); on kernel sockets: $k_opens"
verdict mem_pin "$([ "${rss:-999999}" -le 1024 ] && echo 1)" \
    "A's memory in lane regions after B's 40 connections (64 KiB each way) all closed: $rss kB (A: $a_out); on kernel sockets none stays"

# sndtimeo
k=$(on $A kernel sndtimeo 2>&1)
u=$(on $A udsfs sndtimeo 2>&1)
say "kernel: $k"
say "udsfs: $u"
grep -q "lane direct" <<<"$u" || say "sndtimeo: no lane: $u"
verdict sndtimeo "$([ "${u%lane *}" = "${k%lane *}" ] && echo 1)" \
    "A's blocking writes to a peer that never reads, SO_SNDTIMEO 500 ms: $u (kernel: $k)"

# netns_asks: B as root of a user, pid and network namespace of its own
out=$TMP/netns.out
on $A udsfs server "$MNT/ns.sock" 10 256 >"$out" 2>&1 &
sp=$!
for _ in $(seq 1000); do grep -q listening "$out" && break; sleep 0.01; done
grep -q listening "$out" || fail "netns_asks: A's server: $(cat "$out")"
b=$(as_uid $B unshare -Urpfn --mount-proc env LD_PRELOAD="$PRELOAD_LIB" UDSFS_MOUNT="$MNT" "$L3" client "$MNT/ns.sock" 10 20 2>&1) ||
    fail "netns_asks: B's client: $b"
wait $sp || fail "netns_asks: A's server: $(cat "$out")"
a=$(grep -v listening "$out" | tr '\n' ' ')
ev=$(sed -n 's/.*: \([0-9]*\) eventfds held.*/\1/p' "$out")
say "netns_asks: B: $(grep -v "fd channel" <<<"$b") ($(grep -c "fd channel" <<<"$b") lines of B's library on its fd channel); A: $a"
verdict netns_asks "$([ "${ev:-99}" -le 3 ] && echo 1)" \
    "B's 10 connections to A's server from a network namespace of its own (where B's library cannot reach the fd channel): A then held $ev eventfds ($a)"

# rlimit20
k=$(on $B kernel rlimit 20 2>&1 | tr '\n' ' ')
u=$(on $B udsfs rlimit 20 2>&1 | tr '\n' ' ')
say "kernel: $k"
say "udsfs: $u"
grep -q "lane: direct" <<<"$u" || say "rlimit20: the first pair had no lane: $u"
verdict rlimit20 "$([ "$(sed 's/ (the first.s lane: [a-z]*)//' <<<"$u")" = "$(sed 's/ (the first.s lane: [a-z]*)//' <<<"$k")" ] && echo 1)" \
    "B's own program at RLIMIT_NOFILE 20: $u (kernel sockets: $k)"

# dup2hi
k=$(timeout 30 "$L3" dup2hi "$TMP/k/dup2.file" 2>&1)
u=$(timeout 30 env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- "$L3" dup2hi "$TMP/dup2.file" 2>&1 || echo "status $?")
say "kernel: $k"
say "udsfs: $u; the file: $(od -An -c "$TMP/dup2.file" | head -3 | tr -s ' \n' ' ')"
grep -q "lane direct" <<<"$u" || say "dup2hi: no lane: $u"
verdict dup2hi "$([ "${u%(lane *}" = "${k%(lane *}" ] && echo 1)" \
    "a program that puts a file at descriptor 49 (dup2) in the middle of a laned ping-pong at RLIMIT_NOFILE 64: $u (kernel: $k)"

# alike CASE WHAT CMD ARGS...: A's program CMD ARGS on the kernel and through udsfs, its
# output up to the first line naming the lane (said, as WHAT): false unless the two are
# the same but for the lane word; udsfs's must say "lane direct" (else said). Sets k, u.
alike() {
    local case=$1 what=$2
    shift 2
    k=$(on $A kernel "$@" 2>&1 | sed -n '0,/lane /p')
    u=$(on $A udsfs "$@" 2>&1 | sed -n '0,/lane /p')
    say "$case ($what) ${*:2}: kernel: $k; udsfs: $u"
    grep -q "lane direct" <<<"$u" || say "$case ${*:2}: no lane: $u"
    [ "${u%lane *}" = "${k%lane *}" ]
}

# eintr
eintr_ok=1 eintrs=()
for args in "1 0 1" "1 3000 1" "0 0 1" "1 0 800" "1 1000 800"; do
    # shellcheck disable=SC2086 # (the arguments' words)
    alike eintr "SA_RESTART, SO_RCVTIMEO ms, signals" eintr $args || eintr_ok=
    eintrs+=("$args: $u (kernel: $k)")
done
verdict eintr "$eintr_ok" "A's blocking laned recv under SIGUSR1 (SA_RESTART, SO_RCVTIMEO ms, signals): $(printf '%s; ' "${eintrs[@]}")"

# pass_stall: B's 8 laned ends (busy words held up or not) passed to A, A's nonblocking reads
cp "$LIB_DIR/adversarial_lanes3_pass.py" "$TMP/pass.py"
cp "$LIB_DIR/lane_raw.py" "$TMP/lane_raw.py"
chmod 644 "$TMP/pass.py" "$TMP/lane_raw.py"
# pass_run kernel|nohold|hold: sets pass_out (A's lines)
pass_run() {
    local out=$TMP/pass.$1 sp path=$MNT/pass$1.sock
    if [ "$1" = kernel ]; then
        path=$TMP/k/pass.sock
        as_uid $A /usr/bin/python3 "$TMP/pass.py" server "$path" 8 >"$out" 2>&1 &
    else
        as_uid $A env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- \
            /usr/bin/python3 "$TMP/pass.py" server "$path" 8 >"$out" 2>&1 &
    fi
    sp=$!
    for _ in $(seq 1000); do grep -q listening "$out" && break; sleep 0.01; done
    grep -q listening "$out" || fail "pass_stall: A's server ($1): $(cat "$out")"
    if [ "$1" = kernel ]; then
        as_uid $B /usr/bin/python3 -c "
import socket, struct, sys, time
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); c.send(b'0')
ps = [socket.socketpair() for _ in range(8)]
c.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack('8i', *[p[0].fileno() for p in ps]))])
time.sleep(2)" "$path" || fail "pass_stall: B's kernel client"
    else
        as_uid $B env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- \
            /usr/bin/python3 "$TMP/pass.py" client "$path" 8 "$1" "$U" 2 || fail "pass_stall: B's client ($1)"
    fi
    wait $sp || fail "pass_stall: A's server ($1): $(cat "$out")"
    pass_out=$(grep -v listening "$out" | tr '\n' ' ')
    pass_worst=$(sed -n 's/.*the worst \([0-9]*\) ms.*/\1/p' "$out")
}
pass_run kernel
k=$pass_out
pass_run nohold
grep -q "8 EAGAIN" <<<"$pass_out" && [ "$pass_worst" -le 100 ] ||
    fail "pass_stall: B's laned ends without the busy words held: A: $pass_out"
ok "pass_stall: B's 8 laned ends passed to A, busy words not held: A: $pass_out"
pass_run hold
verdict pass_stall "$(grep -q "8 EAGAIN" <<<"$pass_out" && [ "$pass_worst" -le 100 ] && echo 1)" \
    "B's 8 laned ends passed to A, each region's busy word held up: A: $pass_out (kernel: $k)"

# region_kept: B's region kept mapped after its connection, A's next connection's bytes
lib() { as_uid "$1" env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- /usr/bin/python3 "$TMP/pass.py" "${@:2}"; }
lib $A secret_server "$MNT/secret.sock" >"$TMP/ss.out" 2>&1 &
sp=$!
for _ in $(seq 1000); do grep -q listening "$TMP/ss.out" && break; sleep 0.01; done
lib $B keep_client "$MNT/secret.sock" 3 >"$TMP/kc.out" 2>&1 &
kp=$!
for _ in $(seq 1000); do grep -q closed "$TMP/kc.out" && break; sleep 0.01; done
c=$(lib $A secret_client "$MNT/secret.sock" 2>&1)
wait $kp || fail "region_kept: B: $(cat "$TMP/kc.out")"
wait $sp || fail "region_kept: A's server: $(cat "$TMP/ss.out")"
rk="B: $(tr '\n' ' ' <"$TMP/kc.out"); A: $(grep -v listening "$TMP/ss.out"), $c"
say "region_kept: $rk"
grep -q "lane direct" <<<"$c" && grep -q "(lane direct)" "$TMP/kc.out" || say "region_kept: not both connections laned: $rk"
verdict region_kept "$(grep -q "holding A's other connection's bytes: 0" "$TMP/kc.out" && echo 1)" \
    "B's lane regions kept mapped after its connection to A's server closed, A's next connection's 63000 bytes looked for in them: $rk (Linux: B shares no memory with A)"

# eintr_write
ew_ok=1 ews=()
for args in "1 0" "0 0" "1 3000"; do
    # shellcheck disable=SC2086 # (the arguments' words)
    alike eintr_write "SA_RESTART, SO_SNDTIMEO ms" eintrw $args || ew_ok=
    ews+=("$args: $u (kernel: $k)")
done
verdict eintr_write "$ew_ok" "A's blocking laned writes under SIGUSR1 (SA_RESTART, SO_SNDTIMEO ms): $(printf '%s; ' "${ews[@]}")"

# wait_eintr
we_ok=1 wes=()
for way in poll ppoll select epoll; do
    for r in 1 0; do
        alike wait_eintr "way, SA_RESTART" waitintr $way $r || we_ok=
        wes+=("$way SA_RESTART=$r: $u (kernel: $k)")
    done
done
verdict wait_eintr "$we_ok" "A's wait on a laned end, a signal 300 ms in: $(printf '%s; ' "${wes[@]}")"

# closerace
k=$(on $A kernel closerace 5 2>&1)
u=$(on $A udsfs closerace 5 2>&1)
say "kernel: $k"
say "udsfs: $u"
cr_ok=$(grep -q "(5 laned;" <<<"$u" && ! grep -q "by a later lane 0 times" <<<"$u" &&
    grep -q "read: 0 got a byte, 5 EOF, 0 an error, 0 stuck;" <<<"$u" &&
    grep -q "its epoll registration: 0 reported before its peer's close; the new files: 0 bytes lost, 0 wrong, 0 not reported by the set; eventfds left at the rounds' ends: 0" <<<"$u" &&
    echo 1)
verdict closerace "$cr_ok" "A's blocking read, poll and epoll_wait on a laned end another thread closes and whose numbers new files and lanes reuse: $u (kernel: $k)"

grep -i "panick" "$LOG" && fail "the daemon panicked"
[ ${#failed[@]} -eq 0 ] || fail "$(printf '%s; ' "${failed[@]}")"
ok "every case as expected"
