#!/usr/bin/env bash
# run_dbus.sh: a dbus-daemon (its own bus, listening on a unix socket) with a service in
# Python (dbus-python), called by dbus-send, gdbus, busctl and a Python client that
# passes a file descriptor and asks the bus for GetConnectionCredentials; on kernel
# sockets, then every program through `udsfs run --mount $MNT`: the same answers both
# times, the bus socket a udsfs socket, and nothing from the library on the daemon's
# stderr. On d20381b GetConnectionCredentials lacked UnixGroupIDs through udsfs
# (SO_PEERGROUPS: ENOPROTOOPT) and the daemon's stderr had a line for every SO_PEERSEC
# it asked for (ENOPROTOOPT on Linux too, without a security module).
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd dbus-daemon dbus-daemon
need_cmd dbus-send dbus-bin
need_cmd gdbus libglib2.0-bin
need_cmd busctl systemd
/usr/bin/python3 -c 'import dbus, dbus.mainloop.glib, gi' 2>/dev/null || fail "python3-dbus is not installed"

cat >"$TMP/service.py" <<'EOF2'
import os, sys
import dbus, dbus.service, dbus.mainloop.glib
from gi.repository import GLib

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])

class Test(dbus.service.Object):
    @dbus.service.method("org.udsfs.Test", in_signature="s", out_signature="s")
    def Echo(self, s):
        return "echo: " + s

    @dbus.service.method("org.udsfs.Test", in_signature="h", out_signature="s")
    def ReadFd(self, fd):
        f = os.fdopen(fd.take(), "rb")
        return "read from the passed fd: " + f.read().decode()

    @dbus.service.method("org.udsfs.Test", in_signature="", out_signature="uau")
    def Ids(self):
        return dbus.UInt32(os.getpid()), dbus.Array(sorted(os.getgroups()), signature="u")

    @dbus.service.method("org.udsfs.Test", in_signature="", out_signature="")
    def Quit(self):
        GLib.idle_add(loop.quit)

name = dbus.service.BusName("org.udsfs.Test", bus)
Test(bus, "/t")
loop = GLib.MainLoop()
print("serving", flush=True)
loop.run()
EOF2

cat >"$TMP/client.py" <<'EOF2'
import os, sys, tempfile
import dbus

bus = dbus.bus.BusConnection(sys.argv[1])
t = bus.get_object("org.udsfs.Test", "/t")
with tempfile.TemporaryFile() as f:
    f.write(b"a file's bytes")
    f.seek(0)
    print(t.ReadFd(dbus.types.UnixFd(f), dbus_interface="org.udsfs.Test"))
pid, groups = t.Ids(dbus_interface="org.udsfs.Test")
dbusobj = bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus")
owner = dbusobj.GetNameOwner("org.udsfs.Test", dbus_interface="org.freedesktop.DBus")
creds = dbusobj.GetConnectionCredentials(owner, dbus_interface="org.freedesktop.DBus")
print("credentials:", ",".join(sorted(k for k in creds if k != "LinuxSecurityLabel")))
print("ProcessID is the service's:", creds.get("ProcessID") == pid)
print("UnixUserID:", int(creds.get("UnixUserID", -1)))
print("UnixGroupIDs:", sorted(int(g) for g in creds.get("UnixGroupIDs", [])),
      "service's getgroups():", sorted(int(g) for g in groups))
EOF2

# one_run MODE DIR: the bus and its clients with the bus socket in DIR, on MODE's sockets;
# the answers go to $TMP/MODE.out.
one_run() {
    local mode=$1 dir=$2 d=$TMP/dbus-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$d" "$dir"
    local sock=$dir/bus addr=unix:path=$dir/bus
    cat >"$d/bus.conf" <<EOF2
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>$addr</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF2
    run_cmd -- dbus-daemon --config-file="$d/bus.conf" --nofork --nopidfile
    start_bg BUS "${RUN_CMD[@]}" >"$d/bus.out" 2>"$d/bus.err"
    wait_listening "$sock"
    expect_socket_home "$sock"
    # Supplementary groups of its own, which the bus can learn only from
    # SO_PEERGROUPS (its fallback, getgrouplist of the uid, gives root's: 0).
    run_cmd -- setpriv --groups 4,24,27 -- /usr/bin/python3 "$TMP/service.py" "$addr"
    start_bg SERVICE "${RUN_CMD[@]}" >"$d/service.out" 2>&1
    local i
    for i in $(seq 1 200); do
        grep -q serving "$d/service.out" && break
        sleep 0.05
    done
    grep -q serving "$d/service.out" || fail "$mode: the service did not start: $(cat "$d/service.out")"
    {
        via -- timeout 20 dbus-send --bus="$addr" --print-reply=literal --dest=org.udsfs.Test /t org.udsfs.Test.Echo string:dbus-send
        via -- timeout 20 gdbus call --address "$addr" --dest org.udsfs.Test --object-path /t --method org.udsfs.Test.Echo gdbus
        via -- timeout 20 busctl --address="$addr" call org.udsfs.Test /t org.udsfs.Test Echo s busctl
        via -- timeout 20 /usr/bin/python3 "$TMP/client.py" "$addr"
        via -- timeout 20 dbus-send --bus="$addr" --print-reply=literal --dest=org.udsfs.Test /t org.udsfs.Test.Quit
    } >"$out" 2>&1 || true
    ended_within "$SERVICE" 10000 || fail "$mode: the service did not quit"
    kill -TERM "$BUS" 2>/dev/null || true
    wait "$BUS" 2>/dev/null || true
    show_answers "$mode" "$out" "$d"/*.out "$d/bus.err"
}

one_run kernel "$TMP/k"
one_run udsfs "$MNT/dbus"
grep -q 'UnixGroupIDs: \[.*4, 24, 27\]' "$TMP/kernel.out" ||
    fail "the kernel run did not give the service's groups"
same_answers "the bus"
ok "dbus-daemon, its service and four clients through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"
