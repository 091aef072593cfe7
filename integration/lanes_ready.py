#!/usr/bin/env python3
"""lanes_ready.py CASE: readiness (poll, select, epoll) on a stream socketpair,
printing what it saw (issue 30 stage c).

Run on kernel sockets and through `udsfs run` on a mount with --lanes
(integration/lanes_ready.sh): the lines must be the same. Lines that start
with GUARD are udsfs's only (the socket's status file, `lane=direct` while
the ring carries the bytes), left out of the comparison and checked by the
script."""

import array
import fcntl
import os
import select
import socket
import termios
import time

from lanes_lib import guard, listener, peer, pingpong_rounds, recv_exact, run_case, say

ROUNDS = 400


def wait_readable(mode, s, ep):
    """Sleeps until s is readable, the way `mode` says; True if it was."""
    if mode == "poll":
        p = select.poll()
        p.register(s, select.POLLIN)
        r = p.poll(5000)
        # (The last reply may come with the peer's close: POLLHUP too.)
        return len(r) == 1 and r[0][0] == s.fileno() and r[0][1] & select.POLLIN != 0
    if mode == "select":
        r, _, _ = select.select([s], [], [], 5)
        return r == [s]
    if mode == "oneshot":
        ep.modify(s, select.EPOLLIN | select.EPOLLONESHOT)
    evs = ep.poll(5)
    return len(evs) == 1 and evs[0][0] == s.fileno() and evs[0][1] & select.EPOLLIN != 0


def pingpong():
    """A 100-byte ping-pong between two processes, each waiting for the
    other's bytes in poll, select or epoll (level, edge, one-shot) before it
    reads; the epoll sets are registered before the first byte."""
    for mode in ["poll", "select", "epoll", "et", "oneshot"]:
        a, b = socket.socketpair()
        flags = {"et": select.EPOLLET, "oneshot": select.EPOLLONESHOT}.get(mode, 0)

        def echo(b):
            ep = select.epoll()
            ep.register(b, select.EPOLLIN | flags)
            os._exit(pingpong_rounds(b, ROUNDS, False, wait=lambda: wait_readable(mode, b, ep)))

        pid = peer(a, b, echo)
        ep = select.epoll()
        ep.register(a, select.EPOLLIN | flags)
        bad = pingpong_rounds(a, ROUNDS, True, f"{mode} ping-pong mid-way", lambda: wait_readable(mode, a, ep))
        _, st = os.waitpid(pid, 0)
        say(mode, "ping-pong", ROUNDS, "round trips, wrong:", bad, "child status:", st)
        a.close()


def levels():
    """Level, edge-triggered and one-shot epoll, poll and select on one
    process's pair: what each reports as bytes come and go."""
    a, b = socket.socketpair()
    b.setblocking(False)
    lt, et, one = select.epoll(), select.epoll(), select.epoll()
    lt.register(b, select.EPOLLIN)
    et.register(b, select.EPOLLIN | select.EPOLLET)
    one.register(b, select.EPOLLIN | select.EPOLLONESHOT)
    p = select.poll()
    p.register(b, select.POLLIN | select.POLLOUT)
    show = lambda ep: [ev for _, ev in ep.poll(0)]
    # (Descriptor numbers differ: the library's first socketpair keeps one
    # more low descriptor open with lanes or without.)
    pl = lambda: [(fd == b.fileno(), ev) for fd, ev in p.poll(0)]
    say("empty: lt", show(lt), "et", show(et), "oneshot", show(one), "poll", pl())
    a.send(b"one")
    say("a byte: lt", show(lt), show(lt), "et", show(et), show(et), "oneshot", show(one), show(one))
    a.send(b"two")
    say("more: lt", show(lt), "et", show(et), "oneshot", show(one))
    one.modify(b, select.EPOLLIN | select.EPOLLONESHOT)
    say("oneshot re-armed:", show(one), show(one))
    say("read:", b.recv(100))
    say("drained: lt", show(lt), "et", show(et), "poll", pl())
    r, w, _ = select.select([b], [b], [], 0)
    say("select:", len(r), len(w))
    guard(b, "levels")
    et.unregister(b)
    a.send(b"x")
    say("unregistered: et", show(et), "lt", show(lt))
    say("read:", b.recv(100))


