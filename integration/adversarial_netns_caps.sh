#!/usr/bin/env bash
# adversarial_netns_caps.sh: abstract names stay per network namespace when the daemon
# may not read a caller's /proc/TID/ns/net. A root daemon without CAP_SYS_PTRACE (what a
# hardened unit's CapabilityBoundingSet leaves) gets EACCES there for another user's
# thread and for any thread whose capabilities it lacks (root's own, full ones). Filing
# such a caller in the daemon's namespace let user B, in a network namespace of its own,
# reach and squat the host's abstract names, which Linux never allows.
#
# A root server in the host's namespace listens on @NAME; a prober in a network namespace
# of its own (B's own user and network namespace; one root made, B inside; root inside
# one) then: (a) connects to @NAME (kernel: ECONNREFUSED), (b) binds @NAME (kernel: ok,
# its own namespace), (c) looks up .udsfs/abstract/NAME (kernel: /proc/net/unix has no
# @NAME; nor do .udsfs/abstract/, .udsfs/unix and, to a reader other than root,
# .udsfs/graph), and holds @NAME-squat while the host binds it (kernel: ok).
#   1. the kernel's answers;
#   2. a daemon with every capability: the kernel's answers;
#   3. a daemon without CAP_SYS_PTRACE: the kernel's answers (a namespace it cannot read
#      finds no names: the prober's own connect within its namespace may be refused),
#      and root's and B's processes in the host's namespace still find their names (root's
#      through the supervisor too).
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_NO_MOUNT=1
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3 unshare util-linux setpriv util-linux
for_other_users signs
B=61007
NAME=netns-caps-$$

# The probe and ns_probe_lib.py in a directory its other users may list (an import
# reads the directory).
install -d -m 755 "$TMP/py"
install -m 644 "$LIB_DIR/ns_probe_lib.py" "$TMP/py/"
cat >"$TMP/py/nsprobe.py" <<'EOF'
import os, sys

from ns_probe_lib import on_udsfs, res, stream, wait_for

mode, name, mnt, tmp = sys.argv[1:5]



def found(n):
    """Whether this namespace's view shows @n: the mount's entry, or /proc/net/unix."""
    if on_udsfs():
        return "yes" if os.path.exists(f"{mnt}/.udsfs/abstract/{n}") else "no"
    with open("/proc/net/unix") as f:
        return "yes" if any(l.split()[-1:] == [f"@{n}"] for l in f) else "no"


def listed(n):
    """Whether this namespace's listings show @n: the mount's .udsfs/abstract/,
    .udsfs/unix and (a reader other than root: GRAPH_SCOPED) .udsfs/graph; or
    /proc/net/unix."""
    if not on_udsfs():
        return found(n)
    shows = n in os.listdir(f"{mnt}/.udsfs/abstract")
    shows |= any(l.split()[-1:] == [f"@{n}"] for l in open(f"{mnt}/.udsfs/unix"))
    if os.environ.get("GRAPH_SCOPED"):
        shows |= f"@{n}" in open(f"{mnt}/.udsfs/graph").read()
    return "yes" if shows else "no"


print("where:", "udsfs" if on_udsfs() else "kernel", flush=True)
if mode == "serve":  # listen on @name until tmp/release-name exists
    s = stream()
    s.bind("\0" + name)
    s.listen(16)
    open(f"{tmp}/listening-{name}", "w").close()
    wait_for(f"{tmp}/release-{name}")
elif mode == "connect":
    print("connect:", res(lambda: stream().connect("\0" + name)), flush=True)
elif mode == "bind":
    s = stream()
    print("bind:", res(lambda: s.bind("\0" + name)), flush=True)
elif mode == "probe":
    print("connect to the host's name:", res(lambda: stream().connect("\0" + name)))
    print("the host's name found:", found(name))
    print("the listings show the host's name:", listed(name))
    mine = stream()
    print("bind the host's name:", res(lambda: mine.bind("\0" + name)))
    own = stream()
    print("bind a name of its own:", res(lambda: own.bind("\0" + name + "-own")))
    own.listen(4)
    print("note own connect:", res(lambda: stream().connect("\0" + name + "-own")))
    sq = stream()
    print("bind @NAME-squat:", res(lambda: sq.bind("\0" + name + "-squat")), flush=True)
    open(f"{tmp}/held", "w").close()
    wait_for(f"{tmp}/release-probe")
