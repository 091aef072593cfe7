#!/usr/bin/env bash
# Signals on blocked socket calls, as FUSE_INTERRUPT: tests/conformance/signals.py
# runs on kernel sockets and through `udsfs run`, and every line must be equal. A
# process-directed signal ends one thread's call, as the kernel picks one; a
# thread-directed one ends that call with EINTR (recv, read, accept, connect, send),
# with SO_RCVTIMEO or SO_SNDTIMEO even under SA_RESTART, and a stream send that
# queued part returns its count. A stop and continue with no handler restarts the
# call unless the socket has a timeout (signal(7)). With SA_RESTART (Python's siginterrupt(sig, False),
# glibc's signal(), sigaction's flag) and no timeout the kernel restarts the call; the
# daemon can only answer EINTR (vendor/fuser/UDSFS-PATCH.md), and the preload library
# restarts it (preload/src/restart.rs), so the "sa_restart" lines must match too.
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
prog=$ROOT/tests/conformance/signals.py
mkdir -p "$TMP/k"
# The kernel's run and udsfs's at once: each signals only its own threads, and the
# kernel's sleeps nearly all its time.
python3 "$prog" "$TMP/k" >"$TMP/kernel.out" 2>"$TMP/kernel.err" &
kernel_run=$!
on_udsfs python3 "$prog" "$MNT" >"$TMP/udsfs.out" 2>"$TMP/udsfs.err" ||
    fail "signals.py fails through udsfs run: $(tail -3 "$TMP/udsfs.err")"
wait $kernel_run || fail "signals.py fails on kernel sockets: $(tail -3 "$TMP/kernel.err")"
say "kernel:" && sed 's/^/  /' "$TMP/kernel.out"
say "udsfs:" && sed 's/^/  /' "$TMP/udsfs.out"
grep -qx 'where: kernel' "$TMP/kernel.out" || fail "the kernel run did not use kernel sockets"
grep -qx 'where: udsfs' "$TMP/udsfs.out" || fail "the udsfs run did not use udsfs sockets"
tail -1 "$TMP/udsfs.out" | grep -qx done || fail "udsfs run did not finish"
strict() { grep -v -e '^where: ' "$1"; }
if ! diff <(strict "$TMP/kernel.out") <(strict "$TMP/udsfs.out") >"$TMP/diff"; then
    cat "$TMP/diff" >&2
    fail "udsfs run answered differently from the kernel (< kernel, > udsfs)"
fi
ok "the same $(strict "$TMP/udsfs.out" | wc -l) results as the kernel"
[ ! -s "$TMP/udsfs.err" ] || fail "the library complained: $(cat "$TMP/udsfs.err")"

# The kernel's answers the comparison rests on: restarts where SA_RESTART is set
# and no timeout, EINTR otherwise (a kernel that changed would make the
# comparison say less).
expect_eq "SA_RESTART on the kernel" "$(grep -e '^sa_restart' -e 'SA_RESTART:' -e 'signal' -e 'stopped' "$TMP/kernel.out" | grep -v storm)" \
"threads, no SA_RESTART: EINTRs 1 ['1', '1', '1', 'EINTR']
sa_restart threads: EINTRs 0 ['1', '1', '1', '1']
recv, no SA_RESTART: EINTR
sa_restart recv: 4
read, no SA_RESTART: EINTR
sa_restart read: 4
recv with SO_RCVTIMEO, SA_RESTART: EINTR
read with SO_RCVTIMEO, no SA_RESTART: EINTR
seqpacket peek, MSG_TRUNC, no buffer, no SA_RESTART: EINTR
sa_restart seqpacket peek, MSG_TRUNC, no buffer: 11
accept, no SA_RESTART: EINTR
sa_restart accept: fd
connect to a full backlog, no SA_RESTART: EINTR (backlog took 1)
sa_restart connect to a full backlog: 0 (backlog took 1)
sa_restart send to a full queue: 100
send to a full queue, no SA_RESTART: EINTR
send with SO_SNDTIMEO, SA_RESTART: EINTR
sa_restart send interrupted: partial=True
sa_restart recv, signal(): 4
sigaction reports after signal(): getpid flags=0x14000000
sa_restart read, signal(): 4
recv, sysv_signal(): EINTR
sigaction reports after sysv_signal's one shot: None flags=0xc4000000
recv, sigaction without SA_RESTART: EINTR
sa_restart recv, sigaction SA_RESTART|SA_SIGINFO: 4
recv with SO_RCVTIMEO, signal(): EINTR
recv, signal() after siginterrupt: EINTR
sa_restart recv stopped and continued: 4
recv with SO_RCVTIMEO stopped and continued: EINTR"
