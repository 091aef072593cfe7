#!/usr/bin/env bash
# udsfs graph: the socket graph as Graphviz DOT, on a mount whose collector runs only
# when asked (--gc-manual), so garbage stays to be seen. Three known shapes:
#   1. a dead cycle: each end of a stream pair in flight in the other's queue, every
#      handle closed: both nodes marked DEAD, two red "in queue of" edges;
#   2. a listener with two embryos (connections not yet accepted): two dashed
#      "pending" edges from the listener to nodes in state embryo;
#   3. a passed socket that is alive: C in flight in dgram receiver R's queue, a blue
#      "in queue of" edge C -> R, C not dead.
# The DOT renders with `dot -Tsvg`; after `echo run > .udsfs/gc` the cycle is gone
# from the graph and the rest stays. UDSFS_GRAPH_PNG=FILE also saves a PNG rendering of
# the graph before the collection (the README's picture comes from it).
UDSFS_MOUNT_ARGS=(--gc-manual)
UDSFS_NO_MOUNT=1
source "$(dirname "$0")/lib.sh"
command -v dot >/dev/null || fail "dot is missing (package graphviz; .ci/run installs it)"
udsfs_mount "${UDSFS_MOUNT_ARGS[@]}"

graph() { "$UDSFS_BIN" graph "$MNT"; }
has() { # has WHAT REGEX: the graph has a line matching REGEX
    grep -Eq -- "$2" <<<"$G" || fail "$1: no line matching '$2' in the graph:
$G"
    ok "$1"
}
hasnt() {
    ! grep -Eq -- "$2" <<<"$G" || fail "$1: a line matches '$2' in the graph:
$G"
    ok "$1"
}

# ---- 1. a dead cycle
new_pair Y stream
exec {yn}>"$U/sock/$Y_N/msg" {ym}>"$U/sock/$Y_M/msg"
printf 'len=1 rights=%s\na' "$Y_N" >&"$yn" || fail "send $Y_N over itself"
printf 'len=1 rights=%s\nb' "$Y_M" >&"$ym" || fail "send $Y_M over itself"
close_fd "$yn"
close_fd "$ym"
close_fd "$Y_FD"

# ---- 2. a listener with two embryos
new_sock L stream
ctl "$L_FD" "bind lst.sock" || fail "bind lst.sock"
ctl "$L_FD" "listen 5" || fail "listen"
new_sock C1 stream
ctl "$C1_FD" "connect lst.sock" || fail "connect 1"
new_sock C2 stream
ctl "$C2_FD" "connect lst.sock" || fail "connect 2"

# ---- 3. a live socket in flight
new_sock R dgram
ctl "$R_FD" "bind @graph_rcv" || fail "bind @graph_rcv"
new_sock T dgram
ctl "$T_FD" "connect @graph_rcv" || fail "connect @graph_rcv"
new_sock C stream
printf 'len=1 rights=%s\nc' "$C" >"$U/sock/$T/msg" || fail "pass $C"
close_fd "$C_FD"

G=$(graph) || fail "udsfs graph failed"
say "$G"
head -n1 <<<"$G" | grep -q '^digraph udsfs {$' || fail "the graph does not start with 'digraph udsfs {'"

has "dead cycle: $Y_N is marked dead" "^  s$Y_N \[label=\"$Y_N stream.*DEAD"
has "dead cycle: $Y_M is marked dead" "^  s$Y_M \[label=\"$Y_M stream.*DEAD"
has "dead cycle: $Y_N in the queue of $Y_M (red)" "^  s$Y_N -> s$Y_M \[label=\"in queue of\", color=red"
has "dead cycle: $Y_M in the queue of $Y_N (red)" "^  s$Y_M -> s$Y_N \[label=\"in queue of\", color=red"

has "listener $L is drawn as listening on lst.sock" "^  s$L \[label=\"$L stream\\\\nlistening\\\\nlst.sock\""
embryos=$(grep -Eo "^  s$L -> s[0-9]+ \[label=\"pending\"" <<<"$G" | grep -Eo 's[0-9]+ \[' | tr -d 's [')
expect_eq "pending edges from $L" "$(wc -w <<<"$embryos")" 2
for e in $embryos; do
    has "embryo $e is in state embryo" "^  s$e \[label=\"$e stream\\\\nembryo"
    hasnt "embryo $e is not dead" "^  s$e \[.*DEAD"
done
has "client $C1 is connected to an embryo" "^  s$C1 -> s($(tr ' ' '|' <<<"${embryos//$'\n'/ }")) \[label=\"connected\"|^  s($(tr ' ' '|' <<<"${embryos//$'\n'/ }")) -> s$C1 \[label=\"connected\""

has "passed socket $C in the queue of $R (blue)" "^  s$C -> s$R \[label=\"in queue of\", color=blue"
has "passed socket $C is in flight" "^  s$C \[label=\"$C stream\\\\nunconnected\\\\nin flight x1\""
hasnt "passed socket $C is not dead" "^  s$C \[.*DEAD"
has "sender $T has $R as its peer" "^  s$T -> s$R \[label=\"peer\"\]"

svg=$(graph | dot -Tsvg) || fail "dot -Tsvg failed on the graph"
grep -q '<svg' <<<"$svg" || fail "dot -Tsvg gave no SVG"
for n in "$Y_N" "$Y_M" "$L" "$C" "$R"; do
    grep -q "<title>s$n</title>" <<<"$svg" || fail "the SVG has no node s$n"
done
if [ -n "${UDSFS_GRAPH_PNG:-}" ]; then
    graph | dot -Tpng -Gdpi=72 >"$UDSFS_GRAPH_PNG" || fail "dot -Tpng"
fi
ok "dot -Tsvg renders the graph ($(wc -c <<<"$svg") bytes of SVG, every node there)"

echo run >"$U/gc" || fail "echo run > .udsfs/gc"
G=$(graph)
hasnt "after a collection the dead $Y_N is gone" "^  s$Y_N \["
hasnt "after a collection the dead $Y_M is gone" "^  s$Y_M \["
has "after a collection the live passed socket $C stays" "^  s$C -> s$R \[label=\"in queue of\", color=blue"
has "after a collection the listener $L stays" "^  s$L \["
