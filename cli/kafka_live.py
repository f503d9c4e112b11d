"""The live Kafka-compatible actions: `--execute`, `--verify`, `--cancel`, `--list`.

Each action builds a typed request, calls the library in `kreassign.throttle`, and prints
exactly what Kafka 4.4's tool prints on stdout (reference §2.4-§2.7). What kreassign adds
(warnings about brokers that did not answer, restored throttle values, the journal) goes to
stderr so scripts that parse Kafka's output keep working. The renderers are pure functions
that the `execute`/`verify`/`cancel`/`list` subcommands reuse.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, TextIO

from kreassign.cli.runtime import open_port, read_text
from kreassign.cli.kafka_args import KafkaArgs
from kreassign.cluster.errors import InputError, TerseError

if TYPE_CHECKING:
    from pathlib import Path

    from kreassign.cluster.model import TopicPartition, TopicPartitionReplica
    from kreassign.cluster.port import ApiError, ClusterPort
    from kreassign.execute.journal import JournalStore
    from kreassign.execute.cancel import CancelResult
    from kreassign.execute.clear import ClearResult
    from kreassign.execute.executor import ExecuteEvent, ExecutePlan, ExecuteResult
    from kreassign.execute.lock import LockConfig
    from kreassign.execute.lock_owner import Owner
    from kreassign.execute.verify import ListResult, VerifyResult

Connect = Callable[[], AbstractContextManager["ClusterPort"]]

ROLLBACK_HINT = "--reassignment-json-file option during rollback"
VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, "
                  "to ensure the throttle is removed.")
NO_ACTIVE_REASSIGNMENTS = "None of the specified partition reassignments are active."
NO_ACTIVE_MOVES = "None of the specified partition moves are active."


def _s(count: int) -> str:
    return "" if count == 1 else "s"


# ---- renderers (pure) ------------------------------------------------------------------------
def render_current_assignment(current: Mapping[TopicPartition, Sequence[int]],
                              dirs: Mapping[TopicPartitionReplica, str] | None = None) -> str:
    """The rollback JSON block that `--execute` prints first, with each replica's log dir (Kafka 4.2+)."""
    from kreassign.cluster.kafka_json import format_reassignment, with_log_dirs

    return (f"Current partition replica assignment\n\n{format_reassignment(with_log_dirs(current, dirs or {}))}\n\n"
            f"Save this to use as the {ROLLBACK_HINT}\n")


def render_started(partitions: Sequence[TopicPartition]) -> str:
    ordered = sorted(partitions)
    return (f"Successfully started partition reassignment{_s(len(ordered))} for "
            + ",".join(str(tp) for tp in ordered) + "\n")


def render_log_dir_started(batch: Sequence[tuple[TopicPartitionReplica, str]]) -> str:
    # Kafka's format ends with "%s %n": the trailing space is part of the output.
    return "".join(f"Successfully started moving log directory to {d} for replica {r.topic}-{r.partition} "
                   f"with broker {r.broker} \n" for r, d in batch)


def render_errors(header: str, errors: Mapping[TopicPartition, ApiError]) -> str:
    """Kafka's terse error block: a header line, then `<tp>: <message>` per partition, sorted."""
    return header + "\n" + "\n".join(f"{tp}: {e.message}" for tp, e in sorted(errors.items()))


def render_clear(clear: ClearResult) -> str:
    """Kafka's two clearing lines, brokers and topics in the order of the Java HashSets it prints."""
    from kreassign.cluster.java_order import broker_set_order, topic_set_order

    if not clear.brokers and not clear.topics:
        return ""  # kreassign's own clear of a run that set no throttle (Kafka's always names the live brokers)
    return (f"Clearing broker-level throttles on broker{_s(len(clear.brokers))} "
            + ",".join(str(b) for b in broker_set_order(clear.brokers)) + "\n"
            + f"Clearing topic-level throttles on topic{_s(len(clear.topics))} "
            + ",".join(topic_set_order(clear.topics)) + "\n")


