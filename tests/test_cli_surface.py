"""The command line's surface (issue 14): strict flags, client help without processor
flags, right help texts, quiet broken pipes, whole text off a terminal, the session id
``ask`` prints and ``feedback --last``, and a ping that tells the truth."""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from react_mem.bus.embedded import EmbeddedBroker
from react_mem.bus.pulsar import PulsarTransport
from react_mem.cli import build_parser, main
from react_mem.commands import feedback
from react_mem.commands.sessions import SessionLog
from react_mem.commands.table import table
from tests.test_cli_commands import Terminal, run_ask, scripted_agent, whole


def help_of(*argv: str) -> str:
    out = io.StringIO()
    parser = build_parser()
    for name in argv:  # walk down to the subcommand's parser
        parser = next(
            a.choices[name] for a in parser._actions if isinstance(a, argparse._SubParsersAction)
        )
    parser.print_help(out)
    return out.getvalue()


@pytest.mark.parametrize(
    "argv",
    [
        ["ask", "--converstion", "c2", "hi"],
        ["ask", "--conv", "c2", "hi"],  # an abbreviation is no longer guessed
        ["playbook", "history", "--sco", "x"],
        ["ask", "-P", "9000", "hi"],  # processor-only flags are not client flags
        ["feedback", "s", "--helpful", "--metrics"],
    ],
)
def test_mistyped_abbreviated_and_processor_flags_are_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2


def test_help_texts() -> None:
    top = help_of()
    assert "``" not in top and "The react-mem command" in top
    assert "Run the whole stack" in help_of("up")
    ask = help_of("ask")
    assert "--metrics" not in ask and "--metrics-port" not in ask
    assert "(default: WARNING)" in " ".join(ask.split())
    for client in (("feedback",), ("ping",), ("playbook", "search"), ("memory", "facts")):
        assert "--metrics" not in help_of(*client), client
    assert "--metrics-port" in help_of("up")


def test_a_reader_that_leaves_early_ends_the_command_quietly() -> None:
    flood = (
        "import react_mem.cli as cli\n"
        "async def flood(args):\n"
        "    for n in range(200000):\n"
        "        print('row', n)\n"
        "cli.COMMANDS['ping'] = flood\n"
        "import sys; sys.argv = ['react-mem', 'ping']\n"
        "cli.run()\n"
    )
    shell = f'{sys.executable} -c "{flood}" | head -1'
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60)
    assert done.stdout == "row 0\n"
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_tables_keep_the_whole_text_off_a_terminal() -> None:
    long = "When the user names a city, look up its weather before answering. " * 3
    piped, terminal = io.StringIO(), Terminal()
    table(piped, ["ID", "CONTENT"], [["b1", long]])
    table(terminal, ["ID", "CONTENT"], [["b1", long]])
    assert piped.getvalue().splitlines()[1] == "b1  " + long.strip()
    assert terminal.getvalue().splitlines()[1].endswith("…")


def test_feedback_names_the_last_session_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    log = SessionLog(tmp_path)

    def resolve(*argv: str) -> tuple[str | None, str | None]:
        args = build_parser().parse_args(["feedback", *argv, "--helpful"])
        return feedback.resolve_session(args, log), args.session_id

    problem, _ = resolve("--last")
    assert problem is not None and "no session answered yet" in problem
    log.record("s1")
    log.record("s2")
    assert resolve("--last") == (None, "s2")
    assert resolve("s1") == (None, "s1")
    problem, _ = resolve("nope")
    assert problem is not None and "unknown session 'nope'" in problem
    assert resolve("nope", "--any-session") == (None, "nope")
    problem, _ = resolve("s1", "--last")
    assert problem is not None and "not both" in problem


def test_feedback_on_an_unknown_session_exits_2_before_sending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["feedback", "nope", "--helpful", "--state-dir", str(tmp_path)])
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "unknown session 'nope'" in captured.err


@pytest.mark.broker
async def test_ask_prints_its_session_id_on_stderr(
    transport: PulsarTransport, tmp_path: Path, unique: str
) -> None:
    async with scripted_agent(transport, tmp_path, unique, script=whole) as agent:
        code, out, err = await run_ask(transport, "Hi?", unique, streaming=False)
        assert code == 0 and "session" not in out
        found = re.search(r"^session (\S+) \(rate it with: react-mem feedback --last", err, re.M)
        assert found is not None, err
        assert found.group(1) == agent.received[0].session_id


def test_ping_without_a_broker_says_so_and_starts_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ping", "--state-dir", str(tmp_path)]) == 1
    assert "no broker is running under" in (err := capsys.readouterr().err)
    assert "`react-mem up`" in err
    assert not (tmp_path / "broker").exists()


def test_ping_names_the_rabbitmq_broker_it_could_not_reach(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["ping", "--state-dir", str(tmp_path), "--pubsub-backend", "rabbitmq"]
    assert main([*args, "--rabbitmq-host", "127.0.0.1", "--rabbitmq-port", "1"]) == 1
    err = capsys.readouterr().err
    assert "no RabbitMQ broker at" in err and "react-mem up" not in err


@pytest.mark.broker
def test_ping_without_a_ping_processor_names_the_queue_and_the_timeout(
    broker: EmbeddedBroker, unique: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ping", "-p", broker.url, "--flow", unique, "--timeout", "1.5", "--count", "1"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"no ping processor answered on request:tg:ping:default:{unique} within 1.5s" in err
