#!/usr/bin/env bash
# run_glib_tests.sh: GLib's own test programs for its unix-socket code (Debian's
# libglib2.0-tests, /usr/libexec/installed-tests/glib): GSocket, GSocketListener,
# GSocketService, GCredentials, GUnixFDList, and GDBus over unix sockets (peer-to-peer
# servers with EXTERNAL authentication and fd passing, a private dbus-daemon of
# GTestDBus: names, signal subscriptions, generated proxies, object managers; connection
# loss, flush, close). Each program runs with --tap on
# kernel sockets, then through `udsfs run --mount $MNT --route DIR` with TMPDIR=DIR (so
# every path they bind is a udsfs name; abstract names go to udsfs anyway), and four of
# them again under --front seccomp, compared test by test: each kernel pass passes through udsfs or
# integration/glib_tests_exceptions.txt says why. Guard: while they ran, the kernel's
# table (/proc/net/unix) and the mount's ($U/unix) were read every 50 ms: through udsfs
# their names (@gdbus-test-*, DIR/*) showed in the mount's table and never in the
# kernel's (on the kernel the reverse, which checks the sampler).
# Left out: gdbus-overflow, which sends 5000 D-Bus messages of ~150 bytes over a
# socketpair and fails unless all arrive within 10 s. Through udsfs each message is a
# write and two reads through FUSE (about 1.2 ms of CPU a message with the debug build):
# it passed in 8.3 s and failed at 2359-4023 messages at load 15 on 2 cores. A timing
# bound, not a difference in what is delivered (scripts/bench measures throughput).
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

T=/usr/libexec/installed-tests/glib
[ -x "$T/gdbus-peer" ] || fail "GLib's installed tests are missing at $T (apt-get install libglib2.0-tests; .ci/run installs it)"
need_cmd dbus-daemon dbus-daemon
EXCEPTIONS=$LIB_DIR/glib_tests_exceptions.txt
PROGRAMS=(socket socket-listener socket-service credentials unix-fd gdbus-peer gdbus-server-auth
    gdbus-auth gdbus-connection gdbus-connection-flush gdbus-connection-loss gdbus-close-pending
    gdbus-exit-on-close gdbus-names gdbus-subscribe gdbus-method-invocation gdbus-peer-object-manager
    gdbus-test-codegen gdbus-bz627724 gdbus-proxy-unique-name gdbus-proxy-well-known-name)

# Under the seccomp supervisor too (--front seccomp), these:
SECCOMP_PROGRAMS=(socket credentials unix-fd gdbus-peer)

# one_run MODE PROGRAM...: each PROGRAM on MODE's sockets (kernel, udsfs, or seccomp:
# udsfs with --front seccomp); its TAP lines in $TMP/MODE-NAME.tap, "NAME TESTPATH" of
# each pass in $TMP/MODE.pass.
one_run() {
    local mode=$1 dir=$TMP/r-$1 p front=()
    shift
    UDSFS_RUN_VIA=$mode
    [ "$mode" != seccomp ] || UDSFS_RUN_VIA=udsfs front=(--front seccomp)
    mkdir -p "$dir"
    : >"$TMP/$mode.pass"
    # the sampler: the tests' names in each table, until $TMP/$mode.stop
    (
        while [ ! -e "$TMP/$mode.stop" ]; do
            awk -v d="$dir/" 'NR > 1 && ($8 ~ /^@gdbus-test-/ || index($8, d) == 1) { print "kernel", $8 }' /proc/net/unix
            awk -v d="${dir#/}/" 'NR > 1 && ($8 ~ /^@gdbus-test-/ || index($8, d) == 1) { print "udsfs", $8 }' "$U/unix"
            sleep 0.05
        done
    ) >"$TMP/$mode.seen" 2>/dev/null &
    local sampler=$!
    for p in "$@"; do
        run_cmd --route "$dir" ${front[@]+"${front[@]}"} -- env TMPDIR="$dir" timeout 40 "$T/$p" --tap
        (cd "$T" && "${RUN_CMD[@]}") >"$TMP/$mode-$p.tap" 2>&1 || true
        # "ok 3 /socket/ipv4_sync": a pass ("# SKIP" lines are not)
        awk -v p="$p" '/^ok [0-9]+ / && !/# SKIP/ { print p, $3 }' "$TMP/$mode-$p.tap" >>"$TMP/$mode.pass"
        say "$mode: $p: $(grep -c '^ok [0-9]* [^#]*$' "$TMP/$mode-$p.tap" || true) passed, $(grep -c '^not ok' "$TMP/$mode-$p.tap" || true) failed"
    done
    sort -u -o "$TMP/$mode.pass" "$TMP/$mode.pass"
    touch "$TMP/$mode.stop"
    wait "$sampler"
    sort -u -o "$TMP/$mode.seen" "$TMP/$mode.seen"
    say "$mode: the tests' names seen in the kernel's table: $(grep -c '^kernel' "$TMP/$mode.seen" || true), in the mount's: $(grep -c '^udsfs' "$TMP/$mode.seen" || true)"
}

