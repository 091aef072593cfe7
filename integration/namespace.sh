#!/usr/bin/env bash
# The mount root is a small tmpfs of directories, socket nodes and symlinks:
# - the same sequence of mkdir/rmdir/mv/ln -s/chmod/chown/mknod(S_IFSOCK)/rm runs on a
#   real tmpfs and on udsfs, and both give the same results, errors and final tree;
# - root is mode 1777; regular files, FIFOs and device nodes cannot be created (EPERM
#   for regular files);
# - Linux name semantics: a bound node outlives its socket, rm keeps the socket alive,
#   mv keeps it connectable, a symlink to a node connects.
source "$(dirname "$0")/lib.sh"

# ---- 1. root
expect_eq "mode of the mount root" "$(stat -c %a "$MNT")" 1777
expect_eq "type of the mount root" "$(stat -c %F "$MNT")" directory
ls -la "$MNT" >/dev/null || fail "ls -la on the mount root"
ok "ls -la on the mount root"

# ---- 2. the same operations on tmpfs and on udsfs
# op CMD...: run CMD and print it with its exit status and output (messages name the
# relative paths only, so both transcripts match when the behaviour does).
op() {
    local out rc=0
    out=$("$@" 2>&1) || rc=$?
    printf '%s => %s %s\n' "$*" "$rc" "$out"
}
mksock() { python3 -c 'import os, stat, sys; os.mknod(sys.argv[1], 0o777 | stat.S_IFSOCK)' "$1"; }
ns_ops() { # ns_ops DIR: print the transcript of the operations and the final tree
    (
        cd "$1" || exit 1
        op mkdir d1
        op mkdir d1/sub d1/sub2
        op mkdir d1
        op mkdir -p d1/sub/deep/er
        op rmdir d1
        op rmdir nope
        op rmdir d1/sub/deep/er
        op mv d1/sub2 d1/sub3
        op mv d1/sub3 d2
        op ln -s d1/sub lnk
        op ln -s nowhere dangling
        op readlink lnk dangling
        op mkdir lnk/via_link
        op rmdir lnk
        op ls lnk/
        op cat dangling
        op chmod 700 d1
        op chmod 2755 d2
        op chown 1234:5678 d1/sub
        op chown -h 42:43 lnk
        op chgrp 99 d2
        op mkdir e
        op mv -T d2 d1/sub
        op mv -T d2 e
        op mv e e/inner
        op mkdir "name with spaces"
        op mkdir "$(printf 'n%.0s' {1..255})"
        op mkdir "$(printf 'n%.0s' {1..256})"
        op mksock s1
        op mksock s2
        op mksock s2
        op mv s1 s2
        op mv s2 d1/sub/moved.sock
        op chmod 600 d1/sub/moved.sock
        op chown 7:8 d1/sub/moved.sock
        op rmdir d1/sub/moved.sock
        op rm e
        op ln -s d1/sub/moved.sock sock.link
        op rm dangling
        op ls -a d1/sub
        op mv lnk lnk2
        op rm -r d1/sub/deep
        op mkdir d1/sub/deep
        op rmdir d1/sub/deep
        echo "--- tree"
        find . -mindepth 1 -path ./.udsfs -prune -o -printf '%p %y %m %n %U %G %l\n' | sort
    )
}

