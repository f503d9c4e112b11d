"""Kafka-compatible flag parsing and validation order (reference §1), without a cluster."""
from __future__ import annotations

import io

import pytest
from cli_helpers import Kreassign

from kreassign.cli.kafka_args import HELP_TEXT
from kreassign.cli.kafka_compat import run_kafka_style
from kreassign.cli.main import is_kafka_style


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_kafka_style(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def first_line(text: str) -> str:
    return text.splitlines()[0]


@pytest.mark.parametrize("argv", [["--bootstrap-server", "x"], ["--generate", "--verify"]])
def test_action_count_must_be_one(argv: list[str]) -> None:
    code, out, err = run(*argv, "--bootstrap-server=x") if "--generate" in argv else run(*argv)
    assert code == 1
    assert out == ""
    assert first_line(err) == ("Command must include exactly one action: --generate, --execute, "
                               "--verify, --cancel, --list")


def test_help_prints_help_text_and_exits_1_like_kafka() -> None:
    code, out, err = run("--help")
    assert code == 1 and out == ""
    assert first_line(err) == HELP_TEXT
    assert "--reassignment-json-file <String>" in err


def test_both_bootstraps_rejected() -> None:
    code, _, err = run("--list", "--bootstrap-server", "a", "--bootstrap-controller", "b")
    assert code == 1
    assert first_line(err) == "Please don't specify both --bootstrap-server and --bootstrap-controller"


def test_missing_bootstrap() -> None:
    code, _, err = run("--verify", "--reassignment-json-file", "f.json")
    assert code == 1
    assert first_line(err) == "Please specify either --bootstrap-server or --bootstrap-controller"


@pytest.mark.parametrize(("action", "missing"), [
    ("--verify", "reassignment-json-file"),
    ("--execute", "reassignment-json-file"),
    ("--cancel", "reassignment-json-file"),
    ("--generate", "topics-to-move-json-file"),
])
def test_required_arguments(action: str, missing: str) -> None:
    code, _, err = run(action, "--bootstrap-server", "localhost:9092")
    assert code == 1
    assert first_line(err) == f'Missing required argument "[{missing}]"'


def test_generate_checks_topics_file_before_broker_list() -> None:
    _, _, err = run("--generate", "--bootstrap-server", "h")
    assert first_line(err) == 'Missing required argument "[topics-to-move-json-file]"'
    _, _, err = run("--generate", "--bootstrap-server", "h", "--topics-to-move-json-file", "t.json")
    assert first_line(err) == 'Missing required argument "[broker-list]"'


@pytest.mark.parametrize(("argv", "option", "action"), [
    (["--generate", "--topics-to-move-json-file", "t", "--broker-list", "1", "--throttle", "5"],
     "throttle", "generate"),
    (["--verify", "--reassignment-json-file", "f", "--additional"], "additional", "verify"),
    (["--list", "--throttle", "1"], "throttle", "list"),
    (["--execute", "--reassignment-json-file", "f", "--preserve-throttles"], "preserve-throttles", "execute"),
    (["--cancel", "--reassignment-json-file", "f", "--throttle", "1"], "throttle", "cancel"),
])
def test_options_not_permitted_with_action(argv: list[str], option: str, action: str) -> None:
    code, _, err = run(*argv, "--bootstrap-server", "h")
    assert code == 1
    assert first_line(err) == f'Option "[{option}]" can\'t be used with action "[{action}]"'


def test_bootstrap_controller_only_for_cancel_and_list() -> None:
    _, _, err = run("--generate", "--bootstrap-controller", "c", "--topics-to-move-json-file", "t",
                    "--broker-list", "1")
    assert first_line(err) == 'Option "[bootstrap-controller]" can\'t be used with action "[generate]"'


def test_unknown_option_and_no_abbreviations() -> None:
    code, _, err = run("--exec", "--bootstrap-server", "h")
    assert code == 1
    assert first_line(err) == "exec is not a recognized option"


def test_bad_throttle_value_fails_when_used_after_the_file_is_read_like_kafka(tmp_path) -> None:  # type: ignore[no-untyped-def]
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1}')
    assert run("--execute", "--bootstrap-server", "h", "--reassignment-json-file", str(plan), "--throttle",
               "abc") == (1, "Error: Cannot parse argument 'abc' of option throttle\n", "")
    assert run("--execute", "--bootstrap-server", "h", "--reassignment-json-file", str(plan), "--timeout",
               "soon") == (1, "Error: Cannot parse argument 'soon' of option timeout\n", "")
    missing = tmp_path / "nope.json"
    assert run("--execute", "--bootstrap-server", "h", "--reassignment-json-file", str(missing), "--throttle",
               "abc") == (1, f"Error: Unable to read file {missing}\n", "")


def test_equals_form_and_missing_file_reported_like_kafka(tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "nope.json"
    code, out, err = run("--generate", f"--topics-to-move-json-file={missing}", "--broker-list=1,2",
                         "--snapshot", str(tmp_path / "s.json"))
    assert code == 1
    assert out == f"Error: Unable to read file {missing}\n"


def test_routing_between_front_doors() -> None:
    assert is_kafka_style(["--bootstrap-server", "h", "--list"])
    assert is_kafka_style(["--debug", "--list"])
    assert not is_kafka_style(["generate", "--broker-list", "1"])
    assert not is_kafka_style(["--help"])
    assert not is_kafka_style(["--version"])
    assert not is_kafka_style([])


def test_blank_word_is_routed_to_the_front_door_and_gets_kafkas_message(kreassign: Kreassign) -> None:
    assert is_kafka_style([" "]) and is_kafka_style([""]) and not is_kafka_style(["plan"])
    ran = kreassign.run(" ")
    assert ran.exit_code == 1 and ran.stdout == ""
    assert first_line(ran.stderr) == ("Command must include exactly one action: --generate, --execute, "
                                        "--verify, --cancel, --list")


def test_non_option_words_are_ignored_as_jopt_simple_does_with_a_warning() -> None:
    code, out, err = run("extra", "--generate", "--", "--execute")
    # `--execute` after `--` is a word, not a second action; the missing options are then reported
    assert code == 1 and out == ""
    assert first_line(err) == 'Please specify either --bootstrap-server or --bootstrap-controller'


def test_a_stray_word_in_a_valid_command_is_ignored_with_a_warning(tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "nope.json"
    code, out, err = run("--generate", f"--topics-to-move-json-file={missing}", "typo.json", "--broker-list=1,2",
                         "--snapshot", str(tmp_path / "s.json"))
    assert (code, out) == (1, f"Error: Unable to read file {missing}\n")
    assert err == "Warning: ignoring 'typo.json': it is not an option (Kafka's tool ignores it too)\n"
