"""Rendering for `watch` and `throttle`: rich renderables for people, one-line summaries for
logs, JSON lines for scripts. Pure functions of library results."""
from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from kreassign.cli.kafka_live import describe_unconfirmed, describe_unconfirmed_clear
from kreassign.cluster.units import Units, format_bytes, format_duration, format_rate
from kreassign.cluster.write_sample import rates_line
from kreassign.cluster.client_latency import Impact
from kreassign.predict.suggest import Suggestion
from kreassign.execute.live_throttle import ThrottleClearResult, ThrottleSetResult, ThrottleView
from kreassign.execute.live_eta import StallDiagnosis
from kreassign.execute.progress import MoveKey
from kreassign.execute.attach import RunEndedEvent, RunProgressEvent
from kreassign.execute.watch_hold import Held
from kreassign.execute.watch_events import (
    CompleteEvent,
    ProgressEvent,
    StallClearedEvent,
    StalledEvent,
    ThrottleEvent,
    TimeoutEvent,
    RunRatesEvent,
    WaitingEvent,
    WatchEvent,
    WaveEvent,
)

_MAX_ROWS = 25
_BAR_WIDTH = 24
_LOG_LINES = 6


def _eta(seconds: float | None, pending: bool = False) -> str:
    if seconds is None:
        return "after two polls" if pending else "-"
    return "never" if math.isinf(seconds) else format_duration(seconds)


def _pct(fraction: float) -> str:
    return f"{fraction * 100:5.1f}%"


