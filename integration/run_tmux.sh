#!/usr/bin/env bash
# run_tmux.sh: tmux, whose first client forks the server, which daemonizes and listens
# on the -S socket; every later client connects there and passes its stdin (an attach:
# its terminal) to the server with SCM_RIGHTS (imsg). A detached session running sh,
# keys sent to it and its pane captured, list-sessions and display-message's formats,
# a buffer loaded from a client's stdin and saved to its stdout, an attach on a pty
# (keys typed at the terminal, detach-client from another client), a second session,
# kill-session, kill-server (the socket's name is left behind, as Linux leaves it; a
# client then finds no server), and a server started again with its client's stdout a
# pipe. Another user (uid 65534): refused by the socket's mode, then by the server
# (its SO_PEERCRED uid) until server-access lets it in. On kernel sockets (the socket in a plain directory), then every tmux through
# `udsfs run --mount $MNT` with the socket in the mount: the same answers, and the
# first `new-session -d` returns as promptly as on the kernel (the daemonized server
# must not hold `udsfs run` or the caller's pipe).
UDSFS_MOUNT_ARGS=(--allow-other) # uid 65534's clients reach the mount
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd tmux tmux python3 python3
chmod 755 "$TMP" # uid 65534 must reach the kernel run's socket
head -c 300000 /dev/urandom >"$TMP/big"
# The same shell, terminal and no user configuration on both runs.
export TERM=xterm SHELL=/bin/sh
unset TMUX TMUX_TMPDIR ENV

# The servers daemonize (setsid): no process group of the script's holds them, so the
# exit trap kills each one the runs noted.
SERVER_PIDS=()
kill_servers() {
    local pid
    for pid in ${SERVER_PIDS[@]+"${SERVER_PIDS[@]}"}; do kill -KILL "$pid" 2>/dev/null; done
}
# lib_run.bash's trap, the servers killed first. The trap may run inside a run's
# block, whose output goes to its answers: it writes to the script's own (fds kept), and
# a failure there shows the run's last answers.
exec {SCRIPT_OUT}>&1 {SCRIPT_ERR}>&2
on_exit() {
    local status=$1
    set +e
    [ "$status" = 0 ] || [ ! -s "$TMP/$UDSFS_RUN_VIA.out" ] || {
        echo "the $UDSFS_RUN_VIA run's last answers:"
        tail -n 30 "$TMP/$UDSFS_RUN_VIA.out"
    } >&2
    kill_servers
    _run_kill_groups
    (exit "$status")
    _lib_cleanup
}
trap 'on_exit $? >&"$SCRIPT_OUT" 2>&"$SCRIPT_ERR"' EXIT