def _log_dir_line(status: object) -> str:
    from kreassign.execute.logdir_moves import LogDirStatus

    assert isinstance(status, LogDirStatus)
    r, tp = status.replica, f"{status.replica.topic}-{status.replica.partition}"
    return {
        "missing-replica": f"Partition {tp} cannot be found in any live log directory on broker {r.broker}.",
        "missing-log-dir": (f"Partition {tp} is not found in any live log dir on broker {r.broker}. "
                            "There is likely an offline log directory on the broker."),
        "in-progress": f"Reassignment of replica {r} is still in progress.",
        "moving-elsewhere": (f"Partition {tp} on broker {r.broker} is being moved to log dir "
                             f"{status.future_dir} instead of {status.target_dir}."),
        "not-moving": (f"Partition {tp} on broker {r.broker} is not being moved from log dir "
                       f"{status.current_dir} to {status.target_dir}."),
        "completed": f"Reassignment of replica {r} completed successfully.",
    }[status.state]


def render_verify(result: VerifyResult) -> str:
    """Kafka's `--verify` output: partition lines, log-dir lines (or an empty line), clearing."""
    lines = ["Status of partition reassignment:"]
    for p in result.partitions:
        if p.state == "in-progress":
            lines.append(f"Reassignment of partition {p.tp} is still in progress.")
        elif p.state == "completed":
            lines.append(f"Reassignment of partition {p.tp} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {p.tp}, but replica set is "
                         f"{','.join(map(str, p.current))} rather than {','.join(map(str, p.target))}.")
    text = "\n".join(lines) + "\n" + "\n".join(_log_dir_line(s) for s in result.log_dirs) + "\n"
    return text + (render_clear(result.clear) if result.clear is not None else "")


def render_cancel_partitions(result: CancelResult) -> str:
    if not result.cancelled:
        return NO_ACTIVE_REASSIGNMENTS + "\n"
    return (f"Successfully cancelled partition reassignment{_s(len(result.cancelled))} for: "
            + ",".join(str(tp) for tp in result.cancelled) + "\n")


def render_list(result: ListResult) -> str:
    if not result.reassignments:
        return "No partition reassignments found.\n"
    lines = ["Current partition reassignments:"]
    for tp, r in result.reassignments.items():
        adding = f" adding: {','.join(map(str, r.adding))}." if r.adding else ""
        removing = f" removing: {','.join(map(str, r.removing))}." if r.removing else ""
        lines.append(f"{tp}: replicas: {','.join(map(str, r.replicas))}.{adding}{removing}")
    return "\n".join(lines) + "\n"


def describe_skipped(skipped: Mapping[int, ApiError], what: str) -> list[str]:
    return [f"Warning: broker {b} did not answer ({e.message}); {what}" for b, e in sorted(skipped.items())]


FIRST_COPIES = "first copies may run faster than the throttle"


def describe_unconfirmed(brokers: Sequence[int], what: str = FIRST_COPIES, change: str = "the new throttle"
                         ) -> list[str]:
    """The one line for brokers that accepted a throttle `change` but had not applied it by the
    end of the wait (`execute.throttle_io.confirm_broker_configs`); `what` follows "its"/"their"."""
    from kreassign.execute.throttle_io import CONFIRM_WAIT_S

    if not brokers:
        return []
    ids = ",".join(map(str, sorted(brokers)))
    who, own = (f"broker {ids}", "its") if len(brokers) == 1 else (f"brokers {ids}", "their")
    return [f"Warning: {who} had not applied {change} after {CONFIRM_WAIT_S:g}s; {own} {what}."]


def describe_unconfirmed_clear(brokers: Sequence[int]) -> list[str]:
    """`describe_unconfirmed` for a clear: brokers that may still show, and enforce, the run's rate."""
    return describe_unconfirmed(brokers, "old rate may still be read back, and enforced, for a moment longer",
                                "the clear")


