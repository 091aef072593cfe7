#!/usr/bin/env bash
# adversarial_pool.sh: user B floods the shared daemon from its own `udsfs run --front
# seccomp` (its own supervisor and pool): FLOOD_THREADS (default 10000) threads of a
# static program blocked in recv() at once, on an --allow-other mount. User A's run of
# its own on the same mount (its own supervisor, the daemon shared) must still get its
# calls served: A's socketpair, send and MSG_WAITALL recv (flood.c's probe, with one
# receiver of its own) within 10x of what it takes without B's flood (plus 2 s for a
# loaded machine), and B's receivers all return once they get their bytes.
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed to act as another user"
A=61001
B=61002
N=${FLOOD_THREADS:-10000}
chmod 755 "$TMP"
RUNTMP=$TMP/runtmp
mkdir -m 1777 "$RUNTMP"
flood_build
run_as() {
    local uid=$1
    shift
    as_uid "$uid" env TMPDIR="$RUNTMP" "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- "$@"
}
# A's probe: flood.c with one receiver of A's; its round trip in seconds.
a_probe() {
    local out
    out=$(run_as "$A" "$TMP/flood" 1 <<<go 2>&1) || fail "A's run failed: $out"
    sed -n 's/^probe: //p' <<<"$out"
}

alone=$(a_probe)
[ -n "$alone" ] || fail "A's probe printed no time"
say "A's round trip without B: $alone s"

out=$FLOOD_OUT
flood_start "$N" setpriv --reuid="$B" --regid="$B" --clear-groups env TMPDIR="$RUNTMP"
for _ in $(seq 1 6000); do
    grep -q '^probed' "$out" && break
    proc_alive "$RUN" || break
    sleep 0.05
done
grep -q '^probed' "$out" || fail "B's $N receivers were not in place within 300 s: $(tail -5 "$out")"
say "B: $N threads blocked in recv through its supervisor; B's own $(grep '^probe:' "$out")"

during=$(a_probe)
[ -n "$during" ] || fail "A's probe printed no time while B flooded"
say "A's round trip while B's $N recvs wait: $during s (without: $alone s)"
awk -v d="$during" -v a="$alone" 'BEGIN { exit !(d <= 10 * a + 2) }' ||
    fail "A's round trip took $during s while B's $N recvs waited ($alone s without): over 10x + 2 s"
ok "A's own run was served within 10x + 2 s of without ($during s vs $alone s) while B's $N recvs waited"

flood_release 180000 "B's"
