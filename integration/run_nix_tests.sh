#!/usr/bin/env bash
# run_nix_tests.sh: the nix crate's own socket tests (nix 0.31.4, pinned in
# integration/nix_tests/: its test/sys/test_socket.rs and test_sockopt.rs, 84 tests:
# socketpair, path and abstract names, SCM_RIGHTS, SCM_CREDENTIALS, SO_PEERCRED,
# seqpacket, sendmmsg/recvmmsg, getsockname, and their TCP, UDP, netlink and AF_ALG
# ones, which reach the kernel in every pass), built from the crate with libtest and run
# on kernel sockets and through `udsfs run`:
#   kernel   TMPDIR and the working directory a real directory ($TMP/k): the reference
#   preload  the library (`udsfs run`'s default front) on a `--lanes` mount, TMPDIR and
#            the working directory in the mount (the tests bind in tempfile's tempdir(),
#            below TMPDIR); its socketpairs must say lane=direct
#   seccomp  the same with `--front seccomp` (the supervisor traps a dynamic program's
#            calls too)
#   nolanes  the library again, on a `--no-lanes` mount (the first is unmounted)
# No other test of nix's test binary uses an AF_UNIX socket (test_unistd's
# test_getpeereid is BSD-only; test_sendfile's UnixStream ones are BSD and macOS ones).
# The build: the crate is copied from cargo's registry copy to $NIX_DIR/nix (default
# target/nix-tests; UDSFS_NIX_DIR moves it), given an empty [workspace], and `cargo
# test --locked --all-features --no-run --test test` builds its test binary there with
# the crate's own Cargo.lock (cold: about 20 s on 2 cores; later runs reuse it).
# Tests run one at a time with --nocapture, so each one's output is its own: nix's
# skip!/require_* macros print why and return, which libtest reports as ok; a test
# whose output says it skipped counts as skipped, not passed. A test that passes on the
# kernel must pass in each udsfs pass, or be listed for that pass in
# integration/run_nix_tests_exceptions.txt with its reason (a listed test that passes
# fails the script); `skip` lines name tests not run at all. A run that hangs (120 s)
# or dies has its tests with no result run again one at a time (30 s each).
# Guard: strace counts the AF_UNIX sockets the tests use on the kernel (lib.sh's
# unix_sockets_used); each udsfs pass's mount must make at least as many (the
# generation of a probe socket before and after), so a call left to the kernel fails.
# Run time: about 10 s warm (each pass about a second).
UDSFS_MOUNT_ARGS=(--lanes)
source "$(dirname "$0")/lib.sh"

need_cmd cargo cargo strace strace python3 python3
need_preload
EXCEPTIONS=$LIB_DIR/run_nix_tests_exceptions.txt
PASSES=(preload seccomp nolanes)
# The test modules that run: nix's socket and socket-option tests.
MODULES=(sys::test_socket:: sys::test_sockopt::)

