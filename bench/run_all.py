"""Run every bench/bench_*.py script in turn (`make bench`)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main() -> int:
    names = sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
    wanted = sys.argv[1:] or names
    for name in wanted:
        print(f"== {name}", flush=True)
        importlib.import_module(f"bench.{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
