#!/usr/bin/env bash
# run_go_tests.sh: Go's own standard-library tests of AF_UNIX (issue 29 item 6), built
# with `go test -c` (static binaries making raw system calls: they run through `udsfs
# run`'s seccomp supervisor), run on kernel sockets and through udsfs, compared test by
# test, subtests included (the `-test.v` lines `--- PASS|FAIL|SKIP: NAME`):
#   net      the 34 tests below: every test of the net package whose sockets include
#            AF_UNIX ones. Found by running each of the package's 299 tests alone on the
#            kernel with -test.v and reading the package's own socket statistics (printed
#            at the end: a "(local, ...)" line when the test opened an AF_UNIX socket
#            through the net package): 33 tests; and TestUnixConnReadMsgUnixSCMRights-
#            CloseOnExec, whose socketpair is a raw syscall.Socketpair the statistics miss
#            (grep Socketpair/AF_UNIX in the _test.go files finds no other).
#   syscall  TestSCMCredentials, TestPassFD, TestUnixRightsRoundtrip, TestSetsockoptString:
#            its tests that make or parse unix sockets (syscall_unix_test.go, creds_test.go).
#   os       has no socket cases (its tests neither import net nor call Socket/Socketpair).
# Passes:
#   kernel   root, TMPDIR a real directory; again as uid 65534 (the reference for `user`)
#   mount    root through udsfs, TMPDIR a directory in the mount (no route)
#   route    root through udsfs, TMPDIR=/tmp with `--route /tmp`
#   user     uid 65534 through udsfs on root's mount (--allow-other), its TMPDIR a route:
#            TestSCMCredentials then checks that claiming uid 0 in SCM_CREDENTIALS is
#            refused (EPERM), which root's run skips.
#   userns   the same uid 65534 in a user, pid and network namespace of its own
#            (`unshare -Urnpf --mount-proc`, loopback up), `udsfs run` started in them;
#            its reference is the kernel pass in the same namespaces (kernel_userns).
# TestSplice runs on the kernel and in the route pass only: its unix-to-tcp cases fail
# through udsfs (listed) and two of them wait 5 s each for a stuck client, and its 1 GiB
# tcp-to-tcp case costs seconds of CPU, in every pass (run under 3 minutes).
# A test (or subtest) that passes on the kernel must pass in each udsfs pass, or be
# listed for that pass in integration/run_go_tests_exceptions.txt with its reason; a
# listed test that passes fails the script (remove the line). A skip does not count as
# a pass. Guards: in each udsfs pass the mount made at least as many sockets (the
# generation of a probe socket, before and after) as the net package's statistics say
# the tests opened AF_UNIX sockets (syscall: TestPassFD's socketpair and
# TestSCMCredentials' stream and datagram ones, but only the stream one when the test
# fails: its t.Fatal ends it before the datagram pair, as in the userns pass, where
# it is listed; a failure in the datagram case counts 2 too: a lower bound), so calls
# left to the kernel fail the pass. The mount's count also holds the supervisor
# threads' act-for anchors (a udsfs socket each, made at a thread's first grant); the
# routed passes made the route's directory in the mount and leave no test directory
# there (rmdir of a routed directory removes its copy).
UDSFS_MOUNT_ARGS=(--allow-other)
source "$(dirname "$0")/lib.sh"

need_cmd go golang-go python3 python3 setpriv util-linux unshare util-linux ip iproute2
GOSRC=$(go env GOROOT)/src
[ -f "$GOSRC/net/unixsock_test.go" ] || fail "Go's sources are missing at $GOSRC (package golang-go)"
export GOCACHE=$ROOT/target/gocache GOPATH=$ROOT/target/gopath GOPROXY=off GOFLAGS=
for pkg in net syscall; do
    go test -c -o "$TMP/$pkg.test" "$pkg" || fail "go test -c $pkg failed"
done
ok "built Go's net and syscall tests ($(go env GOVERSION))"
EXCEPTIONS=$LIB_DIR/run_go_tests_exceptions.txt

