# udsfs_socks.py: the mount's sockets as the test scripts' raw clients see them
# (ldap_held.py for run_slapd.sh, run_uwsgi.sh's held.py): copied beside its user.
import os


def sockets(udsfs_dir):
    """The sockets of .udsfs/sock now, each its number and its directory's inode:
    numbers are reused as soon as a socket is released, inodes are not."""
    d = os.path.join(udsfs_dir, "sock")
    out = set()
    for i in os.listdir(d):
        try:
            out.add((i, os.lstat(os.path.join(d, i)).st_ino))
        except OSError:
            pass
    return out


def lanes(udsfs_dir, ids):
    """The lane= words of the status of the sockets numbered `ids` still there."""
    out = []
    for i in ids:
        try:
            st = open(os.path.join(udsfs_dir, "sock", i, "status")).read().split("\n")
        except OSError:
            continue
        out += [l[5:] for l in st if l.startswith("lane=")]
    return out
