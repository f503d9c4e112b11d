"""PNG plots of a sweep, drawn from the small per-scenario cluster timeline (CLUSTER_TIMELINE rows
collected to the driver: scenarios x samples, never per broker).

A scenario that never finishes has no end to draw to, so the axes are scaled to the scenarios
that finish; the others are drawn over that range, clipped, and marked in the legend. Only when
no scenario finishes do the axes follow the stalled ones."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

_LEGEND_LIMIT = 12
PLOT_FILES = ("bytes_remaining.png", "broker_throughput.png", "client_headroom.png")


@dataclass(frozen=True)
class PlotScenario:
    """What a plot needs to know about a scenario besides its timeline."""

    label: str
    stalled_moves: int = 0

    @property
    def finishes(self) -> bool:
        return self.stalled_moves == 0

    @property
    def legend(self) -> str:
        return self.label if self.finishes else f"{self.label}: {never_finishes(self.stalled_moves)}"


def never_finishes(stalled_moves: int) -> str:
    """How a scenario that never completes is marked, in plots, the table and the report."""
    return f"never finishes (stalled moves: {stalled_moves:,})"


@dataclass(frozen=True)
class Line:
    label: str | None
    t: np.ndarray
    values: np.ndarray
    style: str
    group: int
    """lines of one group share a colour"""


@dataclass(frozen=True)
class PlotSpec:
    """One plot, ready to draw: lines in the axis units and the axis limits."""

    file: str
    title: str
    xlabel: str
    ylabel: str
    lines: tuple[Line, ...]
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    reference: float | None = None
    """a horizontal reference line (the headroom target)"""
    legend: bool = True


def time_unit(span_s: float) -> tuple[str, float]:
    """The unit that keeps a time axis of `span_s` seconds readable, and its length in seconds."""
    if span_s >= 3 * 3600:
        return "hours", 3600.0
    if span_s >= 180:
        return "minutes", 60.0
    return "seconds", 1.0


_SERIES = (
    ("bytes_remaining.png", "Bytes remaining", "GB", (("bytes_remaining", 1e9, "-"),)),
    ("broker_throughput.png", "Catch-up throughput per broker (busiest solid, mean dashed)", "MB/s",
     (("max_replication_in_bps", 1e6, "-"), ("mean_replication_in_bps", 1e6, "--"))),
    ("client_headroom.png", "Network headroom left for clients (worst broker)", "share of capacity",
     (("min_headroom", 1.0, "-"),)),
)


def plot_specs(cluster: pd.DataFrame, scenarios: Mapping[int, PlotScenario],
               headroom_target: float) -> tuple[PlotSpec, ...]:
    """The three plots of a sweep, in PLOT_FILES order.

    Args:
        cluster: CLUSTER_TIMELINE rows of every scenario.
        scenarios: legend label and stalled moves per scenario id (unknown ids: finishing,
            labelled by id).
        headroom_target: drawn as a reference line on the headroom plot.
    """
    ordered = cluster.sort_values(["scenario_id", "t_s"])
    groups = [(int(sid), frame) for sid, frame in ordered.groupby("scenario_id", sort=True)]
    info = {sid: scenarios.get(sid, PlotScenario(str(sid))) for sid, _ in groups}
    scaling = [(sid, frame) for sid, frame in groups if info[sid].finishes] or groups
    span = max((float(frame["t_s"].max()) for _, frame in scaling), default=0.0)
    unit, scale = time_unit(span)
    xlim = (0.0, span / scale if span > 0 else 1.0)
    specs = []
    for file, title, ylabel, series in _SERIES:
        lines = tuple(
            Line(info[sid].legend if style == "-" else None, frame["t_s"].to_numpy(np.float64) / scale,
                 frame[column].to_numpy(np.float64) / divisor, style, k)
            for k, (sid, frame) in enumerate(groups) for column, divisor, style in series
        )
        shown = [frame[column].to_numpy(np.float64) / divisor
                 for _, frame in scaling for column, divisor, _ in series]
        reference = headroom_target if file == "client_headroom.png" else None
        specs.append(PlotSpec(file=file, title=title, xlabel=f"time ({unit})", ylabel=ylabel,
                              lines=lines, xlim=xlim, ylim=_ylim(shown, reference),
                              reference=reference, legend=len(groups) <= _LEGEND_LIMIT))
    return tuple(specs)


def _ylim(shown: Sequence[np.ndarray], reference: float | None) -> tuple[float, float]:
    """From 0 (or the lowest value, if negative) to the highest, with 5% air above."""
    values = np.concatenate([*shown, np.zeros(0) if reference is None else np.array([reference])])
    values = values[np.isfinite(values)]
    low = min(0.0, float(values.min(initial=0.0)))
    high = float(values.max(initial=0.0))
    if high <= low:
        high = low + 1.0
    return low, high + 0.05 * (high - low)


def agg_pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def render_png(spec: PlotSpec) -> bytes:
    """One plot as PNG bytes."""
    import io

    plt = agg_pyplot()
    fig, ax = plt.subplots(figsize=(9, 5), dpi=100)
    colours: dict[int, str] = {}
    for line in spec.lines:
        (drawn,) = ax.plot(line.t, line.values, line.style, color=colours.get(line.group), linewidth=1.2,
                           label=line.label)
        colours.setdefault(line.group, drawn.get_color())
    if spec.reference is not None:
        ax.axhline(spec.reference, color="black", linestyle=":", linewidth=1,
                   label=f"target {spec.reference:.0%}")
    ax.set_xlim(*spec.xlim)
    ax.set_ylim(*spec.ylim)
    ax.set_title(spec.title)
    ax.set_xlabel(spec.xlabel)
    ax.set_ylabel(spec.ylabel)
    ax.grid(True, alpha=0.3)
    if spec.legend:
        ax.legend(fontsize="small", loc="best")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def write_plots(specs: Sequence[PlotSpec], out_dir: Path) -> dict[Path, bytes]:
    """Render each plot into `out_dir` (created if missing); the paths and PNG bytes written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for spec in specs:
        png = render_png(spec)
        path = out_dir / spec.file
        path.write_bytes(png)
        written[path] = png
    return written
