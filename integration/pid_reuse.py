# pid_reuse.py: a new process given a dead one's pid, as a busy machine would give it in
# time (the pid-reuse attacks: adversarial_fds.sh §7, adversarial_pins.py's reuser).
# Copied beside its user.
import os
import signal
import time


def fork_with_pid(pid, tries):
    """A child asleep 30 s whose pid is `pid`, made by root through ns_last_pid; None
    when other processes took the number all `tries` times."""
    for _ in range(tries):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        child = os.fork()
        if child == 0:
            time.sleep(30)
            os._exit(0)
        if child == pid:
            return child
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    return None