def describe_restored(clear: ClearResult) -> list[str]:
    """One line per resource whose earlier throttle value was put back instead of deleted."""
    out = []
    for b, keys in clear.restored_brokers.items():
        values = ", ".join(f"{k}={v}" for k, v in sorted(keys.items()))
        out.append(f"Restored the throttle set before this reassignment on broker {b}: {values}")
    for t, keys in clear.restored_topics.items():
        values = ", ".join(f"{k}={v}" for k, v in sorted(keys.items()))
        out.append(f"Restored the throttle set before this reassignment on topic {t}: {values}")
    return out


def clear_warnings(clear: ClearResult | None) -> list[str]:
    if clear is None:
        return []
    return describe_restored(clear) + describe_skipped(
        clear.skipped, "its throttles are still set. Run --verify again (or `kreassign resume`) once it is back.") + \
        describe_unconfirmed_clear(clear.unconfirmed)


# ---- plumbing ---------------------------------------------------------------------------------
CONTROLLER_UNSUPPORTED = (
    "--bootstrap-controller {address}: kreassign reaches the cluster through its brokers only (its Kafka "
    "client, kafka-python, cannot use a KRaft controller's listener, and a controller does not say where the "
    "brokers are); give --bootstrap-server with a broker's address instead")


def _connector(args: KafkaArgs, err: TextIO, connect: Connect | None) -> Connect:
    if connect is not None:
        return connect
    controller = args.value("bootstrap-controller")
    if controller is not None:
        raise InputError(CONTROLLER_UNSUPPORTED.format(address=controller))
    bootstrap = args.value("bootstrap-server")
    return lambda: open_port(bootstrap, args.value("command-config"), None,
                             warn=lambda line: err.write(f"Warning: {line}\n"))


def _store(store: JournalStore | None, args: KafkaArgs) -> JournalStore:
    from kreassign.execute.journal import JournalStore

    return store if store is not None else JournalStore(args.value("journal-dir"))


def _write_lines(stream: TextIO, lines: Sequence[str]) -> None:
    for line in lines:
        stream.write(line + "\n")


def _rate_line(event: ExecuteEvent, plan: ExecutePlan) -> str:
    request = plan.request
    if event.kind == "broker-throttles-set":
        rates = {request.leader_rate, request.follower_rate} - {None}
        if len(rates) == 1:
            return f"The inter-broker throttle limit was set to {rates.pop()} B/s\n"
        return (f"The inter-broker throttle limit was set to {request.leader_rate} B/s (leader) and "
                f"{request.follower_rate} B/s (follower)\n")
    return f"The replica-alter-dir throttle limit was set to {request.log_dir_rate} B/s\n"


def print_execute_event(event: ExecuteEvent, plan: ExecutePlan, out: TextIO, err: TextIO) -> None:
    """Print one step of `apply_execute` the way Kafka's tool prints it."""
    if event.kind in ("broker-throttles-set", "log-dir-throttles-set"):
        out.write(_rate_line(event, plan))
        _write_lines(err, describe_skipped(event.outcome.skipped, "its throttle was not set; "
                                           "`kreassign resume` sets it once the broker is back."))
    elif event.kind == "throttles-unconfirmed":
        _write_lines(err, describe_unconfirmed(event.outcome.unconfirmed))
    elif event.kind == "submitted":
        out.write(render_started(list(event.partitions)))
    elif event.kind == "log-dir-moves-started":
        out.write(render_log_dir_started(event.moves))


def finish_execute(result: ExecuteResult, err: TextIO) -> int:
    """Turn a failed submission or log-dir timeout into Kafka's terse error."""
    from kreassign.execute.logdir_moves import timed_out_message

    if result.submit_errors:
        if result.rolled_back:
            err.write("No partition was accepted, so the throttles set above were restored.\n")
        raise TerseError(render_errors("Error reassigning partition(s):", result.submit_errors))
    if result.log_dir_moves.timed_out:
        raise TerseError(timed_out_message(result.log_dir_moves.timed_out))
    if result.held_back:
        raise TerseError(held_back_message(result.held_back, result.skipped_brokers, result.journal_path))
    return 0


