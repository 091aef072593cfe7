#!/usr/bin/env bash
# splice(2) and sendfile(2) with a udsfs socket at one end (integration/c/splice.c):
# socket -> pipe with short lengths and then recv, pipe -> socket, sendfile with the
# socket as in_fd (Linux: EINVAL) and as out_fd, for stream, seqpacket and datagram
# sockets, also after a bare F_SETFL(O_NONBLOCK); 4 MiB from a writer through splice as
# Go's io.Copy does; a descriptor handed to a program run without the library (env -u
# LD_PRELOAD). On kernel sockets, through `udsfs run`'s library (a dynamic build) and
# through its supervisor (`--front seccomp`, a static build): every byte exactly once,
# in order, the kernel's counts and errnos. A udsfs socket's data file is a FUSE file
# opened FOPEN_DIRECT_IO|FOPEN_STREAM; opened without O_DIRECT, Linux's splice read it
# through the page cache (filemap_splice_read): bytes read ahead were lost to recv and
# later splices returned 0, EOF to io.Copy. The fronts open it O_DIRECT (copy_splice_read)
# and the library hides O_DIRECT from F_GETFL and keeps it across F_SETFL
# (calls/src/fileflags.rs); the supervisor, which traps F_GETFL and F_SETFL, applies
# the same rule (src/supervisor/fcntl.rs): its "fl:" and "setfl:" lines are compared too.
source "$(dirname "$0")/lib.sh"

need_static_gcc
need_preload
gcc -O2 -o "$TMP/splice" "$ROOT/integration/c/splice.c" || fail "gcc splice.c failed"
gcc -static -O2 -o "$TMP/splice_static" "$ROOT/integration/c/splice.c" || fail "gcc -static splice.c failed"
ok "built splice (dynamic) and splice_static"

timeout 60 "$TMP/splice" >"$TMP/kernel.out" 2>"$TMP/kernel.err" || fail "the probe fails on kernel sockets: $(tail -3 "$TMP/kernel.err")"
tail -1 "$TMP/kernel.out" | grep -qx done || fail "the kernel run did not finish"
! grep -q WRONG "$TMP/kernel.out" || fail "the kernel run got wrong bytes: $(grep WRONG "$TMP/kernel.out")"
ok "kernel: $(wc -l <"$TMP/kernel.out") lines"

# Known differences (README, "Differences from Linux"), shown, not compared: a splice
# from an empty stream socket with SPLICE_F_NONBLOCK waits where Linux's fails EAGAIN
# (copy_splice_read's read of the FUSE file does not see the splice's flag); a seqpacket
# or datagram socket's splice after an earlier splice returns 0 (splice reads at the
# file's position, which splices advance, and the daemon ends a datagram read at a
# position past 0: src/fuse/files.rs), its bytes left to recv, not lost.
KNOWN='^(setfl: )?(seqpacket|dgram) (splice 100|after the second splice|empty)|^stream empty: '
say "known differences, the kernel's lines:"
grep -E "$KNOWN" "$TMP/kernel.out" | sed 's/^/  kernel: /'

# compare NAME FILTER: NAME.out less FILTER's and the known lines against the kernel's.
compare() {
    local name=$1 filter="$2|$KNOWN"
    grep -E "$KNOWN" "$TMP/$name.out" | sed "s/^/  $name: /"
    tail -1 "$TMP/$name.out" | grep -qx done || fail "$name: the probe did not finish: $(tail -3 "$TMP/$name.err")"
    if ! diff <(grep -Ev "$filter" "$TMP/kernel.out") <(grep -Ev "$filter" "$TMP/$name.out") >"$TMP/$name.diff"; then
        cat "$TMP/$name.diff" >&2
        fail "$name: answered differently from the kernel (< kernel, > $name)"
    fi
    ok "$name: the same $(grep -Evc "$filter" "$TMP/$name.out") lines as the kernel"
}

st=0
UDSFS_PRELOAD=$PRELOAD_LIB timeout 60 "$UDSFS_BIN" run --front preload --mount "$MNT" -- "$TMP/splice" \
    >"$TMP/library.out" 2>"$TMP/library.err" || st=$?
[ "$st" -eq 0 ] || fail "the library run failed ($st): $(tail -3 "$TMP/library.err") after: $(tail -3 "$TMP/library.out")"
compare library '^$'

st=0
timeout 60 "$UDSFS_BIN" run --front seccomp --mount "$MNT" -- "$TMP/splice_static" \
    >"$TMP/supervisor.out" 2>"$TMP/supervisor.err" || st=$?
[ "$st" -eq 0 ] || fail "the supervisor run failed ($st): $(tail -3 "$TMP/supervisor.err") after: $(tail -3 "$TMP/supervisor.out")"
compare supervisor '^$'
say "the supervisor's F_GETFL: $(grep '^fl: F_GETFL' "$TMP/supervisor.out" | head -1) (the kernel's: $(grep '^fl: F_GETFL' "$TMP/kernel.out" | head -1))"
