#!/usr/bin/env bash
# adversarial_efault.sh: a program that hands its socket calls memory it cannot read or
# write (integration/c/efault.c: a msghdr, iovec array, buffer, name, control buffer,
# mmsghdr vector, timeout, option or address length on an unmapped or read-only page)
# gets EFAULT and goes on, as on Linux, through both fronts of `udsfs run`: the preload
# library (a dynamic build) and the supervisor (a static build). Each case prints its
# result and what stayed queued; the outputs must equal the kernel's line by line. The
# program's own faults stay its own: its SIGSEGV handler runs (on its alternate stack,
# in a thread too), sigaction reads back its own handler, and by default a fault of its
# own kills it with SIGSEGV.
source "$(dirname "$0")/lib.sh"

need_static_gcc
need_preload

gcc -O2 -pthread -o "$TMP/efault" "$ROOT/integration/c/efault.c" || fail "gcc efault.c failed"
gcc -static -O2 -pthread -o "$TMP/efault_static" "$ROOT/integration/c/efault.c" || fail "gcc -static efault.c failed"

"$TMP/efault" >"$TMP/kernel.out" 2>&1 || fail "efault on kernel sockets: $(cat "$TMP/kernel.out")"
expect_eq "where the kernel run's sockets are" "$(grep '^where: ' "$TMP/kernel.out" | sort | uniq -c | xargs)" "3 where: kernel"
cases=$(sed -n 's/^all \([0-9]*\) cases done$/\1/p' "$TMP/kernel.out")
[ -n "$cases" ] || fail "the kernel run did not finish: $(tail -5 "$TMP/kernel.out")"
say "on kernel sockets: $cases cases, e.g.:"
grep -A2 'stream recvmsg, msg_name unmapped' "$TMP/kernel.out" | sed 's/^/    /'

bad=()
compare() { # compare NAME OUTPUT-FILE STATUS
    local name=$1 out=$2 st=$3
    say "through $name: exit status $st, $(grep -c '^  alive after' "$out") cases ran; the last lines:"
    tail -3 "$out" | sed 's/^/    /'
    if ! diff <(grep -v '^where: ' "$TMP/kernel.out") <(grep -v '^where: ' "$out") >"$TMP/$name.diff"; then
        say "through $name the results differ from the kernel's (< kernel, > $name):"
        sed 's/^/    /' "$TMP/$name.diff"
        bad+=("$name")
        return
    fi
    expect_eq "where $name's sockets are (a pair, a listener, a client)" "$(grep '^where: ' "$out" | sort | uniq -c | xargs)" "3 where: udsfs"
    expect_eq "$name's exit status" "$st" 0
    ok "through $name: the same $cases results as the kernel, the program alive after each"
}

st=0
"$UDSFS_BIN" run --front preload --mount "$MNT" -- "$TMP/efault" >"$TMP/library.out" 2>"$TMP/library.err" || st=$?
compare library "$TMP/library.out" "$st"

st=0
"$UDSFS_BIN" run --front seccomp --mount "$MNT" -- "$TMP/efault_static" >"$TMP/supervisor.out" 2>"$TMP/supervisor.err" || st=$?
compare supervisor "$TMP/supervisor.out" "$st"
[ "${#bad[@]}" -eq 0 ] || fail "results differ from the kernel's through: ${bad[*]}"
