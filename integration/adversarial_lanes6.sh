#!/usr/bin/env bash
# adversarial_lanes6.sh: attacks on a laned end's sleeps as built in 581c8b0 (a blocking
# call's sleep on its direction's futex word, counted in reader_sleeping/writer_sleeping;
# learnt looks before a sleep; a signal handler's bump of the word the thread sleeps on,
# preload/src/wait_note.rs), on a --allow-other --lanes mount, each case first on kernel
# sockets (what Linux does on the same steps), then through `udsfs run`; the program is
# integration/adversarial_lanes6.c (see its head). Cases:
#  jmpout   a SIGALRM handler siglongjmps out of a blocking laned read or write (SA_RESTART
#           and not), the program closes the end: its peer must get what was sent, then
#           EOF (Linux: at once),
#           and SIGUSR1 handlers after both ends and five more lanes are gone must run
#           (the trampoline must not bump the word of a region that is gone); no
#           region mapped and no eventfd held after, as none on Linux.
#  nest     a handler makes laned calls while its thread's read sleeps (on the thread's
#           stack, or on a signal stack above it), then the read's number is closed and
#           its peer sends a byte: the read gets it, as Linux's holds its file (the
#           library must not take the sleep for one jumped out of and let go of it).
#  cancel   pthread_cancel of a thread blocked in a laned read (a cancellation point): the
#           thread cancelled at once, as on Linux.
#  idle     a thread blocked in poll or epoll_wait on a laned end with nothing
#           coming, or polling it with 1 ms timeouts over and over: the process's CPU
#           over 2 s as low as on Linux (the learnt looks must decay; a blocking read's
#           sleep is measured by hostile clear and huge).
#  hostile  the peer, through the region's mapping (the words a peer may write), clears
#           the sleeping counts, sets them huge, or bumps and wakes the futex words for
#           1 s under a blocking read, then closes its end: the read's EOF at once, and
#           the sleeper's CPU low (clear, huge; bump reported, not compared: a peer's
#           own CPU buys the sleeper's looks, as its bytes would on Linux).
#  altstack two threads share one sigaltstack and a fatal SA_ONSTACK SIGSEGV handler
#           (varnishd's) and loop epoll_ctl with NULL events (DEL: ignored; MOD: EFAULT)
#           on a pipe and a laned end: no signal, as on Linux (the library probed the
#           NULL with a fault of its own, on the shared stack: two at once crashed).
# A case listed in integration/adversarial_lanes6_exceptions.txt is a known defect: it
# must fail as listed, and the script fails once it passes (then unlist it).
UDSFS_MOUNT_ARGS=(--allow-other --lanes)
source "$(dirname "$0")/lib.sh"

build_attack_c adversarial_lanes6 "$TMP/l6"

attack_each jmpout "a handler siglongjmps out of a blocking laned call, the end closed" \
    "jmpout 0 read" "jmpout 1 read" "jmpout 0 write" "jmpout 1 write"
attack_each nest "a handler's laned calls while its thread's read sleeps" "nest same" "nest alt"
attack_each cancel "pthread_cancel of a thread in a blocking laned read" cancel
attack_each altstack "two threads on one signal stack, epoll_ctl with NULL events" altstack
attack_each idle "a thread blocked on a laned end with nothing coming" \
    "idle poll" "idle epoll" "idle pollloop" "idle epollloop"
attack_each hostile "the peer scribbles the sleeping counts under a blocking read, then closes" \
    "hostile clear" "hostile huge"
# bump: said, the EOF compared only
k=$(attack_on kernel hostile bump 2>&1 || echo "status $?")
u=$(attack_on udsfs hostile bump 2>&1 || echo "status $?")
say "hostile bump: kernel: $k"
say "hostile bump: udsfs:  $u"
verdict hostile_bump "$(grep -q "EOF at once" <<<"$u" && grep -q "lane direct" <<<"$u" && echo 1)" \
    "the peer bumps and wakes the futex words for 1 s under a blocking read, then closes: $u"

grep -i "panick" "$LOG" && fail "the daemon panicked"
[ ${#failed[@]} -eq 0 ] || fail "$(printf '%s; ' "${failed[@]}")"
ok "every case as expected"
