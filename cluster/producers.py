"""Ending a kafka-python producer whatever state its cluster is in.

kafka-python 3.0.12's `KafkaProducer.close(timeout)` first flushes and raises KafkaTimeoutError
when records are still waiting (the cluster went away), before it would force its sender thread
closed; the producer then stays open and its `__del__` raises the same error again, printed as
"Exception ignored in ... __del__" at exit. `close_producer` waits up to `timeout_s` for the
records and then drops them.
"""
from __future__ import annotations

from typing import Any


def close_producer(producer: Any, timeout_s: float) -> bool:
    """Close `producer`; True when every record was delivered, False when some were dropped."""
    from kafka.errors import KafkaTimeoutError

    try:
        producer.close(timeout=timeout_s)
        return True
    except KafkaTimeoutError:
        # pinned kafka-python internals: stop the sender without waiting, then close for good
        sender = getattr(producer, "_sender", None)
        if sender is not None:
            sender.force_close()
            # on its way out the sender fails the waiting records itself; failing them here too
            # raced it, and its thread died printing a traceback (seen under load in CI)
            sender.join(timeout_s)
        if sender is None or sender.is_alive():
            producer._accumulator.abort_incomplete_batches()
        producer.close(timeout=0)
        return False
