"""Where KIP-13 client quotas plug into Produce and Fetch.

The data handlers call the hook once per request with the bytes it moved, the client id, the
user principal and the sandbox time, after the request is complete (for acks=all, after the
produce purgatory), as Kafka records quota usage. The hook returns the throttle time in ms to
put in the response; the server then keeps the connection muted that long (KIP-219). A fetch
given a throttle is answered without records, and Kafka does not count those bytes: a quota
manager un-records them itself before returning a positive throttle for a fetch.
"""
from __future__ import annotations

from typing import Protocol

ANONYMOUS = "ANONYMOUS"  # the principal of every PLAINTEXT client


class ClientQuotaHook(Protocol):
    def produce_throttle_ms(self, client_id: str, user: str, nbytes: int, now: float) -> int: ...

    def fetch_throttle_ms(self, client_id: str, user: str, nbytes: int, now: float) -> int: ...


class NoClientQuotas:
    """No quotas configured: never throttle."""

    def produce_throttle_ms(self, client_id: str, user: str, nbytes: int, now: float) -> int:
        return 0

    def fetch_throttle_ms(self, client_id: str, user: str, nbytes: int, now: float) -> int:
        return 0
