"""Benchmark `kreassign simulate` on Spark (budgets from DESIGN.md, 2 cores):

* `million`: a 1,000,000-move rebalance on 2,000 brokers, one scenario (200 MB/s), under 20 s;
* `sweep32`: 32 scenarios (4 throttles x 2 schedules x 2 write loads x 2 failure settings) of a
  100,000-move rebalance on 1,000 brokers, under 60 s;
* scaling: the same plan with 1, 4, 16 and 32 scenarios, on local[1] and local[2].

Each case runs in its own process with its own embedded session (a master cannot change once
the JVM is up). Times exclude the session start, which is recorded separately; `cpu_s` is the
CPU time of the whole process tree (driver, JVM, Python workers) over the same span, the figure
that still means something when other work shares the 2 cores.

    python -m bench.bench_simulate              # end-to-end cases, library cases, scaling runs
    python -m bench.bench_simulate headline [NOTE...]   # the two library-level headline cases only
    python -m bench.bench_simulate e2e [--throttles 25MB/s,...] [--seeds 5,1] [--no-sweep] [--no-cds] [NOTE...]

The baseline of a sweep is its model CPU time alone (the same scenarios through `scenario_run`
in one Python process, without Spark), measured on the 1-scenario case and scaled by the
scenario count.

`e2e` (issue 28) times what a user runs: the `kreassign simulate` command in its own process,
from its start to its exit (Python start, JVM start, Spark, model, Parquet, plots), for the
1M-move case at each throttle and seed and for the 32-scenario sweep, with the stages its JSON
reports. Its CPU time is that of the whole process tree: this script becomes the subreaper of
what the command starts, so the JVM and the Python workers, which outlive their parents for a
moment, are waited for and counted too. The runs use the driver's class-data archive
(`simulate.jvm_cache`, recorded first if missing), as a user's runs do after the first;
`--no-cds` times runs without it, as a user's first run is (`cds_archive` says which).
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench.common import record
from bench.profile_simulate import tree_cpu_s

E2E_MILLION = "brokers=2000,racks=20,partitions=1000000,moves=1000000,rf=3,size=100MB,write=10kB/s,seed={seed}"
E2E_THROTTLES = ("25MB/s", "50MB/s", "100MB/s", "200MB/s")
E2E_SEEDS = (5, 1)
E2E_SWEEP = ("--throttle", "25MB/s,50MB/s,100MB/s,200MB/s", "--moves-per-broker", "all,4",
             "--write-multiplier", "1,1.5", "--fail", "none,random@50%")
"""the sweep32 axes of `_axes(32)` as `kreassign simulate` options"""

# Rebalances among existing brokers: each partition moves one replica to a seeded other broker.
# Median partition 100 MB (lognormal), median write 10 kB/s (Pareto): every broker's moves can
# keep up with their writes at the throttles swept, so every scenario finishes.
MILLION = "brokers=2000,racks=20,partitions=1000000,moves=1000000,rf=3,size=100MB,write=10kB/s,seed=1"
HUNDRED_K = "brokers=1000,racks=20,partitions=100000,moves=100000,rf=3,size=100MB,write=10kB/s,seed=2"
BUDGETS_S = {"million": 20.0, "sweep32": 60.0}
"""issue 17's targets, with plots, on 2 cores (the session start is recorded apart)"""


