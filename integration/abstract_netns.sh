#!/usr/bin/env bash
# Abstract names follow the caller's network namespace within one mount, as Linux's
# do: processes in different namespaces never see each other's abstract
# names or autobinds; processes in one namespace do. Through `udsfs run` (a
# differential program against the kernel) and through the files (`unshare -n`).
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
need_cmd unshare util-linux
need_cmd nsenter util-linux

kernel_vs_udsfs "$ROOT/tests/conformance/abstract_netns.py"

# Through the files. The host's namespace binds @host-only and @both.
new_sock H stream
expect_ok ctl "$H_FD" "bind @host-only"
expect_ok ctl "$H_FD" "listen"
new_sock B dgram
expect_ok ctl "$B_FD" "bind @both"
new_sock A dgram
expect_ok ctl "$A_FD" "bind"
auto=$(status_of "$A" local)

# A process in a namespace of its own: binds @both and @ns-only, holds them.
unshare -n bash -c '
    exec 3<>"$1/dgram/clone"; read -r n <&3; echo "bind @both" >&3 || exit 1
    exec 4<>"$1/stream/clone"; read -r m <&4
    { echo "bind @ns-only" && echo listen; } >&4 || exit 1
    echo "$n $m" >"$2.tmp" && mv "$2.tmp" "$2"
    exec sleep 60
' bash "$U" "$TMP/ns-ready" &
NS_PID=$!
for _ in $(seq 500); do [ -e "$TMP/ns-ready" ] && break; proc_alive "$NS_PID" || break; sleep 0.02; done
[ -e "$TMP/ns-ready" ] || fail "the process in its own network namespace could not bind @both"
read -r NS_B NS_L <"$TMP/ns-ready"
[ "$(readlink "/proc/$NS_PID/ns/net")" != "$(readlink /proc/self/ns/net)" ] ||
    fail "unshare -n did not give a namespace of its own"
ok "@both is bound in two namespaces at once, on one mount"

# From the host: only the host's names, in `.udsfs/abstract/` and `.udsfs/unix` too (as
# /proc/net/unix shows only the reader's namespace's sockets: another namespace's names,
# a container's, are not the host's to list).
[ -e "$U/abstract/host-only" ] || fail "the host does not find @host-only"
exec {c_fd}<>"$U/stream/clone"
read -r _ <&"$c_fd"
expect_errno ECONNREFUSED ctl "$c_fd" "connect @ns-only"
expect_errno ENOENT cat "$U/abstract/ns-only"
! ls "$U/abstract" | grep -qx ns-only || fail ".udsfs/abstract/ lists the other namespace's @ns-only to the host"
ls "$U/abstract" | grep -qx host-only || fail ".udsfs/abstract/ does not list the host's @host-only"
expect_eq "how often .udsfs/abstract/ lists @both" "$(ls "$U/abstract" | grep -cx both)" 1
expect_eq "sockets bound at @both in .udsfs/unix" "$(awk '$8 == "@both"' "$U/unix" | wc -l)" 1
expect_eq "sockets bound at @ns-only in .udsfs/unix" "$(awk '$8 == "@ns-only"' "$U/unix" | wc -l)" 0
# A datagram to @both from the host reaches the host's socket only.
new_sock S dgram
expect_ok ctl "$S_FD" "connect @both"
send "$S" to-host
expect_eq "what the host's @both receives" "$(recv "$B")" to-host
expect_eq "what the namespace's @both holds" "$(sed -n 's/^rcvq_msgs=//p' "$U/sock/$NS_B/status")" 0

# From another process in the namespace (nsenter): its names, not the host's.
in_ns() { nsenter --net="/proc/$NS_PID/ns/net" "$@"; }
in_ns bash -c '
    fail() { echo "FAIL: $*" >&2; exit 1; }
    [ -e "$1/abstract/ns-only" ] || fail "@ns-only not found in its own namespace"
    [ ! -e "$1/abstract/host-only" ] || fail "@host-only found from another namespace"
    [ ! -e "$1/abstract/${2#@}" ] || fail "the host autobind $2 found from another namespace"
    ls "$1/abstract" | grep -qx ns-only || fail ".udsfs/abstract/ does not list its @ns-only"
    ! ls "$1/abstract" | grep -qx host-only || fail ".udsfs/abstract/ lists the host'"'"'s @host-only"
    [ "$(awk "\$8 == \"@ns-only\"" "$1/unix" | wc -l)" = 1 ] || fail ".udsfs/unix does not show its @ns-only"
    [ "$(awk "\$8 == \"@host-only\"" "$1/unix" | wc -l)" = 0 ] || fail ".udsfs/unix shows the host'"'"'s @host-only"
    exec 3<>"$1/stream/clone"; read -r _ <&3
    echo "connect @ns-only" >&3 || fail "connect @ns-only from its own namespace"
    exec 5<>"$1/stream/clone"; read -r _ <&5
    ! echo "connect @host-only" >&5 2>/dev/null || fail "connect @host-only from another namespace"
    exec 6<>"$1/dgram/clone"; read -r s <&6
    echo "connect @both" >&6 && printf to-ns >"$1/sock/$s/data"
' bash "$U" "$auto" || fail "the namespace's view of the names is wrong"
expect_eq "what the namespace's @both holds" "$(sed -n 's/^rcvq_msgs=//p' "$U/sock/$NS_B/status")" 1
expect_status "$B" rcvq_msgs 0
expect_eq "the namespace's listener's waiting clients" "$(sed -n 's/^pending=//p' "$U/sock/$NS_L/status")" 1
ok "a process in the namespace finds its names and not the host's"

# Autobinds are per namespace: the namespace may take the host's autobound name.
in_ns bash -c 'exec 3<>"$1/dgram/clone"; read -r _ <&3; echo "bind $2" >&3' bash "$U" "$auto" ||
    fail "the host's autobound name $auto could not be bound in another namespace"
ok "the host's autobound $auto is free in another namespace"
kill "$NS_PID" 2>/dev/null || true
wait "$NS_PID" 2>/dev/null || true
