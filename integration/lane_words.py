# lane_words.py PID PREFIX: the header words of every lane region process PID maps
# (memfd "udsfs-lane"; proto/src/lane/region.rs's layout): state, both busy words, and
# each direction's tail, fin, writer-waiting, daemon event, head, reader-waiting and
# event words, one line a region, each line begun by PREFIX. What a stuck connection's
# rings say, for the scripts' hang reports (lanes.sh, adversarial_through.sh).
import struct
import sys

pid, prefix = sys.argv[1], sys.argv[2]
mem = open(f"/proc/{pid}/mem", "rb")
for line in open(f"/proc/{pid}/maps"):
    if "udsfs-lane" not in line:
        continue
    mem.seek(int(line.split("-")[0], 16))
    h = mem.read(64 + 512)

    def w(off):
        return struct.unpack_from("I", h, off)[0]

    names = (("tail", 0), ("fin", 4), ("ww", 8), ("dev", 12), ("head", 128), ("rw", 132), ("sev", 136))
    dirs = [" ".join(f"{n}={w(64 + 256 * d + o)}" for n, o in names) for d in (0, 1)]
    print(f"{prefix}region {line.split()[0]} inode {line.split()[4]}: state {w(8)} busy {w(16)},{w(20)}; out: {dirs[0]}; in: {dirs[1]}")
