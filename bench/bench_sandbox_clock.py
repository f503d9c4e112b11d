"""The emulator keeps its own clock or says so (issue 27 item 7): a sandbox asked for more
speed than its engine can keep on this machine (2,000 throttled moves at --speed 600) holds its
clock to the work done and slows down; records the speed asked, run at and kept, the sandbox
seconds given up, and whether sandbox time stayed with the engine (clock - engine), every 5 s
of wall time for 30 s, with the load average.

    python -m bench.bench_sandbox_clock [SPEED]
"""
from __future__ import annotations

import os
import sys
import time

from bench.bench_throttle_fidelity import move_everything
from bench.common import record


def main(argv: list[str] | None = None) -> None:
    from kreassign.sandbox.clock import ScaledClock
    from kreassign.sandbox.cluster import SandboxCluster
    from kreassign.sandbox.topics import TopicSpec

    args = sys.argv[1:] if argv is None else argv
    speed = float(args[0]) if args and args[0].replace(".", "").isdigit() else 600.0
    load = os.getloadavg()
    specs = [TopicSpec(f"t{i}", 200, 2, 50_000_000_000, 1000.0) for i in range(10)]
    sb = SandboxCluster(6, 0, specs, clock=ScaledClock(speed), seed=1)
    with sb.locked() as engine:
        move_everything(engine, 20_000_000, keep=1)
    sb.start()
    start = time.monotonic()
    samples = []
    try:
        for _ in range(6):
            time.sleep(5)
            status = sb.clock_status() or {}
            samples.append({"wall_s": round(time.monotonic() - start, 1), "sandbox_s": round(sb.now, 2),
                            "clock_ahead_s": round(sb.clock.now() - sb.now, 2), **status})
    finally:
        sb.stop()
    record("bench_sandbox_clock", moves=2000, throttle_bps=20_000_000, asked_speed=speed, samples=samples,
           loadavg_before=[round(x, 2) for x in load], loadavg_after=[round(x, 2) for x in os.getloadavg()])


if __name__ == "__main__":
    main()
