"""The execution journal: a local, crash-safe record of one reassignment run.

One JSON file per cluster and plan (`<dir>/<cluster-id>/<plan-hash>.json`). Before kreassign
changes anything it records the throttle configs that already exist; around each step it writes
an "intent" entry before and a "done" (or "failed") entry after. Every write goes to a temporary
file that is fsync'd and atomically renamed over the journal, so a crash (Ctrl-C, kill -9, power
loss) leaves either the old or the new version, never a torn one. `resume` and `abort` read it.

Every write is a compare-and-swap on the journal's `version`: under a lock on a side file the
version on disk must still be the one this process read or wrote last, so a stale writer (a run
that lost the execution lock, see `execute.lock`) cannot overwrite a newer state.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from kreassign.cluster.errors import PATH_CLIP, JournalError, KreassignError, clip
from kreassign.cluster.files import JOURNAL_LIMIT, read_text
from kreassign.cluster.model import PartitionTarget, TopicPartition
from kreassign.execute.errors import JournalConflict

FORMAT = "kreassign-journal/1"
ENV_JOURNAL_DIR = "KREASSIGN_JOURNAL_DIR"
UNKNOWN_CLUSTER = "unknown-cluster"

State = Literal["running", "submitted", "clearing", "finished", "aborted", "rolled-back"]
OPEN_STATES: tuple[State, ...] = ("running", "submitted", "clearing")
Status = Literal["intent", "done", "failed"]


def journal_root(override: str | os.PathLike[str] | None = None) -> Path:
    """Where journals live: `override`, else $KREASSIGN_JOURNAL_DIR, else ~/.kreassign/journal."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get(ENV_JOURNAL_DIR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".kreassign" / "journal"


def plan_hash(targets: Iterable[PartitionTarget]) -> str:
    """A short stable id for a plan: the same partitions, replicas and log dirs give the same hash,
    whatever the order of the file (a later duplicate wins, as in Kafka's map)."""
    by_tp = {t.tp: t for t in targets}
    canonical = [[t.topic, t.partition, list(t.replicas), list(t.dirs())]
                 for _, t in sorted(by_tp.items())]
    digest = hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode("utf-8"))
    return digest.hexdigest()[:16]


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _stamp(now: Callable[[], datetime]) -> str:
    return now().astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Step:
    """One journal entry: a step's intent before it runs, and its outcome after."""

    step: str
    status: Status
    at: str
    detail: Mapping[str, Any] = field(default_factory=dict)


BrokerConfigs = dict[int, dict[str, "str | None"]]
TopicConfigs = dict[str, dict[str, "str | None"]]


