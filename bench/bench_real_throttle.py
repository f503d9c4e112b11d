"""Copy rate / quota on real Kafka brokers, and the emulator on the same scenarios (issue 27,
items 1 and 3).

Starts a 3-broker KRaft cluster of real Kafka (`KafkaCluster`, small heaps, stopped at the end),
and moves one partition per rate (100 kB/s, 1, 10 and 50 MB/s) from broker to broker in a ring
under a leader throttle, a follower throttle or both, in each session shape of
`kreassign.sandbox.copy_probe` (alone, with an idle or a written in-sync partition in the same
fetcher session, written by a producer), several repetitions interleaved; plus one unthrottled
copy of the largest partition per repetition (what this machine replicates at most). Progress
is the adding replica's DescribeLogDirs size, polled every 0.25 s. Each run's summary and the
load average go to bench/results/bench_real_throttle.jsonl (with its trace), and the tables
(median and spread per scenario, emulator vs real) to bench/results/real_throttle_<version>.md.

    python -m bench.bench_real_throttle                     # the whole plan (about 45 minutes)
    python -m bench.bench_real_throttle --reps 1 --rates 1MB/s --shapes idle --throttles both
    python -m bench.bench_real_throttle --table             # only rewrite the tables from the jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from bench.common import RESULTS, record
from kreassign.cluster.units import parse_rate
from kreassign.sandbox.copy_probe import (
    MB,
    PROBE_FETCH,
    SHAPES,
    THROTTLES,
    WARM_S,
    Sample,
    Scenario,
    Trace,
    leader_start,
    rate_label,
    run_emulator,
    summarize,
)

NAME = "bench_real_throttle"
RATES = (100_000, 1 * MB, 10 * MB, 50 * MB)
SECONDS = {100_000: 30.0, 1 * MB: 20.0, 10 * MB: 20.0, 50 * MB: 15.0}
"""how long each rate's copy takes at the quota (the partition holds rate x seconds)"""
PLAN: dict[str, tuple[tuple[str, ...], int]] = {
    # shape: (throttles, repetitions)
    "idle": (("leader", "follower", "both"), 3),
    "isr_idle": (("follower", "both"), 2),
    "isr_written": (("leader", "follower", "both"), 2),
    "written": (("leader", "follower", "both"), 2),
}
BROKERS = 3
EMULATOR_DIFF = 0.10
"""where the emulator's copy rate differs from the real broker's by more than this, it is fixed"""


def size_for(rate: float) -> int:
    return int(rate * SECONDS.get(int(rate), 20.0))


def runs(rates: Sequence[float], shapes: Sequence[str], throttles: Sequence[str] | None,
         reps: int | None) -> list[tuple[int, Scenario]]:
    """(repetition, scenario), repetitions outermost so load drifts spread over all scenarios."""
    out = []
    top = max(reps or n for _, n in PLAN.values())
    for rep in range(top):
        if throttles is None or "none" in throttles:
            out.append((rep, Scenario(max(rates), "none", "idle", size_for(max(rates)))))
        for shape in shapes:
            kinds, n = PLAN[shape]
            if rep >= (reps or n):
                continue
            for throttle in (t for t in (throttles or kinds) if t != "none"):
                for rate in rates:
                    out.append((rep, Scenario(rate, throttle, shape, size_for(rate))))
    return out


