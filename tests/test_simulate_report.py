"""`simulate --report`: one self-contained HTML file, checked as text and in headless Chromium."""
from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from simulate_helpers import outcome

from kreassign.simulate.report import SECTIONS, render_report
from kreassign.simulate.request import SimulationResult


RESULT = SimulationResult(
    outcomes=(outcome(), outcome(scenario_id=1, name="unthrottled, broker 7 fails @ 30m00s", throttle_bps=None,
                                   failed_broker=7, failed_at_s=1800.0,
                                   makespan_s=float("inf"), stalled_moves=3, bottleneck_broker=4),
              outcome(scenario_id=2, bottleneck_broker=9)),
    scenarios=(), output_dir="out", files=(), brokers=40, partitions=9000, headroom_target=0.2,
)


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid PNG, so a screenshot can show whether the embedded image was drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    buffer = io.BytesIO()
    plt.imsave(buffer, np.full((height, width, 3), rgb, dtype=np.uint8), format="png")
    return buffer.getvalue()


def _cells(html: str, section: str) -> list[list[str]]:
    body = html.split(f'<section id="{section}">', 1)[1].split("</section>", 1)[0]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body)
            if "<td" in row]


def test_the_report_has_every_section_with_exact_rows() -> None:
    png = _png(4, 3, (255, 0, 0))
    html = render_report(RESULT, {"bytes_remaining.png": png})
    assert [m for m in re.findall(r'<section id="([^"]+)">', html)] == list(SECTIONS)
    assert _cells(html, "plan") == [["40", "9,000", "1,200", "3.3 TB", "3", "20%"]]
    assert _cells(html, "scenarios") == [
        ["0", "50.0 MB/s", "2h01m", "1h56m", "4"],
        ["1", "unthrottled, broker 7 fails @ 30m00s", "never finishes (stalled moves: 3)", "1h56m", "4"],
        ["2", "50.0 MB/s", "2h01m", "1h56m", "9"],
    ]
    assert '<tr class="never">' in html
    assert _cells(html, "critical-brokers") == [["4", "#0, #1"], ["9", "#2"]]
    assert _cells(html, "client-impact")[1] == ["1", "0 ms", "12.5", "3", "0", "10 ms", "0"]
    assert f'src="data:image/png;base64,{base64.b64encode(png).decode()}"' in html
    assert not re.search(r'(src|href)="(?!data:)', html)  # nothing to fetch: readable offline


def test_the_plan_and_the_plot_data_follow_the_units_of_the_result() -> None:
    import json
    from dataclasses import replace

    import pandas as pd

    from kreassign.simulate.plots import PlotScenario, plot_specs

    t = [0.0, 3600.0, 7260.0]
    timeline = pd.DataFrame({"scenario_id": 0, "t_s": t, "bytes_remaining": [3 * 1024**4, 1024**4, 0.0],
                             "replication_in_bps": 1e9, "mean_replication_in_bps": 2e7,
                             "max_replication_in_bps": 5e7, "min_headroom": 0.5, "p05_headroom": 0.5,
                             "brokers_below_target": 0})
    binary = replace(RESULT, units="binary")
    specs = plot_specs(timeline, {0: PlotScenario("#0 47.7 MiB/s")}, 0.2, units="binary")
    html = render_report(binary, {spec.file: _png(2, 2, (0, 0, 0)) for spec in specs}, specs)
    assert _cells(html, "plan")[0][3] == "3.0 TiB"
    assert '<p id="units" data-units="binary">' in html
    data = json.loads(re.search(r'<script type="application/json" id="plot-data">(.*?)</script>', html).group(1))
    assert (data["units"], data["plan_unit"]) == ("binary", "TiB")
    assert [p["ylabel"] for p in data["plots"]] == ["TiB", "MiB/s", "share of capacity"]
    assert data["plots"][0]["lines"][0]["y"] == [3.0, 1.0, 0.0]
    assert "<figcaption>Bytes of the plan not yet copied (TiB against time (minutes))</figcaption>" in html


def test_a_report_without_plots_or_bottlenecks_says_so() -> None:
    html = render_report(SimulationResult(outcomes=(outcome(bottleneck_broker=None),), scenarios=(),
                                          output_dir="out", files=(), brokers=1, partitions=1,
                                          headroom_target=0.2), {})
    assert "<p>No single broker bounds any scenario.</p>" in html and "<p>No plots.</p>" in html


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install chromium)")
def test_chromium_renders_the_sections_and_the_embedded_plot(tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    report = tmp_path / "report.html"
    report.write_text(render_report(RESULT, {"bytes_remaining.png": _png(900, 500, (255, 0, 0))}), encoding="utf-8")
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert re.findall(r'<section id="([^"]+)">', dom) == list(SECTIONS)
    assert "never finishes (stalled moves: 3)" in dom
    shot = tmp_path / "shot.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,3000", report.as_uri()],
                   capture_output=True, timeout=120, check=True)
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    red = np.count_nonzero((pixels[..., 0] == 255) & (pixels[..., 1] == 0) & (pixels[..., 2] == 0))
    assert red == 900 * 500  # the embedded plot was decoded and drawn at its size
