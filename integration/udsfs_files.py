"""What the integration scripts' Python parts share: the files of a udsfs mount.

MNT (the mount) and U (its .udsfs directory) come from the environment. lib.sh puts
this text before a program's own ($PY_PRELUDE, `py`, `with_helpers`) rather than
have it imported: the programs also run as users who may not read the repository.
"""

import errno, fcntl, os, signal, stat, sys, threading, time  # noqa: F401 (the programs use them)

M = os.environ.get("MNT", "")
U = os.environ.get("U", "")


def err(fn, *a):
    """"OK", or the errno name of the OSError fn(*a) raised."""
    try:
        fn(*a)
        return "OK"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def faults_write(text):
    """Writes `text` to the mount's .udsfs/faults in one write: "OK" or the errno name."""
    fd = os.open(f"{U}/faults", os.O_WRONLY)
    try:
        return err(os.write, fd, text.encode())
    finally:
        os.close(fd)


def status(n, key=None):
    """Socket n's status file: the value of `key`, or every key=value as a dict."""
    fields = {}
    for line in open(f"{U}/sock/{n}/status"):
        k, _, v = line.strip().partition("=")
        if key is None:
            fields[k] = v
        elif k == key:
            return v
    return fields if key is None else None


def clone(ty):
    """A new socket of type `ty`: its clone file's descriptor and its number."""
    fd = os.open(f"{U}/{ty}/clone", os.O_RDWR)
    return fd, int(os.read(fd, 64).split()[0])


def listening(name, backlog):
    """A new stream socket bound to `name` and listening with `backlog`: its
    clone file's descriptor and its number."""
    fd, n = clone("stream")
    ctl(fd, "bind " + name)
    ctl(fd, f"listen {backlog}")
    return fd, n


def pair(ty):
    """A new socketpair of type `ty`: the pair file's descriptor and both numbers."""
    fd = os.open(f"{U}/{ty}/pair", os.O_RDWR)
    a, b = map(int, os.read(fd, 64).split())
    return fd, a, b


def opn(n, f, flags=os.O_RDWR):
    """Opens file `f` (data, msg, ctl, ...) of socket n."""
    return os.open(f"{U}/sock/{n}/{f}", flags)


def record(fd):
    """One read of a `msg` file: the record's header fields as a dict, and its payload."""
    b = os.read(fd, 1 << 20)
    head, _, payload = b.partition(b"\n")
    return dict(x.split("=", 1) for x in head.decode().split()), payload


def ctl(fd, cmd):
    os.write(fd, (cmd + "\n").encode())


def fill(fd, chunk=b"x", most=None):
    """Writes `chunk` to the non-blocking `fd` until EAGAIN: how many writes went in
    (stops after most + 1 of them, when `most` is given)."""
    n = 0
    while most is None or n <= most:
        try:
            os.write(fd, chunk)
        except BlockingIOError:
            break
        n += 1
    return n


def drain(fd):
    """What the non-blocking `fd` holds now: its bytes read until EAGAIN or EOF."""
    out = bytearray()
    while True:
        try:
            d = os.read(fd, 1 << 20)
        except BlockingIOError:
            return bytes(out)
        if not d:
            return bytes(out)
        out += d


def lines_from(fd, n):
    """The first `n` lines through the pipe `fd` (fewer when its writers all close
    first), as text: the one line each of n children writes."""
    text = b""
    while text.count(b"\n") < n:
        more = os.read(fd, 4096)
        if not more:
            break
        text += more
    return text.decode()


def fill_bytes(fd, chunk):
    """Writes `chunk` to the non-blocking `fd` until EAGAIN or another error: the bytes
    written and that error's errno name (None at EAGAIN)."""
    sent = 0
    while True:
        try:
            sent += os.write(fd, chunk)
        except BlockingIOError:
            return sent, None
        except OSError as e:
            return sent, errno.errorcode.get(e.errno, str(e.errno))


def in_thread(fn):
    """Starts fn() in a daemon thread: the thread and a dict that gets "n", what fn
    returned, or "err", the OSError it raised."""
    result = {}

    def run():
        try:
            result["n"] = fn()
        except OSError as e:
            result["err"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, result


def hold(done):
    """Makes DONE.held (the test's sign that what this script holds is in place), then
    waits for DONE (its sign to go on)."""
    open(done + ".held", "w").close()
    while not os.path.exists(done):
        time.sleep(0.02)


class Actor:
    """A child process running as user and group `uid`, without other groups (with
    RLIMIT_NOFILE `nofile` when given), that runs the code sent to it in the program's
    globals: `do` runs statements, `ev` evaluates an expression; `send` and `answer` are
    their two halves, for users that act at once. An exception in the child ends the
    program with a FAIL line naming the user and the code."""

    def __init__(self, uid, nofile=None):
        import json, resource

        self.uid, self.json = uid, json
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(w1)
            os.close(r2)
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            env = sys.modules["__main__"].__dict__
            rf, wf = os.fdopen(r1), os.fdopen(w2, "w")
            for line in rf:
                req = json.loads(line)
                try:
                    if req["eval"]:
                        out = {"v": eval(req["code"], env)}
                    else:
                        exec(req["code"], env)
                        out = {"v": None}
                except Exception as e:
                    out = {"x": f"{type(e).__name__}: {e}"}
                wf.write(json.dumps(out, default=str) + "\n")
                wf.flush()
            os._exit(0)
        os.close(r1)
        os.close(w2)
        self.pid = pid
        self.w, self.r = os.fdopen(w1, "w"), os.fdopen(r2)

    def send(self, code, ev=False):
        self.w.write(self.json.dumps({"code": code, "eval": ev}) + "\n")
        self.w.flush()

    def answer(self, code=""):
        out = self.json.loads(self.r.readline())
        if "x" in out:
            print(f"FAIL: uid {self.uid}: {code!r} raised {out['x']}", file=sys.stderr, flush=True)
            sys.exit(1)
        return out["v"]

    def do(self, code):
        self.send(code)
        self.answer(code)

    def ev(self, code):
        self.send(code, True)
        return self.answer(code)
