#!/usr/bin/env bash
# Mount state a user can trust:
#   1. `udsfs mount` on a directory udsfs already serves is refused, naming the running
#      daemon's pid, and leaves that mount and its sockets alone (no second daemon
#      stacked on top);
#   2. after the daemon is killed (SIGKILL: no clean unmount), the mount point gives
#      ENOTCONN; `udsfs mount` there says it found a stale udsfs mount whose daemon is
#      gone, clears it and mounts: the new mount answers and only one mount is left.
source "$(dirname "$0")/lib.sh"

count_mounts() { awk -v m="$MNT" '$5 == m' /proc/self/mountinfo | wc -l; }

# ---- 1. a second mount on a live one
new_sock S dgram
ctl "$S_FD" "bind kept.sock" || fail "bind kept.sock"
rc=0
out=$(timeout 20 "$UDSFS_BIN" mount --background "$MNT" 2>&1) || rc=$?
[ "$rc" -ne 0 ] || fail "a second udsfs mount on a live mount succeeded: $out"
case $out in
*"already a udsfs mount"*"daemon pid $DAEMON_PID"*) ok "second mount refused: $out" ;;
*) fail "second mount refused without naming daemon $DAEMON_PID: $out" ;;
esac
expect_eq "mounts on $MNT after the refused mount" "$(count_mounts)" 1
[ -S "$MNT/kept.sock" ] || fail "kept.sock is hidden after the refused mount"
expect_status "$S" local kept.sock
ok "the first mount and its sockets are untouched"
# the foreground form is refused the same way
rc=0
out=$(timeout 20 "$UDSFS_BIN" mount "$MNT" 2>&1) || rc=$?
[ "$rc" -ne 0 ] && [[ $out == *"daemon pid $DAEMON_PID"* ]] || fail "foreground second mount: status $rc, $out"
ok "foreground second mount refused too"
close_fd "$S_FD"

# ---- 2. a stale mount after the daemon was killed
old=$DAEMON_PID
kill -KILL "$old"
ended_within "$old" 3000 || fail "daemon $old survived SIGKILL"
expect_errno ENOTCONN ls "$MNT"
rc=0
out=$(timeout 20 "$UDSFS_BIN" mount --background --log-file "$LOG" "$MNT" 2>&1) || rc=$?
[ "$rc" -eq 0 ] || fail "udsfs mount on the stale mount point failed (status $rc): $out"
case $out in
*"stale udsfs mount"*"daemon pid $old is gone"*"Transport endpoint is not connected"*"clearing it"*)
    ok "stale mount detected: $(head -n1 <<<"$out")" ;;
*) fail "udsfs mount on a stale mount point did not say what it found: $out" ;;
esac
DAEMON_PID=$(tail -n1 <<<"$out")
[[ $DAEMON_PID =~ ^[0-9]+$ ]] || fail "no daemon pid in '$out'"
expect_eq "mounts on $MNT after clearing the stale one" "$(count_mounts)" 1
new_sock T stream
ctl "$T_FD" "bind fresh.sock" || fail "bind on the new mount"
[ -S "$MNT/fresh.sock" ] || fail "fresh.sock missing on the new mount"
[ ! -e "$MNT/kept.sock" ] || fail "the old mount's kept.sock shows through the new mount"
ok "the new mount (daemon $DAEMON_PID) answers"
close_fd "$T_FD"
