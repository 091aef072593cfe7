#!/usr/bin/env bash
# run_ssh_agent.sh: Debian's ssh-agent — installed setgid _ssh, so the loader ignores
# LD_PRELOAD for it — with its socket in the mount, ssh-add loading, listing and
# removing a key, and `ssh-keygen -Y sign` signing with the agent's key (verified with
# -Y check-novalidate); on kernel sockets, then every program through `udsfs run
# --mount $MNT` (a root run): the same answers, and the agent's socket is a udsfs
# socket. Before the supervisor's filter carried every process of a run, the agent
# bound a kernel socket inside the mount, silently, and its clients got ECONNREFUSED.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd ssh-agent openssh-client
need_cmd ssh-add openssh-client
need_cmd ssh-keygen openssh-client
[ -g "$(command -v ssh-agent)" ] || fail "$(command -v ssh-agent) is not setgid: this test is about a setgid agent"

ssh-keygen -q -t ed25519 -N '' -C udsfs-test -f "$TMP/key" || fail "ssh-keygen could not make a key"
echo "a file to sign" >"$TMP/data"
echo "udsfs-test $(cat "$TMP/key.pub")" >"$TMP/allowed"

# one_run MODE DIR: the agent on DIR/agent.sock with MODE's sockets; answers in $TMP/MODE.out.
one_run() {
    local mode=$1 dir=$2 d=$TMP/ssh-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$dir" "$d"
    local sock=$dir/agent.sock
    serve AGENT "$sock" "$d/agent.out" -- timeout 120 ssh-agent -D -a "$sock"
    expect_socket_home "$sock"
    export SSH_AUTH_SOCK=$sock
    {
        via -- timeout 20 ssh-add "$TMP/key" 2>&1 | sed "s|$TMP|TMP|"
        via -- timeout 20 ssh-add -l | awk '{ print $1, $3, $4 }'
        cp "$TMP/data" "$d/data"
        # The public key only: the private half must come from the agent.
        via -- timeout 20 ssh-keygen -Y sign -f "$TMP/key.pub" -n file "$d/data" 2>&1 | sed "s|$d|D|"
        via -- timeout 20 ssh-keygen -Y check-novalidate -n file -f "$TMP/allowed" -s "$d/data.sig" <"$d/data" 2>&1 |
            sed "s|$TMP|TMP|"
        md5sum <"$d/data.sig" | cut -d' ' -f1
        via -- timeout 20 ssh-add -d "$TMP/key.pub" 2>&1 | sed "s|$TMP|TMP|"
        via -- timeout 20 ssh-add -l
    } >"$out" 2>&1 || true
    unset SSH_AUTH_SOCK
    kill "$AGENT" 2>/dev/null || true
    ended_within "$AGENT" 10000 || fail "$mode: ssh-agent did not end on SIGTERM"
    reap "$AGENT"
    show_answers "$mode" "$out" "$d"/*.out
}

one_run kernel "$TMP/k"
one_run udsfs "$MNT/ssh"
grep -q '^Good "file" signature' "$TMP/kernel.out" || fail "the kernel run made no good signature"
same_answers "ssh-agent" tail -n 5 "$TMP"/ssh-udsfs/*.out
ok "setgid ssh-agent, ssh-add and ssh-keygen -Y sign through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"
