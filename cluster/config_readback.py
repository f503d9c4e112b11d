"""Reading a config change back from the brokers: a broker applies a dynamic config when it
replays the controller's metadata record, a moment after the controller accepted the change
(seconds on a loaded machine), and DescribeConfigs sent to a broker answers from what that
broker has applied. Used before moves are submitted (`execute.throttle_io`) and by the
calibration probe (`sandbox.copy_probe`)."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kreassign.cluster.errors import KreassignError
from kreassign.cluster.port import ClusterPort, ConfigEntry

PER_RESOURCE_SOURCES = ("DYNAMIC_BROKER_CONFIG", "DYNAMIC_TOPIC_CONFIG")
CONFIRM_WAIT_S = 10.0
"""how long a change waits for the brokers to read their new rates back (well within the request
timeout's 60 s; seen to take seconds on a loaded machine, on Kafka 4.4.0 and 3.9.2)"""
CONFIRM_POLL_S = 0.25
"""the pause between two DescribeConfigs of the brokers that have not applied a change yet"""


def own_values(entries: Mapping[str, ConfigEntry], keys: Iterable[str]) -> dict[str, str | None]:
    # Only values set on this very resource count: a cluster-wide default comes back by itself
    # when the per-resource value is deleted.
    out: dict[str, str | None] = {}
    for key in keys:
        entry = entries.get(key)
        set_here = entry is not None and entry.source in PER_RESOURCE_SOURCES and entry.value is not None
        out[key] = entry.value if set_here and entry is not None else None
    return out


@dataclass(frozen=True)
class Confirm:
    """How a change waits for the brokers to apply it: the run's clock and sleeper, the budget
    and the pause between two reads."""

    clock: Callable[[], float]
    sleep: Callable[[float], None]
    wait_s: float = CONFIRM_WAIT_S
    poll_s: float = CONFIRM_POLL_S


def _same(found: str | None, wanted: str | None) -> bool:
    if found == wanted:
        return True
    try:  # a broker may print a number its own way ("1000" for "01000")
        return found is not None and wanted is not None and int(found) == int(wanted)
    except ValueError:
        return False


def confirm_broker_configs(port: ClusterPort, ops: Mapping[int, Mapping[str, str | None]],
                           confirm: Confirm) -> tuple[int, ...]:
    """Read each broker's configs (DescribeConfigs, which a broker answers for itself from what
    it has applied) until every key of its `ops` reads back as SET (or DELETED), for at most
    `confirm.wait_s`. Returns the brokers that had not applied their change by then.

    A broker that does not answer is left out (the caller reports brokers that did not answer,
    and keeps them pending where it matters); a read that fails as a whole ends the wait, the
    brokers left counting as not confirmed. Never raises for the cluster: the run goes on.
    """
    waiting = {b: dict(o) for b, o in ops.items() if o}
    deadline = confirm.clock() + confirm.wait_s
    polls = int(confirm.wait_s / confirm.poll_s) + 1 if confirm.poll_s > 0 else 1  # bounded whatever the clock
    for _ in range(polls):
        if not waiting:
            break
        try:
            read = port.describe_broker_configs(sorted(waiting), sorted({k for o in waiting.values() for k in o}))
        except KreassignError:
            break
        waiting = {b: o for b, o in waiting.items() if b not in read.errors and not all(
            _same(v, o[k]) for k, v in own_values(read.configs.get(b, {}), o).items())}
        left = deadline - confirm.clock()
        if not waiting or left <= 0:
            break
        confirm.sleep(min(confirm.poll_s, left))
    return tuple(sorted(waiting))