def pollout():
    """POLLOUT/EPOLLOUT: gone when the sender's queue is full, back once
    the reader drained it."""
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    ep = select.epoll()
    ep.register(a, select.EPOLLOUT)
    p = select.poll()
    p.register(a, select.POLLOUT)
    pl = lambda: [(fd == a.fileno(), ev) for fd, ev in p.poll(0)]
    say("fresh: poll", pl(), "epoll", [ev for _, ev in ep.poll(0)])
    sent = 0
    while True:
        try:
            sent += a.send(b"z" * 4096)
        except BlockingIOError:
            break
    say("full: poll", pl(), "epoll", [ev for _, ev in ep.poll(0)])
    got = 0
    while True:
        try:
            got += len(b.recv(65536))
        except BlockingIOError:
            break
    say("drained all:", got == sent, "poll", pl(), "epoll", [ev for _, ev in ep.poll(0)])
    guard(a, "pollout")


def hup():
    """The peer's shutdown and close seen by a waiting poll and a waiting
    epoll (POLLRDHUP, POLLHUP), after bytes went through the ring."""
    def child(b):
        b.send(b"hello")
        time.sleep(0.3)
        b.shutdown(socket.SHUT_WR)
        time.sleep(0.3)
        b.close()

    a, b = socket.socketpair()
    pid = peer(a, b, child)
    ep = select.epoll()
    ep.register(a, select.EPOLLIN | select.EPOLLRDHUP)
    say("first epoll:", [ev for _, ev in ep.poll(5)])
    say("recv:", a.recv(100))
    guard(a, "hup before the shutdown")
    # The shutdown comes while this epoll_wait sleeps on the ring.
    say("epoll after the shutdown:", [ev for _, ev in ep.poll(5)])
    say("recv:", a.recv(100))
    p = select.poll()
    p.register(a, select.POLLIN | select.POLLRDHUP)
    time.sleep(0.6)
    say("poll after the close:", [(fd == a.fileno(), ev) for fd, ev in p.poll(5000)])
    say("epoll after the close:", [ev for _, ev in ep.poll(5)])
    os.waitpid(pid, 0)


def down_under_poll():
    """The lane goes down (the peer sets SO_PASSCRED) while poll and then
    epoll_wait sleep on the ring: each still wakes for the next bytes."""
    def child(b):
        b.send(b"1")
        time.sleep(0.3)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        time.sleep(0.3)
        b.send(b"2")
        time.sleep(0.3)
        b.send(b"3")
        time.sleep(0.5)  # (the parent's epoll sees '3' before the close)

    a, b = socket.socketpair()
    pid = peer(a, b, child)
    ep = select.epoll()
    ep.register(a, select.EPOLLIN)
    p = select.poll()
    p.register(a, select.POLLIN)
    pl = lambda: [(fd == a.fileno(), ev) for fd, ev in p.poll(5000)]
    say("poll:", pl(), "recv:", a.recv(10))
    guard(a, "down_under_poll before")
    say("poll across the way down:", pl(), "recv:", a.recv(10))
    say("epoll:", [ev for _, ev in ep.poll(5)], "recv:", a.recv(10))
    os.waitpid(pid, 0)


def read_through_epoll(label, data, what):
    """A socketpair whose end b waits in a new epoll set: `data` sent on a,
    what the set reports and b's read said after `label`, b's lane guarded
    as `what`. Returns (a, b, the set)."""
    a, b = socket.socketpair()
    ep = select.epoll()
    ep.register(b, select.EPOLLIN)
    a.send(data)
    say(label, [ev for _, ev in ep.poll(1)], b.recv(len(data)))
    guard(b, what)
    return a, b, ep


