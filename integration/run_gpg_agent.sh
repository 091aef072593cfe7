#!/usr/bin/env bash
# run_gpg_agent.sh: GnuPG's gpg-agent, which gpg starts on demand and which daemonizes,
# listening on four sockets in its homedir (S.gpg-agent, .extra, .browser, .ssh): a key
# made without passphrase, a file signed and verified, encrypted and decrypted (the
# private key's operations are the agent's), `gpg-connect-agent 'GETINFO pid'` on the
# main and the restricted extra socket, ssh-add on the ssh socket; the agent killed with
# SIGKILL (its names left behind) and the next gpg's agent binding over them; the
# socket file removed (the agent sees it gone and shuts down), and `gpgconf --kill
# gpg-agent` (the agent exits and removes its names); dirmngr started by
# gpg-connect-agent and killed by gpgconf; then systemd-socket-activate
# handing S.gpg-agent to `gpg-agent --supervised` (which reads its name back; the
# environment cleared, it runs on the supervisor's filter, not the library), a client
# reading the greeting that names its pid, a signature, SIGTERM. On kernel sockets, then
# every program through `udsfs run --mount $MNT --route HOMEDIR` (the homedir holds the
# keyrings, regular files, so it stays a kernel directory and its sockets are routed):
# the same answers, normalised for key ids, times and pids, and the same agent log.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd gpg gpg gpg-agent gpg-agent gpgconf gpgconf gpg-connect-agent gpgconf dirmngr dirmngr
need_cmd ssh-add openssh-client systemd-socket-activate systemd python3 python3
echo "a file to sign and encrypt" >"$TMP/data"

# norm H: the answers with H, key ids, fingerprints, dates and pids made constant.
norm() {
    sed -E -e "s|$1|H|g" -e 's/\b[0-9A-F]{40}\b/FPR/g' -e 's/\b[0-9A-F]{16}\b/KEYID/g' \
        -e 's/[A-Z][a-z]{2} [A-Z][a-z]{2} +[0-9]+ [0-9:]{8} [0-9]{4} UTC/DATE/' \
        -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}( [0-9:]{8})?/DATE/g' -e 's/^D [0-9]+$/D PID/' \
        -e 's/gpg-agent\[[0-9]+\]/gpg-agent[PID]/' -e 's/0x[0-9a-f]+/0xADDR/g'
}

# agent_pid H: the running agent's pid, asked on its socket (no autostart).
agent_pid() {
    via --route "$1" -- timeout 20 gpg-connect-agent --homedir "$1" --no-autostart 'GETINFO pid' /bye |
        sed -n 's/^D //p'
}

# agent_ended PID WHAT: PID ends within 10 s (`gpg-agent exited after WHAT`), all its
# threads (the leader is a zombie while they end, holding the listeners: a connect then
# is reset, not refused).
agent_ended() {
    local i
    if ended_within "$1" 10000; then
        for i in $(seq 1 500); do
            [ "$(ls "/proc/$1/task" 2>/dev/null | wc -l)" -le 1 ] && break
            sleep 0.02
        done
        echo "gpg-agent exited after $2"
    else
        echo "gpg-agent still runs after $2"
    fi
}

# GREET: python3 -c "$GREET" SOCK: the agent's greeting to a client (its line whole:
# a close with bytes unread resets the agent's end), the client's pid as MYPID.
GREET='import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
g = b""
while not g.endswith(b"\n"):
    g += s.recv(100)
print(g.decode().strip().replace(str(os.getpid()), "MYPID"))'

# idle LOG PID: waits (10 s at most) until every handler agent PID's LOG says started has
# ended: a connection's handler ends a little after its client does.
idle() {
    local i
    for i in $(seq 1 500); do
        [ "$(grep -c "gpg-agent\[$2\] .*handler 0x[0-9a-f]* for fd [0-9]* started" "$1")" = \
            "$(grep -c "gpg-agent\[$2\] .*handler 0x[0-9a-f]* for fd [0-9]* terminated" "$1")" ] && return 0
        sleep 0.02
    done
    echo "agent $2's handlers did not all end"
}