one_run kernel "${PROGRAMS[@]}"
[ "$(wc -l <"$TMP/kernel.pass")" -ge 60 ] || fail "fewer than 60 tests passed on kernel sockets: $(cat "$TMP/kernel.pass")"
one_run udsfs "${PROGRAMS[@]}"
one_run seccomp "${SECCOMP_PROGRAMS[@]}"

# Guard: the sampler saw the kernel run's names in the kernel's table; through udsfs
# in the mount's, and none in the kernel's.
grep -q '^kernel' "$TMP/kernel.seen" || fail "the sampler saw no name of the kernel run in /proc/net/unix: it cannot tell"
for m in udsfs seccomp; do
    ! grep '^kernel' "$TMP/$m.seen" || fail "the kernel had sockets bound at the $m run's names (above): a test escaped udsfs run"
    [ "$(grep -c '^udsfs' "$TMP/$m.seen")" -ge 3 ] || fail "fewer than 3 of the $m run's names seen in $U/unix: $(cat "$TMP/$m.seen")"
    ok "the $m run's sockets were udsfs sockets ($(grep -c '^udsfs' "$TMP/$m.seen") names seen in $U/unix, none in /proc/net/unix)"
done

{ grep -v '^#' "$EXCEPTIONS" || true; } | awk 'NF { print $1, $2, $3 }' | sort -u >"$TMP/excepted-all"
# compare MODE PROGRAM...: each kernel pass of the PROGRAMs passes in MODE's run or is
# listed for MODE (lines "MODE PROGRAM TESTPATH" of the exceptions file).
compare() {
    local mode=$1 p
    shift
    awk -v m="$mode" '$1 == m { print $2, $3 }' "$TMP/excepted-all" >"$TMP/excepted-$mode"
    for p in "$@"; do awk -v p="$p" '$1 == p' "$TMP/kernel.pass"; done | sort -u >"$TMP/kernel-$mode.pass"
    local missing now_pass
    missing=$(comm -23 "$TMP/kernel-$mode.pass" "$TMP/$mode.pass" | comm -23 - "$TMP/excepted-$mode")
    if [ -n "$missing" ]; then
        say "passed on the kernel, not through $mode, and not listed in $EXCEPTIONS:"
        sed 's/^/    /' <<<"$missing"
        for p in $(awk '{ print $1 }' <<<"$missing" | sort -u); do
            say "--- $p through $mode (last 30 lines):"
            tail -n 30 "$TMP/$mode-$p.tap"
        done
        fail "$(wc -l <<<"$missing") of GLib's tests pass on kernel sockets and fail through udsfs run ($mode)"
    fi
    now_pass=$(comm -12 "$TMP/excepted-$mode" "$TMP/$mode.pass")
    [ -z "$now_pass" ] || fail "listed for $mode in $EXCEPTIONS but passing now (remove them there): $now_pass"
    ok "GLib's tests through $mode: $(comm -12 "$TMP/kernel-$mode.pass" "$TMP/$mode.pass" | wc -l) of $(wc -l <"$TMP/kernel-$mode.pass") kernel passes pass, $(wc -l <"$TMP/excepted-$mode") listed exceptions"
}
compare udsfs "${PROGRAMS[@]}"
compare seccomp "${SECCOMP_PROGRAMS[@]}"
