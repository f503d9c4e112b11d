"""Kafka's own reassignment tool and kreassign's Kafka-compatible front door, side by side on one
real Apache Kafka cluster (tests/test_side_by_side_kafka.py, bench/bench_side_by_side.py).

Kafka's tool is the real `org.apache.kafka.tools.reassign.ReassignPartitionsCommand` from the
fetched jars, run by `ReassignToolServer` (tests/kafka_tool/): one JVM per Kafka version that runs
the tool's `main` once per invocation, so each call costs the tool's work instead of a 2-3 s JVM
start. `KafkaTool.run_alone` runs it as kafka-reassign-partitions.sh does (a JVM per call), and the
test checks that both give the same answer.

A scenario (side_by_side_scenarios.py) is a function of a `Run`: it creates the topics of Kafka's
ReassignPartitionsCommandTest, writes records, invokes the tool (`run.tool`) and records the
cluster's state (`run.throttles`, `run.assignment`, ...). It runs once with Kafka's tool and once
with kreassign, each from the same state (`reset` deletes the topics, reassignments and throttles
in between), and `compare` lines the two transcripts up field by field: stdout, the error line
(stderr's first line), the exit code, and every recorded state.
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kreassign.cluster.model import TopicPartition, TopicPartitionReplica

from cli_helpers import KREASSIGN
from live import THROTTLE_KEYS, TOPIC_THROTTLE_KEYS, await_topic, clear_broker_rates

SERVER_SOURCE = Path(__file__).resolve().parent / "kafka_tool" / "ReassignToolServer.java"
TOOL_CLASS = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
# kafka-run-class.sh's heap and GC for tools; C1 only: the runs are short and the cores few
TOOL_JVM_FLAGS = ("-Xmx256M", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:TieredStopAtLevel=1",
                  "-Djava.awt.headless=true")
RECORD_BYTES = 10_000
"""the size of the records Kafka's ReassignPartitionsCommandTest writes"""
WAIT_S = 120.0


@dataclass(frozen=True)
class Outcome:
    """What one invocation of a tool printed and how it ended."""

    exit: int
    stdout: str
    stderr: str

    @property
    def error_line(self) -> str:
        return self.stderr.split("\n", 1)[0]


# ---- Kafka's tool ------------------------------------------------------------------------------
def _die_with_parent(parent: int) -> Callable[[], None]:
    from kreassign.sandbox.kafka_engine.jvm import die_with

    return lambda: die_with(parent)


