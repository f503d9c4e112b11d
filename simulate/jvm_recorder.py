"""`python -m kreassign.simulate.jvm_recorder`: record the Spark driver's class-data archive
(`jvm_cache`) by running a tiny simulation, through every stage of a real one, on a recording
driver, at low priority. `kreassign simulate` starts it in the background when it found no
archive; its output goes to recording.log in the cache dir."""
from __future__ import annotations

import os
import sys
import tempfile

SPEC = "brokers=6,racks=2,partitions=60,add=2,seed=1"


def main() -> int:
    from kreassign.simulate import jvm_cache
    from kreassign.simulate.pipeline import run_simulation
    from kreassign.simulate.request import SimulationRequest
    from kreassign.simulate.session import SparkOptions
    from kreassign.simulate.synthetic import parse_synthetic

    os.nice(10)
    try:
        with tempfile.TemporaryDirectory(prefix="kreassign-cds-") as out:
            request = SimulationRequest(cluster=parse_synthetic(SPEC), output_dir=out, timeline_points=10,
                                        spark=SparkOptions(master="local[2]", driver_memory="1g", jvm_cache="record"))
            run_simulation(request)
    finally:
        (jvm_cache.cache_dir() / jvm_cache.LOCK).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
