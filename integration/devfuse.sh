#!/usr/bin/env bash
# A mount that cannot get at /dev/fuse says so and what to do, not a bare "Permission
# denied". In a private mount namespace:
#   1. /dev/fuse root-owned mode 0600 (a node bound over it), an ordinary user (uid
#      65534) mounts: the message names /dev/fuse, the error, the chmod that fixes it
#      and fusermount3; in the foreground and with --background (the daemon's reason
#      comes back through its readiness pipe);
#   2. no /dev/fuse at all (a tmpfs over /dev), root mounts: the message says it does
#      not exist and to load the module (modprobe fuse).
if [ -z "${UDSFS_PRIVATE_NS:-}" ]; then
    export UDSFS_PRIVATE_NS=1
    exec unshare --mount --propagation private bash "$0" "$@"
fi
UDSFS_NO_MOUNT=1
source "$(dirname "$0")/lib.sh"
command -v setpriv >/dev/null || fail "setpriv is missing (package util-linux)"

expect_message() { # expect_message WHAT OUTPUT PATTERN...
    local what=$1 out=$2
    shift 2
    for p in "$@"; do
        [[ $out == *"$p"* ]] || fail "$what: the message lacks '$p': $out"
    done
    ok "$what: $out"
}

# ---- 1. /dev/fuse not accessible to an ordinary user
chmod 755 "$TMP"
chown 65534:65534 "$MNT"
# a copy uid 65534 can run wherever the checkout lives
install -m 0755 "$UDSFS_BIN" "$TMP/udsfs"
mknod -m 0600 "$TMP/fuse" c 10 229
mount --bind "$TMP/fuse" /dev/fuse || fail "bind a 0600 node over /dev/fuse"
for mode in "" --background; do
    rc=0
    out=$(cd / && timeout 20 env RUST_LOG=off setpriv --reuid=65534 --regid=65534 --clear-groups -- \
        "$TMP/udsfs" mount $mode "$MNT" 2>&1 </dev/null) || rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "uid 65534 mount ${mode:-(foreground)}: status $rc: $out"
    expect_message "uid 65534, /dev/fuse mode 0600, ${mode:-foreground}" "$out" \
        "cannot open /dev/fuse" "Permission denied" "chmod 0666 /dev/fuse" fusermount3
    ! mounted "$MNT" || fail "a mount was left on $MNT"
done
umount /dev/fuse

# ---- 2. no /dev/fuse
mount -t tmpfs -o mode=0755 none /dev || fail "tmpfs over /dev"
for n in "null 1 3" "zero 1 5" "urandom 1 9"; do
    set -- $n
    mknod -m 0666 "/dev/$1" c "$2" "$3"
done
ln -s /proc/self/fd /dev/fd
rc=0
out=$(timeout 20 env RUST_LOG=off "$UDSFS_BIN" mount "$MNT" 2>&1 </dev/null) || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "root mount without /dev/fuse: status $rc: $out"
expect_message "root, no /dev/fuse" "$out" "/dev/fuse does not exist" "modprobe fuse"