def held_back_message(held: Sequence[TopicPartition], skipped: Mapping[int, ApiError],
                      journal: Path | None) -> str:
    """Why some moves were not submitted, and the one command that submits them."""
    shown = ", ".join(map(str, held[:5])) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
    brokers = ",".join(map(str, sorted(skipped)))
    on = f" on broker(s) {brokers}," if brokers else " on a broker"
    where = f" --journal {journal}" if journal else ""
    return (f"Held back {len(held)} partition(s) whose leader or new replica is{on} which did not take the "
            f"throttle: {shown}. They would copy unthrottled; run `kreassign resume{where}` once the broker "
            "answers: it sets the throttle, then submits them.")


def took_over_lines(owner: Owner | None) -> list[str]:
    """The line saying whose lock a run took over, if it did."""
    if owner is None:
        return []
    return [f"Took over the execution lock of {owner.describe()}, which is no longer running."]


def interrupted_hint(store: JournalStore, plan: ExecutePlan) -> str:
    from kreassign.execute.journal import plan_hash

    path = store.path_for(plan.cluster_id, plan_hash(plan.request.targets))
    return (f"Interrupted. The journal {path} records every step taken: run `kreassign resume --journal "
            f"{path}` to finish, or `kreassign abort --journal {path}` to undo.\n")


# ---- actions ------------------------------------------------------------------------------------
def execute(args: KafkaArgs, *, out: TextIO, err: TextIO, connect: Connect | None = None,
            store: JournalStore | None = None, clock: Callable[[], float] = time.monotonic,
            sleep: Callable[[float], None] = time.sleep, lock: LockConfig | None = None) -> int:
    """`--execute`: Kafka's checks, rollback JSON, throttles, submission, log-dir moves."""
    from kreassign.cluster.kafka_json import parse_reassignment, validate_execute_entries
    from kreassign.execute.executor import ExecuteRequest
    from kreassign.execute.lock import LockConfig  # noqa: F811 (the runtime import of the annotation)

    from kreassign.execute.run import RunControl, run_execute
    from kreassign.throttle.rates import Rates

    text = read_text(args.value("reassignment-json-file") or "")
    throttle = args.long("throttle")  # Kafka's order: the file, then each typed option, then the JSON
    log_dir = args.long("replica-alter-log-dirs-throttle")
    timeout_ms = args.long("timeout", 10000)
    parsed = parse_reassignment(text)
    validate_execute_entries(parsed)
    for name, value in (("--throttle", throttle), ("--replica-alter-log-dirs-throttle", log_dir)):
        if value == 0:
            raise InputError(f"{name} 0 would stop replication: give a positive rate, or leave the option out")
    rates = Rates.of(throttle if throttle >= 0 else None, log_dir=log_dir if log_dir >= 0 else None)  # Kafka's -1: none
    request = ExecuteRequest.from_parsed(
        parsed, additional=args.has("additional"), leader_rate=rates.leader, follower_rate=rates.follower,
        log_dir_rate=rates.log_dir, log_dir_timeout_s=timeout_ms / 1000,
        retarget_in_flight=args.has("retarget-in-flight"),
        allow_rf_change=not args.has("disallow-replication-factor-change"))
    journals = _store(store, args)
    shown: list[ExecutePlan] = []

    def show_plan(plan: ExecutePlan) -> None:
        shown.append(plan)
        _write_lines(err, [f"Warning: {w}" for w in plan.warnings])
        out.write(render_current_assignment(plan.current, plan.current_dirs))
        if throttle >= 0 or log_dir >= 0:
            out.write(VERIFY_WARNING + "\n")

    control = RunControl(lock=lock or LockConfig(), force=args.has("force"), clock=clock, sleep=sleep)
    with _connector(args, err, connect)() as port:
        try:
            outcome = run_execute(port, request, store=journals, control=control, on_plan=show_plan,
                                  progress=lambda event: print_execute_event(event, shown[0], out, err))
        except (KeyboardInterrupt, BrokenPipeError):  # the journal says how to finish or undo
            if shown:
                err.write(interrupted_hint(journals, shown[0]))
            raise
    assert outcome.result is not None
    _write_lines(err, took_over_lines(outcome.took_over))
    return finish_execute(outcome.result, err)


