#!/usr/bin/env bash
# adversarial_lanes5.sh: user B (uid 61072) against user A (uid 61071) and the daemon, on a
# --allow-other --lanes mount with a small --max-queued-bytes (2 MiB: 1 MiB a user, the
# default --user-share 50, of which a user's rings may take half: one stream lane's two
# rings of 262144, which hold what SO_SNDBUF's charges let in), now that lanes are on by
# default. The programs are
# integration/adversarial_lanes5.py (with lane_raw.py's helpers). Cases:
#  drain_share  B's server first fills socketpairs of its own (B's share of the queued
#               bytes, 1 MiB: laned, their rings are on it), then root's client writes 6
#               connections to it full (nonblocking, until a send takes no more): laned,
#               212992 bytes each, 1.2 MiB, on no share (root's rings are on none, as its
#               queues), every byte told sent. B's server then asks SIOCOUTQ on each
#               (through the daemon: the lane goes down and its ring's bytes go into the
#               engine's queue as root's sends, past the mount's 2 MiB with B's share),
#               then reads each to the count root wrote: every byte, in order, as on
#               kernel sockets (where the same steps give every byte). Before, the way
#               down's sends past the bound failed ENOBUFS and the rest of the ring was
#               dropped with a log line: a hole in root's stream that B made.
#  ring_payer   B's client connects 8 times to A's server and fills each connection (their
#               rings are on B's share: B made the connections, lane::payer); A's own
#               socketpair then fills as it did before B came (its lane, its ring), not
#               refused a lane or ENOBUFS for B's rings on A's share.
#  fionread     B's program asks FIONREAD of its own udsfs socket with Python's fcntl.ioctl,
#               whose buffer is a copy on Python's stack at any address (here not 4-aligned):
#               the count, as on kernel sockets. The library read the answer as an aligned
#               int (preload/src/lib.rs ioctl), which a debug build checks: the program
#               panicked ("misaligned pointer dereference") and aborted.
#  ring_bound   B's program makes 12 socketpairs and fills each one way until a send takes
#               no more: the bytes B holds unread stay within B's share of
#               --max-queued-bytes (1 MiB) and one pair's rings more (a send may pass it by
#               its last piece), as they do through the daemon (adversarial_exhaust.sh §4).
#               Before, the rings were on no bound but the lanes' count: B's 12 laned
#               pairs held 1572864 bytes (131072 a ring then).
# A case listed in integration/adversarial_lanes5_exceptions.txt is a known defect: it
# must fail as listed, and the script fails once it passes (then unlist it).
UDSFS_MOUNT_ARGS=(--allow-other --lanes --max-queued-bytes 2097152)
source "$(dirname "$0")/lib.sh"

attack_users adversarial_lanes5 61071 61072
chmod 0777 "$MNT"
mkdir -m 0755 "$TMP/py"
with_helpers "$TMP/py/l5.py" lane_raw.py <"$LIB_DIR/adversarial_lanes5.py"
chmod a+r "$TMP/py/l5.py"
mkdir -m 1777 "$TMP/k"
# on UID kernel|udsfs ARGS...: l5.py ARGS as UID on kernel sockets or through `udsfs run`.
on() {
    as_uid_on "$1" "$2" 40 python3 "$TMP/py/l5.py" "${@:3}"
}

# drain_share WHERE: A's client and B's server on WHERE; sets ds_client, ds_server.
drain_share() {
    local where=$1 d=$TMP/k flags=$TMP/ds.$1 sp cp
    [ "$where" = kernel ] || d=$MNT
    mkdir -m 1777 "$flags"
    on $B "$where" server "$d/ds.sock" 6 "$flags" 4 >"$TMP/ds_server.$where" 2>&1 &
    sp=$!
    for _ in $(seq 1000); do grep -qs listening "$TMP/ds_server.$where" && break; sleep 0.01; done
    grep -q listening "$TMP/ds_server.$where" || fail "drain_share: B's server on $where: $(cat "$TMP/ds_server.$where")"
    on 0 "$where" client "$d/ds.sock" 6 "$flags" >"$TMP/ds_client.$where" 2>&1 &
    cp=$!
    wait $sp || fail "drain_share: B's server on $where: $(cat "$TMP/ds_server.$where")"
    wait $cp || fail "drain_share: root's client on $where: $(cat "$TMP/ds_client.$where")"
    ds_client=$(grep client: "$TMP/ds_client.$where")
    ds_server=$(grep server: "$TMP/ds_server.$where")
    ds_held=$(grep "server held" "$TMP/ds_server.$where")
    say "drain_share on $where: $ds_client; $ds_server"
}
drain_share kernel
k=$ds_server
drain_share udsfs
laned=$(grep -o "lanes .*" <<<"$ds_client" | tr ',' '\n' | grep -c direct || true)
[ "$laned" -ge 5 ] || fail "drain_share: root's connections had no lanes ($ds_client): the case tried nothing"
verdict drain_share "$([ "$ds_server" = "$k" ] && echo 1)" \
    "B ($ds_held) takes the lanes of root's $laned full laned connections down (SIOCOUTQ) and reads them: $ds_server (kernel: $k)"

alone=$(on $A udsfs own_fill - 0 - 2>&1) || fail "ring_payer: A's fill alone: $alone"
mkdir -m 1777 "$TMP/rp"
on $A udsfs own_fill "$MNT/rp.sock" 8 "$TMP/rp" >"$TMP/rp_server" 2>&1 &
sp=$!
for _ in $(seq 1000); do grep -qs listening "$TMP/rp_server" && break; sleep 0.01; done
grep -qs listening "$TMP/rp_server" || fail "ring_payer: A's server: $(cat "$TMP/rp_server")"
rp_b=$(on $B udsfs client "$MNT/rp.sock" 8 "$TMP/rp" 2>&1) || fail "ring_payer: B's client: $rp_b"
wait $sp || fail "ring_payer: A's server: $(cat "$TMP/rp_server")"
under=$(grep own_fill: "$TMP/rp_server")
grep -q "lanes direct" <<<"$rp_b" || fail "ring_payer: B's connections had no lanes: $rp_b"
verdict ring_payer "$([ "$under" = "$alone" ] && echo 1)" \
    "A's own pair after B's 8 filled connections to A's server ($rp_b): $under (before B came: $alone)"

k=$(on $B kernel fionread 2>&1) || fail "fionread on kernel sockets: $k"
u=$(on $B udsfs fionread 2>&1) || true
verdict fionread "$([ "$u" = "$k" ] && echo 1)" "Python's fcntl.ioctl(FIONREAD) through udsfs run: $(head -c 300 <<<"$u") (kernel: $k)"

rb=$(on $B udsfs pairs 12 2>&1) || fail "ring_bound: B's pairs: $rb"
held=$(sed -n 's/.* hold \([0-9]*\) bytes.*/\1/p' <<<"$rb")
[ -n "$held" ] || fail "ring_bound: B's pairs said: $rb"
bound=$((1048576 + 524288))
verdict ring_bound "$([ "$held" -le $bound ] && echo 1)" \
    "B's 12 socketpairs filled: $rb; B's share of --max-queued-bytes and a pair's more: $bound"

grep -i "panick" "$LOG" && fail "the daemon panicked"
[ ${#failed[@]} -eq 0 ] || fail "$(printf '%s; ' "${failed[@]}")"
ok "every case as expected"
