#!/usr/bin/env bash
# Isolation between users on an --allow-other mount: root owns a listener, a dgram
# socket with a secret in its queue and a connected pair with queued data; a process
# running as nobody (65534) then tries everything it should not be able to do:
# - open root's .udsfs/sock/N/{ctl,data,msg,accept,status} for reading or writing, or
#   list .udsfs/sock/N (EACCES), so it cannot read, steal or accept anything; root's
#   queues are intact afterwards;
# - pass root's socket in rights= (EACCES; its own socket passes), forge creds= (EPERM;
#   its own pid:uid:gid pass), collect with `run` > .udsfs/gc (EACCES);
# - connect or send to a node without write permission (EACCES, by ctl, by the
#   .udsfs/connect view and by to= on msg), through a directory without search
#   permission (EACCES), bind in a directory it may not write (EACCES); with write
#   permission granted, connecting works;
# - remove, rename, replace or chmod root's node, or remove root's directory, in the
#   sticky mount root (EPERM); it may remove its own;
# - .udsfs/unix shows nobody exactly what it shows root, in /proc/net/unix's format:
#   bound names only (no peer names, no queue contents, no credentials);
# - hold up root: a connect of nobody's parked (full backlog) through its
#   .udsfs/stream/clone handle must not stop root's commands through root's own clone
#   handles (each must complete within 1 s).
# shellcheck disable=SC2034 # read by lib.sh
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"

command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed to act as another user"
# the interpreter itself (a pyenv shim under /root is not executable by other users)
PY3=$(python3 -c 'import sys; print(sys.executable)')
chmod o+x "$TMP" # mktemp -d made it 0700; other users must reach $MNT inside it
NOBODY=65534
CHECKS=0

# as_nobody CMD...: run CMD as uid/gid 65534 with no supplementary groups.
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
# py_nobody CODE [ARGS...]: python (lib.sh's prelude: err(), M, U) as nobody.
py_nobody() {
    local code=$1
    shift
    as_nobody "$PY3" -c "$PY_PRELUDE
$code" "$@"
}
# check WHAT GOT WANT: expect_eq, counted; check_errno ERRNAME CMD...: expect_errno, counted.
check() {
    expect_eq "$@"
    CHECKS=$((CHECKS + 1))
}
check_errno() {
    expect_errno "$@"
    CHECKS=$((CHECKS + 1))
}

# ---- root's sockets
new_sock S stream
ctl "$S_FD" "bind srv.sock" || fail "bind srv.sock"
ctl "$S_FD" "listen 8" || fail "listen"
expect_eq "mode of root's node srv.sock (umask 022)" "$(stat -c %a "$MNT/srv.sock")" 755
new_sock R dgram
ctl "$R_FD" "bind @rootd" || fail "bind @rootd"
ctl "$R_FD" "passcred on" || fail "passcred on"
new_sock T dgram
ctl "$T_FD" "bind @rootsender" || fail "bind @rootsender"
ctl "$T_FD" "connect @rootd" || fail "connect @rootd"
send "$T" "dgram-secret-7f3a" || fail "send the secret to $R"
new_sock C stream
ctl "$C_FD" "connect srv.sock" || fail "connect srv.sock"
exec {acc}<"$U/sock/$S/accept" || fail "accept on $S"
read -r A <&"$acc"
send "$C" "stream-secret-91c2" || fail "send on $C"
new_sock D dgram
ctl "$D_FD" "bind d.sock" || fail "bind d.sock"
mkdir -m 0700 "$MNT/private"
new_sock P stream
ctl "$P_FD" "bind private/p.sock" || fail "bind private/p.sock"
ctl "$P_FD" "listen" || fail "listen on private/p.sock"
chmod 0777 "$MNT/private/p.sock"
mkdir -m 0755 "$MNT/closed"
expect_status "$R" rcvq_msgs 1
expect_status "$A" rcvq_bytes 18
S_REFS=$(status_of "$S" refs)
ok "root: listener $S at srv.sock, dgram $R at @rootd (1 message queued), $C <-> $A (18 bytes queued), dgram $D at d.sock, listener $P at private/p.sock (dir 0700)"
say "as root, .udsfs/unix:"
sed 's/^/    /' "$U/unix"

# ---- 1. root's per-socket files
for n in "$S" "$R" "$A"; do
    for f in ctl data msg accept status; do
        got=$(py_nobody 'print(err(os.open, sys.argv[1], os.O_RDONLY), err(os.open, sys.argv[1], os.O_WRONLY), err(os.open, sys.argv[1], os.O_RDWR | os.O_NONBLOCK))' "$U/sock/$n/$f")
        check "nobody opening root's .udsfs/sock/$n/$f (read, write, read-write nonblocking)" "$got" "EACCES EACCES EACCES"
    done
    check "nobody listing root's .udsfs/sock/$n" "$(py_nobody 'print(err(os.listdir, sys.argv[1]))' "$U/sock/$n")" EACCES
