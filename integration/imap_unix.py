# imap_unix.py SOCK USER PASS DOVEADM...: IMAP sessions (python3's imaplib) over
# Dovecot's unix listener SOCK, for run_dovecot.sh. Prints each answer with its volatile
# parts (UIDVALIDITY, timings, pids) written as words, so two runs compare line by line:
# a refused LOGIN, LOGIN, LIST, CREATE, SELECT, APPEND (a small message and a
# 300,000-byte one: its length, and whether its bytes came back as sent), FETCH, SEARCH; `DOVEADM... who` while the
# session is held; 8 sessions at once; a session kicked by `DOVEADM... kick USER` (it
# reads the server's BYE, then EOF); LOGOUT.
import hashlib, imaplib, re, socket, subprocess, sys, threading

sock_path, user, password = sys.argv[1:4]
doveadm = sys.argv[4:]


class IMAP4Unix(imaplib.IMAP4):
    def __init__(self, path):
        self.path = path
        super().__init__()

    def open(self, host="", port=0, timeout=None):
        self.host, self.port = host, port
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(20)
        self.sock.connect(self.path)
        self.file = self.sock.makefile("rb")


def norm(text):
    text = str(text)
    text = re.sub(r"APPENDUID \d+ ", "APPENDUID V ", text)
    text = re.sub(r"UIDVALIDITY \d+", "UIDVALIDITY V", text)
    text = re.sub(r"\(\d+\.\d+ \+ \d+\.\d+( \+ \d+\.\d+)? secs\)", "(T secs)", text)
    text = re.sub(r"\(\d+( \d+)*\)", "(PIDS)", text)
    return re.sub(r" +", " ", text)


def say(what, answer):
    print(what + ":", norm(answer))


def run(*args):
    p = subprocess.run(doveadm + list(args), capture_output=True, text=True, timeout=20)
    for line in (p.stdout + p.stderr).splitlines():
        say("doveadm " + args[0], line.rstrip())
    say("doveadm " + args[0] + " exit", p.returncode)


m = IMAP4Unix(sock_path)
say("greeting", m.welcome)
try:
    m.login(user, "wrong")
except imaplib.IMAP4.error as e:
    say("login wrong password", e)
say("login", m.login(user, password))
say("create", m.create("Lists"))
say("list", m.list())
say("select", m.select("Lists"))
say("append", m.append("Lists", None, None, b"Subject: small\r\n\r\nhello\r\n"))
big = b"".join(b"line %06d of the big message\r\n" % i for i in range(9375))
big_msg = b"Subject: big\r\n\r\n" + big
say("append big", m.append("Lists", r"(\Flagged)", None, big_msg))
say("fetch", m.fetch("1:*", "(FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])"))
typ, data = m.fetch("2", "(BODY.PEEK[TEXT])")
body = data[0][1]
print("big body:", typ, len(body), "bytes,", "as sent" if body == big else "not as sent")
say("search", m.search(None, "FLAGGED"))
say("status", m.status("Lists", "(MESSAGES UNSEEN)"))
run("who")
say("logout", m.logout())

# 8 sessions at once, each its own message.
results = []


def one(i):
    try:
        c = IMAP4Unix(sock_path)
        c.login(user, password)
        c.append("Lists", None, None, b"Subject: many %d\r\n\r\nbody\r\n" % i)
        c.logout()
        results.append("ok")
    except Exception as e:  # the failure is the answer
        results.append(norm(repr(e)))


threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("sessions at once:", sorted(results))

# A session kicked by doveadm: the server says BYE and closes.
k = IMAP4Unix(sock_path)
k.login(user, password)
say("select", k.select("Lists"))
run("kick", user)
lines = []
while True:
    line = k.file.readline()
    if not line:
        break
    lines.append(line.decode().rstrip())
print("kicked session read:", lines, "then EOF")