# probe H PID: one connection to agent PID, idle: the descriptor it is served at (the
# lowest free one, on the kernel always the same). Only here, where nothing else is
# connected, is the number the agent logs for it a fixed one.
probe() {
    idle "$1.agent.log" "$2"
    via --route "$1" -- timeout 20 gpg-connect-agent --homedir "$1" --no-autostart 'GETINFO version' /bye >/dev/null
    idle "$1.agent.log" "$2"
    echo "an idle agent's one connection: $(grep -o "gpg-agent\[$2\] handler 0x[0-9a-f]* for fd [0-9]* started" \
        "$1.agent.log" | tail -1 | grep -o 'fd [0-9]*')"
}

# one_run MODE: the homedir $TMP/MODE with MODE's sockets; answers in $TMP/MODE.out.
one_run() {
    local mode=$1 h=$TMP/$1 out=$TMP/$1.out pid
    UDSFS_RUN_VIA=$mode
    mkdir -m 700 "$h"
    printf 'log-file %s\nverbose\n' "$h.agent.log" >"$h/gpg-agent.conf"
    local g=(timeout 30 gpg --homedir "$h" --batch)
    {
        via --route "$h" -- "${g[@]}" --pinentry-mode loopback --passphrase '' \
            --quick-gen-key 'udsfs test <t@example.org>' default default never 2>&1
        pid=$(agent_pid "$h")
        expect_socket_home "$h/S.gpg-agent" >/dev/null
        ls "$h" | grep '^S\.'
        via --route "$h" -- timeout 20 gpg-connect-agent --homedir "$h" 'GETINFO pid' 'GETINFO version' /bye
        # The extra socket refuses GETINFO pid, as it should.
        via --route "$h" -- timeout 20 gpg-connect-agent -S "$h/S.gpg-agent.extra" 'GETINFO pid' \
            'GETINFO version' /bye
        SSH_AUTH_SOCK=$h/S.gpg-agent.ssh via --route "$h" -- timeout 20 ssh-add -l 2>&1 ||
            echo "ssh-add -l: status $?"
        probe "$h" "$pid"
        via --route "$h" -- "${g[@]}" --yes -o "$h/data.sig" --detach-sign "$TMP/data" 2>&1
        via --route "$h" -- "${g[@]}" --verify "$h/data.sig" "$TMP/data" 2>&1
        via --route "$h" -- "${g[@]}" --yes --trust-model always -r t@example.org -o "$h/data.gpg" \
            --encrypt "$TMP/data" 2>&1
        via --route "$h" -- "${g[@]}" --decrypt "$h/data.gpg" 2>&1
        # SIGKILL: the names stay; a client without autostart is refused; the next gpg's
        # agent finds them stale and binds anew.
        kill -KILL "$pid"
        agent_ended "$pid" SIGKILL
        ls "$h" | grep '^S\.'
        via --route "$h" -- timeout 20 gpg-connect-agent --homedir "$h" --no-autostart 'GETINFO pid' /bye 2>&1 ||
            echo "gpg-connect-agent: status $?"
        via --route "$h" -- "${g[@]}" --yes -o "$h/data.sig" --detach-sign "$TMP/data" 2>&1
        via --route "$h" -- "${g[@]}" --verify "$h/data.sig" "$TMP/data" 2>&1
        # The socket file removed: the agent's inotify watch sees it and the agent ends.
        pid=$(agent_pid "$h")
        via --route "$h" -- rm "$h/S.gpg-agent"
        agent_ended "$pid" "rm S.gpg-agent"
        grep -o "gpg-agent\[$pid\] socket file has been removed - shutting down" "$h.agent.log" ||
            echo "the agent did not say its socket file was removed"
        ls "$h" | grep '^S\.' || echo "no socket names"
        # gpgconf --kill: KILLAGENT on the socket; the agent exits and removes its names.
        via --route "$h" -- "${g[@]}" --decrypt "$h/data.gpg" 2>&1
        pid=$(agent_pid "$h")
        probe "$h" "$pid"
        via --route "$h" -- timeout 20 gpgconf --homedir "$h" --kill gpg-agent
        echo "gpgconf --kill: status $?"
        agent_ended "$pid" "gpgconf --kill"
        ls "$h" | grep '^S\.' || echo "no socket names"
        via --route "$h" -- timeout 20 gpg-connect-agent --homedir "$h" --no-autostart 'GETINFO pid' /bye 2>&1 ||
            echo "gpg-connect-agent: status $?"
        # dirmngr, the other daemon gpg's tools start on demand (S.dirmngr).
        via --route "$h" -- timeout 20 gpg-connect-agent --homedir "$h" --dirmngr 'GETINFO version' \
            'GETINFO socket_name' /bye 2>&1
        via --route "$h" -- timeout 20 gpgconf --homedir "$h" --kill dirmngr
        echo "gpgconf --kill dirmngr: status $?"
        name_gone "$h/S.dirmngr"
    } 2>&1 | norm "$h" >"$out"
    # Socket activation: systemd-socket-activate binds S.gpg-agent and starts
    # `gpg-agent --supervised` with it as fd 3 (the agent reads its name back with
    # getsockname); a client reads the greeting, which names its pid (SO_PEERCRED).
    run_cmd --route "$h" -- systemd-socket-activate -l "$h/S.gpg-agent" --fdname=std -E GNUPGHOME="$h" -- \
        gpg-agent --homedir "$h" --supervised
    start_bg ACTIVATE "${RUN_CMD[@]}" >"$h.activate.out" 2>&1
    wait_listening "$h/S.gpg-agent"
    {
        via --route "$h" -- timeout 20 gpg-connect-agent --homedir "$h" --no-autostart 'GETINFO socket_name' /bye
        via --route "$h" -- timeout 20 python3 -c "$GREET" "$h/S.gpg-agent"
        via --route "$h" -- "${g[@]}" --yes -o "$h/data.sig" --detach-sign "$TMP/data" 2>&1
        via --route "$h" -- "${g[@]}" --verify "$h/data.sig" "$TMP/data" 2>&1
        pid=$(agent_pid "$h")
        idle "$h.agent.log" "$pid"
        stop_bg -TERM "$ACTIVATE"
        agent_ended "$pid" "SIGTERM"
    } 2>&1 | norm "$h" >>"$out"
    # The agent's own log: what it listened on, served and how it ended; not at which
    # descriptor (a connection that comes while another's handler ends gets the next; the
    # probes above look at one), nor when a handler ended (its last line may be cut by
    # the SIGKILL), nor how many connections in a row (a gpg that started the agent polls
    # it until it answers), nor whether an agent saw its names go (the rm above asks;
    # after KILLAGENT, which removes them, its inotify watch may be read first or not).
    grep -v -e SCdaemon -e 'handler .* terminated' -e 'socket file has been removed' "$h.agent.log" | cut -d' ' -f3- | norm "$h" |
        sed -E -e 's/for fd [0-9]+/for fd N/' -e 's/request_identities \([0-9]+\)/request_identities (N)/' | uniq |
        sed 's/^/agent log: /' >>"$out"
    show_answers "$mode" "$out" "$h.agent.log"
}

one_run kernel
one_run udsfs
kernel_said 'gpg: Good signature from "udsfs test <t@example.org>" \[ultimate\]' "the kernel run made no good signature"
kernel_said 'gpg-agent exited after gpgconf --kill' "the kernel run's agent did not exit on gpgconf --kill"
kernel_said "an idle agent's one connection: fd [0-9]*" "the kernel run's probes found no connection in the agent's log"
same_answers "gpg-agent" cat "$TMP/udsfs.agent.log"
[ "$(wc -l <"$U/unix")" -eq 1 ] || fail "udsfs sockets left in the mount after gpgconf --kill: $(cat "$U/unix")"
ok "gpg, gpg-agent, gpg-connect-agent, ssh-add and gpgconf through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"
