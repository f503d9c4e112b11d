"""`kreassign sandbox start|stop|status`: a local Kafka-protocol cluster for demos and tests."""
from __future__ import annotations

from typing import Any

import click

from kreassign.cli.options import DURATION, RATE, SIZE, bootstrap_option, output_option, request_timeout_option
from kreassign.cluster.units import format_rate


def _state_dir_option(f: Any) -> Any:
    return click.option("--state-dir", type=click.Path(file_okay=False),
                        help="Where the sandbox keeps its state, pid and log "
                             "(default for --daemon, stop, status: ~/.local/state/kreassign/sandbox).")(f)


@click.group()
def sandbox() -> None:
    """Run a local multi-broker cluster on 127.0.0.1: the emulator (kreassign's own Kafka-protocol
    cluster, with throttled replication in accelerated time: --speed sandbox seconds per wall
    second) or, with --engine kafka, real Apache Kafka brokers (KRaft, one controller) from the
    jars `kreassign sandbox fetch-kafka` fetched from Maven Central or from --kafka-home."""


EMULATOR_ONLY = ("speed", "describe_cluster_v0_only", "client_quotas")
"""start options that only the emulator has (real Kafka runs in real time)"""
KEPT_OK = 0.99
"""a kept speed at or above this share of the asked one is reported as kept"""


@sandbox.command()
@click.option("--engine", type=click.Choice(["emulator", "kafka"]), default="emulator", show_default=True,
              help="emulator: kreassign's own Kafka-protocol cluster in accelerated time; kafka: real Apache Kafka "
                   "brokers (one KRaft controller, node 0), in real time.")
@click.option("--kafka-home", type=click.Path(file_okay=False), default=None,
              help="With --engine kafka: an unpacked Kafka distribution to run (the folder holding libs/); default: "
                   "the jars `kreassign sandbox fetch-kafka` (or `make kafka`) fetched.")
@click.option("--kafka-version", default=None, metavar="X.Y.Z",
              help="With --engine kafka: which fetched release to run (default: the newest tested, see fetch-kafka). "
                   "For the emulator: which release to imitate, 4.4.0 or 3.9.2 (default 4.4.0): the API versions "
                   "its brokers advertise and the controller and config rules that changed between them.")
@click.option("--heap", default="512m", show_default=True, metavar="SIZE",
              help="With --engine kafka: each broker's JVM heap (java -Xmx syntax, e.g. 512m or 1g).")
@click.option("--start-timeout", default="120s", show_default=True, type=DURATION,
              help="With --engine kafka: how long to wait for every broker to register (JVMs start slowly on a "
                   "busy machine).")
@click.option("--brokers", default=None, type=click.IntRange(1, 1000),
              help="Number of brokers (ids 1..N; default 6, 5 with --engine kafka).")
@click.option("--racks", default=None, type=click.IntRange(0, 1000),
              help="Racks to spread brokers over in turn, rack-1..rack-R (0: none; default 3, 2 with --engine kafka).")
@click.option("--topics", "topics", multiple=True, metavar="SPEC",
              help="name:partitions:rf[:size[:rate]], e.g. orders:12:3:200MB:1MB/s (repeatable, or comma-separated); "
                   "size and rate are PER PARTITION (the median: partitions vary around it, heavy-tailed), so "
                   "orders:12:3:200MB:1MB/s holds about 2.4 GB and takes about 12 MB/s of writes. `none` for no "
                   "topics. Default: five demo topics, 50 partitions.")
@click.option("--speed", default=60.0, show_default=True, type=click.FloatRange(min=0.001),
              help="Sandbox seconds per wall second.")
@_state_dir_option
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Seed for sizes, rates and assignments.")
@click.option("--port-base", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="Broker i listens on PORT_BASE+i-1 (0: free ports chosen by the OS).")
@click.option("--network", "network_bps", default="100MB/s", show_default=True, type=RATE,
              help="Per-broker network capacity, each direction; bounds unthrottled copying. With "
                   "--engine kafka, given: each broker's replication link (followers fetch through a "
                   "link of this capacity in the sandbox process; clients connect directly); not "
                   "given: loopback, gigabytes a second.")
@click.option("--daemon", is_flag=True, help="Run in the background; print the bootstrap servers and exit.")
@click.option("--fresh", is_flag=True, help="Ignore state saved in --state-dir and start from the topic specs.")
@click.option("--describe-cluster-v0-only", is_flag=True,
              help="Offer only DescribeCluster v0, like Kafka 2.8-3.6 (reproduces kafka-python's KeyError).")