def _server_classes(javac: str) -> Path:
    """ReassignToolServer compiled once per source text, into the cache beside Kafka's jars."""
    from kreassign.sandbox.kafka_engine.dist import cache_root

    source = SERVER_SOURCE.read_bytes()
    folder = cache_root().parent / "reassign-tool-server" / hashlib.sha256(source).hexdigest()[:16]
    if (folder / "ReassignToolServer.class").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=folder.parent))
    try:
        done = subprocess.run([javac, "--release", "11", "-d", str(scratch), str(SERVER_SOURCE)],
                              capture_output=True, text=True, check=False, timeout=300)
        assert done.returncode == 0, f"javac failed: {done.stderr.strip()[-2000:]}"
        with contextlib.suppress(OSError):  # another session compiled the same source meanwhile
            scratch.rename(folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder


def _javac(java: str) -> str:
    beside = Path(os.path.realpath(java)).with_name("javac")
    found = str(beside) if beside.is_file() else shutil.which("javac")
    assert found, f"no javac beside {java} or on PATH: the side-by-side tests need a JDK"
    return found


class KafkaTool:
    """Apache Kafka's ReassignPartitionsCommand of one release, served by one JVM."""

    name = "kafka"

    def __init__(self, dist: Any, workdir: Path) -> None:
        from kreassign.sandbox.kafka_engine.dist import find_java_for

        self.dist = dist
        self.version: str = dist.version
        self.java = find_java_for(dist.min_java)
        self.workdir = workdir
        self.classes = _server_classes(_javac(self.java))
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"tool-server-{self.version}.log"

    def _flags(self) -> list[str]:
        """The tool's JVM flags with logging off (Log4j 2 in 4.x, reload4j in 3.9), as an
        operator's kafka-reassign-partitions.sh prints nothing but the tool's own text."""
        if self.dist.log4j2:
            config = self.workdir / "tool-log4j2.properties"
            config.write_text("status = error\nrootLogger.level = OFF\n")
            logging = f"-Dlog4j2.configurationFile={config}"
        else:
            config = self.workdir / "tool-log4j.properties"
            config.write_text("log4j.rootLogger=OFF\n")
            logging = f"-Dlog4j.configuration=file:{config}"
        return [*TOOL_JVM_FLAGS, logging]

    def start(self) -> KafkaTool:
        argv = [self.java, *self._flags(), "-cp", f"{self.classes}{os.pathsep}{self.dist.classpath}",
                "ReassignToolServer"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         cwd=self.workdir, preexec_fn=_die_with_parent(os.getpid()))
        line = self._read_line(WAIT_S)
        assert line == "ready", f"the tool server did not start: {line!r}; see {self.log}"
        return self

    def _read_line(self, timeout_s: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            self.close()
            raise AssertionError(f"Kafka's tool gave no answer within {timeout_s:.0f}s; see {self.log}")
        return self.proc.stdout.readline().decode("utf-8").rstrip("\n")

    def run(self, argv: Sequence[str]) -> Outcome:
        assert self.proc is not None and self.proc.stdin is not None, "start() first"
        request = " ".join(base64.b64encode(a.encode("utf-8")).decode("ascii") for a in argv)
        self.proc.stdin.write(request.encode("ascii") + b"\n")
        self.proc.stdin.flush()
        reply = json.loads(self._read_line(WAIT_S + 60))
        assert reply["exit"] >= 0, reply["stderr"]
        return Outcome(int(reply["exit"]), reply["stdout"], reply["stderr"])

    def run_alone(self, argv: Sequence[str]) -> Outcome:
        """One JVM for this call alone, as kafka-reassign-partitions.sh runs the tool."""
        done = subprocess.run([self.java, *self._flags(), "-cp", self.dist.classpath, TOOL_CLASS, *argv],
                              capture_output=True, cwd=self.workdir, timeout=WAIT_S + 60, check=False,
                              stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent(os.getpid()))
        return Outcome(done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8"))

    def close(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> KafkaTool:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- kreassign ---------------------------------------------------------------------------------
class KreassignTool:
    """kreassign's front door: `kreassign.cli.main.main(argv)`, what the `kreassign` command runs,
    in this process (`in_process`) or as the installed command in a process of its own."""

    name = "kreassign"

    def __init__(self, journal_dir: Path, *, in_process: bool = True) -> None:
        self.journal_dir = journal_dir
        self.in_process = in_process

    def run(self, argv: Sequence[str]) -> Outcome:
        journals = {"KREASSIGN_JOURNAL_DIR": str(self.journal_dir)}
        if not self.in_process:
            done = KREASSIGN.subprocess(*argv, env={**journals, "KREASSIGN_LOCK_SETTLE_S": "0"}, timeout=WAIT_S + 60)
            return Outcome(done.returncode, done.stdout, done.stderr)
        ran = KREASSIGN.run(*argv, env=journals)
        return Outcome(ran.exit_code, ran.stdout, ran.stderr)


# ---- the cluster -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """The real cluster both tools run against."""

    version: str
    bootstrap: str
    controller: str
    brokers: tuple[int, ...]

    @property
    def ports(self) -> list[int]:
        """Each broker's port, from the bootstrap list."""
        return [int(address.rsplit(":", 1)[1]) for address in self.bootstrap.split(",")]

    @classmethod
    def of(cls, cluster: Any) -> Target:
        """From a `KafkaCluster` (sandbox/kafka_engine)."""
        return cls(cluster.dist.version, cluster.bootstrap, f"127.0.0.1:{cluster.layout.controller_port}",
                   tuple(cluster.brokers))

    @classmethod
    def from_state_dir(cls, state_dir: Path) -> Target:
        """From the state dir of a running `kreassign sandbox start --engine kafka`."""
        state = json.loads((state_dir / "kafka.json").read_text())
        ports = {int(b): int(p) for b, p in state["ports"].items()}
        return cls(str(state["version"]), ",".join(f"127.0.0.1:{ports[b]}" for b in sorted(ports)),
                   f"127.0.0.1:{state['controller_port']}", tuple(sorted(ports)))

    @contextlib.contextmanager
    def admin(self) -> Iterator[Any]:
        from kreassign.cluster.admin import open_admin

        with open_admin(self.bootstrap, timeout_s=30.0) as port:
            yield port


TOPICS: dict[str, dict[int, list[int]]] = {
    # ReassignPartitionsCommandTest.createTopics, its brokers 0..4 being 1..5 here
    "foo": {0: [1, 2, 3], 1: [2, 3, 4]},
    "bar": {0: [4, 3, 2]},
    "baz": {0: [2, 1, 3], 1: [3, 1, 2], 2: [1, 3, 2]},
}


def wait_for(condition: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    """Poll until `condition()` is truthy (real time: this is a real cluster); returns its value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s:.0f}s waiting for {what}"
        time.sleep(0.2)


def reset(target: Target) -> None:
    """Back to a cluster without the scenario topics, reassignments, throttles or kreassign's lock."""
    from kreassign.cluster.errors import UnknownTopicError
    from kreassign.execute.lock import LOCK_KEY, STOP_KEY

    with target.admin() as port:
        moving = list(port.list_reassignments())
        if moving:
            port.alter_reassignments({tp: None for tp in moving})
            wait_for(lambda: not port.list_reassignments(), "the reassignments to be cancelled", 60)
        clear_broker_rates(port, target.brokers)
        existing = {p.topic for p in port.describe_topics()} & set(TOPICS)
        for name in sorted(existing):
            port.delete_topic(name)

        def gone() -> bool:
            try:
                return not port.describe_topics(sorted(existing))
            except UnknownTopicError:
                return True

        if existing:
            wait_for(gone, f"topics {sorted(existing)} to be deleted", 60)
        port.write_markers({LOCK_KEY: None, STOP_KEY: None})


def metadata_agrees(target: Target) -> bool:
    """Every broker's Metadata shows the same replicas for the scenario topics."""
    from kafka.protocol.metadata import MetadataRequest

    from kreassign.sandbox.rawclient import roundtrip

    seen = []
    for port in target.ports:
        response = roundtrip(port, MetadataRequest(topics=sorted(TOPICS), allow_auto_topic_creation=False), 4)
        seen.append(sorted((t.name, p.partition_index, tuple(p.replica_nodes))
                           for t in response.topics for p in t.partitions))
    return all(s == seen[0] for s in seen)


def produce(target: Target, topic: str, partition: int, records: int) -> None:
    """`records` records of RECORD_BYTES zero bytes (Kafka's test writes `new byte[10000]`), acks=all."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=target.bootstrap, acks="all", linger_ms=20, batch_size=1024 * 1024,
                             max_request_size=2 * 1024 * 1024, client_id="side-by-side")
    try:
        for _ in range(records):
            producer.send(topic, value=bytes(RECORD_BYTES), partition=partition)
        producer.flush(timeout=120)
    finally:
        producer.close(timeout=10)


# ---- one run of a scenario ---------------------------------------------------------------------
@dataclass
class Entry:
    """One recorded step: a tool invocation (`outcome`) or a state of the cluster (`state`)."""

    step: str
    argv: tuple[str, ...] = ()
    outcome: Outcome | None = None
    state: Any = None


@dataclass
class Run:
    """One scenario run with one tool, recording what happens."""

    target: Target
    driver: Any
    """KafkaTool or KreassignTool"""
    workdir: Path
    expected: Mapping[str, Any] = field(default_factory=dict)
    """states recorded by the run of the other tool, to wait for (the brokers apply a config or
    an assignment change a moment after the controller has it)"""
    differs: frozenset[str] = frozenset()
    """state steps known to differ from the other run's (not waited for)"""
    entries: list[Entry] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    """text -> placeholder replaced in every output (log-dir paths, which differ by layout)"""

    def __post_init__(self) -> None:
        self.names.setdefault(str(self.workdir), "<work>")
        self._admin: contextlib.ExitStack | None = None
        self._port: Any = None

    @contextlib.contextmanager
    def admin(self) -> Iterator[Any]:
        """The run's own connection to the cluster, opened once (a connection per read would
        cost more than the reads); `close` ends it."""
        if self._port is None:
            self._admin = contextlib.ExitStack()
            self._port = self._admin.enter_context(self.target.admin())
        yield self._port

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin, self._port = None, None

    @property
    def bootstrap(self) -> list[str]:
        return ["--bootstrap-server", self.target.bootstrap]

    @property
    def controller(self) -> list[str]:
        return ["--bootstrap-controller", self.target.controller]

    # -- setting up --
    def topics(self) -> None:
        """Create the topics of Kafka's test, every replica in its broker's first log dir.

        Kafka 4.2+ prints each replica's log dir in the current assignment (KAFKA-19582), and a
        broker puts a new replica in whichever dir holds fewest; pinning them makes both runs
        print the same paths."""
        with self.admin() as port:
            for name, assignment in TOPICS.items():
                error = port.create_topic(name, assignment)
                assert error is None, f"could not create {name}: {error}"
        for name, assignment in TOPICS.items():
            await_topic(self.target.ports, name, len(assignment))
        tps = [TopicPartition(t, p) for t, parts in TOPICS.items() for p in parts]
        wanted = {TopicPartitionReplica(t, p, b) for t, parts in TOPICS.items() for p, rs in parts.items() for b in rs}
        first: dict[int, str] = {}
        with self.admin() as port:

            def pinned() -> bool:
                report = port.log_dir_sizes(self.target.brokers, partitions=tps)
                first.update({b: sorted(d.path for d in dirs)[0] for b, dirs in report.dirs.items()})
                moves = {r: first[r.broker] for r in wanted if r in report.replicas and first[r.broker] not in (
                    report.replicas[r].log_dir, report.replicas[r].future_dir)}
                if moves:
                    port.alter_replica_log_dirs(moves)  # a replica not there yet answers an error: next round
                return wanted <= set(report.replicas) and all(
                    report.replicas[r].log_dir == first[r.broker] and report.replicas[r].future_dir is None
                    for r in wanted)

            wait_for(pinned, "every replica in its broker's first log dir")
        root = os.path.commonpath([d for d in first.values()])
        self.names.setdefault(os.path.dirname(root) if root in first.values() else root, "<data>")

    def produce(self, topic: str, partition: int, records: int) -> None:
        produce(self.target, topic, partition, records)

    def file(self, name: str, text: str) -> str:
        path = self.workdir / name
        path.write_text(text)
        return str(path)

    def plan(self, moves: Mapping[tuple[str, int], Sequence[int]], *,
             log_dirs: Mapping[tuple[str, int, int], str] | None = None, name: str = "plan.json") -> str:
        """A reassignment JSON as Kafka's test writes it (log_dirs "any" unless given)."""
        parts = []
        for (topic, partition), replicas in moves.items():
            dirs = [(log_dirs or {}).get((topic, partition, b), "any") for b in replicas]
            parts.append({"topic": topic, "partition": partition, "replicas": list(replicas), "log_dirs": dirs})
        return self.file(name, json.dumps({"version": 1, "partitions": parts}))

    # -- the tool --
    def tool(self, step: str, *argv: str) -> Outcome:
        outcome = self.tool_raw(argv)
        self.entries.append(Entry(step, tuple(argv), outcome))
        return outcome

    def tool_raw(self, argv: Sequence[str]) -> Outcome:
        return self.driver.run(list(argv))  # type: ignore[no-any-return]

    # -- the cluster's state --
    def record(self, step: str, read: Callable[[], Any]) -> Any:
        """Record what `read` returns once it is settled: equal to what the other tool's run saw
        (if it ever gets there within 10 s) or, for the first run, the same twice in a row."""
        want = self.expected.get(step, _MISSING) if step not in self.differs else _MISSING
        deadline = time.monotonic() + 10.0
        value = read()
        while value != want and time.monotonic() < deadline:
            time.sleep(0.5)
            again = read()
            if (want is _MISSING and again == value) or (want is not _MISSING and again == want):
                value = again
                break
            value = again
        self.entries.append(Entry(step, state=value))
        return value

    def throttles(self, step: str) -> Any:
        return self.record(step, self.read_throttles)

    def read_throttles(self) -> dict[str, dict[str, str]]:
        """The throttle configs set on each broker and scenario topic (absent keys left out)."""
        with self.admin() as port:
            brokers = port.describe_broker_configs(self.target.brokers, THROTTLE_KEYS).configs
            topics = port.describe_topic_configs(sorted(TOPICS), TOPIC_THROTTLE_KEYS).configs
        out: dict[str, dict[str, str]] = {}
        for b, entries in sorted(brokers.items()):
            set_ = {k: str(e.value) for k, e in sorted(entries.items()) if e.value is not None and e.is_override}
            if set_:
                out[f"broker {b}"] = set_
        for t, entries in sorted(topics.items()):
            set_ = {k: str(e.value) for k, e in sorted(entries.items()) if e.value is not None and e.is_override}
            if set_:
                out[f"topic {t}"] = set_
        return out

    def assignment(self, step: str = "replica assignment") -> Any:
        return self.record(step, self.read_assignment)

    def read_assignment(self) -> dict[str, str]:
        """Each scenario partition's replicas, with `adding`/`removing` while it is reassigned."""
        with self.admin() as port:
            parts = port.describe_topics(sorted(TOPICS))
            moving = port.list_reassignments()
        out = {}
        for p in parts:
            text = ",".join(map(str, p.replicas))
            r = moving.get(p.tp)
            if r is not None:
                text += f" (adding {','.join(map(str, r.adding)) or '-'}; removing {','.join(map(str, r.removing)) or '-'})"
            out[str(p.tp)] = text
        return out

    def end_offsets(self, step: str, partitions: Sequence[tuple[str, int]]) -> Any:
        tps = [TopicPartition(t, p) for t, p in partitions]

        def read() -> dict[str, int]:
            with self.admin() as port:
                ends = port.log_end_offsets(tps) or {}
            return {str(tp): ends.get(tp, -1) for tp in tps}

        return self.record(step, read)

    def note(self, step: str, value: Any) -> None:
        """A fact observed once (records consumed during a move, ...)."""
        self.entries.append(Entry(step, state=value))

    # -- moving things along --
    def wait_moves_done(self) -> None:
        """Until the controller lists no reassignment and every broker's metadata shows the same
        replicas (Kafka's --verify reads both: a broker a moment behind the controller would show
        a finished move's old replica set)."""
        with self.admin() as port:
            wait_for(lambda: not port.list_reassignments(), "the reassignments to finish")
        wait_for(lambda: metadata_agrees(self.target), "the brokers' metadata to agree")

    def wait_isr(self, topic: str, partition: int, brokers: set[int]) -> None:
        def has() -> bool:
            with self.admin() as port:
                part = next(p for p in port.describe_topics([topic]) if p.partition == partition)
            return brokers <= set(part.isr if part.isr is not None else part.replicas)

        wait_for(has, f"{topic}-{partition}'s ISR to hold {sorted(brokers)}")

    def set_configs(self, brokers: Mapping[int, Mapping[str, str | None]] | None = None,
                    topics: Mapping[str, Mapping[str, str | None]] | None = None) -> None:
        """Change throttle configs by hand, as Kafka's test does with its Admin client."""
        with self.admin() as port:
            result = port.incremental_alter_configs(brokers or {}, topics or {})
        assert result.ok, result.failures()

    def log_dirs(self, topic: str, partition: int, broker: int) -> tuple[str, str]:
        """(the dir holding the replica now, another dir of that broker) and names them
        <current-dir> and <target-dir> in every output of this run."""
        replica = TopicPartitionReplica(topic, partition, broker)
        with self.admin() as port:
            report = port.log_dir_sizes([broker])
        current = report.replicas[replica].log_dir
        assert current is not None
        target = sorted(d.path for d in report.dirs[broker] if d.path != current)[0]
        self.names[current] = "<current-dir>"
        self.names[target] = "<target-dir>"
        return current, target

    def log_dir_state(self, topic: str, partition: int, broker: int) -> tuple[str | None, str | None]:
        replica = TopicPartitionReplica(topic, partition, broker)
        with self.admin() as port:
            entry = port.log_dir_sizes([broker]).replicas.get(replica)
        return (None, None) if entry is None else (entry.log_dir, entry.future_dir)

    def consume(self, topic: str, partition: int, at_least: int) -> int:
        """Read the partition from the start until `at_least` records came (Kafka's test's consumer)."""
        from kafka import KafkaConsumer
        from kafka.structs import TopicPartition as KafkaTp

        consumer = KafkaConsumer(bootstrap_servers=self.target.bootstrap, group_id="side-by-side",
                                 auto_offset_reset="earliest", enable_auto_commit=True, client_id="side-by-side")
        count = 0
        try:
            tp = KafkaTp(topic, partition)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            deadline = time.monotonic() + WAIT_S
            while count < at_least and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=100).values():
                    count += len(records)
        finally:
            consumer.close()
        return count


_MISSING = object()


# ---- comparing ---------------------------------------------------------------------------------
_THROWABLE = re.compile(r"^[a-zA-Z_$][\w$]*(?:\.[\w$]+)+(?:: (.*))?$")


def strip_stack_trace(stdout: str) -> tuple[str, bool]:
    """Kafka's `Error: <message>` line is followed by the exception's stack trace on stdout (its
    first line `<class>: <message>`, then `\tat` lines, none for a stackless exception); returns
    the text without it, and whether there was one."""
    lines = stdout.split("\n")
    error = next((i for i, line in enumerate(lines) if line.startswith("Error: ")), None)
    if error is None:
        return stdout, False
    message = lines[error][len("Error: "):]
    for j in range(error + 1, len(lines)):
        match = _THROWABLE.match(lines[j])
        if match and (match.group(1) == message or (match.group(1) is None and message == "null")):
            return "\n".join(lines[:j]) + "\n", True
    return stdout, False


def normalize_generate(stdout: str, brokers: set[int]) -> str:
    """--generate proposes a random assignment (Kafka's tool draws it unseeded): keep the current
    assignment, and replace the proposal by whether it is one Kafka's algorithm may give."""
    match = re.fullmatch(r"Current partition replica assignment\n(.*)\n\nProposed partition reassignment "
                         r"configuration\n(.*)\n", stdout, re.S)
    if not match:
        return stdout
    current = json.loads(match.group(1))["partitions"]
    proposed = json.loads(match.group(2))["partitions"]
    problems = []
    if [(p["topic"], p["partition"]) for p in proposed] != [(p["topic"], p["partition"]) for p in current]:
        problems.append("not the same partitions")
    rf = {p["topic"]: len(p["replicas"]) for p in current}
    for p in proposed:
        replicas = p["replicas"]
        if len(replicas) != rf[p["topic"]] or len(set(replicas)) != len(replicas) or not set(replicas) <= brokers:
            problems.append(f"{p['topic']}-{p['partition']}: {replicas}")
        if p["log_dirs"] != ["any"] * len(replicas):
            problems.append(f"{p['topic']}-{p['partition']}: log_dirs {p['log_dirs']}")
    verdict = "valid" if not problems else "INVALID: " + "; ".join(problems)
    return (f"Current partition replica assignment\n{match.group(1)}\n\nProposed partition reassignment "
            f"configuration\n<a random proposal: {verdict}>\n")


@dataclass(frozen=True)
class Row:
    """One compared field of one step."""

    scenario: str
    step: str
    field: str
    kafka: Any
    kreassign: Any
    reason: str | None = None
    """why the two differ, where kreassign differs on purpose (a key of REASONS)"""
    command: str = ""

    @property
    def same(self) -> bool:
        return self.kafka == self.kreassign


def fields(entry: Entry, names: Mapping[str, str]) -> dict[str, Any]:
    """The compared fields of an entry, normalized: placeholders for run-specific names, Kafka's
    Java stack trace set aside (kreassign never prints one: a difference of every error, listed
    once in `man kreassign`), a random --generate proposal judged rather than compared."""
    if entry.outcome is None:
        return {"state": _rename(entry.state, names)}
    out, _ = strip_stack_trace(_rename(entry.outcome.stdout, names))
    broker_list = _generate_brokers(entry.argv)
    if broker_list is not None:
        out = normalize_generate(out, broker_list)
    return {"stdout": out, "error line": _rename(entry.outcome.error_line, names), "exit": entry.outcome.exit}


def _rename(value: Any, names: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for text, placeholder in sorted(names.items(), key=lambda kv: -len(kv[0])):
            value = value.replace(text, placeholder)
        return value
    if isinstance(value, dict):
        return {_rename(k, names): _rename(v, names) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rename(v, names) for v in value]
    return value


@dataclass(frozen=True)
class Known:
    """A difference kreassign makes on purpose: which fields of which steps, on which releases,
    and why (a key of side_by_side_scenarios.REASONS). `step` and `fields` may be "*" (any);
    with `expect`, only a difference where `expect(kreassign's value) == Kafka's` is explained
    (kreassign's text as that Kafka release would print it), so nothing else hides behind it."""

    reason: str
    step: str = "*"
    fields: tuple[str, ...] = ("*",)
    expect: Callable[[Any], Any] | None = None

    @property
    def exact(self) -> bool:
        """Names its steps and fields: such a difference must show, or the rule is stale."""
        return self.step != "*" and "*" not in self.fields

    def explains(self, row: Row) -> bool:
        return (self.step in ("*", row.step) and ("*" in self.fields or row.field in self.fields)
                and (self.expect is None or self.expect(row.kreassign) == row.kafka))


def compare(scenario: str, kafka: Run, kreassign: Run, known: Sequence[Known] = ()) -> list[Row]:
    """Line the two runs up step by step; a difference a `known` rule explains gets its reason."""
    steps_k = [e.step for e in kafka.entries]
    steps_r = [e.step for e in kreassign.entries]
    assert steps_k == steps_r, f"{scenario}: the runs took different steps: {steps_k} vs {steps_r}"
    rows = []
    for ek, er in zip(kafka.entries, kreassign.entries):
        fk = fields(ek, kafka.names)
        fr = fields(er, kreassign.names)
        command = " ".join(_short(a, kafka.names, kafka.target) for a in ek.argv)
        for name in fk:
            row = Row(scenario, ek.step, name, fk[name], fr[name], None, command)
            if not row.same:
                rule = next((k for k in known if k.explains(row)), None)
                row = replace(row, reason=rule.reason if rule else None)
            rows.append(row)
    return rows


def stale(known: Sequence[Known], rows: Sequence[Row]) -> list[Known]:
    """The exact rules no difference needed: what they describe no longer happens."""
    return [k for k in known if k.exact and not any(not r.same and r.reason == k.reason and k.explains(r)
                                                      for r in rows)]


def _generate_brokers(argv: Sequence[str]) -> set[int] | None:
    if "--generate" not in argv or "--broker-list" not in argv:
        return None
    raw = argv[list(argv).index("--broker-list") + 1]
    try:
        return {int(b) for b in raw.split(",") if b}
    except ValueError:
        return None


def _short(arg: str, names: Mapping[str, str], target: Target) -> str:
    if arg == target.bootstrap:
        return "BOOTSTRAP"
    if arg == target.controller:
        return "CONTROLLER"
    if os.sep in arg and Path(arg).name.endswith(".json"):
        return Path(arg).name
    return _rename(arg, names) if " " not in arg else json.dumps(arg)


def run_both(target: Target, scenario: Callable[[Run], None], kafka_tool: KafkaTool, kreassign_tool: KreassignTool,
             workdir: Path, known: Sequence[Known] = ()) -> tuple[Run, Run]:
    """The scenario with Kafka's tool, then with kreassign, each from a reset cluster; the
    cluster is reset again at the end. A state `known` to differ is not waited for."""
    differs = frozenset(k.step for k in known if k.step != "*" and "state" in k.fields)
    runs = []
    expected: dict[str, Any] = {}
    try:
        for tool in (kafka_tool, kreassign_tool):
            folder = workdir / tool.name
            folder.mkdir(parents=True, exist_ok=True)
            reset(target)
            run = Run(target, tool, folder, expected=expected, differs=differs)
            try:
                scenario(run)
            finally:
                run.close()
            expected = {e.step: e.state for e in run.entries if e.outcome is None}
            runs.append(run)
    finally:
        reset(target)
    return runs[0], runs[1]
