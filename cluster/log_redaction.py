"""Keep secrets out of logs. kafka-python logs at DEBUG its whole configuration when a client
starts (SASL password, TLS key password) and every request it sends, raw bytes included: for
SASL/PLAIN the SaslAuthenticate token is the password in clear. This filter masks those values
on kafka-python's loggers; it never drops a record."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kafka.protocol.sasl import SaslAuthenticateRequest

SECRET_KEYS = frozenset({"sasl_plain_password", "ssl_password", "sasl_oauth_token_provider"})
CLIENT_LOGGERS = ("kafka.admin.client", "kafka.protocol.parser", "kafka.net.connection")
MASK = "********"
_SASL_AUTHENTICATE_KEY = SaslAuthenticateRequest.API_KEY.to_bytes(2, "big")


class RedactSecrets(logging.Filter):
    """Masks secret configuration values, SaslAuthenticate requests and their raw frames."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_masked(a) for a in record.args)
        elif isinstance(record.args, Mapping):
            record.args = _masked_config(record.args)
        return True


def _masked(value: Any) -> Any:
    if isinstance(value, Mapping):
        return _masked_config(value)
    if isinstance(value, SaslAuthenticateRequest):
        return f"SaslAuthenticateRequest(version={value.API_VERSION}, auth_bytes={MASK})"
    if isinstance(value, (bytes, bytearray)) and bytes(value[4:6]) == _SASL_AUTHENTICATE_KEY:
        return f"<SaslAuthenticate frame of {len(value)} bytes, {MASK}>"
    return value


def _masked_config(values: Mapping[Any, Any]) -> dict[Any, Any]:
    return {k: (MASK if k in SECRET_KEYS and v is not None else v) for k, v in values.items()}


_FILTER = RedactSecrets()


def redact_client_logs() -> None:
    """Install the filter on kafka-python's loggers (idempotent)."""
    for name in CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
