"""Fuzz every command's options and files: hypothesis generates command lines, kreassign runs
them in process against the in-memory fake cluster, and every exception that escapes the error
boundary (a traceback for the operator) is counted. Goal: 0.

Each input is one command (every click subcommand except `sandbox` and `spark`, which start
servers; `simulate` runs up to where it would start Spark, its inputs all checked by then; plus
the Kafka-compatible front door) with a random
subset of its options, each given a value drawn from what operators mistype: huge and negative numbers,
ambiguous units, unicode, empty strings, and files that are missing, empty, directories, not
UTF-8, not JSON, or valid. Loops run on an injected clock that completes moves as it advances.

    python -m bench.bench_fuzz_cli [--examples 10000] [--seed 0]
"""
from __future__ import annotations

import argparse
import io
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.common import record

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fake_cluster import FakeCluster  # noqa: E402

SKIPPED_COMMANDS = ("sandbox", "spark")  # they start local clusters
SPARK_REACHED = "inputs valid, would start Spark"
"""the outcome of a `simulate` whose inputs passed every check: Spark is not started (seconds per
run); what the fuzzer checks is that every bad input ends in one line before it"""


class WouldStartSpark(Exception):
    """Raised where `simulate` would start Spark."""


@contextmanager
def no_spark() -> Iterator[None]:
    """`simulate` stops where Spark would start (its inputs are all checked before)."""
    from kreassign.simulate import pipeline, session

    def refuse(*_: Any, **__: Any) -> Any:
        raise WouldStartSpark

    saved = session.start_session, session.active_session, pipeline._import_plotting
    session.start_session, session.active_session = refuse, lambda: None  # type: ignore[assignment]
    pipeline._import_plotting = lambda: None  # type: ignore[assignment]
    try:
        yield
    finally:
        session.start_session, session.active_session, pipeline._import_plotting = saved  # type: ignore[assignment]
_MAX_SLEEPS = 50
_HANG_S = 10
"""an input still running after this many wall seconds counts as a hang (and is stopped)"""


class Hang(BaseException):
    pass


def _hang(signum: int, frame: Any) -> None:
    raise Hang


