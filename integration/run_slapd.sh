#!/usr/bin/env bash
# run_slapd.sh: OpenLDAP's slapd (its own slapd.conf and mdb database in a scratch
# directory; the package's service never runs) listening only on ldapi:// (a unix socket,
# the path URL-encoded), with the ldap-utils clients: ldapadd of a tree (simple bind as
# the rootdn), ldapsearch, ldapwhoami -Y EXTERNAL, which slapd answers from the
# connection's SO_PEERCRED (gidNumber=G+uidNumber=U,cn=peercred,cn=external,cn=auth), as
# root, as uid 61001 and as uid 61001 with gid 61002; ACLs that grant writes by those
# identities (root's may write below ou=shared, 61001:61001's its own entry: each of the
# others refused, LDAP result 50); a 200,000-byte jpegPhoto added and read back (its
# length and md5); 20 adds 4 at a time and 24 whoamis of four users 6 at a time; a raw
# client (integration/ldap_held.py: bind, WhoAmI, unbind in BER); an anonymous
# 300,000-byte add, over slapd's limit for anonymous requests (the connection dropped);
# SIGTERM ends slapd and it removes its socket. Four runs: on kernel sockets, then slapd
# and every client through `udsfs run --mount $MNT` with the socket in the mount (one
# whoami by a `udsfs run` that uid 61001 runs itself), through `udsfs run --route DIR`
# with the socket outside the mount, and through `--front seccomp` (the supervisor, no
# library): the same answers each time, the listener a udsfs socket (in .udsfs/unix, not
# in /proc/net/unix), and in the mount the raw client's connection two new udsfs sockets
# (lane=direct on a lanes mount, none on the lanes_off pass: below).
UDSFS_MOUNT_ARGS=(--allow-other) # the clients run as uid 61001 too
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd slapd slapd
need_cmd ldapadd ldap-utils
need_cmd ldapsearch ldap-utils
need_cmd ldapwhoami ldap-utils
need_cmd ldapmodify ldap-utils
need_cmd setpriv util-linux
[ -e /usr/lib/ldap/back_mdb.so ] || fail "slapd's mdb backend is missing (/usr/lib/ldap/back_mdb.so, package slapd)"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"

# uid 61001 reaches the sockets below $TMP and the raw client there.
chmod 755 "$TMP"
cp "$LIB_DIR/ldap_held.py" "$LIB_DIR/udsfs_socks.py" "$TMP/"
head -c 200000 /dev/urandom >"$TMP/big.bin"
head -c 300000 /dev/urandom >"$TMP/big3.bin"
BIG_MD5=$(md5sum <"$TMP/big.bin" | cut -d' ' -f1)
BASE=dc=example,dc=org
peer_dn() { echo "gidNumber=$2+uidNumber=$1,cn=peercred,cn=external,cn=auth"; }

# The tree, added by the rootdn.
cat >"$TMP/tree.ldif" <<EOF2
dn: $BASE
objectClass: dcObject
objectClass: organization
o: Example
dc: example

dn: ou=people,$BASE
objectClass: organizationalUnit
ou: people

dn: ou=shared,$BASE
objectClass: organizationalUnit
ou: shared
description: before

dn: uid=u61001,ou=people,$BASE
objectClass: inetOrgPerson
objectClass: posixAccount
uid: u61001
cn: User 61001
sn: One
uidNumber: 61001
gidNumber: 61001
homeDirectory: /home/u61001

dn: uid=u61002,ou=people,$BASE
objectClass: inetOrgPerson
objectClass: posixAccount
uid: u61002
cn: User 61002
sn: Two
uidNumber: 61002
gidNumber: 61002
homeDirectory: /home/u61002
EOF2
cat >"$TMP/big.ldif" <<EOF2
dn: cn=big,ou=shared,$BASE
objectClass: inetOrgPerson
cn: big
sn: Big
jpegPhoto:< file://$TMP/big.bin
EOF2
sed "s/cn=big,/cn=big3,/; s/^cn: big/cn: big3/; s/big.bin/big3.bin/" "$TMP/big.ldif" >"$TMP/big3.ldif"
# modify_ldif DN TEXT: an LDIF replacing DN's description with TEXT.
modify_ldif() { printf 'dn: %s\nchangetype: modify\nreplace: description\ndescription: %s\n' "$1" "$2"; }
# The jpegPhoto of an LDIF on stdin (ldif-wrap=no): its length and md5.
cat >"$TMP/photo.py" <<'EOF2'
import base64, hashlib, sys
for line in sys.stdin:
    if line.startswith("jpegPhoto:: "):
        v = base64.b64decode(line[12:].strip())
        print("jpegPhoto", len(v), "bytes, md5", hashlib.md5(v).hexdigest())
