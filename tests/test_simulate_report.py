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


def _dump_dom(report: Path, profile: Path) -> str:
    assert CHROMIUM is not None
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}"]
    return subprocess.run([*flags, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120,
                          check=True).stdout


def _stalling_plan(tmp_path: Path) -> tuple[Path, Path]:
    """Brokers 1-4 (100 MB/s NICs); every partition gets a replica on broker 4. `clicks-0`
    (20 GB) takes 20 MB/s of writes: under a 10 MB/s throttle it never catches up (nor do the
    moves its leader sends: its in-sync follower fills that leader's throttle)."""
    from kreassign.cluster.kafka_json import format_reassignment
    from kreassign.cluster.model import Broker, ClusterState, PartitionInfo, TopicPartition
    from kreassign.cluster.snapshot import write_snapshot

    brokers = [Broker(i, rack=f"r{i % 2}", network_in_bps=100e6, network_out_bps=100e6) for i in range(1, 5)]
    parts = [PartitionInfo("orders", p, replicas=(p % 3 + 1, (p + 1) % 3 + 1), size_bytes=2_000_000_000,
                           produce_bps=100_000.0, consume_bps=100_000.0) for p in range(4)]
    parts.append(PartitionInfo("clicks", 0, replicas=(1, 2), size_bytes=20_000_000_000, produce_bps=20e6,
                               consume_bps=20e6))
    state = ClusterState.from_partitions(brokers, parts)
    snapshot, plan = tmp_path / "cluster.json", tmp_path / "plan.json"
    write_snapshot(state, snapshot)
    plan.write_text(format_reassignment({TopicPartition(p.topic, p.partition): (p.replicas[0], 4) for p in parts}))
    return snapshot, plan


@pytest.mark.spark
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install chromium)")
def test_chromium_shows_one_unit_one_name_and_one_timeline_for_a_sweep_that_stalls(
        spark: object, tmp_path: Path, kreassign: object) -> None:
    """A real sweep (binary units) with a scenario that never finishes, read back from the page
    Chromium rendered: its tables, and the data of its plots embedded beside them."""
    import json

    import pandas as pd

    snapshot, plan = _stalling_plan(tmp_path)
    report, out = tmp_path / "report.html", tmp_path / "sim"
    run = kreassign.run("simulate", "--snapshot", str(snapshot), "--reassignment-json-file", str(plan),  # type: ignore[attr-defined]
                        "--throttle", "10MB/s,50MB/s", "--timeline-points", "30", "--units", "binary",
                        "--out", str(out), "--report", str(report), "--output", "json")
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    dom = _dump_dom(report, tmp_path / "profile")
    data = json.loads(re.search(r'<script type="application/json" id="plot-data">(.*?)</script>', dom, re.S).group(1))
    remaining, throughput, headroom = data["plots"]

    # one unit: the plan's size, both axes, every rate in a name and the JSON all binary
    assert 'data-units="binary"' in dom and data["units"] == doc["units"] == "binary"
    plan_size = _cells(dom, "plan")[0][3]
    assert plan_size == "26.1 GiB" and data["plan_unit"] == remaining["ylabel"] == "GiB"
    assert throughput["ylabel"] == "MiB/s" and headroom["ylabel"] == "share of capacity"
    assert not re.search(r"\d (kB|MB|GB|TB)\b", re.sub(r"<script.*?</script>", "", dom, flags=re.S))

    # one name: the table, the legends, the JSON and the Parquet summary
    names = {int(row[0]): row[1] for row in _cells(dom, "scenarios")}
    assert names == {0: "9.5 MiB/s", 1: "47.7 MiB/s"}
    assert {int(k): v for k, v in data["scenarios"].items()} == names
    assert {r["scenario_id"]: r["name"] for r in doc["scenarios"]} == names
    summary = pd.read_parquet(out / "summary.parquet")
    assert dict(zip(summary["scenario_id"], summary["name"])) == names
    stalled = doc["scenarios"][0]["stalled_moves"]
    assert stalled >= 1 and doc["scenarios"][0]["makespan_s"] is None and doc["scenarios"][1]["stalled_moves"] == 0
    never = f"never finishes (stalled moves: {stalled})"
    assert _cells(dom, "scenarios")[0][2] == never and _cells(dom, "scenarios")[1][2] != never
    for plot in data["plots"]:
        assert [line["label"] for line in plot["lines"] if line["label"]] == [f"#0 {names[0]}: {never}",
                                                                              f"#1 {names[1]}"]

    # one timeline: the stalled scenario's bytes go down wherever its brokers copy (the rate of
    # sample k is its average up to sample k+1), then stay flat at what is left once nothing
    # copies: never at the plan's full size, never at zero
    def line(plot: dict[str, object], column: str) -> list[float]:
        return next(x["y"] for x in plot["lines"] if x["scenario_id"] == 0 and x["column"] == column)  # type: ignore[attr-defined, index]

    left, copying = line(remaining, "bytes_remaining"), line(throughput, "mean_replication_in_bps")
    assert left[0] == 26.077 and 0 < left[-1] < left[0]  # 28 GB in GiB, 6 digits
    steps = list(zip(copying, left, left[1:]))
    assert all(after < before for rate, before, after in steps if rate > 0)
    assert all(after == before for rate, before, after in steps if rate == 0)
    assert copying[0] > 0 and copying[-1] == 0
    finishing = next(x["y"] for x in remaining["lines"] if x["scenario_id"] == 1)
    assert finishing[-1] == 0.0
