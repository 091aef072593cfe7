#!/usr/bin/env bash
# run_libuv_tests.sh: libuv's own test suite (the event loop under Node.js; issue 29
# item 6, issue 30: the same results with lanes on and off), test by test, on kernel
# sockets and through `udsfs run`:
#   kernel   TMPDIR a real directory ($TMP/k): the reference
#   preload  the library (`udsfs run`'s default front), lanes on (the mount's default)
#   seccomp  the same with `--front seccomp` (the supervisor carries the calls)
#   nolanes  the library again, on a `--no-lanes` mount (the first mount is unmounted)
# Through udsfs TMPDIR is a directory in the mount and the run has `--route /tmp`: libuv's
# tests bind and connect at fixed names, /tmp/uv-test-sock, -sock2 and -sock3
# (test/task.h's TEST_PIPENAME), which the route makes udsfs sockets in the mount.
# The source: libuv 1.48.0 as vendored (with its test/ directory) in the sdist of PyPI's
# uvloop 0.21.0, fetched with pip and checked against its sha256 (LIBUV_SHA256 below).
# The build: gcc, straight from the source lists (no cmake): libuv's Linux sources
# (CMakeLists.txt's uv_sources, the unix and linux ones) into libuv.a, the test sources
# CMakeLists.txt names (uv_test_sources) linked with it into run-tests (uv_run_tests_a:
# libuv static, the C library dynamic, so the preload library carries it). Cached in
# $LIBUV_DIR (default target/libuv-tests; UDSFS_LIBUV_DIR to keep it elsewhere): a cold
# fetch and build about 1.5 min on 2 loaded cores, later runs reuse it.
# `run-tests TEST` runs TEST (and its helper processes) in children of the runner, with
# libuv's own timeout, and prints `ok 1 - TEST` (`# SKIP` for a skip) or `not ok 1 -
# TEST`; each test runs alone, in the source directory (the tests read test/fixtures),
# as root with UV_RUN_AS_ROOT=1 (the runner refuses root without it).
# The tests (TESTS below, 105 of the suite's 435): every test whose run on the kernel made
# an AF_UNIX socket (strace -f of each of the 435 alone: socket or socketpair with
# AF_UNIX): pipe_*, ipc_* (handle passing over a pipe), spawn_* with stdio pipes (libuv
# makes them with socketpair), stdio_*, fork_socketpair*, handle_fileno, udp_send_unix,
# tcp_ping_pong* (a socketpair case); less those whose only AF_UNIX sockets are glibc's
# (nscd lookups of get_passwd, getaddrinfo_*, getnameinfo_*, platform_output, ...; the
# socket of if_nametoindex in ip6_addr_link_local); and, by name, the rest of the
# families the issue names, which made no AF_UNIX socket themselves: pipe_* (errors
# before a socket, uv_pipe's pipe2), poll_*, spawn_*, fs_event_*, tty*, close_fd.
# A test that passes on the kernel (a skip is not a pass) must pass in each udsfs pass,
# or be listed for that pass in integration/run_libuv_tests_exceptions.txt with its
# reason; a listed test that passes fails the script (remove the line). Guards: strace
# counts the AF_UNIX sockets each test uses on the kernel (twice a socketpair, a socket
# bound, connected or sent from, an accepted connection: one made and dropped unused,
# or whose connect failed, never reaches udsfs); through udsfs the mount must make at
# least as many (the generation of a probe socket before and after each test) when the
# test passes, so a call left to the kernel fails the pass. On the lanes mount
# pipe_ping_pong's connection must be seen lane=direct while it runs, so the preload
# pass is not the nolanes pass again.
# Run time on a loaded 2-core machine: the build (cold) 1-2 min; the kernel pass and
# its strace count about 25 s each, each udsfs pass about 30 s.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd gcc gcc ar binutils strace strace python3 python3
python3 -m pip --version >/dev/null 2>&1 || fail "python3 -m pip is missing (package python3-pip): it fetches libuv's source"
EXCEPTIONS=$LIB_DIR/run_libuv_tests_exceptions.txt
UVLOOP=uvloop-0.21.0
LIBUV_SHA256=3bf12b0fda68447806a7ad847bfa591613177275d35b6724b1ee573faa3704e3
TESTS=(close_fd fork_socketpair fork_socketpair_started fs_event_close_in_callback
    fs_event_close_with_pending_delete_event fs_event_close_with_pending_event fs_event_error_reporting
    fs_event_getpath fs_event_immediate_close fs_event_no_callback_after_close
    fs_event_no_callback_on_close fs_event_ref fs_event_start_and_close fs_event_stop_in_cb
    fs_event_watch_dir fs_event_watch_dir_recursive fs_event_watch_file fs_event_watch_file_current_dir
    fs_event_watch_file_exact_path fs_event_watch_file_twice fs_event_watch_invalid_path handle_fileno
    ipc_heavy_traffic_deadlock_bug ipc_listen_after_write ipc_listen_before_write ipc_send_recv_pipe
    ipc_send_recv_pipe_inprocess ipc_send_recv_tcp ipc_send_recv_tcp_inprocess ipc_send_zero
    ipc_tcp_connection pipe_bind_error_addrinuse pipe_bind_error_addrnotavail pipe_bind_error_inval
    pipe_bind_or_listen_error_after_close pipe_close_stdout_read_stdin pipe_connect_bad_name
    pipe_connect_close_multiple pipe_connect_multiple pipe_connect_on_prepare pipe_connect_to_file
    pipe_getsockname pipe_getsockname_abstract pipe_getsockname_blocking pipe_listen_without_bind
    pipe_overlong_path pipe_pending_instances pipe_ping_pong pipe_ping_pong_vec pipe_ref pipe_ref2
    pipe_ref3 pipe_ref4 pipe_sendmsg pipe_server_close pipe_set_chmod pipe_set_non_blocking
    poll_bad_fdtype poll_close poll_close_doesnt_corrupt_stack poll_closesocket poll_duplex
    poll_multiple_handles poll_nested_epoll poll_oob poll_unidirectional shutdown_close_pipe
    spawn_and_kill spawn_and_kill_with_std spawn_and_ping spawn_auto_unref spawn_closed_process_io
    spawn_detached spawn_empty_env spawn_exercise_sigchld_issue spawn_exit_code spawn_fails
    spawn_fails_check_for_waitpid_cleanup spawn_fs_open spawn_ignored_stdio spawn_inherit_streams
    spawn_preserve_env spawn_quoted_path spawn_reads_child_path spawn_relative_path
    spawn_same_stdout_stderr spawn_setgid_fails spawn_setuid_fails spawn_setuid_setgid spawn_stdin
    spawn_stdio_greater_than_3 spawn_stdout spawn_stdout_and_stderr_to_file
    spawn_stdout_and_stderr_to_file2 spawn_stdout_and_stderr_to_file_swap spawn_stdout_to_file
    spawn_tcp_server stdio_emulate_iocp stdio_over_pipes tcp_ping_pong tcp_ping_pong_vec tty tty_file
    tty_pty udp_send_unix)