@click.option("--replica-fetch-max-bytes", default="1MiB", show_default=True, type=SIZE,
              help="Kafka's replica.fetch.max.bytes: what one follower fetch takes per partition.")
@click.option("--replica-fetch-response-max-bytes", default="10MiB", show_default=True, type=SIZE,
              help="Kafka's replica.fetch.response.max.bytes: what one follower fetch takes in all.")
@click.option("--num-replica-fetchers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Kafka's num.replica.fetchers: fetcher threads per follower and leader.")
@click.option("--log-dirs", default=None, type=click.IntRange(1, 64),
              help="Log dirs per broker (JBOD), for AlterReplicaLogDirs moves between them (default 1, 3 with "
                   "--engine kafka).")
@click.option("--client-quota", "client_quotas", multiple=True, metavar="KEY=RATE",
              help="A KIP-13 default client quota (the <default> client-id entity), e.g. producer_byte_rate=1MB/s "
                   "or consumer_byte_rate=5MB/s, per broker in sandbox time (repeatable). Admin clients change "
                   "quotas with AlterClientQuotas.")
@click.option("--security", type=click.Choice(["plaintext", "tls", "sasl_plaintext", "sasl_ssl"]),
              default="plaintext", show_default=True,
              help="What the client listeners speak: tls makes a CA and server certificate in the state dir; the "
                   "sasl modes authenticate --user logins (on --engine kafka with Kafka's StandardAuthorizer).")
@click.option("--sasl-mechanism", type=click.Choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
                                                    case_sensitive=False),
              help="SASL mechanism of the sasl modes (default PLAIN).")
@click.option("--user", "users", multiple=True, metavar="NAME:PASSWORD[:admin]",
              help="A SASL login (repeatable). Users marked admin may change configs and reassign (on --engine "
                   "kafka: super users); the others may describe, produce and consume (ACLs).")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve each broker's Prometheus /metrics on 127.0.0.1: broker i on METRICS_PORT+i-1 (0: free "
                   "ports). The emulator also turns on its KIP-714 client telemetry receiver; real brokers "
                   "(--engine kafka) run the Prometheus JMX exporter's java agent, and kreassign's KIP-714 "
                   "receiver (a metric.reporters plugin built by `make kafka`) serves what clients push on "
                   "METRICS_PORT+N+i-1 (N brokers). See METRICS below.")
