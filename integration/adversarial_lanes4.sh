#!/usr/bin/env bash
# adversarial_lanes4.sh: attacks on giving a laned end's eventfds and region back with its
# last holder (preload/src/lane_hold.rs) and on new socket descriptors moved down to the
# lowest free number (preload/src/files.rs `lowest`), on a --allow-other --lanes mount,
# each case first on kernel sockets (what Linux does on the same steps), then through
# `udsfs run`; the programs are integration/adversarial_lanes4.c (see its head). Cases:
#  sigclose     a SIGALRM handler closes (or dup2s a pipe onto) a laned end during the
#               main thread's blocking read on it, with SA_RESTART and without: the
#               read's result as on Linux (EINTR; restarted: EBADF or the pipe's byte).
#  forkcall     a thread's blocking read on a laned end while the process forks and the
#               child closes both ends and exits (or execs): the read gets the parent's
#               next byte, the lane works after, no eventfd left once closed.
#  churn        a server at RLIMIT_NOFILE 256 accepts 400 brief laned connections (a
#               byte each way twice) of its forked client one after the other: none fails,
#               none above descriptor 4, no eventfd kept, as many opens free after as on
#               kernel sockets (60,000 would take 20 minutes here: ~7 ms a connection).
#  acceptopen   A's accepts (numbers moved down) while its other threads open pipes and
#               make laned socketpairs: no connection's bytes wrong, no thread's number
#               lost.
#  forkwrite    a thread's blocking read on a laned end; a forked child writes to the
#               peer the parent claimed (the lane goes down under the read): the byte.
#  dupover      a thread's blocking read on a laned end when another laned end is put at
#               its number (dup2): the number then carries the other connection, and the
#               old read gets no byte of it (Linux: the old read's file stays open under
#               it and gets its own peer's byte).
#  inetd        an accepted laned connection put at 0 and 1 (dup2), its number closed,
#               echoed through 0 and 1: as on Linux.
#  recvedge     three laned ends received in one message with exactly three numbers
#               free (RLIMIT_NOFILE 64 and 20): all three, at those numbers in order, each
#               to its own peer; as many numbers free as on Linux once all are closed.
#  downheld     the same received ends closed (their lanes down), their peers open: as
#               many numbers free as on Linux.
#  evrace       400 laned socketpairs made, pinged and closed while another thread puts
#               /dev/null at 3/4 of RLIMIT_NOFILE 64 (where lanes put their eventfds) and
#               closes it, over and over: no eventfd left at the end. The program's close
#               was marked in lane_hold after the close (closes.rs), when a new lane's
#               eventfd could already sit at that number: the library then took it for
#               the program's and never gave it back (13 of 16 numbers left held).
#  epdup        a laned end registered in an epoll set (EPOLLIN), a dup made, the
#               registered number closed (then reused by a pipe, or not; or a pipe put
#               at it with dup2; or close_range), or no dup and the file held by a
#               forked child, the peer writes: Linux reports the event (the registration
#               is the file's, open at the dup) and drops the registration once the dup
#               closes too (the child exits); a MOD by the closed number: EBADF/ENOENT.
#  sigclosew    a SIGALRM handler closes a laned end 300 ms into the main thread's 1 MiB
#               write to a peer that never reads, SA_RESTART or not: a part, as Linux.
#  flags        socketpair's, accept4's and a received end's FD_CLOEXEC, O_NONBLOCK and
#               numbers after the move down (F_DUPFD copies the file, asks FD_CLOEXEC
#               again), with and without SOCK_CLOEXEC / MSG_CMSG_CLOEXEC, SOCK_NONBLOCK;
#               through the library and through the supervisor (--front seccomp).
#  emfile       accept with only one number left under RLIMIT_NOFILE: a socket at that
#               number, as on Linux.
# A case listed in integration/adversarial_lanes4_exceptions.txt is a known defect: it
# must fail as listed, and the script fails once it passes (then unlist it).
UDSFS_MOUNT_ARGS=(--allow-other --lanes)
source "$(dirname "$0")/lib.sh"

