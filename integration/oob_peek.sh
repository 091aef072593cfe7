#!/usr/bin/env bash
# MSG_PEEK, SO_PEEK_OFF and MSG_OOB (SIOCATMARK, SIGURG to the F_SETOWN/FIOSETOWN
# owner, SO_OOBINLINE, POLLPRI) through the socket API: tests/conformance/oob_peek.py
# runs on kernel sockets and through `udsfs run`; both outputs must be equal.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other) # a user other than root sets an owner
source "$(dirname "$0")/lib.sh"
kernel_vs_udsfs "$ROOT/tests/conformance/oob_peek.py"

# The file forms: `oob=1` in a msg record, ctl `owner`, `oobinline`, `peek_off`, and
# the status lines oob_pending, oob_mark, oobinline, peek_off, urg_owner. The values
# wanted are the kernel's, as the program above printed them.
py_pair out stream '
urg = []
signal.signal(signal.SIGURG, lambda *_: urg.append(1))
def st(k):
    return status(m, k)
def show(tag):
    keys = ("oob_pending", "oob_mark", "oobinline", "peek_off", "rcvq_bytes")
    print(tag, " ".join(f"{k}={st(k)}" for k in keys), f"sigurg={len(urg)}")
    urg.clear()
ctl = os.open(f"{U}/sock/{m}/ctl", os.O_WRONLY)
w = os.open(f"{U}/sock/{n}/msg", os.O_WRONLY)
d = os.open(f"{U}/sock/{m}/data", os.O_RDONLY | os.O_NONBLOCK)
os.write(ctl, f"owner {os.getpid()}\n".encode())
print("urg_owner is me:", st("urg_owner") == str(os.getpid()))
os.write(w, b"len=5 oob=1\nhello")
show("sent")
print("read:", os.read(d, 10))
show("at mark")
os.write(ctl, b"oobinline on\n")
print("read inline:", os.read(d, 10))
show("read")
os.write(ctl, b"peek_off 3\n")
os.write(ctl, b"owner 0\n")
os.write(w, b"len=2 oob=1\nab")
show("peek_off")
print("empty oob record:", err(os.write, w, b"len=0 oob=1\n"))
print("oob=2:", err(os.write, w, b"len=1 oob=2\nx"))
print("peek_off x:", err(os.write, ctl, b"peek_off x\n"))
'
printf '%s\n' "$out"
expect_eq "file forms of OOB data" "$out" "urg_owner is me: True
sent oob_pending=1 oob_mark=0 oobinline=0 peek_off=-1 rcvq_bytes=5 sigurg=1
read: b'hell'
at mark oob_pending=1 oob_mark=1 oobinline=0 peek_off=-1 rcvq_bytes=1 sigurg=0
read inline: b'o'
read oob_pending=0 oob_mark=0 oobinline=1 peek_off=-1 rcvq_bytes=0 sigurg=0
peek_off oob_pending=1 oob_mark=0 oobinline=1 peek_off=3 rcvq_bytes=2 sigurg=0
empty oob record: ENOTSUP
oob=2: EINVAL
peek_off x: EINVAL"
new_pair D dgram
expect_errno EOPNOTSUPP py 'os.write(os.open(f"{U}/sock/{sys.argv[1]}/msg", os.O_WRONLY), b"len=1 oob=1\nx")' "$D_N"

# An owner set by a user other than root: SIGURG reaches that user's processes of a
# group (each member checked, as Linux's sigio_perm), never a process of another user:
# not root's member of the same group (any process may join a group of its session),
# not init.
command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed to run as another user"
chmod o+x "$TMP"
PY3=$(python3 -c 'import sys; print(sys.executable)')
"$PY3" -c '
import os, signal, sys, time
urg = []
signal.signal(signal.SIGURG, lambda *_: urg.append(1))
os.setpgid(0, 0)
open(sys.argv[1] + ".pgrp", "w").write(str(os.getpgrp()))
while not os.path.exists(sys.argv[1] + ".go"):
    time.sleep(0.02)
print("root member:", len(urg))
' "$TMP/group" >"$TMP/group.out" 2>&1 &
root_member=$!
wait_for "$TMP/group.pgrp" 10 "the root member did not start" "$TMP/group.out"
out=$(U=$U G=$(cat "$TMP/group.pgrp") as_uid 65534 "$PY3" -c '
import os, signal
U, G = os.environ["U"], int(os.environ["G"])
urg = []
signal.signal(signal.SIGURG, lambda *_: urg.append(1))
os.setpgid(0, G)
p = os.open(f"{U}/stream/pair", os.O_RDWR)
n, m = os.read(p, 64).split()
ctl = os.open(f"{U}/sock/{m.decode()}/ctl", os.O_WRONLY)
w = os.open(f"{U}/sock/{n.decode()}/msg", os.O_WRONLY)
os.write(ctl, f"owner -{G}\n".encode())
os.write(w, b"len=1 oob=1\nx")
print("nobody member:", len(urg))
os.write(ctl, b"owner 1\n")
os.write(w, b"len=1 oob=1\ny")
print("init:", len(urg))
') || fail "the owner checks as nobody failed"
let_go "$TMP/group.go" "$root_member" "the root member failed" "$TMP/group.out"
expect_eq "SIGURG for owners set by nobody" "$out
$(cat "$TMP/group.out")" "nobody member: 1
init: 1
root member: 0"
grep -q "SIGURG to 1 not sent: its owner was set by uid 65534" "$LOG" ||
    fail "no log line for the SIGURG not sent to init"
ok "the SIGURG nobody may not send is not sent, with a log line; root's member of the group got none"
