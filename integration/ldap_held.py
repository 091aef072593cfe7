# ldap_held.py SOCK [UDSFS_DIR LANE LANES_OUT]: one LDAP connection over the ldapi socket
# SOCK, in raw BER: a SASL EXTERNAL bind (slapd takes the identity from SO_PEERCRED),
# then the WhoAmI extended operation; prints the bind's result code and WhoAmI's answer.
# With UDSFS_DIR (the mount's .udsfs), after the bind it waits (2 s at most: slapd's
# worker asked for the lane when it read the bind) until the mount's sockets new since the
# start (the connection's two ends) all say LANE in their status, and writes what it saw
# to LANES_OUT (the udsfs run's guard, not compared).
import os, socket, sys, time

from udsfs_socks import lanes, sockets

sock_path = sys.argv[1]
udsfs_dir, want_lane, lanes_out = (sys.argv[2:5] + [None] * 3)[:3]


def ber(tag, body):
    n = len(body)
    if n < 0x80:
        head = bytes([n])
    else:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        head = bytes([0x80 | len(raw)]) + raw
    return bytes([tag]) + head + body


def message(msgid, op):
    return ber(0x30, ber(0x02, bytes([msgid])) + op)


def read_tlv(buf, at):
    tag, n = buf[at], buf[at + 1]
    at += 2
    if n & 0x80:
        k = n & 0x7F
        if len(buf) < at + k:
            raise IndexError("partial length")
        n = int.from_bytes(buf[at : at + k], "big")
        at += k
    return tag, buf[at : at + n], at + n


def recv_message(s):
    buf = b""
    while True:
        try:
            _, body, end = read_tlv(buf, 0)
            if end <= len(buf):
                return buf[:end]
        except IndexError:
            pass
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("slapd closed the connection")
        buf += chunk


def op_fields(msg):
    # LDAPMessage: messageID, protocolOp (its fields: resultCode, matchedDN, ...)
    _, msg, _ = read_tlv(msg, 0)
    _, _, at = read_tlv(msg, 0)
    tag, op, _ = read_tlv(msg, at)
    fields, at = [], 0
    while at < len(op):
        t, v, at = read_tlv(op, at)
        fields.append((t, v))
    return tag, fields


before = sockets(udsfs_dir) if udsfs_dir else set()
s = socket.socket(socket.AF_UNIX)
s.connect(sock_path)
# the empty initial response: the client asks for the identity the server sees
external = ber(0xA3, ber(0x04, b"EXTERNAL") + ber(0x04, b""))
s.sendall(message(1, ber(0x60, ber(0x02, b"\x03") + ber(0x04, b"") + external)))
tag, fields = op_fields(recv_message(s))
print("raw bind: op 0x%02x result %d" % (tag, fields[0][1][0]))
if udsfs_dir:
    end = time.monotonic() + 2
    while True:
        seen = lanes(udsfs_dir, {i for i, _ in sockets(udsfs_dir) - before})
        if (len(seen) >= 2 and all(l == want_lane for l in seen)) or time.monotonic() > end:
            break
        time.sleep(0.05)
    with open(lanes_out, "w") as f:
        f.write("held: %d new sockets, lanes %s\n" % (len(seen), " ".join(sorted(set(seen)))))
s.sendall(message(2, ber(0x77, ber(0x80, b"1.3.6.1.4.1.4203.1.11.3"))))
tag, fields = op_fields(recv_message(s))
value = [v for t, v in fields if t == 0x8B]
print("raw whoami: op 0x%02x result %d %s" % (tag, fields[0][1][0], value[0].decode() if value else "(none)"))
# UnbindRequest, then slapd closes: EOF
s.sendall(message(3, b"\x42\x00"))
print("raw unbind: EOF" if s.recv(100) == b"" else "raw unbind: data")
