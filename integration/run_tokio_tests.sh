#!/usr/bin/env bash
# run_tokio_tests.sh: tokio's own unix-socket tests (issue 29 item 6, issue 30: the same
# results with lanes on), built from the tokio crate (pinned: integration/tokio_tests/
# Cargo.toml and Cargo.lock) and run with libtest, test by test, on kernel sockets and
# through `udsfs run`:
#   kernel   TMPDIR a real directory ($TMP/k): the reference
#   preload  the library (`udsfs run`'s default front) on a `--no-lanes` mount (lanes are
#            the mount's default: this pass and the next are the lanes-off ones), TMPDIR a directory in the mount:
#            tokio's tests bind in tempfile::tempdir(), which is below TMPDIR
#   seccomp  the same with `--front seccomp` (the supervisor traps the calls)
#   lanes    the library again, on a `--lanes` mount (the first mount is unmounted)
# The test files (tokio's tests/, 1.54.1): uds_stream, uds_datagram, uds_split, uds_cred,
# uds_socket, unix_shutdown (tokio::net's Unix* types); the unix tests of net_panic,
# rt_handle_block_on and tcp_accept_ready (FILTER below); process_issue_8042 (a child's
# pipes, gated by a UnixStream pair whose other end is the child's stderr); io_async_fd (AsyncFd over a
# socketpair made with nix, i.e. libc's socketpair, and epoll), and net_unix_pipe
# (tokio::net::unix::pipe: FIFOs and pipe(2), no sockets): through `udsfs run` it gets a
# real TMPDIR, as the mount holds no FIFOs or files (12 of its 19 tests mkfifo or create
# a file there: EPERM, by design; the README says so).
# mio: its crate (1.2.5) ships no tests/ (only examples, TCP and UDP), so none run here.
# The build: the harness is copied to $TOKIO_DIR (default target/tokio-tests), tokio's
# test files copied into it from cargo's registry copy of the crate, and `cargo test
# --no-run --locked` builds them there (a cold build on a loaded 2-core machine: about
# 2 min; later runs reuse it). Set UDSFS_TOKIO_DIR to keep the build elsewhere.
# A test that passes on the kernel must pass in each udsfs pass, or be listed for that
# pass in integration/run_tokio_tests_exceptions.txt with its reason; a listed test that
# passes fails the script (remove the line); a test ignored or missing through udsfs
# does not count as a pass. A binary that hangs (no result after 120 s) or dies has its
# unfinished tests run again one at a time (`--exact`, 30 s each), so each gets its
# own result. Guards: strace counts the AF_UNIX sockets each test binary uses on the
# kernel (twice each socketpair, a socket bound, connected or sent from, an accepted
# connection: a socket made and dropped unused never reaches udsfs); through udsfs the mount must
# make at least as many (the generation of a probe socket, before and after each
# binary) whenever the binary's kernel passes all pass, and at least half as many when
# some fail, so a call left to the kernel fails the pass. On the lanes mount a probe of
# the same build (integration/tokio_tests/udsfs_probe.rs: std's UnixStream::pair and a
# connect/accept pair, a byte each way) must find its sockets' status lane=direct, so
# the lanes pass is not the preload pass again.
# Run time on a loaded 2-core machine: a cold build 1-2 min (load ~10), then the passes
# 1-2 min (load 10-23; the lanes pass's listed tests hang 15 s per test file). time_pause's
# two UnixDatagram tests are left out: they need tokio's test-util feature and rand.
UDSFS_MOUNT_ARGS=(--no-lanes)
source "$(dirname "$0")/lib.sh"

need_cmd cargo cargo strace strace python3 python3
need_preload
EXCEPTIONS=$LIB_DIR/run_tokio_tests_exceptions.txt
TESTS=(io_async_fd net_panic net_unix_pipe process_issue_8042 rt_handle_block_on tcp_accept_ready uds_cred
    uds_datagram uds_socket uds_split uds_stream unix_shutdown)
# Of these files only the tests whose names hold "unix" run (their other tests are TCP,
# UDP or runtime ones): net_panic's four Unix* panics' caller location,
# rt_handle_block_on's UnixListener bind/accept around a runtime's shutdown (in each of
# its runtime flavours), tcp_accept_ready's accepted UnixStream read without an event.
declare -A FILTER=([net_panic]=unix [rt_handle_block_on]=unix [tcp_accept_ready]=unix)