def _axes(scenarios: int) -> dict[str, Any]:
    from kreassign.simulate.scenarios import ScenarioAxes, parse_failure

    full = dict(throttles=(25e6, 50e6, 100e6, 200e6), moves_per_broker=(None, 4),
                write_multipliers=(1.0, 1.5), failures=(None, parse_failure("random@50%")))
    if scenarios == 32:
        return {"axes": ScenarioAxes(**full)}  # type: ignore[arg-type]
    throttles = (25e6, 50e6, 100e6, 200e6)[:min(scenarios, 4)]
    per_broker = (None, 4)[:max(1, min(2, scenarios // 4))]
    multipliers = (1.0, 1.5)[:max(1, min(2, scenarios // 8))]
    return {"axes": ScenarioAxes(throttles=throttles, moves_per_broker=per_broker,
                                 write_multipliers=multipliers)}


def run_case(name: str, master: str, scenarios: int) -> dict[str, Any]:
    """One case in this process: start Spark, run the simulation, report times."""
    from kreassign.simulate.pipeline import run_simulation
    from kreassign.simulate.request import SimulationRequest
    from kreassign.simulate.scenarios import ScenarioAxes
    from kreassign.simulate.session import SparkOptions, start_session
    from kreassign.simulate.synthetic import parse_synthetic
    spec = parse_synthetic(MILLION if name == "million" else HUNDRED_K)
    axes = ScenarioAxes(throttles=(200e6,)) if name == "million" else _axes(scenarios)["axes"]
    load_before = os.getloadavg()
    started = time.perf_counter()
    spark = start_session(SparkOptions(master=master, shuffle_partitions=8, driver_memory="4g"))
    session_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as out:
        request = SimulationRequest(cluster=spec, output_dir=out, axes=axes, plots=True)
        started, cpu = time.perf_counter(), tree_cpu_s(os.getpid())
        result = run_simulation(request, spark=spark)
        wall_s = time.perf_counter() - started
        cpu_s = tree_cpu_s(os.getpid()) - cpu
    spark.stop()
    first = result.outcomes[0]
    return {
        "case": name, "master": master, "scenarios": len(result.outcomes), "brokers": result.brokers,
        "partitions": result.partitions, "moves": first.moves, "bytes": first.bytes,
        "wall_s": round(wall_s, 2), "cpu_s": round(cpu_s, 2), "session_start_s": round(session_s, 2),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "stages_s": {k: round(v, 2) for k, v in result.timings_s.items()},
        "makespan_s": [o.makespan_s for o in result.outcomes][:4],
        "lower_bound_s": [o.lower_bound_s for o in result.outcomes][:4],
        "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def model_only(scenarios: int) -> float:
    """CPU seconds of the model alone for one scenario of the 100,000-move plan, times
    `scenarios`: what a sweep would cost with no Spark at all, on one core."""
    import numpy as np

    from kreassign.simulate.scenario_run import ScenarioArrays, run_scenario
    from kreassign.simulate.scenarios import Scenario

    rng = np.random.default_rng(2)
    brokers, moves = 1100, 100_000
    ids = np.arange(brokers)
    src = rng.integers(0, 1000, moves)
    arrays = ScenarioArrays(
        broker_ids=ids, network_in=np.full(brokers, 1.25e9), network_out=np.full(brokers, 1.25e9),
        client_in=np.full(brokers, 2e7), client_out=np.full(brokers, 4e7),
        replication_in=np.full(brokers, 4e7), replication_out=np.full(brokers, 4e7),
        leader_base=np.full(brokers, 5e6), leader_rate=np.full(brokers, 50e6),
        follower_rate=np.full(brokers, 50e6), move_id=np.arange(moves), source=src,
        dest=rng.integers(1000, 1100, moves),
        bytes=np.minimum(rng.lognormal(np.log(1e9), 1.5, moves), 2e12).astype(np.int64),
        write_bps=np.minimum(rng.pareto(1.5, moves) * 6e4 + 6e4, 1e7),
        failover_source=np.full(moves, -1), released_bps=np.zeros(moves),
    )
    started = time.process_time()
    run_scenario(arrays, Scenario(0, throttle_bps=50e6), 120)
    return (time.process_time() - started) * scenarios


def _subprocess(name: str, master: str, scenarios: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "bench.bench_simulate", "case", name, master, str(scenarios)],
                          capture_output=True, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"case {name} on {master} failed:\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1])


# ---- end to end: the CLI command as a user runs it --------------------------------------------
def _become_subreaper() -> bool:
    """Adopt the orphans of the commands this process starts (Linux), so their CPU time is
    counted when they are waited for."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _reap_orphans(timeout_s: float = 60.0) -> int:
    """Wait for the adopted descendants (the JVM exits once its Python parent is gone); kill
    what is left after `timeout_s`. Returns how many had to be killed."""
    import signal

    deadline, killed = time.monotonic() + timeout_s, 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return killed
        if pid:
            continue
        if time.monotonic() > deadline:
            for child in _children(os.getpid()):
                os.kill(child, signal.SIGKILL)
                killed += 1
            deadline = time.monotonic() + timeout_s
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
            return [int(x) for x in handle.read().split()]
    except OSError:
        return []


def _git_commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False,
                          cwd=os.path.dirname(os.path.abspath(__file__)))
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results"],
                           capture_output=True,
                           text=True, check=False, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    return proc.stdout.strip() + ("+dirty" if dirty else "")


def _kreassign() -> list[str]:
    """The `kreassign` entry point of this interpreter's environment (what a user types)."""
    script = os.path.join(os.path.dirname(sys.executable), "kreassign")
    return [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "kreassign.cli.main"]


def run_cli(args: list[str]) -> dict[str, Any]:
    """`kreassign simulate ARGS --out TMP -o json` in its own process: wall time from start to
    exit, CPU seconds of its whole process tree, load before and after, and its JSON."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [*_kreassign(), "simulate", *args, "--out", out, "-o", "json"]
        load_before = os.getloadavg()
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall_s = time.perf_counter() - started
        stragglers = _reap_orphans()
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_after = os.getloadavg()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    doc = json.loads(proc.stdout)
    stages = {k: round(v, 2) for k, v in doc["timings_s"].items()}
    scenarios = doc["scenarios"]
    return {
        "command": "kreassign simulate " + " ".join(args),
        "wall_s": round(wall_s, 2),
        "cpu_s": round(cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime, 2),
        "stages_s": stages,
        "outside_stages_s": round(wall_s - sum(doc["timings_s"].values()), 2),
        "scenarios": len(scenarios),
        "moves": scenarios[0]["moves"] if scenarios else 0,
        "makespan_s": [o["makespan_s"] for o in scenarios],
        "lower_bound_s": [o["lower_bound_s"] for o in scenarios],
        "stalled_moves": [o["stalled_moves"] for o in scenarios],
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "killed_stragglers": stragglers,
    }


def _cds_archive(use: bool) -> bool:
    """Whether the runs have the driver's class-data archive (`simulate.jvm_cache`): with `use`,
    record it first if missing (a user's later runs have it), else turn it off for the runs (a
    user's first run: no archive, and none recorded in the background during the timing)."""
    from kreassign.simulate import jvm_cache
    from kreassign.simulate.session import find_java

    java = find_java()
    if not use or java is None or not jvm_cache.enabled():
        os.environ[jvm_cache.ENV] = "0"
        return False
    if not jvm_cache.archive_path(java).is_file():
        subprocess.run([sys.executable, "-m", "kreassign.simulate.jvm_recorder"], check=True)
    return jvm_cache.archive_path(java).is_file()


def e2e(*, throttles: tuple[str, ...] = E2E_THROTTLES, seeds: tuple[int, ...] = E2E_SEEDS, sweep: bool = True,
        note: str = "", cds: bool = True) -> list[dict[str, Any]]:
    """The 1M-move case at every throttle and seed, then the sweep, each recorded as it ends."""
    subreaper = _become_subreaper()
    commit = _git_commit()
    cds_archive = _cds_archive(cds)
    rows = []
    for seed in seeds:
        for throttle in throttles:
            case = run_cli(["--synthetic", E2E_MILLION.format(seed=seed), "--throttle", throttle])
            rows.append(record("bench_simulate", case="e2e_million", throttle=throttle, seed=seed,
                               **case, budget_s=BUDGETS_S["million"],
                               within_budget=case["wall_s"] < BUDGETS_S["million"],
                               git_commit=commit, cpu_counts_orphans=subreaper, cds_archive=cds_archive,
                               note=note))
    if sweep:
        case = run_cli(["--synthetic", HUNDRED_K, *E2E_SWEEP])
        rows.append(record("bench_simulate", case="e2e_sweep32", **case, budget_s=BUDGETS_S["sweep32"],
                           within_budget=case["wall_s"] < BUDGETS_S["sweep32"], git_commit=commit,
                           cpu_counts_orphans=subreaper, cds_archive=cds_archive, note=note))
    return rows


def main(*, scaling_runs: bool = True, note: str = "") -> None:
    """The end-to-end cases, the two library-level headline cases, then (unless `scaling_runs`
    is off) the scaling runs."""
    if scaling_runs:
        e2e(note=note)
    load = os.getloadavg()[0]
    million = _subprocess("million", "local[2]", 1)
    record("bench_simulate", **million, budget_s=BUDGETS_S["million"],
           within_budget=million["wall_s"] < BUDGETS_S["million"], load_average_1m=round(load, 2), note=note)
    sweep = _subprocess("sweep32", "local[2]", 32)
    baseline = model_only(32)
    record("bench_simulate", **sweep, budget_s=BUDGETS_S["sweep32"],
           within_budget=sweep["wall_s"] < BUDGETS_S["sweep32"],
           baseline={"what": "model CPU time of 32 scenarios in one process, no Spark",
                     "seconds": round(baseline, 2)},
           ratio_vs_baseline=round(sweep["wall_s"] / baseline, 2), load_average_1m=round(load, 2), note=note)
    if not scaling_runs:
        return
    scaling = {}
    for master in ("local[1]", "local[2]"):
        for n in (1, 4, 16, 32):
            case = _subprocess("scaling", master, n)
            scaling[f"{master}/{n}"] = case["wall_s"]
    record("bench_simulate", case="scaling", wall_s_by_master_and_scenarios=scaling,
           speedup_local2_vs_local1_at_32=round(scaling["local[1]/32"] / scaling["local[2]/32"], 2),
           load_average_1m=round(os.getloadavg()[0], 2))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "case":
        print(json.dumps(run_case(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    elif len(sys.argv) >= 2 and sys.argv[1] == "headline":
        main(scaling_runs=False, note=" ".join(sys.argv[2:]))
    elif len(sys.argv) >= 2 and sys.argv[1] == "e2e":
        import argparse

        parser = argparse.ArgumentParser(prog="python -m bench.bench_simulate e2e")
        parser.add_argument("--throttles", default=",".join(E2E_THROTTLES))
        parser.add_argument("--seeds", default=",".join(str(s) for s in E2E_SEEDS))
        parser.add_argument("--no-sweep", action="store_true")
        parser.add_argument("--sweep-only", action="store_true")
        parser.add_argument("--no-cds", action="store_true", help="without the driver's class-data archive (a first run)")
        parser.add_argument("note", nargs="*")
        ns = parser.parse_intermixed_args(sys.argv[2:])
        e2e(throttles=() if ns.sweep_only else tuple(t for t in ns.throttles.split(",") if t),
            seeds=tuple(int(x) for x in ns.seeds.split(",") if x), sweep=not ns.no_sweep, note=" ".join(ns.note),
            cds=not ns.no_cds)
    else:
        main()
