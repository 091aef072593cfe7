#!/usr/bin/env bash
# SCM_RIGHTS through msg: a connected stream socket C (a client of the stream server at
# svc.sock, whose accepted end is S) is passed over a dgram carrier (T -> R at @broker)
# with `rights=C`, and every handle of C in this shell is closed. While in flight C
# lives on: its status says inflight=1, .udsfs/gc counts it, S stays connected, and a
# forced collection (`echo run > .udsfs/gc`) frees nothing. A separate receiver
# process reads the record with bash builtins, gets `rights=H`, opens
# .udsfs/sock/H/data and talks to S through it; when it exits, S sees EOF. A received
# socket nobody opens, and one whose message is never read, are released when the
# carrier's receiver closes (their peers see EOF). Both ends of a socketpair passed in
# one record over a stream carrier (`rights=X,Y`) arrive as two sockets still connected
# to each other. A dead cycle (each end of a pair in flight in the other's queue, all
# handles closed) is freed by the collector within 100 ms.
source "$(dirname "$0")/lib.sh"
export LC_ALL=C # read -N counts bytes

# gc_field KEY: the value of KEY in .udsfs/gc
gc_field() { sed -n "s/^$1=//p" "$U/gc"; }

# wait_eof FD WHAT: a read on FD (a stream data handle) must give EOF within 3 s.
wait_eof() {
    local got rc=0
    got=$(timeout 3 dd bs=4096 count=1 status=none <&"$1") || rc=$?
    [ "$rc" -ne 124 ] || fail "$2: no EOF within 3 s"
    [ "$rc" -eq 0 ] || fail "$2: read failed with status $rc"
    [ -z "$got" ] || fail "$2: read '$got', want EOF"
    ok "$2: EOF"
}

new_sock L stream
ctl "$L_FD" "bind svc.sock" || fail "bind svc.sock"
ctl "$L_FD" "listen" || fail "listen"

# connect VAR_C VAR_S: a client of svc.sock (ctl handle kept in VAR_C_FD) and the
# accepted end (its data open read-write on VAR_S_FD).
connect() {
    local a m fd ctlfd=${1}_FD
    new_sock "$1" stream
    ctl "${!ctlfd}" "connect svc.sock" || fail "connect svc.sock"
    exec {a}<"$U/sock/$L/accept" || fail "accept on $L"
    read -r m <&"$a" || fail "read the accepted socket's number"
    printf -v "$2" %s "$m"
    exec {fd}<>"$U/sock/$m/data" || fail "open sock/$m/data"
    printf -v "${2}_FD" %s "$fd"
    close_fd "$a"
}

new_sock R dgram
ctl "$R_FD" "bind @broker" || fail "bind @broker"
new_sock T dgram
ctl "$T_FD" "connect @broker" || fail "connect @broker"
ok "carrier: dgram $T connected to $R at @broker"

# ---- 1. pass C, close it here, look at it in flight
connect C S
ok "stream connection: client $C <-> accepted $S (server at svc.sock)"
expect_eq ".udsfs/gc inflight before the send" "$(gc_field inflight)" 0
printf 'len=13 rights=%s\nhere it comes' "$C" >"$U/sock/$T/msg" || fail "write 'len=13 rights=$C' to sock/$T/msg"
ok "sent a record with rights=$C from $T"
close_fd "$C_FD"
ok "closed this shell's only handle of $C: it lives only in $R's queue now"
expect_status "$C" inflight 1
expect_status "$C" state connected
expect_status "$R" rcvq_msgs 1
expect_eq ".udsfs/gc inflight while $C is in flight" "$(gc_field inflight)" 1
expect_status "$S" state connected
before=$(gc_field collections)
freed=$(gc_field freed)
echo run >"$U/gc" || fail "echo run > .udsfs/gc"
say ".udsfs/gc after a forced collection: $(tr '\n' ' ' <"$U/gc")"
[ "$(gc_field collections)" -gt "$before" ] || fail "echo run > .udsfs/gc ran no collection (collections=$(gc_field collections))"
expect_eq "sockets freed by the collection" "$(gc_field freed)" "$freed"
[ -d "$U/sock/$C" ] || fail "the forced collection freed the reachable in-flight socket $C"
expect_status "$C" inflight 1
ok "the collector left the reachable in-flight socket alone"

