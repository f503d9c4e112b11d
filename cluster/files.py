"""Files named on the command line, read the same careful way everywhere: at most a stated size,
only from a regular file or a pipe (never a device such as /dev/zero, which would never end), and
as UTF-8 where text is expected.

Problems come back as OSError with a readable `strerror`, so every caller's existing handling of
a missing or unreadable file also covers a device, a file too large and (`read_text`) bytes that
are not UTF-8.
"""
from __future__ import annotations

import errno
import os
import stat

MiB = 1024 * 1024
PLAN_LIMIT = 512 * MiB
"""a reassignment or topics JSON: a million partitions take about 100 MiB"""
SNAPSHOT_LIMIT = 4096 * MiB
"""a snapshot: JSON or Parquet of the largest clusters (Parquet of 10 million partitions: ~1 GiB)"""
JOURNAL_LIMIT = 1024 * MiB
"""an execution journal: its plan's targets, first replicas and steps (twice a plan's size at most)"""
SMALL_LIMIT = 16 * MiB
"""client properties, PEM files, canary baselines, metric-name maps"""


def _unit(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit >= MiB else f"{limit} bytes"


def read_bytes(path: str | os.PathLike[str], *, limit: int) -> bytes:
    """The bytes of a regular file or a pipe, refusing more than `limit`.

    Raises:
        OSError: the usual ones (missing, a directory, permission), ENODEV for a device or socket,
            EFBIG for more than `limit` bytes.
    """
    with open(path, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory")
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
            raise OSError(errno.ENODEV, "not a regular file (a device or a socket)")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {_unit(limit)}, the most kreassign reads from such a file")
    return data


def read_text(path: str | os.PathLike[str], *, limit: int) -> str:
    """`read_bytes` decoded as UTF-8.

    Raises:
        OSError: as `read_bytes`, and EILSEQ for bytes that are not UTF-8 (with the offset).
    """
    data = read_bytes(path, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OSError(errno.EILSEQ, f"not UTF-8 text (byte {exc.start} is invalid)") from None
