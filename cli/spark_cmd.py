"""`kreassign spark start|stop|status`: a Spark standalone cluster (and Spark Connect) on this
machine, to run `simulate --master spark://...` or `--remote sc://...` against."""
from __future__ import annotations

from typing import Any

import click

from kreassign.cli.options import output_option


def _state_dir_option(f: Any) -> Any:
    return click.option("--state-dir", type=click.Path(file_okay=False),
                        help="Where the cluster keeps its state file, logs and work dirs "
                             "(default: ~/.local/state/kreassign/spark).")(f)


@click.group()
def spark() -> None:
    """Run a Spark standalone master and workers on this machine (127.0.0.1 only), through the
    installed pyspark's spark-class, optionally with a Spark Connect server.

    `spark start` prints the options that run `kreassign simulate` on it (--master URL, and
    --remote URL with --connect); `kreassign simulate --spark-local-cluster` (or
    `--spark-local-cluster connect`) reads them from the state dir by itself."""


@spark.command()
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Worker processes.")
@click.option("--cores", type=click.IntRange(1), default=None,
              help="Cores each worker offers (default: every core of this machine).")
@click.option("--memory", default="2g", show_default=True, help="Memory each worker offers to executors.")
@click.option("--connect", is_flag=True,
              help="Also start a Spark Connect server on the master (for simulate --remote).")
@click.option("--start-timeout", "timeout", type=click.FloatRange(min=1), default=180.0, show_default=True,
              help="Seconds to wait for every process to come up.")
@_state_dir_option
@output_option
def start(workers: int, cores: int | None, memory: str, connect: bool, timeout: float, state_dir: str | None,
          output: str) -> None:
    """Start the cluster in the background; print the options that run `simulate` on it
    (`--master URL`, and with --connect `--remote URL`), which `simulate --spark-local-cluster`
    reads by itself."""
    from dataclasses import asdict
    from pathlib import Path

    from kreassign.cli.console import emit_json
    from kreassign.simulate.local_cluster import ClusterOptions, default_state_dir, start_cluster

    directory = Path(state_dir) if state_dir else default_state_dir()
    options = ClusterOptions(workers=workers, memory_per_worker=memory, connect=connect, timeout_s=timeout,
                             **({} if cores is None else {"cores_per_worker": cores}))
    cluster = start_cluster(options, directory)
    if output == "json":
        emit_json({"running": True, **asdict(cluster)})
        return
    click.echo(f"--master {cluster.master_url}")
    if cluster.connect_url:
        click.echo(f"--remote {cluster.connect_url}")
    state = "" if directory == default_state_dir() else f" --spark-state-dir {directory}"
    click.echo(f"Spark running in the background ({workers} worker{'s' if workers != 1 else ''}, state in "
               f"{directory}). Simulate on it with `kreassign simulate --spark-local-cluster{state} ...` (its "
               "master, the address above)"
               + (f" or `--spark-local-cluster connect{state}` (Spark Connect)" if cluster.connect_url else "")
               + f"; stop it with: kreassign spark stop --state-dir {directory}", err=True)


@spark.command()
@_state_dir_option
@output_option
def stop(state_dir: str | None, output: str) -> None:
    """Stop the cluster started with `kreassign spark start`."""
    from pathlib import Path

    from kreassign.simulate.local_cluster import default_state_dir, stop_cluster

    directory = Path(state_dir) if state_dir else default_state_dir()
    cluster = stop_cluster(directory)
    if output == "json":
        from dataclasses import asdict

        from kreassign.cli.console import emit_json

        emit_json({"stopped": cluster is not None,
                   **(asdict(cluster) if cluster is not None else {"state_dir": str(directory)})})
    elif cluster is None:
        click.echo(f"No Spark cluster is running from {directory}.", err=True)
    else:
        click.echo(f"Stopped {', '.join(cluster.pids)} ({cluster.master_url}).", err=True)


@spark.command()
@_state_dir_option
@output_option
def status(state_dir: str | None, output: str) -> None:
    """Show whether the cluster runs, its URLs and which of its processes are alive."""
    from dataclasses import asdict
    from pathlib import Path

    from kreassign.cli.console import emit_json
    from kreassign.cluster.errors import ExitStatus
    from kreassign.simulate.local_cluster import default_state_dir, read_status

    directory = Path(state_dir) if state_dir else default_state_dir()
    cluster = read_status(directory)
    if output == "json":
        emit_json({"running": cluster is not None,
                   **({**asdict(cluster), "alive": cluster.alive()} if cluster else {"state_dir": str(directory)})})
    elif cluster is None:
        click.echo(f"No Spark cluster is running from {directory}.", err=True)
    else:
        click.echo(f"master:    {cluster.master_url}")
        click.echo(f"connect:   {cluster.connect_url or '-'}")
        click.echo(f"web UI:    {cluster.master_ui}")
        click.echo(f"started:   {cluster.started_at}")
        click.echo("processes: " + ", ".join(f"{role} (pid {pid}, {'up' if up else 'down'})"
                                             for (role, pid), up in zip(cluster.pids.items(),
                                                                        cluster.alive().values())))
        click.echo(f"state:     {cluster.state_dir}")
        state = "" if directory == default_state_dir() else f" --spark-state-dir {directory}"
        click.echo(f"simulate:  kreassign simulate --spark-local-cluster{state} (--master {cluster.master_url})"
                   + (f", or --spark-local-cluster connect{state} (--remote {cluster.connect_url})"
                      if cluster.connect_url else ""))
    if cluster is None:
        raise click.exceptions.Exit(int(ExitStatus.ERROR))
