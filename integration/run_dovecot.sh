#!/usr/bin/env bash
# run_dovecot.sh: Dovecot (packages dovecot-core, dovecot-imapd; the package's service
# never runs: its own dovecot.conf in a scratch directory, `ssl = no`, a passwd-file
# passdb and userdb with user tuser (uid 61001), maildir below the scratch directory, no
# inet listener). Its master binds every service's unix listeners and passes them to the
# services it forks (auth, anvil, log, config, stats, imap-login as dovenull, imap as
# tuser, doveadm, ...); imap-login hands each logged-in client's connection to an imap
# process (SCM_RIGHTS through the master's login socket); auth answers userdb lookups on
# its 0666 auth-userdb socket only for the peer whose SO_PEERCRED uid is the user's.
# Clients: doveadm (who, auth test, user as root, uid 61001 and uid 61002 (refused by
# that uid check), mailbox create, save, fetch, search, mailbox list and status through
# the doveadm-server socket) and IMAP sessions over a unix listener (integration/
# imap_unix.py: LOGIN refused and accepted, CREATE, SELECT, APPEND of a 300,000-byte
# message read back, FETCH, SEARCH, `doveadm who` while held, 8 sessions at once, a
# session kicked by `doveadm kick`); `doveadm stop` ends it: exit 0, no process left.
# Three runs: on kernel sockets, then dovecot and every client through `udsfs run` with
# its base_dir a `--route` (it keeps master.pid and FIFOs there beside the sockets) and
# the IMAP and doveadm-server listeners in the mount, then the same under `--front
# seccomp`: the same answers each time (volatile parts: pids, times, UIDVALIDITY, GUIDs
# written as words), every listener a udsfs socket.
UDSFS_MOUNT_ARGS=(--allow-other) # dovecot's services run as dovecot, dovenull and 61001
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd dovecot dovecot-core doveadm dovecot-core setpriv util-linux
[ -x /usr/lib/dovecot/imap ] || fail "Dovecot's imap is missing (/usr/lib/dovecot/imap, package dovecot-imapd)"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
id dovecot >/dev/null 2>&1 && id dovenull >/dev/null 2>&1 ||
    fail "users dovecot and dovenull are missing (package dovecot-core makes them)"

# the services and uid 61001 reach the files below $TMP.
chmod 755 "$TMP"
cp "$LIB_DIR/imap_unix.py" "$TMP/"