L4=$TMP/l4
build_attack_c adversarial_lanes4 "$L4"
# on UID kernel|udsfs ARGS...: the program as UID on kernel sockets or through `udsfs run`
# (its --front $FRONT when FRONT is set).
on() {
    local uid=$1 where=$2 dir=$TMP/k
    shift 2
    [ "$where" = kernel ] || dir=$MNT
    if [ "$where" = kernel ]; then
        as_uid "$uid" env L4_PATH="$dir/l4.sock" timeout 30 "$L4" "$@"
    else
        as_uid "$uid" env L4_PATH="$dir/l4.sock" UDSFS_PRELOAD="$PRELOAD_LIB" timeout 30 "$UDSFS_BIN" run ${FRONT:+--front "$FRONT"} --mount "$MNT" -- "$L4" "$@"
    fi
}
# same CASE ARGS...: the program's output on both, the same but for the lane's word.
same() {
    local c=$1
    shift
    k=$(on $A kernel "$@" 2>&1 || echo "status $?")
    u=$(on $A udsfs "$@" 2>&1 || echo "status $?")
    say "$c $*: kernel: $k"
    say "$c $*: udsfs:  $u"
    grep -q "lane direct" <<<"$u" || say "$c $*: no lane: $u"
    [ "${u%lane *}" = "${k%lane *}" ]
}
# same_each CASE WHAT LABEL ARGS...: `same CASE CASE ARGS` for each ARGS (the program's
# arguments as one word), then CASE's verdict: as on Linux with every ARGS; said as WHAT,
# then each "LABEL ARGS: udsfs's output (kernel: the kernel's)".
same_each() {
    local c=$1 what=$2 label=$3 args all=1 outs=()
    shift 3
    for args in "$@"; do
        # shellcheck disable=SC2086 # (the arguments' words)
        same "$c" "$c" $args || all=
        outs+=("$label $args: $u (kernel: $k)")
    done
    verdict "$c" "$all" "$what: $(printf '%s; ' "${outs[@]}")"
}

# sigclose: all four must be as on Linux
same_each sigclose "a SIGALRM handler closes (or dup2s a pipe onto) a laned end under the main thread's blocking read" \
    "SA_RESTART, dup2 a pipe =" "0 0" "0 1" "1 0" "1 1"

# forkcall
same_each forkcall "a thread's blocking read on a laned end across a fork whose child closes both ends" exec 0 1

# passclose
same passclose passclose && pc_ok=1 || pc_ok=
verdict passclose "$pc_ok" "three laned ends passed in one SCM_RIGHTS message and closed in the sender: $u (kernel: $k)"

# forkcall 2: the child writes to the end its parent claimed (the lane goes down under the
# parent's thread's read)
same forkcall forkcall 2 && fw_ok=1 || fw_ok=
verdict forkwrite "$fw_ok" "a thread's blocking read on a laned end; a forked child writes to its peer, which the parent claimed: $u (kernel: $k)"

# dupover
same dupover dupover && do_ok=1 || do_ok=
grep -q "q's byte" <<<"$u" && say "dupover: the old read took the other connection's byte"
verdict dupover "$do_ok" "a thread's blocking read on a laned end when another laned end is put at its number (dup2): $u (kernel: $k)"

# inetd
same inetd inetd && in_ok=1 || in_ok=
verdict inetd "$in_ok" "an accepted laned connection put at descriptors 0 and 1 (dup2) and its number closed: $(tr '\n' ' ' <<<"$u") (kernel: $(tr '\n' ' ' <<<"$k"))"

# recvedge
same_each recvedge "three laned ends received in one message with exactly three numbers free" \
    "RLIMIT_NOFILE, held =" "64 0" "20 0"
same downheld recvedge 64 1 && dh_ok=1 || dh_ok=
verdict downheld "$dh_ok" "three laned ends passed, received and closed (their lanes down), their peers still open, at RLIMIT_NOFILE 64: $u (kernel: $k)"

