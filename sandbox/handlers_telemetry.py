"""GetTelemetrySubscriptions (71) and PushTelemetry (72) over the sandbox's telemetry receiver
(`telemetry.py`). They are only advertised, and so only reach here, when the receiver is on."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kreassign.sandbox.context import Context
from kreassign.sandbox.telemetry import ACCEPTED_COMPRESSION
from kreassign.sandbox.telemetry_messages import GetTelemetrySubscriptionsResponse, PushTelemetryResponse


def get_telemetry_subscriptions(ctx: Context, v: int, req: Any) -> Any:
    assert ctx.telemetry is not None
    code, inst = ctx.telemetry.get(req.client_instance_id, ctx.client_id, ctx.now)
    sub = inst.subscription
    return GetTelemetrySubscriptionsResponse(
        version=v, throttle_time_ms=0, error_code=code, client_instance_id=inst.instance_id,
        subscription_id=sub.subscription_id, accepted_compression_types=list(ACCEPTED_COMPRESSION),
        push_interval_ms=sub.interval_ms, telemetry_max_bytes=ctx.telemetry.max_bytes, delta_temporality=True,
        requested_metrics=list(sub.requested))


def push_telemetry(ctx: Context, v: int, req: Any) -> Any:
    assert ctx.telemetry is not None
    code = ctx.telemetry.push(req.client_instance_id, req.subscription_id, bool(req.terminating),
                              int(req.compression_type), bytes(req.metrics or b""), ctx.client_id, ctx.now,
                              ctx.broker_id)
    return PushTelemetryResponse(version=v, throttle_time_ms=0, error_code=code)


TELEMETRY_HANDLERS: dict[int, Callable[[Context, int, Any], Any]] = {
    71: get_telemetry_subscriptions, 72: push_telemetry,
}