# one_run NAME MODE DIR [RUN OPTIONS...]: dovecot with base_dir $TMP/dovecot-NAME/run
# and its IMAP and doveadm-server listeners in DIR, on MODE's sockets (udsfs: each
# program through `udsfs run` with the RUN OPTIONS and base_dir a --route); the answers
# go to $TMP/NAME.out.
one_run() {
    local name=$1 mode=$2 dir=$3 d=$TMP/dovecot-$1 out=$TMP/$1.out
    run_on "$mode" "${@:4}"
    [ "$mode" == kernel ] || RUN_OPTS+=(--route "$d/run")
    mkdir -p "$d/run" "$d/state" "$d/mail" "$dir"
    chown 61001:61001 "$d/mail"
    printf 'tuser:{PLAIN}tpass:61001:61001::%s/mail/tuser::\n' "$d" >"$d/passwd"
    cat >"$d/dovecot.conf" <<EOF2
base_dir = $d/run
state_dir = $d/state
log_path = $d/dovecot.log
ssl = no
protocols = imap
disable_plaintext_auth = no
auth_mechanisms = plain
auth_failure_delay = 0
first_valid_uid = 1000
passdb {
  driver = passwd-file
  args = scheme=PLAIN $d/passwd
}
userdb {
  driver = passwd-file
  args = $d/passwd
}
mail_location = maildir:~/Maildir
service imap-login {
  inet_listener imap {
    port = 0
  }
  inet_listener imaps {
    port = 0
  }
  unix_listener $dir/imap {
    mode = 0666
  }
}
service doveadm {
  unix_listener $dir/doveadm {
    mode = 0600
  }
}
EOF2
    local conf=(-c "$d/dovecot.conf")
    # -F: in the foreground, the master the process `udsfs run` started.
    run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- dovecot -F "${conf[@]}"
    start_bg DOVECOT "${RUN_CMD[@]}" >"$d/dovecot.out" 2>&1
    # the master binds every listener before it starts a service, in its own order.
    wait_listening "$dir/imap"
    wait_listening "$d/run/auth-userdb"
    expect_socket_home "$dir/imap"
    expect_socket_home "$d/run/auth-userdb"
    local as61001=(setpriv --reuid=61001 --regid=61001 --clear-groups)
    local as61002=(setpriv --reuid=61002 --regid=61002 --clear-groups)
    {
        echo "imap socket: $(stat -L -c '%A %U:%G' "$dir/imap")"
        echo "auth-userdb socket: $(stat -L -c '%A %U:%G' "$d/run/auth-userdb")"
        ask "who" doveadm "${conf[@]}" who
        ask "auth test" doveadm "${conf[@]}" auth test tuser tpass
        ask "auth test wrong" doveadm "${conf[@]}" auth test tuser wrong
        # auth-userdb is 0666: auth answers a lookup only for the user whose uid is the
        # peer's (SO_PEERCRED), root excepted.
        ask "user as root" doveadm "${conf[@]}" user tuser
        ask "user as 61001" "${as61001[@]}" doveadm "${conf[@]}" user tuser
        ask "user as 61002" "${as61002[@]}" doveadm "${conf[@]}" user tuser
        ask "mailbox create" doveadm "${conf[@]}" mailbox create -u tuser Work
        printf 'Subject: saved\n\nsaved by doveadm\n' |
            v doveadm "${conf[@]}" save -u tuser -m Work 2>&1 || echo "save: exit $?"
        ask "fetch" doveadm "${conf[@]}" fetch -u tuser 'hdr.subject body' mailbox Work all
        ask "search" doveadm "${conf[@]}" search -u tuser mailbox Work ALL
        # Through the doveadm server (a doveadm service process, root, over $dir/doveadm).
        ask "server mailbox list" doveadm "${conf[@]}" mailbox list -S "$dir/doveadm" -u tuser
        ask "server mailbox status" doveadm "${conf[@]}" mailbox status -S "$dir/doveadm" -u tuser messages Work
        v /usr/bin/python3 "$TMP/imap_unix.py" "$dir/imap" tuser tpass doveadm "${conf[@]}" 2>&1 ||
            echo "imap_unix.py: exit $?"
        ask "mailbox status" doveadm "${conf[@]}" mailbox status -u tuser 'messages unseen' Lists
        echo "auth refused uid 61002: $(grep -c "userdb uid (61001) doesn't match peer uid (61002)" "$d/dovecot.log")"
        echo "imap logins: $(grep -c 'imap-login: Info: Login: user=<tuser>, method=PLAIN' "$d/dovecot.log")"
        ask "stop" doveadm "${conf[@]}" stop
    } 2>&1 | sed -e "s#$d#D#g; s#$dir#S#g" -e 's/<[0-9]\+>/<PID>/g; s/\b[0-9a-f]\{32\}\b/GUID/g' >"$out" || true
    exit_status "$out" dovecot "$DOVECOT" 15000 "$d/dovecot.out"
    # every process of dovecot's session gone (log and stats end after the master).
    session_left "$DOVECOT" 10 >>"$out"
    show_answers "$name" "$out" "$d/dovecot.out" "$d/dovecot.log"
}

# same_as_kernel_run NAME: run NAME's answers are the kernel run's.
same_as_kernel_run() {
    same_answers --run "$1" dovecot tail -n 20 "$TMP/dovecot-$1/dovecot.log"
    ok "dovecot and its clients, $1 run: the same $(wc -l <"$TMP/$1.out") answers as on kernel sockets"
}

one_run kernel kernel "$TMP/k"
kernel_said 'who: exit 0' "the kernel run's doveadm who failed"
kernel_said 'passdb: tuser auth succeeded' "the kernel run's auth test failed"
kernel_said 'auth test wrong: exit 77' "the kernel run's auth test with a wrong password did not fail with 77"
kernel_said 'user as 61001: exit 0' "the kernel run's uid 61001 could not look itself up"
kernel_said 'user as 61002: exit 75' "the kernel run's uid 61002 was not refused tuser's lookup (75)"
kernel_said 'auth refused uid 61002: 1' "the kernel run's auth did not log the peer uid 61002 it refused"
kernel_said 'body:' "the kernel run's fetch gave no body"
kernel_said 'server mailbox list: exit 0' "the kernel run's doveadm server did not answer"
kernel_said 'login: (.OK., \[b.Logged in.\])' "the kernel run's IMAP login failed"
kernel_said 'big body: OK 300000 bytes, as sent' "the kernel run's big message did not come back whole"
kernel_said "sessions at once: \['ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok'\]" "the kernel run's 8 sessions did not all succeed"
kernel_said 'doveadm who: tuser 1 imap (PIDS) ()' "the kernel run's doveadm who did not list the held session"
kernel_said 'imap logins: 10' "the kernel run's log does not have 10 IMAP logins"
kernel_said 'dovecot exit status: 0' "dovecot did not exit 0 on doveadm stop on the kernel"
kernel_said 'processes left: none' "the kernel run left processes"

one_run udsfs udsfs "$MNT/dovecot"
same_as_kernel_run udsfs
one_run seccomp udsfs "$MNT/seccomp" --front seccomp
same_as_kernel_run seccomp
