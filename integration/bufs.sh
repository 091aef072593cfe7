#!/usr/bin/env bash
# Queue figures (FIONREAD/SIOCINQ, SIOCOUTQ), SO_SNDBUF/SO_RCVBUF and their FORCE
# forms, and MSG_TRUNC/MSG_CTRUNC through the socket API: tests/conformance/bufs.py
# runs on kernel sockets and through `udsfs run`; both outputs must be equal. Then the
# file forms: status inq/outq/rcvbuf, ctl sndbuf/rcvbuf, flags=ctrunc in msg records.
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other) # the program checks the FORCE options as nobody
source "$(dirname "$0")/lib.sh"
chmod o+x "$TMP" # the program's child as nobody reaches the mount
kernel_vs_udsfs "$ROOT/tests/conformance/bufs.py"

# The file forms, with the values the kernel gave the program above: status `inq`
# (SIOCINQ; empty on a listener), `wmem` (SIOCOUTQ), `sndbuf`, `rcvbuf`; ctl `sndbuf N`,
# `rcvbuf N`, `sndbufforce N`, `rcvbufforce N`.
kernel_says() { sed -n "s/^$1//p" "$TMP/kernel.out"; }
export MNT U
for type in stream dgram seqpacket; do
    new_pair P "$type"
    # The empty message goes through `msg`: FUSE never passes on an empty write().
    send "$P_N" 12345
    send "$P_N" 123
    printf 'len=0\n' >"$U/sock/$P_N/msg"
    expect_eq "$type: inq and wmem after 5+3+0" \
        "b inq=$(status_of "$P_M" inq) a outq=$(status_of "$P_N" wmem)" \
        "$(kernel_says "$type 5+3+0 queued: ")"
    close_fd "$P_FD"
done
new_sock L stream
ctl "$L_FD" "bind listener"
ctl "$L_FD" "listen"
expect_status "$L" inq ""

new_sock S dgram
expect_status "$S" sndbuf 212992
expect_status "$S" rcvbuf "$(cat /proc/sys/net/core/rmem_default)"
for cmd in "sndbuf 65536:sndbuf" "sndbuf 1:sndbuf" "sndbuf -1:sndbuf" "rcvbuf 65536:rcvbuf" \
    "rcvbuf 1:rcvbuf" "rcvbuf -1:rcvbuf" "sndbufforce 100000000:sndbuf" \
    "rcvbufforce -5:rcvbuf" "rcvbufforce 2147483647:rcvbuf"; do
    ctl "$S_FD" "${cmd%%:*}"
    got=$(status_of "$S" "${cmd##*:}")
    opt=SO_${cmd%% *}
    opt=${opt^^}
    arg=${cmd#* }
    arg=${arg%%:*}
    case $arg in -1) label=-1 ;; 2147483647) label=INT_MAX ;; *) label=$arg ;; esac
    want=$(kernel_says "$opt $label: ok -> ")
    case $want in
    2\*max) want=$((2 * $(cat /proc/sys/net/core/"$([ "${cmd##*:}" = sndbuf ] && echo wmem_max || echo rmem_max)"))) ;;
    esac
    expect_eq "ctl ${cmd%%:*}: ${cmd##*:}" "$got" "$want"
done
expect_errno EINVAL ctl "$S_FD" "sndbuf x"
expect_errno EINVAL ctl "$S_FD" "rcvbuf 99999999999"
PY3=$(python3 -c 'import sys; print(sys.executable)')
out=$(U=$U setpriv --reuid=65534 --regid=65534 --clear-groups "$PY3" -c '
import errno, os
U = os.environ["U"]
c = os.open(f"{U}/dgram/clone", os.O_RDWR)
n = os.read(c, 64).decode().strip()
def ctl(cmd):
    try:
        os.write(c, cmd)
        return "OK"
    except OSError as e:
        return errno.errorcode[e.errno]
print(n, ctl(b"sndbufforce 1\n"), ctl(b"rcvbufforce 1\n"), ctl(b"sndbuf 1\n"))
') || fail "the ctl commands as nobody failed"
expect_eq "sndbufforce, rcvbufforce, sndbuf as nobody" "${out#* }" "EPERM EPERM OK"
grep -q "socket ${out%% *}: SO_SNDBUFFORCE without CAP_NET_ADMIN (EPERM)" "$LOG" ||
    fail "no log line for the refused SO_SNDBUFFORCE"

# The send buffer bounds the largest datagram: sndbuf 4096 (8192) takes 8160 bytes.
new_pair D dgram
ctl "$D_FD" "sndbuf 4096"
out=$(py '
w = os.open(f"{U}/sock/{sys.argv[1]}/data", os.O_WRONLY)
print(err(os.write, w, bytes(8160)), err(os.write, w, bytes(8161)))
' "$D_N")
expect_eq "dgram sndbuf 8192: 8160 and 8161 bytes" "$out" "OK EMSGSIZE"

# flags=ctrunc: passed sockets beyond the reader's RLIMIT_NOFILE (counting the ones it
# received and has not opened) are dropped. A record always holds the whole message:
# MSG_TRUNC has no place in it.
new_pair R stream
out=$(py '
import resource
n, m = sys.argv[1], sys.argv[2]
ids = []
for _ in range(6):
    ids.append(os.read(os.open(f"{U}/dgram/clone", os.O_RDWR), 64).decode().strip())
w = os.open(f"{U}/sock/{n}/msg", os.O_WRONLY)
r = os.open(f"{U}/sock/{m}/msg", os.O_RDONLY)
os.write(w, f"len=1 rights={ids[0]}\na".encode())
print(os.read(r, 4096).split(b"\n")[0].decode().replace(ids[0], "X", 1).split("rights=")[0])
os.write(w, b"len=1 rights=" + ",".join(ids).encode() + b"\nb")
resource.setrlimit(resource.RLIMIT_NOFILE, (3, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
head = os.read(r, 4096).split(b"\n")[0].decode()
print(len(head.split("rights=")[1].split(" ")[0].split(",")), head.split(" ")[-1])
' "$R_N" "$R_M")
# The limit (3) counts the unopened socket of the first record too: 2 of 6 arrive.
expect_eq "msg records: rights within and beyond RLIMIT_NOFILE" "$out" "len=1 
2 flags=ctrunc"