# ---------------------------------------------------------------- the build
NIX_DIR=${UDSFS_NIX_DIR:-$ROOT/target/nix-tests}
pinned_crates nix_tests "$NIX_DIR/harness" "$NIX_DIR/target"
NIX_SRC=$(python3 -c '
import json, os, sys
print(next(os.path.dirname(q["manifest_path"]) for q in json.load(open(sys.argv[1]))["packages"] if q["name"] == "nix"))' "$TMP/metadata.json")
[ -f "$NIX_SRC/test/sys/test_socket.rs" ] || fail "the nix crate at $NIX_SRC ships no test/sys/test_socket.rs"
# A fresh copy only when the pinned crate changed (its directory's name holds the version).
if [ "$(cat "$NIX_DIR/nix.from" 2>/dev/null)" != "$NIX_SRC" ]; then
    rm -rf "$NIX_DIR/nix"
    cp -r "$NIX_SRC" "$NIX_DIR/nix"
    # its own workspace: target/ is below the udsfs workspace's root
    printf '\n[workspace]\n' >>"$NIX_DIR/nix/Cargo.toml"
    echo "$NIX_SRC" >"$NIX_DIR/nix.from"
fi
timed ms cargo test --manifest-path "$NIX_DIR/nix/Cargo.toml" --locked --all-features --no-run --test test \
    --message-format json-render-diagnostics >"$TMP/build.json" 2>"$TMP/build.err" ||
    fail "building nix's tests failed: $(tail -20 "$TMP/build.err")"
build_ms=$((build_ms + ms))
BIN=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "test":
        print(m["executable"])' "$TMP/build.json")
[ -x "$BIN" ] || fail "cargo built no test binary: $(tail -5 "$TMP/build.err")"
ok "built $(basename "$NIX_SRC")'s test binary in $NIX_DIR in $((build_ms / 1000)) s"

# ---------------------------------------------------------------- the passes
# An exceptions line is `PASSES NAME REASON`: PASSES a comma list of preload, seccomp,
# nolanes, skip (not run in any pass) or * (the three udsfs passes); NAME the test as
# libtest names it.
exceptions_listed "$EXCEPTIONS" preload seccomp nolanes skip >"$TMP/listed" || exit 1
"$BIN" --list --format terse "${MODULES[@]}" 2>/dev/null | sed -n 's/: test$//p' >"$TMP/all.list"
[ "$(wc -l <"$TMP/all.list")" -ge 80 ] || fail "$BIN --list ${MODULES[*]} names $(wc -l <"$TMP/all.list") tests, want 80 or more"
awk '$1 ~ /(^|,)skip(,|$)/ { print $2 }' "$TMP/listed" >"$TMP/skip.list"
while read -r name; do
    grep -qxF -- "$name" "$TMP/all.list" || fail "$EXCEPTIONS skips $name: no such test"
done <"$TMP/skip.list"
grep -vxF -f "$TMP/skip.list" "$TMP/all.list" >"$TMP/run.list" || true

# run_pass PASS DIR [PREFIX...]: every test of run.list as PREFIX... $BIN, one at a time,
# TMPDIR and the working directory DIR; one line `NAME ok|FAILED|ignored|skipped|none`
# a test in $TMP/PASS.res (none: no result), the output in $TMP/PASS.out.
run_pass() {
    local pass=$1 dir=$2 name rc
    shift 2
    (cd "$dir" && TMPDIR=$dir timeout -k 5 120 "$@" "$BIN" --exact $(cat "$TMP/run.list") \
        --test-threads 1 --nocapture --color never >"$TMP/$pass.out" 2>&1) || true
    results "$TMP/$pass.out" >"$TMP/$pass.res"
    while read -r name; do
        grep -q "^$name " "$TMP/$pass.res" && continue
        say "$pass: $name has no result in the whole run; again alone"
        rc=0
        (cd "$dir" && TMPDIR=$dir timeout -k 5 30 "$@" "$BIN" --exact "$name" \
            --test-threads 1 --nocapture --color never >"$TMP/$pass.alone" 2>&1) || rc=$?
        { echo "---- $name alone (exit status $rc)"; cat "$TMP/$pass.alone"; } >>"$TMP/$pass.out"
        results "$TMP/$pass.alone" | grep "^$name " >>"$TMP/$pass.res" || echo "$name none" >>"$TMP/$pass.res"
    done <"$TMP/run.list"
}
# results OUT: a libtest --nocapture --test-threads 1 run's output as `NAME STATUS`
# lines: a test's output lies between its `test NAME ... ` and its result; ok with a
# skip message in it (nix's skip! and require_* macros, its tests' "skipping test."
# and "TLS ULP is not enabled") is skipped.
results() {
    python3 - "$1" <<'EOF'
import re, sys
name, body = None, []
for line in open(sys.argv[1], errors="replace").read().splitlines():
    m = re.match(r"test (\S+) \.\.\. (.*)$", line)
    if m and name is None:
        name, rest = m.groups()
        body = []
        line = rest
    if name is None:
        continue
    st = line.strip()
    if st in ("ok", "FAILED", "ignored"):
        text = "\n".join(body)
        if st == "ok" and re.search(r"skip|not enabled|unavailable|not available", text, re.I):
            st = "skipped"
        print(name, st)
        name = None
    else:
        body.append(line)
EOF
}

mkdir -m 1777 "$TMP/k"
run_pass kernel "$TMP/k"
KSOCKS=$(cd "$TMP/k" && TMPDIR=$TMP/k unix_sockets_used "$TMP/strace" "$BIN" --exact $(cat "$TMP/run.list") --test-threads 1)
say "kernel: $(grep -c ' ok$' "$TMP/kernel.res" || true) of $(wc -l <"$TMP/run.list") passed; AF_UNIX sockets used: $KSOCKS"
[ "$KSOCKS" -ge 20 ] || fail "the kernel run used $KSOCKS AF_UNIX sockets: want 20 or more (strace saw no socket tests?)"

# udsfs_pass PASS [udsfs run options...]: the tests through `udsfs run --mount $MNT
# OPTIONS`, TMPDIR and the working directory in the mount, and the socket guard.
udsfs_pass() {
    local pass=$1 before made
    shift
    mkdir -p -m 1777 "$MNT/$pass"
    before=$(socket_generation)
    run_pass "$pass" "$MNT/$pass" env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" "$@" --
    made=$(($(socket_generation) - before - 1))
    [ "$made" -ge "$KSOCKS" ] ||
        fail "$pass: the mount made $made sockets while the tests used $KSOCKS AF_UNIX sockets on the kernel: their calls did not reach udsfs"
    say "$pass: $(grep -c ' ok$' "$TMP/$pass.res" || true) passed; the mount made $made sockets (the kernel run used $KSOCKS)"
}

udsfs_pass preload
udsfs_pass seccomp --front seccomp
UDSFS_LANES=on lanes_check || fail "the --lanes mount's socketpairs had no lanes: the preload pass was not the lanes one"
udsfs_unmount
udsfs_mount --no-lanes
udsfs_pass nolanes
UDSFS_LANES=off lanes_check || fail "the --no-lanes mount's socketpairs had lanes"

# ---------------------------------------------------------------- test by test
PYTHONPATH=$LIB_DIR python3 - "$TMP" "$TMP/listed" "${PASSES[@]}" <<'EOF'
import sys
from suite_verdict import listed_lines, verdict
tmp, listed, passes = sys.argv[1], sys.argv[2], sys.argv[3:]

def results(p):
    return dict(l.split() for l in open(f"{tmp}/{p}.res"))

def failure_lines(p, t):
    out = open(f"{tmp}/{p}.out", errors="replace").read()
    at = out.find(f"test {t} ... ")
    return out[at:].splitlines()[:14] if at >= 0 else ["(no output)"]

verdict(results("kernel"), {p: results(p) for p in passes}, listed_lines(listed), failure_lines)
EOF
ok "nix's socket tests: every kernel pass passes through udsfs (preload on lanes, seccomp, preload without lanes), or is listed"