@output_option
def start(engine: str, kafka_home: str | None, kafka_version: str | None, heap: str, start_timeout: float,
          brokers: int | None,
          racks: int | None, topics: tuple[str, ...], speed: float, state_dir: str | None, seed: int,
          port_base: int, network_bps: int, daemon: bool, fresh: bool, describe_cluster_v0_only: bool,
          replica_fetch_max_bytes: int, replica_fetch_response_max_bytes: int, num_replica_fetchers: int,
          log_dirs: int | None, client_quotas: tuple[str, ...], security: str, sasl_mechanism: str | None,
          users: tuple[str, ...], metrics_port: int | None, output: str) -> None:
    """Start the sandbox and print its bootstrap servers (Ctrl-C stops it).

    \b
    With --engine kafka the brokers are real Apache Kafka (default 5 brokers in 2 racks, 3 log
    dirs each, 512 MB heaps, one KRaft controller as node 0), each a JVM that ends with this
    process (or with the --daemon process), kill -9 included. --topics sizes are written as real
    records and rates kept by a background producer (default: the demo topics at a hundredth of
    the emulator's sizes and rates). The fetch options set Kafka's replica.fetch.max.bytes,
    replica.fetch.response.max.bytes and num.replica.fetchers; the emulator's time, network,
    quota and metrics options do not apply.

    With --security, a ready --command-config file per user is written to the state dir
    (0600) and shown with the password masked. On --engine kafka the brokers' client listener
    is secured (TLS from a PEM key store, SASL with Kafka's login modules, Kafka's
    StandardAuthorizer with admin users as super users and DESCRIBE ACLs for the others) and
    the brokers replicate over a second, PLAINTEXT listener; see docs/security.md.

    \b
    METRICS (--metrics-port), one endpoint per broker, named as the Prometheus JMX exporter
    names a real broker's with the rules of sandbox/kafka_engine/jmx_exporter.yaml (the rules
    real brokers run with under --engine kafka):
      kafka_network_requestmetrics_{totaltimems,requestqueuetimems,localtimems,remotetimems,
        throttletimems}{request,quantile}   RequestMetrics histograms (Produce, FetchConsumer, ...);
        quantiles 0.50..0.999 over the last 300 sandbox seconds; TotalTime = queue + local +
        remote (time parked in a purgatory), without throttle time (KIP-219); _count alongside
      kafka_network_requestmetrics_requests_total{request,version}   RequestsPerSec
      kafka_server_brokertopicmetrics_{bytesin,messagesin,bytesout}_total{topic}   and all topics
      kafka_server_brokertopicmetrics_replicationbytes{in,out}_total   follower copies and moves
      kafka_server_replicamanager_{underreplicatedpartitions,leadercount,partitioncount}
      kafka_server_quota_{byte_rate,throttle_time}{resource=Produce|Fetch,clientId[,user]}
        KIP-13 per-client sensors (kafka.server:type=Produce|Fetch,client-id=...)
      kafka_server_{leaderreplication,followerreplication}_byte_rate   KIP-73 quota sensors
        (kafka.server:type=LeaderReplication|FollowerReplication, byte-rate), once in use
      org_apache_kafka_<client metric>{client_instance_id,client_id,...}   KIP-714 metrics the
        clients pushed to that broker (a subscription: IncrementalAlterConfigs on a
        CLIENT_METRICS resource, as kafka-client-metrics.sh --alter does); gauges keep the latest
        value, sums the running total. Real brokers serve these on an endpoint of their own (the
        KIP-714 receiver's, printed at start), with the same names and labels: give watch both,
        --metrics-url 1=JMX_URL --metrics-url 1=TELEMETRY_URL
    Everything is in sandbox time: remote and throttle time and all rates on the sandbox clock,
    queue and local time (the server's own work, measured in wall time) scaled by --speed."""
    import threading
    from dataclasses import replace
    from pathlib import Path

    from kreassign.sandbox.daemon import SandboxOptions, default_state_dir, refuse_if_running, serve, start_daemon
    from kreassign.sandbox.security import User, build_security
    from kreassign.sandbox.topics import parse_topic_spec

    from kreassign.cluster.errors import InputError

    real = engine == "kafka"
    context = click.get_current_context()
    # real Kafka replicates over loopback unless a network is asked for
    network: float | None = (None if real and context.get_parameter_source("network_bps")
                             in (click.core.ParameterSource.DEFAULT, None) else float(network_bps))
    if real:
        given = [name for name in EMULATOR_ONLY
                 if context.get_parameter_source(name) not in (click.core.ParameterSource.DEFAULT, None)]
        if given:
            flags = ", ".join("--" + {"client_quotas": "client-quota"}.get(g, g).replace("_", "-") for g in given)
            raise InputError(f"{flags}: only the emulator has {'these options' if len(given) > 1 else 'this option'}; "
                             "real Kafka brokers run in real time, without the emulator's client quota options")
    elif kafka_home:
        raise InputError("--kafka-home needs --engine kafka")
    else:
        from kreassign.sandbox.kafka_profiles import profile

        profile(kafka_version)  # one line now for a release the emulator cannot imitate
    if start_timeout <= 0:
        raise InputError("--start-timeout must be positive")
    specs: tuple[str, ...] | None = tuple(s for item in topics for s in item.replace(" ", ",").split(",") if s) or None
    if specs == ("none",):
        specs = ()
    for spec in specs or ():
        parse_topic_spec(spec)
    options = SandboxOptions(brokers or (5 if real else 6), racks if racks is not None else (2 if real else 3), specs,
                             speed, seed, port_base, network,
                             describe_cluster_v0_only, fresh, fetch_max_bytes=replica_fetch_max_bytes,
                             fetch_response_max_bytes=replica_fetch_response_max_bytes,
                             num_replica_fetchers=num_replica_fetchers, log_dirs=log_dirs or (3 if real else 1),
                             client_quotas=client_quotas, metrics_port=metrics_port, engine=engine,
                             kafka_home=kafka_home, kafka_version=kafka_version, heap=heap,
                             start_timeout_s=start_timeout)
    if real:  # one line now for a missing Java, jar or version, not after a daemon's start-up
        from kreassign.sandbox.kafka_engine.dist import find_java_for, locate

        find_java_for(locate(kafka_home, kafka_version).min_java)
    options.fetch  # refuse bad limits and quotas before anything starts
    options.default_client_quotas
    logins = tuple(User.parse(u) for u in users)
    directory = Path(state_dir) if state_dir else default_state_dir()
    if daemon or security != "plaintext":
        refuse_if_running(directory)  # before its certificates are replaced
    secured = build_security(security, sasl_mechanism, logins, directory)
    options = replace(options, security=secured.to_json())
    if real and secured.sasl:
        from kreassign.sandbox.kafka_engine.secured import KafkaLogin

        assert secured.mechanism is not None
        options = replace(options, logins=tuple(KafkaLogin.make(u, secured.mechanism).to_json() for u in logins))
    if daemon:
        info = start_daemon(options, directory)
        if output == "json":
            from dataclasses import asdict

            from kreassign.cli.console import emit_json

            emit_json({"running": True, **asdict(info)})
        else:
            click.echo(info.bootstrap)
        _show_metrics(info.extra)
        _show_client_settings(secured, logins, info.bootstrap, directory)
        if real:
            click.echo(f"Kafka {info.extra.get('kafka_version')}: {len(info.ports)} brokers{_links(info.extra)}, "
                       f"controller {info.extra.get('controller')}; logs in {directory / 'logs'}", err=True)
        click.echo(f"Sandbox running in the background (pid {info.pid}, state in {directory}); "
                   f"stop it with: kreassign sandbox stop --state-dir {directory}", err=True)
        return
    import signal

    cluster = options.build(Path(state_dir) if state_dir else None)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    def ready(sb: Any) -> None:
        from kreassign.sandbox.daemon import metrics_extra

        endpoints = metrics_extra(sb)
        if output == "json":
            from kreassign.cli.console import emit_json_line

            emit_json_line({"running": True, "bootstrap": sb.bootstrap, "state_dir": str(sb.state_dir),
                            "metrics": {}, **endpoints, **sb.summary()})
        else:
            click.echo(sb.bootstrap)
        _show_metrics(endpoints)
        _show_client_settings(secured, logins, sb.bootstrap, directory)
        summary = sb.summary()
        if real:
            click.echo(f"Kafka {summary['version']} running: {summary['brokers']} brokers{_links(summary)}, controller "
                       f"{summary['controller']}, {summary['topics']} topics, {summary['partitions']} partitions; "
                       f"state in {sb.state_dir}. Press Ctrl-C to stop.", err=True)
        else:
            click.echo(f"Sandbox running: {summary['brokers']} brokers (Kafka {summary['kafka_version']}), "
                       f"{summary['topics']} topics, {summary['partitions']} partitions, speed {speed:g}x. "
                       "Press Ctrl-C to stop.", err=True)

    serve(cluster, stop, ready)
    click.echo("Sandbox stopped.", err=True)


