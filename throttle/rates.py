"""The KIP-73 rates of a throttle: one broker's leader, follower and log-dir rates (`Rates`),
the one rule by which they are chosen from the options (`Rates.of`: a leader or follower rate
overrides --throttle), the one check of their validity, and their translation to and from the
broker configs Kafka keeps them in."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kreassign.cluster.errors import InputError
from kreassign.cluster.port import FOLLOWER_THROTTLED_RATE as FOLLOWER_RATE
from kreassign.cluster.port import LEADER_THROTTLED_RATE as LEADER_RATE
from kreassign.cluster.port import LOG_DIR_THROTTLED_RATE as LOG_DIR_RATE

UNLIMITED = 1 << 62
"""Rates at or above this are Kafka's default (Long.MAX_VALUE): no throttle."""


@dataclass(frozen=True)
class Rates:
    """A broker's throttle rates in bytes/s; None leaves that rate alone (or, read from a broker,
    means it has none). 0 is a valid rate (it stops replication); negative rates are refused."""

    leader: int | None = None
    follower: int | None = None
    log_dir: int | None = None

    def __post_init__(self) -> None:
        for name, value in (("The leader throttle", self.leader), ("The follower throttle", self.follower),
                            ("The log-dir throttle", self.log_dir)):
            if value is not None and value < 0:
                raise InputError(f"{name} must be at least 0 bytes/s, got {value}; leave it out to keep "
                                 "the current throttle")

    @classmethod
    def of(cls, throttle: Any = None, *, leader: Any = None, follower: Any = None, log_dir: Any = None) -> Rates:
        """The rates an operator asked for: a leader or follower rate overrides `throttle` (both
        sides, Kafka's --throttle) on its side.

        Raises:
            InputError: a negative rate.
        """
        return cls(throttle if leader is None else leader, throttle if follower is None else follower, log_dir)

    @property
    def inter_broker(self) -> bool:
        """Whether a leader or follower rate is given (the throttled-replica lists go with them)."""
        return self.leader is not None or self.follower is not None

    def any(self) -> bool:
        return self.inter_broker or self.log_dir is not None

    def configs(self) -> dict[str, str]:
        """The leader and follower rate keys to SET, as Kafka writes them (None leaves a side alone)."""
        return {key: str(int(rate)) for key, rate in ((LEADER_RATE, self.leader), (FOLLOWER_RATE, self.follower))
                if rate is not None}

    def log_dir_configs(self) -> dict[str, str]:
        """The log-dir rate key to SET, if a log-dir rate is given."""
        return {} if self.log_dir is None else {LOG_DIR_RATE: str(int(self.log_dir))}

    @classmethod
    def from_configs(cls, configs: Mapping[str, Any]) -> Rates:
        """A broker's rates from its config values (strings, or anything with a `.value`): an
        absent, empty, malformed or Long.MAX_VALUE value is no throttle."""
        return cls(config_rate(configs.get(LEADER_RATE)), config_rate(configs.get(FOLLOWER_RATE)),
                   config_rate(configs.get(LOG_DIR_RATE)))


def config_rate(value: Any) -> int | None:
    """One rate config's value (a string, or a config entry with a `.value`) as a rate; None for
    absent, empty, malformed or Kafka's unlimited default."""
    value = getattr(value, "value", value)
    if value is None or value == "":
        return None
    try:
        rate = int(str(value))
    except ValueError:
        return None
    return None if rate >= UNLIMITED or rate < 0 else rate