print("done", flush=True)
EOF

# on_fs KIND CMD...: CMD on kernel sockets (KIND kernel) or through `udsfs run` on $MNT.
on_fs() {
    local kind=$1
    shift
    if [ "$kind" == kernel ]; then
        "$@"
    else
        env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- "$@"
    fi
}
PROBE=(/usr/bin/python3 "$TMP/py/nsprobe.py")
AS_B=(setpriv --reuid="$B" --regid="$B" --clear-groups)
# The probers, each in a network namespace of its own.
PROBERS=(b-userns b-netns root-netns)
prober() {
    case $1 in
    b-userns) "${AS_B[@]}" unshare -rn env GRAPH_SCOPED=1 "${@:2}" ;;
    b-netns) unshare -n "${AS_B[@]}" env GRAPH_SCOPED=1 "${@:2}" ;;
    root-netns) unshare -n "${@:2}" ;;
    esac
}

# host_server KIND TAG: root's server on @NAME in the host's namespace, until released.
host_server() {
    rm -f "$S/release-$NAME" "$S/listening-$NAME"
    on_fs "$1" "${PROBE[@]}" serve "$NAME" "$MNT" "$S" >"$TMP/$2.srv" 2>&1 &
    SRV_PID=$!
    wait_for "$S/listening-$NAME" 10 "$2: root's server never listened" "$TMP/$2.srv"
}
stop_host_server() {
    touch "$S/release-$NAME"
    wait "$SRV_PID" || fail "root's server failed: $(cat "$TMP/$1.srv")"
}

# probe KIND TAG PROBER: the prober's answers, and the host's bind of @NAME-squat while
# the prober holds it, into $TMP/TAG.out.
probe() {
    local kind=$1 tag=$2 who=$3 pid
    rm -f "$S/held" "$S/release-probe"
    if [ "$kind" == kernel ]; then
        prober "$who" "${PROBE[@]}" probe "$NAME" "$MNT" "$S" >"$TMP/$tag.out" 2>"$TMP/$tag.err" &
    else
        prober "$who" env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- \
            "${PROBE[@]}" probe "$NAME" "$MNT" "$S" >"$TMP/$tag.out" 2>"$TMP/$tag.err" &
    fi
    pid=$!
    wait_for "$S/held" 20 "$tag: the prober never got to the squat" "$TMP/$tag.err"
    on_fs "$kind" "${PROBE[@]}" bind "$NAME-squat" "$MNT" "$S" | grep -v '^where:' | sed 's/^/the host: /' >>"$TMP/$tag.host"
    touch "$S/release-probe"
    wait "$pid" || fail "$tag: the prober failed: $(cat "$TMP/$tag.err")"
    tail -1 "$TMP/$tag.out" | grep -qx 'done' || fail "$tag: the prober did not finish: $(cat "$TMP/$tag.out")"
    cat "$TMP/$tag.host" >>"$TMP/$tag.out"
    rm -f "$TMP/$tag.host"
}
# answers TAG: the answers compared with the kernel's (where:, note: and done lines left out).
answers() { grep -v -e '^where: ' -e '^note ' -e 'done$' "$TMP/$1.out"; }
note() { sed -n "s/^note $2: //p" "$TMP/$1.out"; }

# 1. The kernel.
host_server kernel kernel
for who in "${PROBERS[@]}"; do
    probe kernel "kernel-$who" "$who"
    grep -qx 'where: kernel' "$TMP/kernel-$who.out" || fail "1. $who: the kernel run did not use kernel sockets"
    [ "$(note "kernel-$who" "own connect")" == ok ] || fail "1. $who: the kernel refused the prober's own name"