def _links(info: dict[str, Any]) -> str:
    """', replicating over 20 MB/s links' for real brokers with replication links (--network)."""
    rate = info.get("network_bps")
    return f", replicating over {format_rate(rate)} links" if rate else ""


def _show_metrics(extra: dict[str, Any]) -> None:
    """The Prometheus endpoints, one line each, and the watch options that read them all."""
    telemetry = extra.get("client_telemetry", {})
    for broker, url in extra.get("metrics", {}).items():
        click.echo(f"Broker {broker} metrics: {url}", err=True)
        if broker in telemetry:
            click.echo(f"Broker {broker} client telemetry (KIP-714): {telemetry[broker]}", err=True)
    if telemetry:
        urls = " ".join(f"--metrics-url {b}={u}" for key in ("metrics", "client_telemetry")
                        for b, u in extra.get(key, {}).items())
        click.echo(f"watch reads both with: {urls}", err=True)


def _show_client_settings(security: Any, users: tuple[Any, ...], bootstrap: str, directory: Any) -> None:
    """Write the client properties files and show them (passwords masked) on stderr."""
    from kreassign.sandbox.security import client_properties, redacted, write_client_properties

    if security.protocol == "PLAINTEXT":
        return
    paths = write_client_properties(security, users, bootstrap, directory)
    mechanism = f" with {security.mechanism}" if security.sasl else ""
    click.echo(f"Listeners speak {security.protocol}{mechanism}. Client settings for --command-config "
               "(passwords masked here; the files hold them):", err=True)
    for path, user in zip(paths, users or (None,)):
        role = "" if user is None else f" ({user.name}, {'admin' if user.admin else 'describe only'})"
        click.echo(f"# {path}{role}", err=True)
        click.echo(redacted(client_properties(security, user, bootstrap)), err=True, nl=False)


