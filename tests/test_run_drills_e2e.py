"""One run, many terminals, and faults during a run, on both engines (`live`; a broker's kill -9
or hang on real Kafka alone): a paced `kreassign execute` in a real process while a second
terminal watches it, changes its rates and verifies it; a broker restarted mid-run; an abort
racing moves that finish. Each drill checks the cluster at
every event of the run (every move in flight in its topic's throttled-replica lists with a rate
on its receiving broker, at most one move into a broker) and ends, checked by confluent-kafka,
with every partition at its target, no throttle left behind, the operator's own rate exactly as
before and no lock marker. The helpers are the kill -9 drills' (tests/test_execution_drills_e2e.py).
"""
from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from kreassign.throttle.configs import FOLLOWER_RATE

from live import LiveCli, events
from test_execution_drills_e2e import SIZE, assert_clean, check, drill_cluster, follow, paced_to_wave, until_wave

pytestmark = [pytest.mark.e2e, pytest.mark.drill]


def collect(proc: Any) -> tuple[list[dict[str, Any]], threading.Thread]:
    """Read a second terminal's JSON events as they come (its pipe must not fill up)."""
    seen: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: seen.extend(events(proc)), daemon=True)
    reader.start()
    return seen, reader


def busy_cluster(live: Any, tmp_path: Path) -> tuple[str, dict[Any, list[int]], str]:
    """`drill_cluster` with partitions of 3 MB: at 1 MB/s each move takes a few seconds on both
    engines, so the run is still in flight while a second terminal acts."""
    topic, _current, targets, plan = drill_cluster(live, tmp_path)
    for p in range(6):
        live.produce(topic, p, 3_000_000 - SIZE)
    return topic, targets, plan


def test_a_second_terminal_watches_changes_the_rates_and_verifies_through_the_run(live: Any, tmp_path: Path) -> None:
    rng = random.Random(11)
    topic, targets, plan = busy_cluster(live, tmp_path)
    cli = LiveCli(live, tmp_path)
    violations: list[str] = []
    after_change: list[str] = []
    with live.admin() as admin:
        execute = paced_to_wave(live, admin, cli, plan, violations, None, rng)
        watcher = cli.start("watch", "-f", plan, "--interval", "1s", "-o", "json")
        watched, reader = collect(watcher)

        verified = cli.run("verify", "-f", plan)
        assert verified.stderr.startswith("Warning: the throttles were kept: `kreassign execute`"), verified.stderr
        assert admin.list_reassignments() == {} or FOLLOWER_RATE in str(
            admin.describe_broker_configs(list(live.brokers), [FOLLOWER_RATE]).configs)

        # a terminal pointed at another journal dir cannot read the run's options: it says where
        # to look, and changes nothing (it said "not a paced run" before)
        elsewhere = cli.run("throttle", "set", "--rate", "2MB/s", "--journal-dir", str(tmp_path / "elsewhere"))
        assert elsewhere.returncode != 0
        assert "its journal is not in" in elsewhere.stderr and "--journal-dir" in elsewhere.stderr, elsewhere.stderr

        # the second terminal changes the rates while the run goes on (its events are followed here)
        answers: dict[str, Any] = {}
        setter = threading.Thread(target=lambda: answers.update(
            done=cli.run("throttle", "set", "--rate", "2MB/s", "-o", "json")), daemon=True)
        setter.start()

        def until_changed(event: dict[str, Any]) -> bool:
            check(admin, violations)
            if event["event"] == "rates-changed":
                return False
            if event["event"] == "progress":
                live.tick(0.5)
            return True

        follow(execute, until_changed)
        setter.join(timeout=180)
        changed = answers["done"]
        assert changed.returncode == 0, changed.stdout + changed.stderr
        answer = json.loads(changed.stdout)
        assert answer["through_run"].startswith("`kreassign execute") and answer["follower_rate"] == 2_000_000
        journal = json.loads(Path(answer["journal"]).read_text())
        assert journal["options"]["follower_rate"] == journal["options"]["leader_rate"] == 2_000_000
        step = next(s for s in journal["steps"] if s["step"] == "throttle set (through the run)" and s["status"] == "intent")
        assert sorted(step["detail"]["brokers"]) == [str(b) for b in answer["applied_brokers"]]

        def later_waves(event: dict[str, Any]) -> bool:
            check(admin, violations)
            moving = admin.list_reassignments()
            into = sorted({b for r in moving.values() for b in r.adding})
            rates = admin.describe_broker_configs(into, [FOLLOWER_RATE]).configs if into else {}
            after = admin.list_reassignments()
            # a move in flight before and after the read copies at the rate read
            after_change.extend(str(getattr(rates.get(b, {}).get(FOLLOWER_RATE), "value", None))
                                for tp, r in moving.items() if tp in after for b in r.adding)
            if event["event"] == "progress":
                live.tick(1.0)
            return True

        follow(execute, later_waves)
        assert execute.wait(timeout=180) == 0, execute.stderr.read() if execute.stderr else ""
        assert watcher.wait(timeout=120) == 0, watcher.stderr.read() if watcher.stderr else ""
        reader.join(timeout=30)
    assert violations == []
    assert set(after_change) <= {"2000000"}  # every later move copied at the new rate
    progress = [e for e in watched if e["event"] == "run-progress"]
    assert progress and all(e["total_bytes"] == progress[0]["total_bytes"] for e in progress)
    fractions = [e["fraction"] for e in progress]
    assert fractions == sorted(fractions)  # one percentage for the plan, never backwards
    assert watched[-1]["event"] == "run-ended" and watched[-1]["state"] == "finished"
    assert watched[-1]["not_at_target"] == [] and watched[-1]["next_step"] is None
    assert_clean(live, topic, targets)


