#!/usr/bin/env bash
# adversarial_pins.sh: user B (uid 61082) against user A (uid 61081) through the daemon's
# pins (src/engine/pins.rs: one pidfd per live process and holding user, shared by what
# that user's sockets and received files refer to, charged to it), on an --allow-other
# mount whose daemon
# runs with RLIMIT_NOFILE 1024 (clients' descriptors: 512, src/engine/fds.rs) and
# --user-share 5 (25 descriptors a user). The programs are integration/adversarial_pins.py.
# Cases:
#  payer  B's server accepts and keeps every connection; 40 short-lived processes of A
#         each connect to it and exit (their sockets closed). A then makes a socketpair of
#         its own, passes a pipe end over it (SCM_RIGHTS) and asks SO_PEERPIDFD: as on
#         kernel sockets ("pass ok peerpidfd ok"), and as A's probe got before B's server
#         came. A connect pins the connecting process, charged to A; B's accept makes
#         the pin B's (as Linux charges a file to whoever holds it). Before, B's accepted
#         sockets kept A's charge after A's processes were gone: A's own passing was
#         refused (ETOOMANYREFS) and its SO_PEERPIDFD said ENODATA until B let go.
#  payer.freed  the same probe after B's server exits: as before (the charge comes back).
#  dodge  while B keeps those 40 connections, the daemon holds at most B's share (25) of
#         pins more: each copy is charged to B, past its share B's SO_PEERPIDFD says
#         ENODATA; none is charged to nobody.
#  payer_netns  as payer, each of A's processes in a user and network namespace of its
#         own (src/engine/netns_pin.rs: a descriptor per namespace): B's accept makes the
#         namespace's pin B's, and a closed socket that B's peer keeps holds none. Before,
#         A's 26th process could not make a socket (ENFILE).
#  queued as payer, each of A's processes also sends a byte; B's server has SO_PASSPIDFD
#         and reads nothing: each message holds its sender's pin, charged to the sender.
#         Listed (see the exceptions file).
#  reuse  B's reader in a pid namespace of its own (unshare -Urpf) listens; a client of
#         that namespace connects and exits; root (outside) gives the client's pid to a
#         new process of the namespace (ns_last_pid, setns, fork); the reader then accepts
#         and reads SO_PEERCRED: the dead client's pid, as on kernel sockets, not the new
#         process's (src/engine/pidns.rs: the pid's namespace and number there are read
#         when it is pinned, not at the read).
#  churn  2000 short-lived processes of A, 200 alive at once, each pinned by a socketpair
#         of its own (and asking SO_PEERPIDFD, claimed over a channel connection each):
#         past A's share they get ENODATA/ETOOMANYREFS, the daemon's descriptors stay
#         within A's share of the count before and come back to it after, B's probe works
#         meanwhile, and the daemon's log gets a handful of warnings a second. Before, each refused
#         channel connection logged its own line (src/fdchannel.rs): 2040 in 3 s.
# A case listed in integration/adversarial_pins_exceptions.txt is a known defect: it must
# fail as listed, and the script fails once it passes (then unlist it).
UDSFS_NO_MOUNT=1
source "$(dirname "$0")/lib.sh"

attack_users adversarial_pins 61081 61082
mkdir -m 0755 "$TMP/py"
with_helpers "$TMP/py/pins.py" <"$LIB_DIR/adversarial_pins.py"
cp "$LIB_DIR/pid_reuse.py" "$TMP/py/"
chmod a+r "$TMP/py/pins.py" "$TMP/py/pid_reuse.py"
mkdir -m 1777 "$TMP/k"
ulimit -n 1024
udsfs_mount --allow-other --user-share 5
chmod 0777 "$MNT"

# on UID kernel|udsfs ARGS...: pins.py ARGS as UID on kernel sockets or through `udsfs run`.
on() {
    as_uid_on "$1" "$2" 30 python3 "$TMP/py/pins.py" "${@:3}"
}

# held_by_b WHERE SERVER CLIENTS: A's probe before, while B's SERVER (pins.py hold or
# holdpass) keeps what 40 exited processes of A's CLIENTS (pins.py clients, nsclients or
# senders) made, and after B's server exits; sets p_before, p_held, p_after and, on udsfs,
# fds_held (the daemon's descriptors while B holds them).
held_by_b() {
    local where=$1 server=$2 clients=$3 d=$TMP/k sp out=$TMP/held.$1.$2.$3
    local stop=$TMP/stop.$1.$2.$3 sock=held.$2.$3.sock
    [ "$where" = kernel ] || d=$MNT
    p_before=$(on $A "$where" probe 2>>"$TMP/probe.err")
    on $B "$where" "$server" "$d/$sock" "$stop" >"$out" 2>&1 &
    sp=$!
    for _ in $(seq 1000); do grep -qs listening "$out" && break; sleep 0.01; done
    grep -q listening "$out" || fail "$clients: B's server on $where: $(cat "$out")"
    on $A "$where" "$clients" "$d/$sock" 40 >"$out.clients" 2>&1 ||
        fail "$clients: A's clients on $where: $(cat "$out.clients")"
    [ "$where" = kernel ] || fds_held=$(fds)
    p_held=$(on $A "$where" probe 2>>"$TMP/probe.err")
    touch "$stop"
    wait $sp || fail "$clients: B's server on $where: $(cat "$out")"
    p_done=$(cat "$out.clients")
    [[ $p_done != *" 40 of 40 done" ]] || grep -q "held 40" "$out" || fail "$clients: B's server on $where held not 40: $(cat "$out")"
    sleep 0.2 # the closer threads give the charges back
    p_after=$(on $A "$where" probe 2>>"$TMP/probe.err")
    say "$clients on $where: $p_done; A's probe before: $p_before; B holding: $p_held; after: $p_after"
}
fds() { find "/proc/$DAEMON_PID/fd" -mindepth 1 | wc -l; }

