#!/usr/bin/env python3
"""Soak driver for integration/soak.sh: many concurrent client processes doing random
stream, dgram and seqpacket traffic through a udsfs mount, with random SIGKILLs.

Usage: soak.py MOUNT DAEMON_PID SCRATCH_DIR   (settings from the environment:
UDSFS_SOAK_SECONDS, UDSFS_SOAK_PROCS, UDSFS_SOAK_KILL_MS, UDSFS_SOAK_SEED,
UDSFS_SOAK_RSS_GROWTH)

Sessions (each one a few forked processes):
  stream, seqpacket: a server (binds a name, listens, accepts one connection) and a
      client (connects through ctl, .udsfs/connect/PATH or .udsfs/abstract/NAME); both
      send and receive at once (two threads on one read-write data fd) until their
      sending time is up, then send a FIN frame carrying their frame count.
  dgram: a receiver (binds a name) and 2-3 senders (ctl connect, the connect view, or
      unconnected sendto through msg `to=`; some O_NONBLOCK with poll on EAGAIN).
Every frame is: magic, session, sender role, sequence number, payload length, crc32,
then a payload cut from a per-session pattern at an offset that depends on role and
sequence, so a receiver can tell a lost, repeated, reordered, truncated or foreign
frame from the right one. Stream writes cut the byte stream at random places and
reads use random sizes.

The orchestrator keeps UDSFS_SOAK_PROCS processes busy, SIGKILLs a random one every
UDSFS_SOAK_KILL_MS (on average), and samples the daemon's VmRSS. Before each write a
sender records (in a file outside the mount) what it has had accepted so far and how much
it is about to write, so when it is killed the checker knows the range its surviving
peer must have received: every accepted frame exactly once, in order, intact; a killed
peer shows as EOF / ECONNRESET (readers) or EPIPE / ECONNRESET / ECONNREFUSED /
ENOTCONN (writers), and only then. At the end: every process ended (none hung), the
socket count is back to the baseline, nothing is in flight, RSS stayed flat.
"""

import collections
import errno
import faulthandler
import json
import os
import random
import select
import signal
import struct
import sys
import threading
import time
import traceback
import zlib

HDR = struct.Struct("<IIIIII")  # magic, session, role, seq, payload length, crc32
MAGIC = 0x4B414F53  # "SOAK"
FIN = 0x214E4946  # "FIN!": seq = frames sent before it
PATSZ = 256 * 1024 + 4096
SNDBUF = 212992
MAX_DGRAM = SNDBUF - 32  # one message at most (bytes)
READ_BUF = 1 << 20
PEER_GONE_WRITE = {"EPIPE", "ECONNRESET", "ECONNREFUSED", "ENOTCONN"}

MNT, DAEMON_PID, SCRATCH = sys.argv[1], int(sys.argv[2]), sys.argv[3]
U = os.path.join(MNT, ".udsfs")
SECONDS = float(os.environ.get("UDSFS_SOAK_SECONDS", "30"))
PROCS = int(os.environ.get("UDSFS_SOAK_PROCS", "16"))
KILL_MS = float(os.environ.get("UDSFS_SOAK_KILL_MS", "600"))
SEED = int(os.environ.get("UDSFS_SOAK_SEED", str(int(time.time()) % 100000)))
RSS_GROWTH = float(os.environ.get("UDSFS_SOAK_RSS_GROWTH", "0.20"))