def test_a_broker_restarted_mid_run_ends_with_its_throttles_restored_exactly(live: Any, tmp_path: Path) -> None:
    """Broker 2 (the one carrying the operator's rate) stops cleanly after the first wave and
    comes back two polls later; the run goes on, and its end restores broker 2's rate to the
    operator's."""
    restart_drill(live, tmp_path, "stop")


@pytest.mark.parametrize("fault", ["kill -9", "SIGSTOP"])
def test_a_broker_killed_or_hung_mid_run_ends_with_its_throttles_restored_exactly(kafka_live: Any, tmp_path: Path,
                                                                                  fault: str) -> None:
    """The same with kill -9 of broker 2's JVM, or SIGSTOP (it holds its connections and answers
    nothing), on real Kafka alone: these drills are about what a real broker's death or hang does
    to a run (fencing after broker.session.timeout.ms, kafka-python's cached routes), which the
    emulator only mimics (it took 50 s of the suite for no finding of its own)."""
    restart_drill(kafka_live, tmp_path, fault)


def restart_drill(live: Any, tmp_path: Path, fault: str) -> None:
    rng = random.Random(12)
    topic, _current, targets, plan = drill_cluster(live, tmp_path)
    cli = LiveCli(live, tmp_path)
    if fault == "SIGSTOP":
        # A hung broker accepts connections and never answers, so a request routed through it
        # (kafka-python may pick it as the KRaft "controller") hangs in its connection setup past
        # a 3 s operation budget; the run needs room for one attempt through another broker.
        cli.config.write_text("request.timeout.ms=1500\ndefault.api.timeout.ms=30000\n")
    violations: list[str] = []
    with live.admin() as admin:
        execute = paced_to_wave(live, admin, cli, plan, violations, None, rng)
        if fault == "SIGSTOP":
            live.pause_broker(2)
        else:
            live.stop_broker(2, kill=fault == "kill -9")
        polls = [0]

        def restart_then_check(event: dict[str, Any]) -> bool:
            if polls[0] == 2:
                if fault == "SIGSTOP":
                    live.resume_broker(2)
                else:
                    live.start_broker(2)
            polls[0] += 1
            if polls[0] > 2:
                check(admin, violations)
            if event["event"] == "progress":
                live.tick(1.0)
            return True

        follow(execute, restart_then_check)
        code = execute.wait(timeout=300)
        assert code == 0, execute.stderr.read() if execute.stderr else ""
    assert violations == []
    assert_clean(live, topic, targets)


