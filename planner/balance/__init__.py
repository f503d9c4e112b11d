"""Balanced, minimal-movement plans (`plans`), built on a working layout (`engine`, `bulk`),
fair shares (`targets`), preferred leaders (`leaders`) and metrics with lower bounds (`metrics`)."""
from __future__ import annotations

from kreassign.planner.balance.plans import (
    add_brokers,
    balance_leaders,
    decommission,
    rebalance,
    replace_broker,
    set_replication_factor,
)
from kreassign.planner.balance.values import BalanceOptions, BalancePlan

__all__ = [
    "BalanceOptions",
    "BalancePlan",
    "add_brokers",
    "balance_leaders",
    "decommission",
    "rebalance",
    "replace_broker",
    "set_replication_factor",
]
