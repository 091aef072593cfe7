#!/usr/bin/env bash
# adversarial_lanes7.sh: siglongjmp out of a laned end's blocking calls as unusual programs
# do it, on a --allow-other --lanes mount, each case first on kernel sockets (what Linux
# does on the same steps), then through `udsfs run`; the program is
# integration/adversarial_lanes7.c (see its head). A read's or write's sleep left by a jump
# is undone by the thread's next laned call or close (preload/src/wait_record.rs, judged
# by stack pointers and a count of handlers in progress); a poll's and an epoll_wait's
# hold of their ends during a sleep (preload/src/lane_ready.rs) is not recorded. Cases:
#  loop     300 fresh laned pairs in one process, a jump out of each one's blocking read
#           or write with the way full (once it sleeps; or, loop_race, a read with a timer
#           landing anywhere in the call), the end closed:
#           every peer's EOF at once (a leak of the 64 waits slots or of the bounded lane
#           regions shows after ~64 rounds), no region, eventfd or data file left.
#  nested   a SIGALRM handler's own blocking read, jumped out of by a SIGUSR1 handler into
#           the SIGALRM handler (the outer read goes on and gets its byte) or into main
#           (both left): each peer's EOF after its end's close.
#  threads  two threads jump out of their own reads at once while two more keep a laned
#           ping-pong going: the ping-pong unaffected, both peers' EOF.
#  handoff  a thread jumps out of its read and makes no laned call after (it ends, or
#           parks in pause()); the main thread closes the end: the peer's EOF (only the
#           jumping thread's own calls undo its sleeps).
#  deep     the end closed after the jump from 8 calls deep (16 KiB a frame): the reap
#           judges by stack depth, so such a close may keep the socket open; the peer's
#           EOF after it, and after a later close from main.
#  poll     a jump out of a blocking poll or epoll_wait on a laned end, then its close
#           (and the epoll set's): the peer's EOF, nothing left.
#  poll_again  the same jump, the end kept: a byte through it, then a 500 ms poll or
#           epoll_wait with nothing coming: times out, its thread's CPU low.
#  msg      a jump out of a blocking recvmsg, or sendmsg with the way full, then the
#           end's close: the peer's bytes and EOF, nothing left.
# A case listed in integration/adversarial_lanes7_exceptions.txt is a known defect: it
# must fail as listed, and the script fails once it passes (then unlist it).
UDSFS_MOUNT_ARGS=(--allow-other --lanes)
source "$(dirname "$0")/lib.sh"

build_attack_c adversarial_lanes7 "$TMP/l7"

attack_each loop "300 jumps out of blocking laned reads (writes), one fresh pair each" \
    "loop sleep" "loop write"
# loop_race: said, not judged: how many of its rounds leak depends on where the timers
# land (a few of 300, or none), so neither a pass nor a failure is certain.
k=$(attack_on kernel loop race 2>/dev/null || echo "status $?")
u=$(attack_on udsfs loop race 2>/dev/null || echo "status $?")
say "loop_race (said, not judged: a known defect, see the exceptions file): kernel: $k"
say "loop_race (said, not judged): udsfs:  $u"
attack_each nested "a handler's blocking read jumped out of, into the handler or main" \
    "nested handler" "nested out"
attack_each threads "two threads jump out of their reads beside a laned ping-pong" threads
attack_each handoff "a thread jumps out of its read, then ends or parks; another closes the end" \
    "handoff exit" "handoff park"
attack_each deep "the end closed 8 calls deep after the jump" deep
attack_each poll "a jump out of a blocking poll or epoll_wait on a laned end" \
    "single poll" "single epoll"
attack_each poll_again "the end kept after a jump out of its poll or epoll_wait: a byte, then a wait" \
    "single pollagain" "single epollagain"
attack_each msg "a jump out of a blocking recvmsg or sendmsg on a laned end" \
    "single recvmsg" "single sendmsg"

grep -i "panick" "$LOG" && fail "the daemon panicked"
[ ${#failed[@]} -eq 0 ] || fail "$(printf '%s; ' "${failed[@]}")"
ok "every case as expected"