NET_TESTS='TestConnAndListener|TestDialerControl|TestDialError|TestProtocolDialError|TestListenError'
NET_TESTS+='|TestProtocolListenError|TestFileConn|TestFileListener|TestFilePacketConn|TestListenConfigControl'
NET_TESTS+='|TestCloseRead|TestCloseWrite|TestConnClose|TestListenerClose|TestPacketConnClose'
NET_TESTS+='|TestZeroByteRead|TestPacketConn|TestConnAndPacketConn|TestSplice'
NET_TESTS+='|TestUnixListenerSpecificMethods|TestUnixConnSpecificMethods|TestUnixAndUnixpacketServer'
NET_TESTS+='|TestUnixgramServer|TestUnixgramAutobind|TestUnixAutobindClose|TestUnixgramLinuxAbstractLongName'
NET_TESTS+='|TestUnixConnReadMsgUnixSCMRightsCloseOnExec|TestReadUnixgramWithUnnamedSocket'
NET_TESTS+='|TestUnixgramZeroBytePayload|TestUnixgramZeroByteBuffer|TestUnixgramWrite'
NET_TESTS+='|TestUnixConnLocalAndRemoteNames|TestUnixgramConnLocalAndRemoteNames|TestUnixUnlink'
SYSCALL_TESTS='TestSCMCredentials|TestPassFD|TestUnixRightsRoundtrip|TestSetsockoptString'
[ "$(tr '|' '\n' <<<"$NET_TESTS" | wc -l)" -eq 34 ] || fail "the net list is not the 34 tests the header names"

# Other users reach the binaries, their TMPDIRs and the mount's root (routed binds make
# their directories there with the caller's credentials).
chmod o+x "$TMP"
chmod 1777 "$MNT" || fail "chmod 1777 the mount root"
mkdir -m 1777 "$TMP/k" "$TMP/kn" "$TMP/n" "$TMP/kns" "$TMP/ns"
mkdir -m 1777 "$MNT/t"

