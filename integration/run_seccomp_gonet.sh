#!/usr/bin/env bash
# run_seccomp_gonet.sh: the unix-socket tests of Go's own net package, built
# once with `go test -c net`, run on kernel sockets and through `udsfs run --front
# seccomp` (their temporary directory a --route, so every name they bind is a udsfs
# name), compared test by test: each kernel pass passes through udsfs or
# integration/seccomp_gonet_exceptions.txt says why. Guard: the binds really reached
# udsfs (the mount made at least one socket per test that passed).
source "$(dirname "$0")/lib.sh"

need_cmd go golang-go
GOROOT_SRC=$(go env GOROOT)/src/net
[ -f "$GOROOT_SRC/unixsock_test.go" ] || fail "Go's net sources are missing at $GOROOT_SRC (package golang-go)"
export GOCACHE=$ROOT/target/gocache GOPATH=$ROOT/target/gopath GOPROXY=off GOFLAGS=
go test -c -o "$TMP/net.test" net || fail "go test -c net failed"
ok "built Go's net tests ($(go env GOVERSION))"
RUN='Unix|FileConn|FileListener|Sendmsg'
EXCEPTIONS=$ROOT/integration/seccomp_gonet_exceptions.txt

# The tests read testdata/ relative to their directory.
mkdir "$TMP/k" "$TMP/r"
(cd "$GOROOT_SRC" && TMPDIR=$TMP/k timeout 40 "$TMP/net.test" -test.run "$RUN" -test.v) >"$TMP/kernel.out" 2>&1 || true
before=$(socket_generation)
(cd "$GOROOT_SRC" && TMPDIR=$TMP/r timeout 40 "$UDSFS_BIN" run --front seccomp --mount "$MNT" --route "$TMP/r" -- \
    "$TMP/net.test" -test.run "$RUN" -test.v) >"$TMP/udsfs.out" 2>&1 || true

passes() { sed -n 's/^--- PASS: \([^ ]*\) .*/\1/p' "$1" | sort -u; }
passes "$TMP/kernel.out" >"$TMP/kernel.pass"
passes "$TMP/udsfs.out" >"$TMP/udsfs.pass"
[ -s "$TMP/kernel.pass" ] || fail "no test passed on kernel sockets: $(tail -5 "$TMP/kernel.out")"
{ grep -v '^#' "$EXCEPTIONS" || true; } | awk 'NF { print $1 }' | sort -u >"$TMP/excepted"
missing=$(comm -23 "$TMP/kernel.pass" "$TMP/udsfs.pass" | comm -23 - "$TMP/excepted")
[ -z "$missing" ] || {
    grep -A12 -E "^=== RUN   ($(tr '\n' '|' <<<"$missing" | sed 's/|$//'))\$" "$TMP/udsfs.out" >&2 || true
    fail "pass on kernel sockets, not through the supervisor, not in $(basename "$EXCEPTIONS"): $missing"
}
stale=$(comm -12 "$TMP/excepted" "$TMP/udsfs.pass")
[ -z "$stale" ] || fail "listed in $(basename "$EXCEPTIONS") but passing now (remove the line): $stale"
ok "$(wc -l <"$TMP/udsfs.pass") of $(wc -l <"$TMP/kernel.pass") kernel passes pass through the supervisor; $(wc -l <"$TMP/excepted") excepted"

# The tests bind in fresh directories below TMPDIR, a route: each passing test made at
# least one socket in the mount (the directories are gone: rmdir of a routed directory
# removes the mount's copy, as Linux leaves nothing).
made=$(($(socket_generation) - before - 1))
[ "$made" -ge "$(wc -l <"$TMP/udsfs.pass")" ] || fail "the mount made only $made sockets for $(wc -l <"$TMP/udsfs.pass") passing tests: the binds did not go to udsfs"
ok "the mount made $made sockets for $(wc -l <"$TMP/udsfs.pass") passing tests"
