#!/usr/bin/env bash
# Ending the daemon: SIGTERM, SIGINT or `udsfs umount` unmount cleanly (the mount leaves
# /proc/mounts, the daemon exits, the directory is usable again), and a `cat` parked in
# the mount ends with an error instead of hanging, even while this shell still holds
# open files in the mount.
UDSFS_NO_MOUNT=1
source "$(dirname "$0")/lib.sh"

# How long the daemon and a parked reader may take to go.
LIMIT=${UDSFS_UNMOUNT_LIMIT_MS:-3000}

in_proc_mounts() { grep -q " $MNT " /proc/mounts; }

end_daemon() { # end_daemon HOW
    case $1 in
    SIGTERM) kill -TERM "$DAEMON_PID" ;;
    SIGINT) kill -INT "$DAEMON_PID" ;;
    umount)
        local ms rc=0
        timed ms timeout 10 "$UDSFS_BIN" umount "$MNT" || rc=$?
        [ "$rc" -eq 0 ] || fail "udsfs umount $MNT exited with status $rc"
        say "udsfs umount returned after $ms ms"
        [ "$ms" -le "$LIMIT" ] || fail "udsfs umount took $ms ms (limit $LIMIT ms)"
        ;;
    esac
}

for how in ${UNMOUNT_WAYS:-SIGTERM SIGINT umount}; do
    say "--- ending the daemon with $how"
    udsfs_mount
    in_proc_mounts || fail "$MNT is not in /proc/mounts after the mount"
    new_sock S dgram
    ctl "$S_FD" "bind parked.sock" || fail "bind parked.sock"
    env --default-signal=INT,TERM cat "$U/sock/$S/data" >"$TMP/cat.out" 2>"$TMP/cat.err" &
    reader=$!
    wait_parked "$reader"
    ok "cat $reader parked on .udsfs/sock/$S/data; this shell holds its ctl fd"

    daemon=$DAEMON_PID
    t0=$(now_ms)
    end_daemon "$how"
    ended_within "$reader" "$LIMIT" "$t0" ||
        fail "after $how the cat parked in the mount still runs after $ELAPSED_MS ms (wchan $(cat "/proc/$reader/wchan" 2>/dev/null))"
    reap "$reader"
    say "the parked cat ended $ELAPSED_MS ms after $how, exit status $REAPED_STATUS: $(cat "$TMP/cat.err")"
    [ "$REAPED_STATUS" -ne 0 ] || fail "the parked cat exited 0 after $how; want an error"
    ok "the parked cat ended with an error, not a hang"

    ended_within "$daemon" "$LIMIT" "$t0" || fail "daemon $daemon still runs $ELAPSED_MS ms after $how"
    ok "daemon $daemon exited $ELAPSED_MS ms after $how"
    DAEMON_PID=
    ! in_proc_mounts || fail "$MNT is still in /proc/mounts after $how"
    ok "$MNT is gone from /proc/mounts"
    close_fd "$S_FD"
    listing=$(ls -A "$MNT") || fail "ls $MNT failed after $how"
    [ -z "$listing" ] || fail "$MNT is not the empty directory again after $how: $listing"
    ok "$MNT is a plain empty directory again"
done

# A daemon started in its own pid namespace writes the pid it sees there into the mount
# source: `udsfs umount` must not signal whatever has that pid out here (a decoy, made
# to share it), and still takes the mount down (by detaching it; the daemon then sees
# its device go).
command -v unshare >/dev/null || fail "unshare (util-linux) is needed"
sleep 300 &
decoy=$!
# ns_last_pid acts on the writer's pid namespace: the daemon, forked by the mount
# command, gets the next pid
timeout 30 unshare --pid --fork bash -c "echo $((decoy - 1)) >/proc/sys/kernel/ns_last_pid && exec \"\$0\" mount --background --log-file \"\$1\" \"\$2\"" \
    "$UDSFS_BIN" "$LOG" "$MNT" >/dev/null || fail "mount in a new pid namespace failed"
mounted "$MNT" || fail "the mount made in a new pid namespace is not there"
src=$(awk -v m="$MNT" '$2 == m { print $1 }' /proc/self/mounts)
expect_eq "mount source of the daemon in its own pid namespace" "$src" "udsfs:$decoy"
"$UDSFS_BIN" umount "$MNT" || fail "udsfs umount of the pid-namespace mount failed"
! mounted "$MNT" || fail "$MNT still mounted after udsfs umount"
sleep 0.2
proc_alive "$decoy" || fail "udsfs umount signalled host pid $decoy, which only shares the daemon's pid in its namespace"
kill "$decoy"
ok "udsfs umount detached the pid-namespace mount and left host pid $decoy alone"