@sandbox.command()
@_state_dir_option
@output_option
def stop(state_dir: str | None, output: str) -> None:
    """Stop a sandbox started with --daemon."""
    from pathlib import Path

    from kreassign.sandbox.daemon import default_state_dir, stop_daemon

    directory = Path(state_dir) if state_dir else default_state_dir()
    info = stop_daemon(directory)
    if output == "json":
        from kreassign.cli.console import emit_json

        emit_json({"stopped": info is not None, "state_dir": str(directory),
                   **({"pid": info.pid} if info is not None else {})})
    elif info is None:
        click.echo(f"No sandbox is running from {directory}.", err=True)
    else:
        click.echo(f"Stopped the sandbox (pid {info.pid}); its state is saved in {directory}.", err=True)


@sandbox.command()
@_state_dir_option
@output_option
def status(state_dir: str | None, output: str) -> None:
    """Show whether a background sandbox runs, where it listens and what it holds."""
    from dataclasses import asdict
    from pathlib import Path

    from kreassign.cli.console import emit_json
    from kreassign.cluster.errors import ExitStatus
    from kreassign.sandbox.daemon import default_state_dir, read_status

    directory = Path(state_dir) if state_dir else default_state_dir()
    info = read_status(directory)
    if output == "json":
        emit_json({"running": info is not None, **(asdict(info) if info else {"state_dir": str(directory)})})
    elif info is None:
        click.echo(f"No sandbox is running from {directory}.", err=True)
    else:
        click.echo(f"bootstrap: {info.bootstrap}")
        click.echo(f"pid:       {info.pid}")
        if info.engine == "kafka":
            click.echo(f"engine:    kafka {info.extra.get('kafka_version', '?')} (real brokers, real time)")
            click.echo(f"controller: node 0 at {info.extra.get('controller', '?')}")
            if info.extra.get("network_bps"):
                click.echo(f"network:   replication links of {format_rate(info.extra['network_bps'])} each way per broker")
            pids = info.extra.get("pids", {})
            if pids:
                click.echo("jvms:      " + ", ".join(f"{'controller' if k == '0' else 'broker ' + k} pid {v}"
                                                      for k, v in sorted(pids.items(), key=lambda kv: int(kv[0]))))
        else:
            click.echo(f"engine:    emulator (imitates Kafka {info.extra.get('kafka_version', '?')})")
            click.echo(f"speed:     {speed_line(info.speed, info.extra.get('clock'))}")
        click.echo(f"started:   {info.started_at}")
        click.echo("brokers:   " + ", ".join(f"{b}@127.0.0.1:{p}" for b, p in sorted(info.ports.items())))
        click.echo(f"state:     {info.state_dir}")
        telemetry = info.extra.get("client_telemetry", {})
        for broker, url in info.extra.get("metrics", {}).items():
            click.echo(f"metrics:   broker {broker} {url}")
            if broker in telemetry:
                click.echo(f"telemetry: broker {broker} {telemetry[broker]}")
        if info.extra.get("security_protocol"):
            mechanism = info.extra.get("sasl_mechanism")
            click.echo(f"security:  {info.extra['security_protocol']}" + (f" ({mechanism})" if mechanism else ""))
    if info is None:
        raise click.exceptions.Exit(int(ExitStatus.ERROR))


def speed_line(speed: float, clock: dict[str, Any] | None) -> str:
    """The emulator's speed as `status` prints it: asked, and what it runs at and keeps when its
    engine cannot follow."""
    if not clock or (clock.get("running_speed", speed) >= speed and clock.get("kept_share", 1.0) >= KEPT_OK):
        return f"{speed:g}x" + (f" (kept; {clock['given_up_s']:g} sandbox s given up to lag since start)"
                                if clock and clock.get("given_up_s") else "")
    return (f"{speed:g}x asked, runs at {clock.get('running_speed', speed):.3g}x ({clock['kept_speed']:.3g}x kept over "
            "the last seconds): the engine cannot do more work on this machine, so sandbox time waits for it "
            f"({clock['given_up_s']:g} sandbox s given up since start)")


