"""`simulate --report FILE`: the sweep as one self-contained HTML page (nothing runs, nothing is
fetched: plots embedded as data URIs), readable offline and easy to attach to a change ticket.

Beside each plot the page carries what it draws as JSON (`<script type="application/json"
id="plot-data">`, inert): the axes' units and every line's scenario, legend and points, so a
reader or a test can check the plots against the tables without reading pixels."""
from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from html import escape

from kreassign.cluster.units import byte_unit, format_bytes, format_duration
from kreassign.simulate.plots import PlotSpec
from kreassign.simulate.request import ScenarioOutcome, SimulationResult

SECTIONS = ("plan", "scenarios", "critical-brokers", "timelines", "client-impact")

_STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1000px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; } td.text { text-align: left; }
tr.never td { background: #fdecea; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
"""


def render_report(result: SimulationResult, plots: Mapping[str, bytes], specs: Sequence[PlotSpec] = (), *,
                  title: str = "kreassign simulate") -> str:
    """The report's HTML.

    Args:
        result: the sweep's summary (its `units` set every size and rate on the page).
        plots: PNG bytes by file name (PLOT_FILES order is kept), embedded as data URIs.
        specs: what those plots draw, embedded as JSON and named in their captions.
        title: the page title.
    """
    outcomes = result.outcomes
    first = outcomes[0] if outcomes else None
    drawn = {spec.file: spec for spec in specs}
    system = "binary (KiB, MiB, GiB: powers of 1024)" if result.units == "binary" else \
        "decimal (kB, MB, GB: powers of 1000, as Kafka's rate configs count)"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p id="units" data-units="{escape(result.units)}">Sizes and rates in {escape(system)} units.</p>',
        '<section id="plan"><h2>Plan</h2>',
        _table(["brokers", "partitions", "moves", "bytes to copy", "scenarios", "headroom target"],
               [[f"{result.brokers:,}", f"{result.partitions:,}", f"{first.moves:,}" if first else "0",
                 format_bytes(first.bytes if first else 0, result.units), str(len(outcomes)),
                 f"{result.headroom_target:.0%}"]]),
        "</section>",
        '<section id="scenarios"><h2>Scenarios: makespan and lower bound</h2>',
        _table(["#", "scenario", "makespan", "lower bound", "bottleneck broker"],
               [[str(o.scenario_id), o.name, o.makespan_text, format_duration(o.lower_bound_s),
                 "-" if o.bottleneck_broker is None else str(o.bottleneck_broker)] for o in outcomes],
               text_columns={1}, never=[o.stalled_moves > 0 for o in outcomes]),
        "</section>",
        '<section id="critical-brokers"><h2>Critical brokers</h2>',
        _critical(outcomes),
        "</section>",
        '<section id="timelines"><h2>Timelines</h2>',
        *[_figure(name, png, drawn.get(name)) for name, png in plots.items()],
        "" if plots else "<p>No plots.</p>",
        _plot_data(result, specs),
        "</section>",
        '<section id="client-impact"><h2>Client impact</h2>',
        _table(["#", "max client throttle", f"minutes below {result.headroom_target:.0%} headroom",
                "brokers at risk", "brokers saturated", "max produce remote time", "timed-out requests"],
               [[str(o.scenario_id), f"{o.max_client_throttle_ms:,.0f} ms", f"{o.minutes_below_headroom:,.1f}",
                 str(o.brokers_at_risk), str(o.brokers_saturated), f"{o.max_produce_remote_ms:,.0f} ms",
                 f"{o.timed_out_requests:,.0f}"] for o in outcomes]),
        "</section>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _figure(name: str, png: bytes, spec: PlotSpec | None) -> str:
    caption = name if spec is None else f"{spec.title} ({spec.ylabel} against {spec.xlabel})"
    return (f'<figure><img alt="{escape(name)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def _plot_data(result: SimulationResult, specs: Sequence[PlotSpec]) -> str:
    """The plots' data as an inert JSON block (`</` escaped so no text can close it)."""
    if not specs:
        return ""
    first = result.outcomes[0] if result.outcomes else None
    doc = {"units": result.units, "plan_unit": byte_unit(first.bytes if first else 0, result.units)[0],
           "scenarios": {str(o.scenario_id): o.name for o in result.outcomes},
           "plots": [spec.to_dict() for spec in specs]}
    text = json.dumps(doc, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return f'<script type="application/json" id="plot-data">{text}</script>'


def _critical(outcomes: tuple[ScenarioOutcome, ...]) -> str:
    """Each broker that decides some scenario's lower bound, with those scenarios."""
    by_broker: dict[int, list[int]] = {}
    for o in outcomes:
        if o.bottleneck_broker is not None:
            by_broker.setdefault(o.bottleneck_broker, []).append(o.scenario_id)
    if not by_broker:
        return "<p>No single broker bounds any scenario.</p>"
    rows = sorted(by_broker.items(), key=lambda item: (-len(item[1]), item[0]))
    return _table(["broker", "bounds scenarios"],
                  [[str(b), ", ".join(f"#{s}" for s in ids)] for b, ids in rows], text_columns={1})


def _table(header: list[str], rows: list[list[str]], *, text_columns: frozenset[int] | set[int] = frozenset(),
           never: list[bool] | None = None) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = ' class="never"' if never and never[i] else ""
        cells = "".join(f'<td class="text">{escape(c)}</td>' if k in text_columns else f"<td>{escape(c)}</td>"
                        for k, c in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
