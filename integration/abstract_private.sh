#!/usr/bin/env bash
# Abstract names are private to a mount, like a network namespace:
# two mounts never see each other's abstract names, and neither sees the kernel's.
source "$(dirname "$0")/lib.sh"

# A second mount, taken down before lib.sh's own cleanup runs.
MNT2=$TMP/mnt2
U2=$MNT2/.udsfs
mkdir "$MNT2"
out=$(timeout 30 "$UDSFS_BIN" mount --background --log-file "$TMP/log2" ${UDSFS_THREADS:+--threads "$UDSFS_THREADS"} "$MNT2" </dev/null) ||
    fail "second mount on $MNT2 failed: $out"
DAEMON2=$(printf '%s\n' "$out" | tail -n1 | tr -d '[:space:]')
trap 'rc=$?; timeout 10 "$UDSFS_BIN" umount "$MNT2" >/dev/null 2>&1 || umount -l "$MNT2" 2>/dev/null; (exit $rc); _lib_cleanup' EXIT
say "second mount on $MNT2 (daemon pid $DAEMON2)"

# A kernel socket holds the same abstract name in the host's namespace all along.
py '
import socket
k = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
k.bind(b"\0udsfs-shared")
open(sys.argv[1], "w").close()
time.sleep(30)
' "$TMP/kernel-bound" &
KERNEL_PID=$!
while [ ! -e "$TMP/kernel-bound" ]; do
    proc_alive "$KERNEL_PID" || fail "the kernel socket could not bind @udsfs-shared"
    sleep 0.01
done
ok "a kernel socket holds @udsfs-shared"

# The same name binds on both mounts: neither the other mount nor the kernel holds it.
new_sock A dgram
expect_ok ctl "$A_FD" "bind @udsfs-shared"
exec {b_fd}<>"$U2/dgram/clone"
read -r B <&"$b_fd"
expect_ok ctl "$b_fd" "bind @udsfs-shared"
expect_status "$A" local "@udsfs-shared"
[ "$(sed -n 's/^local=//p' "$U2/sock/$B/status")" == "@udsfs-shared" ] ||
    fail "the second mount's socket is not bound at @udsfs-shared"
ok "@udsfs-shared is bound on both mounts and in the kernel at once"

# A datagram sent on each mount reaches that mount's socket only.
new_sock CA dgram
expect_ok ctl "$CA_FD" "connect @udsfs-shared"
send "$CA" from-a
exec {cb_fd}<>"$U2/dgram/clone"
read -r CB <&"$cb_fd"
expect_ok ctl "$cb_fd" "connect @udsfs-shared"
printf '%s' from-b >"$U2/sock/$CB/data"
expect_eq "what mount A's socket receives" "$(recv "$A")" from-a
expect_eq "what mount B's socket receives" "$(dd bs=64 count=1 status=none <"$U2/sock/$B/data")" from-b
expect_status "$A" rcvq_msgs 0

# A listener on mount A is invisible from mount B: no abstract entry, connect refused.
new_sock L stream
expect_ok ctl "$L_FD" "bind @only-on-a"
expect_ok ctl "$L_FD" "listen"
[ -e "$U/abstract/only-on-a" ] || fail "mount A does not list @only-on-a"
[ ! -e "$U2/abstract/only-on-a" ] || fail "mount B lists mount A's @only-on-a"
ok "only mount A lists @only-on-a"
exec {c_fd}<>"$U2/stream/clone"
expect_errno ECONNREFUSED ctl "$c_fd" "connect @only-on-a"
expect_errno ENOENT cat "$U2/abstract/only-on-a"

# Autobound names are per mount too: the same first name can come out on both.
new_sock AA dgram
expect_ok ctl "$AA_FD" "bind"
exec {ab_fd}<>"$U2/dgram/clone"
read -r AB <&"$ab_fd"
expect_ok ctl "$ab_fd" "bind"
name_a=$(status_of "$AA" local)
name_b=$(sed -n 's/^local=//p' "$U2/sock/$AB/status")
[[ $name_a == @* && $name_b == @* ]] || fail "autobind gave '$name_a' and '$name_b'"
[ -e "$U2/abstract/${name_a#@}" ] && [ "$name_a" != "$name_b" ] &&
    fail "mount B lists mount A's autobound $name_a"
ok "autobound names $name_a (A) and $name_b (B) stay on their mounts"

kill "$KERNEL_PID" 2>/dev/null || true