TMPFS=$TMP/tmpfs
mkdir "$TMPFS"
if mount -t tmpfs -o mode=1777 tmpfs "$TMPFS" 2>/dev/null; then
    ns_ops "$TMPFS" >"$TMP/tmpfs.txt"
    umount "$TMPFS"
    ns_ops "$MNT" >"$TMP/udsfs.txt"
    if ! diff -u "$TMP/tmpfs.txt" "$TMP/udsfs.txt" >"$TMP/ns.diff"; then
        say "namespace operations differ from tmpfs (- tmpfs, + udsfs):"
        cat "$TMP/ns.diff"
        fail "the namespace does not behave like tmpfs"
    fi
    say "transcript (the same on tmpfs and udsfs):"
    sed 's/^/  /' "$TMP/udsfs.txt"
    ok "mkdir/rmdir/mv/ln -s/chmod/chown/stat/mknod(sock)/rm behave as on tmpfs"
    # leave the tree empty for what follows
    rm -rf "${MNT:?}"/* 2>/dev/null || true
else
    fail "cannot mount a tmpfs to compare against (mount -t tmpfs needs root and a mount namespace that allows it)"
fi

# ---- 3. what udsfs refuses: regular files, FIFOs, device nodes
expect_errno EPERM touch "$MNT/x"
expect_errno EPERM bash -c 'echo > "$1"' bash "$MNT/x"
expect_errno EPERM py 'os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644))' "$MNT/x"
[ ! -e "$MNT/x" ] || fail "a failed create left $MNT/x behind"
ok "no regular file x exists after the failed creates"
rc=0
err=$(mknod "$MNT/fifo" p 2>&1) || rc=$?
[ "$rc" -ne 0 ] || fail "mknod fifo p succeeded; udsfs holds no FIFOs"
[ ! -e "$MNT/fifo" ] || fail "a failed mknod p left a node behind"
ok "mknod fifo p fails: $err"
rc=0
err=$(mknod "$MNT/null" c 1 3 2>&1) || rc=$?
[ "$rc" -ne 0 ] || fail "mknod null c 1 3 succeeded; udsfs holds no device nodes"
[ ! -e "$MNT/null" ] || fail "a failed mknod c left a node behind"
ok "mknod null c 1 3 fails: $err"

# ---- 4. mknod S_IFSOCK: a node with no socket behind it
mksock "$MNT/bare.sock" || fail "python os.mknod(S_IFSOCK) failed"
[ -S "$MNT/bare.sock" ] || fail "bare.sock is not a socket node"
expect_eq "mode of bare.sock (0777 & ~umask 022)" "$(stat -c %a "$MNT/bare.sock")" 755
ok "os.mknod(S_IFSOCK) makes a socket node"
new_sock A dgram
expect_errno ECONNREFUSED ctl "$A_FD" "connect bare.sock"
expect_errno ENOENT ctl "$A_FD" "connect missing.sock"
expect_errno EADDRINUSE ctl "$A_FD" "bind bare.sock"
mkdir "$MNT/adir"
expect_errno EADDRINUSE ctl "$A_FD" "bind adir"
expect_errno ENOENT ctl "$A_FD" "bind nodir/x.sock"

# ---- 5. a bound node outlives its socket
new_sock GONE dgram
ctl "$GONE_FD" "bind gone.sock" || fail "bind gone.sock"
close_fd "$GONE_FD"
sock_gone "$GONE" || fail "socket $GONE still listed in .udsfs/sock after its only handle closed"
ok "socket $GONE closed with its last handle"
[ -S "$MNT/gone.sock" ] || fail "gone.sock vanished with its socket; Linux keeps the node"
ok "the node gone.sock outlives its socket"
expect_errno ECONNREFUSED ctl "$A_FD" "connect gone.sock"
new_sock B dgram
expect_errno EADDRINUSE ctl "$B_FD" "bind gone.sock"
rm "$MNT/gone.sock"
ctl "$B_FD" "bind gone.sock" || fail "bind gone.sock after rm failed"
ok "after rm gone.sock a new bind to it works"

# ---- 6. rm of a node unbinds the name; the socket and its connections live on
new_sock LIVE dgram
ctl "$LIVE_FD" "bind live.sock" || fail "bind live.sock"
new_sock LC dgram
ctl "$LC_FD" "connect live.sock" || fail "connect live.sock"
rm "$MNT/live.sock"
[ ! -e "$MNT/live.sock" ] || fail "rm live.sock left the node"
ok "rm live.sock removed the node"
send "$LC" "still connected" || fail "send after rm failed"
expect_eq "message over the connection after rm" "$(recv "$LIVE")" "still connected"
expect_status "$LIVE" local live.sock
new_sock LC2 dgram
expect_errno ENOENT ctl "$LC2_FD" "connect live.sock"
new_sock LIVE2 dgram
ctl "$LIVE2_FD" "bind live.sock" || fail "a second socket cannot bind live.sock after rm"
ctl "$LC2_FD" "connect live.sock" || fail "connect to the re-bound live.sock"
send "$LC2" "to the new one" || fail "send to the new live.sock"
expect_eq "message to the re-bound name" "$(recv "$LIVE2")" "to the new one"
send "$LC" "to the old one" || fail "send to the old, unlinked socket"
expect_eq "message over the old connection" "$(recv "$LIVE")" "to the old one"
ok "the old socket and the new one at the same path live side by side"

# ---- 7. mv keeps a node connectable under its new name; symlinks are followed
new_sock MV dgram
ctl "$MV_FD" "bind a.sock" || fail "bind a.sock"
mkdir "$MNT/moved"
mv "$MNT/a.sock" "$MNT/moved/b.sock"
[ -S "$MNT/moved/b.sock" ] && [ ! -e "$MNT/a.sock" ] || fail "mv a.sock moved/b.sock"
new_sock MC dgram
expect_errno ENOENT ctl "$MC_FD" "connect a.sock"
ctl "$MC_FD" "connect moved/b.sock" || fail "connect moved/b.sock after mv"
send "$MC" "via the new name" || fail "send via the new name"
expect_eq "message via the moved node" "$(recv "$MV")" "via the new name"
expect_status "$MV" local a.sock
ln -s moved/b.sock "$MNT/link.sock"
new_sock SC dgram
ctl "$SC_FD" "connect link.sock" || fail "connect through the symlink link.sock"
send "$SC" "via a symlink" || fail "send via the symlink"
expect_eq "message via the symlink" "$(recv "$MV")" "via a symlink"

# ---- 8. stat, chmod, chown of a bound node
expect_eq "stat of moved/b.sock" "$(stat -c '%F %a %U %G' "$MNT/moved/b.sock")" "socket 755 root root"
chmod 600 "$MNT/moved/b.sock"
chown 1000:1000 "$MNT/moved/b.sock"
expect_eq "stat after chmod 600, chown 1000:1000" "$(stat -c '%F %a %u %g' "$MNT/moved/b.sock")" "socket 600 1000 1000"
expect_errno ENOTDIR rmdir "$MNT/moved/b.sock"
expect_errno EISDIR rm "$MNT/moved"
expect_errno ENOTEMPTY rmdir "$MNT/moved"
