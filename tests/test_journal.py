"""The execution journal: stable plan ids, crash-safe writes, round trips, damaged files."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kreassign.cluster.errors import JournalError
from kreassign.cluster.model import PartitionTarget, TopicPartition
from kreassign.execute import journal as journal_mod
from kreassign.execute.journal import JournalStore, journal_root, plan_hash, write_atomically

A = PartitionTarget("foo", 0, (1, 2))
B = PartitionTarget("bar", 3, (2, 3), ("any", "/data/b"))


def test_plan_hash_ignores_order_and_sees_every_detail() -> None:
    assert plan_hash([A, B]) == plan_hash([B, A])
    assert plan_hash([A, B]) != plan_hash([A, PartitionTarget("bar", 3, (2, 3))])
    assert plan_hash([A]) != plan_hash([PartitionTarget("foo", 0, (2, 1))])
    assert plan_hash([PartitionTarget("foo", 0, (9,)), A]) == plan_hash([A])  # later duplicate wins
    assert len(plan_hash([A])) == 16


def test_journal_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KREASSIGN_JOURNAL_DIR", raising=False)
    assert journal_root() == tmp_path / "home" / ".kreassign" / "journal"
    monkeypatch.setenv("KREASSIGN_JOURNAL_DIR", str(tmp_path / "env"))
    assert journal_root() == tmp_path / "env"
    assert journal_root(tmp_path / "flag") == tmp_path / "flag"


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    store = JournalStore(tmp_path)
    journal = store.create(cluster_id="clu/ster 1", targets=[A, B], command="execute",
                           original={A.tp: (1, 3), B.tp: (2, 4)},
                           previous_brokers={1: {"leader.replication.throttled.rate": "5", "x": None}},
                           previous_topics={"foo": {"leader.replication.throttled.replicas": None}},
                           unreadable_brokers=[4], planned_brokers={2: {"a": "1"}},
                           planned_topics={"foo": {"b": ""}}, options={"additional": True})
    journal.record("set-topic-throttles", "intent", topics=["foo"])
    journal.update(pending_brokers={4: {"a": None}}, submitted=[A.tp], applied_brokers=[2])
    assert journal.path == tmp_path / "clu_ster_1" / f"{plan_hash([A, B])}.json"
    loaded = store.load(journal.path)
    for name in ("cluster_id", "plan_hash", "created_at", "command", "state", "targets", "original",
                 "previous_brokers", "previous_topics", "unreadable_brokers", "planned_brokers",
                 "planned_topics", "applied_brokers", "pending_brokers", "submitted", "options", "steps"):
        assert getattr(loaded, name) == getattr(journal, name), name
    assert loaded.last_status("set-topic-throttles") == "intent" and not loaded.done("set-topic-throttles")
    assert store.find("clu/ster 1", [B, A]) is not None and store.find("other", [A, B]) is None


def test_writes_are_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "j" / "x.json"
    write_atomically(path, "old\n")

    def crash(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(journal_mod.os, "replace", crash)
    with pytest.raises(OSError):
        write_atomically(path, "new\n")
    assert path.read_text() == "old\n"
    assert os.listdir(path.parent) == ["x.json"]  # the temporary file is gone


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "cannot read the journal"),
    ('{"format": "something-else"}', "is not a kreassign journal"),
    ('[1, 2]', "is not a kreassign journal"),
    ('{"format": "kreassign-journal/1", "cluster_id": "c"}', "is damaged"),
])
def test_damaged_journals_are_reported(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(JournalError, match=message):
        JournalStore(tmp_path).load(path)
    with pytest.raises(JournalError, match="no journal at"):
        JournalStore(tmp_path).load(tmp_path / "missing.json")


@pytest.mark.parametrize(("path", "message"), [
    ("/dev/urandom", "cannot read the journal /dev/urandom: not a regular file (a device or a socket)"),
    ("/dev/zero", "cannot read the journal /dev/zero: not a regular file (a device or a socket)"),
])
def test_a_device_given_as_journal_is_refused_without_reading_it(tmp_path: Path, path: str, message: str) -> None:
    """The CLI fuzzer's `resume --journal /dev/urandom` read until the process had 5.9 GB."""
    with pytest.raises(JournalError) as refused:
        JournalStore(tmp_path).load(path)
    assert str(refused.value) == message


def test_a_journal_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"format": "\xff"}')
    with pytest.raises(JournalError) as refused:
        JournalStore(tmp_path).load(path)
    assert str(refused.value) == f"cannot read the journal {path}: not UTF-8 text (byte 12 is invalid)"


def test_a_long_journal_path_is_named_whole(tmp_path: Path) -> None:
    # the operator needs the path to act on it: paths are cut only past PATH_CLIP characters
    folder = tmp_path / ("d" * 120)
    folder.mkdir()
    path = folder / "bad.json"
    path.write_bytes(b"\xff")
    with pytest.raises(JournalError) as refused:
        JournalStore(folder).load(path)
    assert str(path) in str(refused.value) and len(str(path)) > 120

def test_open_journals_newest_first(tmp_path: Path) -> None:
    ticks = iter(range(100))
    from datetime import datetime, timezone

    store = JournalStore(tmp_path, now=lambda: datetime.fromtimestamp(next(ticks), timezone.utc))
    first = store.create(cluster_id="c", targets=[A], command="execute")
    second = store.create(cluster_id="c", targets=[B], command="execute")
    store.create(cluster_id="c", targets=[A, B], command="execute").set_state("finished")
    assert [j.path for j in store.journals("c", open_only=True)] == [second.path, first.path]
    assert len(store.journals("c")) == 3 and store.journals("nobody") == []
    data = json.loads(first.path.read_text())
    assert data["format"] == "kreassign-journal/1" and data["targets"][0]["log_dirs"] == ["any", "any"]
    assert TopicPartition("foo", 0) in store.load(first.path).target_of()