done
check_errno EACCES as_nobody cat "$U/sock/$R/data"
check_errno EACCES as_nobody dd if="$U/sock/$A/msg" bs=4096 count=1 status=none
check_errno EACCES as_nobody cat "$U/sock/$S/status"
# shellcheck disable=SC2016 # expanded by the inner bash
check_errno EACCES as_nobody bash -c 'echo "connect @x" >"$1"' bash "$U/sock/$S/ctl"
expect_status "$R" rcvq_msgs 1
expect_status "$A" rcvq_bytes 18
check "what root reads from $A (its queue untouched)" "$(recv "$A")" "stream-secret-91c2"
exec {rmsg}<"$U/sock/$R/msg"
recv_record "$rmsg" || fail "read the record at $R"
check "the record root reads at $R (untouched)" "$REC_DATA" "dgram-secret-7f3a"
say "  (its header: $REC_HEADER)"

# ---- 2. rights=, creds=, gc
# nobody's own dgram socket, sending to root's @rootd (abstract names have no
# permission checks, as in Linux)
out=$(py_nobody '
c = os.open(U + "/dgram/clone", os.O_RDWR)
n = int(os.read(c, 64))
m = os.open(f"{U}/sock/{n}/msg", os.O_RDWR)
def rec(hdr):
    return err(os.write, m, hdr.encode() + b"\nx")
root_sock, pid = sys.argv[1], os.getpid()
print("root-rights", rec(f"len=1 to=@rootd rights={root_sock}"))
print("root-rights-mixed", rec(f"len=1 to=@rootd rights={n},{root_sock}"))
print("no-such-socket", rec("len=1 to=@rootd rights=999999"))
print("creds-root", rec(f"len=1 to=@rootd creds={pid}:0:0"))
print("creds-other-pid", rec(f"len=1 to=@rootd creds=1:{os.getuid()}:{os.getgid()}"))
print("creds-root-gid", rec(f"len=1 to=@rootd creds={pid}:{os.getuid()}:0"))
print("creds-own", rec(f"len=1 to=@rootd creds={pid}:{os.getuid()}:{os.getgid()}"))
print("own-rights", rec(f"len=1 to=@rootd rights={n}"))
print("gc-run", err(lambda: os.write(os.open(U + "/gc", os.O_WRONLY), b"run")))
print("gc-read", err(lambda: os.read(os.open(U + "/gc", os.O_RDONLY), 4096)))
print("pid", pid)
' "$S")
say "$out" | sed 's/^/    nobody: /'
field() { sed -n "s/^$1 //p" <<<"$out"; }
check "nobody passing root's listener $S in rights=" "$(field root-rights)" EACCES
check "nobody passing its own socket and root's $S in one rights=" "$(field root-rights-mixed)" EACCES
check "nobody passing a socket that does not exist" "$(field no-such-socket)" EBADF
check "nobody sending creds= with uid 0" "$(field creds-root)" EPERM
check "nobody sending creds= with another process's pid" "$(field creds-other-pid)" EPERM
check "nobody sending creds= with gid 0" "$(field creds-root-gid)" EPERM
check "nobody sending its own creds= (control)" "$(field creds-own)" OK
check "nobody passing its own socket (control)" "$(field own-rights)" OK
check "nobody writing run to .udsfs/gc (0644 root)" "$(field gc-run)" EACCES
check "nobody reading .udsfs/gc" "$(field gc-read)" OK
# only the two control messages arrived: what was refused queued nothing
expect_status "$R" rcvq_msgs 2
recv_record "$rmsg" || fail "read a record at $R"
check "creds= of nobody's own-creds record" "$REC_CREDS" "$(field pid):$NOBODY:$NOBODY"
recv_record "$rmsg" || fail "read a record at $R"
[[ $REC_RIGHTS =~ ^[0-9]+$ ]] || fail "nobody's own socket did not arrive in rights=: $REC_HEADER"
ok "root received nobody's own socket as $REC_RIGHTS; nothing of root's own went anywhere"
check "refs of root's listener $S (nobody's attempts took none)" "$(status_of "$S" refs)" "$S_REFS"
check "inflight of root's listener $S" "$(status_of "$S" inflight)" 0

# ---- 3. permission to connect, send and bind
conn_ctl='
c = os.open(U + "/" + sys.argv[1] + "/clone", os.O_RDWR)
print(err(os.write, c, ("connect " + sys.argv[2] + "\n").encode()))
'
conn_view='print(err(os.open, U + "/connect/" + sys.argv[1], os.O_RDWR | os.O_NONBLOCK))'
check "nobody: connect srv.sock (0755 root) by ctl" "$(py_nobody "$conn_ctl" stream srv.sock)" EACCES
check "nobody: open .udsfs/connect/srv.sock (0755 root)" "$(py_nobody "$conn_view" srv.sock)" EACCES
check "nobody: connect d.sock (dgram, 0755 root) by ctl" "$(py_nobody "$conn_ctl" dgram d.sock)" EACCES
check "nobody: sendto d.sock (0755 root) with to= on msg" "$(py_nobody '
c = os.open(U + "/dgram/clone", os.O_RDWR)
n = int(os.read(c, 64))
print(err(os.write, os.open(f"{U}/sock/{n}/msg", os.O_WRONLY), b"len=2 to=d.sock\nhi"))
')" EACCES
expect_status "$D" rcvq_msgs 0
check "nobody: connect private/p.sock (0777 node in a 0700 directory)" "$(py_nobody "$conn_ctl" stream private/p.sock)" EACCES
check "nobody: open .udsfs/connect/private/p.sock" "$(py_nobody "$conn_view" private/p.sock)" EACCES
check "nobody: bind closed/mine.sock (0755 root directory)" "$(py_nobody '
c = os.open(U + "/stream/clone", os.O_RDWR)
print(err(os.write, c, b"bind closed/mine.sock\n"))
')" EACCES
[ ! -e "$MNT/closed/mine.sock" ] || fail "nobody's refused bind left closed/mine.sock behind"
check "what connected to $S so far (accept queue)" "$(status_of "$S" rcvq_msgs)" 0
chmod o+w "$MNT/srv.sock" "$MNT/d.sock"
ok "chmod o+w srv.sock d.sock"
check "nobody: connect srv.sock (0757) by ctl" "$(py_nobody "$conn_ctl" stream srv.sock)" OK
check "nobody: open .udsfs/connect/srv.sock (0757)" "$(py_nobody "$conn_view" srv.sock)" OK
check "nobody: connect d.sock (0757) by ctl" "$(py_nobody "$conn_ctl" dgram d.sock)" OK
chmod o+x "$MNT/private"
check "nobody: connect private/p.sock once the directory is 0701" "$(py_nobody "$conn_ctl" stream private/p.sock)" OK

# ---- 4. the sticky mount root
check "mode of the mount root" "$(stat -c %a "$MNT")" 1777
tree_ops='
M_ = M + "/"
print("rm", err(os.unlink, M_ + "srv.sock"))
print("mv", err(os.rename, M_ + "srv.sock", M_ + "mine.sock"))
print("mv-into-dir", err(os.rename, M_ + "srv.sock", M_ + "nb/srv.sock"))
print("chmod", err(os.chmod, M_ + "srv.sock", 0o777))
print("chown", err(os.chown, M_ + "srv.sock", os.getuid(), os.getgid()))
print("rmdir", err(os.rmdir, M_ + "closed"))
print("mv-dir", err(os.rename, M_ + "closed", M_ + "mine"))
# its own node, moved over root s: the target is root s, in a sticky directory
c = os.open(U + "/dgram/clone", os.O_RDWR)
print("bind-own", err(os.write, c, b"bind own.sock\n"))
print("replace", err(os.rename, M_ + "own.sock", M_ + "srv.sock"))
print("rm-own", err(os.unlink, M_ + "own.sock"))
'
mkdir -m 0777 "$MNT/nb"
out=$(py_nobody "$tree_ops")
say "$out" | sed 's/^/    nobody: /'
check "nobody: rm root's srv.sock in the sticky root" "$(field rm)" EPERM
check "nobody: mv root's srv.sock" "$(field mv)" EPERM
check "nobody: mv root's srv.sock into a 0777 directory" "$(field mv-into-dir)" EPERM
check "nobody: chmod root's srv.sock" "$(field chmod)" EPERM
check "nobody: chown root's srv.sock to itself" "$(field chown)" EPERM
check "nobody: rmdir root's empty directory closed" "$(field rmdir)" EPERM
check "nobody: mv root's directory closed" "$(field mv-dir)" EPERM
check "nobody: bind own.sock in the root (control)" "$(field bind-own)" OK
check "nobody: mv own.sock over root's srv.sock" "$(field replace)" EPERM
check "nobody: rm its own own.sock (control)" "$(field rm-own)" OK
check "root's srv.sock after all that" "$(stat -c '%F %U %a' "$MNT/srv.sock")" "socket root 757"
[ -d "$MNT/closed" ] || fail "root's directory closed is gone"
exec {probe}<>"$U/connect/srv.sock" || fail "root cannot connect to srv.sock any more"
close_fd "$probe"
ok "srv.sock is still root's and still connectable"

# ---- 5. .udsfs/unix: the same for everyone, and only what /proc/net/unix shows
# (nobody's processes are gone; wait until their sockets' releases are through)
settled() { [ "$(($(wc -l <"$U/unix") - 1))" == "$(sed -n 's/^sockets=//p' "$U/gc")" ]; }
start=$(now_ms)
until settled && sleep 0.2 && settled; do
    [ $(($(now_ms) - start)) -le 3000 ] || fail ".udsfs/unix rows and .udsfs/gc sockets= still disagree after 3 s"
done
as_root=$(cat "$U/unix")
as_nb=$(as_nobody cat "$U/unix") || fail "nobody cannot read .udsfs/unix"
[ "$as_root" == "$as_nb" ] || fail ".udsfs/unix differs between root and nobody:
root:
$as_root
nobody:
$as_nb"
ok ".udsfs/unix reads the same for nobody as for root ($(($(wc -l <<<"$as_nb") - 1)) sockets)"
check ".udsfs/unix header" "$(head -n 1 <<<"$as_nb")" "$(head -n 1 /proc/net/unix)"
bad=$(tail -n +2 <<<"$as_nb" | grep -Ev '^[0-9a-f]{16}: [0-9A-F]{8} [0-9A-F]{8} [0-9A-F]{8} [0-9A-F]{4} [0-9A-F]{2} +[0-9]+( [^ ].*)?$' || true)
[ -z "$bad" ] || fail ".udsfs/unix rows not in /proc/net/unix's format: $bad"
ok "every row is in /proc/net/unix's format"
names=$(tail -n +2 <<<"$as_nb" | awk 'NF > 7 { print $8 }' | sort -u | tr '\n' ' ')
# bound names; the accepted socket shows its listener's name, as in Linux
check "names .udsfs/unix shows" "$names" "$(printf '%s\n' @rootd @rootsender d.sock private/p.sock srv.sock | sort | tr '\n' ' ')"
for secret in dgram-secret stream-secret 65534; do
    ! grep -q -- "$secret" <<<"$as_nb" || fail ".udsfs/unix shows '$secret': $as_nb"
done
ok ".udsfs/unix shows no queue contents and no credentials"
check "rows of .udsfs/unix (one per socket)" "$(($(wc -l <<<"$as_nb") - 1))" "$(sed -n 's/^sockets=//p' "$U/gc")"
check "nobody listing .udsfs/abstract (the @names /proc/net/unix shows)" "$(as_nobody ls "$U/abstract" | tr '\n' ' ')" "rootd rootsender "

# ---- 6. nobody parked in the mount holds up no one else
# nobody's own listener with listen 0 and one pending connection; then a connect
# through nobody's .udsfs/stream/clone handle parks. Root's commands through its own
# new clone handles, and its opens, must go on.
# (setpriv execs python: $! is the parked process itself)
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$PY3" -c "$PY_PRELUDE"'
l = os.open(U + "/stream/clone", os.O_RDWR)
os.read(l, 64)
os.write(l, b"bind nb-full.ls\nlisten 0\n")
p = os.open(U + "/connect/nb-full.ls", os.O_RDWR | os.O_NONBLOCK)
c = os.open(U + "/stream/clone", os.O_RDWR)
os.write(c, b"connect nb-full.ls\n")  # parks: the backlog is full
' 2>"$TMP/parker.err" &
parker=$!
start=$(now_ms)
until [ "$(cat "/proc/$parker/wchan" 2>/dev/null)" == request_wait_answer ]; do
    [ $(($(now_ms) - start)) -le 5000 ] || fail "nobody's connect to nb-full.ls did not park: $(cat "$TMP/parker.err")"
    sleep 0.005
done
ok "nobody's connect through its .udsfs/stream/clone handle is parked (pid $parker)"
for t in dgram seqpacket stream; do
    (exec {c}<>"$U/$t/clone" && printf 'bind\n' >&"$c") &
    w=$!
    if ! ended_within "$w" 1000; then
        st=$(sed 's/.*) \(.\).*/\1/' "/proc/$w/stat" 2>/dev/null)
        wc=$(cat "/proc/$w/wchan" 2>/dev/null)
        kill -KILL "$w" 2>/dev/null
        if ended_within "$w" 1000; then killed="SIGKILL ended it"; else killed="SIGKILL did not end it either"; fi
        kill -KILL "$parker"
        fail "root's autobind through its own new .udsfs/$t/clone handle is held up for 1 s by nobody's parked connect (state $st, wchan $wc; $killed): one user's blocked connect blocks every other user's commands on that clone file"
    fi
    reap "$w"
    [ "$REAPED_STATUS" -eq 0 ] || fail "root's autobind through .udsfs/$t/clone failed"
    CHECKS=$((CHECKS + 1))
    ok "root's command through its own .udsfs/$t/clone handle took $ELAPSED_MS ms while nobody's connect was parked"
done
kill -KILL "$parker"
ended_within "$parker" 1000 || fail "nobody's parked connect did not end within 1 s of SIGKILL"

say "isolation: $CHECKS checks as another user passed"