def mixed():
    """A laned socket in one set with a pipe and a kernel socketpair: each
    is reported as it becomes ready, through poll, select and epoll."""
    a, b = socket.socketpair()
    r, w = os.pipe()
    ep = select.epoll()
    ep.register(b, select.EPOLLIN)
    ep.register(r, select.EPOLLIN)
    p = select.poll()
    p.register(b, select.POLLIN)
    p.register(r, select.POLLIN)
    name = lambda fd: "sock" if fd == b.fileno() else "pipe"
    os.write(w, b"p")
    say("pipe ready: poll", sorted(name(fd) for fd, _ in p.poll(1000)),
        "epoll", sorted(name(fd) for fd, _ in ep.poll(1)))
    a.send(b"s")
    say("both: poll", sorted(name(fd) for fd, _ in p.poll(1000)),
        "epoll", sorted(name(fd) for fd, _ in ep.poll(1)))
    rr, _, _ = select.select([b, r], [], [], 1)
    say("select:", sorted(name(x if isinstance(x, int) else x.fileno()) for x in rr))
    os.read(r, 1)
    say("pipe read: poll", sorted(name(fd) for fd, _ in p.poll(1000)))
    b.recv(1)
    t = time.monotonic()
    say("nothing: poll", p.poll(200), "epoll", ep.poll(0.2), "waited:", time.monotonic() - t > 0.3)
    guard(b, "mixed")


def reused():
    """A registered laned socket closed (Linux drops its registration with
    the file), its number taken by a pipe, registered in the same set."""
    a, b = socket.socketpair()
    ep = select.epoll()
    ep.register(b, select.EPOLLIN)
    a.send(b"old")
    say("old:", [ev for _, ev in ep.poll(1)])
    guard(a, "reused before the close")
    n = b.fileno()
    b.close()
    say("after its close:", ep.poll(0.1))
    r, w = os.pipe()
    say("the pipe took its number:", r == n)
    ep.register(r, select.EPOLLIN)
    os.write(w, b"p")
    say("the pipe:", [(fd == r, ev) for fd, ev in ep.poll(1)])


def threads():
    """Two threads in epoll_wait on one set (EPOLLONESHOT, re-armed after
    each read) while the peer sends 200 one-byte messages, each after the
    last was read: every byte is read once, in order."""
    import threading

    a, b = socket.socketpair()
    b.setblocking(False)
    ep = select.epoll()
    ep.register(b, select.EPOLLIN | select.EPOLLONESHOT)
    got, lock, done, acks = [], threading.Lock(), threading.Event(), threading.Semaphore(0)

    def worker():
        while not done.is_set():
            for _ in ep.poll(0.5):
                try:
                    data = b.recv(100)
                except BlockingIOError:
                    data = b""
                with lock:
                    got.append(data)
                ep.modify(b, select.EPOLLIN | select.EPOLLONESHOT)
                if data:
                    acks.release()

    ts = [threading.Thread(target=worker) for _ in range(2)]
    for t in ts:
        t.start()
    late = 0
    for i in range(200):
        a.send(bytes([i]))
        if not acks.acquire(timeout=5):
            late += 1
        if i == 100:
            guard(b, "threads mid-way")
    done.set()
    for t in ts:
        t.join()
    data = b"".join(got)
    say("threads: bytes read", len(data), "in order:", data == bytes(range(200)), "waits over 5 s:", late)


def pollers():
    """Threads poll one end while they start and a byte comes (hackbench
    -T's start signal: a socketpair byte nobody reads), 20 times: the byte
    must wake every one of them."""
    import threading

    woke, slow = 0, 0
    for rnd in range(20):
        a, b = socket.socketpair()
        a.send(b"x")
        b.recv(1)
        if rnd == 0:
            guard(b, "pollers")
        res = []

        def waiter():
            p = select.poll()
            p.register(b, select.POLLIN)
            t = time.monotonic()
            r = p.poll(3000)
            res.append((r != [], time.monotonic() - t < 2.5))

        ts = [threading.Thread(target=waiter) for _ in range(12)]
        for i, t in enumerate(ts):
            t.start()
            if i == 6:
                a.send(b"go")
        for t in ts:
            t.join()
        woke += sum(w for w, _ in res)
        slow += sum(not f for _, f in res)
        a.close()
        b.close()
    say("pollers woken by one byte:", woke, "of 240; after 2.5 s or more:", slow)


