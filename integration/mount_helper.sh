#!/usr/bin/env bash
# Mounted like any FUSE filesystem: `mount -t fuse.udsfs udsfs DIR -o ...` and an fstab
# line (a scratch fstab read with `mount -T FILE`), both through mount.fuse3(8), which
# runs `udsfs SOURCE DIR -o OPTIONS` and waits for it: the helper returns once the mount
# answers, with the daemon in the background. The options reach the daemon: threads=,
# max_dgram_qlen=5 (a dgram receiver takes 6 messages, then EAGAIN), log_file=,
# allow_other, and the standard nosuid,nodev,noexec,noatime (in the mount's flags);
# mount(8)'s own (_netdev, defaults, noauto, x-systemd.*) are accepted. Unknown options
# are refused with a message naming them. The script runs in a private mount namespace
# where a scratch directory holding `udsfs` is bound over /usr/local/sbin (mount(8)
# looks helpers up in a fixed PATH), so nothing on the host changes.
if [ -z "${UDSFS_PRIVATE_NS:-}" ]; then
    export UDSFS_PRIVATE_NS=1
    exec unshare --mount --propagation private bash "$0" "$@"
fi
UDSFS_NO_MOUNT=1
source "$(dirname "$0")/lib.sh"
command -v mount.fuse3 >/dev/null || fail "mount.fuse3 is missing (package fuse3; .ci/run installs it)"

mkdir "$TMP/sbin"
ln -s "$UDSFS_BIN" "$TMP/sbin/udsfs"
mount --bind "$TMP/sbin" /usr/local/sbin || fail "bind $TMP/sbin over /usr/local/sbin"

# mount_info FIELD: a field of $MNT's line in mountinfo: flags (the mount's), fstype,
# source, super (options)
mount_info() {
    awk -v m="$MNT" -v f="$1" '$5 == m {
        for (i = 7; $i != "-"; i++) {}
        v["flags"] = $6; v["fstype"] = $(i + 1); v["source"] = $(i + 2); v["super"] = $(i + 3)
        print v[f]
    }' /proc/self/mountinfo | tail -n1
}

# after_mount HOW: the mount is live, its daemon found and in the background
after_mount() {
    mounted "$MNT" || fail "$1: $MNT is not mounted"
    [ -d "$U" ] || fail "$1: $U is missing"
    expect_eq "$1: fstype" "$(mount_info fstype)" fuse.udsfs
    DAEMON_PID=$(mount_info source | sed -n 's/^udsfs://p')
    [[ $DAEMON_PID =~ ^[0-9]+$ ]] || fail "$1: source '$(mount_info source)', want udsfs:PID"
    proc_alive "$DAEMON_PID" || fail "$1: daemon $DAEMON_PID is not running"
    ok "$1: mounted, daemon $DAEMON_PID runs in the background"
}

# dgram_capacity: how many 1-byte O_NONBLOCK sends a fresh dgram receiver takes
dgram_capacity() {
    py '
r = os.open(U + "/dgram/clone", os.O_RDWR); n = os.read(r, 64).split()[0].decode()
os.write(r, b"bind @cap\n")
s = os.open(U + "/dgram/clone", os.O_RDWR); m = os.read(s, 64).split()[0].decode()
os.write(s, b"connect @cap\n")
d = os.open(f"{U}/sock/{m}/data", os.O_WRONLY | os.O_NONBLOCK)
k = 0
while k < 100 and err(os.write, d, b"x") == "OK":
    k += 1
print(k)'
}

end_mount() {
    "$UDSFS_BIN" umount "$MNT" || fail "udsfs umount $MNT"
    ended_within "$DAEMON_PID" 3000 || fail "daemon $DAEMON_PID still runs after udsfs umount"
    DAEMON_PID=
}

# ---- mount -t fuse.udsfs with our options and the standard ones
timeout 20 mount -t fuse.udsfs udsfs "$MNT" \
    -o allow_other,threads=3,max_dgram_qlen=5,log_file="$LOG",nosuid,nodev,noexec,noatime,_netdev ||
    fail "mount -t fuse.udsfs failed"
after_mount "mount -t fuse.udsfs"
flags=$(mount_info flags)
for f in nosuid nodev noexec noatime; do
    [[ ,$flags, == *,$f,* ]] || fail "mount flags '$flags' lack $f"
done
ok "mount flags carry nosuid,nodev,noexec,noatime ($flags)"
[[ ,$(mount_info super), == *,allow_other,* ]] || fail "super options '$(mount_info super)' lack allow_other"
ok "allow_other reached the kernel"
expect_eq "max_dgram_qlen=5: one-byte sends a dgram receiver takes" "$(dgram_capacity)" 6
grep -q "udsfs mounted on $MNT" "$LOG" || fail "log_file=$LOG has no 'udsfs mounted on' line"
ok "log_file= is where the daemon logs"
end_mount

# ---- an fstab line, through mount -T
printf '# scratch fstab\nudsfs %s fuse.udsfs defaults,noauto,x-systemd.automount,max_dgram_qlen=2,gc_trigger=100 0 0\n' \
    "$MNT" >"$TMP/fstab"
timeout 20 mount -T "$TMP/fstab" "$MNT" || fail "mount -T $TMP/fstab $MNT failed"
after_mount "fstab line"
expect_eq "fstab max_dgram_qlen=2: one-byte sends a dgram receiver takes" "$(dgram_capacity)" 3
end_mount

# ---- unknown and malformed options are refused, nothing is mounted
for bad in "bogus_option" "threads" "allow_other=yes" "max_dgram_qlen="; do
    rc=0
    out=$(timeout 20 mount -t fuse.udsfs udsfs "$MNT" -o "$bad" 2>&1) || rc=$?
    [ "$rc" -ne 0 ] || fail "-o $bad was accepted"
    case $out in
    *"mount option '${bad%%=*}'"*) ok "-o $bad refused: $out" ;;
    *) fail "-o $bad refused without naming the option: $out" ;;
    esac
    ! mounted "$MNT" || fail "-o $bad left a mount"
done

# ---- udsfs mount takes the same -o spelling
out=$(timeout 20 "$UDSFS_BIN" mount --background -o max_dgram_qlen=4,nosuid "$MNT") ||
    fail "udsfs mount -o max_dgram_qlen=4,nosuid failed: $out"
after_mount "udsfs mount -o"
expect_eq "udsfs mount -o max_dgram_qlen=4: one-byte sends taken" "$(dgram_capacity)" 5
end_mount
