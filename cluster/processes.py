"""Whether a process still runs: shared by the execution lock, the sandbox daemon and the local
Spark cluster, which all record the pids of processes that may have died without cleaning up."""
from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True while `pid` runs. A child of ours that has exited is reaped first (a zombie would
    otherwise still answer signal 0); a process of another user counts as alive."""
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
