#!/usr/bin/env bash
# The fd channel's path socket (src/fdchannel.rs: `fdchannel` in /run/udsfs-PID for a
# root daemon, /tmp/udsfs-PID for a user's, else a random suffix; the second line of
# .udsfs/fdchannel) against other, unprivileged users. V (61091) is the victim and the
# owner of a user's daemon, B (61092) the attacker, C (61093) another user. A user's
# daemon mounts through fusermount3 in a mount namespace of its own, where /dev/fuse is
# 0666 and fuse.conf says user_allow_other (bind mounts there; nothing of the host's
# changes); its path socket is in the host's /tmp all the same.
#  1. catch: root's --allow-other daemon in a network namespace of its own (as a unit
#     with PrivateNetwork=yes); B binds its abstract name @udsfs-fdpass-PID in the
#     host's, which the daemon does not hold there. V, in `unshare -Ur` (its own user
#     namespace: the daemon's uid 0 and B's both read as the overflow uid there),
#     passes a file only V may read through `udsfs run` (both fronts): the file must
#     arrive, and B must catch none (before the client's pid check, B caught it:
#     Client::connect took B's listener for the daemon, the uids being equal there).
#     V in `unshare -Urpf --mount-proc` (its own pid namespace too, which does not show the daemon's
#     pid either) cannot tell the daemon from B at the name, and passes through the
#     daemon's path, which nobody else can hold (as Go's tests in `unshare -Urnpf`,
#     run_go_tests.sh userns): the file arrives, B catches none (before: B caught it);
#  2. predicted pids: before a user's daemon mounts, B makes /tmp/udsfs-P for the next
#     pids P, as (a) directories of B's (0777) with B's listening `fdchannel` in them,
#     (b) plain files, (c) symlinks to a directory of V's (0700); three mounts, one for
#     each. The daemon must publish a directory of its own (V's, 0755, the socket
#     0666) with a random suffix; V's directory must stay as it was, B's sockets get no
#     connection when V (in `unshare -Urn`: the path is all it reaches) passes a file;
#     at exit the daemon removes its own directory and nothing of B's or V's;
#  3. who may connect at the path: V's daemon without --allow-other refuses B there
#     (EACCES), B in `unshare -Ur` (root there), and in `unshare -Urn`; V in `unshare
#     -Urn` and root are served;
#  4. a connection V made, handed to B: B's deposit and claim refused (EACCES);
#  5. floods on V's --allow-other daemon (RLIMIT_NOFILE 1024): B opens 1500 connections,
#     half at the path, half at the name: both count on B's share (ETOOMANYREFS past
#     it), the daemon's descriptors stay below its reserve; B in `unshare -Ur` is
#     still B (refused, not served as root, who has no share); C is served; a stalled
#     connection (claims sent, answers never read) does not stop C's deposits.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_NO_MOUNT=1
source "$(dirname "$0")/lib.sh"
export LC_ALL=C

need_cmd setpriv util-linux unshare util-linux nsenter util-linux fusermount3 fuse3
need_preload
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
chmod 755 "$TMP"
V=61091
B=61092
C=61093
PY=/usr/bin/python3
cp "$LIB_DIR/adversarial_fdpath.py" "$TMP/att.py"
chmod 644 "$TMP/att.py"
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }
# bg_as UID OUT CMD...: CMD as UID in the background, its output in OUT; sets BG_PID (the
# program's own pid: setpriv execs it, and no subshell stands between).
bg_as() {
    local u=$1 out=$2
    shift 2
    setpriv --reuid="$u" --regid="$u" --clear-groups "$@" >"$out" 2>&1 &
    BG_PID=$!
}
# b_squats: B's entries /tmp/udsfs-P (find's complaint of another test's entry gone
# meanwhile is no failure here).
b_squats() { find /tmp -maxdepth 1 -name 'udsfs-[0-9]*' -user $B 2>/dev/null || true; }
field() { sed -n "s/.*\<$2=\([^ ]*\).*/\1/p" "$1"; }
as $V unshare -Urn true 2>/dev/null || fail "user namespaces are closed to user $V here"