[ ${#TESTS[@]} -eq 105 ] || fail "the test list is not the 105 tests the header names"

# ---------------------------------------------------------------- the source and the build
LIBUV_DIR=${UDSFS_LIBUV_DIR:-$ROOT/target/libuv-tests}
SRC=$LIBUV_DIR/$UVLOOP/vendor/libuv
BUILD=$LIBUV_DIR/build
RUN_TESTS=$BUILD/run-tests
CFLAGS=(-O0 -w -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -D_LARGEFILE_SOURCE -D_POSIX_C_SOURCE=200112
    -I"$SRC/include" -I"$SRC/src")
STAMP="$LIBUV_SHA256 ${CFLAGS[*]}"
mkdir -p "$LIBUV_DIR"
build_ms=0
if [ ! -x "$RUN_TESTS" ] || [ "$(cat "$BUILD/stamp" 2>/dev/null)" != "$STAMP" ]; then
    t0=$(now_ms)
    if [ ! -f "$LIBUV_DIR/$UVLOOP.tar.gz" ]; then
        # --no-binary for uvloop alone: its build requirements come as wheels (pip prepares
        # the sdist's metadata in an isolated environment).
        python3 -m pip download --quiet --no-deps --no-binary uvloop -d "$LIBUV_DIR/dl" "${UVLOOP/-/==}" \
            >"$TMP/pip.out" 2>&1 || fail "pip download ${UVLOOP/-/==} (libuv's source) failed: $(tail -5 "$TMP/pip.out")"
        mv "$LIBUV_DIR/dl/$UVLOOP.tar.gz" "$LIBUV_DIR/$UVLOOP.tar.gz"
    fi
    echo "$LIBUV_SHA256  $LIBUV_DIR/$UVLOOP.tar.gz" | sha256sum -c --quiet - ||
        fail "$LIBUV_DIR/$UVLOOP.tar.gz is not the pinned sdist (sha256 $LIBUV_SHA256): remove it to fetch again"
    rm -rf "${LIBUV_DIR:?}/$UVLOOP" "$BUILD"
    tar -xzf "$LIBUV_DIR/$UVLOOP.tar.gz" -C "$LIBUV_DIR" "$UVLOOP/vendor/libuv" ||
        fail "unpacking $UVLOOP/vendor/libuv failed"
    [ -f "$SRC/test/run-tests.c" ] && [ -f "$SRC/test/test-list.h" ] || fail "$UVLOOP's libuv has no test/ directory"
    grep -q '#define UV_VERSION_MINOR 48' "$SRC/include/uv/version.h" || fail "$UVLOOP does not vendor libuv 1.48"
    mkdir -p "$BUILD"
    LIB_SOURCES=(src/fs-poll.c src/idna.c src/inet.c src/random.c src/strscpy.c src/strtok.c
        src/thread-common.c src/threadpool.c src/timer.c src/uv-common.c src/uv-data-getter-setters.c
        src/version.c src/unix/async.c src/unix/core.c src/unix/dl.c src/unix/fs.c src/unix/getaddrinfo.c
        src/unix/getnameinfo.c src/unix/loop-watcher.c src/unix/loop.c src/unix/pipe.c src/unix/poll.c
        src/unix/process.c src/unix/random-devurandom.c src/unix/signal.c src/unix/stream.c src/unix/tcp.c
        src/unix/thread.c src/unix/tty.c src/unix/udp.c src/unix/proctitle.c src/unix/linux.c
        src/unix/procfs-exepath.c src/unix/random-getrandom.c src/unix/random-sysctl-linux.c)
    # uv_test_sources as CMakeLists.txt lists them (runner-win.c is the Windows runner).
    mapfile -t TEST_SOURCES < <(sed -n '/list(APPEND uv_test_sources/,/)/p' "$SRC/CMakeLists.txt" |
        grep -o 'test/[a-z0-9_-]*\.c' | grep -vx test/runner-win.c | sort -u)
    [ ${#TEST_SOURCES[@]} -ge 170 ] || fail "CMakeLists.txt names only ${#TEST_SOURCES[@]} test sources"
    for f in "${LIB_SOURCES[@]}" "${TEST_SOURCES[@]}"; do
        [ -f "$SRC/$f" ] || fail "$SRC/$f is missing"
    done
    (cd "$SRC" && printf '%s\n' "${LIB_SOURCES[@]}" "${TEST_SOURCES[@]}" |
        xargs -P "${CARGO_BUILD_JOBS:-2}" -I{} sh -c 'f=$1; shift; o=$0/$(echo "$f" | tr / _).o; gcc -c "$@" -o "$o" "$f" 2>"$o.err" || { cat "$o.err"; exit 255; }' \
            "$BUILD" {} "${CFLAGS[@]}") >"$TMP/gcc.out" 2>&1 ||
        fail "compiling libuv failed: $(tail -20 "$TMP/gcc.out")"
    ar rcs "$BUILD/libuv.a" "$BUILD"/src_*.o || fail "ar libuv.a failed"
    # the tests of uv__strscpy, uv__strtok and idna include their source: libuv.a, not
    # the objects, so those members are not linked twice
    gcc -o "$RUN_TESTS" "$BUILD"/test_*.o "$BUILD/libuv.a" -lpthread -ldl -lrt >"$TMP/ld.out" 2>&1 ||
        fail "linking run-tests failed: $(tail -20 "$TMP/ld.out")"
    echo "$STAMP" >"$BUILD/stamp"
    build_ms=$(($(now_ms) - t0))
fi
export UV_RUN_AS_ROOT=1
cd "$SRC"
"$RUN_TESTS" --list | awk '{ print $1 }' >"$TMP/all.list"
for t in "${TESTS[@]}"; do
    grep -qx -- "$t" "$TMP/all.list" || fail "run-tests --list has no test $t"
done
ok "built libuv $(sed -n 's/^#define UV_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' "$SRC/include/uv/version.h" | paste -sd.) and its run-tests ($(wc -l <"$TMP/all.list") tests) in $LIBUV_DIR in $((build_ms / 1000)) s; ${#TESTS[@]} of them run here"

# ---------------------------------------------------------------- the passes
mkdir -m 1777 "$TMP/k"
# run_one PASS T TMPDIR [PREFIX...]: runs test T as PREFIX... run-tests T with TMPDIR; its
# result (ok, skip, fail or none) in R[PASS.T], its output in $TMP/PASS/T.out.
declare -A R
run_one() {
    local pass=$1 t=$2 tmpdir=$3 out
    shift 3
    mkdir -p "$TMP/$pass"
    out=$TMP/$pass/$t.out
    TMPDIR=$tmpdir timeout -k 5 60 "$@" "$RUN_TESTS" "$t" >"$out" 2>&1 </dev/null || true
    if grep -q "^ok 1 - $t # SKIP" "$out"; then
        R[$pass.$t]=skip
    elif grep -q "^ok 1 - $t\$" "$out"; then
        R[$pass.$t]=ok
    elif grep -q "^not ok 1 - $t\$" "$out"; then
        R[$pass.$t]=fail
    else
        R[$pass.$t]=none
    fi
}
# summary PASS: a line of PASS's counts.
summary() {
    local t n=0 s=0 f=0
    for t in "${TESTS[@]}"; do
        case ${R[$1.$t]} in ok) n=$((n + 1)) ;; skip) s=$((s + 1)) ;; *) f=$((f + 1)) ;; esac
    done
    echo "$n passed, $f failed, $s skipped"
}

t0=$(now_ms)
for t in "${TESTS[@]}"; do run_one kernel "$t" "$TMP/k"; done
say "kernel: $(summary kernel) in $((($(now_ms) - t0) / 1000)) s"
for t in "${TESTS[@]}"; do
    [ "${R[kernel.$t]}" == ok ] ||
        say "    kernel: $t: ${R[kernel.$t]}: $(grep -m3 "^# \|^ok 1 - $t # SKIP" "$TMP/kernel/$t.out" | sed 's/^ok 1 - [^#]*# //' | tr '\n' ' ')"
done

# The count: each test again under strace (--seccomp-bpf: only the traced calls stop),
# the AF_UNIX sockets it used in KSOCKS[T]: two a socketpair, one a socket(AF_UNIX, ...)
# later bound, connected or sent from (the library converts a socket to udsfs's at that
# first use: one made and dropped unused, or whose connect failed, never reaches the
# mount), one an accepted connection.
declare -A KSOCKS
t0=$(now_ms)
for t in "${TESTS[@]}"; do
    TMPDIR=$TMP/k timeout -k 5 60 strace -f -qq --seccomp-bpf -e signal=none \
        -e trace=socket,socketpair,bind,connect,sendto,sendmsg,accept,accept4 \
        -o "$TMP/strace.$t" "$RUN_TESTS" "$t" >/dev/null 2>&1 </dev/null || true
    KSOCKS[$t]=$(awk '
        / <unfinished \.\.\.>$/ { sub(/ <unfinished \.\.\.>$/, ""); part[$1] = $0; next }
        /^[0-9]+ +<\.\.\. [a-z0-9]+ resumed>/ { p = $1; sub(/^[0-9]+ +<\.\.\. [a-z0-9]+ resumed>/, ""); $0 = part[p] $0 }
        { pid = $1; sub(/^[0-9]+ +/, "") }
        /^socketpair\(AF_UNIX,/ && / = 0$/ { n += 2 }
        /^socket\(/ && $NF ~ /^[0-9]+$/ { ux[pid, $NF] = /^socket\(AF_UNIX,/; fresh[pid, $NF] = ux[pid, $NF] }
        /^(bind|connect|sendto|sendmsg)\([0-9]+,/ && (!/ = -1 E[A-Z]+ / || /EINPROGRESS|EAGAIN/) {
            fd = $0; sub(/^[a-z]+\(/, "", fd); sub(/,.*/, "", fd)
            if (fresh[pid, fd]) { n++; fresh[pid, fd] = 0 }
        }
        /^accept4?\([0-9]+,/ && $NF ~ /^[0-9]+$/ {
            fd = $0; sub(/^accept4?\(/, "", fd); sub(/,.*/, "", fd)
            if (ux[pid, fd]) n++
            ux[pid, $NF] = 0
        }
        END { print n + 0 }' "$TMP/strace.$t")
done
total=0
for t in "${TESTS[@]}"; do total=$((total + KSOCKS[$t])); done
[ "$total" -ge 100 ] || fail "strace counted only $total AF_UNIX sockets in the tests' kernel runs"
say "kernel: the tests used $total AF_UNIX sockets (strace, in $((($(now_ms) - t0) / 1000)) s)"

mkdir -m 1777 "$MNT/t"
# udsfs_pass PASS [udsfs run options...]: every test through `udsfs run --mount $MNT
# --route /tmp OPTIONS` with TMPDIR in the mount, and the socket guard.
udsfs_pass() {
    local pass=$1 t before after made t0
    shift
    t0=$(now_ms)
    after=$(socket_generation)
    for t in "${TESTS[@]}"; do
        before=$after
        run_one "$pass" "$t" "$MNT/t" env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --route /tmp "$@" --
        after=$(socket_generation)
        made=$((after - before - 1))
        if [ "${R[kernel.$t]}" == ok ] && [ "${R[$pass.$t]}" == ok ] && [ "$made" -lt "${KSOCKS[$t]}" ]; then
            fail "$pass: $t: the mount made $made sockets while the test used ${KSOCKS[$t]} AF_UNIX sockets on the kernel: its calls did not reach udsfs"
        fi
    done
    # Nothing of udsfs on the tests' output but the supervisor's refusal of io_uring_setup:
    # libuv 1.48 sets up two rings at a loop's start (src/unix/linux.c: file operations,
    # and epoll_ctl batched as IORING_OP_EPOLL_CTL, which the library would never see) and
    # on ENOSYS makes plain calls, as on a kernel without io_uring.
    if grep -hE '^udsfs run:|udsfs-preload' "$TMP/$pass"/*.out |
        grep -v 'io_uring_setup (system call 425) refused with ENOSYS' >"$TMP/$pass.said"; then
        fail "$pass: udsfs said on the tests' output: $(sort "$TMP/$pass.said" | uniq -c | sort -rn | head -5)"
    fi
    say "$pass: $(summary "$pass") in $((($(now_ms) - t0) / 1000)) s"
}

udsfs_pass preload
udsfs_pass seccomp --front seccomp
# The lanes guard: pipe_ping_pong (ping-pong with its echo server helper over a pipe
# connection; a fraction of a second through udsfs) seen lane=direct on the default
# mount, its sockets' status sampled every 10 ms while it runs.
# Up to three runs (a loaded machine's sampling may miss one).
laned=0
for attempt in 1 2 3; do
    start_bg PP env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --route /tmp -- "$RUN_TESTS" pipe_ping_pong \
        >"$TMP/lanes_probe.out" 2>&1
    for _ in $(seq 1 3000); do
        proc_alive "$PP" || break
        n=$(cat "$U"/sock/*/status 2>/dev/null | grep -c '^lane=direct$' || true)
        [ "$n" -le "$laned" ] || laned=$n
        sleep 0.01
    done
    stop_bg "$PP"
    [ "$laned" -lt 2 ] || break
done
grep -q '^ok 1 - pipe_ping_pong$' "$TMP/lanes_probe.out" || fail "pipe_ping_pong failed in the lanes probe: $(tail -5 "$TMP/lanes_probe.out")"
[ "$laned" -ge 2 ] || fail "pipe_ping_pong's connection was never seen lane=direct on the default mount (most at once: $laned)"
ok "on the default mount pipe_ping_pong's connection had its lane (lane=direct on $laned sockets at once)"
udsfs_unmount
udsfs_mount --no-lanes
mkdir -m 1777 "$MNT/t"
udsfs_pass nolanes
n=$(cat "$U"/sock/*/status 2>/dev/null | grep -c '^lane=direct$' || true)
[ "$n" -eq 0 ] || fail "the --no-lanes mount has $n laned sockets"

# ---------------------------------------------------------------- test by test
# An exceptions line is `PASSES TEST REASON`: PASSES a comma list of preload, seccomp,
# nolanes (or *); TEST a name of run-tests --list.
exceptions_listed "$EXCEPTIONS" preload seccomp nolanes >"$TMP/listed" || exit 1
bad=()
for pass in preload seccomp nolanes; do
    mapfile -t mine < <(awk -v p="$pass" '{ n = split($1, ps, ","); for (i = 1; i <= n; i++) if (ps[i] == p) print $2 }' "$TMP/listed")
    kpass=0 got=0
    for t in "${TESTS[@]}"; do
        [ "${R[kernel.$t]}" == ok ] || continue
        kpass=$((kpass + 1))
        listed=0
        printf '%s\n' ${mine[@]+"${mine[@]}"} | grep -qx -- "$t" && listed=1
        if [ "${R[$pass.$t]}" == ok ]; then
            got=$((got + 1))
            [ "$listed" -eq 0 ] || bad+=("$pass: listed $t passes now (remove the line, or $pass from it)")
        elif [ "$listed" -eq 1 ]; then
            say "    $pass: $t: ${R[$pass.$t]} (listed)"
        else
            bad+=("$pass: $t passes on the kernel, ${R[$pass.$t]} through udsfs, not listed")
            {
                echo "--- $pass: $t:"
                head -15 "$TMP/$pass/$t.out" | sed 's/^/    /'
            } >&2
        fi
    done
    for t in ${mine[@]+"${mine[@]}"}; do
        printf '%s\n' "${TESTS[@]}" | grep -qx -- "$t" || bad+=("$pass: listed $t is not one of the tests run here")
        [ "${R[kernel.$t]:-}" == ok ] || bad+=("$pass: listed $t does not pass on the kernel (${R[kernel.$t]:-not run})")
    done
    ok "$pass: $got of $kpass kernel passes pass through udsfs; ${#mine[@]} listed for $pass"
done
[ "$(summary kernel | cut -d' ' -f1)" -ge 90 ] || bad+=("kernel: only $(summary kernel)")
[ ${#bad[@]} -eq 0 ] || fail "$(printf '%s\n      ' "${bad[@]}")"
