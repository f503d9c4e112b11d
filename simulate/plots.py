"""PNG plots of a sweep, drawn from the small per-scenario cluster timeline (CLUSTER_TIMELINE rows
collected to the driver: scenarios x samples, never per broker)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

_LEGEND_LIMIT = 12
PLOT_FILES = ("bytes_remaining.png", "broker_throughput.png", "client_headroom.png")


def _time_unit(seconds: np.ndarray) -> tuple[str, float]:
    """The unit that keeps the axis readable, and its length in seconds."""
    span = float(seconds.max(initial=0.0))
    if span >= 3 * 3600:
        return "hours", 3600.0
    if span >= 180:
        return "minutes", 60.0
    return "seconds", 1.0


def write_plots(cluster: pd.DataFrame, labels: Mapping[int, str], headroom_target: float,
                out_dir: Path) -> tuple[Path, ...]:
    """Bytes remaining, per-broker catch-up throughput and client headroom over time.

    Args:
        cluster: CLUSTER_TIMELINE rows of every scenario.
        labels: a short legend label per scenario id.
        headroom_target: drawn as a reference line on the headroom plot.
        out_dir: where the PNG files go (created if missing).

    Returns:
        The paths written, in PLOT_FILES order.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    ordered = cluster.sort_values(["scenario_id", "t_s"])
    unit, scale = _time_unit(ordered["t_s"].to_numpy())
    groups = list(ordered.groupby("scenario_id", sort=True))
    show_legend = len(groups) <= _LEGEND_LIMIT
    specs = [
        ("bytes_remaining.png", "Bytes remaining", "GB",
         [("bytes_remaining", 1e9, "-")]),
        ("broker_throughput.png", "Catch-up throughput per broker (busiest solid, mean dashed)",
         "MB/s", [("max_replication_in_bps", 1e6, "-"), ("mean_replication_in_bps", 1e6, "--")]),
        ("client_headroom.png", "Network headroom left for clients (worst broker)", "share of capacity",
         [("min_headroom", 1.0, "-")]),
    ]
    written: list[Path] = []
    for name, title, ylabel, series in specs:
        fig, ax = plt.subplots(figsize=(9, 5), dpi=100)
        for scenario_id, frame in groups:
            t = frame["t_s"].to_numpy() / scale
            color = None
            for column, divisor, style in series:
                values = _series(frame, column) / divisor
                (line,) = ax.plot(t, values, style, color=color, linewidth=1.2,
                                  label=labels.get(int(scenario_id), str(scenario_id)) if style == "-" else None)
                color = line.get_color()
        if name == "client_headroom.png":
            ax.axhline(headroom_target, color="black", linestyle=":", linewidth=1,
                       label=f"target {headroom_target:.0%}")
        ax.set_title(title)
        ax.set_xlabel(f"time ({unit})")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        if show_legend:
            ax.legend(fontsize="small", loc="best")
        path = out_dir / name
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return tuple(written)


def _series(frame: pd.DataFrame, column: str) -> np.ndarray:
    return frame[column].to_numpy(dtype=np.float64)