def run_real(version: str, plan: list[tuple[int, Scenario]], heap: str) -> None:
    from kreassign.cluster.admin import open_admin
    from kreassign.sandbox.copy_probe import KafkaProbe
    from kreassign.sandbox.kafka_engine.cluster import KafkaCluster
    from kreassign.sandbox.kafka_engine.dist import locate

    rates = sorted({s.rate for _, s in plan})
    started = time.monotonic()
    with KafkaCluster(locate(None, version), brokers=BROKERS, racks=0, log_dirs=1, topics=(), heap=heap) as kafka:
        start_s = time.monotonic() - started
        with open_admin(kafka.internal_bootstrap, timeout_s=60.0) as port:
            probe = KafkaProbe(kafka.internal_bootstrap, port)
            where: dict[float, int] = {}
            fill_s: dict[str, float] = {}
            for i, rate in enumerate(rates):
                where[rate] = i % BROKERS + 1
                t0 = time.monotonic()
                probe.prepare(topic_of(rate), where[rate], size_for(rate))
                fill_s[rate_label(rate)] = round(time.monotonic() - t0, 1)
            print(f"cluster up in {start_s:.0f}s, filled {fill_s}", flush=True)
            for n, (rep, scenario) in enumerate(plan):
                leader = where[scenario.rate]
                follower = leader % BROKERS + 1
                load = os.getloadavg()
                trace = probe.run(scenario, topic_of(scenario.rate), leader, follower)
                where[scenario.rate] = follower
                summary = summarize(trace)
                row = record(NAME, engine="kafka", kafka_version=version, rep=rep, scenario=scenario.label,
                             rate=scenario.rate, throttle=scenario.throttle, shape=scenario.shape,
                             size=scenario.size, write_bps=scenario.write_bps, leader=leader, follower=follower,
                             warm_s=WARM_S if scenario.shape.startswith("isr_") else 0.0,
                             loadavg_before=[round(x, 2) for x in load],
                             loadavg_after=[round(x, 2) for x in os.getloadavg()], heap=heap,
                             cluster_start_s=round(start_s, 1), fill_s=fill_s, **summary,
                             trace=trace.to_json()["samples"], quiet=True)
                print(f"[{n + 1}/{len(plan)}] {scenario.label} rep {rep}: copy/quota {row['copy_over_quota']} "
                      f"steady {row['steady_over_quota']} in {row['caught_s']}s, load {load[0]:.2f}", flush=True)


def topic_of(rate: float) -> str:
    return f"move-{int(rate)}"


def emulator_rows(scenarios: Iterable[tuple[Scenario, bool]], speed: float | None = None
                  ) -> dict[tuple[Scenario, bool], dict[str, Any]]:
    """The emulator's summary of each (scenario, warm leader), its brokers replicating at
    `speed` B/s unthrottled if given (`machine_speed`)."""
    fetch, nic = None, None
    if speed:
        fetch = replace(PROBE_FETCH, round_s=PROBE_FETCH.partition_max_bytes / speed)
        nic = speed
    return {(s, warm): summarize(run_emulator(s, warm=warm, fetch=fetch, network_bps=nic)) for s, warm in scenarios}


def machine_speed(rows: list[dict[str, Any]], quiet_load: float) -> float | None:
    """How fast this machine's brokers replicate one partition unthrottled, B/s: the median
    `idle/none` copy on a quiet machine (None without one). The emulator's brokers are given it,
    as their NICs and as one fetch of `replica.fetch.max.bytes` per fetch cycle, so that both
    engines drain a warm leader's flood at the same speed: the real ones replicate over loopback
    (280-340 MB/s here when quiet), the emulator's have 100 MB/s NICs by default."""
    rates = [r["active_over_quota"] * r["rate"] for r in rows
             if r["throttle"] == "none" and r["loadavg_before"][0] <= quiet_load and r.get("active_over_quota")]
    return statistics.median(rates) if rates else None


def recorded(version: str) -> list[dict[str, Any]]:
    """The real runs of `version` in bench/results/bench_real_throttle.jsonl."""
    path = RESULTS / f"{NAME}.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    # in-sync shapes count from when their in-sync partition replicated WARM_S before the move
    return [r for r in rows if r.get("engine") == "kafka" and r.get("kafka_version") == version
            and (not r["shape"].startswith("isr_") or r.get("warm_s") == WARM_S)]


QUIET_LOAD = 4.0
"""runs whose 1-minute load was at most this before they started form the table of a quiet
machine: this bench's own cluster and writers, and nothing else, on 2 cores"""


