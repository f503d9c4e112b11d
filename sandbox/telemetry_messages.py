"""kafka-python message classes for KIP-714's GetTelemetrySubscriptions (71) and PushTelemetry (72),
which kafka-python 3.0.12 does not ship: the same ApiMessage machinery, over message schemas kept
beside this module (the JSON files of this package)."""
from __future__ import annotations

import sys
import warnings

from kafka.protocol.api_message import ApiMessage

_HERE = sys.modules[__name__]

with warnings.catch_warnings():
    # kafka-python reads the schema with the deprecated importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)

    class GetTelemetrySubscriptionsRequest(ApiMessage, load_json=_HERE): pass  # noqa: E701
    class GetTelemetrySubscriptionsResponse(ApiMessage, load_json=_HERE): pass  # noqa: E701
    class PushTelemetryRequest(ApiMessage, load_json=_HERE): pass  # noqa: E701
    class PushTelemetryResponse(ApiMessage, load_json=_HERE): pass  # noqa: E701