# ---------------------------------------------------------------- the build
TOKIO_DIR=${UDSFS_TOKIO_DIR:-$ROOT/target/tokio-tests}
pinned_crates tokio_tests "$TOKIO_DIR" "$TOKIO_DIR/target"
mkdir -p "$TOKIO_DIR/tests"
copy_if_changed "$LIB_DIR/tokio_tests/udsfs_probe.rs" "$TOKIO_DIR/tests/udsfs_probe.rs"
read -r TOKIO_SRC MIO_SRC < <(python3 -c '
import json, os, sys
p = {q["name"]: os.path.dirname(q["manifest_path"]) for q in json.load(open(sys.argv[1]))["packages"]}
print(p["tokio"], p["mio"])' "$TMP/metadata.json")
[ -d "$TOKIO_SRC/tests" ] || fail "the tokio crate at $TOKIO_SRC ships no tests/"
[ ! -d "$MIO_SRC/tests" ] || say "note: the mio crate at $MIO_SRC ships tests/ now: run them here too"
mkdir -p "$TOKIO_DIR/tests/support"
for t in "${TESTS[@]}" support/panic; do
    copy_if_changed "$TOKIO_SRC/tests/$t.rs" "$TOKIO_DIR/tests/$t.rs"
done
timed ms cargo test --manifest-path "$TOKIO_DIR/Cargo.toml" --locked --no-run --tests \
    --message-format json-render-diagnostics >"$TMP/build.json" 2>"$TMP/build.err" ||
    fail "building tokio's tests failed: $(tail -20 "$TMP/build.err")"
build_ms=$((build_ms + ms))
declare -A BIN
while read -r name exe; do BIN[$name]=$exe; done < <(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])' "$TMP/build.json")
for t in "${TESTS[@]}" udsfs_probe; do
    [ -x "${BIN[$t]:-}" ] || fail "cargo built no test binary $t: $(tail -5 "$TMP/build.err")"
done
ok "built tokio $(basename "$TOKIO_SRC")'s tests (${TESTS[*]}) in $TOKIO_DIR in $((build_ms / 1000)) s"

