"""kafka-python's mixed error styles and raw results, translated for the admin adapter
(`cluster/admin.py`): returned error classes, "[Error <code>] Name: message" strings and raised
exceptions become `ApiError` values or `ClusterError` exceptions; raw log-dir and config results
become the port's types."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import kafka.errors as Errors
from kafka.admin import AlterConfigOp

from kreassign.cluster.errors import ClusterError
from kreassign.cluster.model import TopicPartitionReplica
from kreassign.cluster.port import UNREACHABLE, ApiError, ConfigEntry, ConfigOps, LogDir, ReplicaLogDir


def api_error(error: type[Errors.KafkaError] | Errors.KafkaError, message: str | None = None) -> ApiError:
    """An `ApiError` for a kafka.errors class or instance."""
    cls = error if isinstance(error, type) else type(error)
    code = getattr(cls, "errno", None)
    name = getattr(cls, "message", None) or cls.__name__
    if message is None and not isinstance(error, type):
        message = error_detail(error) or None
    text = message or getattr(cls, "description", None) or cls.__name__
    return ApiError(code=code if isinstance(code, int) else -1, name=str(name),
                    message=str(text), retriable=bool(getattr(cls, "retriable", False)))


def error_detail(error: BaseException) -> str:
    """The exception's own text, unless it is kafka-python's dump of a whole request."""
    detail = str(error.args[0]) if error.args and error.args[0] is not None else ""
    return "" if len(detail) > 300 or detail.startswith("Request '") else detail


def short(error: Errors.KafkaError) -> str:
    """One readable line for an error: NAME (detail) or NAME: description."""
    failure = api_error(type(error))
    detail = error_detail(error)
    if detail:
        return f"{failure.name} ({detail})"
    return failure.name if failure.message == failure.name else f"{failure.name}: {failure.message}"


RESULT_TEXT = re.compile(r"^(?:\[Error (-?\d+)\] )?(\w+)(?:: (.*))?$", re.S)


def error_from_text(text: str) -> ApiError | None:
    """Parse kafka-python's alter_configs result: 'OK' or '[Error <code>] <ErrorClass>: <message>'."""
    if text == "OK":
        return None
    match = RESULT_TEXT.match(text)
    if match is None:
        return ApiError(code=-1, name="UNKNOWN_SERVER_ERROR", message=text)
    code, name, message = match.groups()
    cls = getattr(Errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Errors.KafkaError)):
        cls = Errors.for_code(int(code)) if code is not None else None
    if cls is None:
        return ApiError(code=-1, name="UNKNOWN_SERVER_ERROR", message=text)
    return api_error(cls, None if message in (None, "", "None") else message)


def unreachable(broker: int, reason: str) -> ApiError:
    return ApiError(code=-1, name=UNREACHABLE, message=f"broker {broker} did not answer: {reason}")


def int_or_none(value: Any) -> int | None:
    return None if value is None or value < 0 else int(value)


def translate(error: Errors.KafkaError, what: str) -> ClusterError:
    """A kafka-python exception as a ClusterError with a message that says what to do."""
    if isinstance(error, Errors.SaslAuthenticationFailedError):
        return ClusterError(f"Authentication failed while trying to {what}: {short(error)}. Check "
                            "sasl.mechanism and the username and password in sasl.jaas.config "
                            "(--command-config).")
    if isinstance(error, Errors.AuthorizationError):
        return ClusterError(f"Not authorized to {what}: {api_error(type(error)).name}. The principal "
                            "in --command-config needs the matching ACLs (for reassignments and "
                            "throttles: ALTER and DESCRIBE on CLUSTER, ALTER_CONFIGS and "
                            "DESCRIBE_CONFIGS on the topics and brokers).")
    if isinstance(error, Errors.UnknownTopicOrPartitionError):
        return ClusterError(f"Could not {what}: unknown topic or partition ({short(error)}).")
    if isinstance(error, Errors.UnknownBrokerIdError):
        return ClusterError(f"Could not {what}: broker {error_detail(error) or '?'} is not in the "
                            "cluster metadata.")
    return ClusterError(f"Could not {what}: {short(error)}.")


def merge_log_dirs(broker: int, log_dirs: list[dict[str, Any]],
                    replicas: dict[TopicPartitionReplica, ReplicaLogDir]) -> tuple[LogDir, ...]:
    out: list[LogDir] = []
    for d in log_dirs:
        code = int(d.get("error_code", 0))
        out.append(LogDir(path=d["log_dir"], error=None if code == 0 else api_error(Errors.for_code(code)),
                          total_bytes=int_or_none(d.get("total_bytes")),
                          usable_bytes=int_or_none(d.get("usable_bytes"))))
        for topic in d.get("topics", []):
            for p in topic["partitions"]:
                key = TopicPartitionReplica(topic["name"], int(p["partition_index"]), broker)
                old = replicas.get(key, ReplicaLogDir(log_dir=None, size_bytes=0, offset_lag=0))
                if p.get("is_future_key"):
                    new = ReplicaLogDir(log_dir=old.log_dir, size_bytes=old.size_bytes,
                                        offset_lag=old.offset_lag, future_dir=d["log_dir"],
                                        future_size_bytes=int(p["partition_size"]),
                                        future_offset_lag=int(p["offset_lag"]))
                else:
                    new = ReplicaLogDir(log_dir=d["log_dir"], size_bytes=int(p["partition_size"]),
                                        offset_lag=int(p["offset_lag"]), future_dir=old.future_dir,
                                        future_size_bytes=old.future_size_bytes,
                                        future_offset_lag=old.future_offset_lag)
                replicas[key] = new
    return tuple(sorted(out, key=lambda x: x.path))


def config_entries(raw: Mapping[str, Mapping[str, Any]]) -> dict[str, ConfigEntry]:
    return {key: ConfigEntry(value=v.get("value"), source=str(v.get("config_source", "UNKNOWN")),
                             read_only=bool(v.get("read_only")), sensitive=bool(v.get("is_sensitive")))
            for key, v in sorted(raw.items())}


def alter_ops(ops: ConfigOps) -> dict[str, tuple[AlterConfigOp, str | None]]:
    return {key: (AlterConfigOp.DELETE, None) if value is None else (AlterConfigOp.SET, str(value))
            for key, value in sorted(ops.items())}


def named_refusal(error: ApiError | None, operation: str, resource: str) -> ApiError | None:
    """An authorization refusal that says which operation on which resource was refused."""
    if error is None or error.code not in (Errors.TopicAuthorizationFailedError.errno,
                                           Errors.ClusterAuthorizationFailedError.errno,
                                           Errors.GroupAuthorizationFailedError.errno):
        return error
    return ApiError(code=error.code, name=error.name, message=f"not authorized to {operation} on {resource}")


def alter_result(raw: Mapping[str, Mapping[str, str]], kind: str, name: str) -> ApiError | None:
    text = raw.get(kind, {}).get(name)
    if text is None:
        return ApiError(code=-1, name="UNKNOWN_SERVER_ERROR",
                        message=f"the broker did not report on {kind} {name}")
    return error_from_text(text)
