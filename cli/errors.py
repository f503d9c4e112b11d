"""The CLI's own errors (the domain errors are `cluster.errors` and each package's `errors`)."""
from __future__ import annotations


class UsageError(Exception):
    """A command-line error that Kafka reports with printUsageAndExit."""
