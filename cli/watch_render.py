"""Rendering for `watch` and `throttle`: rich renderables for people, one-line summaries for
logs, JSON lines for scripts. Pure functions of library results."""
from __future__ import annotations

import json
import math
from typing import TextIO

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from kreassign.cluster.units import format_bytes, format_duration, format_rate
from kreassign.throttle.suggest import Suggestion
from kreassign.execute.live_throttle import ThrottleClearResult, ThrottleSetResult, ThrottleView
from kreassign.execute.watch import (
    CompleteEvent,
    ProgressEvent,
    StalledEvent,
    ThrottleEvent,
    TimeoutEvent,
    WatchEvent,
    WaveEvent,
)

_MAX_ROWS = 25
_BAR_WIDTH = 24


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return "never" if math.isinf(seconds) else format_duration(seconds)


def _rate(value: float | None) -> str:
    return "-" if value is None else format_rate(max(value, 0.0))


def _pct(fraction: float) -> str:
    return f"{fraction * 100:5.1f}%"


def render_progress(event: ProgressEvent) -> RenderableType:
    """Per-move bars and an overall bar, with throughput and both ETAs."""
    view = event.view
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    for name, justify in (("move", "left"), ("progress", "left"), ("", "right"), ("copied", "right"),
                          ("rate", "right"), ("writes", "right"), ("eta", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    active = [m for m in view.moves if not m.done]
    for m in active[:_MAX_ROWS]:
        status = "stalled" if m.stalled else _eta(m.eta_s)
        table.add_row(str(m.key), ProgressBar(total=1.0, completed=m.fraction, width=_BAR_WIDTH), _pct(m.fraction),
                      f"{format_bytes(m.copied)}/{format_bytes(m.total)}", _rate(m.copy_bps), _rate(m.write_bps),
                      status)
    done = len(view.moves) - len(active)
    parts: list[RenderableType] = [table] if active else []
    if len(active) > _MAX_ROWS:
        parts.append(Text(f"... and {len(active) - _MAX_ROWS} more moving"))
    overall = Table.grid(padding=(0, 1))
    overall.add_row(Text("overall", style="bold"), ProgressBar(total=1.0, completed=view.fraction, width=_BAR_WIDTH),
                    Text(_pct(view.fraction)), Text(f"{format_bytes(view.copied)}/{format_bytes(view.total)}"))
    parts.append(overall)
    parts.append(Text(summary_line(event)))
    return Group(*parts)


def summary_line(event: ProgressEvent) -> str:
    """One line for logs and non-terminal output."""
    view = event.view
    model = "-" if event.model is None else _eta(event.model.seconds)
    down = (f"; broker{'s' if len(event.down) > 1 else ''} {','.join(map(str, event.down))} not answering"
            if event.down else "")
    return (f"[{format_duration(event.at)}] {_pct(view.fraction).strip()} {format_bytes(view.copied)}/"
            f"{format_bytes(view.total)}, {len(view.active)} moving, {len(view.moves) - len(view.active)} done, "
            f"throughput {_rate(view.throughput_bps)}, ETA observed {_eta(view.eta_s)}, model {model}{down}")


def event_lines(event: WatchEvent) -> list[str]:
    """Text lines for events other than progress (which has its own display)."""
    if isinstance(event, StalledEvent):
        return [f"STALLED: {event.stall.message()}"]
    if isinstance(event, WaveEvent):
        w = event.wave
        line = (f"Wave {w.number}: submitted {len(w.partitions)} partition(s) ({format_bytes(w.bytes)}): "
                + ",".join(str(tp) for tp in w.partitions) + f"; {event.pending} partition(s) wait")
        return ([line] + [f"  {tp}: {e.message}" for tp, e in sorted(w.errors.items())]
                + [f"  broker {b} did not answer ({e.message}): its throttle is not set yet; `kreassign resume` "
                   "sets it once the broker is back" for b, e in sorted(w.skipped_brokers.items())])
    if isinstance(event, ThrottleEvent):
        verb = "Would set" if event.dry_run else "Set"
        lines = []
        for b, (lead, fol) in sorted(event.decision.rates.items()):
            old = event.decision.previous.get(b, (None, None))
            lines.append(f"{verb} throttle on broker {b}: leader {_rate_or_none(old[0])} -> {_rate_or_none(lead)}, "
                         f"follower {_rate_or_none(old[1])} -> {_rate_or_none(fol)} ({event.decision.reason})")
        return lines
    if isinstance(event, CompleteEvent):
        return complete_lines(event)
    if isinstance(event, TimeoutEvent):
        return [f"Timed out after {format_duration(event.at)} with {len(event.view.active)} move(s) still running "
                f"({_pct(event.view.fraction).strip()} copied); the throttles stay in place."]
    return []


def _rate_or_none(value: int | None) -> str:
    return "unthrottled" if value is None else format_rate(value)


def complete_lines(event: CompleteEvent) -> list[str]:
    lines = [f"All moves finished after {format_duration(event.at)} ({format_bytes(event.view.copied)} copied)."]
    for p in event.mismatched:
        lines.append(f"Partition {p.tp} is at {','.join(map(str, p.current))} rather than "
                     f"{','.join(map(str, p.target))}.")
    if event.kept_reason:
        lines.append(f"Throttles left in place: {event.kept_reason}.")
    elif event.clear is not None:
        lines.extend(clear_lines(event.clear))
    return lines


def clear_lines(result: ThrottleClearResult) -> list[str]:
    verb = "Would clear" if result.dry_run else "Cleared"
    lines = []
    for clear in result.clears:
        if clear.brokers:
            lines.append(f"{verb} broker-level throttles on broker(s) {','.join(map(str, clear.brokers))}")
        if clear.topics:
            lines.append(f"{verb} topic-level throttles on topic(s) {','.join(clear.topics)}")
        for b, keys in sorted(clear.restored_brokers.items()):
            lines.append(f"  restored on broker {b}: " + ", ".join(f"{k}={v}" for k, v in sorted(keys.items())))
        for t, keys in sorted(clear.restored_topics.items()):
            lines.append(f"  restored on topic {t}: " + ", ".join(f"{k}={v}" for k, v in sorted(keys.items())))
        for b, e in sorted(clear.skipped.items()):
            lines.append(f"  Warning: broker {b} did not answer ({e.message}); its throttles are still set")
    if not lines:
        lines.append("No throttles to clear.")
    return lines


def write_json_event(stream: TextIO, event: WatchEvent) -> None:
    """One JSON object per line (`--output json`)."""
    stream.write(json.dumps(event.to_dict(), sort_keys=False) + "\n")
    stream.flush()


# ---- throttle show / set / suggest -----------------------------------------------------------
def render_throttle_view(view: ThrottleView) -> RenderableType:
    brokers = Table(title="Broker throttle rates", title_justify="left")
    for col in ("broker", "leader rate", "follower rate", "log-dir rate", "source", "moving"):
        brokers.add_column(col, justify="left" if col in ("source",) else "right")
    for b in view.brokers:
        sources = ",".join(sorted(set(b.sources.values()))) or "-"
        brokers.add_row(str(b.broker), _rate_or_dash(b.leader_rate), _rate_or_dash(b.follower_rate),
                        _rate_or_dash(b.log_dir_rate), sources, "yes" if b.involved else "")
    parts: list[RenderableType] = [brokers]
    if view.topics:
        topics = Table(title="Throttled replicas", title_justify="left")
        topics.add_column("topic")
        topics.add_column("leader.replication.throttled.replicas", overflow="fold")
        topics.add_column("follower.replication.throttled.replicas", overflow="fold")
        for t in view.topics:
            topics.add_row(t.topic, t.leader_replicas or "-", t.follower_replicas or "-")
        parts.append(topics)
    else:
        parts.append(Text("No topic has throttled-replica lists."))
    parts.append(Text(f"{len(view.in_flight)} reassignment(s) in flight."))
    for b, e in sorted(view.unreadable.items()):
        parts.append(Text(f"Warning: broker {b} did not answer ({e.message})", style="yellow"))
    return Group(*parts)


def _rate_or_dash(value: int | None) -> str:
    return "-" if value is None else f"{format_rate(value)} ({value})"


def set_lines(result: ThrottleSetResult) -> list[str]:
    verb = "Would set" if result.dry_run else "Set"
    lines = []
    for b, ops in sorted(result.change.broker_ops.items()):
        old = result.change.previous.brokers.get(b, {})
        lines.append(f"{verb} on broker {b}: " + ", ".join(
            f"{k}={v} (was {old.get(k) or 'unset'})" for k, v in sorted(ops.items())))
    for t, ops in sorted(result.change.topic_ops.items()):
        lines.append(f"{verb} on topic {t}: " + ", ".join(f"{k}={v or chr(34) * 2}" for k, v in sorted(ops.items())))
    for b, e in sorted(result.skipped.items()):
        lines.append(f"Warning: broker {b} did not answer ({e.message}); its throttle was not changed")
    if result.journal_path is not None:
        lines.append(f"Journaled in {result.journal_path}; `kreassign throttle clear` restores the earlier values.")
    return lines


def render_suggestion(s: Suggestion) -> RenderableType:
    table = Table(title=f"Suggested throttles (impact at most {s.max_impact:.0%} of each broker's network)",
                  title_justify="left")
    for col in ("broker", "capacity", "client in", "client out", "sends", "receives", "leader rate",
                "follower rate"):
        table.add_column(col, justify="right", no_wrap=True)
    for b in s.brokers:
        capacity = (format_rate(b.capacity_in) if b.capacity_in == b.capacity_out
                    else f"{format_rate(b.capacity_in)} in, {format_rate(b.capacity_out)} out")
        table.add_row(str(b.broker), capacity, format_rate(b.client_in), format_rate(b.client_out),
                      format_bytes(b.sends), format_bytes(b.receives),
                      format_rate(b.leader_rate) if b.sends else "-",
                      format_rate(b.follower_rate) if b.receives else "-")
    lines = [f"One rate for every broker: --leader-rate {s.leader_rate} --follower-rate {s.follower_rate} "
             f"({format_rate(s.leader_rate)} / {format_rate(s.follower_rate)}): finishes in {_eta(s.eta_uniform_s)}.",
             f"Per-broker rates above: finish in {_eta(s.eta_s)}."]
    if s.deadline_s is not None:
        verdict = "reachable" if s.reachable else "NOT reachable"
        lines.append(f"Deadline {format_duration(s.deadline_s)}: {verdict}.")
    if s.critical:
        lines.append("Bound by: " + ", ".join(f"{c.limit.label}" + (f" of broker {c.broker}" if c.broker is not None else "")
                                              for c in s.critical[:3]) + ".")
    lines.extend(f"To reach it: {r.text}." for r in s.remedies)
    lines.extend(f"Warning: {w}." for w in s.warnings)
    return Group(table, *(Text(line) for line in lines))
