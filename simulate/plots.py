"""PNG plots of a sweep, drawn from the small per-scenario cluster timeline (CLUSTER_TIMELINE rows
collected to the driver: scenarios x samples, never per broker).

Bytes left and throughput come from the same per-broker catch-up rates (`scenario_run`), so
the first goes down where the second shows copying. Axes use the report's unit system
(`--units`) and the unit the tables would give their largest value (a 41 TB plan: an axis in
TB). A scenario that never finishes has no end to draw to, so the time axis is scaled to the
scenarios that finish; the others are drawn over that range, clipped, and marked in the legend
(or, with too many scenarios for a legend, in a note on the plot). Only when no scenario
finishes do the axes follow the stalled ones."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kreassign.cluster.units import DEFAULT_UNITS, Units, byte_unit

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
    scenario_id: int = 0
    column: str = ""
    """the CLUSTER_TIMELINE column drawn"""
    finishes: bool = True


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
    note: str | None = None
    """text in a corner of the plot: which scenarios never finish, when there is no legend"""

    def to_dict(self) -> dict[str, Any]:
        """What is drawn, JSON-ready (the report embeds it beside the PNG): axis texts and
        limits, and each line's scenario, column, legend label and points in the axis units."""
        return {
            "file": self.file, "title": self.title, "xlabel": self.xlabel, "ylabel": self.ylabel,
            "xlim": list(self.xlim), "ylim": list(self.ylim), "reference": self.reference,
            "legend": self.legend, "note": self.note,
            "lines": [{"scenario_id": line.scenario_id, "column": line.column, "label": line.label,
                       "finishes": line.finishes, "style": line.style,
                       "t": [_number(v) for v in line.t], "y": [_number(v) for v in line.values]}
                      for line in self.lines],
        }


def _number(value: float) -> float | None:
    """Six significant digits (what a plot can show), None for what JSON cannot hold."""
    return float(f"{value:.6g}") if np.isfinite(value) else None


def time_unit(span_s: float) -> tuple[str, float]:
    """The unit that keeps a time axis of `span_s` seconds readable, and its length in seconds."""
    if span_s >= 3 * 3600:
        return "hours", 3600.0
    if span_s >= 180:
        return "minutes", 60.0
    return "seconds", 1.0


_SERIES = (
    ("bytes_remaining.png", "Bytes of the plan not yet copied", "bytes", (("bytes_remaining", "-"),)),
    ("broker_throughput.png", "Catch-up throughput per broker (busiest solid, mean dashed)", "rate",
     (("max_replication_in_bps", "-"), ("mean_replication_in_bps", "--"))),
    ("client_headroom.png", "Network headroom left for clients (worst broker)", "share",
     (("min_headroom", "-"),)),
)


def _axis_unit(kind: str, largest: float, units: Units) -> tuple[str, float]:
    """The y axis's label and the size of its unit: the one the tables would use for `largest`."""
    if kind == "share":
        return "share of capacity", 1.0
    name, size = byte_unit(largest, units)
    return (name if kind == "bytes" else f"{name}/s"), size


def plot_specs(cluster: pd.DataFrame, scenarios: Mapping[int, PlotScenario],
               headroom_target: float, units: Units = DEFAULT_UNITS) -> tuple[PlotSpec, ...]:
    """The three plots of a sweep, in PLOT_FILES order.

    Args:
        cluster: CLUSTER_TIMELINE rows of every scenario.
        scenarios: legend label and stalled moves per scenario id (unknown ids: finishing,
            labelled by id).
        headroom_target: drawn as a reference line on the headroom plot.
        units: the unit system of the byte and rate axes.
    """
    ordered = cluster.sort_values(["scenario_id", "t_s"])
    groups = [(int(sid), frame) for sid, frame in ordered.groupby("scenario_id", sort=True)]
    info = {sid: scenarios.get(sid, PlotScenario(str(sid))) for sid, _ in groups}
    scaling = [(sid, frame) for sid, frame in groups if info[sid].finishes] or groups
    span = max((float(frame["t_s"].max()) for _, frame in scaling), default=0.0)
    unit, scale = time_unit(span)
    xlim = (0.0, span / scale if span > 0 else 1.0)
    stalled = [sid for sid, _ in groups if not info[sid].finishes]
    legend = len(groups) <= _LEGEND_LIMIT
    note = None if legend or not stalled else "never finish: " + ", ".join(f"#{sid}" for sid in stalled)
    specs = []
    for file, title, kind, series in _SERIES:
        largest = max((float(np.nanmax(frame[column].to_numpy(np.float64), initial=0.0))
                       for _, frame in scaling for column, _ in series), default=0.0)
        ylabel, divisor = _axis_unit(kind, largest, units)
        lines = tuple(
            Line(info[sid].legend if style == "-" else None, frame["t_s"].to_numpy(np.float64) / scale,
                 frame[column].to_numpy(np.float64) / divisor, style, k, scenario_id=sid, column=column,
                 finishes=info[sid].finishes)
            for k, (sid, frame) in enumerate(groups) for column, style in series
        )
        shown = [frame[column].to_numpy(np.float64) / divisor for _, frame in scaling for column, _ in series]
        reference = headroom_target if file == "client_headroom.png" else None
        specs.append(PlotSpec(file=file, title=title, xlabel=f"time ({unit})", ylabel=ylabel,
                              lines=lines, xlim=xlim, ylim=_ylim(shown, reference),
                              reference=reference, legend=legend, note=note))
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
    if spec.note:
        ax.text(0.99, 0.98, spec.note, transform=ax.transAxes, ha="right", va="top", fontsize="small",
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8})
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