def test_an_abort_racing_moves_that_finish_succeeds_and_restores(live: Any, tmp_path: Path) -> None:
    """An abort during a busy paced run: moves go on finishing while it asks the run to stop and
    cancels (a move that finishes between its read and its cancel is answered
    NO_REASSIGNMENT_IN_PROGRESS, which is no failure; on real Kafka a 600 kB move copies in one
    fetch, so the run may even finish its plan before it can stop, which is no failure either).
    Whatever moved stays and is listed with the plan back; the rest is back where it was."""
    rng = random.Random(13)
    topic, current, _targets, plan = drill_cluster(live, tmp_path)
    cli = LiveCli(live, tmp_path)
    violations: list[str] = []
    with live.admin() as admin:
        execute = paced_to_wave(live, admin, cli, plan, violations, 2, rng)
        aborting = cli.start("abort", "-f", plan, "-o", "json")

        def keep_going(event: dict[str, Any]) -> bool:
            check(admin, violations)  # on the emulator nothing moves on until the abort is through;
            return True               # real Kafka finishes moves meanwhile

        follow(execute, keep_going)
        execute.wait(timeout=180)
        out, err = aborting.communicate(timeout=300)
    assert aborting.returncode == 0, out + err
    report = json.loads(out)
    assert report["left"] is None and report["errors"] == {}
    with live.admin() as admin:
        now = {p.tp: p.replicas for p in admin.describe_topics([topic])}
    assert violations == []
    assert_clean(live, topic, {tp: list(r) for tp, r in now.items()})
    # what finished stays at its target and is listed with the plan back; nothing else moved
    back = {tp for tp in now if sorted(now[tp]) == sorted(current[tp])}
    assert {str(tp) for tp in now if tp not in back} <= set(report["completed_before_abort"])


def test_a_controller_that_hangs_mid_run_stops_the_run_saying_what_it_left_then_resume_finishes(
        live: Any, tmp_path: Path) -> None:
    """The KRaft controller hangs after the first wave (SIGSTOP of its JVM on real Kafka; held
    answers to what brokers forward to it on the emulator) for longer than the run's timeout
    (3 s here): the run stops with one line that names what it left and the command that finishes
    it; once the controller is back, that command does, and everything ends exact."""
    from kreassign.execute.lock import LOCK_KEY

    rng = random.Random(14)
    topic, _current, targets, plan = drill_cluster(live, tmp_path)
    cli = LiveCli(live, tmp_path)
    violations: list[str] = []
    with live.admin() as admin:
        execute = paced_to_wave(live, admin, cli, plan, violations, None, rng)
        live.pause_controller()
        try:
            follow(execute, lambda event: True)  # to its end
            code = execute.wait(timeout=120)
            error = execute.stderr.read() if execute.stderr else ""
        finally:
            live.resume_controller()
        assert code == 5, error
        last = error.strip().splitlines()[-1]
        assert last.startswith("Error: ") and "kreassign resume" in last, error
        assert LOCK_KEY not in admin.read_markers([LOCK_KEY])  # the run gave the lock back as it stopped
        resume = cli.start("resume", "-f", plan, "-o", "json")
        follow(resume, until_wave(live, admin, violations, -1, rng))  # to its end
        assert resume.wait(timeout=180) == 0, resume.stderr.read() if resume.stderr else ""
    assert violations == []
    assert_clean(live, topic, targets)