# ---- user daemons: V's, through fusermount3, in a mount namespace of their own
USER_DAEMONS=()
stop_user_daemons() {
    local p
    for p in ${USER_DAEMONS[@]+"${USER_DAEMONS[@]}"}; do
        kill -TERM "$p" 2>/dev/null && ended_within "$p" 3000 || kill -KILL "$p" 2>/dev/null
    done
    USER_DAEMONS=()
    # B's squats, if a case failed before removing them (its squatter first: it may
    # be making them still)
    [ -z "${SQUATTER:-}" ] || { kill -KILL "$SQUATTER" && wait "$SQUATTER"; } 2>/dev/null
    b_squats | xargs -r rm -rf
}
# (lib.sh's `set -e` stays off here: the status goes on to _lib_cleanup)
trap 'rc=$?; set +e; stop_user_daemons; (exit $rc); _lib_cleanup' EXIT
mkdir -m 0755 "$TMP/ns"
mknod -m 0666 "$TMP/ns/fuse" c 10 229
echo user_allow_other >"$TMP/ns/fuse.conf"
cp /etc/passwd "$TMP/ns/passwd"
echo "udsfsv:x:$V:$V::/:/bin/sh" >>"$TMP/ns/passwd"
chmod 644 "$TMP/ns/passwd" "$TMP/ns/fuse.conf"
# user_mount DIR [OPTIONS...]: V's daemon on DIR (made here), with RLIMIT_NOFILE $NOFILE
# if set; sets UPID, UCHAN (the published path) and UDIR (its directory).
user_mount() {
    local dir=$1 out
    shift
    mkdir -m 0755 "$dir" && chown $V "$dir"
    # shellcheck disable=SC2016 # expanded by the inner sh
    out=$(cd / && NOFILE=${NOFILE:-} timeout 30 unshare -m --propagation private sh -c '
        mount --bind "$1/fuse" /dev/fuse && mount --bind "$1/fuse.conf" /etc/fuse.conf &&
            mount --bind "$1/passwd" /etc/passwd || exit 1
        [ -z "$NOFILE" ] || ulimit -n "$NOFILE" || exit 1
        shift
        exec setpriv --reuid='$V' --regid='$V' --clear-groups "$@"' sh "$TMP/ns" \
        "$UDSFS_BIN" mount --background --log-file "$TMP/ulog" "$@" "$dir" 2>&1) ||
        fail "V's mount of $dir: $out"
    UPID=$(tail -n1 <<<"$out" | tr -d '[:space:]')
    [[ $UPID =~ ^[0-9]+$ ]] || fail "V's mount printed '$out', want the daemon's pid"
    USER_DAEMONS+=("$UPID")
    UCHAN=$(in_user_mount setpriv --reuid=$V --regid=$V --clear-groups cat "$dir/.udsfs/fdchannel" | sed -n 2p)
    UDIR=$(dirname "$UCHAN")
    say "V's daemon $UPID on $dir${*:+ ($*)}: .udsfs/fdchannel's path $UCHAN"
}
in_user_mount() { nsenter -t "$UPID" -m -- "$@"; }
user_unmount() {
    kill -TERM "$UPID"
    ended_within "$UPID" 5000 || fail "V's daemon $UPID did not end at SIGTERM"
    USER_DAEMONS=()
}
: >"$TMP/ulog" && chown $V "$TMP/ulog"
echo "V's own" >"$TMP/secret" && chown $V "$TMP/secret" && chmod 0600 "$TMP/secret"
# passes_as_v MNT NS FRONT: the secret passed through `udsfs run` on the mount MNT by V
# in `unshare NS`.
passes_as_v() {
    local mnt=$1 ns=$2 front=$3
    # shellcheck disable=SC2086 # ns: unshare's options, a word each
    as $V env UDSFS_PRELOAD="$PRELOAD_LIB" unshare $ns timeout 30 \
        "$UDSFS_BIN" run --mount "$mnt" --front "$front" -- $PY "$TMP/att.py" passfile "$TMP/secret" 2>&1 || true
}

# ---- 1. catch: the daemon's abstract name, bound by B where the daemon is not
UDSFS_MOUNT_VIA=(unshare -n)
udsfs_mount --allow-other
UDSFS_MOUNT_VIA=()
NAME=$(head -n1 "$U/fdchannel")
say "root's daemon $DAEMON_PID in a network namespace of its own: .udsfs/fdchannel: $(tr '\n' ' ' <"$U/fdchannel")"
mkdir -m 0777 "$TMP/signs"
bg_as $B "$TMP/catch.err" $PY "$TMP/att.py" catch "$NAME" 60 "$TMP/signs/catch"
CATCHER=$BG_PID
wait_for "$TMP/signs/catch" 10 "B's catcher did not start" "$TMP/catch.err"
for front in preload seccomp; do
    # (--mount-proc: the supervisor reads its program's /proc/TID; the host's /proc
    # there would be another process's, a known limit of the supervisor)
    for ns in -Ur "-Urpf --mount-proc"; do
        got=$(passes_as_v "$MNT" "$ns" "$front")
        say "attack: B holds @$NAME in the host's network namespace; V in unshare $ns passes its file ($front front): $(tr '\n' ';' <<<"$got") B: $(cat "$TMP/signs/catch")"
        [ "$(field "$TMP/signs/catch" caught)" = none ] || fail "B caught V's file at @$NAME (V in unshare $ns, $front front): $(cat "$TMP/signs/catch")"
        [ "$got" = "passed: V's own" ] || fail "V's file not passed (unshare $ns, $front front) beside B's listener: $got"
    done
done
kill "$CATCHER" 2>/dev/null || true
ok "catch: V's file passed through the daemon's path (its pid seen or not); B's listener at the daemon's name caught none"

# ---- 2. predicted pids
mkdir -m 0700 "$TMP/vdir" && chown $V "$TMP/vdir"
mkdir -m 0777 "$TMP/bsigns"
for kind in sock file "link:$TMP/vdir"; do
    first=$(($(cat /proc/sys/kernel/ns_last_pid) + 1))
    rm -f "$TMP/bsigns/stop" "$TMP/bsigns/squat"
    bg_as $B "$TMP/squat.err" $PY "$TMP/att.py" squat "$kind" "$first" 3000 "$TMP/bsigns/squat" "$TMP/bsigns/stop"
    SQUATTER=$BG_PID
    wait_for "$TMP/bsigns/squat" 30 "B's squatter did not start" "$TMP/squat.err"
    made=$(field "$TMP/bsigns/squat" made)
    squats=$(b_squats | wc -l)
    user_mount "$TMP/um-${kind%%:*}" --allow-other
    say "attack: B made $made of /tmp/udsfs-P ($kind) for pids $first..$((first + 2999)); V's daemon is $UPID"
    # (past pid_max - 1 Linux goes on at 300, as the squats do: att.py pid_range)
    top=$(cat /proc/sys/kernel/pid_max)
    off=$((UPID >= first ? UPID - first : UPID - 300 + top - first))
    [ "$off" -ge 0 ] && [ "$off" -lt 3000 ] ||
        fail "V's daemon's pid $UPID fell outside the squatted range (a busy machine?)"
    [ -e "/tmp/udsfs-$UPID" ] || [ -L "/tmp/udsfs-$UPID" ] || fail "B's /tmp/udsfs-$UPID is gone"
    [[ $UDIR == /tmp/udsfs-$UPID-* ]] || fail "V's daemon publishes $UCHAN, not a directory of a random suffix beside B's /tmp/udsfs-$UPID"
    got=$(stat -c '%u %a %F' "$UDIR")
    [ "$got" = "$V 755 directory" ] || fail "the daemon's directory $UDIR is '$got', want '$V 755 directory'"
    got=$(stat -c '%u %a %F' "$UCHAN")
    [ "$got" = "$V 666 socket" ] || fail "the daemon's socket $UCHAN is '$got', want '$V 666 socket'"
    got=$(in_user_mount setpriv --reuid=$V --regid=$V --clear-groups env UDSFS_PRELOAD="$PRELOAD_LIB" unshare -Urn \
        timeout 30 "$UDSFS_BIN" run --mount "$TMP/um-${kind%%:*}" -- $PY "$TMP/att.py" passfile "$TMP/secret" 2>&1 || true)
    sleep 0.2
    say "  V in unshare -Urn passes its file: $got; B's squat: $(cat "$TMP/bsigns/squat")"
    [ "$got" = "passed: V's own" ] || fail "V's file not passed at the path beside B's squat ($kind): $got"
    [ "$(field "$TMP/bsigns/squat" accepted)" = 0 ] || fail "B's sockets got connections: $(cat "$TMP/bsigns/squat")"
    user_unmount
    [ ! -e "$UDIR" ] || fail "the daemon left its directory $UDIR at exit"
    touch "$TMP/bsigns/stop"
    wait "$SQUATTER" || true
    left=$(b_squats | wc -l)
    [ "$left" -eq "$squats" ] || fail "B had $squats of /tmp/udsfs-P; $left are left after V's daemon's exit"
    got=$(stat -c '%u %a' "$TMP/vdir"; ls -A "$TMP/vdir" | wc -l)
    [ "$got" = "$V 700
0" ] || fail "V's directory, which B's links name, changed: $got"
    [ "$kind" != sock ] || [ -S "/tmp/udsfs-$UPID/fdchannel" ] || fail "B's socket in /tmp/udsfs-$UPID is gone"
    b_squats | xargs -r rm -rf
    ok "predicted pids ($kind): the daemon made $UDIR (V's, 0755); B's /tmp/udsfs-$UPID and V's directory untouched, before and after its exit"
done

# ---- 3. who may connect at the path
user_mount "$TMP/um-private"
probe() { # probe WHO [NS]
    local who=$1 ns=${2:-}
    if [ "$who" = root ]; then
        $PY "$TMP/att.py" probe "$UCHAN" 2>&1
    else
        as "$who" ${ns:+unshare "$ns"} $PY "$TMP/att.py" probe "$UCHAN" 2>&1
    fi
}
for c in "$B" "$B -Ur" "$B -Urn" "$V -Urn" "root"; do
    # shellcheck disable=SC2086 # user and namespace
    got=$(probe $c)
    say "  ${c/ / in unshare } deposits at $UCHAN of V's private mount: $got"
    case $c in
    $B*) [ "$got" = deposit=EACCES ] || fail "user ${c/ / in unshare } reached the fd channel of V's private mount: $got" ;;
    *) [ "$got" = deposit=T ] || fail "${c/ / in unshare } not served at $UCHAN: $got" ;;
    esac
