#!/usr/bin/env bash
# run_postfix.sh: a private Postfix instance (package postfix): its own config, queue,
# data and mail spool directories under $TMP, no inet listener (master.cf holds only unix
# services, smtpd among them on public/smtpd), no chroot, mail_owner postfix, local
# delivery to $TMP's spool, its log through the postlog service (public/postlog, a
# datagram socket) to a file. `postfix start-fg` starts master, which binds every
# private/* and public/* socket of its queue directory and hands the listeners to the
# children it forks (pickup, qmgr, cleanup, trivial-rewrite, local, showq, smtpd, ...),
# which talk to each other over unix stream sockets. Mail goes in through `sendmail -t`
# (which runs the set-group-ID postdrop: the loader drops LD_PRELOAD for it, and the
# supervisor's filter carries its connect to public/pickup) and SMTP through smtpd on its
# unix socket (integration/postfix_mail.py): a small mail and a 1 MiB one each way, then
# six SMTP sessions and six sendmails at once, a mail to no such user (bounced to its
# sender), sendmail and postqueue as nobody, postlog (a datagram) and postkick as nobody
# (EACCES: public/ is 0710), `postfix reload` (master keeps its listeners) and a mail
# after it, three mails to smtp-sink over LMTP on a unix socket of its own (routed too),
# one after another: the lmtp client keeps the connection in scache between them, its
# descriptor passed over private/scache and back (conn_use=2, 3 in the log); a mail to
# another domain is deferred (the retry transport) for `postqueue -p` (set-group-ID too:
# showq over public/showq) to list, deleted with postsuper, and the queue is then empty.
# While the library's run delivers, master's status socketpairs with its children have
# lanes. Its connections to the named sockets get lanes too (since the library follows
# the F_DUPFD that moves each above 127), but not for long: Postfix reads FIONREAD before
# its reads, which takes a lane down (its bytes are counted in the daemon), and a
# connection gets 3 lanes at most, so they are not counted here. Three runs: on kernel sockets, then every program through `udsfs
# run` with the queue's private/ and public/ (and the sink's directory) routed to the
# mount (the library; master passes the library's variables to its children through
# import_environment), then under `--front seccomp`: the sockets udsfs sockets (not in
# /proc/net/unix), the same answers each time (the sockets' modes and owners, the
# clients' answers, the mailbox's messages, what smtp-sink got, the queue listings), the
# same log lines (times, pids and queue ids taken out), `postfix stop` exiting 0 (and
# start-fg 143: master ends by its SIGTERM), no processes left.
UDSFS_MOUNT_ARGS=(--allow-other) # postfix's children run as postfix, local as nobody
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd postfix postfix sendmail postfix postqueue postfix postsuper postfix postlog postfix \
    postkick postfix smtp-sink postfix setpriv util-linux unshare util-linux
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is missing (package python3)"
getent passwd postfix >/dev/null || fail "no user postfix (the postfix package makes it)"
getent group postdrop >/dev/null || fail "no group postdrop (the postfix package makes it)"

# master makes itself a session leader: the sessions start_bg made do not hold it, and
# the exit trap kills each run's master session too (the pid its master.pid names while
# that is a master).
stop_masters() {
    local f pid
    for f in "$TMP"/pf-*/spool/pid/master.pid; do
        [ -f "$f" ] || continue
        pid=$(tr -d ' \n' <"$f")
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" == master ] && kill_session "$pid"
    done
    return 0
}
trap '_run_status=$?; set +e; stop_masters; _run_kill_groups; (exit $_run_status); _lib_cleanup' EXIT

# postfix reaches the queue below $TMP, nobody its mailbox.
chmod 755 "$TMP"
mkdir -p "$TMP/files"
CLIENT=$TMP/files/postfix_mail.py
cp "$LIB_DIR/postfix_mail.py" "$CLIENT"
# The mails sendmail sends: mail_file SUBJECT: a mail to nobody with the body on stdin
# (the 1 MiB one: base64 lines, as a mail carries binary).
mail_file() {
    printf 'To: nobody@h121.test\nFrom: root@h121.test\nSubject: %s\n\n' "$1"
    cat
}
printf 'hello from sendmail -t\n' | mail_file "small one" >"$TMP/files/small"
head -c 786432 /dev/urandom | base64 -w 76 | mail_file "one MiB" >"$TMP/files/big"
# How many mails go at once through smtpd, and through sendmail.
BURST=6
for k in $(seq 1 "$BURST"); do
    printf 'sendmail burst mail %s\n' "$k" | mail_file "sendmail burst $k" >"$TMP/files/burst$k"