EOF2

# one_run NAME MODE DIR [RUN OPTIONS...]: slapd with its socket DIR/ldapi on MODE's
# sockets (udsfs: each program through `udsfs run` with the RUN OPTIONS, --route or
# --front); the answers go to $TMP/NAME.out.
one_run() {
    local name=$1 mode=$2 dir=$3 d=$TMP/slapd-$1 out=$TMP/$1.out
    run_on "$mode" "${@:4}"
    mkdir -p "$d/db" "$dir"
    local sock=$dir/ldapi url
    url=ldapi://$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$sock")
    cat >"$d/slapd.conf" <<EOF2
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile $d/slapd.pid
argsfile $d/slapd.args
database mdb
suffix "$BASE"
rootdn "cn=admin,$BASE"
rootpw secret
directory $d/db
maxsize 104857600
access to dn.subtree="ou=shared,$BASE"
    by dn.exact="$(peer_dn 0 0)" write
    by * read
access to dn.exact="uid=u61001,ou=people,$BASE"
    by dn.exact="$(peer_dn 61001 61001)" write
    by * read
access to * by * read
EOF2
    # -d 0: in the foreground, no debug output.
    run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- slapd -d 0 -f "$d/slapd.conf" -h "$url"
    start_bg SLAPD "${RUN_CMD[@]}" >"$d/slapd.out" 2>&1
    wait_listening "$sock"
    expect_socket_home "$sock"
    # slapd binds its socket, opens the database, then listens: until then a connect is
    # refused (on the kernel too), so wait for an answer (20 s at most).
    local i up=
    for i in $(seq 1 200); do
        v ldapwhoami -x -H "$url" >/dev/null 2>&1 && up=1 && break
        sleep 0.1
    done
    [ -n "$up" ] || fail "$name: slapd did not answer on $url in 20 s: $(tail -5 "$d/slapd.out")"
    as61001=(setpriv --reuid=61001 --regid=61001 --clear-groups)
    as61001g=(setpriv --reuid=61001 --regid=61002 --clear-groups)
    local admin=(-x -H "$url" -D "cn=admin,$BASE" -w secret) ext=(-Y EXTERNAL -Q -H "$url")
    {
        echo "socket: $(stat -L -c '%A %U:%G' "$sock")"
        ask "ldapadd tree" ldapadd "${admin[@]}" -f "$TMP/tree.ldif"
        ask "ldapsearch anonymous" ldapsearch -x -H "$url" -LLL -b "$BASE" '(objectClass=*)' dn
        ask "ldapsearch uidNumber" ldapsearch -x -H "$url" -LLL -b "ou=people,$BASE" '(uidNumber=61002)' cn uid gidNumber
        # The identities slapd sees: SO_PEERCRED's uid and gid.
        ask "whoami root" ldapwhoami "${ext[@]}"
        ask "whoami 61001" "${as61001[@]}" ldapwhoami "${ext[@]}"
        ask "whoami 61001:61002" "${as61001g[@]}" ldapwhoami "${ext[@]}"
        # uid 61001:61002 running `udsfs run` itself (the supervisor too, with seccomp).
        run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- timeout 20 ldapwhoami "${ext[@]}"
        echo "whoami 61001:61002 of udsfs run's own: $("${as61001g[@]}" "${RUN_CMD[@]}" 2>&1 || echo "exit $?")"
        ask "whoami simple" ldapwhoami "${admin[@]}"
        ask "whoami anonymous" ldapwhoami -x -H "$url"
        # The ACLs by those identities.
        modify_ldif "ou=shared,$BASE" "by root" >"$d/m1.ldif"
        modify_ldif "uid=u61001,ou=people,$BASE" "by 61001" >"$d/m2.ldif"
        ask "shared by root" ldapmodify "${ext[@]}" -f "$d/m1.ldif"
        ask "shared by 61001" "${as61001[@]}" ldapmodify "${ext[@]}" -f "$d/m1.ldif"
        ask "u61001 by 61001" "${as61001[@]}" ldapmodify "${ext[@]}" -f "$d/m2.ldif"
        ask "u61001 by 61001:61002" "${as61001g[@]}" ldapmodify "${ext[@]}" -f "$d/m2.ldif"
        ask "u61001 by root" ldapmodify "${ext[@]}" -f "$d/m2.ldif"
        ask "u61001 anonymous" ldapmodify -x -H "$url" -f "$d/m2.ldif"
        ask "descriptions" ldapsearch "${ext[@]}" -LLL -b "$BASE" '(description=*)' description
        # 200,000 bytes up (root's identity may write below ou=shared) and down.
        ask "big add" ldapadd "${ext[@]}" -f "$TMP/big.ldif"
        v ldapsearch "${ext[@]}" -LLL -o ldif-wrap=no -b "cn=big,ou=shared,$BASE" jpegPhoto |
            python3 "$TMP/photo.py"
        # An anonymous 300,000-byte add: over sockbuf_max_incoming (262143 bytes), slapd
        # closes the connection with the request unread (the client: ECONNRESET, -1).
        ask "big anonymous add" ldapadd -x -H "$url" -f "$TMP/big3.ldif"
        # 20 entries added 4 at a time, each by its own ldapadd as root's identity.
        run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- timeout 20 ldapadd "${ext[@]}"
        seq 1 20 | xargs -P 4 -I{} bash -c 'printf "dn: cn=c{},ou=shared,%s\nobjectClass: device\ncn: c{}\n" "$0" |
            "${@}" >/dev/null 2>&1 && echo added || echo "ldapadd exit $?"' "$BASE" "${RUN_CMD[@]}" | sort | uniq -c | sed 's/^ */many: /'
        echo "devices: $(v ldapsearch "${ext[@]}" -LLL -b "ou=shared,$BASE" '(objectClass=device)' dn | grep -c '^dn:')"
        # 24 whoamis 6 at a time, as four users in turn: each sees its own identity.
        run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- timeout 20 ldapwhoami "${ext[@]}"
        for i in $(seq 1 24); do echo $((61000 + i % 4)); done |
            xargs -P 6 -I{} bash -c 'u={}; [ "$u" = 61000 ] && u=0; setpriv --reuid=$u --regid=$u --clear-groups "$@" 2>&1 ||
                echo "ldapwhoami exit $?"' _ "${RUN_CMD[@]}" | sort | uniq -c | sed 's/^ */whoamis: /'
        # The raw client, as root (in the mount: its connection's lanes in $d/lanes) and
        # as 61001:61002.
        local guard=()
        [ "$name" != udsfs ] || guard=("$U" "$LANE" "$d/lanes")
        v /usr/bin/python3 "$TMP/ldap_held.py" "$sock" ${guard[@]+"${guard[@]}"} 2>&1 || echo "ldap_held.py exit $?"
        v "${as61001g[@]}" /usr/bin/python3 "$TMP/ldap_held.py" "$sock" 2>&1 || echo "ldap_held.py exit $?"
        kill -TERM "$SLAPD"
    } >"$out" 2>&1 || true
    exit_status "$out" slapd "$SLAPD" 15000 "$d/slapd.out"
    name_gone "$sock" >>"$out"
    show_answers "$name" "$out" "$d/slapd.out"
}

