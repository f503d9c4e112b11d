"""`kreassign simulate`: rehearse a rebalance on Spark, over a grid of scenarios."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kreassign.cli.options import DURATION, RATE, output_option, plan_option, units_option

if TYPE_CHECKING:
    from rich.table import Table

    from kreassign.cluster.units import Units

    from kreassign.simulate.request import SimulationResult

T = TypeVar("T")


def _axis(values: Sequence[str], parse: Callable[[str], T], option: str) -> tuple[T, ...] | None:
    """Repeated options, each possibly comma-separated (`--throttle 50MB/s,100MB/s`)."""
    from kreassign.cluster.errors import InputError

    items = [v.strip() for value in values for v in value.split(",") if v.strip()]
    if not items:
        return None
    try:
        return tuple(parse(item) for item in items)
    except InputError as exc:
        raise click.BadParameter(str(exc), param_hint=f"'{option}'") from None


def _throttle(text: str) -> float | None:
    from kreassign.cluster.units import parse_rate

    return None if text.lower() in ("none", "unthrottled") else float(parse_rate(text))


def _per_broker(text: str) -> int | None:
    from kreassign.cluster.errors import InputError

    if text.lower() in ("all", "none"):
        return None
    if not text.isdigit():
        raise InputError(f"'{text}' is not a number of moves per broker (or 'all')")
    return int(text)


def _multiplier(text: str) -> float:
    from kreassign.cluster.errors import InputError

    try:
        return float(text.lower().lstrip("x"))
    except ValueError:
        raise InputError(f"'{text}' is not a write-rate multiplier such as 1.5 or x2") from None


def _share(text: str) -> float:
    from kreassign.cluster.errors import InputError

    raw = text.strip()
    try:
        return float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise InputError(f"'{text}' is not a share such as 20% or 0.2") from None


@click.command()
@click.option("--snapshot", type=click.Path(dir_okay=False), help="Cluster snapshot (JSON or Parquet).")
@click.option("--synthetic", metavar="SPEC",
              help="Generate a cluster and its plan on Spark instead: brokers=N,racks=N,partitions=N,"
                   "rf=N,add=N|remove=N,moves=N,size=1GB,write=100kB/s,capacity=1.25GB/s,seed=N.")
@plan_option(required=False, help="The plan to rehearse (Kafka reassignment JSON), with --snapshot.")
@click.option("--planner", type=click.Choice(["rebalance"]),
              help="Plan on the snapshot with kreassign's balanced planner instead of a plan file.")
@click.option("--throttle", "throttles", multiple=True, metavar="RATE[,RATE...]",
              help="Replication throttle to try (repeatable; 'none' for unthrottled).")
@click.option("--moves-per-broker", "per_broker", multiple=True, metavar="N[,N...]",
              help="Schedule: moves each broker sends or receives at once ('all': no limit).")
@click.option("--write-multiplier", "multipliers", multiple=True, metavar="X[,X...]",
              help="Scale every produce and consume rate (load during the move).")
@click.option("--fail", "failures", multiple=True, metavar="BROKER@TIME",
              help="A broker failing mid-move: 7@30m, random@50% (of the run), or none.")
@click.option("--seed", "seeds", multiple=True, metavar="N[,N...]",
              help="Seeds for random failures (one scenario each).")
@click.option("--headroom-target", default="20%", show_default=True,
              help="Network share each broker should keep for clients.")
@click.option("--client-quota", type=RATE, default=None, help="Producer byte-rate quota per client (KIP-13).")
@click.option("--fetch-quota", type=RATE, default=None, help="Consumer byte-rate quota per client (KIP-13).")
@click.option("--clients-per-broker", type=int, default=10, show_default=True,
              help="Clients sharing each broker's traffic.")
@click.option("--client-baseline", "client_baseline", type=click.Path(dir_okay=False),
              help="A `kreassign canary -o json` taken on the real cluster: its idle produce round trip becomes "
                   "the simulated clients' baseline latency (default 1 ms).")
@click.option("--client-request-timeout", type=DURATION, default=30.0, show_default=True,
              help="The simulated clients' request.timeout.ms (KIP-19), as a duration.")
@click.option("--network-capacity", type=RATE, default=None,
              help="NIC capacity each way for snapshot brokers that do not record one (default: unlimited).")
@click.option("--timeline-points", type=click.IntRange(2, 10_000), default=120, show_default=True,
              help="Samples per timeline.")
@click.option("--out", "out_dir", default="simulation", show_default=True, type=click.Path(file_okay=False),
              help="Directory for Parquet results and plots.")
@click.option("--no-plots", is_flag=True, help="Skip the PNG plots.")
@click.option("--report", "report", type=click.Path(dir_okay=False), default=None, metavar="FILE.html",
              help="Also write one self-contained HTML report (plan, makespans and bounds, critical brokers, "
                   "timeline plots, client impact), readable offline.")
@click.option("--master", default="local[*]", show_default=True,
              help="Spark master: local[*], local[N], spark://HOST:7077, yarn, k8s://URL "
                   "(executors need kreassign installed).")
@click.option("--remote", default=None, metavar="sc://HOST:PORT", help="Run on a Spark Connect server.")
@click.option("--spark-local-cluster", "local_cluster", is_flag=False, flag_value="master", default=None,
              type=click.Choice(["master", "connect"]),
              help="Run on the cluster `kreassign spark start` runs (its master; `connect`: its Spark "
                   "Connect server) without copying its address.")
@click.option("--spark-state-dir", type=click.Path(file_okay=False),
              help="The state dir of that cluster, as given to `kreassign spark start --state-dir`.")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="Extra Spark settings.")
@click.option("--shuffle-partitions", type=click.IntRange(1), default=8, show_default=True)
@click.option("--driver-memory", default="3g", show_default=True)
@units_option
@output_option
def simulate(snapshot: str | None, synthetic: str | None, plan_file: str | None, planner: str | None,
             throttles: tuple[str, ...], per_broker: tuple[str, ...], multipliers: tuple[str, ...],
             failures: tuple[str, ...], seeds: tuple[str, ...], headroom_target: str,
             client_quota: int | None, fetch_quota: int | None, clients_per_broker: int,
             client_baseline: str | None, client_request_timeout: float, network_capacity: int | None,
             timeline_points: int, out_dir: str, no_plots: bool, report: str | None, master: str,
             remote: str | None, local_cluster: str | None, spark_state_dir: str | None, confs: tuple[str, ...],
             shuffle_partitions: int, driver_memory: str, units: Units, output: str) -> None:
    """Rehearse a rebalance on a simulated copy of the cluster, on Spark.

    Every combination of throttle, schedule, write load, failure and seed is one scenario; each
    runs the replication model behind `kreassign estimate` in its own Spark task. Writes a
    summary, per-broker timelines and cluster timelines as Parquet, and PNG plots, to --out
    (with --report, also one HTML file with everything); prints the summary. Each scenario has
    one name (its throttle, then what else it sets) in the summary, the report, the plots'
    legends, the JSON and the Parquet summary; sizes and rates follow --units everywhere,
    plot axes included. "Bytes of the plan not yet copied" and the throughput plot come from
    the same broker timelines; the first reaches 0 when the last move ends. Scenarios that
    never finish are marked, and the plots' axes follow the ones that do.

    Spark runs embedded by default (--master local[*]). --master spark://HOST:PORT and --remote
    sc://HOST:PORT run on a cluster, --spark-local-cluster on the one `kreassign spark start`
    runs without copying its address. An address with nothing behind it, or with something
    that is not Spark, fails within seconds in one line (the Java stack trace only with
    --debug); `kreassign spark status` shows the local cluster's addresses.

    The Spark driver's JVM starts about twice as fast from a class-data archive, which the
    first simulation on a machine has recorded in the background once it is done, at low
    priority ($XDG_CACHE_HOME/kreassign/spark-cds, about 200 MB); KREASSIGN_SPARK_CDS=0 turns
    it off.
    """
    from kreassign.cli.console import emit_json, stderr_console, stdout_console
    from kreassign.cluster.errors import InputError
    from kreassign.simulate.client_impact import ClientModel
    from kreassign.simulate.inputs import PlanFile, PlannerRun, SnapshotInput
    from kreassign.simulate.pipeline import run_simulation
    from kreassign.simulate.request import SimulationRequest
    from kreassign.simulate.scenarios import ScenarioAxes, parse_failure
    from kreassign.simulate.session import SparkOptions
    from kreassign.simulate.synthetic import parse_synthetic

    if (snapshot is None) == (synthetic is None):
        raise click.UsageError("give exactly one of --snapshot FILE or --synthetic SPEC")
    if plan_file and planner:
        raise click.UsageError("give --reassignment-json-file or --planner, not both")
    master, remote = _where(master, remote, local_cluster, spark_state_dir)
    conf: dict[str, str] = {}
    for item in confs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"'{item}' is not KEY=VALUE", param_hint="'--conf'")
        conf[key.strip()] = value.strip()

    axes_values: dict[str, Any] = {
        "throttles": _axis(throttles, _throttle, "--throttle"),
        "moves_per_broker": _axis(per_broker, _per_broker, "--moves-per-broker"),
        "write_multipliers": _axis(multipliers, _multiplier, "--write-multiplier"),
        "failures": _axis(failures, parse_failure, "--fail"),
        "seeds": _axis(seeds, lambda s: int(s) if s.lstrip("-").isdigit() else _bad_seed(s), "--seed"),
    }
    axes = ScenarioAxes(**{k: v for k, v in axes_values.items() if v is not None})
    plan: PlanFile | PlannerRun | None = None
    if plan_file:
        plan = PlanFile(plan_file)
    elif planner:
        plan = PlannerRun(seed=(axes.seeds[0]))
    cluster = SnapshotInput(snapshot) if snapshot else parse_synthetic(synthetic or "")
    if synthetic and plan is not None:
        raise InputError("a synthetic cluster makes its own plan (add=N or remove=N in --synthetic); "
                         "drop --reassignment-json-file/--planner")
    request = SimulationRequest(
        cluster=cluster, plan=plan, axes=axes, output_dir=out_dir, plots=not no_plots, report_path=report,
        timeline_points=timeline_points, units=units,
        default_network_bps=None if network_capacity is None else float(network_capacity),
        clients=ClientModel(headroom_target=_share(headroom_target),
                            produce_quota_bps=None if client_quota is None else float(client_quota),
                            fetch_quota_bps=None if fetch_quota is None else float(fetch_quota),
                            clients_per_broker=clients_per_broker,
                            request_timeout_ms=client_request_timeout * 1000.0,
                            **_baseline(client_baseline)),
        spark=SparkOptions(master=master, remote=remote, shuffle_partitions=shuffle_partitions,
                           driver_memory=driver_memory, conf=conf,
                           debug=bool(click.get_current_context().find_root().params.get("debug")),
                           jvm_cache="use"),
    )
    errors = stderr_console()
    result = run_simulation(request, starting=lambda: errors.print(
        f"Simulating {axes.size} scenario{'s' if axes.size != 1 else ''} on {remote or master} ..."))
    if output == "json":
        emit_json(result.to_dict())
        return
    stdout_console().print(render_summary(result))
    errors.print(f"Results in {result.output_dir}: " + ", ".join(p.rsplit("/", 1)[-1] for p in result.files))


def _where(master: str, remote: str | None, local_cluster: str | None, state_dir: str | None) -> tuple[str, str | None]:
    """The master and Connect URL to run on: as given, or those of `kreassign spark start`'s cluster."""
    if local_cluster is None:
        if state_dir is not None:
            raise click.UsageError("--spark-state-dir goes with --spark-local-cluster")
        return master, remote
    ctx = click.get_current_context()
    if remote is not None or ctx.get_parameter_source("master") is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("give --spark-local-cluster or --master/--remote, not both")
    from pathlib import Path

    from kreassign.simulate.local_cluster import cluster_address, default_state_dir

    return cluster_address(Path(state_dir) if state_dir else default_state_dir(), local_cluster)