def _snapshots(root: Path) -> dict[str, bytes]:
    """Snapshots, good and damaged, in both formats (JSON from the demo's sample; Parquet written
    by kreassign itself, then cut short, bit-flipped, or with a topic name that is not UTF-8)."""
    from kreassign.cluster.snapshot import read_snapshot, write_snapshot

    sample = Path(__file__).resolve().parent.parent / "demo" / "sample-snapshot.json"
    good = sample.read_bytes()
    at = good.index(b'"topic":"') + len(b'"topic":"')
    parquet = root / "snapshot.parquet"
    write_snapshot(read_snapshot(sample), parquet)
    pq = parquet.read_bytes()
    name = pq.index(b"orders") if b"orders" in pq else len(pq) // 2
    return {
        "snapshot.json": good,
        "snapshot-bad-utf8.json": good[:at] + b"\xff\xfe" + good[at:],
        "snapshot-cut.json": good[: len(good) // 2],
        "snapshot.parquet": pq,
        "snapshot-cut.parquet": pq[: len(pq) // 2],
        "snapshot-flipped.parquet": pq[:100] + bytes(b ^ 0x5A for b in pq[100:200]) + pq[200:],
        "snapshot-bad-utf8.parquet": pq[:name] + b"\xff\xfe" + pq[name + 2:],
    }


def _files(root: Path) -> dict[str, str]:
    """Files an operator might pass: good, broken, and not files at all."""
    plan = ('{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[3,2]},'
            '{"topic":"foo","partition":1,"replicas":[1,4]}]}')
    contents: dict[str, bytes] = {
        "plan.json": plan.encode(),
        "topics.json": b'{"version":1,"topics":[{"topic":"foo"}]}',
        "empty.json": b"",
        "not-json.json": b"{not json",
        "not-utf8.json": b'{"version":1,"partitions":[\xff\xfe]}',
        "huge-name.json": ('{"version":1,"partitions":[{"topic":"' + "t" * 200_000
                           + '","partition":0,"replicas":[1]}]}').encode(),
        "deep.json": b"[" * 50_000 + b"]" * 50_000,
        "numbers.json": b'{"version":1,"partitions":[{"topic":"foo","partition":99999999999999999999999,'
                        b'"replicas":[1e400]}]}',
        "props.properties": b"security.protocol=SASL_SSL\nsasl.jaas.config=x y z\n",
        "bad-props.properties": b"\xff\xfe=\n",
        "bad-port.properties": b"bootstrap.servers=kafka1:90x2\n",
        **_snapshots(root),
    }
    out = {}
    for name, data in contents.items():
        path = root / name
        path.write_bytes(data)
        out[name] = str(path)
    (root / "a-directory").mkdir(exist_ok=True)
    out["directory"] = str(root / "a-directory")
    out["missing"] = str(root / "missing" / "nothing.json")
    out["device"] = "/dev/zero"  # never ends: must be refused, not read
    out["random-device"] = "/dev/urandom"
    return out


FILES: dict[str, str] = {}


def value_strategy(files: dict[str, str]) -> st.SearchStrategy[str]:
    numbers = st.one_of(st.integers(-10**30, 10**30).map(str), st.just("9" * 400), st.just("0"), st.just("-1"),
                        st.floats(allow_nan=True, allow_infinity=True).map(repr))
    units = st.builds(lambda n, u: f"{n}{u}", st.integers(-5, 10**6),
                      st.sampled_from(["", "MB/s", "Mb", "mb/s", "GiB", "KiB/s", "s", "ms", "m", "h", "1h30m", "x"]))
    return st.one_of(numbers, units, st.sampled_from(sorted(files.values())),
                     st.text(max_size=40), st.sampled_from(["", " ", "1,2,3", "a,b", "-", "--help", "06:00",
                                                           "2020-01-01T00:00", "foo", "foo-0", "1:2", ":", "kafka1:90x2",
                                                           "kafka1", "[::1]:9092", "a b:9092", "t" * 100_000]))


def _params(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and "--help" not in p.opts]


def _commands() -> list[tuple[tuple[str, ...], click.Command]]:
    from kreassign.cli.main import cli

    ctx = click.Context(cli)
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name in cli.list_commands(ctx):
        if name in SKIPPED_COMMANDS:
            continue
        command = cli.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                found = command.get_command(ctx, sub)
                assert found is not None
                out.append(((name, sub), found))
        else:
            out.append(((name,), command))
    return out


KAFKA_OPTIONS = ("--bootstrap-server", "--reassignment-json-file", "--throttle", "--replica-alter-log-dirs-throttle",
                 "--timeout", "--broker-list", "--topics-to-move-json-file", "--command-config", "--journal-dir")
KAFKA_FLAGS = ("--execute", "--verify", "--cancel", "--list", "--generate", "--additional", "--preserve-throttles",
               "--disable-rack-aware", "--force", "--retarget-in-flight")


@st.composite
def command_lines(draw: st.DrawFn, commands: list[tuple[tuple[str, ...], click.Command]],
                  values: st.SearchStrategy[str]) -> list[str]:
    if draw(st.integers(0, 9)) == 0:  # the Kafka-compatible front door
        argv = list(draw(st.lists(st.sampled_from(KAFKA_FLAGS), max_size=2)))
        for opt in draw(st.lists(st.sampled_from(KAFKA_OPTIONS), max_size=4)):
            argv += [opt, draw(values)]
        server = draw(st.sampled_from(["127.0.0.1:9092", "127.0.0.1:9092", "kafka1:90x2", ":"]))
        return ["--bootstrap-server", server, *argv] if argv else ["--list"]
    path, command = draw(st.sampled_from(commands))
    argv = list(path)
    for param in draw(st.lists(st.sampled_from(_params(command)), max_size=5, unique_by=lambda p: p.name)):
        opt = param.opts[-1] if param.opts[-1].startswith("--") else param.opts[0]
        if param.is_flag:
            argv.append(opt)
        else:
            # Half the time a value of the right kind, so inputs get past click into kreassign.
            argv += [opt, draw(st.one_of(values, plausible(param)))]
    return argv


def plausible(param: click.Option) -> st.SearchStrategy[str]:
    kind = param.type
    if isinstance(kind, click.Choice):
        return st.sampled_from([str(c) for c in kind.choices])
    if isinstance(kind, click.Path):
        return st.sampled_from(sorted(FILES.values()))
    if isinstance(kind, (click.IntRange, click.FloatRange)) or kind in (click.INT, click.FLOAT):
        return st.integers(0, 100).map(str)
    name = (param.name or "").lower()
    if "rate" in name or "throttle" in name:
        return st.sampled_from(["50MB/s", "1", "100KiB/s", str(2**63 - 1)])
    if "broker" in name:
        return st.sampled_from(["1,2,3", "1,2,3,4", "4", "1-3"])
    if "topic" in name:
        return st.sampled_from(["foo", "bar", "foo,bar"])
    return st.sampled_from(["5s", "1m", "10", "foo", "1,2", "50MB"])


class Harness:
    """Runs one command line in process against a fresh fake cluster and classifies the end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.outcomes: Counter[str] = Counter()
        self.tracebacks: list[dict[str, str]] = []
        self.hangs: list[str] = []
        self.heavy: list[tuple[float, float, str]] = []
        """(max-RSS growth in MB, wall seconds, command line) of the costliest inputs"""
        signal.signal(signal.SIGALRM, _hang)

    def run(self, argv: list[str]) -> None:
        # An input that makes the process grow or stall is as much a finding as a traceback: the
        # costliest are kept (a 10,000-input run once grew to 6.3 GB).
        before, start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
        try:
            self._run(argv)
        finally:
            grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
            took = time.perf_counter() - start
            self.heavy = sorted([*self.heavy, (round(grown, 1), round(took, 2), " ".join(a[:60] for a in argv)[:400])],
                                reverse=True)[:5]

    def _run(self, argv: list[str]) -> None:
        from kreassign.cli.boundary import run_guarded
        from kreassign.cluster import admin
        from kreassign.cluster.client_config import load_client_config
        from kreassign.cli.kafka_compat import run_kafka_style
        from kreassign.cli.main import cli, is_kafka_style
        from kreassign.cli.runtime import Runtime

        fake = FakeCluster([1, 2, 3, 4]).add_topic("foo", [[1, 2], [2, 3]]).add_topic("bar", [[3, 4]])
        now = [0.0]
        sleeps = [0]

        def sleep(seconds: float) -> None:
            sleeps[0] += 1
            if sleeps[0] > _MAX_SLEEPS:
                raise KeyboardInterrupt  # a loop that would run on: stop it as Ctrl-C does
            now[0] += max(seconds, 0.0)
            fake.complete()

        @contextmanager
        def connect(*_: Any) -> Iterator[FakeCluster]:
            yield fake

        @contextmanager
        def open_admin(bootstrap: str | None, *, command_config: str | None = None, timeout_s: float | None = None,
                       warn: Any = None, waiting: Any = None) -> Iterator[FakeCluster]:
            # The client settings are read and checked as for a real connection; then the fake answers.
            load_client_config(command_config, bootstrap_server=bootstrap, timeout_s=timeout_s)
            yield fake

        journal = self.root / "journal"
        shutil.rmtree(journal, ignore_errors=True)
        os.environ["KREASSIGN_JOURNAL_DIR"] = str(journal)
        os.environ.pop("KREASSIGN_BOOTSTRAP_SERVER", None)
        admin.open_admin = open_admin  # type: ignore[assignment]
        signal.alarm(_HANG_S)
        out, err = io.StringIO(), io.StringIO()
        saved = sys.stdout, sys.stderr, sys.stdin
        sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO("")
        try:
            if is_kafka_style(argv):
                code = run_kafka_style(argv, out, err)
            else:
                code = run_guarded(lambda: cli.main(args=argv, prog_name="kreassign", standalone_mode=False,
                                                    obj=Runtime(connect=connect, clock=lambda: now[0], sleep=sleep)))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except WouldStartSpark:
            self.outcomes[SPARK_REACHED] += 1
            return
        except Hang:
            self.outcomes["hang"] += 1
            self.hangs.append(" ".join(a[:60] for a in argv)[:400])
            return
        except BaseException as exc:  # what an operator would see as a traceback
            self.outcomes["traceback"] += 1
            self.tracebacks.append({"argv": " ".join(a[:60] for a in argv)[:400], "error": f"{type(exc).__name__}: "
                                    f"{str(exc)[:200]}", "where": traceback.format_exc().splitlines()[-3][:200]})
            return
        finally:
            signal.alarm(0)
            sys.stdout, sys.stderr, sys.stdin = saved
        self.outcomes["exit 0" if code == 0 else "clear error"] += 1


def fuzz(examples: int, seed: int) -> Harness:
    """Run `examples` generated command lines; the harness holds the counts."""
    import warnings

    # In process against the fake nothing races: the execution lock need not wait to settle.
    os.environ["KREASSIGN_LOCK_SETTLE_S"] = "0"
    from kreassign.cluster import admin

    real_open_admin = admin.open_admin
    saved_env = dict(os.environ)
    root = Path(tempfile.mkdtemp(prefix="kreassign-fuzz-"))
    cwd = os.getcwd()
    os.chdir(root)  # files the commands write under relative names stay in the scratch directory
    try:
        files = _files(root)
        FILES.clear()
        FILES.update(files)
        harness = Harness(root)
        commands = _commands()

        @settings(max_examples=examples, database=None, deadline=None, derandomize=False,
                  suppress_health_check=list(HealthCheck), phases=[__import__("hypothesis").Phase.generate])
        @given(command_lines(commands, value_strategy(files)))
        def one(argv: list[str]) -> None:
            harness.run(argv)

        with warnings.catch_warnings(), no_spark():
            warnings.simplefilter("ignore")
            __import__("hypothesis").seed(seed)(one)()
        return harness
    finally:
        # Leave the process as it was (a test calls this): connections, environment, directory.
        admin.open_admin = real_open_admin  # type: ignore[assignment]
        os.environ.clear()
        os.environ.update(saved_env)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        os.chdir(cwd)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    load = os.getloadavg()
    start = time.perf_counter()
    harness = fuzz(args.examples, args.seed)
    elapsed = time.perf_counter() - start
    kinds = Counter(t["error"].split(":")[0] for t in harness.tracebacks)
    record("bench_fuzz_cli", examples=sum(harness.outcomes.values()), seed=args.seed,
           tracebacks=harness.outcomes["traceback"], clear_errors=harness.outcomes["clear error"],
           exit_zero=harness.outcomes["exit 0"], simulate_inputs_valid=harness.outcomes[SPARK_REACHED],
           hangs=harness.outcomes["hang"], first_hangs=harness.hangs[:5],
           heaviest_inputs=[{"max_rss_growth_mb": g, "seconds": t, "argv": a} for g, t, a in harness.heavy],
           traceback_kinds=dict(kinds),
           first_tracebacks=harness.tracebacks[:5], skipped_commands=list(SKIPPED_COMMANDS),
           elapsed_s=round(elapsed, 1), loadavg=[round(x, 2) for x in load])


if __name__ == "__main__":
    main()