@dataclass
class Journal:
    """The record of one run. `record`, `set_state` and `update` persist it at once; changes
    made in memory (`remember_previous`, `plan_configs`, fields) are persisted by the next one."""

    path: Path
    cluster_id: str
    plan_hash: str
    created_at: str
    command: str
    targets: list[PartitionTarget]
    state: State = "running"
    original: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    """replicas before the run: the rollback plan"""
    previous_brokers: BrokerConfigs = field(default_factory=dict)
    """throttle configs found before the run, per broker: value, or None when unset"""
    previous_topics: TopicConfigs = field(default_factory=dict)
    unreadable_brokers: list[int] = field(default_factory=list)
    """brokers whose configs could not be read before the run (previous values unknown)"""
    planned_brokers: BrokerConfigs = field(default_factory=dict)
    """what the run SETs, per broker"""
    planned_topics: TopicConfigs = field(default_factory=dict)
    applied_brokers: list[int] = field(default_factory=list)
    applied_topics: list[str] = field(default_factory=list)
    pending_brokers: BrokerConfigs = field(default_factory=dict)
    """config changes not made because the broker did not answer; `resume` retries them"""
    submitted: list[TopicPartition] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    version: int = 0
    """bumped by every write; a write expects the disk to hold the version it last saw"""
    now: Callable[[], datetime] = field(default=_utc_now, repr=False, compare=False)
    guard: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    """called with the step name before every intent is written, i.e. before every change to the
    cluster: the execution lock's check (it raises to stop the run), and the fault drills' crash hook"""
    _fixed_text: str | None = field(default=None, repr=False, compare=False)

    # ---- queries --------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    def last_status(self, step: str) -> Status | None:
        for entry in reversed(self.steps):
            if entry.step == step:
                return entry.status
        return None

    def done(self, step: str) -> bool:
        return self.last_status(step) == "done"

    def target_of(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {t.tp: t.replicas for t in self.targets}

    @property
    def standing(self) -> bool:
        """A `throttle set` made while nothing moved: the operator's standing throttle, which
        only `throttle clear` ends (a watch that sees moves end leaves it; found walking through
        a decommission on Kafka 4.4.0: a bare watch removed the rate set for broker 3)."""
        return self.command == "throttle set" and not self.targets

    # ---- changes in memory (persisted by the next record, set_state or update) ---------------
    def remember_previous(self, brokers: Mapping[int, Mapping[str, str | None]],
                          topics: Mapping[str, Mapping[str, str | None]], unreadable: Iterable[int] = ()) -> None:
        """Record throttle values found before the run, for resources and keys seen for the first
        time: a value already recorded was found earlier, before our own changes, and stays.
        `unreadable` brokers did not answer; a broker stays listed until its values are known."""
        for b, keys in brokers.items():
            known_b = self.previous_brokers.setdefault(b, {})
            for key, value in keys.items():
                known_b.setdefault(key, value)
        for t, keys in topics.items():
            known_t = self.previous_topics.setdefault(t, {})
            for key, value in keys.items():
                known_t.setdefault(key, value)
        self.unreadable_brokers = sorted((set(self.unreadable_brokers) | set(unreadable))
                                         - set(self.previous_brokers))

    def plan_configs(self, brokers: Mapping[int, Mapping[str, str | None]] | None = None,
                     topics: Mapping[str, Mapping[str, str | None]] | None = None) -> None:
        """Add configs the run SETs; a key planned again takes the new value."""
        for b, ops in (brokers or {}).items():
            self.planned_brokers.setdefault(b, {}).update(ops)
        for t, ops in (topics or {}).items():
            self.planned_topics.setdefault(t, {}).update(ops)

    # ---- changes (each one is persisted) ----------------------------------------------------
    def record(self, step: str, status: Status, **detail: Any) -> None:
        if status == "intent" and self.guard is not None:
            self.guard(step)
        self.steps.append(Step(step, status, _stamp(self.now), detail))
        self.save()

    def set_state(self, state: State) -> None:
        self.state = state
        self.save()

    def update(self, **changes: Any) -> None:
        for name, value in changes.items():
            if not hasattr(self, name):
                raise AttributeError(name)
            setattr(self, name, value)
        self.save()

    def save(self) -> None:
        # Compact on purpose (json's C encoder skips indented output), and the targets, which
        # never change, are encoded once: a 10,000-partition journal is rewritten after each step.
        if self._fixed_text is None:
            self._fixed_text = json.dumps(self._fixed(), separators=(",", ":"))
        try:
            self._save_checked()
        except (OSError, ValueError) as exc:
            raise JournalError(f"cannot write the journal {clip(self.path)}: {getattr(exc, 'strerror', None) or exc}; "
                               "give a writable "
                               f"directory with --journal-dir or ${ENV_JOURNAL_DIR}") from None

    def _save_checked(self) -> None:
        assert self._fixed_text is not None
        with _file_lock(self.path):
            on_disk = _disk_version(self.path)
            if on_disk is not None and on_disk != self.version:
                raise JournalConflict(
                    f"the journal {self.path} was changed by another process (version {on_disk}, this run last "
                    f"saw {self.version}); this run stops so as not to overwrite it")
            self.version += 1
            try:
                dynamic = json.dumps(self._dynamic(), separators=(",", ":"))
                write_atomically(self.path, dynamic[:-1] + "," + self._fixed_text[1:] + "\n")
            except BaseException:
                self.version -= 1
                raise

    # ---- serialisation ---------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {**self._dynamic(), **self._fixed()}

    def _fixed(self) -> dict[str, Any]:
        return {
            "targets": [{"topic": t.topic, "partition": t.partition, "replicas": list(t.replicas),
                         "log_dirs": list(t.dirs())} for t in self.targets],
            "original": {f"{tp.topic}\t{tp.partition}": list(r) for tp, r in sorted(self.original.items())},
        }

    def _dynamic(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "format": FORMAT,
            "cluster_id": self.cluster_id,
            "plan_hash": self.plan_hash,
            "created_at": self.created_at,
            "updated_at": _stamp(self.now),
            "command": self.command,
            "state": self.state,
            "previous": {"brokers": _keys_to_str(self.previous_brokers), "topics": self.previous_topics,
                         "unreadable_brokers": self.unreadable_brokers},
            "planned": {"brokers": _keys_to_str(self.planned_brokers), "topics": self.planned_topics},
            "applied": {"brokers": self.applied_brokers, "topics": self.applied_topics},
            "pending": {"brokers": _keys_to_str(self.pending_brokers)},
            "submitted": [[tp.topic, tp.partition] for tp in self.submitted],
            "options": self.options,
            "steps": [{"step": s.step, "status": s.status, "at": s.at, "detail": dict(s.detail)}
                      for s in self.steps],
        }

    @classmethod
    def from_json(cls, path: Path, data: Mapping[str, Any]) -> Journal:
        if data.get("format") != FORMAT:
            raise JournalError(f"{path} is not a kreassign journal (format {data.get('format')!r}, "
                               f"expected {FORMAT!r})")
        try:
            targets = [PartitionTarget(t["topic"], int(t["partition"]), tuple(t["replicas"]),
                                       None if all(d == "any" for d in t["log_dirs"]) else tuple(t["log_dirs"]))
                       for t in data["targets"]]
            original = {}
            for key, replicas in data["original"].items():
                topic, _, partition = key.rpartition("\t")
                original[TopicPartition(topic, int(partition))] = tuple(replicas)
            return cls(
                path=path, cluster_id=data["cluster_id"], plan_hash=data["plan_hash"],
                created_at=data["created_at"], command=data["command"], state=data["state"],
                targets=targets, original=original,
                previous_brokers=_keys_to_int(data["previous"]["brokers"]),
                previous_topics=dict(data["previous"]["topics"]),
                unreadable_brokers=list(data["previous"]["unreadable_brokers"]),
                planned_brokers=_keys_to_int(data["planned"]["brokers"]),
                planned_topics=dict(data["planned"]["topics"]),
                applied_brokers=list(data["applied"]["brokers"]),
                applied_topics=list(data["applied"]["topics"]),
                pending_brokers=_keys_to_int(data["pending"]["brokers"]),
                submitted=[TopicPartition(t, int(p)) for t, p in data["submitted"]],
                options=dict(data["options"]),
                steps=[Step(s["step"], s["status"], s["at"], s.get("detail", {})) for s in data["steps"]],
                version=int(data.get("version", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise JournalError(f"{path} is damaged ({type(exc).__name__}: {exc}); move it aside "
                               "and check the cluster by hand with `kreassign list`") from None


_VERSION = re.compile(rb'^\{"version":(\d+),')


def _disk_version(path: Path) -> int | None:
    """The version of the journal on disk (None: no journal yet, or one written before versions)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(40)
    except FileNotFoundError:
        return None
    match = _VERSION.match(head)
    return int(match.group(1)) if match else None


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Serialise the check-and-rename of one journal among processes of this host."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "a", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield


def _keys_to_str(configs: Mapping[int, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in sorted(configs.items())}


def _keys_to_int(configs: Mapping[str, Any]) -> dict[int, Any]:
    return {int(k): dict(v) for k, v in configs.items()}


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` so that a crash leaves the old or the new content, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _safe_name(cluster_id: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in cluster_id)
    return cleaned.strip(".") or UNKNOWN_CLUSTER


@contextmanager
def journaled(journal: Journal | None, step: str, **detail: Any) -> Iterator[None]:
    """Record a step's intent before the block and its failure if the block raises (the error
    passes on); the block records the outcome. Without a journal, just run the block."""
    if journal is not None:
        journal.record(step, "intent", **detail)
    try:
        yield
    except (KreassignError, KeyboardInterrupt) as exc:
        if journal is not None:
            journal.record(step, "failed", error=str(exc) or type(exc).__name__)
        raise


class JournalStore:
    """The journals under one directory, grouped by cluster id."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *,
                 now: Callable[[], datetime] = _utc_now) -> None:
        self.root = journal_root(root)
        self.now = now

    def path_for(self, cluster_id: str | None, digest: str) -> Path:
        return self.root / _safe_name(cluster_id or UNKNOWN_CLUSTER) / f"{digest}.json"

    def create(self, *, cluster_id: str | None, targets: Iterable[PartitionTarget], command: str,
               **fields: Any) -> Journal:
        """A new journal for this cluster and plan (replacing a closed one), written at once."""
        target_list = list(targets)
        digest = plan_hash(target_list)
        journal = Journal(path=self.path_for(cluster_id, digest), cluster_id=cluster_id or UNKNOWN_CLUSTER,
                          plan_hash=digest, created_at=_stamp(self.now), command=command,
                          targets=target_list, now=self.now, **fields)
        journal.version = _disk_version(journal.path) or 0  # replaces a closed journal of the same plan
        journal.save()
        return journal

    def load(self, path: str | os.PathLike[str]) -> Journal:
        file = Path(path)
        try:
            data = json.loads(read_text(file, limit=JOURNAL_LIMIT))  # `--journal /dev/urandom` once grew to 5.9 GB
        except FileNotFoundError:
            raise JournalError(f"no journal at {clip(file, PATH_CLIP)}") from None
        except (OSError, ValueError, RecursionError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise JournalError(f"cannot read the journal {clip(file, PATH_CLIP)}: {clip(why, 200)}") from None
        if not isinstance(data, dict):
            raise JournalError(f"{file} is not a kreassign journal")
        journal = Journal.from_json(file, data)
        journal.now = self.now
        return journal

    def find(self, cluster_id: str | None, targets: Iterable[PartitionTarget]) -> Journal | None:
        """The journal of this plan on this cluster, if one exists."""
        path = self.path_for(cluster_id, plan_hash(targets))
        try:
            found = path.exists()
        except (OSError, ValueError) as exc:
            raise JournalError(f"cannot use the journal directory {clip(self.root)}: "
                               f"{getattr(exc, 'strerror', None) or exc}") from None
        return self.load(path) if found else None

    def journals(self, cluster_id: str | None, *, open_only: bool = False) -> list[Journal]:
        """Every journal of a cluster, newest first."""
        folder = self.root / _safe_name(cluster_id or UNKNOWN_CLUSTER)
        try:
            if not folder.is_dir():
                return []
            paths = sorted(folder.glob("*.json"))
        except (OSError, ValueError) as exc:
            raise JournalError(f"cannot use the journal directory {clip(self.root)}: "
                               f"{getattr(exc, 'strerror', None) or exc}") from None
        found = [self.load(p) for p in paths]
        found = [j for j in found if j.is_open or not open_only]
        return sorted(found, key=lambda j: (j.created_at, j.plan_hash), reverse=True)
