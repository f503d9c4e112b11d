"""Options shared by several commands, defined once as decorators."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from kreassign.cluster.errors import JAVA_LONG_MAX

F = TypeVar("F", bound=Callable[..., Any])


class RateType(click.ParamType):
    """A rate in bytes/s: `50000000`, `50MB/s`, `50MiB/s`; a throttle must also be positive."""

    name = "RATE"

    def __init__(self, *, throttle: bool = False) -> None:
        self.throttle = throttle

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        from kreassign.cluster.errors import InputError
        from kreassign.cluster.units import parse_rate, parse_throttle

        try:
            return parse_throttle(value) if self.throttle else parse_rate(value)
        except InputError as exc:
            self.fail(str(exc), param, ctx)


class SizeType(click.ParamType):
    """A size in bytes: `500000000`, `500MB`, `20GiB`."""

    name = "SIZE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        from kreassign.cluster.errors import InputError
        from kreassign.cluster.units import parse_bytes

        try:
            return parse_bytes(value)
        except InputError as exc:
            self.fail(str(exc), param, ctx)


class DurationType(click.ParamType):
    """A duration: `90`, `90s`, `15m`, `2h`."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        from kreassign.cluster.errors import InputError
        from kreassign.cluster.units import parse_duration

        try:
            return parse_duration(value)
        except InputError as exc:
            self.fail(str(exc), param, ctx)


class BrokerListType(click.ParamType):
    """A comma-separated list of broker ids: `1,2,3`."""

    name = "IDS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        items = [v.strip() for v in str(value).split(",") if v.strip()]
        try:
            ids = tuple(int(v) for v in items)
        except ValueError:
            self.fail(f"'{value}' is not a comma-separated list of broker ids such as 1,2,3", param, ctx)
        if not ids:
            self.fail("the broker list is empty", param, ctx)
        if len(set(ids)) != len(ids):
            self.fail(f"'{value}' names a broker more than once", param, ctx)
        return ids


class PercentType(click.ParamType):
    """A share: `20%` or `0.2`."""

    name = "PCT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            self.fail(f"'{value}' is not a share: use a percentage such as 20% (or 0.2)", param, ctx)
        if not 0 <= share <= 1:
            self.fail(f"'{value}' must be between 0% and 100%", param, ctx)
        return share


RATE = RateType()
THROTTLE = RateType(throttle=True)
"""a replication throttle rate: positive"""
SIZE = SizeType()
DURATION = DurationType()
COUNT = click.IntRange(min=1, max=JAVA_LONG_MAX)
"""a positive count that Kafka's long (and numpy's int64) can hold"""
BROKER_ID = click.IntRange(min=0, max=2**31 - 1)
"""a broker id: Kafka's int"""
BROKER_LIST = BrokerListType()
PERCENT = PercentType()


def bootstrap_option(f: F) -> F:
    """--bootstrap-server: the one declaration every command shares."""
    return click.option("--bootstrap-server", "bootstrap_server", envvar="KREASSIGN_BOOTSTRAP_SERVER",
                        metavar="HOST:PORT[,...]",
                        help="Kafka brokers to connect to (env: KREASSIGN_BOOTSTRAP_SERVER).")(f)


def command_config_option(f: F) -> F:
    return click.option("--command-config", type=click.Path(dir_okay=False),
                        help="Kafka client properties file (security.protocol, sasl.*, ssl.* with PEM files).")(f)


def request_timeout_option(f: F) -> F:
    """--request-timeout: the deadline of each cluster request, the same in every command."""
    return click.option("--request-timeout", type=DURATION, default=None,
                        help="Deadline of each cluster operation, retries included (default 60s; one "
                             "request 30s). A command still waiting says what for every 15s.")(f)


