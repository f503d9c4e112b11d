"""One throttled copy, measured in the broker's own terms, on real Kafka or on the emulator.

A *scenario* is one partition of `size` bytes on a leader, moved to a follower under a KIP-73
throttle of `rate` bytes/s on the leader's side, the follower's side or both, in one of these
shapes of the fetcher session (leader, follower) that carries the copy:

* `idle`: the moving partition alone, nothing written;
* `isr_idle`: with an in-sync partition (leader -> follower) in the same session, not written,
  replicating for WARM_S before the move (so the leader's quota is warm);
* `isr_written`: the same in-sync partition taking writes of `write_bps`;
* `written`: producers writing `write_bps` into the moving partition itself.

Progress is what the brokers report: the adding replica's size in DescribeLogDirs (and the
leader's, for a written partition), sampled every `poll_s` of the engine's own time (wall time
on Kafka, sandbox time on the emulator), until the copy caught up with the leader. `summarize`
turns a trace into copy rate / quota. `bench/bench_real_throttle.py` runs the scenarios on
real brokers and on the emulator; `tests/test_copy_probe.py` compares the engines on some.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from kreassign.cluster.model import TopicPartition, TopicPartitionReplica
from kreassign.sandbox.fetch import FetchConfig
from kreassign.sandbox.kafka_engine.data import FILL_BATCH_BYTES

MB = 1_000_000
THROTTLES = ("leader", "follower", "both", "none")
SHAPES = ("idle", "isr_idle", "isr_written", "written")
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
QUOTA_SPAN_S = 12.0
"""a quota sensor forgets a copy this long after its last record (11 windows of 1 s, plus one)"""
WARM_S = QUOTA_SPAN_S
"""how long an in-sync partition replicates before the move starts: the leader records every
response to its followers (zero bytes while nothing is throttled), so its quota windows then
span their full length, as on a broker that leads replicated partitions (a *warm* leader)"""
WRITE_SHARE = 0.1
"""writes of the written shapes, as a share of the throttle"""
MIN_WRITE_BPS = 10_000.0


@dataclass(frozen=True)
class Scenario:
    rate: float
    """the throttle, bytes/s (on the sides `throttle` names)"""
    throttle: str
    """'leader', 'follower', 'both' or 'none' (unthrottled: `rate` is only the yardstick)"""
    shape: str
    size: int
    """bytes in the moving partition when the move starts"""

    def __post_init__(self) -> None:
        if self.throttle not in THROTTLES or self.shape not in SHAPES:
            raise ValueError(f"unknown throttle {self.throttle!r} or shape {self.shape!r}")

    @property
    def write_bps(self) -> float:
        """Writes into the moving partition (`written`) or the in-sync one (`isr_written`)."""
        return max(self.rate * WRITE_SHARE, MIN_WRITE_BPS) if self.shape in ("written", "isr_written") else 0.0

    @property
    def leader_throttled(self) -> bool:
        return self.throttle in ("leader", "both")

    @property
    def follower_throttled(self) -> bool:
        return self.throttle in ("follower", "both")

    @property
    def label(self) -> str:
        return f"{self.shape}/{self.throttle}/{rate_label(self.rate)}"


def rate_label(rate: float) -> str:
    return f"{rate / MB:g}MB/s" if rate >= MB else f"{rate / 1000:g}kB/s"


@dataclass(frozen=True)
class Sample:
    t: float
    """seconds since the reassignment was submitted (the engine's own time)"""
    follower_bytes: int
    leader_bytes: int
    reassigning: bool


@dataclass
class Trace:
    scenario: Scenario
    engine: str
    samples: list[Sample] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"scenario": asdict(self.scenario), "engine": self.engine,
                "samples": [[round(s.t, 3), s.follower_bytes, s.leader_bytes, int(s.reassigning)] for s in self.samples]}


WARM_START_S = 2.0
"""`leader_start` reads the copy this long after the move started"""
WARM_START_RATES = 5.0
"""a cold leader throttle lets about 1 s of its rate through at once and then the rate (2-3 s of
it by WARM_START_S), a warm one 11-12 s (real Kafka 4.4.0, bench_real_throttle's traces): more
than this many seconds of the rate by WARM_START_S is a warm start. Either lets its first read
through (the check comes before the read is counted), so more than one read's worth is needed
too: at 100 kB/s a cold leader's single 983 KB batch is already 10 s of the rate, where a warm
one lets two reads through."""