def table(version: str, quiet_load: float = QUIET_LOAD) -> str:
    """The markdown tables of the recorded real runs of `version`, with the emulator's value of
    each scenario (computed now, at its own clock in 0.1 s ticks): every run, then the runs of a
    quiet machine alone (a loaded machine slows the real broker, never the emulator's clock)."""
    rows = recorded(version)
    quiet = [r for r in rows if r["loadavg_before"][0] <= quiet_load]
    speed = machine_speed(rows, quiet_load)
    loads = [x for r in rows for x in (r["loadavg_before"][0], r["loadavg_after"][0])]
    out = [f"# Copy rate / quota on real Kafka {version} and on the emulator",
           "",
           f"`python -m bench.bench_real_throttle` ({len(rows)} runs, {rows[0]['date'][:10] if rows else '-'} to "
           f"{rows[-1]['date'][:10] if rows else '-'}; 1-minute load {min(loads, default=0):.2f}-{max(loads, default=0):.2f} "
           f"on {os.cpu_count()} cores, shared). One partition moved between two of 3 brokers "
           f"(heap {rows[0]['heap'] if rows else '-'}); progress is the adding replica's DescribeLogDirs size every 0.25 s. "
           "`copy` = bytes copied by the time the follower caught up / that time / the throttle (what an ETA "
           "needs); `steady` = slope of the follower's size after the first 12 s (the quota span) / the "
           "throttle; `started` = when the first bytes came (controller, new replica and fetcher start-up: what "
           "a loaded machine stretches most), `active` = the copy rate from then on. In-sync shapes replicate "
           "their in-sync partition 12 s before the move (a warm leader). Written shapes write 10% of the "
           "throttle (at least 10 kB/s). The data is in 983,266-byte batches (`data.fill`): a fetch reads 1 MiB and keeps one. Emulator: the Engine at its own clock, 0.1 s ticks, with the same batches, "
           + (f"its brokers replicating as fast as this machine's do unthrottled ({speed / MB:.0f} MB/s: the median "
              "`idle/none` copy on a quiet machine, as their NICs and one 1 MiB fetch per cycle). " if speed else "")
           + "`diff` = "
           "the median over the runs of emulator / real - 1, the emulator run on each real run's start (the partition's size then, the leader warm or cold as the real one was); over 10% is marked, as `(within the runs)` where the emulator "
           "lies between the real runs' lowest and highest (their spread is where the quota windows fell), "
           "else **>10%**. A leader-throttled run whose copy had more than 5 s of the rate and more than one read 2 s after the move "
           "started had a warm leader (a follower fetched from it within the last span: the run before left "
           "one) and is a row of its own, `(warm leader)`, against the emulator with a warm leader.",
           "",
           *_scenario_table(rows, speed),
           "",
           f"## A quiet machine: the runs that started at a 1-minute load of {quiet_load:g} or less",
           "",
           f"{len(quiet)} runs: this bench's cluster and writers alone on the machine. Where these and the "
           "table above disagree, the load made the difference, and these are Kafka's.",
           "",
           *_scenario_table(quiet, speed)]
    return "\n".join(out) + "\n"


