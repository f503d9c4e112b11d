"""Where broker metrics come from: Prometheus endpoints per broker (the JMX exporter's
`/metrics`, and a KIP-714 client-telemetry receiver's where it serves its own), given as
`--metrics-url ID=URL` (repeatable; a broker named again adds an endpoint, read together with
the others as one exposition) or `--metrics-url @FILE` (lines of `ID URL`). Scraping is plain
HTTP GET; an endpoint that does not answer is skipped with a note, so the admin API's view and
the broker's other endpoints stay available."""
from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kreassign.cluster.broker_metrics import BrokerReading, MetricNames, parse_exposition
from kreassign.cluster.errors import InputError

_MAX_BYTES = 64 << 20  # a JMX exporter page is a few MB at most


@dataclass(frozen=True)
class MetricsEndpoints:
    """Broker id -> the URLs of its Prometheus expositions (in the order given)."""

    urls: Mapping[int, tuple[str, ...]]

    @classmethod
    def parse(cls, specs: Iterable[str], read_file: Callable[[str], str]) -> MetricsEndpoints:
        """`ID=URL` items and `@FILE`s of `ID URL` lines (# comments allowed).

        Raises:
            InputError: an item that is neither, a broker named twice, or a URL that is not http(s).
        """
        urls: dict[int, str] = {}

        def add(broker: str, url: str, where: str) -> None:
            if not broker.strip().isdigit():
                raise InputError(f"{where}: '{broker}' is not a broker id; use ID=URL, e.g. 1=http://kafka-1:9404/metrics")
            if not url.startswith(("http://", "https://")):
                raise InputError(f"{where}: '{url}' is not an http(s) URL")
            b = int(broker)
            if url in urls.get(b, ()):
                raise InputError(f"{where}: broker {b} has the metrics URL {url} twice")
            urls[b] = (*urls.get(b, ()), url)

        for spec in specs:
            if spec.startswith("@"):
                for n, line in enumerate(read_file(spec[1:]).splitlines(), 1):
                    text = line.split("#", 1)[0].strip()
                    if text:
                        parts = text.split()
                        if len(parts) != 2:
                            raise InputError(f"{spec[1:]}:{n}: expected 'ID URL', got {line.strip()!r}")
                        add(parts[0], parts[1], f"{spec[1:]}:{n}")
            else:
                broker, sep, url = spec.partition("=")
                if not sep:
                    raise InputError(f"--metrics-url {spec}: use ID=URL (e.g. 1=http://kafka-1:9404/metrics) or @FILE")
                add(broker, url.strip(), f"--metrics-url {spec}")
        return cls(urls)


def scrape(url: str, timeout_s: float) -> str:
    """GET one exposition.

    Raises:
        OSError: the endpoint did not answer or answered with an error.
    """
    with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 (http(s) checked in parse)
        return bytes(response.read(_MAX_BYTES)).decode("utf-8", errors="replace")


def read_brokers(endpoints: MetricsEndpoints, names: MetricNames, at: float, *, timeout_s: float = 5.0,
                 warn: Callable[[str], None] = lambda line: None) -> dict[int, BrokerReading]:
    """Scrape every broker's endpoints now, each broker's read as one exposition; unreachable
    endpoints and malformed expositions are skipped with a note."""
    out: dict[int, BrokerReading] = {}
    for broker, urls in sorted(endpoints.urls.items()):
        texts = []
        for url in urls:
            try:
                texts.append(scrape(url, timeout_s))
            except (OSError, urllib.error.URLError) as exc:
                warn(f"broker {broker}: its metrics at {url} did not answer ({exc})")
        if not texts:
            continue
        try:
            out[broker] = parse_exposition("\n".join(t.rstrip("\n") for t in texts) + "\n", names, broker, at)
        except InputError as exc:
            warn(str(exc))
    return out