def leader_start(trace: Trace) -> str | None:
    """'warm' or 'cold': whether a leader-throttled copy started with the leader's quota windows
    full (a follower had fetched from that broker within the last span: Kafka records every
    response to a follower, `KafkaApis`), read from the copy's first seconds; None where no
    leader throttle holds the copy."""
    if trace.scenario.throttle not in ("leader", "both"):
        return None
    early = [x.follower_bytes for x in trace.samples if x.t <= WARM_START_S]
    got = max(early, default=0)
    return "warm" if got > max(WARM_START_RATES * trace.scenario.rate, FetchConfig.partition_max_bytes) else "cold"


def summarize(trace: Trace) -> dict[str, Any]:
    """Copy rate / quota of one trace.

    `caught_s` is when the follower first held all the leader's bytes (or the move was no longer
    listed), the midpoint of the last sample before and the first at it; `copy_over_quota` the
    bytes the follower copied by then (all the leader's, if the move completed) over that time
    and the throttle; `steady_over_quota` the
    slope of the follower's size after the first quota span (the first fetches' credit spent)
    over the throttle, where the copy ran long enough after it (None otherwise). `started_s` is
    when the first bytes came (the controller, the new replica and its fetcher take that long:
    not a throttle's doing, and what a loaded machine stretches most), and `active_over_quota`
    the copy rate from then on."""
    s = trace.samples
    rate = trace.scenario.rate
    done = next((i for i, x in enumerate(s) if x.follower_bytes >= x.leader_bytes > 0 or not x.reassigning), None)
    if done is None:
        return {"caught_s": None, "copy_over_quota": None, "steady_over_quota": None, "samples": len(s)}
    before = s[done - 1].t if done > 0 else 0.0
    caught = (before + s[done].t) / 2
    # a move that completed between the size and the reassignment reads holds the leader's log
    copied = s[done].follower_bytes if s[done].reassigning else max(s[done].follower_bytes, s[done].leader_bytes)
    t = np.array([x.t for x in s[:done + 1]])
    b = np.array([x.follower_bytes for x in s[:done + 1]], dtype=np.float64)
    late = t >= QUOTA_SPAN_S
    steady = None
    if late.sum() >= 4 and t[late][-1] - t[late][0] >= 5.0:
        steady = float(np.polyfit(t[late], b[late], 1)[0]) / rate
    first = next(i for i, x in enumerate(s[:done + 1]) if x.follower_bytes > 0 or i == done)
    started = (s[first - 1].t + s[first].t) / 2 if first > 0 else 0.0
    active = caught - started
    return {"caught_s": round(caught, 3), "copied_bytes": int(copied), "started_s": round(started, 3),
            "copy_over_quota": round(copied / caught / rate, 4) if caught > 0 else None,
            "active_over_quota": round(copied / active / rate, 4) if active > 0 else None,
            "steady_over_quota": None if steady is None else round(steady, 4), "samples": len(s)}


def throttle_ops(scenario: Scenario, topic: str, leader: int, follower: int, *, clear: bool = False,
                 ) -> tuple[dict[int, dict[str, str | None]], dict[str, dict[str, str | None]]]:
    """The broker and topic config operations that throttle (or, `clear`, unthrottle) the move
    of partition 0 of `topic` from `leader` to `follower`, as kreassign's execute sets them."""
    brokers: dict[int, dict[str, str | None]] = {}
    topic_ops: dict[str, str | None] = {}
    value = None if clear else str(int(scenario.rate))
    if scenario.leader_throttled:
        brokers.setdefault(leader, {})[LEADER_RATE] = value
        topic_ops[LEADER_REPLICAS] = None if clear else f"0:{leader}"
    if scenario.follower_throttled:
        brokers.setdefault(follower, {})[FOLLOWER_RATE] = value
        topic_ops[FOLLOWER_REPLICAS] = None if clear else f"0:{follower}"
    return brokers, {topic: topic_ops}


