#!/usr/bin/env bash
# The daemon holds at most --max-parked waiting requests: past the bound a
# read that would wait fails at once with ENOBUFS (and a log line), and
# room comes back when a waiter ends.
UDSFS_MOUNT_ARGS=(--max-parked 4)
source "$(dirname "$0")/lib.sh"

cd "$MNT" || fail "cd $MNT"
pids=()
for i in 1 2 3 4; do
    exec {fd}<> .udsfs/dgram/clone
    read -r n <&"$fd"
    cat ".udsfs/sock/$n/data" >/dev/null 2>&1 {fd}>&- &
    pids+=($!)
    wait_parked "${pids[-1]}"
done
ok "4 readers wait in the daemon"

exec {fd5}<> .udsfs/dgram/pair
read -r n5 m5 <&"$fd5"
rc=0
out=$(timeout 5 cat ".udsfs/sock/$n5/data" 2>&1) || rc=$?
[ "$rc" -ne 124 ] || fail "a fifth reader waited past --max-parked 4"
case "$out" in
    *"No buffer space available"*) ok "the fifth reader gets ENOBUFS at once" ;;
    *) fail "the fifth reader: status $rc, output '$out', want ENOBUFS" ;;
esac
grep -q "ENOBUFS" "$LOG" || fail "no log line for the refused request"
ok "the daemon logged it"

kill -9 "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
dd bs=64k count=1 status=none < ".udsfs/sock/$n5/data" > "$TMP/got" {fd5}>&- &
reader=$!
wait_parked "$reader"
echo "room again" > ".udsfs/sock/$m5/data" || fail "send to socket $m5"
wait "$reader" || fail "the reader that waited failed"
[ "$(cat "$TMP/got")" = "room again" ] || fail "after a waiter ended: read '$(cat "$TMP/got")'"
ok "room comes back when a waiter ends"
for p in "${pids[@]:1}"; do kill -9 "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