@dataclass
class WatchScreen:
    """The one screen `watch` shows a person, rebuilt from each event: an overall bar with the
    model's ETA, a row per broker, the moves in progress, client impact, the stalls in force
    (each stall appears once, from the event that started it until the one that cleared it) and
    the last few things that happened. Every size and rate uses one unit system."""

    units: Units = "decimal"
    header: str | None = None
    progress: ProgressEvent | None = None
    stalls: dict[MoveKey, StallDiagnosis] = field(default_factory=dict)
    log: deque[str] = field(default_factory=lambda: deque(maxlen=_LOG_LINES))
    run: RunProgressEvent | None = None
    """attached to a run in flight: its plan's progress"""

    def update(self, event: WatchEvent | RunProgressEvent | RunEndedEvent) -> None:
        if isinstance(event, ProgressEvent):
            self.progress = event
            self.header = time_header(event.time_scale)
            return
        if isinstance(event, RunProgressEvent):
            self.run = event
            self.header = time_header(event.time_scale)
            return
        if isinstance(event, StalledEvent):
            self.stalls[event.stall.key] = event.stall
        elif isinstance(event, StallClearedEvent):
            self.stalls.pop(event.stall.key, None)
        self.log.extend(f"[{format_duration(event.at)}] {line}" for line in event_lines(event, self.units))

    def render(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self.header:
            parts.append(Text(self.header, style="bold"))
        if self.run is not None:
            parts.append(Text(f"Attached to {self.run.owner} (read only; the run restores its throttles itself)",
                              style="bold"))
            row = Table.grid(padding=(0, 1))
            row.add_row(ProgressBar(total=1.0, completed=self.run.fraction, width=_BAR_WIDTH),
                        Text(event_lines(self.run, self.units)[0]))
            parts.append(row)
        event = self.progress
        if event is not None:
            parts.extend(self._progress(event))
        parts.extend(self._client(event))
        if self.stalls:
            parts.append(Text("Stalled now:", style="bold red"))
            parts.extend(Text(f"  {s.message(self.units)}") for _, s in sorted(self.stalls.items()))
        if self.log:
            parts.append(Text("Recent:", style="bold"))
            parts.extend(Text(f"  {line}") for line in self.log)
        return Group(*parts)

    def _client(self, event: ProgressEvent | None) -> list[RenderableType]:
        """Client impact: per broker produce latency, its remote (acks=all) part, client throttle
        time, under-replicated partitions and replication traffic, from the brokers' metrics."""
        out: list[RenderableType] = []
        if event is not None and event.client:
            table = Table(box=None, pad_edge=False, header_style="bold", title="Client impact (broker metrics)",
                          title_justify="left")
            for name in ("broker", "produce p50", "produce p99", "remote p99", "throttled p99", "under-replicated",
                         "replication in", "replication out", "client latency"):
                table.add_column(name, justify="right")
            for m in event.client:
                table.add_row(str(m.broker), _ms(m.produce_p50_ms), _ms(m.produce_p99_ms), _ms(m.remote_p99_ms),
                              _ms(m.throttle_p99_ms), "-" if m.under_replicated is None else f"{m.under_replicated:g}",
                              _rate(m.replication_in_bps, self.units), _rate(m.replication_out_bps, self.units),
                              _ms(m.client_latency_avg_ms))
            out.append(table)
        if event is not None and event.canary:
            rise = {i.broker: i for i in event.canary_impact}
            table = Table(box=None, pad_edge=False, header_style="bold", title="Client impact (canary)",
                          title_justify="left")
            for name in ("broker", "produce p50", "produce p99", "vs baseline", "end-to-end p99", "throttled",
                         "timeouts"):
                table.add_column(name, justify="right")
            for c in event.canary:
                i = rise.get(c.broker)
                table.add_row(str(c.broker), _ms(c.p50_ms), _ms(c.p99_ms), _rise(i, table=True),
                              _ms(c.end_to_end_p99_ms), _ms(c.throttle_max_ms), str(c.timeouts))
            out.append(table)
        note = event.client_note if event is not None else None
        if note or not out:
            out.append(Text(f"Client impact: {note or 'not measured yet'}.", style="dim"))
        return out

    def _progress(self, event: ProgressEvent) -> list[RenderableType]:
        view, u = event.view, self.units
        overall = Table.grid(padding=(0, 1))
        overall.add_row(Text("overall", style="bold"), ProgressBar(total=1.0, completed=view.fraction, width=_BAR_WIDTH),
                        Text(_pct(view.fraction)), Text(f"{format_bytes(view.copied, u)}/{format_bytes(view.total, u)}"),
                        Text(f"{len(view.active)} moving, {len(view.moves) - len(view.active)} done"))
        out: list[RenderableType] = [overall, Text(eta_line(event, u))]
        if event.down:
            many = len(event.down) > 1
            out.append(Text(f"Broker{'s' if many else ''} {','.join(map(str, event.down))} do{'' if many else 'es'} "
                            "not answer: their moves cannot progress.", style="bold red"))
        if event.brokers:
            brokers = Table(box=None, pad_edge=False, header_style="bold")
            for name in ("broker", "sends", "receives", "leader throttle", "follower throttle", "throttle used"):
                brokers.add_column(name, justify="right")
            over = False
            for b in event.brokers:
                share = b.share_used
                over = over or (share is not None and share > 1.0)
                brokers.add_row(str(b.broker), format_rate(b.out_bps, u), format_rate(b.in_bps, u),
                                _throttle(b.leader_rate, u), _throttle(b.follower_rate, u),
                                "-" if share is None else f"{share:.0%}" + ("*" if share > 1.0 else ""))
            out.append(brokers)
            if over:
                out.append(Text(OVER_THROTTLE_NOTE))
        active = [m for m in view.moves if not m.done]
        if active:
            moves = Table(box=None, pad_edge=False, header_style="bold")
            for name, justify in (("move", "left"), ("progress", "left"), ("", "right"), ("copied", "right"),
                                  ("copies", "right"), ("writes", "right"), ("eta (model)", "right")):
                moves.add_column(name, justify=justify)  # type: ignore[arg-type]
            for m in active[:_MAX_ROWS]:
                moves.add_row(str(m.key), ProgressBar(total=1.0, completed=m.fraction, width=_BAR_WIDTH),
                              _pct(m.fraction), f"{format_bytes(m.copied, u)}/{format_bytes(m.total, u)}",
                              _rate(m.copy_bps, u), _rate(m.write_bps, u), _eta(event.move_eta(m.key)))
            out.append(moves)
            if len(active) > _MAX_ROWS:
                out.append(Text(f"... and {len(active) - _MAX_ROWS} more moving"))
        return out


OVER_THROTTLE_NOTE = ("* above the throttle for a few seconds: Kafka's replication quota averages over 11 s and "
                      "lets a fetch through whole while under it (docs/model-constants.md)")


def eta_line(event: ProgressEvent, units: Units = "decimal") -> str:
    """The ETA the model gives now, what it assumed about writes, and the observed one; a figure
    this poll lacked is the last one read, marked held (an ETA counted down since)."""
    f = event.figures
    eta = f["eta"]
    if eta.value is not None and math.isinf(eta.value):
        model = "never (a move cannot finish at these throttles)" + _held(eta)
    elif not event.view.active and not event.view.pending_bytes and eta.value == 0:
        model = "done"
    else:
        model = _eta(eta.value) + _held(eta)
    return (f"ETA {model} (replication model; {rates_phrase(event)}); observed {_eta(f['observed'].value, True)}"
            f"{_held(f['observed'])}; throughput {_rate(f['throughput'].value, units)}{_held(f['throughput'])}")


def rates_phrase(event: ProgressEvent) -> str:
    """What the model assumed about writes: stated once measured, never back to 'not measured'."""
    source = event.source
    if source.state == "sampling":
        return (f"write rates still being sampled ({format_duration(source.sample_s or 0.0)}): "
                "those known so far used, the others taken as 0")
    if source.state == "unknown" or source.origin is None:
        return "write rates not measured yet (taken as 0)"
    origin = source.origin
    if origin.window_s:
        how = f"writes measured over {format_duration(origin.window_s)}"
    elif origin.method == "metrics":
        how = "writes from the brokers' metrics"
    else:
        how = "writes measured from the polls"
    age = source.age_s(event.at)
    return how if not age else f"{how}, {format_duration(age)} ago"


def _held(value: Held) -> str:
    return f" (held: last read at {format_duration(value.read_at)})" if value.held and value.read_at is not None else ""


def _rate(value: float | None, units: Units = "decimal") -> str:
    return "-" if value is None else format_rate(max(value, 0.0), units)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _throttle(value: int | None, units: Units) -> str:
    return "none" if value is None else format_rate(value, units)


def time_header(scale: float) -> str | None:
    """The header that says times are not wall-clock times (None on a cluster that runs in real time)."""
    return None if scale == 1 else f"kreassign watch (sandbox time, x{scale:g})"


def summary_line(event: ProgressEvent, units: Units = "decimal") -> str:
    """One line for logs and non-terminal output."""
    view, f = event.view, event.figures
    down = (f"; broker{'s' if len(event.down) > 1 else ''} {','.join(map(str, event.down))} not answering"
            if event.down else "")
    return (f"[{format_duration(event.at)}] {_pct(view.fraction).strip()} {format_bytes(view.copied, units)}/"
            f"{format_bytes(view.total, units)}, {len(view.active)} moving, {len(view.moves) - len(view.active)} done, "
            f"throughput {_rate(f['throughput'].value, units)}{_held(f['throughput'])}, "
            f"ETA observed {_eta(f['observed'].value)}{_held(f['observed'])}, model {_eta(f['eta'].value)}{_held(f['eta'])}"
            f"{_clients(event)}{down}")


def _clients(event: ProgressEvent) -> str:
    """The worst client impact of the poll, for the one-line form: the canary's p99 against its
    baseline, else the brokers' produce p99."""
    measured = [i for i in event.canary_impact if i.over_everything or i.p99_increase is not None]
    if measured:
        i = max(measured, key=lambda i: (i.over_everything, i.p99_increase or 0.0))
        what = _rise(i) if i.over_everything else f"p99 {_rise(i)}"
        return f", clients: canary {what} on broker {i.broker}"
    known = [m for m in event.client if m.produce_p99_ms is not None]
    if known:
        m = max(known, key=lambda m: m.produce_p99_ms or 0.0)
        return f", clients: produce p99 {_ms(m.produce_p99_ms)} on broker {m.broker}"
    return ""


def event_lines(event: WatchEvent | RunProgressEvent | RunEndedEvent, units: Units = "decimal") -> list[str]:
    """Text lines for events other than progress (which has its own display)."""
    if isinstance(event, StalledEvent):
        return [f"STALLED: {event.stall.message(units)}"]
    if isinstance(event, StallClearedEvent):
        return [f"Stall over: {event.message()}"]
    if isinstance(event, WaveEvent):
        w = event.wave
        line = (f"Wave {w.number}: submitted {len(w.partitions)} partition(s) ({format_bytes(w.bytes, units)}): "
                + ",".join(str(tp) for tp in w.partitions) + f"; {event.pending} partition(s) wait")
        return ([line] + [f"  {tp}: {e.message}" for tp, e in sorted(w.errors.items())]
                + [f"  broker {b} did not answer ({e.message}): its throttle is not set yet; `kreassign resume` "
                   "sets it once the broker is back" for b, e in sorted(w.skipped_brokers.items())]
                + [f"  {line}" for line in describe_unconfirmed(w.unconfirmed_brokers)])
    if isinstance(event, ThrottleEvent):
        verb = "Would set" if event.dry_run else "Set"
        lines = []
        for b, (lead, fol) in sorted(event.decision.rates.items()):
            old = event.decision.previous.get(b, (None, None))
            lines.append(f"{verb} throttle on broker {b}: leader {_rate_or_none(old[0], units)} -> "
                         f"{_rate_or_none(lead, units)}, follower {_rate_or_none(old[1], units)} -> "
                         f"{_rate_or_none(fol, units)} ({event.decision.reason})")
        return lines
    if isinstance(event, CompleteEvent):
        return complete_lines(event, units)
    if isinstance(event, RunRatesEvent):
        rates = ", ".join(f"{side} {_rate_or_none(v, units)}" for side, v in (("leader", event.leader_rate),
                                                                                ("follower", event.follower_rate))
                          if v is not None)
        return [f"Rates changed through this run ({event.by}): {rates}; set now on broker(s) "
                f"{','.join(map(str, event.applied)) or 'none'}, the later waves start with them"]
    if isinstance(event, RunProgressEvent):
        return [f"{_pct(event.fraction).strip()} of the plan ({format_bytes(event.copied_bytes, units)} of "
                f"{format_bytes(event.total_bytes, units)}): {event.done} done, {event.moving} moving, "
                f"{event.waiting} waiting, {event.waves} wave(s); ETA {_eta(event.eta_model_s)} (replication model), "
                f"observed {_eta(event.eta_s, True)} [{event.owner}]"]
    if isinstance(event, RunEndedEvent):
        lines = [f"The run ended ({event.state}): {event.owner}."]
        if event.not_at_target:
            lines.append(f"{len(event.not_at_target)} partition(s) are not at their target: "
                         + ",".join(map(str, event.not_at_target[:20])) + (" ..." if len(event.not_at_target) > 20 else ""))
        if event.next_step:
            lines.append(f"To finish it: {event.next_step}")
        return lines
    if isinstance(event, WaitingEvent):
        return [f"Waiting for {event.what}"]
    if isinstance(event, TimeoutEvent):
        return [f"Timed out after {format_duration(event.at)} with {len(event.view.active)} move(s) still running "
                f"({_pct(event.view.fraction).strip()} copied); the throttles stay in place."]
    return []


def _rate_or_none(value: int | None, units: Units = "decimal") -> str:
    return "unthrottled" if value is None else format_rate(value, units)


def complete_lines(event: CompleteEvent, units: Units = "decimal") -> list[str]:
    lines = [f"All moves finished after {format_duration(event.at)} ({format_bytes(event.view.copied, units)} copied)."]
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
        if clear.cleared_brokers:
            lines.append(f"{verb} broker-level throttles on broker(s) {','.join(map(str, clear.cleared_brokers))}")
        if clear.topics:
            lines.append(f"{verb} topic-level throttles on topic(s) {','.join(clear.topics)}")
        for b, keys in sorted(clear.restored_brokers.items()):
            lines.append(f"  restored on broker {b}: " + ", ".join(f"{k}={v}" for k, v in sorted(keys.items())))
        for t, keys in sorted(clear.restored_topics.items()):
            lines.append(f"  restored on topic {t}: " + ", ".join(f"{k}={v}" for k, v in sorted(keys.items())))
        for b in clear.retried:
            lines.append(f"  broker {b} answered again and was restored")
        for b, e in sorted(clear.skipped.items()):
            lines.append(f"  Warning: broker {b} did not answer ({e.message}); its throttles are still set and "
                         "pending in the journal: run `kreassign resume` once it is back")
        lines += ["  " + line for line in describe_unconfirmed_clear(clear.unconfirmed)]
    if not lines:
        lines.append("No throttles to clear.")
    return lines


def write_json_event(stream: TextIO, event: WatchEvent | RunProgressEvent | RunEndedEvent) -> None:
    """One JSON object per line (`--output json`)."""
    stream.write(json.dumps(event.to_dict(), sort_keys=False) + "\n")
    stream.flush()


# ---- throttle show / set / suggest -----------------------------------------------------------
def render_throttle_view(view: ThrottleView, units: Units = "decimal") -> RenderableType:
    brokers = Table(title="Broker throttle rates", title_justify="left")
    for col in ("broker", "leader rate", "follower rate", "log-dir rate", "source", "moving"):
        brokers.add_column(col, justify="left" if col in ("source",) else "right")
    for b in view.brokers:
        sources = ",".join(sorted(set(b.sources.values()))) or "-"
        brokers.add_row(str(b.broker), _rate_or_dash(b.leader_rate, units), _rate_or_dash(b.follower_rate, units),
                        _rate_or_dash(b.log_dir_rate, units), sources, "yes" if b.involved else "")
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
        parts.append(Text(f"Warning: broker {b} did not answer ({e.message}): its throttles are unknown and not "
                          "shown (an operator's throttle on it included)", style="yellow"))
    return Group(*parts)


def _rate_or_dash(value: int | None, units: Units) -> str:
    return "-" if value is None else f"{format_rate(value, units)} ({value})"


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
    lines += describe_unconfirmed(result.unconfirmed, "copies may run at the old rate for a moment, and "
                                  "`throttle show` may read the old value until it does")
    if result.journal_path is not None:
        lines.append(f"Journaled in {result.journal_path}; `kreassign throttle clear` restores the earlier values.")
    return lines


def render_suggestion(s: Suggestion, units: Units = "decimal") -> RenderableType:
    if not s.brokers:  # not rates of 0, which `throttle set` would refuse anyway
        return Text("Nothing to copy: every partition of the plan has its target replicas in sync, "
                    "so it needs no throttle.")
    measured = s.measured is not None
    title = (f"Suggested throttles (canary produce p99 at most {s.max_impact:.0%} above its baseline)" if measured
             else f"Suggested throttles (moves take at most {s.max_impact:.0%} of each broker's network)")
    table = Table(title=title, title_justify="left")
    for col in ("broker", "capacity", "client in", "client out", "sends", "receives",
                *(("p99 rise",) if measured else ()), "leader rate", "follower rate"):
        table.add_column(col, justify="right", no_wrap=True)
    for b in s.brokers:
        capacity = (_capacity(b.capacity_in, units) if b.capacity_in == b.capacity_out
                    else f"{_capacity(b.capacity_in, units)} in, {_capacity(b.capacity_out, units)} out")
        table.add_row(str(b.broker), capacity, format_rate(b.client_in, units), format_rate(b.client_out, units),
                      format_bytes(b.sends, units), format_bytes(b.receives, units),
                      *((_rise(b.impact),) if measured else ()),
                      format_rate(b.leader_rate, units) if b.sends else "-",
                      format_rate(b.follower_rate, units) if b.receives else "-")
    lines = [f"One rate for every broker: --leader-rate {s.leader_rate} --follower-rate {s.follower_rate} "
             f"({format_rate(s.leader_rate, units)} / {format_rate(s.follower_rate, units)}): finishes in {_eta(s.eta_uniform_s)}.",
             f"Per-broker rates above: finish in {_eta(s.eta_s)}."]
    if s.deadline_s is not None:
        verdict = "reachable" if s.reachable else "NOT reachable"
        lines.append(f"Deadline {format_duration(s.deadline_s)}: {verdict}.")
    if s.critical:
        lines.append("Bound by: " + ", ".join(f"{c.limit.label}" + (f" of broker {c.broker}" if c.broker is not None else "")
                                              for c in s.critical[:3]) + ".")
    lines.extend(f"To reach it: {r.text}." for r in s.remedies)
    lines.extend(f"Warning: {w}." for w in s.warnings)
    lines.append(rates_line(s.write_rates))
    lines.append(f"Note: {s.bound_note}.")
    return Group(table, *(Text(line) for line in lines))


def _capacity(value: float, units: Units) -> str:
    return "unknown" if math.isinf(value) else format_rate(value, units)


def _rise(impact: Impact | None, *, table: bool = False) -> str:
    """The p99's rise over the baseline; a rise within the noise of the two samples is shown as
    such (its raw figure in brackets), not as an impact."""
    if impact is None:
        return "-" if table else "not measured"
    if impact.over_everything and not table:
        return "throttled" if impact.throttled else f"{impact.timeouts} timeout(s)"
    if impact.within_noise and impact.measured_increase is not None:
        return f"noise ({impact.measured_increase:+.0%})"
    return "-" if impact.p99_increase is None else f"{impact.p99_increase:+.0%}"
