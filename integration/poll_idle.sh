#!/usr/bin/env bash
# Issue 11, defect 3: poll waiters do not pile up on an idle socket. 100,000
# poll(2) calls on a stream socket where nothing happens, each asking the
# daemon for a notification (the kernel sets FUSE_POLL_SCHEDULE_NOTIFY when
# the caller waits; POLLOUT makes each call return at once), must grow the
# daemon's VmRSS by less than 1 MB. The socket still wakes a later poller.
source "$(dirname "$0")/lib.sh"

new_pair P stream
ok "stream pair $P_N-$P_M"

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status"; }

py '
import select
A, B, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(f"{U}/sock/{A}/data", os.O_RDWR)
p = select.poll()
p.register(fd, select.POLLIN | select.POLLOUT)
for _ in range(2000):
    p.poll(1000)
with open("warm", "w") as f:
    f.write("1")
while not os.path.exists("go"):
    time.sleep(0.01)
t0 = time.time()
for _ in range(calls):
    ev = p.poll(1000)
    if ev != [(fd, select.POLLOUT)]:
        sys.exit(f"FAIL: poll on an idle socket gave {ev}")
print(f"ok: {calls} polls in {time.time() - t0:.1f} s")
open("done", "w").write("1")
# The socket still wakes a poller waiting for input.
q = select.poll()
q.register(fd, select.POLLIN)
w = os.open(f"{U}/sock/{B}/data", os.O_WRONLY)
def later():
    time.sleep(0.3)
    os.write(w, b"x")
threading.Thread(target=later, daemon=True).start()
t0 = time.time()
ev = q.poll(5000)
if ev != [(fd, select.POLLIN)]:
    sys.exit(f"FAIL: a poller waiting for input got {ev}")
print(f"ok: a poller waiting for input is woken ({time.time() - t0:.2f} s)")
' "$P_N" "$P_M" 100000 &
poller=$!
for _ in $(seq 1000); do [ -e warm ] && break; sleep 0.05; done
[ -e warm ] || fail "the poller did not warm up"
before=$(rss_kb)
touch go
wait "$poller" || fail "the poller failed"
after=$(rss_kb)
grown=$((after - before))
say "daemon VmRSS: $before kB before, $after kB after 100000 polls (+$grown kB)"
[ "$grown" -lt 1024 ] || fail "100000 polls on an idle socket grew the daemon by $grown kB (limit 1024 kB)"
ok "100000 polls grow the daemon by less than 1 MB"
