"""What a request handler knows besides the request: the engine, which broker it is, and where
every broker listens. Shared by every handler module."""
from __future__ import annotations

from dataclasses import dataclass

from kreassign.sandbox.acl import Principal
from kreassign.sandbox.engine import Engine


@dataclass(frozen=True)
class Context:
    """What a handler knows besides the request: the engine, who it is, and where everyone listens."""

    engine: Engine
    broker_id: int
    ports: dict[int, int]
    ranges: dict[int, tuple[int, int]]
    host: str = "127.0.0.1"
    principal: Principal | None = None
    """The authenticated user (None on listeners without SASL, where everything is allowed)."""

    @property
    def is_controller(self) -> bool:
        return self.engine.controller_id == self.broker_id