# ---- real Kafka --------------------------------------------------------------------------------
class KafkaProbe:
    """Runs scenarios on a real cluster (`kafka_engine.cluster.KafkaCluster`) through the
    cluster port; each move's topic is created on its leader and filled by `prepare`.

    A broker's quota sensor remembers a copy for QUOTA_SPAN_S after its last record, so `run`
    first waits until the sensors it uses have forgotten the previous run on them."""

    def __init__(self, bootstrap: str, port: Any, *, poll_s: float = 0.25, timeout_s: float = 600.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.bootstrap = bootstrap
        self.port = port
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self.clock = clock
        self.sleep = sleep
        self._last_use: dict[tuple[int, str], float] = {}
        self._runs = 0

    def create(self, topic: str, assignment: dict[int, list[int]]) -> None:
        from kreassign.cluster.errors import ClusterError
        from kreassign.cluster.new_topic import wait_until_led

        error = self.port.create_topic(topic, assignment)
        if error is not None:
            raise ClusterError(f"could not create topic {topic}: {error}")
        wait_until_led(self.port, topic, len(assignment), timeout_s=60.0)

    def prepare(self, topic: str, leader: int, size: int) -> None:
        """Topic `topic` with one replica on `leader`, holding `size` bytes."""
        from kreassign.sandbox.kafka_engine.data import fill

        self.create(topic, {0: [leader]})
        fill(self.bootstrap, {TopicPartition(topic, 0): size})

    def run(self, scenario: Scenario, topic: str, leader: int, follower: int) -> Trace:
        """Move partition 0 of `topic` (on `leader` alone) to `follower` under the scenario's
        throttle and shape; returns the trace. The throttle and any in-sync topic are removed
        afterwards."""
        from kreassign.cluster.config_readback import Confirm, confirm_broker_configs
        from kreassign.cluster.errors import ClusterError

        tp = TopicPartition(topic, 0)
        sides = [(leader, "leader")] * scenario.leader_throttled + [(follower, "follower")] * scenario.follower_throttled
        for key in sides:
            wait = self._last_use.get(key, -1e9) + QUOTA_SPAN_S - self.clock()
            if wait > 0:
                self.sleep(wait)
        self._runs += 1  # a deleted topic's name stays taken until its deletion completes
        isr_topic = f"{topic}-isr-{self._runs}" if scenario.shape in ("isr_idle", "isr_written") else None
        trace = Trace(scenario, "kafka")
        with contextlib.ExitStack() as stack:
            if isr_topic is not None:
                self.create(isr_topic, {0: [leader, follower]})
                stack.callback(self.port.delete_topic, isr_topic)
                self._wait(lambda: set(self.port.describe_topics([isr_topic])[0].isr or ()) == {leader, follower},
                           f"{isr_topic} to be in sync")
                self.sleep(WARM_S)  # the quota sensors record the in-sync fetches over a whole span
            written = {"written": tp, "isr_written": TopicPartition(str(isr_topic), 0)}.get(scenario.shape)
            if written is not None:
                stack.enter_context(_writing(self.bootstrap, written, scenario.write_bps))
            brokers, topics = throttle_ops(scenario, topic, leader, follower)
            result = self.port.incremental_alter_configs(brokers, topics)
            if not result.ok:
                raise ClusterError(f"could not set the throttle: {result}")
            stack.callback(self._unthrottle, scenario, topic, leader, follower)
            # a broker applies the change a moment after the controller accepted it (seconds on a
            # loaded machine: a CI run's copy started unthrottled and ran at 1.8x the quota). Each
            # broker answers for its own rate; the topic's lists came in the same metadata batch
            unapplied = confirm_broker_configs(self.port, brokers, Confirm(self.clock, self.sleep, wait_s=60.0))
            if unapplied:
                raise ClusterError(f"broker(s) {unapplied} did not apply the throttle in 60s")
            start = self.clock()
            errors = self.port.alter_reassignments({tp: [follower]})
            if errors.get(tp) is not None:
                raise ClusterError(f"could not move {tp}: {errors[tp]}")
            while True:
                before = self.clock()
                report = self.port.log_dir_sizes([leader, follower], partitions=[tp]).sizes()
                moving = tp in self.port.list_reassignments([tp])
                at = (before + self.clock()) / 2 - start
                sample = Sample(at, report.get(TopicPartitionReplica(topic, 0, follower), 0),
                                report.get(TopicPartitionReplica(topic, 0, leader), 0), moving)
                trace.samples.append(sample)
                if not moving:
                    break
                if at > self.timeout_s:
                    self.port.alter_reassignments({tp: None})
                    raise ClusterError(f"{scenario.label}: the copy did not finish in {self.timeout_s:.0f}s")
                self.sleep(max(0.0, self.poll_s - (self.clock() - before)))
            for key in sides:
                self._last_use[key] = self.clock()
        return trace

    def _unthrottle(self, scenario: Scenario, topic: str, leader: int, follower: int) -> None:
        brokers, topics = throttle_ops(scenario, topic, leader, follower, clear=True)
        self.port.incremental_alter_configs(brokers, topics)

    def _wait(self, condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
        from kreassign.cluster.errors import ClusterError

        deadline = self.clock() + timeout_s
        while not condition():
            if self.clock() > deadline:
                raise ClusterError(f"timed out waiting for {what}")
            self.sleep(0.1)


@contextlib.contextmanager
def _writing(bootstrap: str, tp: TopicPartition, bps: float) -> Iterator[None]:
    from kreassign.sandbox.kafka_engine.data import Writer

    record = int(min(max(bps / 100, 1000), 64 * 1024))
    writer = Writer(bootstrap, {tp: bps}, record_bytes=record).start()
    try:
        yield
    finally:
        writer.stop()


# ---- the emulator --------------------------------------------------------------------------------
PROBE_FETCH = FetchConfig(batch_bytes=FILL_BATCH_BYTES)
"""Kafka's fetch limits, over the record batches `KafkaProbe.prepare` writes"""


def run_emulator(scenario: Scenario, *, steps: Sequence[float] = (0.1,), timeout_s: float = 3600.0,
                 fetch: FetchConfig | None = None, warm: bool = False, network_bps: float | None = None) -> Trace:
    """The same scenario on a fresh emulator engine (brokers 1 and 2, leader 1) at its own
    clock, stepped in `steps` (cycled; (0.1,) is the tick of `--speed 1`) and sampled after
    every step; `fetch` the fetch limits (default: Kafka's, with the record batches of the data
    `KafkaProbe.prepare` writes: `PROBE_FETCH`); `network_bps` each broker's NIC (default:
    the engine's). `warm`: the leader's quota
    windows are full when the move starts (as `leader_start` finds a real run's), from a
    follower on a third broker that replicated an idle partition from it for WARM_S and goes on
    (a fetcher session of its own: the copy's session keeps its shape); the in-sync shapes are
    warm anyway."""
    from kreassign.sandbox.codes import AlterOp
    from kreassign.sandbox.engine import Engine

    leader, follower, other = 1, 2, 3
    fetch = fetch if fetch is not None else PROBE_FETCH
    engine = Engine({leader: None, follower: None, **({other: None} if warm else {})}, fetch=fetch,
                    **({} if network_bps is None else {"network_bps": network_bps}))
    engine.create_topic("move", assignments={0: [leader]}, sizes=[scenario.size], rates=[0.0])
    if warm:
        engine.create_topic("warm", assignments={0: [leader, other]}, sizes=[0], rates=[0.0])
    if scenario.shape in ("isr_idle", "isr_written"):
        engine.create_topic("move-isr", assignments={0: [leader, follower]}, sizes=[0], rates=[0.0])
    if warm or scenario.shape in ("isr_idle", "isr_written"):
        # the quota sensors record the idle in-sync fetches (one per fetch wait) over a whole span
        engine.advance(WARM_S)
    # as KafkaProbe.run: the writes start with the throttle, after the warm-up
    written = {"written": "move", "isr_written": "move-isr"}.get(scenario.shape)
    if written is not None:
        writes = engine.partition(written, 0)
        assert writes is not None
        engine.produce_bps[writes.row] = scenario.write_bps
    brokers, topics = throttle_ops(scenario, "move", leader, follower)
    for b, ops in brokers.items():
        engine.configs.incremental_alter_broker(b, [(k, AlterOp.SET, str(v)) for k, v in ops.items()], False)
    for t, ops in topics.items():
        engine.configs.incremental_alter_topic(t, [(k, AlterOp.SET, str(v)) for k, v in ops.items()], False)
    engine.config_changed()
    p = engine.partition("move", 0)
    assert p is not None
    engine.alter_reassignment("move", 0, [follower])
    trace = Trace(scenario, "emulator")
    i, start = 0, engine.now
    while p.reassigning and engine.now - start < timeout_s:
        engine.step(steps[i % len(steps)])
        i += 1
        size = engine.replica_size(p, follower) if follower in p.replicas else 0
        trace.samples.append(Sample(engine.now - start, size, int(engine.log_end[p.row]), p.reassigning))
    return trace
