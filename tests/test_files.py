"""Files named on the command line are read with a size bound, only from regular files or pipes,
and as UTF-8 where text is expected (cluster/files.py), and each refusal is one line."""
from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from kreassign.cluster.files import read_bytes, read_text

from cli_helpers import SAMPLE, Kreassign


def test_a_regular_file_within_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(b"x" * 100)
    assert read_bytes(path, limit=100) == b"x" * 100
    with pytest.raises(OSError) as too_large:
        read_bytes(path, limit=99)
    assert too_large.value.errno == errno.EFBIG and "larger than 99 bytes" in str(too_large.value.strerror)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_are_refused_without_reading_them(device: str) -> None:
    with pytest.raises(OSError) as refused:
        read_bytes(device, limit=10)
    assert refused.value.errno == errno.ENODEV


def test_a_pipe_is_read_up_to_the_bound(tmp_path: Path) -> None:
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(b'{"version":1}'))
    writer.start()
    assert read_text(fifo, limit=1000) == '{"version":1}'
    writer.join()


def test_directories_and_bad_utf8(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        read_bytes(tmp_path, limit=10)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(OSError) as not_text:
        read_text(bad, limit=100)
    assert not_text.value.errno == errno.EILSEQ and "byte 7 is invalid" in str(not_text.value.strerror)


@pytest.mark.parametrize("argv", [
    ["plan", "--snapshot", "/dev/zero", "-f", "/dev/zero"],
    ["plan", "--snapshot", str(SAMPLE), "-f", "/dev/urandom"],
    ["--bootstrap-server", "127.0.0.1:1", "--verify", "--reassignment-json-file", "/dev/zero"],
    ["simulate", "--snapshot", str(SAMPLE), "-f", "/dev/zero"],  # refused before Spark starts, and before it says so
])
def test_devices_on_the_command_line_end_in_one_line(argv: list[str], kreassign: Kreassign) -> None:
    ran = kreassign.run(*argv)
    assert ran.code == 1
    text = (ran.out + ran.err).strip()
    assert len(text.splitlines()) == 1 and "not a regular file (a device or a socket)" in text


def test_a_snapshot_whose_topic_name_is_not_utf8(tmp_path: Path, kreassign: Kreassign) -> None:
    data = SAMPLE.read_bytes()
    at = data.index(b'"topic":"') + len(b'"topic":"')
    bad = tmp_path / "bad.json"
    bad.write_bytes(data[:at] + b"\xff\xfe" + data[at:])
    ran = kreassign.run("rebalance", "--snapshot", str(bad), "--write-plan", str(tmp_path / "p.json"))
    assert ran.code == 1
    assert ran.err.strip() == (f"Error: {bad}: partitions.topic holds a topic name that is not UTF-8 text (invalid "
                               "start byte at byte 0)")


def test_a_huge_topic_name_is_clipped_in_messages(tmp_path: Path, kreassign: Kreassign) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"' + "t" * 100_000 + '","partition":0,"replicas":[1,2,3]}]}')
    ran = kreassign.run("plan", "--snapshot", str(SAMPLE), "-f", str(plan))
    assert ran.code == 1 and len(ran.err) < 500 and "(100002 characters)" in ran.err


def test_simulate_checks_a_plan_that_is_not_utf8_before_it_announces_spark(tmp_path: Path, kreassign: Kreassign) -> None:
    bad = tmp_path / "plan.json"
    bad.write_bytes(b"\xff\xfe{")
    ran = kreassign.run("simulate", "--snapshot", str(SAMPLE), "-f", str(bad), "--throttle", "10MB/s")
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == f"Error: cannot read the plan {bad}: not UTF-8 text (byte 0 is invalid)\n"