def _bad_seed(text: str) -> int:
    from kreassign.cluster.errors import InputError

    raise InputError(f"'{text}' is not a whole-number seed")


def render_summary(result: SimulationResult) -> Table:
    """The per-scenario summary as a rich table that fits 100 columns: the scenario's settings
    share one column and long cells wrap (the JSON output has every field on its own)."""
    from rich import box
    from rich.table import Table

    from kreassign.cluster.units import format_bytes, format_duration

    first = result.outcomes[0] if result.outcomes else None
    title = (f"{result.brokers} brokers, {result.partitions} partitions"
             + (f", {first.moves} moves ({format_bytes(first.bytes, result.units)})" if first else ""))
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  collapse_padding=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("scenario", min_width=16, overflow="fold")
    table.add_column("makespan", justify="right", min_width=9, overflow="fold")
    for name in ("lower\nbound", "client\nthrottle", f"min < {result.headroom_target:.0%}\nheadroom",
                 "brokers\nat risk", "produce\nremote", "timed-out\nrequests"):
        table.add_column(name, justify="right", no_wrap=True)
    for o in result.outcomes:
        table.add_row(
            str(o.scenario_id), o.name, o.makespan_text, format_duration(o.lower_bound_s),
            f"{o.max_client_throttle_ms:,.0f} ms", f"{o.minutes_below_headroom:,.1f}", f"{o.brokers_at_risk}",
            f"{o.max_produce_remote_ms:,.0f} ms", f"{o.timed_out_requests:,.0f}",
        )
    return table


def _baseline(path: str | None) -> dict[str, float]:
    """The ClientModel field a canary baseline sets (its idle produce round trip)."""
    if path is None:
        return {}
    from kreassign.cli.runtime import read_text
    from kreassign.cluster.client_latency import idle_round_trip_ms, read_canary
    from kreassign.cluster.errors import InputError

    rtt = idle_round_trip_ms(read_canary(read_text(path), path))
    if rtt is None:
        raise InputError(f"{path} has no produce latency to use as the baseline")
    return {"fetch_rtt_ms": rtt}
