#!/usr/bin/env bash
# lanes_ready.sh: readiness on the fast lane (issue 30 stage c, `udsfs mount --lanes`):
# poll, select and epoll (level, EPOLLET, EPOLLONESHOT) on a laned stream socketpair are
# answered from the ring, without a FUSE request. integration/lanes_ready.py's scenarios
# run on kernel sockets and through `udsfs run` on a --lanes mount and must print the same
# lines: a ping-pong between two processes that each wait in poll, select or epoll (sets
# registered before the first byte), what level, edge and one-shot sets, poll and select
# report as bytes come and go, POLLOUT gone on a full queue and back after the reader
# drained it, the peer's shutdown and close (EPOLLRDHUP, POLLHUP) seen by a waiting epoll
# and poll, a lane taken down (SO_PASSCRED) under a waiting poll, a laned socket in one
# set with a pipe, a registered socket closed and its number taken by a pipe registered
# again, two threads in epoll_wait on one EPOLLONESHOT set, and eight threads polling one
# end, all woken by one byte (hackbench -T's start), and an epoll set holding a laned
# socket waited on in poll and in another set (its lane goes down; readable as on Linux),
# and asyncio streams over a socketpair (its selector's register/modify/unregister),
# a registered laned socket closed by each way of closing a number (close, dup2, fclose,
# syscall, close_range) whose number a pipe takes (read and epoll are the pipe's: the
# library checks a number's file only after a close, preload/src/fdgen.rs), DEL and ADD of
# a laned registration (nothing reported while deleted; ENOENT, EEXIST as Linux), and a
# thread asleep in epoll_wait woken by another's ADD of a ready laned socket and by its MOD
# (the ADD woke none before), and 100 socketpairs made one after another, each closed once the
# next is made and its numbers taken by other files: each gets its lane (a close frees its
# slots in the library's table of 64; before, the closed pairs' slots stayed taken), and an
# accepted socket registered before its lane and added again to the same set (mosquitto's
# way to wait for EPOLLOUT): EEXIST as on Linux, though that ADD brings its lane up (before,
# it registered the lane beside the data file left in the set, whose next poll took the
# lane down). The socket's status file must say lane=direct after the polls (GUARD
# lines): a run where the polls went to the daemon (which takes the lane down) fails.
UDSFS_MOUNT_ARGS=(--lanes)
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
PY=$ROOT/integration/lanes_ready.py

for c in pingpong levels pollout hup down_under_poll mixed reused threads pollers nested asyncio_pair \
    closes del_add wake_add slots; do
    lanes_compare "$PY" "$c" direct
done
# A connection's (connect/accept): a listener at DIR/again.
mkdir -p "$TMP/k"
lanes_compare "$PY" add_again direct "$TMP/k" "$MNT"
lanes_compare "$PY" moved_up direct "$TMP/k" "$MNT"
lanes_compare "$PY" moved_dup direct "$TMP/k" "$MNT"
lanes_compare "$PY" down_rejoin "" "$TMP/k" "$MNT"
lanes_compare "$PY" down_rejoin_waits "" "$TMP/k" "$MNT"