# same_as_kernel_run NAME: run NAME's answers are the kernel run's.
same_as_kernel_run() {
    same_answers --run "$1" slapd tail -n 20 "$TMP/slapd-$1/slapd.out"
    ok "slapd and its clients, $1 run: the same $(wc -l <"$TMP/$1.out") answers as on kernel sockets"
}

# The raw client's connection in the mount: lane=direct, or none on the lanes_off pass's
# --no-lanes mount (below).
LANE=direct
[ "${UDSFS_LANES:-}" != off ] || LANE=none

one_run kernel kernel "$TMP/k"
# slapd itself died at its SIGTERM once in a CI run on kernel sockets (status 139, no
# udsfs in that run): the kernel's answers are the oracle, so such a run is made once
# more, said; a second such death fails below.
if ! grep -qx 'slapd exit status: 0' "$TMP/kernel.out"; then
    say "the kernel run's $(grep -m1 'slapd exit status' "$TMP/kernel.out"): the kernel run once more"
    rm -rf "$TMP/slapd-kernel" "$TMP/k"
    one_run kernel kernel "$TMP/k"
fi
kernel_said 'socket: srwxrwxrwx root:root' "the kernel run's ldapi socket is not 0777"
kernel_said 'ldapadd tree: exit 0' "the kernel run's ldapadd failed"
kernel_said "dn:$(peer_dn 0 0)" "the kernel run's root is not root's peercred identity"
kernel_said "dn:$(peer_dn 61001 61001)" "the kernel run's uid 61001 is not its peercred identity"
kernel_said "dn:$(peer_dn 61001 61002)" "the kernel run's 61001:61002 is not its peercred identity"
kernel_said "whoami 61001:61002 of udsfs run's own: dn:$(peer_dn 61001 61002)" "the kernel run's last 61001:61002 whoami is not its identity"
kernel_said 'shared by root: exit 0' "the kernel run's root identity could not write ou=shared"
kernel_said 'shared by 61001: exit 50' "the kernel run's 61001 identity was not refused ou=shared (50)"
kernel_said 'u61001 by 61001: exit 0' "the kernel run's 61001 could not write its own entry"
kernel_said 'u61001 by 61001:61002: exit 50' "the kernel run's 61001:61002 was not refused u61001 (50)"
kernel_said "jpegPhoto 200000 bytes, md5 $BIG_MD5" "the kernel run's 200,000-byte jpegPhoto did not come back whole"
kernel_said "ldap_add: Can't contact LDAP server (-1)" "the kernel run's anonymous 300,000-byte add was not cut off"
kernel_said 'many: 20 added' "the kernel run's 20 concurrent adds did not all succeed"
kernel_said 'whoamis: *6 dn:gidNumber=61003+uidNumber=61003,cn=peercred,cn=external,cn=auth' "the kernel run's concurrent whoamis are not 6 per user"
kernel_said "raw whoami: op 0x78 result 0 dn:$(peer_dn 61001 61002)" "the kernel run's raw client did not get its identity"
kernel_said 'slapd exit status: 0' "slapd did not exit 0 on SIGTERM on the kernel"
kernel_said 'ldapi gone' "the kernel run's slapd did not remove its socket"

one_run udsfs udsfs "$MNT/slapd"
same_as_kernel_run udsfs
# Its two ends are udsfs sockets, laned on a lanes mount. The lane is asked and made when
# slapd's worker thread reads the bind, and the grant wakes the connection's registration
# in the epoll set its listener thread sleeps on in the kernel: that thread's epoll_wait
# polls the data file after the worker's claim, which took the lane down for good in
# about 2 connections of 3 here; now that poll is answered "ready" once and the library's
# wrapper moves the registration onto the lane's eventfd (src/engine/lane.rs
# `lane_polled`; docs/LANE.md "Programs that poll").
held=$(cat "$TMP/slapd-udsfs/lanes")
[ "$held" == "held: 2 new sockets, lanes $LANE" ] ||
    fail "the raw client's connection to slapd in the mount: want 2 new udsfs sockets, lane=$LANE: $held"
ok "the raw client's connection to slapd in the mount: $held"
one_run route udsfs "$TMP/r/run" --route "$TMP/r"
same_as_kernel_run route
one_run seccomp udsfs "$MNT/seccomp" --front seccomp
same_as_kernel_run seccomp
