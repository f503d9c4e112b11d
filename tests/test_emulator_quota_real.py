"""The emulator's replication quota and fetches against one real broker's own log
(tests/recorded/leader_quota_4.4.0.txt: Kafka 4.4.0's request log and quota trace during a
leader-throttled move at 1 MB/s, the `isr_idle` shape of bench_real_throttle).

What the log settled (issue 27): a fetch of a lagging partition reads, sends and counts against
both quotas a whole `replica.fetch.max.bytes` (the segment is sliced through a record batch),
the follower keeps only the whole batches; a parked fetch comes back every 503-506 ms; and fed
those records, `SampledRates` measures what the broker measured."""
from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest

from kreassign.sandbox.copy_probe import MB, Scenario, run_emulator, summarize
from kreassign.sandbox.eta_probe import floods
from kreassign.sandbox.fetch import FetchConfig
from kreassign.sandbox.kafka_engine.data import FILL_BATCH_BYTES
from kreassign.sandbox.quota import SampledRates

LOG = Path(__file__).resolve().parent / "recorded" / "leader_quota_4.4.0.txt"
MiB = 1024 * 1024


def events() -> list[tuple[str, float, float]]:
    """(kind, seconds, bytes for 'R' or the measured MB/s for 'C')"""
    out = []
    for line in LOG.read_text().splitlines():
        if line and not line.startswith("#"):
            kind, ms, value = line.split()
            out.append((kind, int(ms) / 1000.0, float(value)))
    return out


def test_sampled_rates_measure_what_the_real_broker_measured() -> None:
    rates = SampledRates(1)
    checks = []
    for kind, t, value in events():
        if kind == "R":
            rates.record(np.array([value]), t)
        else:
            checks.append((rates.rates(t)[0] / 1e6, value))
    assert len(checks) > 150
    # both floods' windows, every check to 0.1% (the log's times are whole milliseconds)
    assert max(abs(ours / real - 1) for ours, real in checks) < 0.001, checks
    # after a flood of 11 reads the broker divided by 10.7 s and 11.2 s in turn, never by more
    # than 11 reads' worth of its 1 MB/s: so no twelfth batch before the next flood
    assert min(real for _, real in checks) > 11 * MiB / 1e6 / 11.534 > 1.0


def test_a_read_counts_whole_against_the_quota_and_the_follower_keeps_whole_batches() -> None:
    reads = [value for kind, _, value in events() if kind == "R" and value > 0]
    # two floods of 11 whole reads, then 2 and the log's last 407,178 bytes
    assert reads[:-1] == [MiB] * 24 and reads[-1] == 407_178
    fetch = FetchConfig(batch_bytes=FILL_BATCH_BYTES)
    # the replica grew 983,266 bytes a fetch (bench_real_throttle's traces): one batch of each
    # read, and the partition's 24,005,562 bytes are 24 such batches and that last read
    assert fetch.kept(np.array([float(MiB)]), np.array([24e6]))[0] == FILL_BATCH_BYTES
    assert 24 * FILL_BATCH_BYTES + reads[-1] == 24_005_562
    assert fetch.kept_share == pytest.approx(FILL_BATCH_BYTES / MiB)
    # the last read reaches the log's end: all of it is kept
    assert fetch.kept(np.array([500_000.0]), np.array([500_000.0]))[0] == 500_000.0
    # the producer's default 16 KiB batches fill a fetch exactly; a batch larger than a fetch is
    # not modelled (the bytes count as read)
    assert FetchConfig().kept_share == 1.0
    assert FetchConfig(partition_max_bytes=1000).kept(np.array([1000.0]), np.array([5000.0]))[0] == 1000.0
    with pytest.raises(ValueError):
        FetchConfig(batch_bytes=0)
    assert FetchConfig.from_json(fetch.to_json()).batch_bytes == FILL_BATCH_BYTES


def test_a_parked_fetch_comes_back_at_the_real_cadence() -> None:
    idle = [t for kind, t, value in events() if kind == "R" and value == 0]
    gaps = [b - a for a, b in zip(idle, idle[1:]) if 0.4 < b - a < 0.6]
    assert len(gaps) > 40
    assert abs(statistics.median(gaps) - FetchConfig().parked_cycle_s) < 0.002


def test_a_warm_leader_floods_eleven_batches_as_the_real_broker_did() -> None:
    """The same move on the emulator (its in-sync partition replicated 12 s first, as the real
    one was). The real broker: 11 batches (10,815,926 bytes) at once, the next 11 some 11.3 s
    later, the last 2.4 MB at 22.6 s; caught up at 22.7 and 23.5 s in two runs."""
    trace = run_emulator(Scenario(1 * MB, "leader", "isr_idle", 24 * MB))
    bursts = floods([(0.0, 0)] + [(s.t, s.follower_bytes) for s in trace.samples])
    first_t, first = bursts[0]
    assert first_t < 1.0 and first == 11 * FILL_BATCH_BYTES, bursts
    assert 10.5 < bursts[1][0] < 12.5 and len(bursts) == 3, bursts
    caught = summarize(trace)["caught_s"]
    assert 21.5 < caught < 24.5, caught
