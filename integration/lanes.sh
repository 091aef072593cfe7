#!/usr/bin/env bash
# lanes.sh: the fast lane's first cut (issue 30 stage b, `udsfs mount --lanes`, the
# default now). integration/lanes.py's scenarios on a stream socketpair run on kernel sockets
# and through `udsfs run` on a mount with --lanes, and must print the same lines: a
# 100-byte ping-pong between two processes, a 4 MiB transfer in odd-sized pieces with its
# checksum and EOF after the writer's close, EAGAIN (MSG_DONTWAIT, O_NONBLOCK, a full
# ring), SO_RCVTIMEO, a signal during a blocking recv with and without SA_RESTART, a fork
# of an end whose child writes (the lane goes down, the bytes stay in order) and an end
# passed over SCM_RIGHTS mid-stream (the receiver reads every byte in order), epoll and
# select registered before the first byte and on an end whose lane carries one, 6000 pairs
# made by 20 processes that each hold their 300 until they end (past a process's 256 regions; the daemon's 4096 lanes may be reached). The socket's
# status file must say lane=direct while the lane carries the bytes (GUARD lines), so a
# run where every byte went through FUSE fails. Then a peer scribbles over the whole
# region: the other end gets ECONNRESET, within seconds, and the daemon logs it once.
# FIONREAD/SIOCINQ and SIOCOUTQ on each end of a socketpair, a laned pair with bytes in
# its rings and an accepted connection (empty, queued, partly and fully read, after
# SHUT_WR and close) and on a listener, through ioctl(3) and through syscall(SYS_ioctl):
# the library's syscall(3) once let the raw ioctl by, and a udsfs socket said 1 GiB
# waited (the data file's size) and SIOCOUTQ ENOTTY.
# Last, the same scenarios on a --no-lanes mount: no lane, same answers.
UDSFS_MOUNT_ARGS=(--lanes)
source "$(dirname "$0")/lib.sh"
need_preload
need_cmd python3 python3
LANES=$ROOT/integration/lanes.py
CASES=(pingpong big eagain rcvtimeo signals fork_end pass_end blocked_fds epoll many fionread)

# compare CASE WANT_LANE: CASE both ways; WANT_LANE: the lane= word GUARD lines must say.
compare() { lanes_compare "$LANES" "$@"; }

compare pingpong direct
compare big direct
compare eagain direct
compare rcvtimeo direct
compare signals ""
compare fork_end none
compare pass_end ""
compare blocked_fds ""
compare epoll direct
compare many ""
mkdir -p "$TMP/fionread-k" "$MNT/fionread-u"
compare fionread "" "$TMP/fionread-k" "$MNT/fionread-u"
grep -qx 'GUARD laned before FIONREAD lane=direct' "$TMP/fionread.udsfs" || fail "fionread: the laned pair had no lane before its FIONREAD"

# The peer scribbles over the region (its own mapping: the process holds both ends).
timeout 60 env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- python3 "$LANES" scribble >"$TMP/scribble.out" 2>&1 || fail "scribble failed: $(cat "$TMP/scribble.out")"
cat "$TMP/scribble.out"
grep -qx 'regions scribbled over: True' "$TMP/scribble.out" || fail "scribble found no region to write over"
grep -qx 'recv after the scribble: Connection reset by peer' "$TMP/scribble.out" ||
    fail "the other end did not get ECONNRESET after the scribble"
grep -qx 'within 10 s: True' "$TMP/scribble.out" || fail "the other end took 10 s or more"
grep -q "its lane's region broke the protocol" "$LOG" || fail "the daemon did not log the reset"
ok "a peer that scribbles over the region: the other end gets ECONNRESET, in time, and the daemon logs it"

# A capture opened while a lane carries bytes: the lane goes down, the capture sees the
# next message (udsfs only: the kernel has no capture).
timeout 60 env UDSFS_PRELOAD="$PRELOAD_LIB" "$UDSFS_BIN" run --mount "$MNT" -- python3 "$LANES" observed >"$TMP/observed.out" 2>&1 || fail "observed failed: $(cat "$TMP/observed.out")"
cat "$TMP/observed.out"
grep -qx 'GUARD before the capture lane=direct' "$TMP/observed.out" || fail "no lane before the capture"
grep -qx 'the capture saw the message: True' "$TMP/observed.out" || fail "a capture opened while a lane was up did not see the next message"
grep -qx 'GUARD after the capture lane=none' "$TMP/observed.out" || fail "the lane stayed up under a capture"
ok "a capture opened while a lane is up: the lane goes down and the capture sees the next message"

# With --no-lanes: nothing laned, the same answers.
lanes_unlaned compare "${CASES[@]}"
