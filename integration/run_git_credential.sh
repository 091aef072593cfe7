#!/usr/bin/env bash
# run_git_credential.sh: git's credential cache, `git credential-cache--daemon`, which
# `git credential approve` starts on demand (it daemonizes) on a unix socket, on kernel
# sockets and then every git through `udsfs run`: a credential stored, read back with
# `git credential fill`, rejected and asked again (not there: git's prompt, disabled),
# stored again; `git credential-cache exit` (the daemon ends and removes its socket); the
# daemon started by hand and killed (SIGKILL: its name stays, refused; the next one git
# starts binds over it); with `--socket` in the mount (the daemon's own check of its
# directory's mode: 0700 passes, 0755 is refused), and at git's default path under
# $HOME/.cache, routed with `udsfs run --route`; 20 clients at once. The same answers
# both times, and no socket left in the mount.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd git git

# g DIR [--route R] CONFIG ARGS...: `git -c credential.helper=CONFIG credential ARGS`
# with HOME=DIR, through $UDSFS_RUN_VIA; stdin is the request.
g() {
    local home=$1 routes=()
    shift
    [ "$1" != --route ] || { routes=(--route "$2"); shift 2; }
    local helper=$1
    shift
    HOME=$home GIT_TERMINAL_PROMPT=0 GIT_CONFIG_NOSYSTEM=1 via ${routes[@]+"${routes[@]}"} -- \
        timeout 20 git -c credential.helper= -c "credential.helper=$helper" credential "$@" 2>&1 ||
        echo "git credential $1: status $?"
}
ask() { printf 'protocol=https\nhost=example.org\n\n'; }
give() { printf 'protocol=https\nhost=example.org\nusername=alice\npassword=%s\n\n' "$1"; }

# one_run MODE SOCKDIR: answers in $TMP/MODE.out.
one_run() {
    local mode=$1 sdir=$2 home=$TMP/home-$1
    UDSFS_RUN_VIA=$mode
    mkdir -p "$home"
    mkdir -m 700 "$sdir"
    local sock=$sdir/sock c="cache --socket $sdir/sock"
    {
        echo "== --socket in a 0700 directory"
        give s3cret | g "$home" "$c" approve
        expect_socket_home "$sock" >/dev/null
        ask | g "$home" "$c" fill
        give s3cret | g "$home" "$c" reject
        ask | g "$home" "$c" fill
        give other | g "$home" "$c" approve
        ask | g "$home" "$c" fill
        HOME=$home via -- timeout 20 git credential-cache --socket "$sock" exit
        echo "credential-cache exit: status $?"
        name_gone "$sock"
        echo "== a daemon killed: its name stays, the next one binds over it"
        # In the foreground (--debug), no timeout(1) between: its process group of its
        # own would keep the daemon from the group kill.
        HOME=$home serve DAEMON "$sock" "$TMP/$mode.daemon.out" -- \
            git credential-cache--daemon --debug "$sock"
        give s3cret | g "$home" "$c" approve
        kill -KILL -- "-$DAEMON"
        reap "$DAEMON"
        [ -e "$sock" ] || [ -L "$sock" ] && echo "socket name left"
        ask | g "$home" "$c" fill
        give again | g "$home" "$c" approve
        ask | g "$home" "$c" fill
        HOME=$home via -- timeout 20 git credential-cache --socket "$sock" exit
        echo "credential-cache exit: status $?"
        name_gone "$sock"
        echo "== --socket in a 0755 directory"
        mkdir -m 755 "$sdir/open"
        give s3cret | g "$home" "cache --socket $sdir/open/sock" approve
        ls "$sdir/open"
        echo "== the default socket, \$HOME/.cache/git/credential/socket"
        mkdir -m 700 "$home/.cache"
        give s3cret | g "$home" --route "$home/.cache" cache approve
        expect_socket_home "$home/.cache/git/credential/socket" >/dev/null
        stat -c '%n %a' "$home/.cache/git" "$home/.cache/git/credential" | sed "s|$home|HOME|"
        ask | g "$home" --route "$home/.cache" cache fill
        HOME=$home via --route "$home/.cache" -- timeout 20 git credential-cache exit
        echo "credential-cache exit: status $?"
        name_gone "$home/.cache/git/credential/socket"
        echo "== 20 clients at once"
        give s3cret | g "$home" "$c" approve
        local i
        for i in $(seq 1 20); do
            ask | g "$home" "$c" fill >"$TMP/$mode.fill$i" &
        done
        wait
        cat "$TMP/$mode".fill* | sort | uniq -c
        HOME=$home via -- timeout 20 git credential-cache --socket "$sock" exit
        echo "credential-cache exit: status $?"
        name_gone "$sock"
    } 2>&1 | sed -e "s|$sdir|SDIR|g" -e "s|$home|HOME|g" >"$TMP/$mode.out"
    show_answers "$mode" "$TMP/$mode.out"
}

one_run kernel "$TMP/k"
one_run udsfs "$MNT/u"
kernel_said 'password=other' "the kernel run did not read the second credential back"
same_answers "git credential-cache"
[ "$(wc -l <"$U/unix")" -eq 1 ] || fail "udsfs sockets left in the mount after the daemons ended: $(cat "$U/unix")"
ok "git credential approve/fill/reject and credential-cache--daemon through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"
