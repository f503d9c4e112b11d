"""The sweep's plots when some scenarios never finish: axes from the finishing ones, stalled
scenarios marked (pure pandas/numpy; one test renders the PNGs)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from kreassign.simulate.plots import PLOT_FILES, PlotScenario, never_finishes, plot_specs, time_unit, write_plots

PLAN = 41e12


def _timeline(scenario_id: int, end_s: float, *, throughput: float, headroom: float,
              points: int = 5) -> pd.DataFrame:
    t = np.linspace(0.0, end_s, points)
    return pd.DataFrame({
        "scenario_id": scenario_id, "t_s": t, "bytes_remaining": np.linspace(PLAN, 0.0, points),
        "replication_in_bps": throughput * 10, "mean_replication_in_bps": throughput / 2,
        "max_replication_in_bps": throughput, "min_headroom": headroom, "p05_headroom": headroom,
        "brokers_below_target": 0,
    })


def _sweep() -> pd.DataFrame:
    stalled = _timeline(2, 26_000 * 3600.0, throughput=900e6, headroom=-0.5)
    stalled["bytes_remaining"] = PLAN  # capped at the plan by the scenario run
    return pd.concat([_timeline(0, 600.0, throughput=100e6, headroom=0.4),
                      _timeline(1, 1200.0, throughput=50e6, headroom=0.3), stalled])


def test_axes_follow_the_scenarios_that_finish_and_stalled_ones_are_marked() -> None:
    info = {0: PlotScenario("#0 100.0 MB/s"), 1: PlotScenario("#1 50.0 MB/s"),
            2: PlotScenario("#2 unthrottled broker 7 fails", stalled_moves=4)}
    remaining, throughput, headroom = plot_specs(_sweep(), info, headroom_target=0.2)
    assert [s.file for s in (remaining, throughput, headroom)] == list(PLOT_FILES)
    for spec in (remaining, throughput, headroom):
        assert spec.xlabel == "time (minutes)"
        assert spec.xlim == (0.0, 20.0)
        assert [line.label for line in spec.lines if line.label] == [
            "#0 100.0 MB/s", "#1 50.0 MB/s", "#2 unthrottled broker 7 fails: never finishes (stalled moves: 4)"]
    # the axes in the unit the tables give the largest value drawn: a 41 TB plan, 100 MB/s
    assert (remaining.ylabel, throughput.ylabel) == ("TB", "MB/s")
    assert remaining.ylim == (0.0, 41 + 0.05 * 41)
    assert throughput.ylim == (0.0, 100.0 * 1.05)  # the stalled 900 MB/s is drawn, clipped
    assert all(spec.note is None for spec in (remaining, throughput, headroom))  # the legend says it
    assert headroom.ylim == (0.0, 0.4 * 1.05) and headroom.reference == 0.2
    stalled_line = next(line for line in remaining.lines if line.group == 2)
    assert stalled_line.t[-1] == 26_000 * 60.0  # drawn in full, beyond the axis


def test_binary_units_scale_the_axes_by_powers_of_1024() -> None:
    remaining, throughput, _ = plot_specs(_sweep(), {}, headroom_target=0.2, units="binary")
    assert (remaining.ylabel, throughput.ylabel) == ("TiB", "MiB/s")
    assert remaining.lines[0].values[0] == PLAN / 1024**4
    assert throughput.lines[0].values[0] == 100e6 / 1024**2


def test_without_a_legend_a_note_names_the_scenarios_that_never_finish() -> None:
    frames = [_timeline(i, 600.0, throughput=10e6, headroom=0.4) for i in range(13)]
    info = {i: PlotScenario(f"#{i}", stalled_moves=1 if i in (3, 11) else 0) for i in range(13)}
    for spec in plot_specs(pd.concat(frames), info, headroom_target=0.2):
        assert not spec.legend and spec.note == "never finish: #3, #11"
        assert [line.finishes for line in spec.lines if line.style == "-"] == [i not in (3, 11) for i in range(13)]


def test_the_spec_as_json_is_what_is_drawn() -> None:
    info = {2: PlotScenario("#2 unthrottled", stalled_moves=4)}
    remaining = plot_specs(_sweep(), info, headroom_target=0.2)[0].to_dict()
    assert (remaining["ylabel"], remaining["xlabel"], remaining["xlim"]) == ("TB", "time (minutes)", [0.0, 20.0])
    stalled = [line for line in remaining["lines"] if line["scenario_id"] == 2]
    assert stalled == [{"scenario_id": 2, "column": "bytes_remaining", "finishes": False, "style": "-",
                        "label": "#2 unthrottled: never finishes (stalled moves: 4)",
                        "t": [0.0, 390000.0, 780000.0, 1.17e6, 1.56e6], "y": [41.0] * 5}]


def test_when_nothing_finishes_the_axes_follow_the_stalled_scenarios() -> None:
    info = {2: PlotScenario("#2", stalled_moves=1)}
    stalled = _timeline(2, 5 * 3600.0, throughput=20e6, headroom=-0.5)
    remaining, throughput, headroom = plot_specs(stalled, info, headroom_target=0.2)
    assert remaining.xlabel == "time (hours)" and remaining.xlim == (0.0, 5.0)
    assert throughput.ylim == (0.0, 20.0 * 1.05)
    assert headroom.ylim == (-0.5, 0.2 + 0.05 * 0.7)


def test_never_finishes_and_time_units() -> None:
    assert never_finishes(1234) == "never finishes (stalled moves: 1,234)"
    assert [time_unit(s) for s in (0.0, 179.0, 180.0, 3 * 3600.0)] == [
        ("seconds", 1.0), ("seconds", 1.0), ("minutes", 60.0), ("hours", 3600.0)]


def test_write_plots_renders_every_plot_as_png(tmp_path: Path) -> None:
    specs = plot_specs(_sweep(), {2: PlotScenario("#2", stalled_moves=4)}, headroom_target=0.2)
    written = write_plots(specs, tmp_path / "out")
    assert [p.name for p in written] == list(PLOT_FILES)
    for path, png in written.items():
        assert path.read_bytes() == png and png.startswith(b"\x89PNG\r\n\x1a\n")