# ---- 2. a separate process receives it and talks to S through it
exec {rmsg}<"$U/sock/$R/msg"
# shellcheck disable=SC2016 # the receiver's own expansions
bash -c "$(declare -f recv_record)"'
    set -e
    export LC_ALL=C
    recv_record "$1"
    printf "%s\n" "$REC_HEADER" >"$2/header"
    printf "%s" "$REC_DATA" >"$2/payload"
    h=$REC_RIGHTS
    exec {d}<>"$3/sock/$h/data"
    printf "hello from the receiver" >&"$d"
    dd bs=4096 count=1 status=none <&"$d" >"$2/reply"
' receiver "$rmsg" "$TMP" "$U" 2>"$TMP/receiver.err" &
receiver=$!
got=$(timeout 5 dd bs=4096 count=1 status=none <&"$S_FD") || fail "reading on $S: $(cat "$TMP/receiver.err")"
say "record the receiver read: $(cat "$TMP/header") | payload: $(cat "$TMP/payload")"
H=$(sed -n 's/.*rights=\([0-9]*\).*/\1/p' "$TMP/header")
[[ $H =~ ^[0-9]+$ ]] || fail "the record has no rights=H: $(cat "$TMP/header")"
expect_eq "payload of the record" "$(cat "$TMP/payload")" "here it comes"
expect_eq "what $S read from the passed socket (.udsfs/sock/$H/data)" "$got" "hello from the receiver"
expect_status "$H" state connected
expect_status "$H" peer svc.sock
expect_status "$H" inflight 0
expect_eq "owner of .udsfs/sock/$H" "$(stat -c %U:%a "$U/sock/$H")" root:700
expect_eq ".udsfs/gc inflight after the receipt" "$(gc_field inflight)" 0
printf 'hello back' >&"$S_FD" || fail "write on $S"
ended_within "$receiver" 5000 || fail "the receiver did not get the reply within 5 s"
reap "$receiver"
[ "$REAPED_STATUS" -eq 0 ] || fail "the receiver exited with status $REAPED_STATUS: $(cat "$TMP/receiver.err")"
expect_eq "what the receiver read through .udsfs/sock/$H/data" "$(cat "$TMP/reply")" "hello back"
ok "the receiver talked to the original peer $S through the received socket $H"
wait_eof "$S_FD" "the receiver exited (last handle of the passed socket): read on $S"
sock_gone "$H" || fail ".udsfs/sock/$H still exists after its last handle closed"

# ---- 3. received but never opened; sent but never received: released with the receiver
connect C2 S2
connect C3 S3
printf 'len=3 rights=%s\none' "$C2" >"$U/sock/$T/msg" || fail "send rights=$C2"
printf 'len=3 rights=%s\ntwo' "$C3" >"$U/sock/$T/msg" || fail "send rights=$C3"
close_fd "$C2_FD"
close_fd "$C3_FD"
expect_eq ".udsfs/gc inflight with two sockets in flight" "$(gc_field inflight)" 2
expect_status "$R" rcvq_msgs 2
recv_record "$rmsg" || fail "read the record carrying $C2"
say "record read (rights not opened): $REC_HEADER"
H2=$REC_RIGHTS
[[ $H2 =~ ^[0-9]+$ ]] || fail "the record has no rights=: $REC_HEADER"
[ -d "$U/sock/$H2" ] || fail ".udsfs/sock/$H2 does not exist after the receipt"
expect_status "$S2" state connected
ok "$C2 received as $H2 but not opened; $C3's message still queued at $R"
close_fd "$rmsg"
close_fd "$R_FD"
ok "closed the carrier's receiver $R"
wait_eof "$S2_FD" "received socket $H2 that nobody opened, released with $R: read on $S2"
wait_eof "$S3_FD" "socket $C3 whose message was never read, released with $R: read on $S3"
sock_gone "$H2" || fail ".udsfs/sock/$H2 still exists after $R closed"
start=$(now_ms)
until [ "$(gc_field inflight)" == 0 ]; do
    [ $(($(now_ms) - start)) -le 2000 ] || fail ".udsfs/gc still says inflight=$(gc_field inflight) 2 s after $R closed"
    sleep 0.005