# go_pass PASS WHO TMPDIR [udsfs run options...]: runs both test binaries (in their
# package's source directory: the tests read testdata/ there) as WHO (root, a uid, or
# ns: uid 65534 in namespaces of its own),
# on the kernel without options, else through `udsfs run --front seccomp --mount $MNT
# OPTIONS`; their output in $TMP/PASS.PKG.out. Through udsfs, checks the mount made at
# least the sockets the tests opened.
go_pass() {
    local pass=$1 who=$2 tmpdir=$3 pkg tests before made want
    shift 3
    local pre=() run=()
    case $who in
    root) ;;
    ns) pre=(setpriv --reuid=65534 --regid=65534 --clear-groups unshare -Urnpf --mount-proc
        sh -c 'ip link set lo up && exec "$@"' sh) ;;
    *) pre=(setpriv --reuid="$who" --regid="$who" --clear-groups) ;;
    esac
    [[ $pass == kernel* ]] || run=("$UDSFS_BIN" run --front seccomp --mount "$MNT" "$@" --)
    for pkg in net syscall; do
        tests=$NET_TESTS
        [ "$pkg" == net ] || tests=$SYSCALL_TESTS
        [[ $pass == kernel* ]] || [ "$pass" == route ] || tests=${tests/|TestSplice/}
        [ ${#run[@]} -eq 0 ] || before=$(socket_generation)
        (cd "$GOSRC/$pkg" && TMPDIR=$tmpdir timeout 90 ${pre[@]+"${pre[@]}"} ${run[@]+"${run[@]}"} \
            "$TMP/$pkg.test" -test.run "^($tests)\$" -test.v -test.timeout 80s) \
            >"$TMP/$pass.$pkg.out" 2>&1 || true
        [ ${#run[@]} -gt 0 ] || continue
        made=$(($(socket_generation) - before - 1))
        if [ "$pkg" == net ]; then
            want=$(awk '/^\(local, / { for (i = 1; i <= NF; i++) if ($i ~ /^opened=/) { sub("opened=", "", $i); s += $i } } END { print s + 0 }' "$TMP/$pass.$pkg.out")
            [ "$want" -ge 50 ] || fail "$pass: the net tests opened only $want AF_UNIX sockets: $(tail -5 "$TMP/$pass.$pkg.out")"
        else
            # 2 sockets a socketpair the tests made (see the header).
            want=$(awk '/^--- PASS: TestSCMCredentials / { s += 4 } /^--- FAIL: TestSCMCredentials / { s += 2 }
                /^--- (PASS|FAIL): TestPassFD / { s += 2 } END { print s + 0 }' "$TMP/$pass.$pkg.out")
            [ "$want" -ge 4 ] || fail "$pass: TestSCMCredentials and TestPassFD did not run: $(tail -5 "$TMP/$pass.$pkg.out")"
        fi
        [ "$made" -ge "$want" ] ||
            fail "$pass: the mount made $made sockets while the $pkg tests opened $want AF_UNIX sockets: their calls did not reach udsfs"
        ok "$pass: $pkg tests done; the mount made $made sockets (the tests opened $want AF_UNIX sockets)"
    done
}

go_pass kernel root "$TMP/k"
go_pass kernel_user 65534 "$TMP/kn"
go_pass kernel_userns ns "$TMP/kns"
go_pass mount root "$MNT/t"
go_pass route root /tmp --route /tmp
go_pass user 65534 "$TMP/n" --route "$TMP/n"
go_pass userns ns "$TMP/ns" --route "$TMP/ns"

# The routed passes' tests bind in fresh directories below their TMPDIR, which the
# supervisor makes in the mount at a bind (below the route's own directory there), and
# their cleanup's RemoveAll removes there too (routed rmdir, as Linux leaves nothing).
for d in "$MNT/tmp" "$MNT/${TMP#/}/n" "$MNT/${TMP#/}/ns"; do
    [ -d "$d" ] || fail "$d is missing: the routed binds did not go to udsfs"
    left=$(find "$d" -mindepth 1 -maxdepth 1 -type d -name '[0-9]*' 2>/dev/null | wc -l)
    [ "$left" -eq 0 ] || fail "$left of the tests' directories were left in the mount at $d after their rmdir"
done
ok "routed binds made the routes' directories in the mount and left no test directory there"

# Test by test. An exceptions line is `PASSES NAME REASON`: PASSES a comma list of
# mount, route, user, userns (or *); NAME a test as -test.v names it, prefixed by its package
# (net.TestX/sub), or PREFIX/* for every test below PREFIX (one whose cases fail now and
# then: stale only when none of them failed). A parent that failed only because a
# child failed counts as that child (Go marks the parent failed).
exceptions_listed "$EXCEPTIONS" mount route user userns >"$TMP/listed" || exit 1
python3 - "$TMP" "$TMP/listed" <<'EOF'
import re, sys
tmp, listed = sys.argv[1], sys.argv[2]
line = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(")

def results(p):
    r = {}
    for pkg in ("net", "syscall"):
        for l in open(f"{tmp}/{p}.{pkg}.out", errors="replace"):
            m = line.match(l)
            if m:
                r[f"{pkg}.{m.group(2)}"] = m.group(1)
    return r

listed = [(set(p.split(",")), e) for p, e in (l.split() for l in open(listed))]

def covers(name, entry):
    return name.startswith(entry[:-1]) if entry.endswith("/*") else name == entry

bad = []
for p, ref in (("mount", "kernel"), ("route", "kernel"), ("user", "kernel_user"),
               ("userns", "kernel_userns")):
    k, u = results(ref), results(p)
    if p != "route":  # TestSplice runs in the route pass only
        k = {t: s for t, s in k.items() if not t.startswith("net.TestSplice")}
    mine = [e for ps, e in listed if p in ps]
    passed = [t for t, s in k.items() if s == "PASS"]
    if len(passed) < 50:
        bad.append(f"{ref}: only {len(passed)} tests passed on the kernel")
    excused = lambda t: any(covers(t, e) for e in mine)
    failing = {t for t in passed if u.get(t) != "PASS" and not excused(t)}
    # a parent failing because of excused children only (the deepest first)
    for t in sorted(failing, reverse=True):
        kids = [c for c in passed if c.startswith(t + "/") and u.get(c) != "PASS"]
        if u.get(t) == "FAIL" and kids and not [c for c in kids if c in failing]:
            failing.discard(t)
    got = sum(1 for t in passed if u.get(t) == "PASS")
    print(f"ok: {p}: {got} of {len(passed)} kernel passes ({ref}) pass through udsfs;"
          f" {len(mine)} lines of the exceptions file for {p}")
    for t in sorted(failing):
        bad.append(f"{p}: {t} passes on the kernel, {u.get(t, 'has no result')} through udsfs, not listed")
        pkg, name = t.split(".", 1)
        out = open(f"{tmp}/{p}.{pkg}.out", errors="replace").read().splitlines()
        at = [i for i, l in enumerate(out) if l == f"=== RUN   {name}"]
        for i in at[:1]:
            print(f"--- {p}: {t}:", *out[i:i + 10], sep="\n    ", file=sys.stderr)
    for e in mine:
        hit = [t for t in u if covers(t, e)]
        if not hit:
            bad.append(f"{p}: listed {e} ran neither there nor on the kernel (remove or rename the line)")
        elif all(u[t] == "PASS" for t in hit):
            bad.append(f"{p}: listed {e} passes now (remove the line, or {p} from it)")
if bad:
    sys.exit("FAIL: " + "\n      ".join(bad))
EOF