# case CASE SERVER CLIENTS: held_by_b on both; CASE's verdict: A's probe while B holds as
# on the kernel; CASE.freed: after B lets go.
case_held() {
    local c=$1
    held_by_b kernel "$2" "$3"
    k_held=$p_held k_done=$p_done
    held_by_b udsfs "$2" "$3"
    [ "$p_before" = "$k_held" ] || fail "$c: A's probe through udsfs before B came: $p_before (kernel: $k_held): the case tries nothing"
    verdict "$c" "$([ "$p_held" = "$k_held" ] && [ "$p_done" = "$k_done" ] && echo 1)" \
        "A's socketpair while B keeps what 40 of A's exited processes made: $p_held; $p_done (kernel: $k_held; $k_done)"
    verdict "$c.freed" "$([ "$p_after" = "$k_held" ] && echo 1)" \
        "A's socketpair after B's server exits: $p_after (kernel: $k_held)"
}
base_fds=$(fds)
case_held payer hold clients
# dodge: the copies B's sockets keep are charged to B (its share: 25), none to nobody.
verdict dodge "$([ "$fds_held" -le $((base_fds + 25 + 4)) ] && echo 1)" \
    "the daemon's descriptors while B keeps 40 of A's connections: $fds_held ($base_fds before; B's share 25)"
case_held payer_netns hold nsclients
case_held queued holdpass senders

# reuse WHERE: B's reader in a pid namespace of its own (unshare -Urpf) on WHERE, root's
# reuser outside; sets reuse_got.
reuse() {
    local where=$1 d=$TMP/k signs=$TMP/signs.$1 rp
    [ "$where" = kernel ] || d=$MNT
    mkdir -m 1777 "$signs"
    if [ "$where" = kernel ]; then
        as_uid $B timeout 40 unshare -Urpf python3 "$TMP/py/pins.py" reader "$d/r.sock" "$signs" >"$TMP/reader.$where" 2>&1 &
    else
        as_uid $B env UDSFS_PRELOAD="$PRELOAD_LIB" timeout 40 unshare -Urpf "$UDSFS_BIN" run --mount "$MNT" -- python3 "$TMP/py/pins.py" reader "$d/r.sock" "$signs" >"$TMP/reader.$where" 2>&1 &
    fi
    rp=$!
    python3 "$TMP/py/pins.py" reuser "$signs" >"$TMP/reuser.$where" 2>&1 || fail "reuse: root's reuser on $where: $(cat "$TMP/reuser.$where")"
    wait $rp || fail "reuse: B's reader on $where: $(cat "$TMP/reader.$where")"
    grep -q "reused: True" "$TMP/reuser.$where" || fail "reuse: the dead client's pid did not recur on $where: the case tried nothing"
    reuse_got=$(grep peercred: "$TMP/reader.$where")
    say "reuse on $where: $reuse_got"
}
reuse kernel
k=$reuse_got
reuse udsfs
verdict reuse "$([ "$reuse_got" = "$k" ] && echo 1)" \
    "SO_PEERCRED of a dead client whose pid a new process of the reader's namespace took: $reuse_got (kernel: $k)"

# churn: A's 2000 short-lived processes, 200 alive at once, each pinned by a socketpair.
on $A udsfs probe >/dev/null 2>>"$TMP/probe.err"
sleep 0.3
base=$(fds)
warns=$(grep -c "WARN" "$LOG" || true)
mkdir -m 1777 "$TMP/signs.churn"
t0=$(now_ms)
on $A udsfs churn 10 200 "$TMP/signs.churn" >"$TMP/churn.out" 2>"$TMP/churn.err" &
cp=$!
wait_for "$TMP/signs.churn/full" 20 "A's first round of 200" "$TMP/churn.out"
during=$(fds)
b_probe=$(on $B udsfs probe 2>>"$TMP/probe.err")
touch "$TMP/signs.churn/probed"
wait $cp || fail "churn: A's processes: $(tail -3 "$TMP/churn.err")"
churned=$(cat "$TMP/churn.out")
for _ in $(seq 100); do [ "$(fds)" -le $((base + 2)) ] && break; sleep 0.05; done
secs=$(((($(now_ms) - t0) + 999) / 1000))
after=$(fds)
new_warns=$(($(grep -c "WARN" "$LOG" || true) - warns))
say "churn: $churned in $(($(now_ms) - t0)) ms; daemon descriptors: $base before, $during with 200 alive, $after after; B's probe meanwhile: $b_probe; $new_warns warnings logged"
kill -0 "$DAEMON_PID" || fail "churn: the daemon is gone"
[[ $churned == *"ok="* ]] || fail "churn: no process of A got its pidfd: $churned: the case tried nothing"
# A holds at most its share (25), and the daemon's own reads come and go (a few more);
# each refusal's call site logs at most a line a second (log_limit.rs), a handful of sites.
verdict churn "$([ "$after" -le $((base + 2)) ] && [ "$during" -le $((base + 40)) ] && [ "$b_probe" = "probe: pass ok peerpidfd ok" ] && [ "$new_warns" -le $((8 * secs + 8)) ] && echo 1)" \
    "2000 of A's processes pinned, 200 at once: daemon descriptors $base, $during, $after; B: $b_probe; $new_warns warnings in $secs s"

[ ${#failed[@]} -eq 0 ] || fail "${failed[*]}"
say "PASS"
