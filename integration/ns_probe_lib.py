"""The pieces the network-namespace probes share (adversarial_netns_caps.sh,
adversarial_netns_reuse.sh): each script copies this file beside its probe in
$TMP, where the probe's other users can read it."""

import errno
import os
import socket
import sys
import time


def res(f):
    """f()'s value, "ok" for None, or the errno's name it raised."""
    try:
        r = f()
        return "ok" if r is None else r
    except OSError as e:
        return errno.errorcode[e.errno]


def on_udsfs():
    """Whether this process's sockets are udsfs's (a socketpair's file)."""
    a, _ = socket.socketpair()
    return "/.udsfs/sock/" in os.readlink(f"/proc/self/fd/{a.fileno()}")


def stream():
    return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)


def wait_for(path):
    for _ in range(600):
        if os.path.exists(path):
            return
        time.sleep(0.05)
    sys.exit(f"{path} never came")
