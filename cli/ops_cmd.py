"""`kreassign execute|verify|cancel|list|resume|abort`: live operations as subcommands.

Text output is Kafka's (the same renderers as the Kafka-compatible front door) with kreassign's
extras on stderr, except `execute`, which prints a short summary for a person (Kafka's text stays
on the Kafka-compatible front door); `--output json` prints one JSON document with a stable
schema instead.
Every command that writes has `--dry-run`. The work is done by `kreassign.execute.operations`;
a paced `execute` and `verify --watch` run the watch loop of `kreassign.execute.watch` and print
its events as `kreassign watch` does. Tests inject the connection, the clock and the sleeper
through `watch_cmd.Runtime` (click's obj).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kreassign.cli.options import (
    COUNT, DURATION, SIZE, THROTTLE, cluster_options, log_dir_timeout_option, output_option, plan_option, rate_options,
    units_option,
)
from kreassign.cli.runtime import connect, journal_store, read_plan, run_control, timing

if TYPE_CHECKING:
    from kreassign.cluster.kafka_json import ParsedReassignment
    from kreassign.cluster.port import ClusterPort
    from kreassign.execute.journal import Journal, JournalStore
    from kreassign.cluster.units import Units
    from kreassign.throttle.rates import Rates
    from kreassign.execute.operations import ExecuteRequest, VerifyRequest
    from kreassign.execute.pacing import PaceLimits
    from kreassign.execute.run import RunControl

F = TypeVar("F", bound=Callable[..., Any])


def _echo_err(lines: list[str]) -> None:
    for line in lines:
        click.echo(line, err=True)


def _emit(data: dict[str, Any]) -> None:
    from kreassign.cli.console import emit_json

    emit_json(data)


@click.command()
@cluster_options
@log_dir_timeout_option
@plan_option()
@rate_options()
@click.option("--log-dir-throttle", "--replica-alter-log-dirs-throttle", "log_dir_throttle", type=THROTTLE,
              help="Rate of moves between log dirs of one broker (replica.alter.log.dirs.io.max.bytes."
                   "per.second on the brokers whose replicas move). Brokers copy up to 1 MiB a fetch and "
                   "let a fetch through while their rate over the last 11 s is under it: below about "
                   "95kB/s a move goes no slower.")
@click.option("--additional", is_flag=True, help="Run alongside reassignments already in progress "
              "(also the way to change the throttle of a running plan).")
@click.option("--max-moves-per-broker", type=COUNT, default=None,
              help="Pace the plan: moves each broker sends, and receives, at once.")
@click.option("--max-inflight-bytes", type=SIZE, default=None, help="Pace the plan: bytes moving at once.")
@click.option("--order", type=click.Choice(["small-first", "large-first", "plan", "broker-balanced"]), default=None,
              help="Pace the plan: which partitions start first (default: the plan's order).")
@click.option("--interval", type=DURATION, default=None,
              help="With pacing: time between polls for finished moves (default 10s).")
@click.option("--retarget-in-flight", is_flag=True, help="Re-target partitions whose reassignment in "
              "flight another run started (refused by default).")
@click.option("--disallow-replication-factor-change", "disallow_rf_change", is_flag=True,
              help="Refuse each partition whose target changes its replication factor, as Kafka 4.1's flag "
              "(unpaced runs).")
@click.option("--force", is_flag=True, help="Take the cluster's execution lock from a run that is proven dead "
              "(same host: its process is gone; other host: its lease expired) although it ran another plan.")
@click.option("--dry-run", is_flag=True, help="Print what would be set and submitted; change nothing.")
@units_option
@output_option
def execute(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
            journal_dir: str | None, plan_file: str, rates: Rates, log_dir_throttle: int | None, additional: bool,
            max_moves_per_broker: int | None, max_inflight_bytes: int | None, order: str | None,
            interval: float | None, retarget_in_flight: bool, disallow_rf_change: bool, force: bool, dry_run: bool,
            units: Units, output: str, timeout: float) -> int:
    """Start a reassignment under throttles, recording every step in the execution journal.

    With --max-moves-per-broker, --max-inflight-bytes or --order the plan is paced: it is
    submitted in waves, each as earlier moves complete, so the command blocks until every
    partition has moved, showing progress as `kreassign watch` does (JSON lines with --output
    json), and then restores the throttles. Ctrl-C stops submitting; running the same command
    again (or `kreassign resume`) goes on from the journal with the same limits. Only one run
    writes to a cluster at a time (the execution lock). Exit status of a paced run: 0 done, 1 error.

    The moves (each wave's) are submitted once every broker reads its new rates back: a broker
    applies a throttle a moment after the controller accepts it. The wait is at most 10s; a broker
    slower than that is named, and the run goes on.

    A broker that does not answer is skipped; a move whose leader or new replica is on it is held
    back (it would copy unthrottled once the broker answers) and the command exits 1: `kreassign
    resume` sets the missed throttle first, then submits those moves."""
    from kreassign.cli import kafka_live
    from kreassign.cluster.kafka_json import validate_execute_entries
    from kreassign.execute.operations import ExecuteRequest
    from kreassign.execute.run import run_execute

    paced = max_moves_per_broker is not None or max_inflight_bytes is not None or order is not None
    if interval is not None and not paced:
        raise click.UsageError("--interval sets the polls of a paced execute: add --max-moves-per-broker, "
                               "--max-inflight-bytes or --order")
    if disallow_rf_change and paced:
        raise click.UsageError("--disallow-replication-factor-change goes with an unpaced execute")
    parsed = read_plan(plan_file)
    validate_execute_entries(parsed)
    request = ExecuteRequest.from_parsed(
        parsed, additional=additional,
        leader_rate=rates.leader, follower_rate=rates.follower,
        log_dir_rate=log_dir_throttle, log_dir_timeout_s=timeout, retarget_in_flight=retarget_in_flight,
        allow_rf_change=not disallow_rf_change)
    store = journal_store(journal_dir)
    control = run_control(force)
    if paced:
        from kreassign.execute.pacing import PaceLimits

        limits = PaceLimits(max_moves_per_broker, max_inflight_bytes, order or "plan")  # type: ignore[arg-type]
        return _execute_paced(request, limits, store, plan_file=plan_file, connection=(
            bootstrap_server, command_config, request_timeout), interval_s=interval, dry_run=dry_run, output=output,
            control=control, units=units)
    text = output == "text"
    out, err = sys.stdout, sys.stderr

    shown: list[Any] = []

    def show_plan(plan: Any) -> None:
        shown.append(plan)
        _echo_err([f"Warning: {w}" for w in plan.warnings])
        if text and dry_run:
            out.write(kafka_live.render_current_assignment(plan.current, plan.current_dirs))
            out.write(render_would_execute(plan))

    with connect(bootstrap_server, command_config, request_timeout) as port:
        try:
            outcome = run_execute(port, request, store=store, dry_run=dry_run, control=control, on_plan=show_plan)
        except (KeyboardInterrupt, BrokenPipeError):  # the journal says how to finish or undo
            if shown:
                err.write(kafka_live.interrupted_hint(store, shown[0]))
            raise
    if dry_run:
        if not text:
            _emit({"dry_run": True, "plan": outcome.plan.as_dict() if outcome.plan else None})
        return 0
    result = outcome.result
    assert result is not None
    _echo_err(kafka_live.took_over_lines(outcome.took_over) + [f"Journal: {result.journal_path}"])
    if not text:
        _emit(result.as_dict())
        return 0 if result.ok else 1
    if result.ok or (result.held_back and result.submitted and not result.submit_errors):
        from kreassign.cli.execute_render import execute_summary

        out.write("".join(f"{line}\n" for line in execute_summary(result, plan_file, units)))
    return kafka_live.finish_execute(result, err)


def _execute_paced(request: ExecuteRequest, limits: PaceLimits, store: JournalStore, *, plan_file: str,
                   connection: tuple[str | None, str | None, float | None], interval_s: float | None,
                   dry_run: bool, output: str, control: RunControl | None = None, units: Units = "decimal") -> int:
    """Submit the plan wave by wave and watch it to the end (the `watch --pace` loop)."""
    from kreassign.cli import kafka_live
    from kreassign.cli.watch_cmd import echo_first_wave, event_printer
    from kreassign.cluster.errors import InputError
    from kreassign.execute.run import run_execute

    if request.log_dir_rate is not None:
        raise click.UsageError("a paced execute moves replicas between brokers only: drop --log-dir-throttle, "
                               "or run the plan without pacing")
    if request.replica_log_dirs:
        raise InputError("a paced execute moves replicas between brokers only, and this plan also moves "
                         "replicas between log dirs: run it without --max-moves-per-broker, "
                         "--max-inflight-bytes and --order (or drop its log dirs)")
    emit, close = event_printer(output, units)
    try:
        with connect(*connection) as port:
            outcome = run_execute(port, request, store=store, pace=limits, dry_run=dry_run,
                                  **({} if interval_s is None else {"interval_s": interval_s}),
                                  control=control or run_control(), emit=emit)
    except KeyboardInterrupt:
        click.echo(f"Interrupted. The waves submitted so far keep moving: run the same command again (or "
                   f"`kreassign resume -f {plan_file}`) to submit the rest with the same limits, or "
                   f"`kreassign abort -f {plan_file}` to undo.", err=True)
        raise
    finally:
        close()
    result = outcome.watched
    assert result is not None
    if dry_run:
        echo_first_wave(result, len(request.targets), output)
    _echo_err(kafka_live.took_over_lines(outcome.took_over))
    if result.journal_path is not None:
        _echo_err([f"Journal: {result.journal_path}"])
    return int(result.status)


def render_would_execute(plan: Any) -> str:
    """--dry-run text: the throttle configs and submission `execute` would make."""
    lines = []
    for topic, keys in plan.throttles.topic_configs.items():
        for key, value in keys.items():
            lines.append(f"Would set {key}={value!r} on topic {topic}")
    for broker, keys in plan.throttles.broker_rates.items():
        for key, value in keys.items():
            lines.append(f"Would set {key}={value} on broker {broker}")
    count = len(plan.request.targets)
    lines.append(f"Would submit {count} partition reassignment{'' if count == 1 else 's'}: "
                 + ",".join(str(t.tp) for t in sorted(plan.request.targets, key=lambda t: t.tp)))
    return "\n".join(lines) + "\n"


@click.command()
@cluster_options
@plan_option()
@click.option("--preserve-throttles", is_flag=True, help="Leave throttles alone even when everything is done.")
@click.option("--exit-status", is_flag=True, help="Exit with status 3 while partitions or log-dir moves "
              "of the plan are still in progress.")
@click.option("--dry-run", is_flag=True, help="Report, and say which throttles would be cleared; change nothing.")
@click.option("--watch", "follow", is_flag=True,
              help="Keep watching until the plan's moves finish (progress, ETA, stalled moves, as "
                   "`kreassign watch` shows them), then clear the throttles.")
@click.option("--interval", type=DURATION, default=None, help="With --watch: time between polls (default 10s).")
@units_option
@output_option
def verify(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
           journal_dir: str | None, plan_file: str, preserve_throttles: bool, exit_status: bool,
           dry_run: bool, follow: bool, interval: float | None, units: Units, output: str) -> int:
    """Report a reassignment's progress; once nothing moves, clear the throttles its run set (restoring the
    values found before it). Throttles no kreassign run set (an operator's own) are left as they are; the
    Kafka-compatible --verify deletes them, as Kafka does.

    With --watch it follows the moves to the end instead of reporting once (JSON lines with
    --output json). Exit status with --watch: 0 done, 1 error."""
    from kreassign.cli import kafka_live
    from kreassign.cluster.errors import ExitStatus
    from kreassign.execute.operations import VerifyRequest
    from kreassign.execute.run import verify_run

    if interval is not None and not follow:
        raise click.UsageError("--interval goes with --watch")
    request = VerifyRequest(targets=read_plan(plan_file).entries, preserve_throttles=preserve_throttles,
                            dry_run=dry_run, foreign=False)
    if follow:
        return _verify_watching(request, journal_store(journal_dir), connection=(bootstrap_server, command_config, request_timeout),
                                interval_s=interval if interval is not None else 10.0, output=output, units=units)
    with connect(bootstrap_server, command_config, request_timeout) as port:
        result, owner = verify_run(port, request, store=journal_store(journal_dir), control=run_control())
    if output == "json":
        _emit(result.as_dict())
    else:
        text = kafka_live.render_verify(result)
        click.echo(text.replace("Clearing", "Would clear") if dry_run else text, nl=False)
        _echo_err([f"Warning: broker {b} did not answer DescribeLogDirs ({m})"
                   for b, m in sorted(result.unreachable.items())])
        _echo_err(kafka_live.clear_warnings(result.clear) + kafka_live.running_owner_lines(owner))
    if exit_status and result.in_progress:
        return int(ExitStatus.IN_PROGRESS)
    return 0 if result.clear is None or result.clear.complete else 1


def _verify_watching(request: VerifyRequest, store: JournalStore, *,
                     connection: tuple[str | None, str | None, float | None], interval_s: float, output: str,
                     units: Units = "decimal") -> int:
    """`verify --watch`: the watch loop over the plan's partitions, then the clear."""
    from kreassign.cli.watch_cmd import event_printer
    from kreassign.execute.watch import watch_plan

    clock, sleep = timing()
    with connect(*connection) as port:
        emit, close = event_printer(output, units)
        try:
            result = watch_plan(port, request.targets, store=store, clock=clock, sleep=sleep, emit=emit,
                                interval_s=interval_s, keep_throttles=request.preserve_throttles,
                                dry_run=request.dry_run)
        finally:
            close()
    return int(result.status)


@click.command()
@cluster_options
@log_dir_timeout_option
@plan_option()
@click.option("--preserve-throttles", is_flag=True, help="Leave throttles alone.")
@click.option("--dry-run", is_flag=True, help="Say what would be cancelled and cleared; change nothing.")
@output_option
def cancel(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
           journal_dir: str | None, plan_file: str, preserve_throttles: bool, dry_run: bool, output: str, timeout: float) -> int:
    """Cancel the plan's running reassignments (including pure additions) and clear throttles."""
    from kreassign.cli import kafka_live
    from kreassign.cluster.errors import TerseError
    from kreassign.execute.operations import CancelRequest
    from kreassign.execute.operations import cancel as run_cancel
    from kreassign.execute.run import refuse_while_running

    request = CancelRequest(targets=read_plan(plan_file).entries, preserve_throttles=preserve_throttles,
                            timeout_s=timeout, dry_run=dry_run, foreign=False)
    clock, sleep = timing()
    with connect(bootstrap_server, command_config, request_timeout) as port:
        if not dry_run:
            refuse_while_running(port, "cancel", run_control())
        result = run_cancel(port, request, store=journal_store(journal_dir), clock=clock, sleep=sleep)
    if output == "json":
        _emit(result.as_dict())
        return 0 if result.ok and (result.clear is None or result.clear.complete) else 1
    if result.errors:
        raise TerseError(kafka_live.render_errors(
            f"Error cancelling partition reassignment{'' if len(result.errors) == 1 else 's'} for:", result.errors))
    if dry_run:
        click.echo("Would cancel: " + (",".join(map(str, result.cancelled)) or "nothing"))
        click.echo("Would move back: " + (",".join(map(str, result.moves_back)) or "nothing"))
        if result.clear is not None:
            click.echo(kafka_live.render_clear(result.clear).replace("Clearing", "Would clear"), nl=False)
        return 0
    click.echo(kafka_live.render_cancel_partitions(result), nl=False)
    click.echo(kafka_live.NO_ACTIVE_MOVES if not result.moves_back
               else kafka_live.render_log_dir_started(result.log_dir_moves.started), nl=not result.moves_back)
    if result.log_dir_moves.timed_out:
        from kreassign.execute.logdir_moves import timed_out_message

        raise TerseError(timed_out_message(result.log_dir_moves.timed_out))
    if result.clear is not None:
        click.echo(kafka_live.render_clear(result.clear), nl=False)
    _echo_err(kafka_live.clear_warnings(result.clear))
    return 0 if result.ok and (result.clear is None or result.clear.complete) else 1


@click.command(name="list")
@cluster_options
@output_option
def list_command(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
                 journal_dir: str | None, output: str) -> None:
    """List every reassignment in flight in the cluster, and open execution journals."""
    from kreassign.cli import kafka_live
    from kreassign.execute.operations import list_reassignments

    from kreassign.execute.lock import LOCK_KEY
    from kreassign.execute.lock_owner import Owner

    with connect(bootstrap_server, command_config, request_timeout) as port:
        result = list_reassignments(port)
        cluster_id = port.describe_brokers().cluster_id
        owner = Owner.from_value(port.read_markers([LOCK_KEY]).get(LOCK_KEY))
    journals = journal_store(journal_dir).journals(cluster_id, open_only=True)
    if output == "json":
        _emit({**result.as_dict(), "open_journals": [
            {"path": str(j.path), "state": j.state, "created_at": j.created_at, "partitions": len(j.targets)}
            for j in journals], "execution_lock": None if owner is None else {
                "host": owner.host, "pid": owner.pid, "command": owner.command, "journal": owner.journal,
                "started_at": owner.started_at, "lease_until": owner.lease_until}})
        return
    click.echo(kafka_live.render_list(result), nl=False)
    _echo_err([f"Open journal: {j.path} ({j.state}, {len(j.targets)} partitions, since {j.created_at})"
               for j in journals] + ([f"Execution lock held by {owner.describe()}"] if owner is not None else []))


def _locate(port: ClusterPort, store: JournalStore, journal_path: str | None, plan_file: str | None) -> Journal:
    from kreassign.cluster.errors import JournalError

    if journal_path:
        return store.load(journal_path)
    cluster_id = port.describe_brokers().cluster_id
    if plan_file:
        found = store.find(cluster_id, read_plan(plan_file).entries)
        if found is None:
            raise JournalError(f"no journal for this plan on cluster {cluster_id} under {store.root}")
        return found
    candidates = store.journals(cluster_id, open_only=True)
    if len(candidates) != 1:
        listing = "".join(f"\n  {j.path} ({j.state})" for j in candidates)
        raise JournalError(f"{'no' if not candidates else len(candidates)} open journals for cluster "
                           f"{cluster_id} under {store.root}; name one with --journal FILE{listing}")
    return candidates[0]


def journal_options(f: F) -> F:
    f = plan_option(required=False)(f)
    return click.option("--journal", "journal_path", type=click.Path(dir_okay=False),
                        help="The journal to use (default: the plan's journal with "
                             "--reassignment-json-file, else the only open journal of the cluster).")(f)


@click.command()
@cluster_options
@journal_options
@click.option("--force", is_flag=True, help="Take the execution lock from a dead run of another plan.")
@click.option("--dry-run", is_flag=True, help="Say which steps are missing; change nothing.")
@output_option
def resume(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
           journal_dir: str | None, journal_path: str | None, plan_file: str | None, force: bool, dry_run: bool,
           output: str) -> int:
    """Finish an interrupted execute (or clear) from its journal: re-run the steps not done.

    A paced run goes on exactly as it would have: the same limits, order and rates (recorded
    in its journal), wave by wave until done, as the paced `execute` shows it. Moves held back
    because a broker missed its throttle are submitted once that broker has taken it; while it
    still does not answer they keep waiting and resume exits 1."""
    from kreassign.cli import kafka_live
    from kreassign.cli.watch_cmd import event_printer
    from kreassign.execute.recovery import resume_preview_live
    from kreassign.execute.run import RunOutcome, resume_run

    store = journal_store(journal_dir)
    with connect(bootstrap_server, command_config, request_timeout) as port:
        journal = _locate(port, store, journal_path, plan_file)
        if dry_run:
            steps = resume_preview_live(port, journal)
            if output == "json":
                _emit({"journal": str(journal.path), "state": journal.state, "would": steps, "dry_run": True})
            else:
                click.echo("\n".join(f"Would {s}" for s in steps) if steps else "Nothing to resume.")
            return 1 if steps else 0  # something remains: not done yet
        emit, close = event_printer(output)
        try:
            outcome = resume_run(port, journal, store=store, control=run_control(force), emit=emit)
        finally:
            close()
    if isinstance(outcome, RunOutcome):
        assert outcome.watched is not None
        _echo_err(kafka_live.took_over_lines(outcome.took_over) + [f"Journal: {journal.path}"])
        return int(outcome.watched.status)
    result = outcome
    if output == "json":
        _emit(result.as_dict())
    else:
        click.echo(f"Resumed {result.journal_path} ({result.state_before} -> {result.state_after}).")
        if result.topics:
            click.echo("Throttled-replica lists set on topics " + ",".join(result.topics))
        if result.brokers:
            click.echo("Throttle rates set on brokers " + ",".join(map(str, result.brokers)))
        if result.submitted:
            click.echo(kafka_live.render_started(result.submitted), nl=False)
        click.echo(kafka_live.render_log_dir_started(result.log_dir_moves.started), nl=False)
        if result.clear is not None:
            click.echo(kafka_live.render_clear(result.clear), nl=False)
        if result.nothing_done:
            click.echo("Nothing was missing; run `kreassign verify` to follow the moves.")
        _echo_err(kafka_live.describe_skipped(result.skipped, "its throttle is still not set; resume again later."))
        _echo_err(kafka_live.describe_unconfirmed(result.unconfirmed))
        _echo_err(kafka_live.clear_warnings(result.clear))
        if result.submit_errors:
            click.echo(kafka_live.render_errors("Error reassigning partition(s):", result.submit_errors), err=True)
        if result.held_back:
            click.echo("Error: " + kafka_live.held_back_message(result.held_back, result.skipped, result.journal_path),
                       err=True)
    failed = result.submit_errors or result.log_dir_moves.timed_out or result.skipped or result.held_back or (
        result.clear is not None and not result.clear.complete)
    return 1 if failed else 0


@click.command()
@cluster_options
@log_dir_timeout_option
@journal_options
@click.option("--preserve-throttles", is_flag=True, help="Cancel, but leave the throttles as they are.")
@click.option("--force", is_flag=True, help="Take the execution lock from a dead run of another plan.")
@click.option("--wait", "wait_s", type=DURATION, default=None, help="How long to wait for a running execute "
              "of this journal to stop after asking it to (default: its lease, 2m, plus 30s).")
@click.option("--dry-run", is_flag=True, help="Say what would be cancelled and restored; change nothing.")
@output_option
def abort(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
          journal_dir: str | None, journal_path: str | None, plan_file: str | None,
          preserve_throttles: bool, force: bool, wait_s: float | None, dry_run: bool, output: str,
          timeout: float) -> int:
    """Undo a run from its journal: cancel its running moves and restore the earlier throttles.

    If the run is still going (a paced execute), abort asks it to stop submitting, waits until
    it has stopped, and only then cancels and restores; it never reports success while the run
    still submits."""
    from kreassign.cli import kafka_live
    from kreassign.cluster.kafka_json import format_reassignment
    from kreassign.execute.run import abort_run

    store = journal_store(journal_dir)
    with connect(bootstrap_server, command_config, request_timeout) as port:
        journal = _locate(port, store, journal_path, plan_file)
        outcome = abort_run(port, journal, store=store, control=run_control(force), preserve_throttles=preserve_throttles,
                            dry_run=dry_run, timeout_s=timeout, wait_s=wait_s, on_wait=lambda owner: click.echo(
                                f"Asked {owner.describe()} to stop; waiting for it.", err=True),
                            on_clear_wait=lambda brokers, left: click.echo(
                                f"Waiting for broker(s) {','.join(map(str, brokers))} to answer, to restore their "
                                f"throttles (trying {left:.0f}s more).", err=True))
    result = outcome.result
    if output == "json":
        _emit({**result.as_dict(), "stopped_run": None if outcome.stopped is None else outcome.stopped.describe(),
               "took_over_from": None if outcome.took_over is None else outcome.took_over.describe()})
        return 0 if result.ok else 1
    if result.finished_first:
        who = f"The running {outcome.stopped.command}" if outcome.stopped else "The run"
        click.echo(f"{who} finished its plan before the abort could stop it: nothing moves and its throttles "
                   "are restored.", err=True)
    elif outcome.stopped is not None:
        click.echo(f"The running {outcome.stopped.command} stopped; nothing more is submitted.", err=True)
    _echo_err(kafka_live.took_over_lines(outcome.took_over))
    verb = "Would cancel" if dry_run else "Cancelled"
    click.echo(f"{verb} partition reassignments for: " + (",".join(map(str, result.cancelled)) or "none"))
    if result.cancel_errors:
        click.echo(kafka_live.render_errors("Could not cancel:", result.cancel_errors), err=True)
    click.echo(kafka_live.render_log_dir_started(result.log_dir_moves.started), nl=False)
    if result.restored is not None:
        text = kafka_live.render_clear(result.restored).replace("Clearing", "Restoring")
        click.echo(text.replace("Restoring", "Would restore") if dry_run else text, nl=False)
        _echo_err(kafka_live.clear_warnings(result.restored))
    if result.kept_brokers or result.kept_topics:
        click.echo("Kept the throttles that other open runs' moves still need: brokers "
                   f"{','.join(map(str, result.kept_brokers)) or 'none'}, topics {','.join(result.kept_topics) or 'none'} "
                   "(the last run to finish restores the earlier values).", err=True)
    if result.rollback:
        click.echo("These partitions are not back on their replicas before the run; to move them back, execute:")
        click.echo(format_reassignment(result.rollback))
    if result.left:
        click.echo(f"Error: the abort is not finished: {result.left}.", err=True)
    return 0 if result.ok else 1
