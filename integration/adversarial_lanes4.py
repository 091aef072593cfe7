# adversarial_lanes4.py server PATH FLAG | client PATH FLAG: adversarial_lanes4.sh busyclose.
# server (A): accepts one connection on PATH, 5 one-byte ping-pongs (a lane), waits for the
# file FLAG (B holds its region's busy words up by then), then closes the connection: how
# long close took, then how long a new connection's accept and ping-pong took. client (B):
# connects, 5 ping-pongs, raises both busy words (header offsets 16 and 20) of every lane
# region its process maps, makes FLAG, and keeps them up for 3 s.
import ctypes, os, socket, sys, time
from lane_raw import lane_status  # copied beside this file
def say(*a): print(*a, flush=True)
mode, path, flag = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "server":
    l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    l.bind(path); os.chmod(path, 0o777); l.listen(4)
    say("listening")
    c, _ = l.accept()
    for _ in range(5):
        c.recv(1); c.send(b"s")
    lane = lane_status(c)
    for _ in range(3000):
        if os.path.exists(flag):
            break
        time.sleep(0.005)
    t0 = time.monotonic()
    c.close()
    took = time.monotonic() - t0
    say(f"A's close of B's connection: {'at once (<100 ms)' if took < 0.1 else f'slow ({took * 1000:.0f} ms)'} (lane {lane})")
    sys.exit(0)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(path)
for _ in range(5):
    c.send(b"c"); c.recv(1)
held = 0
for line in open("/proc/self/maps"):
    if "udsfs-lane" not in line or "rw" not in line.split()[1]:
        continue
    lo = int(line.split()[0].split("-")[0], 16)
    ctypes.c_uint32.from_address(lo + 16).value = 1
    ctypes.c_uint32.from_address(lo + 20).value = 1
    held += 1
open(flag, "w").close()
say(f"B holds the busy words of {held} lane regions (lane {lane_status(c)})")
time.sleep(3)