done
printf 'sent after postfix reload\n' | mail_file "after reload" >"$TMP/files/reload"
printf 'sent by nobody\n' | mail_file "from nobody" >"$TMP/files/nobody"
printf 'To: someone@elsewhere.test\nFrom: root@h121.test\nSubject: held\n\nnever leaves\n' >"$TMP/files/held"
chmod 755 "$TMP/files"
chmod 644 "$TMP/files"/*

# one_run NAME MODE [RUN OPTIONS...]: the instance in $TMP/pf-NAME on MODE's sockets
# (udsfs: every program through `udsfs run` with the RUN OPTIONS and the queue's
# private/ and public/ routed); the answers go to $TMP/NAME.out.
one_run() {
    local name=$1 mode=$2 d=$TMP/pf-$1 out=$TMP/$1.out
    shift 2
    local q=$d/spool
    RUN_OPTS=("$@")
    [ "$mode" == kernel ] || RUN_OPTS+=(--route "$q/private" --route "$q/public" --route "$d/sink")
    UDSFS_RUN_VIA=$mode
    mkdir -p "$d/etc" "$q" "$d/mail" "$d/sink" "$d/dump"
    chmod 1777 "$d/mail"
    chown nobody "$d/dump"
    cat >"$d/etc/main.cf" <<EOF
compatibility_level = 3.6
queue_directory = $q
data_directory = $d/data
meta_directory = /etc/postfix
mail_owner = postfix
setgid_group = postdrop
myhostname = h121.test
mydomain = h121.test
myorigin = \$myhostname
mydestination = \$myhostname, localhost
inet_protocols = ipv4
alias_maps =
alias_database =
mail_spool_directory = $d/mail
maillog_file = $d/maillog
maillog_file_prefixes = $d
default_transport = retry:held for postqueue
relay_transport = retry:held for postqueue
# sink.test's mail goes to smtp-sink over LMTP on a unix socket; the lmtp client keeps
# the connection in scache (its descriptor passed over private/scache) between mails
transport_maps = inline:{sink.test=lmtp:unix:$d/sink/lmtp.sock}
lmtp_connection_cache_destinations = static:all
lmtp_connection_cache_time_limit = 30s
biff = no
# master passes these to its children (the library's, through udsfs run)
import_environment = MAIL_CONFIG MAIL_DEBUG MAIL_LOGTAG TZ LANG=C POSTLOG_SERVICE POSTLOG_HOSTNAME LD_PRELOAD UDSFS_MOUNT UDSFS_ROUTES UDSFS_SUPERVISOR UDSFS_EXE
EOF
    # (postlog and smtpd last: master binds in this order; smtpd's is waited for)
    cat >"$d/etc/master.cf" <<'EOF'
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
local     unix  -       n       n       -       -       local
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
smtpd     unix  n       -       n       -       -       smtpd
lmtp      unix  -       -       n       -       -       lmtp
EOF
    # the queue's directories (on the kernel's file system: no socket yet)
    postfix -c "$d/etc" check || fail "$name: postfix check failed: $(tail -5 "$d/maillog")"
    local mbox=$d/mail/nobody
    # as_nobody CMD...: CMD as nobody, in a mount namespace of its own where the default
    # main.cf lets it name this instance's (the set-group-ID postdrop and postqueue take
    # another config directory from a user but root only when that main.cf lists it)
    sed '/^alternate_config_directories/d' /etc/postfix/main.cf >"$d/default-main.cf"
    echo "alternate_config_directories = $d/etc" >>"$d/default-main.cf"
    local nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    local as_nobody=(unshare -m --propagation private -- sh -c 'mount --bind "$0" /etc/postfix/main.cf && exec "$@"'
        "$d/default-main.cf" "${nobody[@]}")
    # messages: how many messages the mailbox holds.
    messages() {
        local n
        n=$(grep -c '^From ' "$mbox" 2>/dev/null) || true
        echo "${n:-0}"
    }
    # delivered N: waits (20 s at most) until the mailbox holds N messages.
    delivered() {
        local i
        for i in $(seq 1 1000); do
            [ "$(messages)" == "$1" ] && return 0
            sleep 0.02
        done
        fail "$name: the mailbox holds $(messages) messages after 20 s, not $1: $(tail -5 "$d/maillog")"
    }
    run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- postfix -c "$d/etc" start-fg
    start_bg MASTER "${RUN_CMD[@]}" >"$d/master.log" 2>&1
    # master binds each name relative to the queue directory (its working directory):
    # /proc/net/unix shows it so ("public/smtpd"); the library routes it as the absolute
    # path, which $U/unix shows.
    local s
    if [ "$mode" == udsfs ]; then
        wait_listening "$q/public/smtpd"
        for s in public/pickup public/showq public/postlog public/cleanup private/rewrite private/local; do
            expect_socket_home "$q/$s"
            ! kernel_has_socket "$s" || fail "$name: the kernel has a socket bound at $s: master's socket was not routed to udsfs"
        done
    else
        wait_listening public/smtpd
        for s in public/pickup public/showq public/postlog public/cleanup private/rewrite private/local; do
            expect_socket_home "$s"
        done
    fi
    local master
    master=$(tr -d ' \n' <"$q/pid/master.pid")
    # smtp-sink, the LMTP server: each mail to a file in $d/dump
    run_cmd ${RUN_OPTS[@]+"${RUN_OPTS[@]}"} -- smtp-sink -L -u nobody -d "$d/dump/%M." "unix:$d/sink/lmtp.sock" 10
    start_bg SINK "${RUN_CMD[@]}" >"$d/sink.log" 2>&1
    wait_listening "$d/sink/lmtp.sock"
    expect_socket_home "$d/sink/lmtp.sock"
    {
        trap '_block_status=$?; set +e; [ $_block_status -eq 0 ] || _run_kill_groups' EXIT
        echo "-- sockets"
        (cd "$q" && v stat -c '%n %F %A %U:%G' public/* private/* 2>&1)
        echo "-- sendmail -t"
        ask "sendmail small" sendmail -C "$d/etc" -t <"$TMP/files/small"
        delivered 1
        ask "sendmail 1 MiB" sendmail -C "$d/etc" -t <"$TMP/files/big"
        delivered 2
        echo "-- smtpd on public/smtpd"
        ask "smtp" /usr/bin/python3 "$CLIENT" smtp "$q/public/smtpd" "through smtpd"
        delivered 3
        ask "smtp 1 MiB" /usr/bin/python3 "$CLIENT" smtp "$q/public/smtpd" "one MiB by smtp" "$TMP/files/big"
        delivered 4
        echo "-- at once: $BURST SMTP sessions, $BURST sendmails"
        ask "smtp burst" /usr/bin/python3 "$CLIENT" burst "$q/public/smtpd" "$BURST"
        local k pids=()
        for k in $(seq 1 "$BURST"); do
            v sendmail -C "$d/etc" -t <"$TMP/files/burst$k" >"$d/burst$k.out" 2>&1 &
            pids+=("$!")
        done
        exits "${pids[@]}"
        echo "sendmail burst exits: $EXITS"
        cat "$d"/burst*.out
        delivered $((4 + 2 * BURST))
        echo "-- a bounce (no such user), to nobody"
        ask "sendmail to nosuchuser" sendmail -C "$d/etc" -f nobody@h121.test nosuchuser@h121.test <"$TMP/files/small"
        delivered $((5 + 2 * BURST))
        echo "-- as nobody: sendmail"
        ask "sendmail as nobody" "${as_nobody[@]}" sendmail -C "$d/etc" -t <"$TMP/files/nobody"
        delivered $((6 + 2 * BURST))
        echo "-- postlog (a datagram to public/postlog), postkick as nobody"
        ask "postlog" postlog -c "$d/etc" -t h121/test "hello from postlog"
        ask "postlog as nobody" "${nobody[@]}" postlog -c "$d/etc" -t h121/test "hello from nobody"
        # public/ is 0710 postfix:postdrop: nobody may not search it. (Not root's postkick:
        # it writes its trigger and then a NUL, and pickup reads once and closes, so the
        # NUL's write may meet a closed peer: SIGPIPE, exit 141, in 1 of 100 on kernel
        # sockets here, 8 of 100 under strace and 4 of 50 through the library.)
        ask "postkick as nobody" "${nobody[@]}" postkick -c "$d/etc" public pickup W
        echo "-- postfix reload, then a mail"
        ask "postfix reload" postfix -c "$d/etc" reload
        ask "sendmail after reload" sendmail -C "$d/etc" -t <"$TMP/files/reload"
        delivered $((7 + 2 * BURST))
        echo "-- LMTP to smtp-sink, one mail after another (the connection kept in scache)"
        for k in 1 2 3; do
            ask "sendmail to sink $k" sendmail -C "$d/etc" "x$k@sink.test" <"$TMP/files/small"
            # (smtp-sink makes the file at MAIL FROM, its body comes with the end of DATA)
            for i in $(seq 1 1000); do
                [ "$(grep -l '^hello from sendmail' "$d"/dump/* 2>/dev/null | wc -l)" -ge "$k" ] && break
                sleep 0.02
            done
        done
        echo "smtp-sink got (sorted, without its ids and times):"
        grep -hE '^(X-[A-Za-z-]+|Subject|From|To):|^hello' "$d"/dump/* | sort
        echo "-- postqueue"
        ask "sendmail held" sendmail -C "$d/etc" -t <"$TMP/files/held"
        local i
        for i in $(seq 1 1000); do
            [ -n "$(find "$q/deferred" -type f)" ] && break
            sleep 0.02
        done
        ask "postqueue -p" postqueue -c "$d/etc" -p | sed -E 's/^[0-9A-F]{8,}\*? /QID /; s/ [A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]{2} [0-9:]{8} / TIME /'
        ask "postqueue -p as nobody" "${as_nobody[@]}" postqueue -c "$d/etc" -p | sed -E 's/^[0-9A-F]{8,}\*? /QID /; s/ [A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]{2} [0-9:]{8} / TIME /'
        ask "postsuper -d ALL" postsuper -c "$d/etc" -d ALL
        ask "postqueue -p" postqueue -c "$d/etc" -p
        echo "-- mailbox"
        echo "(sorted: the bursts' mails come in any order)"
        /usr/bin/python3 "$CLIENT" mbox "$mbox" | sort
        /usr/bin/python3 "$CLIENT" body "$mbox" "one MiB" "$TMP/files/big"
        /usr/bin/python3 "$CLIENT" body "$mbox" "one MiB by smtp" "$TMP/files/big"
        if [ "$mode" == udsfs ]; then
            echo "$(laned_now) one look" >"$d/laned"
        fi
        echo "-- stop"
        ask "postfix stop" postfix -c "$d/etc" stop
    } 2>&1 | sed -e "s#$d#D#g" >"$out" || true
    stop_bg "$SINK"
    ended_within "$MASTER" 20000 || fail "$name: postfix start-fg did not end within 20 s of postfix stop: $(tail -5 "$d/maillog")"
    reap "$MASTER"
    echo "postfix start-fg: exit $REAPED_STATUS" >>"$out"
    echo "its output: $(cat "$d/master.log")" >>"$out"
    session_left "$MASTER" 5 >>"$out"
    session_left "$master" 5 | sed 's/^/master'"'"'s session: /' >>"$out"
    # the log without times, pids, queue ids and delays, nor `postfix stop`'s own lines:
    # it logs "stopping" (a datagram to postlogd) and at once kills master, which ends
    # postlogd, read or not; and "waiting" when its first look finds master not yet gone
    echo "-- maillog (sorted, counted)" >>"$out"
    sed -E -e '/postfix-script\[[0-9]+\]: (stopping|waiting for) the Postfix mail system/d' -e 's/^[A-Z][a-z]{2} [ 0-9]{2} [0-9:]{8} [^ ]+ //; s/\[[0-9]+\]:/:/; s/\b[0-9A-F]{10,12}\b/QID/g; s/<[0-9]{14}\.QID@/<TIME.QID@/' \
        -e 's/delay=[0-9.]+, delays=[0-9./]+/delay=T/; s/size=[0-9]+/size=N/' -e "s#$d#D#g" "$d/maillog" | sort | uniq -c >>"$out"
    show_answers "$name" "$out" "$d/master.log"
}

timed_run kernel kernel
kernel_said 'sendmail small: exit 0' "the kernel run's sendmail failed"
kernel_said 'one MiB body equal: yes' "the kernel run's 1 MiB mail through sendmail did not arrive whole"
kernel_said 'one MiB by smtp body equal: yes' "the kernel run's 1 MiB mail through smtpd did not arrive whole"
kernel_said "burst of $BURST: 0 odd answers" "the kernel run's SMTP sessions at once got odd answers"
kernel_said "sendmail burst exits:$(printf ' 0%.0s' $(seq 1 "$BURST"))" "the kernel run's sendmails at once failed"
kernel_said '.*Subject=Undelivered Mail Returned to Sender report: .*Status=5.1.1.*' "the kernel run's mail to no such user did not bounce"
kernel_said '.*(held for postqueue)' "the kernel run's postqueue -p did not list the deferred mail"
kernel_said 'sendmail as nobody: exit 0' "the kernel run's sendmail as nobody failed"
kernel_said 'postqueue -p as nobody: exit 0' "the kernel run's postqueue -p as nobody failed"
kernel_said '.*postfix/lmtp: .*conn_use=3, .*status=sent.*' "the kernel run's lmtp client did not take its connection back from scache"
kernel_said 'Mail queue is empty' "the kernel run's queue was not empty at the end"
kernel_said 'postfix stop: exit 0' "the kernel run's postfix stop failed"
kernel_said 'processes left: none' "the kernel run left processes"

runs_through_fronts postfix pf maillog "master's status socketpairs with its children"