@sandbox.command("fetch-kafka")
@click.option("--kafka-version", "versions", multiple=True, metavar="X.Y.Z",
              help="A Kafka release to fetch (repeatable; default: every release kreassign is tested with).")
@click.option("--force", is_flag=True, help="Fetch again even if the jars are cached.")
@output_option
def fetch_kafka(versions: tuple[str, ...], force: bool, output: str) -> None:
    """Fetch the runtime jars of Apache Kafka releases (the broker, Kafka's own tools and a logging
    binding) from Maven Central with Maven, into a cache outside any repository
    ($KREASSIGN_KAFKA_CACHE, else ~/.cache/kreassign/kafka): what `sandbox start --engine kafka`
    runs when no --kafka-home is given; the Prometheus JMX exporter's java agent, which
    serves real brokers' metrics; and builds kreassign's KIP-714 client-telemetry receiver
    (sandbox/kafka_engine/telemetry, compiled by Maven against kafka-clients), which serves
    what clients push to real brokers. Needs Java and Maven (mvn) on PATH; no tarball is
    downloaded."""
    from kreassign.cli.console import emit_json
    from kreassign.sandbox.kafka_engine.dist import (
        JMX_EXPORTER_VERSION,
        MATRIX,
        build_client_telemetry,
        fetch,
        fetch_jmx_exporter,
    )

    fetched = [fetch(v, force=force) for v in (versions or MATRIX)]
    agent = fetch_jmx_exporter(force=force)
    receiver = build_client_telemetry(force=force)
    if output == "json":
        emit_json({"kafka": [{"version": d.version, "libs": str(d.libs)} for d in fetched],
                   "jmx_exporter": {"version": JMX_EXPORTER_VERSION, "jar": str(agent)},
                   "client_telemetry": {"jar": str(receiver)}})
        return
    for dist in fetched:
        click.echo(f"Kafka {dist.version}: {dist.libs}")
    click.echo(f"Prometheus JMX exporter {JMX_EXPORTER_VERSION}: {agent}")
    click.echo(f"KIP-714 client-telemetry receiver: {receiver}")


@sandbox.command()
@bootstrap_option
@request_timeout_option
@click.option("--topic", "topics", multiple=True, required=True, metavar="TOPIC:RATE",
              help="Produce to TOPIC at RATE bytes per second, e.g. orders:200kB/s (repeatable); a consumer "
                   "group reads every topic. The topics must exist: the load creates none.")
@click.option("--message-size", default="1KB", show_default=True, type=SIZE, help="Bytes per message.")
@click.option("--duration", default="60s", show_default=True, type=DURATION, help="How long to run.")
@click.option("--interval", default="2s", show_default=True, type=DURATION, help="Print a line this often.")
@click.option("--client-id", default="kreassign-load", show_default=True,
              help="The producer's client id (the consumer's is CLIENT_ID-consumer): what quotas and "
                   "metrics are keyed by.")
@output_option
def load(bootstrap_server: str | None, request_timeout: float | None, topics: tuple[str, ...], message_size: int,
         duration: float, interval: float, client_id: str, output: str) -> None:
    """Run real clients (kafka-python producers, acks=all, and a consumer group) against a cluster
    and print, per interval, produce latency percentiles (send to acknowledgement), the throttle
    time brokers gave the producer and the consumer, and the group's lag: watch clients live
    through a move. Ctrl-C or SIGTERM ends it after a last line."""
    import signal
    import threading

    from kreassign.cluster.errors import InputError
    from kreassign.sandbox.load import HEADER, LoadGenerator, parse_topic_load

    if not bootstrap_server:
        raise InputError("give --bootstrap-server (or KREASSIGN_BOOTSTRAP_SERVER)")
    if interval <= 0:
        raise InputError("--interval must be positive")
    generator = LoadGenerator(bootstrap_server, [parse_topic_load(t) for t in topics], message_bytes=message_size,
                              client_id=client_id, request_timeout_s=request_timeout or 30.0)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if output == "json":
        from dataclasses import asdict

        from kreassign.cli.console import emit_json_line

        for sample in generator.run(duration, interval, stop):
            emit_json_line(asdict(sample))
        return
    for n, sample in enumerate(generator.run(duration, interval, stop)):
        if n == 0:  # after the clients found every topic
            click.echo(HEADER)
        click.echo(sample.line())