done
stop_host_server kernel
printf '%s\n' "connect to the host's name: ECONNREFUSED" "the host's name found: no" \
    "the listings show the host's name: no" "bind the host's name: ok" \
    "bind a name of its own: ok" "bind @NAME-squat: ok" "the host: bind: ok" |
    cmp -s - <(answers kernel-b-userns) || fail "1. the kernel's answers are not the expected ones: $(answers kernel-b-userns | paste -sd';')"
ok "1. kernel: from a network namespace of its own, the host's @$NAME is out of reach and free to bind"

# compare PART TAG WHO: TAG's answers are the kernel's for prober WHO.
compare() {
    grep -qx 'where: udsfs' "$TMP/$2.out" || fail "$1. $3: the prober did not use udsfs sockets"
    if ! diff <(answers "kernel-$3") <(answers "$2") >"$TMP/diff"; then
        cat "$TMP/diff" >&2
        fail "$1. $3: the prober in a network namespace of its own answered differently from the kernel (< kernel, > udsfs)"
    fi
}

# 2. A daemon with every capability.
udsfs_mount --allow-other
host_server udsfs full
for who in "${PROBERS[@]}"; do
    probe udsfs "full-$who" "$who"
    compare 2 "full-$who" "$who"
    [ "$(note "full-$who" "own connect")" == ok ] || fail "2. $who: its own name refused it: $(note "full-$who" "own connect")"
done
stop_host_server full
ok "2. a daemon with every capability: the kernel's answers for ${PROBERS[*]} (.udsfs/abstract/, .udsfs/unix and B's .udsfs/graph do not list the host's name)"

# 3. A daemon without CAP_SYS_PTRACE.
udsfs_unmount
udsfs_mount_noptrace --allow-other
host_server udsfs noptrace
for who in "${PROBERS[@]}"; do
    probe udsfs "noptrace-$who" "$who"
    compare 3 "noptrace-$who" "$who"
    case $(note "noptrace-$who" "own connect") in
    ok | ECONNREFUSED) ;;
    *) fail "3. $who: its own connect within its namespace: $(note "noptrace-$who" "own connect")" ;;
    esac
done
why=$(grep -m1 "may not read /proc/[0-9]*/ns/net" "$LOG") ||
    fail "3. the daemon did not say why it could not tell a caller's network namespace"
say "the daemon: ${why#*] }"
# Root's own processes and B's in the host's namespace, which the daemon cannot read
# either (B's: another user; root's: capabilities the daemon lacks), find their names.
got=$(on_fs udsfs "${PROBE[@]}" connect "$NAME" "$MNT" "$S" 2>&1 | grep -v -e "^where:" -e "^done$") || true
[ "$got" == "connect: ok" ] ||
    fail "3. root's client in the host's namespace does not reach root's server: $got"
# The same client carried by the supervisor (its act-for grants name threads the daemon
# cannot read either).
got=$(env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" --front seccomp -- \
    "${PROBE[@]}" connect "$NAME" "$MNT" "$S" 2>&1 | grep -v -e "^where:" -e "^done$") || true
[ "$got" == "connect: ok" ] ||
    fail "3. root's client through the supervisor in the host's namespace does not reach root's server: $got"
stop_host_server noptrace
"${AS_B[@]}" env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- \
    "${PROBE[@]}" serve "$NAME-b" "$MNT" "$S" >"$TMP/b.srv" 2>&1 &
b_srv=$!
wait_for "$S/listening-$NAME-b" 10 "3. B's server never listened" "$TMP/b.srv"
got=$("${AS_B[@]}" env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- \
    "${PROBE[@]}" connect "$NAME-b" "$MNT" "$S" | grep -v -e "^where:" -e "^done$") || true
[ "$got" == "connect: ok" ] || fail "3. B's client in the host's namespace does not reach B's server: $got"
touch "$S/release-$NAME-b"
wait "$b_srv" || fail "3. B's server failed: $(cat "$TMP/b.srv")"
ok "3. a daemon without CAP_SYS_PTRACE: the kernel's answers for ${PROBERS[*]} (own connect within the namespace: $(for w in "${PROBERS[@]}"; do note "noptrace-$w" "own connect"; done | paste -sd/)); root's and B's processes in the host's namespace find their names"