def verify(args: KafkaArgs, *, out: TextIO, err: TextIO, connect: Connect | None = None,
           store: JournalStore | None = None) -> int:
    """`--verify`: status lines, log-dir lines, and the clear once nothing moves."""
    from kreassign.cluster.kafka_json import parse_reassignment
    from kreassign.execute.verify import VerifyRequest
    from kreassign.execute.run import verify_run

    parsed = parse_reassignment(read_text(args.value("reassignment-json-file") or ""))
    request = VerifyRequest(targets=parsed.entries, preserve_throttles=args.has("preserve-throttles"))
    with _connector(args, err, connect)() as port:
        result, owner = verify_run(port, request, store=_store(store, args))
    out.write(render_verify(result))
    _write_lines(err, [f"Warning: broker {b} did not answer DescribeLogDirs ({m})"
                       for b, m in sorted(result.unreachable.items())])
    _write_lines(err, clear_warnings(result.clear) + running_owner_lines(owner))
    return 0 if result.clear is None or result.clear.complete else 1


def running_owner_lines(owner: Owner | None) -> list[str]:
    """Why verify kept the throttles: a run holds the execution lock."""
    if owner is None:
        return []
    return [f"Warning: the throttles were kept: {owner.describe()} holds the execution lock and restores "
            "them itself when it finishes."]


def cancel(args: KafkaArgs, *, out: TextIO, err: TextIO, connect: Connect | None = None,
           store: JournalStore | None = None, clock: Callable[[], float] = time.monotonic,
           sleep: Callable[[float], None] = time.sleep) -> int:
    """`--cancel`: cancel (fixed predicate), move log dirs back, clear throttles."""
    from kreassign.cluster.kafka_json import parse_reassignment
    from kreassign.execute.cancel import CancelRequest
    from kreassign.execute.cancel import cancel as run_cancel
    from kreassign.execute.run import refuse_while_running
    from kreassign.execute.logdir_moves import timed_out_message

    text = read_text(args.value("reassignment-json-file") or "")
    timeout_ms = args.long("timeout", 10000)
    parsed = parse_reassignment(text)
    request = CancelRequest(targets=parsed.entries, preserve_throttles=args.has("preserve-throttles"),
                            timeout_s=timeout_ms / 1000)
    with _connector(args, err, connect)() as port:
        refuse_while_running(port, "cancel")
        result = run_cancel(port, request, store=_store(store, args), clock=clock, sleep=sleep,
                            on_moves_started=lambda batch: None)
    if result.errors:
        raise TerseError(render_errors(f"Error cancelling partition reassignment{_s(len(result.errors))} for:",
                                       result.errors))
    out.write(render_cancel_partitions(result))
    if not result.moves_back:
        out.write(NO_ACTIVE_MOVES + "\n")
    else:
        out.write(render_log_dir_started(result.log_dir_moves.started))
        if result.log_dir_moves.timed_out:
            raise TerseError(timed_out_message(result.log_dir_moves.timed_out))
    if result.clear is not None:
        out.write(render_clear(result.clear))
    _write_lines(err, clear_warnings(result.clear))
    return 0 if result.clear is None or result.clear.complete else 1


def list_action(args: KafkaArgs, *, out: TextIO, err: TextIO, connect: Connect | None = None) -> int:
    """`--list`: every reassignment in flight in the cluster."""
    from kreassign.execute.verify import list_reassignments

    with _connector(args, err, connect)() as port:
        out.write(render_list(list_reassignments(port)))
    return 0
