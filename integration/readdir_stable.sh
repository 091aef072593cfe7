#!/usr/bin/env bash
# Directory listings read in chunks resume where they stopped, whatever
# changes between chunks: 3000 symlinks in a directory, a listing that has
# read its first entries, then the first 1000 names removed and 500 new ones
# added before it goes on. Every entry that stayed appears exactly once (with
# index cookies, the removals shifted 1000 entries past the reader), and a
# plain listing afterwards shows exactly what is there. Then the same for
# .udsfs/sock while sockets close.
source "$(dirname "$0")/lib.sh"

mkdir "$MNT/big"
py '
d = f"{M}/big"
for i in range(3000):
    os.symlink("t", f"{d}/a{i:05d}")
it = os.scandir(d)
first = [next(it).name for _ in range(50)]
for i in range(1000):
    os.unlink(f"{d}/a{i:05d}")
for i in range(500):
    os.symlink("t", f"{d}/z{i:05d}")
rest = [e.name for e in it]
seen = first + rest
dups = {n for n in seen if seen.count(n) > 1} if len(seen) != len(set(seen)) else set()
if dups:
    sys.exit(f"FAIL: listed twice: {sorted(dups)[:5]}")
stayed = {f"a{i:05d}" for i in range(1000, 3000)}
missing = stayed - set(seen)
if missing:
    sys.exit(f"FAIL: {len(missing)} entries that stayed were skipped, e.g. {sorted(missing)[:3]}")
print(f"ok: a listing across 1000 removals and 500 additions: {len(seen)} names, none twice, none that stayed skipped")
now = sorted(os.listdir(d))
want = sorted([f"a{i:05d}" for i in range(1000, 3000)] + [f"z{i:05d}" for i in range(500)])
if now != want:
    sys.exit(f"FAIL: a fresh listing has {len(now)} names, want {len(want)}")
print("ok: a fresh listing shows exactly the 2500 names there")
'

py '
fds = []
for _ in range(600):
    fds.append(os.open(f"{U}/dgram/clone", os.O_RDWR))
ids = [int(os.read(fd, 64)) for fd in fds]
it = os.scandir(f"{U}/sock")
first = [next(it).name for _ in range(20)]
for fd in fds[:300]:
    os.close(fd)
time.sleep(0.3)
rest = [e.name for e in it]
seen = first + rest
if len(seen) != len(set(seen)):
    sys.exit("FAIL: .udsfs/sock listed a socket twice")
stayed = {str(i) for i in ids[300:]}
if stayed - set(seen):
    sys.exit(f"FAIL: {len(stayed - set(seen))} open sockets skipped in .udsfs/sock")
print("ok: .udsfs/sock lists each open socket once while 300 others close")
'