done
ok ".udsfs/gc inflight=0 once the carrier closed"
say ".udsfs/gc at the end: $(tr '\n' ' ' <"$U/gc")"

# ---- 4. two sockets in one record, over a stream carrier
new_pair K stream # the carrier
exec {kn}>"$U/sock/$K_N/msg" {km}<"$U/sock/$K_M/msg"
new_pair X stream # the pair to pass, both ends
printf 'len=4 rights=%s,%s\nboth' "$X_N" "$X_M" >&"$kn" || fail "send rights=$X_N,$X_M over the stream carrier"
close_fd "$X_FD"
expect_eq ".udsfs/gc inflight with both ends of $X_N <-> $X_M in flight" "$(gc_field inflight)" 2
expect_status "$K_M" rcvq_msgs 1
recv_record "$km" || fail "read the record from the stream carrier $K_M"
say "record from the stream carrier: $REC_HEADER | payload: $REC_DATA"
[[ $REC_RIGHTS =~ ^([0-9]+),([0-9]+)$ ]] || fail "want rights=H1,H2 in '$REC_HEADER'"
H1=${BASH_REMATCH[1]}
H2=${BASH_REMATCH[2]}
expect_eq "payload" "$REC_DATA" both
exec {h1}<>"$U/sock/$H1/data" {h2}<>"$U/sock/$H2/data"
printf 'across the received pair' >&"$h1"
expect_eq "what $H2 read after a write on $H1" "$(dd bs=4096 count=1 status=none <&"$h2")" "across the received pair"
printf 'and back' >&"$h2"
expect_eq "what $H1 read after a write on $H2" "$(dd bs=4096 count=1 status=none <&"$h1")" "and back"
ok "both ends of a socketpair passed in one record still talk to each other as $H1 <-> $H2"
close_fd "$h1"
close_fd "$h2"

# ---- 5. a dead cycle is collected
new_pair Y stream
exec {yn}>"$U/sock/$Y_N/msg" {ym}>"$U/sock/$Y_M/msg"
printf 'len=1 rights=%s\na' "$Y_N" >&"$yn" || fail "send $Y_N over itself (into $Y_M's queue)"
printf 'len=1 rights=%s\nb' "$Y_M" >&"$ym" || fail "send $Y_M over itself (into $Y_N's queue)"
freed=$(gc_field freed)
expect_status "$Y_N" inflight 1
expect_status "$Y_M" inflight 1
t0=$(now_ms)
close_fd "$yn"
close_fd "$ym"
close_fd "$Y_FD"
while [ -e "$U/sock/$Y_N" ] || [ -e "$U/sock/$Y_M" ]; do
    [ $(($(now_ms) - t0)) -le 3000 ] || fail "the dead cycle $Y_N <-> $Y_M still exists 3 s after its last handle closed: $(tr '\n' ' ' <"$U/gc")"
    sleep 0.002
done
ms=$(($(now_ms) - t0))
say "dead cycle $Y_N <-> $Y_M freed $ms ms after its last handle closed; .udsfs/gc: $(tr '\n' ' ' <"$U/gc")"
[ "$ms" -le 150 ] || fail "the dead cycle took $ms ms to be freed (SPEC: within 100 ms; limit 150 ms)"
expect_eq "sockets freed by the collector" "$(gc_field freed)" $((freed + 2))
ok "the collector freed the unreachable cycle"
