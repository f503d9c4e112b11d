"""Handlers of DescribeClientQuotas and AlterClientQuotas (KIP-546) over `client_quotas.QuotaConfigs`.

Any broker answers them, as Kafka's brokers forward AlterClientQuotas to the controller and
describe from their metadata image; every broker then enforces the same quotas.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kreassign.sandbox import codes
from kreassign.sandbox.client_quotas import QuotaConfigs, QuotaRequestError
from kreassign.sandbox.wire import APIS

if TYPE_CHECKING:
    from kreassign.sandbox.context import Context


def _configs(ctx: Context) -> QuotaConfigs:
    assert ctx.quota_configs is not None, "the sandbox runs without client quota configs"
    return ctx.quota_configs


def describe_client_quotas(ctx: Context, v: int, req: Any) -> Any:
    R = APIS[48][1]
    E = R.EntryData
    try:
        found = _configs(ctx).describe([(c.entity_type, int(c.match_type), c.match) for c in req.components],
                                       strict=bool(req.strict))
    except QuotaRequestError as exc:
        code = codes.UNSUPPORTED_VERSION if exc.unsupported else codes.INVALID_REQUEST
        return R(version=v, throttle_time_ms=0, error_code=code, error_message=str(exc), entries=None)
    entries = [E(version=v,
                 entity=[E.EntityData(version=v, entity_type=k, entity_name=n) for k, n in entity],
                 values=[E.ValueData(version=v, key=key, value=value) for key, value in sorted(values.items())])
               for entity, values in found]
    return R(version=v, throttle_time_ms=0, error_code=codes.NONE, error_message=None, entries=entries)


def alter_client_quotas(ctx: Context, v: int, req: Any) -> Any:
    R = APIS[49][1]
    E = R.EntryData
    configs = _configs(ctx)
    out = []
    seen: set[tuple[tuple[str, str | None], ...]] = set()
    for entry in req.entries:
        entity = [(e.entity_type, e.entity_name) for e in entry.entity]
        key = tuple(sorted(entity, key=lambda kv: kv[0]))
        code, message = codes.NONE, None
        try:
            if key in seen:
                raise QuotaRequestError(f"Ignoring duplicate entity {dict(entity)}")
            seen.add(key)
            configs.alter(entity, [(op.key, None if op.remove else float(op.value)) for op in entry.ops],
                          validate_only=bool(req.validate_only))
        except QuotaRequestError as exc:
            code, message = codes.INVALID_REQUEST, str(exc)
        out.append(E(version=v, error_code=code, error_message=message,
                     entity=[E.EntityData(version=v, entity_type=k, entity_name=n) for k, n in entity]))
    return R(version=v, throttle_time_ms=0, entries=out)


QUOTA_HANDLERS: dict[int, Callable[[Context, int, Any], Any]] = {
    48: describe_client_quotas, 49: alter_client_quotas,
}