def nested():
    """An epoll set holding a laned socket, itself waited on in poll and in
    another epoll set (the lane goes down: the set's readiness is then the
    daemon's): it is readable once the socket is."""
    a, b, ep = read_through_epoll("inner:", b"1", "nested before the outer waits")
    p = select.poll()
    p.register(ep.fileno(), select.POLLIN)
    say("poll of the set, empty:", p.poll(100))
    a.send(b"2")
    say("poll of the set:", [ev for _, ev in p.poll(2000)])
    outer = select.epoll()
    outer.register(ep.fileno(), select.EPOLLIN)
    say("outer set:", [ev for _, ev in outer.poll(1)], "inner:", [ev for _, ev in ep.poll(1)], b.recv(1))
    say("outer, drained:", outer.poll(0.1))


def asyncio_pair():
    """asyncio streams over a socketpair (its selector registers, modifies
    and unregisters each end as it waits; its own self-pipe is a laned
    socketpair too, written from another thread): 300 round trips."""
    import asyncio
    import threading

    async def main():
        a, b = socket.socketpair()
        ra, wa = await asyncio.open_connection(sock=a)
        rb, wb = await asyncio.open_connection(sock=b)

        async def echo():
            for _ in range(300):
                m = await rb.readexactly(10)
                wb.write(m[::-1])
                await wb.drain()

        task = asyncio.create_task(echo())
        bad = 0
        for i in range(300):
            m = (b"%010d" % i)
            wa.write(m)
            await wa.drain()
            if await ra.readexactly(10) != m[::-1]:
                bad += 1
            if i == 150:
                guard(b, "asyncio mid-way")
        await task
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        threading.Thread(target=lambda: loop.call_soon_threadsafe(fut.set_result, "woken")).start()
        say("asyncio: 300 round trips, wrong:", bad, "a thread's call_soon_threadsafe:", await asyncio.wait_for(fut, 5))
        wa.close()
        wb.close()

    asyncio.run(main())


