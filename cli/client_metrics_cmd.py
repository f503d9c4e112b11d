"""`kreassign client-metrics list|set|delete`: KIP-714 subscriptions, as kafka-client-metrics.sh
manages them (CLIENT_METRICS config resources)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from kreassign.cli.options import (
    DURATION,
    bootstrap_option,
    command_config_option,
    output_option,
    request_timeout_option,
)

F = TypeVar("F", bound=Callable[..., Any])


def _cluster(f: F) -> F:
    """--bootstrap-server, --command-config, --request-timeout."""
    return bootstrap_option(command_config_option(request_timeout_option(f)))


@click.group("client-metrics")
def client_metrics() -> None:
    """KIP-714 client-metrics subscriptions: ask clients (all, or those a --match selects) to push
    metrics such as their request latency to the brokers, e.g. for the duration of a move. The
    brokers need a client-telemetry receiver plugin to export what clients push."""


@client_metrics.command("list")
@_cluster
@click.option("--name", "names", multiple=True, help="Only these subscriptions (repeatable).")
@output_option
def list_subscriptions(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
                       names: tuple[str, ...], output: str) -> None:
    """List the subscriptions with their metrics, interval and client selectors."""
    from kreassign.cli.console import emit_json
    from kreassign.cli.runtime import connect
    from kreassign.cluster.client_metrics import Subscription
    from kreassign.cluster.errors import InputError

    with connect(bootstrap_server, command_config, request_timeout) as admin:
        wanted = list(names) or admin.list_client_metrics()
        if wanted is None:
            raise InputError("this cluster cannot list client-metrics subscriptions (ListConfigResources, "
                             "Kafka 3.7+): name them with --name")
        found = admin.describe_client_metrics(wanted)
    subs = [Subscription.from_configs(n, {k: e.value for k, e in found[n].items()}) for n in sorted(found)
            if found[n]]
    if output == "json":
        emit_json({"subscriptions": [s.to_dict() for s in subs]})
        return
    if not subs:
        click.echo("No client-metrics subscriptions.")
    for s in subs:
        every = f"every {s.interval_ms} ms" if s.interval_ms else "at the default interval (5 min)"
        who = ",".join(f"{k}={v}" for k, v in s.match) or "every client"
        click.echo(f"{s.name}: {','.join(s.metrics) or '(no metrics)'} {every}, from {who}")


@client_metrics.command("set")
@_cluster
@click.option("--name", default=None, help="The subscription to create or change.")
@click.option("--generate-name", is_flag=True, help="Create a subscription with a generated name.")
@click.option("--metrics", default=None,
              help="Metric name prefixes, comma-separated ('*' for all); default with a new subscription: "
                   "the producer and consumer request-latency and throttle-time metrics.")
@click.option("--interval", type=DURATION, default=None, help="How often clients push, e.g. 10s (100ms to 1h).")
@click.option("--match", default=None, help="Which clients: KEY=VALUE,... (client_id, client_software_name, ...).")
@output_option
def set_subscription(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
                     name: str | None, generate_name: bool, metrics: str | None, interval: float | None,
                     match: str | None, output: str) -> None:
    """Create or change a subscription (only the keys given change)."""
    import uuid

    from kreassign.cli.runtime import connect
    from kreassign.cluster.client_metrics import LATENCY_METRICS, set_ops
    from kreassign.cluster.errors import ClusterError

    if bool(name) == generate_name:
        raise click.UsageError("give exactly one of --name NAME and --generate-name")
    target = name or str(uuid.uuid4())
    if generate_name and metrics is None:
        metrics = ",".join(LATENCY_METRICS)
    ops = set_ops(metrics, None if interval is None else int(round(interval * 1000)), match)
    with connect(bootstrap_server, command_config, request_timeout) as admin:
        error = admin.alter_client_metrics(target, ops)
    if error is not None:
        raise ClusterError(f"Could not set client-metrics subscription {target}: {error.message}")
    if output == "json":
        from kreassign.cli.console import emit_json

        emit_json({"name": target, "set": dict(sorted(ops.items()))})
        return
    click.echo(f"Set client-metrics subscription {target}: " + ", ".join(f"{k}={v}" for k, v in sorted(ops.items())))


@client_metrics.command("delete")
@_cluster
@click.option("--name", required=True, help="The subscription to delete.")
@output_option
def delete_subscription(bootstrap_server: str | None, command_config: str | None, request_timeout: float | None,
                        name: str, output: str) -> None:
    """Delete a subscription (its clients stop pushing those metrics)."""
    from kreassign.cli.runtime import connect
    from kreassign.cluster.client_metrics import DELETE_ALL
    from kreassign.cluster.errors import ClusterError

    with connect(bootstrap_server, command_config, request_timeout) as admin:
        error = admin.alter_client_metrics(name, DELETE_ALL)
    if error is not None:
        raise ClusterError(f"Could not delete client-metrics subscription {name}: {error.message}")
    if output == "json":
        from kreassign.cli.console import emit_json

        emit_json({"name": name, "deleted": True})
        return
    click.echo(f"Deleted client-metrics subscription {name}.")
