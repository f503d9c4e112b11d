"""Files only their owner may read: every state file the sandbox writes may hold credentials
(stored SCRAM keys, client properties) or client records, so all are created 0600."""
from __future__ import annotations

import os
from pathlib import Path

PRIVATE = 0o600


def write_private(path: Path, data: bytes | str) -> None:
    """Write a file created 0600 (never briefly readable by others)."""
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE)
    try:
        os.fchmod(fd, PRIVATE)
        os.write(fd, raw)
    finally:
        os.close(fd)