# attach.py TMUX...: `TMUX... attach-session -t t` on a pty of its own (the client
# passes the pty to the server); waits for the marker on its screen, types a command
# at it, then detaches it with `TMUX... detach-client` (another client).
cat >"$TMP/attach.py" <<'EOF2'
import fcntl, os, pty, select, struct, subprocess, sys, termios, time
tmux = sys.argv[1:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(tmux[0], tmux + ["attach-session", "-t", "t"])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
seen = b""
def screen_shows(want):
    global seen
    end = time.monotonic() + 10
    while want not in seen and time.monotonic() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                got = os.read(fd, 65536)
            except OSError:
                got = b""
            if not got:
                break
            seen += got
    return want in seen
print("attached, the screen shows the marker:", screen_shows(b"mark-42"))
os.write(fd, b"echo typed-$((2*3))\r")
print("typed at the terminal, the screen shows its output:", screen_shows(b"typed-6"))
sock = tmux[tmux.index("-S") + 1]
print("the socket's mode while attached:", oct(os.stat(sock).st_mode & 0o777))
print("detach-client: status", subprocess.run(tmux + ["detach-client", "-s", "t"]).returncode)
print("the client says it detached:", screen_shows(b"[detached (from session t)]"))
print("attach exit status:", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
EOF2

# tm ARGS...: one tmux client on the run's socket, through $UDSFS_RUN_VIA; the
# script's own output is not passed on (a server it starts would hold it).
tm() { via -- timeout 20 tmux -f /dev/null -S "$SOCK" "$@" {SCRIPT_OUT}>&- {SCRIPT_ERR}>&-; }

# pane_settles WHAT TEST: waits (10 s at most) until pane t's capture (trailing blank
# lines cut) passes `TEST FILE`, then prints it; fails naming WHAT on timeout.
pane_settles() {
    local tries
    for ((tries = 0; tries < 200; tries++)); do
        tm capture-pane -p -t t | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"$TMP/pane"
        "$2" "$TMP/pane" && { cat "$TMP/pane"; return 0; }
        sleep 0.05
    done
    fail "$UDSFS_RUN_VIA: pane t did not show $1 within 10 s; it shows: $(cat "$TMP/pane")"
}
prompt_only() { grep -qx '[#$]' "$1"; }
# answered LINE FILE: FILE shows LINE and, after it, the prompt again.
answered() { grep -qx "$1" "$2" && [ "$(tail -n 1 "$2")" = "$(head -c 1 "$PROMPT_FILE")" ]; }
marker_answered() { answered mark-42 "$1"; }
typed_answered() { answered typed-6 "$1"; }

# piped_settles FILE: waits (10 s at most) until pipe-pane's FILE holds the piped
# marker's output and the next prompt, then prints it (carriage returns cut).
piped_settles() {
    local tries
    for ((tries = 0; tries < 200; tries++)); do
        if grep -q '^piped-25' "$1" 2>/dev/null && [ "$(tail -c 2 "$1")" = "$(head -c 1 "$PROMPT_FILE") " ]; then
            tr -d '\r' <"$1"
            echo
            return 0
        fi
        sleep 0.05
    done
    fail "$UDSFS_RUN_VIA: pipe-pane's file did not get the marker's output within 10 s: $(cat -v "$1" 2>/dev/null)"
}

# nobody ARGS...: `tmux ARGS` as uid 65534 on the run's socket; its answers and status.
nobody() {
    local status=0
    run_cmd -- timeout 20 tmux -f /dev/null -S "$SOCK" "$@"
    (cd / && as_uid 65534 "${RUN_CMD[@]}" {SCRIPT_OUT}>&- {SCRIPT_ERR}>&-) >"$TMP/nobody" 2>&1 || status=$?
    sed "s|$SOCK|SOCK|" "$TMP/nobody"
    echo "uid 65534's $1: status $status"
}

# bound_at PATH: whether a socket of the run's kind is bound at PATH (udsfs: $U/unix,
# the kernel: /proc/net/unix).
bound_at() {
    if [ "$UDSFS_RUN_VIA" = udsfs ]; then udsfs_has_socket "$1"; else kernel_has_socket "$1"; fi && echo yes || echo no
}

# note_server: SERVER, the server's pid (asked of it), noted for the exit trap.
note_server() {
    SERVER=$(tm display-message -p '#{pid}')
    SERVER_PIDS+=("$SERVER")
}

# the_server_ends PID: says whether the server PID ended within 10 s.
the_server_ends() {
    if ended_within "$1" 10000; then echo "the server ended"; else echo "the server still runs"; fi
}

# runs_gone: through udsfs, waits (10 s at most) until no `udsfs run` of the mount is
# left (the one that started the server serves it until it ends).
runs_gone() {
    [ "$UDSFS_RUN_VIA" = udsfs ] || return 0
    local tries
    for ((tries = 0; tries < 100; tries++)); do
        pgrep -f -- "udsfs run --mount $MNT" >/dev/null || return 0
        sleep 0.1
    done
    fail "udsfs run processes left 10 s after tmux's server ended: $(pgrep -af -- "udsfs run --mount $MNT")"
}

# one_run MODE DIR: tmux's socket DIR/tmux.sock on MODE's sockets; answers in
# $TMP/MODE.out, the first new-session's return times in $TMP/MODE.ms.
one_run() {
    local mode=$1 out=$TMP/$1.out pane start_ms pipe_ms
    UDSFS_RUN_VIA=$mode
    SOCK=$2/tmux.sock
    mkdir -m 755 "$2"
    {
        # The first client forks the server, which daemonizes: the client returns then.
        # Timed as the bare `udsfs run --mount M -- tmux new-session -d` (no timeout(1)
        # inside it).
        run_cmd -- tmux -f /dev/null -S "$SOCK" new-session -d -s t -x 80 -y 24
        timed start_ms timeout -k 5 20 "${RUN_CMD[@]}" </dev/null >"$TMP/$mode.new" 2>&1 {SCRIPT_OUT}>&- {SCRIPT_ERR}>&-
        echo "new-session -d: status $?, said: $(cat "$TMP/$mode.new")"
        expect_socket_home "$SOCK" >/dev/null
        note_server
        pane_settles "the shell's prompt" prompt_only
        cp "$TMP/pane" "$TMP/prompt"
        PROMPT_FILE=$TMP/prompt
        # shellcheck disable=SC2016 # the pane's shell expands it: its output is the marker
        tm send-keys -t t 'echo mark-$((6*7))' Enter
        echo "send-keys: status $?"
        pane_settles "the marker's output and the next prompt" marker_answered
        tm list-sessions -F '#{session_name} windows #{session_windows} attached #{session_attached} created #{?session_created,yes,no}'
        tm display-message -p -t t '#{session_name}:#{window_index}.#{pane_index} #{pane_current_command} #{pane_width}x#{pane_height} dead #{pane_dead} socket #{socket_path}' |
            sed "s|$SOCK|SOCK|"
        pane=$(tm display-message -p -t t '#{pane_pid}')
        echo "pane_pid's parent is the server: $([ "$(ps -o ppid= -p "$pane" | tr -d ' ')" = "$SERVER" ] && echo yes || echo no)," \
            "its command $(ps -o comm= -p "$pane"); the server's $(ps -o comm= -p "$SERVER")"
        # A buffer from the client's stdin, back on its stdout.
        printf 'buffer line 1\nbuffer line 2\n' | tm load-buffer -b b1 -
        echo "load-buffer -: status $?"
        tm save-buffer -b b1 -
        tm list-buffers -F '#{buffer_name} #{buffer_size}'
        # 300,000 bytes through the client's stdin and back on its stdout.
        tm load-buffer -b big - <"$TMP/big"
        echo "load-buffer - of 300000 bytes: status $?, the same back: $(tm save-buffer -b big - | cmp - "$TMP/big" && echo yes)"
        # tmux's jobs (if-shell, run-shell, pipe-pane) talk to the server on socketpairs.
        tm if-shell 'test 1 = 1' 'display-message -p "if-shell: true"' 'display-message -p "if-shell: false"'
        tm if-shell 'test 1 = 2' 'display-message -p "if-shell: true"' 'display-message -p "if-shell: false"'
        # shellcheck disable=SC2016 # run-shell's shell expands it
        tm run-shell 'echo ran-$((3+4)); exit 3' || echo "run-shell: status $?"
        # Its output and status are in pane t's view mode: copied from there.
        echo "pane t in $(tm display-message -p -t t '#{pane_mode}')"
        for key in history-top start-of-line begin-selection history-bottom end-of-line copy-selection-and-cancel; do
            tm send-keys -t t -X "$key"
        done
        tm save-buffer - | grep -v '^$'
        tm pipe-pane -t t "cat >>$TMP/$mode.piped"
        echo "pipe-pane: status $?, piping $(tm display-message -p -t t '#{pane_pipe}')"
        # shellcheck disable=SC2016 # the pane's shell expands it
        tm send-keys -t t 'echo piped-$((5*5))' Enter
        piped_settles "$TMP/$mode.piped"
        tm pipe-pane -t t
        echo "pipe-pane closed: status $?, piping $(tm display-message -p -t t '#{pane_pipe}')"
        # Another user: the socket's mode (0600) refuses its connect; opened to it, the
        # server asks for the peer's uid and refuses it unless server-access lets it in.
        echo "the socket's mode: $(stat -c %a "$SOCK")"
        nobody list-sessions -F '#{session_name}'
        chmod 666 "$SOCK"
        nobody list-sessions -F '#{session_name}'
        tm server-access -a nobody
        nobody list-sessions -F '#{session_name}'
        tm server-access -r nobody
        tm server-access -l
        nobody new-session -d -s n
        tm server-access -d nobody
        nobody list-sessions -F '#{session_name}'
        via -- timeout 40 python3 "$TMP/attach.py" tmux -f /dev/null -S "$SOCK"
        pane_settles "the typed command's output" typed_answered
        echo "the socket's mode after the detach: $(stat -c %a "$SOCK")"
        tm new-session -d -s u -x 100 -y 30
        echo "second new-session: status $?"
        tm list-sessions -F '#{session_name} windows #{session_windows} #{window_width}x#{window_height}'
        tm kill-session -t t
        echo "kill-session -t t: status $?"
        tm has-session -t t 2>&1 || echo "has-session -t t: status $?"
        tm list-sessions -F '#{session_name}'
        tm kill-server
        echo "kill-server: status $?"
        the_server_ends "$SERVER"
        # Linux leaves the socket's name; a client then finds nothing listening.
        [ -e "$SOCK" ] && echo "socket name left: $(stat -c '%F %a' "$SOCK")" || echo "socket name gone"
        echo "a socket still bound at the name: $(bound_at "$SOCK")"
        tm list-sessions 2>&1 | sed "s|$SOCK|SOCK|" || echo "list-sessions: status $?"
        runs_gone
        # A server started again, its client's stdout a pipe read to the end (as $(...)
        # does): nothing the server left behind may hold the pipe.
        timed pipe_ms eval 'tm new-session -d -s again -P -F "made #{session_name}" </dev/null 2>&1 | cat'
        echo "new-session -d -P through a pipe: status $?"
        note_server
        tm list-sessions -F '#{session_name}'
        tm kill-server
        the_server_ends "$SERVER"
        runs_gone
    } >"$out" 2>&1
    echo "$start_ms $pipe_ms" >"$TMP/$mode.ms"
    say "$mode: the first new-session -d returned after $start_ms ms; the one through a pipe after $pipe_ms ms"
    show_answers "$mode" "$out"
}

one_run kernel "$TMP/k"
one_run udsfs "$MNT/tmux"
kernel_said 'mark-42' "the kernel run's pane never showed the marker's output"
kernel_said 'the client says it detached: True' "the kernel run's attached client did not detach"
kernel_said 'the server ended' "the kernel run's server did not end on kill-server"
same_answers "tmux"

# The daemonized server must not hold the client's return: the kernel's is at once.
read -r k_start k_pipe <"$TMP/kernel.ms"
read -r u_start u_pipe <"$TMP/udsfs.ms"
for t in "new-session -d:$k_start:$u_start" "new-session -d through a pipe:$k_pipe:$u_pipe"; do
    IFS=: read -r what k u <<<"$t"
    if [ "$k" -lt 1000 ] && [ "$u" -gt 5000 ]; then
        fail "udsfs run -- tmux $what returned after $u ms; on the kernel after $k ms"
    fi
    ok "tmux $what returned after $u ms through udsfs run, $k ms on the kernel"
done
ok "tmux (server, detached sessions, jobs, an attach on a pty, buffers, another user) through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"