done
ok "private mount: B refused at the path (EACCES), also as root of its own user namespace; V and root served"

# ---- 4. a connection of V's, handed to B
got=$($PY "$TMP/att.py" handover "$UCHAN" $V $B 2>&1)
say "attack: V's connection at the path, given to B: $got"
[ "$got" = "owner=T other_deposit=EACCES other_claim=EACCES" ] || fail "B used V's connection: $got"
ok "handover: B's requests on V's connection refused (EACCES)"
user_unmount

# ---- 5. floods
NOFILE=1024 user_mount "$TMP/um-flood" --allow-other
UNAME=$(in_user_mount setpriv --reuid=$V --regid=$V --clear-groups sed -n 1p "$TMP/um-flood/.udsfs/fdchannel")
bg_as $B "$TMP/bsigns/flood" $PY "$TMP/att.py" flood "$UCHAN" "$UNAME" 1500 3600
FLOODER=$BG_PID
for _ in $(seq 600); do [ -s "$TMP/bsigns/flood" ] && break; sleep 0.1; done
say "attack: B opens 1500 connections, at the path and at the name in turn: $(cat "$TMP/bsigns/flood")"
served=$(field "$TMP/bsigns/flood" served)
[ -n "$served" ] && [ "$served" -le 256 ] || fail "B's connections over its share (256 of the daemon's 512): $(cat "$TMP/bsigns/flood")"
[[ $(field "$TMP/bsigns/flood" refused) == *ETOOMANYREFS* ]] || fail "no ETOOMANYREFS past B's share: $(cat "$TMP/bsigns/flood")"
n=$(ls "/proc/$UPID/fd" | wc -l)
[ "$n" -lt $((1024 - 256)) ] || fail "the daemon holds $n descriptors, at its reserve"
got=$(as $B unshare -Ur $PY "$TMP/att.py" probe "$UCHAN" 2>&1)
say "  B in unshare -Ur, its share full: $got"
[ "$got" = deposit=ETOOMANYREFS ] || fail "B in its own user namespace past its share: $got (want ETOOMANYREFS: charged to B)"
got=$(as $C $PY "$TMP/att.py" probe "$UCHAN" 2>&1)
[ "$got" = deposit=T ] || fail "C not served during B's flood: $got"
ok "flood: B got $served connections then ETOOMANYREFS, at the path as at the name; the daemon holds $n descriptors; C served"
kill "$FLOODER" 2>/dev/null || true
wait "$FLOODER" 2>/dev/null || true
bg_as $B "$TMP/stall.err" $PY "$TMP/att.py" stall "$UCHAN" "$TMP/bsigns/stall" 3600
wait_for "$TMP/bsigns/stall" 20 "B's stalled connection" "$TMP/stall.err"
sleep 0.5
t0=$(now_ms)
got=$(as $C timeout 10 $PY "$TMP/att.py" probe "$UCHAN" 2>&1)
t=$(($(now_ms) - t0))
say "attack: B sends claims at the path and never reads the answers ($(cat "$TMP/bsigns/stall")); C deposits: $got in $t ms"
[ "$got" = deposit=T ] || fail "C's deposit while B's connection stalls: $got"
ok "stall: C's deposit answered in $t ms"