def source_options(f: F) -> F:
    """--bootstrap-server / --snapshot / --command-config / --request-timeout: where cluster state
    comes from. A --snapshot on the command line wins over KREASSIGN_BOOTSTRAP_SERVER from the
    environment (the variable is a default, not a second source)."""

    @functools.wraps(f)
    def command(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        if kwargs.get("snapshot") and ctx.get_parameter_source("bootstrap_server") is ParameterSource.ENVIRONMENT:
            kwargs["bootstrap_server"] = None
        return f(*args, **kwargs)

    g = request_timeout_option(command)
    g = command_config_option(g)
    g = click.option("--snapshot", "snapshot", type=click.Path(dir_okay=False),
                     help="Read cluster state from a snapshot file (JSON or Parquet) instead of a cluster.")(g)
    return bootstrap_option(g)  # type: ignore[return-value]


DEFAULT_SAMPLE_S = 10.0
"""A short write-rate sample: enough for steady producers, short enough to wait for."""


def sample_option(f: F) -> F:
    """--sample: measure write rates on a live cluster before answering."""
    return click.option("--sample", "sample", type=DURATION, default=None,
                        help="With --bootstrap-server: measure each partition's write rate from two readings "
                             "of its log this long apart, in the cluster's time (default 10s; 0 skips, and "
                             "ETAs then say the rates are unknown).")(f)


def cluster_options(f: F) -> F:
    """--bootstrap-server, --command-config, --request-timeout, --journal-dir: a live cluster."""
    f = click.option("--journal-dir", envvar="KREASSIGN_JOURNAL_DIR", type=click.Path(file_okay=False),
                     help="Where execution journals live (env: KREASSIGN_JOURNAL_DIR; "
                          "default ~/.kreassign/journal).")(f)
    f = request_timeout_option(f)
    f = command_config_option(f)
    return bootstrap_option(f)


def log_dir_timeout_option(f: F) -> F:
    """--timeout, as in Kafka's tool: how long log-dir moves may take to start."""
    return click.option("--timeout", "timeout", type=DURATION, default=10.0,
                        help="How long to wait for log-dir moves to start, as Kafka's --timeout "
                             "(default 10s).")(f)


def units_option(f: F) -> F:
    """--units: one unit system for every size and rate on a screen."""
    return click.option("--units", type=click.Choice(["decimal", "binary"]), default="decimal", show_default=True,
                        help="Show sizes and rates in decimal units (MB, MB/s, as Kafka's rate configs count) "
                             "or binary ones (MiB, MiB/s).")(f)


def output_option(f: F) -> F:
    """--output text|json."""
    return click.option("--output", "-o", "output", type=click.Choice(["text", "json"]), default="text",
                        show_default=True, help="Human-readable text, or JSON with a stable schema.")(f)


def seed_option(f: F) -> F:
    return click.option("--seed", type=int, default=None,
                        help="Seed for reproducible randomness (default: random, like Kafka).")(f)


def plan_option(required: bool = True, help: str = "The reassignment JSON (Kafka's format).") -> Callable[[F], F]:
    """`--reassignment-json-file/-f`, the plan a command reads (Kafka's name, with a short form)."""
    return click.option("--reassignment-json-file", "-f", "plan_file", required=required,
                        type=click.Path(dir_okay=False), help=help)


def rate_options(*, scope: str = "", default: str = "", alias: str | None = None) -> Callable[[F], F]:
    """--throttle, --leader-rate and --follower-rate: the one declaration of the rate options,
    for every command that takes a rate. The command gets one `rates` argument, a
    `kreassign.throttle.rates.Rates` made by its one rule (`Rates.of`: a leader or follower rate
    overrides --throttle on its side), instead of the three values.

    Args:
        scope: where the rates apply, for the help (" on every broker").
        default: what happens without them, for the help ("; default: ...").
        alias: an old name of --throttle kept for one release: it works, and says on stderr
            (and in --help) that it is deprecated.
    """
    def decorate(f: F) -> F:
        @functools.wraps(f)
        def command(*args: Any, **kwargs: Any) -> Any:
            from kreassign.throttle.rates import Rates

            throttle = kwargs.pop("throttle")
            if alias is not None:
                old = kwargs.pop("throttle_alias")
                if old is not None:
                    if throttle is not None:
                        raise click.UsageError(f"{alias} is the old name of --throttle: give one of them")
                    click.echo(f"Note: {click.get_current_context().command_path} {alias} is deprecated: use "
                               f"--throttle (same meaning); {alias} will be removed in the next release", err=True)
                    throttle = old
            kwargs["rates"] = Rates.of(throttle, leader=kwargs.pop("leader_rate"), follower=kwargs.pop("follower_rate"))
            return f(*args, **kwargs)

        g: Any = command
        g = click.option("--follower-rate", type=THROTTLE, default=None,
                         help=f"Follower-side rate{scope} (overrides --throttle).")(g)
        g = click.option("--leader-rate", type=THROTTLE, default=None,
                         help=f"Leader-side rate{scope} (overrides --throttle).")(g)
        if alias is not None:
            g = click.option(alias, "throttle_alias", type=THROTTLE, default=None,
                             help="Deprecated: the old name of --throttle, removed in the next release.")(g)
        g = click.option("--throttle", "throttle", type=THROTTLE, default=None,
                         help=f"Leader and follower replication rate{scope}, e.g. 50MB/s{default}.")(g)
        return g  # type: ignore[no-any-return]

    return decorate
