"""What a request handler knows besides the request: the engine, which broker it is, where
every broker listens, and for the data path the partition logs, the sandbox time, the client and
its quotas; for groups and quota admin, the group coordinator and the client quota configs; for
KIP-714, the telemetry receiver. Shared
by every handler module."""
from __future__ import annotations

from dataclasses import dataclass

from kreassign.sandbox.acl import Principal
from kreassign.sandbox.client_quota_hook import ClientQuotaHook, NoClientQuotas
from kreassign.sandbox.client_quotas import QuotaConfigs
from kreassign.sandbox.dataplane import DataPlane
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.groups import GroupCoordinator
from kreassign.sandbox.telemetry import TelemetryReceiver


@dataclass(frozen=True)
class Context:
    """What a handler knows besides the request (see the module docstring)."""

    engine: Engine
    broker_id: int
    ports: dict[int, int]
    ranges: dict[int, tuple[int, int]]
    host: str = "127.0.0.1"
    data: DataPlane | None = None
    now: float = 0.0
    client_id: str = ""
    quotas: ClientQuotaHook = NoClientQuotas()
    groups: GroupCoordinator | None = None
    quota_configs: QuotaConfigs | None = None
    telemetry: TelemetryReceiver | None = None
    principal: Principal | None = None
    """The authenticated user (None on listeners without SASL, where everything is allowed)."""
