#!/usr/bin/env bash
# run_faults.sh: unmodified programs under timed faults, through `udsfs run --mount
# $MNT`, the rules written to $U/faults (docs/faults.md):
# 1. `curl --unix-socket` against a Python HTTP server (http_upstream.py) with `latency latency=100` on the
#    requests: every request succeeds and takes >= 100 ms;
# 2. a Python asyncio client and server exchange 1 MiB, echoed back intact, under
#    `slicer average_size=32 size_variation=31` on both directions.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd curl curl

add_rule() { # add_rule LINE: one rule into $U/faults
    printf '%s\n' "$1" >"$U/faults" || fail "writing '$1' to $U/faults"
    ok "rule added: $1"
}

mkdir "$MNT/www" "$MNT/run"
SOCK=$MNT/www/http.sock
REQUESTS=3

# ---- 1. curl under latency
add_rule "name www/http.sock up latency latency=100"
serve SERVER "$SOCK" "$TMP/server.out" -- python3 "$LIB_DIR/http_upstream.py" "$SOCK" "$REQUESTS"
expect_socket_home "$SOCK"
for i in $(seq "$REQUESTS"); do
    t0=$(now_ms)
    body=$(via -- curl --silent --show-error --fail --max-time 30 --unix-socket "$SOCK" "http://localhost/r$i")
    ms=$(($(now_ms) - t0))
    expect_eq "GET /r$i body" "$body" "upstream saw /r$i"
    say "request $i under latency 100: $ms ms"
    [ "$ms" -ge 100 ] || fail "request $i took $ms ms under a 100 ms latency"
done
ok "curl: $REQUESTS requests succeeded, each >= 100 ms"
ended_within "$SERVER" 10000 || fail "the server did not exit: $(cat "$TMP/server.out")"
reap "$SERVER"
expect_eq "server exit status" "$REAPED_STATUS" 0
printf 'clear\n' >"$U/faults" || fail "clear $U/faults"

# ---- 2. asyncio under slicer
ECHO=$MNT/run/echo.sock
cat >"$TMP/echo.py" <<'EOF'
import asyncio, hashlib, os, sys

SIZE = 1 << 20

async def serve(path, ready):
    async def handle(reader, writer):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()
    server = await asyncio.start_unix_server(handle, path)
    ready.set()
    return server

async def main(path):
    ready = asyncio.Event()
    server = await serve(path, ready)
    await ready.wait()
    reader, writer = await asyncio.open_unix_connection(path)
    blob = os.urandom(SIZE)
    async def send():
        for i in range(0, SIZE, 4096):
            writer.write(blob[i:i + 4096])
            await writer.drain()
        writer.write_eof()
    sender = asyncio.create_task(send())
    got, reads = bytearray(), 0
    while len(got) < SIZE:
        piece = await reader.read(65536)
        if not piece:
            break
        got += piece
        reads += 1
    await sender
    writer.close()
    server.close()
    same = hashlib.sha256(got).digest() == hashlib.sha256(blob).digest()
    print(f"echoed {len(got)} bytes in {reads} reads, intact={same}", flush=True)
    sys.exit(0 if same and len(got) == SIZE else 1)

asyncio.run(main(sys.argv[1]))
EOF
add_rule "name run/echo.sock slicer average_size=32 size_variation=31 seed=1"
out=$(via -- timeout -k 5 300 python3 "$TMP/echo.py" "$ECHO") || fail "asyncio echo under slicer: $out"
say "$out"
grep -q "echoed 1048576 bytes" <<<"$out" || fail "asyncio echo: $out"
listed=$(cat "$U/faults")
grep -q "slicer" <<<"$listed" || fail "the slicer rule is not listed: $listed"
injected=$(sed -n 's/.*slicer.*injected=\([0-9]*\).*/\1/p' <<<"$listed")
[ "${injected:-0}" -gt 0 ] || fail "the slicer rule never acted: $listed"
ok "asyncio: 1 MiB echoed intact under slicer (injected=$injected)"