# ---- 6. cycles through the daemon's own deposits (known defects: listed)
EXCEPTIONS=$LIB_DIR/adversarial_fdpath_exceptions.txt
failed=()
RCHAN=$(sed -n 2p "$U/fdchannel")
daemon_counts() { echo "$(ls "/proc/$DAEMON_PID/fd" | wc -l) descriptors, $(ls "/proc/$DAEMON_PID/task" | wc -l) threads"; }
before=$(daemon_counts)
got=$(as $B $PY "$TMP/att.py" cycle "$RCHAN" 50 2>&1)
sleep 1
after=$(daemon_counts)
say "attack: B puts 50 connections to the channel in flight in socketpairs, deposits the other ends over them, closes all ($got): the daemon had $before, has $after"
verdict channel_cycle "$([ "${after%% *}" -le $((${before%% *} + 5)) ] && echo 1)" \
    "the daemon let go of B's closed connections: $before before, $after after"
before=$(daemon_counts)
got=$(as $B $PY "$TMP/att.py" mountcycle "$MNT" "$RCHAN" 20 2>&1)
sleep 1
after=$(daemon_counts)
say "attack: B sends 20 socketpair ends holding a file of the mount's own receiver to it, closes all ($got): the daemon had $before, has $after"
verdict mount_cycle "$([ "${after%% *}" -le $((${before%% *} + 5)) ] && echo 1)" \
    "the daemon let go of B's closed sockets: $before before, $after after"
[ ${#failed[@]} -eq 0 ] || fail "$(printf '%s; ' "${failed[@]}")"