def _scenario_table(rows: list[dict[str, Any]], speed: float | None = None) -> list[str]:
    """One row per scenario and leader start, each real run against the emulator on the same
    start: the partition as large as the real one was when that run began (the ring's written
    runs grow it: 20 MB became 24 MB, and whether a copy needs two floods or three turns on it),
    and the leader as warm or cold as the real one was (`leader_start`: a leader that served a
    follower within the last quota span floods, a cold one does not; the in-sync shapes make it
    warm on purpose, the others were warm when the run before left a follower fetching from
    that broker)."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    kinds: dict[str, Scenario] = {}
    for r in rows:  # summarized again from the trace: the summary's rules may have changed since
        scenario = Scenario(r["rate"], r["throttle"], r["shape"], r["size"])
        trace = Trace(scenario, "kafka", [Sample(t, int(f), int(lead), bool(m)) for t, f, lead, m in r["trace"]])
        warm = leader_start(trace) == "warm" and not scenario.shape.startswith("isr_")
        label = r["scenario"] + (" (warm leader)" if warm else "")
        first = trace.samples[0].leader_bytes if trace.samples and trace.samples[0].leader_bytes > 0 else r["size"]
        by[label].append({**r, **summarize(trace), "emulated": (Scenario(r["rate"], r["throttle"], r["shape"], first),
                                                               warm)})
        kinds[label] = scenario
    emu = emulator_rows({r["emulated"] for rs in by.values() for r in rs}, speed)
    order = sorted(by, key=lambda k: (SHAPES.index(kinds[k].shape), THROTTLES.index(kinds[k].throttle),
                                      kinds[k].rate, k))
    out = ["| scenario | runs | real copy median (min-max) | real active | real steady | started s | caught s | load "
           "| emulator copy | emulator active | diff copy | diff active |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label in order:
        rs = by[label]
        copy, active, steady, started, caught = ([r[k] for r in rs if r.get(k) is not None] for k in (
            "copy_over_quota", "active_over_quota", "steady_over_quota", "started_s", "caught_s"))
        cells, marks = [], []
        for key in ("copy_over_quota", "active_over_quota"):
            pairs = [(emu[r["emulated"]][key], r[key]) for r in rs
                     if r.get(key) and emu[r["emulated"]][key] is not None]
            emulated = [e for e, _ in pairs]
            cells.append(_spread(emulated) if len(set(emulated)) > 1 else (f"{emulated[0]:.3f}" if emulated else "-"))
            # run by run: the emulator on each real run's start, over that run
            diff = statistics.median(e / real - 1 for e, real in pairs) if pairs else None
            reals = [real for _, real in pairs]
            # the real runs of one scenario spread by where the quota windows and floods fell;
            # an emulator inside that spread agrees with one of them
            inside = bool(pairs) and min(reals) <= statistics.median(emulated) <= max(reals)
            big = diff is not None and abs(diff) > EMULATOR_DIFF and kinds[label].throttle != "none"
            marks.append("-" if diff is None else f"{diff:+.1%}" + (
                (" (within the runs)" if inside else " **>10%**") if big else ""))
        load = "-".join(f"{x:.0f}" for x in (min(r["loadavg_before"][0] for r in rs),
                                            max(r["loadavg_before"][0] for r in rs)))
        out.append(f"| {label} | {len(rs)} | {_spread(copy)} | {_spread(active)} | {_spread(steady)} | "
                   f"{_median(started)} | {_median(caught)} | {load} | {cells[0]} | {cells[1]} | "
                   f"{marks[0]} | {marks[1]} |")
    return out


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kafka-version", default="4.4.0")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default: the plan's per shape)")
    parser.add_argument("--rates", nargs="*", default=None, help="throttles to measure, e.g. 1MB/s")
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--throttles", nargs="*", default=None, choices=THROTTLES)
    parser.add_argument("--heap", default="384m")
    parser.add_argument("--table", action="store_true", help="only rewrite the tables from the recorded runs")
    parser.add_argument("--resume", action="store_true",
                        help="skip the (repetition, scenario) runs already recorded for this Kafka version")
    args = parser.parse_args(argv)
    if not args.table:
        rates = [parse_rate(r) for r in args.rates] if args.rates else list(RATES)
        plan = runs(rates, args.shapes, args.throttles, args.reps)
        if args.resume:
            done = {(r["rep"], r["scenario"]) for r in recorded(args.kafka_version)}
            plan = [(rep, s) for rep, s in plan if (rep, s.label) not in done]
        print(f"{len(plan)} runs", flush=True)
        run_real(args.kafka_version, plan, args.heap)
    text = table(args.kafka_version)
    (RESULTS / f"real_throttle_{args.kafka_version}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
