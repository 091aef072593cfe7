#!/usr/bin/env bash
# The kernel's own AF_UNIX selftests (linux-source-6.x, tools/testing/selftests/net/af_unix),
# once on kernel sockets and once through `udsfs run` on this script's mount, compared
# test by test: fails when a test that passes on the kernel does not pass through udsfs
# and is not listed in integration/kernel_selftests_exceptions.txt, and when a binary
# leaves sockets behind in the mount. The build is cached in target/kernel-selftests/.
source "$(dirname "$0")/lib.sh"

command -v gcc >/dev/null || fail "gcc is missing (.ci/run installs it)"
compgen -G '/usr/src/linux-source-*.tar.xz' >/dev/null ||
    fail "no /usr/src/linux-source-*.tar.xz: apt-get install linux-source-6.12 (.ci/run does)"
[ -e "$(dirname "$UDSFS_BIN")/libudsfs_preload.so" ] ||
    fail "libudsfs_preload.so is not next to $UDSFS_BIN: build the workspace (cargo build)"

# The harness gives each test 30 s; 60 s bounds a binary (the slowest, scm_rights,
# sleeps 1 s in each of its 20 teardowns).
python3 "$ROOT/scripts/kernel_selftests" --udsfs "$UDSFS_BIN" --mount "$MNT" --timeout 60 \
    --exceptions "$ROOT/integration/kernel_selftests_exceptions.txt" ||
    fail "kernel selftests through udsfs differ from the kernel beyond the listed exceptions (table above)"
ok "every kernel selftest that passes on the kernel passes through udsfs or is a listed exception"
