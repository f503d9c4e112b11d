"""`Rates`: the one precedence rule of the rate options, the one validity check, and the
translation to and from Kafka's broker configs."""
from __future__ import annotations

import pytest

from kreassign.cluster.errors import InputError
from kreassign.cluster.port import ConfigEntry
from kreassign.throttle.configs import FOLLOWER_RATE, LEADER_RATE, LOG_DIR_RATE
from kreassign.throttle.rates import UNLIMITED, Rates, config_rate


def test_a_leader_or_follower_rate_overrides_throttle_on_its_side() -> None:
    assert Rates.of(50) == Rates(50, 50, None)
    assert Rates.of(50, leader=10) == Rates(10, 50, None)
    assert Rates.of(50, follower=20) == Rates(50, 20, None)
    assert Rates.of(None, leader=10) == Rates(10, None, None)
    assert Rates.of(0, leader=10, follower=20, log_dir=5) == Rates(10, 20, 5)
    assert Rates.of() == Rates() and not Rates().any() and not Rates().inter_broker
    assert Rates(log_dir=5).any() and not Rates(log_dir=5).inter_broker


@pytest.mark.parametrize("side, rates", [("leader", {"leader": -1}), ("follower", {"follower": -2}),
                                         ("log-dir", {"log_dir": -3})])
def test_a_negative_rate_is_refused_once_for_every_caller(side: str, rates: dict[str, int]) -> None:
    with pytest.raises(InputError, match=f"The {side} throttle must be at least 0 bytes/s, got -"):
        Rates.of(**rates)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="at least 0 bytes/s"):
        Rates.of(-1, leader=5)  # the follower side keeps the negative throttle


def test_rates_become_kafkas_configs_and_come_back() -> None:
    rates = Rates(1_000_000, 2_000_000, 3_000_000)
    assert rates.configs() == {LEADER_RATE: "1000000", FOLLOWER_RATE: "2000000"}
    assert rates.log_dir_configs() == {LOG_DIR_RATE: "3000000"}
    assert Rates(leader=7).configs() == {LEADER_RATE: "7"} and Rates().log_dir_configs() == {}
    assert Rates.from_configs({**rates.configs(), **rates.log_dir_configs()}) == rates
    entries = {LEADER_RATE: ConfigEntry("5", "DYNAMIC_BROKER_CONFIG"), FOLLOWER_RATE: ConfigEntry(None, "DEFAULT_CONFIG")}
    assert Rates.from_configs(entries) == Rates(5, None, None)


@pytest.mark.parametrize("value, rate", [(None, None), ("", None), ("abc", None), ("12", 12), ("0", 0),
                                         (str(UNLIMITED), None), (str(2**63 - 1), None), ("-5", None)])
def test_a_config_value_that_is_no_rate_is_no_throttle(value: str | None, rate: int | None) -> None:
    assert config_rate(value) == rate