def ename(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def pattern(sid):
    return random.Random(SEED * 1000003 + sid).randbytes(PATSZ)


def expected_payload(pat, role, seq, plen):
    off = (seq * 7919 + role * 1000003) % (PATSZ - plen + 1)
    return pat[off : off + plen]


def make_frame(pat, sid, role, seq, plen):
    payload = expected_payload(pat, role, seq, plen)
    head = HDR.pack(MAGIC, sid, role, seq, plen, 0)[:20]
    crc = zlib.crc32(payload, zlib.crc32(head))
    return head + struct.pack("<I", crc) + payload


def make_fin(sid, role, count):
    head = HDR.pack(FIN, sid, role, count, 0, 0)[:20]
    return head + struct.pack("<I", zlib.crc32(head))



def counted(st, kind, v, until_eof):
    """Counts a checked frame in a receiver's st: True when it is the FIN frame and the
    receive ends with it."""
    if kind == "fin":
        st["fin"] = v
        if not until_eof:
            st["end"] = "fin"
            return True
        return False
    st["frames"] += 1
    st["payload"] += v
    return False


class Corrupt(Exception):
    pass


def check_frame(pat, sid, role, seq, buf):
    """buf holds exactly one frame (or a prefix of one when `partial`); returns
    ("data", plen) or ("fin", count). Raises Corrupt on any mismatch."""
    if len(buf) < HDR.size:
        raise Corrupt(f"short frame: {len(buf)} bytes, want at least {HDR.size}: {bytes(buf[:32]).hex()}")
    magic, fsid, frole, fseq, plen, crc = HDR.unpack_from(buf)
    if magic not in (MAGIC, FIN):
        raise Corrupt(f"bad magic {magic:#x} where frame seq {seq} of role {role} was due: {bytes(buf[:32]).hex()}")
    if fsid != sid or frole != role:
        raise Corrupt(f"foreign frame: session {fsid} role {frole} seq {fseq}, want session {sid} role {role} seq {seq}")
    if magic == FIN:
        if plen != 0 or len(buf) != HDR.size:
            raise Corrupt(f"FIN frame with {len(buf) - HDR.size} payload bytes (plen {plen})")
        if crc != zlib.crc32(bytes(buf[:20])):
            raise Corrupt(f"FIN frame crc mismatch (seq {fseq})")
        if fseq != seq:
            raise Corrupt(f"FIN says {fseq} frames were sent, but {seq} arrived")
        return ("fin", fseq)
    if fseq != seq:
        kind = "repeated or reordered" if fseq < seq else "lost frames before it"
        raise Corrupt(f"frame seq {fseq} arrived where seq {seq} was due ({kind}); role {role}")
    if len(buf) != HDR.size + plen:
        raise Corrupt(f"frame seq {seq}: {len(buf) - HDR.size} payload bytes, header says {plen}")
    payload = bytes(buf[HDR.size :])
    if crc != zlib.crc32(payload, zlib.crc32(bytes(buf[:20]))):
        raise Corrupt(f"frame seq {seq} ({plen} bytes): crc mismatch")
    if payload != expected_payload(pat, role, seq, plen):
        raise Corrupt(f"frame seq {seq} ({plen} bytes): payload differs from what was sent")
    return ("data", plen)


def rand_plen(rng, cap):
    r = rng.random()
    if r < 0.70:
        n = rng.randint(0, 200)
    elif r < 0.95:
        n = rng.randint(201, 8192)
    elif r < 0.995:
        n = rng.randint(8193, 65536)
    else:
        n = rng.randint(65537, 200000)
    return min(n, cap)


def marker(sid, role):
    return os.path.join(SCRATCH, f"gone-{sid}-{role}")


# ------------------------------------------------------------------ worker side


class Progress:
    """What a sender has had accepted so far and is about to write, rewritten in place
    before each write (one pwrite of a fixed-size record: a SIGKILL leaves the old or
    the new one): 'acked_bytes acked_frames about_to_write_bytes about_to_write_frames'."""

    def __init__(self, sid, role):
        self.fd = os.open(os.path.join(SCRATCH, f"log-{sid}-{role}"), os.O_WRONLY | os.O_CREAT, 0o644)

    def before(self, abytes, aframes, kbytes, kframes):
        os.pwrite(self.fd, b"%020d %020d %020d %020d\n" % (abytes, aframes, kbytes, kframes), 0)


class Worker:
    def __init__(self, spec):
        self.spec = spec
        self.sid = spec["sid"]
        self.role = spec["role"]
        self.type = spec["type"]
        self.rng = random.Random(spec["seed"])
        self.pat = pattern(self.sid)
        self.res = {"sid": self.sid, "role": self.role, "type": self.type, "pid": os.getpid(),
                    "errors": [], "send": None, "recv": None, "how": {}, "end": None}
        self.lock = threading.Lock()

    def error(self, text):
        with self.lock:
            self.res["errors"].append(text)

    # ---- connecting

    def name_addr(self):
        return self.spec["addr"]  # "@name" or "soak/sN.sock"

    def connect_view(self):
        a = self.name_addr()
        return f"{U}/abstract/{a[1:]}" if a.startswith("@") else f"{U}/connect/{a}"

    def partner_gone(self, roles):
        return all(os.path.exists(marker(self.sid, r)) for r in roles)

    def retry_connect(self, attempt, partners):
        """attempt() until it stops failing with ECONNREFUSED/ENOENT (the server is not
        bound yet); gives up (returns None) once the partner process is gone."""
        t0 = time.monotonic()
        while True:
            try:
                return attempt()
            except OSError as e:
                if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                    raise
                if self.partner_gone(partners):
                    self.res["end"] = f"partner-gone-before-connect ({ename(e)})"
                    return None
                if time.monotonic() - t0 > 20:
                    raise RuntimeError(f"could not connect to {self.name_addr()} in 20 s: {ename(e)}")
                time.sleep(0.005)

    def new_sock(self, ty, flags=0):
        fd = os.open(f"{U}/{ty}/clone", os.O_RDWR | flags)
        n = int(os.read(fd, 64).decode().strip())
        return fd, n

    def client_connect(self):
        """stream/seqpacket client: (data fd, read-write; ctl fd or None; socket number
        or None), or Nones when the server went away before it listened."""
        how = self.rng.choice(["ctl", "view"])
        self.res["how"]["connect"] = how
        if how == "view":
            fd = self.retry_connect(lambda: os.open(self.connect_view(), os.O_RDWR), [0])
            return fd, None, None
        ctl, n = self.new_sock(self.type)

        def attempt():
            return os.write(ctl, f"connect {self.name_addr()}\n".encode())

        if self.retry_connect(attempt, [0]) is None:
            os.close(ctl)
            return None, None, None
        fd = os.open(f"{U}/sock/{n}/data", os.O_RDWR)
        return fd, ctl, n

    def server_accept(self):
        """bind, listen, accept one connection: (data fd, accepted ctl fd, its number)."""
        ctl, n = self.new_sock(self.type)
        os.write(ctl, f"bind {self.name_addr()}\n".encode())
        os.write(ctl, f"listen {self.rng.choice([0, 1, 5, 128])}\n".encode())
        how = self.rng.choice(["poll", "thread"])
        self.res["how"]["accept"] = how
        got = []
        t0 = time.monotonic()
        if how == "poll":
            p = select.poll()
            p.register(ctl, select.POLLIN)
            while not p.poll(200):
                if self.partner_gone([1]):
                    self.res["end"] = "partner-gone-before-accept"
                    return None, None, None
                if time.monotonic() - t0 > 20:
                    raise RuntimeError("poll saw no connection to accept in 20 s")
            got.append(os.open(f"{U}/sock/{n}/accept", os.O_RDONLY))
        else:
            # a blocking accept (parked in the daemon) on a thread; this one watches
            # for the partner's death, when the process just exits
            t = threading.Thread(target=lambda: got.append(os.open(f"{U}/sock/{n}/accept", os.O_RDONLY)),
                                 daemon=True)
            t.start()
            while True:
                t.join(0.2)
                if not t.is_alive():
                    break
                if self.partner_gone([1]):
                    self.res["end"] = "partner-gone-before-accept"
                    return None, None, None
                if time.monotonic() - t0 > 20:
                    raise RuntimeError("a blocking accept got no connection in 20 s")
            if not got:
                raise RuntimeError("the accept thread failed")
        acc = got[0]
        m = int(os.read(acc, 64).decode().strip())
        fd = os.open(f"{U}/sock/{m}/data", os.O_RDWR)
        os.close(ctl)  # the listener goes; the accepted connection stays
        if not self.name_addr().startswith("@"):
            os.unlink(os.path.join(MNT, self.name_addr()))
        return fd, acc, m

    # ---- sending

    def send_stream(self, fd, until, sockno):
        rng = random.Random(self.rng.random())
        prog = Progress(self.sid, self.role)
        use_msg = sockno is not None and rng.random() < 0.3
        self.res["how"]["stream_send"] = "msg" if use_msg else "data"
        mfd = os.open(f"{U}/sock/{sockno}/msg", os.O_WRONLY) if use_msg else None
        st = {"frames": 0, "bytes": 0, "end": None, "fin": False}
        self.res["send"] = st
        pending = bytearray()
        ends = collections.deque()  # where the data frames built but not yet acked end
        built = 0  # bytes built
        owed = 0  # payload bytes of a msg record still to write
        seq = 0
        fin_built = False
        while True:
            while len(pending) < 65536 and not fin_built:
                if time.monotonic() >= until:
                    f = make_fin(self.sid, self.role, seq)
                    fin_built = True
                else:
                    f = make_frame(self.pat, self.sid, self.role, seq, rand_plen(rng, 200000))
                    seq += 1
                    ends.append(built + len(f))
                pending += f
                built += len(f)
            if not pending:
                st["fin"] = True
                st["end"] = "fin"
                return
            k = len(pending) if rng.random() < 0.4 else rng.randint(1, min(len(pending), 70000))
            if owed:
                k = owed
            prog.before(st["bytes"], st["frames"], k, 0)
            try:
                if mfd is not None and owed:
                    # The rest of a record write(2) took in part: payload, no header.
                    n = os.write(mfd, bytes(pending[:k]))
                    owed -= n
                elif mfd is not None:
                    rec = b"len=%d\n" % k + bytes(pending[:k])
                    n = os.write(mfd, rec) - (len(rec) - k)
                    if n <= 0:
                        self.error(f"a {len(rec)}-byte msg record write took only its header or less")
                        return
                    owed = k - n
                else:
                    n = os.write(fd, pending[:k])
            except OSError as e:
                st["end"] = ename(e)
                return
            if n <= 0 or n > k:
                self.error(f"stream write of {k} bytes returned {n}")
                return
            st["bytes"] += n
            del pending[:n]
            while ends and ends[0] <= st["bytes"]:
                ends.popleft()
                st["frames"] += 1

    def send_messages(self, fd, until, mode, to=None):
        """seqpacket or dgram: one frame per write. mode: data | data-nonblock | msg."""
        rng = random.Random(self.rng.random())
        prog = Progress(self.sid, self.role)
        st = {"frames": 0, "bytes": 0, "end": None, "fin": False, "eagain": 0}
        self.res["send"] = st
        cap = MAX_DGRAM - HDR.size
        seq = 0
        first = True
        while True:
            fin = time.monotonic() >= until
            f = make_fin(self.sid, self.role, seq) if fin else make_frame(self.pat, self.sid, self.role, seq, rand_plen(rng, cap))
            if mode == "msg":
                rec = (f"len={len(f)}" + (f" to={to}" if to else "") + "\n").encode() + f
            else:
                rec = f
            while True:
                prog.before(st["bytes"], st["frames"], len(f), 1)
                try:
                    n = os.write(fd, rec)
                except BlockingIOError:
                    st["eagain"] += 1
                    p = select.poll()
                    p.register(fd, select.POLLOUT)
                    p.poll(100)
                    continue
                except OSError as e:
                    if first and to and e.errno in (errno.ECONNREFUSED, errno.ENOENT):
                        # sendto before the receiver has bound its name
                        if self.partner_gone([0]):
                            st["end"] = f"partner-gone-before-connect ({ename(e)})"
                            return
                        time.sleep(0.005)
                        continue
                    st["end"] = ename(e)
                    return
                break
            first = False
            if n != len(rec):
                self.error(f"message write of {len(rec)} bytes returned {n}")
                return
            if fin:
                st["fin"] = True
                st["end"] = "fin"
                return
            seq += 1
            st["frames"] = seq
            st["bytes"] += len(f)

    # ---- receiving

    def read_past_reset(self, fd, buffers, st, kind, conn, progress):
        """readv into buffers() (asked again for each try), once more after the first
        ECONNRESET: the count, or None after a second ECONNRESET or another error,
        recorded in st and as an error of this `kind` of `conn`."""
        while True:
            try:
                return os.readv(fd, buffers())
            except ConnectionResetError:
                st["resets"] += 1
                if st["resets"] > 1:
                    self.error(f"ECONNRESET twice on one {conn}")
                    return None
            except OSError as e:
                self.error(f"{kind} read failed with {ename(e)} after {progress()}")
                st["end"] = ename(e)
                return None

    def recv_stream(self, fd, peer_role, until_eof):
        rng = random.Random(self.rng.random())
        st = {"frames": 0, "bytes": 0, "payload": 0, "fin": None, "end": None, "resets": 0, "partial": 0}
        self.res["recv"] = st
        buf = bytearray()
        big = bytearray(READ_BUF)
        mv = memoryview(big)
        def some():
            r = rng.random()
            size = 65536 if r < 0.5 else rng.randint(1, 4096) if r < 0.8 else rng.randint(4097, READ_BUF)
            return [mv[:size]]

        while True:
            n = self.read_past_reset(fd, some, st, "stream", "stream", lambda: f"{st['bytes']} bytes")
            if n is None:
                return
            if n == 0:
                st["end"] = "EOF"
                st["partial"] = len(buf)
                if buf:
                    # the rest of a frame a killed sender was writing: check what came
                    self.check_partial(buf, peer_role, st["frames"])
                return
            if st["fin"] is not None:
                self.error(f"{n} bytes arrived after the FIN frame")
                return
            st["bytes"] += n
            buf += mv[:n]
            while len(buf) >= HDR.size:
                plen = HDR.unpack_from(buf)[4]
                if plen > 200000:
                    raise Corrupt(f"stream frame header claims {plen} payload bytes (seq {st['frames']} due)")
                flen = HDR.size + plen
                if len(buf) < flen:
                    break
                kind, v = check_frame(self.pat, self.sid, peer_role, st["frames"], buf[:flen])
                del buf[:flen]
                if kind == "fin" and buf:
                    st["fin"] = v
                    self.error(f"{len(buf)} bytes follow the FIN frame")
                    return
                if counted(st, kind, v, until_eof):
                    return

    def check_partial(self, buf, role, seq):
        if len(buf) < HDR.size:
            return
        magic, fsid, frole, fseq, plen, _ = HDR.unpack_from(buf)
        if (magic, fsid, frole, fseq) != (MAGIC, self.sid, role, seq):
            raise Corrupt(f"partial frame at EOF has header {magic:#x}/{fsid}/{frole}/{fseq}, want seq {seq}")
        got = bytes(buf[HDR.size :])
        if got != expected_payload(self.pat, role, seq, plen)[: len(got)]:
            raise Corrupt(f"partial frame seq {seq} at EOF: its {len(got)} payload bytes differ")

    def recv_seqpacket(self, fd, peer_role, until_eof):
        st = {"frames": 0, "bytes": 0, "payload": 0, "fin": None, "end": None, "resets": 0}
        self.res["recv"] = st
        big = bytearray(READ_BUF)
        mv = memoryview(big)
        while True:
            n = self.read_past_reset(
                fd, lambda: [mv], st, "seqpacket", "seqpacket connection", lambda: f"{st['frames']} frames"
            )
            if n is None:
                return
            if n == 0:
                st["end"] = "EOF"
                return
            if st["fin"] is not None:
                self.error(f"a {n}-byte message arrived after the FIN frame")
                return
            kind, v = check_frame(self.pat, self.sid, peer_role, st["frames"], mv[:n])
            st["bytes"] += n
            if counted(st, kind, v, until_eof):
                return

    def recv_dgram(self, fd, use_msg, senders):
        st = {"per": {str(r): {"frames": 0, "bytes": 0, "fin": None} for r in senders},
              "frames": 0, "bytes": 0, "payload": 0, "end": None}
        self.res["recv"] = st
        big = bytearray(READ_BUF + 8192)
        mv = memoryview(big)
        p = select.poll()
        p.register(fd, select.POLLIN)
        quiet_since = None
        while True:
            try:
                n = os.readv(fd, [mv])
            except BlockingIOError:
                waiting = [r for r in senders if st["per"][str(r)]["fin"] is None and not os.path.exists(marker(self.sid, r))]
                if not waiting:
                    # every sender finished or is gone: drain what is still on its way
                    quiet_since = quiet_since or time.monotonic()
                    if time.monotonic() - quiet_since > 0.3:
                        st["end"] = "all-senders-done"
                        return
                p.poll(50)
                continue
            except OSError as e:
                self.error(f"dgram read failed with {ename(e)}")
                return
            quiet_since = None
            data = mv[:n]
            if use_msg:
                nl = bytes(data[:200]).find(b"\n")
                if nl < 0:
                    raise Corrupt(f"msg record without a header line: {bytes(data[:64])!r}")
                head = bytes(data[:nl]).decode()
                fields = dict(f.split("=", 1) for f in head.split())
                data = data[nl + 1 :]
                if int(fields.get("len", -1)) != len(data):
                    raise Corrupt(f"msg record '{head}' carries {len(data)} payload bytes")
            if len(data) < HDR.size:
                raise Corrupt(f"a {len(data)}-byte datagram: {bytes(data).hex()}")
            role = HDR.unpack_from(data)[2]
            per = st["per"].get(str(role))
            if per is None:
                raise Corrupt(f"datagram from unknown role {role}: {bytes(data[:24]).hex()}")
            if per["fin"] is not None:
                raise Corrupt(f"datagram from role {role} after its FIN")
            kind, v = check_frame(self.pat, self.sid, role, per["frames"], data)
            per["bytes"] += len(data)
            if kind == "fin":
                per["fin"] = v
            else:
                per["frames"] += 1
                st["frames"] += 1
                st["payload"] += v
                st["bytes"] += len(data)

    # ---- roles

    def duplex(self, fd, sockno, peer_role, is_server):
        until = self.spec["until"]
        errs = []

        def run(fn, *a):
            try:
                fn(*a)
            except Corrupt as e:
                errs.append(f"CORRUPT: {e}")
            except Exception:
                errs.append(traceback.format_exc())

        if self.type == "stream":
            s = threading.Thread(target=run, args=(self.send_stream, fd, until, sockno))
            r = threading.Thread(target=run, args=(self.recv_stream, fd, peer_role, is_server))
        else:
            s = threading.Thread(target=run, args=(self.send_messages, fd, until, "data"))
            r = threading.Thread(target=run, args=(self.recv_seqpacket, fd, peer_role, is_server))
        s.start()
        r.start()
        r.join()
        if not errs:
            s.join()
        # else: leave at once (os._exit ends the sender thread), so the peer is not
        # left blocked on a queue nobody reads any more
        for e in list(errs):
            self.error(e)

    def run(self):
        t, role = self.type, self.role
        if t in ("stream", "seqpacket"):
            if role == 0:
                fd, ctl, n = self.server_accept()
            else:
                fd, ctl, n = self.client_connect()
            if fd is None:
                return
            self.duplex(fd, n, 1 - role, role == 0)
            return
        # dgram
        if role == 0:
            ctl, n = self.new_sock("dgram")
            os.write(ctl, f"bind {self.name_addr()}\n".encode())
            use_msg = self.rng.random() < 0.3
            self.res["how"]["recv"] = "msg" if use_msg else "data"
            fd = os.open(f"{U}/sock/{n}/{'msg' if use_msg else 'data'}", os.O_RDONLY | os.O_NONBLOCK)
            self.recv_dgram(fd, use_msg, self.spec["senders"])
            if not self.name_addr().startswith("@"):
                os.unlink(os.path.join(MNT, self.name_addr()))
            return
        how = self.rng.choice(["ctl", "ctl-nonblock", "view", "sendto"])
        self.res["how"]["send"] = how
        until = self.spec["until"]
        if how == "sendto":
            ctl, n = self.new_sock("dgram")
            if self.rng.random() < 0.5:
                os.write(ctl, b"bind\n")  # autobind: the receiver sees from=
            fd = os.open(f"{U}/sock/{n}/msg", os.O_WRONLY)
            self.send_messages(fd, until, "msg", to=self.name_addr())
        elif how == "view":
            fd = self.retry_connect(lambda: os.open(self.connect_view(), os.O_WRONLY), [0])
            if fd is not None:
                self.send_messages(fd, until, "data")
        else:
            ctl, n = self.new_sock("dgram")

            def attempt():
                return os.write(ctl, f"connect {self.name_addr()}\n".encode())

            if self.retry_connect(attempt, [0]) is None:
                return
            flags = os.O_WRONLY | (os.O_NONBLOCK if how == "ctl-nonblock" else 0)
            fd = os.open(f"{U}/sock/{n}/data", flags)
            self.send_messages(fd, until, "data-nonblock" if how == "ctl-nonblock" else "data")


def worker_main(spec):
    errpath = os.path.join(SCRATCH, f"err-{spec['sid']}-{spec['role']}")
    errf = open(errpath, "w")
    # a worker stuck past its session by this much dumps its threads' stacks and exits 1
    faulthandler.dump_traceback_later(spec["hard"], exit=True, file=errf)
    w = Worker(spec)
    try:
        w.run()
    except Corrupt as e:
        w.error(f"CORRUPT: {e}")
    except Exception:
        w.error(traceback.format_exc())
    path = os.path.join(SCRATCH, f"res-{spec['sid']}-{spec['role']}")
    with open(path + ".tmp", "w") as f:
        json.dump(w.res, f)
    os.rename(path + ".tmp", path)
    faulthandler.cancel_dump_traceback_later()
    os._exit(0)


# ------------------------------------------------------------------ orchestrator


def rss_kb():
    try:
        with open(f"/proc/{DAEMON_PID}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def count_sockets():
    with open(os.path.join(U, "unix")) as f:
        return max(0, len(f.read().splitlines()) - 1)


def gc_inflight():
    with open(os.path.join(U, "gc")) as f:
        for line in f:
            if line.startswith("inflight="):
                return int(line.split("=", 1)[1])
    return None


def last_progress(sid, role):
    """(acked bytes, acked frames, bytes being written, frames being written) a sender
    recorded before its last write, or None."""
    try:
        with open(os.path.join(SCRATCH, f"log-{sid}-{role}"), "rb") as f:
            parts = f.read().split()
    except FileNotFoundError:
        return None
    return tuple(int(p) for p in parts) if len(parts) == 4 else None


def main():
    rng = random.Random(SEED)
    os.makedirs(os.path.join(MNT, "soak"), exist_ok=True)
    baseline = count_sockets()
    inflight0 = gc_inflight()
    print(f"soak: {SECONDS:g} s, {PROCS} processes, a SIGKILL every ~{KILL_MS:g} ms, seed {SEED}; "
          f"baseline {baseline} sockets, daemon pid {DAEMON_PID}, VmRSS {rss_kb()} kB", flush=True)
    start = time.monotonic()
    deadline = start + SECONDS
    procs = {}  # pid -> (sid, role)
    sessions = {}  # sid -> spec summary
    status = {}  # (sid, role) -> ("exit", code) | ("signal", sig)
    killed_by_us = set()
    kills = 0
    rss = []  # (t, kB)
    next_kill = start + rng.expovariate(1000.0 / KILL_MS)
    next_rss = start
    next_count = start
    peak_socks = baseline
    sid = 0

    def reap(block=False):
        while procs:
            try:
                pid, st = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            key = procs.pop(pid)
            if os.WIFSIGNALED(st):
                status[key] = ("signal", os.WTERMSIG(st))
            else:
                status[key] = ("exit", os.WEXITSTATUS(st))
            with open(marker(*key), "w") as f:
                f.write(repr(status[key]))
            if block:
                return

    def launch():
        nonlocal sid
        sid += 1
        t = rng.choices(["stream", "seqpacket", "dgram"], [4, 3, 3])[0]
        now = time.monotonic()
        until = min(now + rng.uniform(0.2, 2.0), deadline)
        abstract = rng.random() < 0.6
        addr = f"@soak-{os.getpid()}-{sid}" if abstract else f"soak/s{sid}.sock"
        roles = [0, 1] if t != "dgram" else list(range(rng.choice([3, 4])))
        sessions[sid] = {"type": t, "roles": roles, "addr": addr}
        for role in roles:
            spec = {"sid": sid, "role": role, "type": t, "addr": addr, "until": until,
                    "seed": rng.getrandbits(48), "hard": (until - now) + 25,
                    "senders": roles[1:]}
            pid = os.fork()
            if pid == 0:
                try:
                    worker_main(spec)
                finally:
                    os._exit(99)
            procs[pid] = (sid, role)

    while True:
        now = time.monotonic()
        reap()
        if now >= next_rss:
            r = rss_kb()
            if r is not None:
                rss.append((now - start, r))
            next_rss = now + 0.25
        if now >= deadline:
            break
        if now >= next_count:
            peak_socks = max(peak_socks, count_sockets())
            next_count = now + 1.0
        while len(procs) < PROCS and deadline - now > 0.5:
            launch()
        if now >= next_kill and procs:
            pid = rng.choice(sorted(procs))
            os.kill(pid, signal.SIGKILL)
            killed_by_us.add(procs[pid])
            kills += 1
            next_kill = now + rng.expovariate(1000.0 / KILL_MS)
        time.sleep(0.01)

    # drain: no more sessions, no more kills; everyone must finish by themselves
    drain_start = time.monotonic()
    while procs and time.monotonic() - drain_start < 30:
        reap()
        now = time.monotonic()
        if now >= next_rss:
            r = rss_kb()
            if r is not None:
                rss.append((now - start, r))
            next_rss = now + 0.25
        time.sleep(0.01)
    failures = []
    if procs:
        for pid, key in procs.items():
            wchan = open(f"/proc/{pid}/wchan").read() if os.path.exists(f"/proc/{pid}/wchan") else "?"
            failures.append(f"session {key[0]} role {key[1]} ({sessions[key[0]]['type']}, pid {pid}) still running "
                            f"30 s after the end (wchan {wchan}): a peer never saw EOF or an error")
            os.kill(pid, signal.SIGKILL)
        while procs:
            reap(block=True)
    drain_s = time.monotonic() - drain_start

    # ---- check every session
    def res(key):
        try:
            with open(os.path.join(SCRATCH, f"res-{key[0]}-{key[1]}")) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def killed(key):
        return status.get(key) == ("signal", signal.SIGKILL)

    checked_frames = checked_bytes = 0
    ends = {}
    for s, info in sorted(sessions.items()):
        t = info["type"]
        results = {}
        for role in info["roles"]:
            key = (s, role)
            st = status.get(key)
            if killed(key):
                continue
            r = res(key)
            errtext = ""
            try:
                errtext = open(os.path.join(SCRATCH, f"err-{s}-{role}")).read().strip()
            except FileNotFoundError:
                pass
            if st != ("exit", 0) or r is None:
                failures.append(f"session {s} ({t}) role {role}: ended {st}, result {'missing' if r is None else 'present'}"
                                + (f"; traceback:\n{errtext}" if errtext else ""))
                continue
            for e in r["errors"]:
                failures.append(f"session {s} ({t} {info['addr']}) role {role} {r['how']}: {e}")
            results[role] = r
        # directions: sender -> receiver
        if t == "dgram":
            dirs = [(snd, 0) for snd in info["roles"][1:]]
        else:
            dirs = [(0, 1), (1, 0)]
        for snd, rcv in dirs:
            rr, sr = results.get(rcv), results.get(snd)
            where = f"session {s} ({t} {info['addr']}) {snd}->{rcv}"
            # a receiver that failed by itself is reported above; its sender's
            # "peer gone" error is a consequence, not another problem
            rcv_failed = rr is not None and bool(rr["errors"])
            if sr is not None and sr["send"] is not None and not sr["errors"]:
                end = sr["send"]["end"]
                ends[end] = ends.get(end, 0) + 1
                if end != "fin":
                    if end in PEER_GONE_WRITE or (end or "").startswith("partner-gone"):
                        if not killed((s, rcv)) and not rcv_failed:
                            failures.append(f"{where}: the sender ended with {end} but the receiver was not killed "
                                            f"({status.get((s, rcv))}); sender {sr['how']}")
                    else:
                        failures.append(f"{where}: the sender ended with {end} ({sr['how']})")
            elif sr is not None and sr["end"] and not killed((s, 1 - snd if t != 'dgram' else 0)):
                failures.append(f"{where}: the sender gave up ({sr['end']}) though its partner was not killed")
            if rr is None or rr["recv"] is None or rr["errors"]:
                continue
            rv = rr["recv"] if t != "dgram" else rr["recv"]["per"][str(snd)]
            if t == "dgram":
                checked_frames += rv["frames"]
                checked_bytes += rv["bytes"]
            if killed((s, snd)):
                prog = last_progress(s, snd)
                lo_b, lo_f, k_b, k_f = prog if prog else (0, 0, 0, 0)
                if t == "stream":
                    got = rv["bytes"]
                    if not (lo_b <= got <= lo_b + k_b):
                        failures.append(f"{where}: the sender was killed with {lo_b} bytes accepted and {k_b} being "
                                        f"written; the receiver got {got} bytes (want {lo_b}..{lo_b + k_b})")
                else:
                    got = rv["frames"] + (1 if rv["fin"] is not None else 0)
                    if not (lo_f <= got <= lo_f + k_f):
                        failures.append(f"{where}: the sender was killed with {lo_f} messages accepted and {k_f} "
                                        f"being written; the receiver got {got} (want {lo_f}..{lo_f + k_f})")
                if t != "dgram" and rv["end"] not in ("EOF", "fin"):
                    failures.append(f"{where}: the sender was killed; the receiver ended with {rv['end']}, want EOF")
            elif sr is not None and sr["send"] is not None and sr["send"]["end"] == "fin":
                want_f, want_b = sr["send"]["frames"], sr["send"]["bytes"]
                got_b = rv["bytes"] if t != "dgram" else rv["bytes"]
                if rv["fin"] != want_f or rv["frames"] != want_f:
                    failures.append(f"{where}: the sender had {want_f} frames ({want_b} bytes) accepted and sent FIN; "
                                    f"the receiver got {rv['frames']} frames, FIN {rv['fin']}")
                elif t == "stream" and got_b != want_b:
                    failures.append(f"{where}: {want_b} bytes accepted, {got_b} received")
                if t != "dgram" and rcv == 0 and (rv["end"] != "EOF" or rv["resets"]) and not sr["errors"]:
                    failures.append(f"{where}: after the client's FIN and close the server read ended with "
                                    f"{rv['end']} (resets {rv['resets']}), want a clean EOF")
            if t != "dgram":
                checked_frames += rv["frames"]
                checked_bytes += rv["bytes"]

    # ---- the daemon after everyone left
    t0 = time.monotonic()
    left = count_sockets()
    while left != baseline and time.monotonic() - t0 < 5:
        time.sleep(0.02)
        left = count_sockets()
    settle_ms = (time.monotonic() - t0) * 1000
    if left != baseline:
        with open(os.path.join(U, "unix")) as f:
            table = f.read()
        failures.append(f"{left} sockets left 5 s after every client exited, baseline {baseline}:\n{table[:3000]}")
    inflight = gc_inflight()
    if inflight != inflight0:
        failures.append(f".udsfs/gc says inflight={inflight} at the end, {inflight0} at the start")
    for name in os.listdir(os.path.join(MNT, "soak")):
        os.unlink(os.path.join(MNT, "soak", name))  # nodes of killed servers
    os.rmdir(os.path.join(MNT, "soak"))
    if not os.path.exists(f"/proc/{DAEMON_PID}"):
        failures.append("the daemon is gone")
    final_rss = rss_kb()
    rss.append((time.monotonic() - start, final_rss))

    warm = max(3.0, SECONDS * 0.3)
    warm_peak = max((r for t, r in rss if t <= warm), default=0)
    after = [r for t, r in rss if t > warm]
    after_peak = max(after, default=0)
    peak = max(r for t, r in rss)
    limit = warm_peak * (1 + RSS_GROWTH)
    nsess = len(sessions)
    by_type = {ty: sum(1 for v in sessions.values() if v["type"] == ty) for ty in ("stream", "seqpacket", "dgram")}
    real_kills = sum(1 for k in killed_by_us if killed(k))
    print(f"sessions: {nsess} ({', '.join(f'{v} {k}' for k, v in by_type.items())}); processes: {len(status)}")
    print(f"sender endings: {', '.join(f'{k}={v}' for k, v in sorted(ends.items(), key=lambda x: str(x[0])))}")
    print(f"messages checked: {checked_frames}; bytes checked: {checked_bytes}")
    print(f"kills: {real_kills} (SIGKILL sent {kills} times); drain took {drain_s:.1f} s")
    print(f"sockets: baseline {baseline}, peak seen {peak_socks}, left {left} (settled in {settle_ms:.0f} ms); "
          f"gc inflight {inflight}")
    print(f"daemon VmRSS: start {rss[0][1]} kB, warm-up ({warm:.0f} s) peak {warm_peak} kB, "
          f"peak after warm-up {after_peak} kB, peak {peak} kB, final {final_rss} kB "
          f"(limit {limit:.0f} kB = warm-up peak + {RSS_GROWTH * 100:.0f}%)")
    step = max(1, len(rss) // 20)
    trace = " ".join(f"{t:.0f}s:{r / 1024:.1f}M" for i, (t, r) in enumerate(rss) if i % step == 0 or i == len(rss) - 1)
    print(f"VmRSS trace: {trace}")
    if after_peak > limit:
        failures.append(f"the daemon's VmRSS grew from {warm_peak} kB (warm-up peak) to {after_peak} kB, "
                        f"more than {RSS_GROWTH * 100:.0f}%")
    if checked_frames == 0:
        failures.append("no message was checked at all")
    if failures:
        print(f"FAIL: {len(failures)} problems (seed {SEED}; rerun with UDSFS_SOAK_SEED={SEED}):")
        for f in failures[:40]:
            print(f"  - {f}")
        if any("EIO" in f for f in failures):
            print("  (udsfs never answers EIO itself: the kernel gives EIO for every I/O on an inode it has "
                  "marked bad, which it does when a LOOKUP returns a nodeid it still has cached with a new "
                  "generation or file type, i.e. an inode number was reused while a file opened through the "
                  "old one was still open)")
        sys.exit(1)
    print("ok: every accepted message arrived exactly once, in order, intact; killed peers showed as "
          "EOF/ECONNRESET/EPIPE/ECONNREFUSED only; every process ended; sockets back to the baseline; RSS flat")


if __name__ == "__main__":
    main()
