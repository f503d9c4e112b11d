"""Local process bookkeeping shared by the execution lock, the sandbox daemon and the local Spark
cluster: where they keep their state, and whether a recorded pid still runs."""
from __future__ import annotations

import os
from pathlib import Path


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


def default_state_dir(component: str) -> Path:
    """`$XDG_STATE_HOME/kreassign/<component>`, or `~/.local/state/kreassign/<component>`."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "kreassign" / component