def closes():
    """A laned socket that was read (its end claimed and its number seen to
    name it), registered in an epoll set, with bytes in its ring, closed by
    each way a program closes a number (close, dup2 onto it, fclose of an
    fdopen, syscall(SYS_close), close_range); a pipe takes the number. A read
    and a write of the number are the pipe's, and the set reports nothing of
    the closed socket (the library checks a number's file only after a
    close moved its descriptor generation: preload/src/fdgen.rs)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.fdopen.restype = ctypes.c_void_p
    libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.syscall.argtypes = [ctypes.c_long, ctypes.c_long]
    keep = []
    for way in ["close", "dup2", "fclose", "syscall", "close_range"]:
        a, b = socket.socketpair()
        ep = select.epoll()
        ep.register(b, select.EPOLLIN)
        a.send(b"first")
        say(way, "first:", [ev for _, ev in ep.poll(1)], b.recv(100))
        guard(b, f"closes {way} before")
        a.send(b"old")
        n = b.detach()
        r, w = os.pipe()
        if way == "dup2":
            os.dup2(r, n)
            os.close(r)
            r = n
        elif way == "close":
            os.close(r)
            os.close(w)
            os.close(n)
            r, w = os.pipe()
        else:
            os.close(r)
            os.close(w)
            if way == "fclose":
                f = libc.fdopen(n, b"r+")
                say(way, "fdopen:", f is not None, "fclose:", libc.fclose(f))
            elif way == "syscall":
                say(way, "syscall(SYS_close):", libc.syscall(3, n))
            else:
                os.closerange(n, n + 1)
            r, w = os.pipe()
        say(way, "the pipe took its number:", r == n)
        say(way, "after the close:", ep.poll(0.1))
        os.write(w, b"new")
        say(way, "read of the number:", os.read(n, 100))
        say(way, "the number registered again:", ep.register(n, select.EPOLLIN))
        os.write(w, b"p")
        say(way, "the pipe's event:", [(fd == n, ev) for fd, ev in ep.poll(1)])
        os.read(n, 100)
        os.close(n)
        os.close(w)
        ep.close()
        keep.append(a)


def del_add():
    """epoll_ctl DEL and ADD of a laned socket, as an event loop that
    deletes and adds a descriptor per message does (redis-benchmark's ae):
    nothing reported while deleted, even with bytes there; MOD and DEL of
    it ENOENT; ADD again reports it; ADD twice EEXIST; 300 rounds of
    ADD/DEL with the bytes coming and going; and a deleted socket closed,
    its number taken by another laned socket, which is added."""
    a, b, ep = read_through_epoll("registered:", b"x", "del_add first")
    ep.unregister(b)
    a.send(b"y")
    say("deleted, bytes there:", ep.poll(0.1))
    for op in ["modify", "unregister"]:
        try:
            getattr(ep, op)(b, select.EPOLLIN) if op == "modify" else ep.unregister(b)
            say(op, "of a deleted one: no error")
        except OSError as e:
            say(op, "of a deleted one:", e.errno)
    ep.register(b, select.EPOLLIN)
    say("added again:", [ev for _, ev in ep.poll(1)])
    try:
        ep.register(b, select.EPOLLIN)
        say("added twice: no error")
    except OSError as e:
        say("added twice:", e.errno)
    b.recv(10)
    wrong = 0
    for i in range(300):
        ep.unregister(b)
        if i % 3 == 0:
            a.send(b"z")
        ep.register(b, select.EPOLLIN | select.EPOLLOUT if i % 2 else select.EPOLLIN)
        evs = ep.poll(0 if i % 3 else 1)
        want = (select.EPOLLIN if i % 3 == 0 else 0) | (select.EPOLLOUT if i % 2 else 0)
        got = evs[0][1] if evs else 0
        if got != want:
            wrong += 1
        if i % 3 == 0:
            b.recv(10)
    say("300 rounds of DEL and ADD, wrong reports:", wrong)
    guard(b, "del_add after the rounds")
    ep.unregister(b)
    n = b.fileno()
    b.close()
    # (Its number, as on Linux when the library's descriptors leave it free.)
    c, d = socket.socketpair()
    e, f = (d, c) if d.fileno() == n else (c, d)
    f.send(b"q")
    e.recv(1)
    f.send(b"w")
    ep.register(e, select.EPOLLIN)
    say("a new socket added:", [ev for _, ev in ep.poll(1)], e.recv(10))
    guard(e, "del_add the new socket")


def wake_add():
    """A thread asleep in epoll_wait on a set with a laned socket that stays
    quiet: another thread adds a laned socket with bytes there, and later
    re-arms (MOD) a one-shot registration whose bytes are still unread.
    Linux wakes the sleeper at each (ep_insert, ep_modify); so must the
    library, whose sleeper waits on the lanes' eventfds."""
    import threading

    quiet_a, quiet = socket.socketpair()
    a, b = socket.socketpair()
    for x, y in [(quiet_a, quiet), (a, b)]:
        x.send(b"1")
        y.recv(1)
    ep = select.epoll()
    ep.register(quiet, select.EPOLLIN)
    out = []

    def sleeper():
        t = time.monotonic()
        evs = ep.poll(5)
        out.append(([fd == b.fileno() for fd, _ in evs], time.monotonic() - t < 3))

    for what in ["ADD", "MOD"]:
        out.clear()
        th = threading.Thread(target=sleeper)
        th.start()
        time.sleep(0.3)
        if what == "ADD":
            a.send(b"x")
            time.sleep(0.1)
            ep.register(b, select.EPOLLIN | select.EPOLLONESHOT)
        else:
            ep.modify(b, select.EPOLLIN | select.EPOLLONESHOT)
        th.join()
        say(what, "woke the sleeper with the socket:", out)
    guard(b, "wake_add")


def slots():
    """100 socketpairs one after another, each closed once the next is made,
    its numbers then taken by files kept open (a server whose clients come
    and go while it opens other files): each pair gets its lane. The
    library's table has 64 slots; before a close freed its slots, the closed
    pairs' slots stayed taken until their numbers were used again, and from
    the 32nd pair on none got a lane."""
    keep, prev, ok = [], None, 0
    for i in range(100):
        a, b = socket.socketpair()
        a.send(b"x")
        ok += b.recv(1) == b"x"
        if prev is not None:
            prev[0].close()
            prev[1].close()
            keep += [os.open("/dev/null", os.O_RDONLY) for _ in range(2)]
        prev = (a, b)
    say("slots: pairs that carried a byte:", ok)
    guard(prev[1], "slots the last pair")
    for fd in keep:
        os.close(fd)


def add_again(d):
    """An accepted socket registered (EPOLLIN) before its lane, then
    registered again in the same set, as mosquitto does to wait for
    EPOLLOUT (ADD, and MOD when ADD says EEXIST): EEXIST, as Linux says for
    a descriptor already in the set, though that second ADD is the server
    end's ask that brings its lane up; then MOD reports what is there, and
    20 messages through the set. Before, the second ADD said 0 and
    registered the lane's eventfd beside the data file left in the kernel's
    set: the next wait polled the data file, which took the lane down, and
    the library's move back to the data file failed with EEXIST (said on
    stderr)."""
    srv, path = listener(d, "again")
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    a, _ = srv.accept()
    ep = select.epoll()
    # (The server end's first ask: the client has not asked yet, no lane.)
    ep.register(a, select.EPOLLIN)
    # (The client's first ask: the lane is made, the client's end claimed.)
    c.send(b"hello")
    try:
        ep.register(a, select.EPOLLIN | select.EPOLLOUT)
        say("added again: no error")
    except OSError as e:
        say("added again:", e.errno)
    ep.modify(a, select.EPOLLIN | select.EPOLLOUT)
    say("after MOD:", [(fd == a.fileno(), ev) for fd, ev in ep.poll(1)], a.recv(10))
    ep.modify(a, select.EPOLLIN)
    wrong = 0
    for i in range(20):
        c.send(b"%02d" % i)
        evs = ep.poll(5)
        wrong += evs != [(a.fileno(), select.EPOLLIN)] or a.recv(10) != b"%02d" % i
    say("20 messages through the set, wrong:", wrong)
    guard(a, "add_again server end")
    guard(c, "add_again client end")


def moved_up(d):
    """A connection whose ends move to other numbers before any call and
    then wait in poll and epoll before each read and write, as Postfix's
    servers and qmgr do (fcntl F_DUPFD above 127, then close: the accepted
    end here; the connecting one by dup2). Before, the library knew the
    ends by their old numbers only: the first poll of each new number
    reached the daemon as a poll the library does not answer, and the
    connection had no lane for good."""
    srv, path = listener(d, "moved")
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    a, _ = srv.accept()
    old = a.detach()
    up = fcntl.fcntl(old, fcntl.F_DUPFD, 128)
    os.close(old)
    a = socket.socket(fileno=up)
    old = c.detach()
    os.dup2(old, 150)
    os.close(old)
    c = socket.socket(fileno=150)
    say("moved to:", a.fileno() >= 128, c.fileno())
    ep = select.epoll()
    ep.register(a, select.EPOLLIN)
    out = select.poll()
    out.register(c, select.POLLOUT)
    wrong = 0
    for i in range(20):
        wrong += out.poll(5000) != [(c.fileno(), select.POLLOUT)]
        c.send(b"%02d" % i)
        wrong += ep.poll(5) != [(a.fileno(), select.EPOLLIN)]
        m = a.recv(10)
        a.send(m)
        wrong += not wait_readable("poll", c, None) or c.recv(10) != b"%02d" % i
    say("20 round trips, each call after a poll, wrong:", wrong)
    guard(a, "moved_up accepted end")
    guard(c, "moved_up connecting end")


def moved_dup(d):
    """`moved_up` with both ends moved by the C library's dup(), then the
    old numbers closed (a shell's redirection, a daemon's std descriptors):
    the lane's note must follow the copy as it does at dup2."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    srv, path = listener(d, "dup")
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    a, _ = srv.accept()
    ends = []
    for s in (a, c):
        old = s.detach()
        new = libc.dup(old)
        os.close(old)
        ends.append(socket.socket(fileno=new))
    a, c = ends
    ep = select.epoll()
    ep.register(a, select.EPOLLIN)
    wrong = 0
    for i in range(20):
        c.send(b"%02d" % i)
        wrong += ep.poll(5) != [(a.fileno(), select.EPOLLIN)]
        a.send(a.recv(10))
        wrong += not wait_readable("poll", c, None) or c.recv(10) != b"%02d" % i
    say("20 round trips after dup, each call after a poll, wrong:", wrong)
    guard(a, "moved_dup accepted end")
    guard(c, "moved_dup connecting end")


def nread(s):
    """FIONREAD of s: the bytes it has to read."""
    n = array.array("i", [0])
    fcntl.ioctl(s.fileno(), termios.FIONREAD, n)
    return n[0]


def outq(s):
    """SIOCOUTQ of s: what it sent that is unread (a udsfs socket's query
    takes its lane down: the writes' charges are counted in the daemon)."""
    n = array.array("i", [0])
    fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, n)
    return n[0]


def down_rejoin(d, mode="poll"):
    """A laned connection between two processes; one waits in poll for
    the other's bytes while the other takes the lane down (SIOCOUTQ) and
    asks for another (a poll of its own end), then writes 0.5 s later, as
    Postfix's qmgr and local did. The poller must wake at the bytes. Before,
    its poll, on the data file once the lane went down, was told "readable"
    by the daemon when the second lane came up (the polled rule's answer to
    the library's own poll), and the program got it: FIONREAD said 0 and
    Postfix's local closed the connection as ended (qmgr: EPIPE)."""
    srv, path = listener(d, "rejoin-" + mode)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    a, _ = srv.accept()
    srv.close()
    pid = os.fork()
    if pid == 0:
        c.close()
        ep = None
        if mode not in ("poll", "select"):
            flags = {"et": select.EPOLLET, "oneshot": select.EPOLLONESHOT}.get(mode, 0)
            ep = select.epoll()
            ep.register(a, select.EPOLLIN | flags)
        a.send(b"hi")
        wait_readable(mode, a, ep)
        a.recv(10)
        r = wait_readable(mode, a, ep)
        say("server:", mode, "said readable:", r, "with bytes:", nread(a), a.recv(10))
        a.close()
        os._exit(0)
    a.close()
    wait_readable("poll", c, None)
    c.recv(10)
    c.send(b"go")
    time.sleep(0.3)
    outq(c)
    p = select.poll()
    p.register(c, select.POLLOUT)
    p.poll(1000)
    time.sleep(0.5)
    c.send(b"late")
    os.waitpid(pid, 0)


def down_rejoin_waits(d):
    """`down_rejoin` with the server waiting in select and in epoll_wait
    (level, edge-triggered, one-shot), its set registered before the
    first byte."""
    for mode in ["select", "epoll", "et", "oneshot"]:
        down_rejoin(d, mode)


if __name__ == "__main__":
    run_case(
        asyncio_pair, nested, pollers, threads, reused, pingpong, levels, pollout, hup,
        down_under_poll, mixed, closes, del_add, wake_add, slots, add_again, moved_up,
        moved_dup, down_rejoin, down_rejoin_waits,
    )