# evrace: the program closes its own files at the lanes' eventfd numbers while lanes come and go
ev_ok=1
same evrace evrace 64 400 || ev_ok=
verdict evrace "$ev_ok" "laned socketpairs made and closed while another thread puts /dev/null at 3/4 of RLIMIT_NOFILE 64 and closes it: $u (kernel: $k)"

# epdup: an epoll registration of a laned end whose number closes while a dup keeps its file
same_each epdup "a laned end's epoll registration when its number closes while a dup keeps its file" \
    "how =" 0 1 2 3 4

# sigclosew: a SIGALRM handler closes a laned end under the main thread's 1 MiB write
same_each sigclosew "a SIGALRM handler closes a laned end under the main thread's 1 MiB write" SA_RESTART 0 1

# flags: through the library, then the supervisor (a received socket's O_NONBLOCK comes
# from the sender's item, proto/src/passed.rs, on both fronts)
same flags flags && fl_ok=1 || fl_ok=
fl_lib=$(tr '\n' ' ' <<<"$u")
FRONT=seccomp same flags flags || fl_ok=
verdict flags "$fl_ok" "FD_CLOEXEC, O_NONBLOCK and numbers of new descriptors (socketpair, accept4, SCM_RIGHTS) after the move down: library: $fl_lib; supervisor: $(tr '\n' ' ' <<<"$u") (kernel: $(tr '\n' ' ' <<<"$k"))"

# emfile
same emfile emfile 64 && em_ok=1 || em_ok=
verdict emfile "$em_ok" "accept with one number left at RLIMIT_NOFILE 64: $u (kernel: $k)"

# acceptopen
same acceptopen acceptopen 200 && ao_ok=1 || ao_ok=
verdict acceptopen "$ao_ok" "200 accepts while other threads open pipes and laned socketpairs: $(tr '\n' ' ' <<<"$u") (kernel: $(tr '\n' ' ' <<<"$k"))"

# churn
same churn churn 400 256 && ch_ok=1 || ch_ok=
verdict churn "$ch_ok" "400 brief laned connections to a server at RLIMIT_NOFILE 256: $(tr '\n' ' ' <<<"$u") (kernel: $(tr '\n' ' ' <<<"$k"))"

# busyclose: B holds the busy words of its laned connection's region; A closes
cp "$LIB_DIR/adversarial_lanes4.py" "$TMP/l4.py"
cp "$LIB_DIR/lane_raw.py" "$TMP/lane_raw.py"
chmod 644 "$TMP/l4.py" "$TMP/lane_raw.py"
py() { # py UID kernel|udsfs ARGS...
    as_uid_on "$1" "$2" 30 /usr/bin/python3 "$TMP/l4.py" "${@:3}"
}
busyclose() {
    local where=$1 d=$TMP/k out=$TMP/bc.$1 sp
    [ "$where" = kernel ] || d=$MNT
    rm -f "$TMP/k/flag"
    py $A "$where" server "$d/bc.sock" "$TMP/k/flag" >"$out" 2>&1 &
    sp=$!
    for _ in $(seq 1000); do grep -q listening "$out" && break; sleep 0.01; done
    grep -q listening "$out" || fail "busyclose: A's server on $where: $(cat "$out")"
    bc_b=$(py $B "$where" client "$d/bc.sock" "$TMP/k/flag" 2>&1) || fail "busyclose: B's client on $where: $bc_b"
    wait $sp || fail "busyclose: A's server on $where: $(cat "$out")"
    bc_a=$(grep -v listening "$out")
}
busyclose kernel
k=$bc_a
busyclose udsfs
say "busyclose: B: $bc_b"
grep -q "lane direct" <<<"$bc_a" || say "busyclose: no lane: $bc_a"
verdict busyclose "$([ "${bc_a%(lane *}" = "${k%(lane *}" ] && echo 1)" \
    "B holds its laned connection's busy words up while A closes it: A: $bc_a (kernel: $k)"

grep -i "panick" "$LOG" && fail "the daemon panicked"
[ ${#failed[@]} -eq 0 ] || fail "$(printf '%s; ' "${failed[@]}")"
ok "every case as expected"
