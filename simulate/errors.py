"""The simulation's errors (the domain errors shared by every package are `cluster.errors`)."""
from __future__ import annotations

from kreassign.cluster.errors import KreassignError


class SparkUnavailable(KreassignError):
    """Spark cannot start here: no Java, a bad master URL, no Spark Connect client, or nothing
    (or not Spark) at the address given."""
