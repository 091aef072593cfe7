#!/usr/bin/env bash
# A mount point whose path holds a space, a tab and a backslash: the kernel writes
# them as \040, \011 and \134 in /proc/self/mounts; `udsfs umount` must still find the
# mount and its daemon (it used to say "not mounted").
UDSFS_NO_MOUNT=1
source "$(dirname "$0")/lib.sh"

DIR="$TMP/a b"$'\t'"c\\d"
ESCAPED="$TMP/a\\040b\\011c\\134d"
mkdir "$DIR"
in_table() { grep -qF " $ESCAPED " /proc/self/mounts; }

out=$(timeout 30 "$UDSFS_BIN" mount --background --log-file "$LOG" "$DIR" </dev/null) ||
    fail "udsfs mount on '$DIR' failed: $out"
DAEMON_PID=$(printf '%s\n' "$out" | tail -n1 | tr -d '[:space:]')
[[ $DAEMON_PID =~ ^[0-9]+$ ]] || fail "udsfs mount printed '$out', want the daemon PID"
in_table || fail "the mount is not in /proc/self/mounts as $ESCAPED"
[ -e "$DIR/.udsfs/gc" ] || fail "$DIR/.udsfs/gc is missing"
ok "mounted on a path with a space, a tab and a backslash (daemon $DAEMON_PID)"

rc=0
out=$(timeout 10 "$UDSFS_BIN" umount "$DIR" 2>&1) || rc=$?
[ "$rc" -eq 0 ] || fail "udsfs umount exited with status $rc: $out"
ok "udsfs umount found it"
ended_within "$DAEMON_PID" 3000 || fail "daemon $DAEMON_PID still runs after udsfs umount"
! in_table || fail "still mounted after udsfs umount"
DAEMON_PID=
ok "the daemon got SIGTERM and the mount is gone"

rc=0
out=$(timeout 10 "$UDSFS_BIN" umount "$DIR" 2>&1) || rc=$?
[ "$rc" -ne 0 ] || fail "a second udsfs umount succeeded"
case $out in *"not mounted"*) ok "a second udsfs umount says: $out" ;; *) fail "second umount: '$out'" ;; esac