# ---------------------------------------------------------------- the passes
mkdir -m 1777 "$TMP/k" "$TMP/p"
# listed_for PASS T: the names of T's tests the exceptions file lists for PASS.
listed_for() {
    awk -v p="$1" -v t="$2" '!/^[[:space:]]*(#|$)/ {
        n = split($1, ps, ","); hit = 0
        for (i = 1; i <= n; i++) if (ps[i] == p || ps[i] == "*") hit = 1
        if (hit && index($2, t "::") == 1) print substr($2, length(t) + 3)
    }' "$EXCEPTIONS"
}
# run_binary PASS T TMPDIR [PREFIX...]: runs test binary T's tests in pass PASS as
# PREFIX... T, with TMPDIR; one line `NAME ok|FAILED|ignored|none` a test (none: no
# result) in $TMP/PASS.T.res, T's output in $TMP/PASS.T.out. The tests listed for PASS
# run apart, all at once, 15 s at most (several of them hang); a test of the rest left
# with no result (the binary hung or died) runs again alone.
run_binary() {
    local pass=$1 t=$2 tmpdir=$3 name rc run=() listed=()
    shift 3
    "${BIN[$t]}" --list --format terse 2>/dev/null | sed -n 's/: test$//p' | grep -- "${FILTER[$t]:-}" >"$TMP/$t.list"
    [ -s "$TMP/$t.list" ] || fail "$t --list names no test"
    mapfile -t listed < <(listed_for "$pass" "$t")
    if printf '%s\n' ${listed[@]+"${listed[@]}"} | grep -qx '\*'; then
        mapfile -t listed <"$TMP/$t.list"
    fi
    for name in ${listed[@]+"${listed[@]}"}; do
        [ "$name" != '*' ] || continue
        grep -qx -- "$name" "$TMP/$t.list" || fail "$EXCEPTIONS lists $t::$name for $pass: $t has no such test"
    done
    mapfile -t run <"$TMP/$t.list"
    if [ ${#listed[@]} -gt 0 ]; then
        mapfile -t run < <(printf '%s\n' "${listed[@]}" | grep -vxF -f - "$TMP/$t.list" || true)
    fi
    : >"$TMP/$pass.$t.out"
    if [ ${#run[@]} -gt 0 ]; then
        TMPDIR=$tmpdir timeout -k 5 120 "$@" "${BIN[$t]}" --exact "${run[@]}" --test-threads 2 \
            --color never >"$TMP/$pass.$t.out" 2>&1 || true
    fi
    if [ ${#listed[@]} -gt 0 ]; then
        {
            echo "---- the tests listed for $pass: ${listed[*]}"
            rc=0
            TMPDIR=$tmpdir timeout -k 5 15 "$@" "${BIN[$t]}" --exact "${listed[@]}" --test-threads ${#listed[@]} \
                --color never 2>&1 || rc=$?
            echo "---- exit status $rc"
        } >>"$TMP/$pass.$t.out"
    fi
    sed -n 's/^test \(.*\) \.\.\. \(ok\|FAILED\|ignored\)$/\1 \2/p' "$TMP/$pass.$t.out" >"$TMP/$pass.$t.res"
    while read -r name; do
        grep -q "^$name " "$TMP/$pass.$t.res" && continue
        if printf '%s\n' ${listed[@]+"${listed[@]}"} | grep -qx -- "$name"; then
            echo "$name none" >>"$TMP/$pass.$t.res"
            continue
        fi
        say "$pass: $t: $name has no result in the whole binary's run; again alone"
        {
            echo "---- $name alone"
            rc=0
            TMPDIR=$tmpdir timeout -k 5 30 "$@" "${BIN[$t]}" --exact "$name" --test-threads 1 --color never 2>&1 || rc=$?
            echo "---- exit status $rc"
        } >>"$TMP/$pass.$t.out"
        sed -n "s/^test \($name\) \.\.\. \(ok\|FAILED\|ignored\)\$/\1 \2/p" "$TMP/$pass.$t.out" | tail -1 >>"$TMP/$pass.$t.res"
        grep -q "^$name " "$TMP/$pass.$t.res" || echo "$name none" >>"$TMP/$pass.$t.res"
    done <"$TMP/$t.list"
}

# The kernel pass, then the count: each binary again under strace, the AF_UNIX sockets
# it used in KSOCKS[T] (lib.sh's unix_sockets_used; uds_socket::assert_usage's three
# sockets, made and dropped unused, are not counted).
declare -A KSOCKS
for t in "${TESTS[@]}"; do
    run_binary kernel "$t" "$TMP/k"
    KSOCKS[$t]=$(TMPDIR=$TMP/k unix_sockets_used "$TMP/strace.$t" "${BIN[$t]}" --exact $(cat "$TMP/$t.list") --test-threads 2)
    say "kernel: $t: $(grep -c ' ok$' "$TMP/kernel.$t.res") of $(wc -l <"$TMP/kernel.$t.res") passed; AF_UNIX sockets used: ${KSOCKS[$t]}"
done

mkdir -m 1777 "$MNT/t"
# udsfs_pass PASS [udsfs run options...]: every binary through `udsfs run --mount $MNT
# OPTIONS` with TMPDIR in the mount, and the socket guard.
udsfs_pass() {
    local pass=$1 t before made want kpass upass tmpdir
    shift
    for t in "${TESTS[@]}"; do
        before=$(socket_generation)
        # net_unix_pipe's FIFOs and files: in a real directory (the mount holds none)
        tmpdir=$MNT/t
        [ "$t" != net_unix_pipe ] || tmpdir=$TMP/p
        run_binary "$pass" "$t" "$tmpdir" env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" "$@" --
        made=$(($(socket_generation) - before - 1))
        want=${KSOCKS[$t]}
        kpass=$(grep -c ' ok$' "$TMP/kernel.$t.res" || true)
        upass=$(awk 'NR == FNR { if ($2 == "ok") k[$1] = 1; next } k[$1] && $2 == "ok" { n++ } END { print n + 0 }' \
            "$TMP/kernel.$t.res" "$TMP/$pass.$t.res")
        [ "$upass" -eq "$kpass" ] || want=$((want / 2))
        [ "$made" -ge "$want" ] ||
            fail "$pass: $t: the mount made $made sockets while the tests opened ${KSOCKS[$t]} AF_UNIX sockets on the kernel (want $want: $upass of $kpass kernel passes passed): their calls did not reach udsfs"
        say "$pass: $t: $upass of $kpass kernel passes passed; the mount made $made sockets (the kernel run opened ${KSOCKS[$t]})"
    done
}

udsfs_pass preload
udsfs_pass seccomp --front seccomp
udsfs_unmount
udsfs_mount --lanes
mkdir -m 1777 "$MNT/t"
udsfs_pass lanes
TMPDIR=$MNT/t timeout 60 env UDSFS_PRELOAD="$PRELOAD_LIB" UDSFS_PROBE_MNT="$MNT" "$UDSFS_BIN" run --mount "$MNT" -- \
    "${BIN[udsfs_probe]}" --nocapture --test-threads 1 >"$TMP/probe.out" 2>&1 ||
    fail "the lanes probe failed: $(tail -20 "$TMP/probe.out")"
grep '^probe:' "$TMP/probe.out" | sed 's/^/    /'
ok "on the --lanes mount the probe's UnixStream pair and connection had lanes (lane=direct on both ends)"

# ---------------------------------------------------------------- test by test
# An exceptions line is `PASSES BINARY::NAME REASON`: PASSES a comma list of preload,
# seccomp, lanes (or *); BINARY the test file, NAME the test as libtest names it, or *
# for every test of the file (stale only when all of them pass).
exceptions_listed "$EXCEPTIONS" preload seccomp lanes >"$TMP/listed" || exit 1
PYTHONPATH=$LIB_DIR python3 - "$TMP" "$TMP/listed" "${TESTS[@]}" <<'EOF'
import sys
from suite_verdict import listed_lines, verdict
tmp, listed, tests = sys.argv[1], sys.argv[2], sys.argv[3:]

def results(p):
    r = {}
    for t in tests:
        for l in open(f"{tmp}/{p}.{t}.res"):
            name, st = l.split()
            r[f"{t}::{name}"] = st
    return r

def failure_lines(p, t):
    b, name = t.split("::", 1)
    out = open(f"{tmp}/{p}.{b}.out", errors="replace").read()
    at = out.find(f"---- {name} stdout ----")
    return out[at:].splitlines()[:14] if at >= 0 else ["(no output of its own)"]

verdict(results("kernel"), {p: results(p) for p in ("preload", "seccomp", "lanes")},
        listed_lines(listed), failure_lines)
EOF
