"""One convention for every command: each option and argument says what it is for, options that mean the
same thing in several commands have one default, and values a command cannot use are usage errors."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from spadework.cli import app
from tests.servers import SPADEWORK

runner = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "200"})
LIBRARY = "toolworlds/examples/library.py"  # a model-written file: played only in the sandbox
# Options that mean the same in every command that has them, so their defaults must agree.
SHARED = ("--request-timeout", "--local-model", "--local-parallel", "--progress", "--max-failed-share", "--endpoint")


def commands() -> Iterator[tuple[str, Any]]:
    def walk(command: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                yield from walk(sub, [*path, name])
        else:
            yield " ".join(path), command

    yield from walk(typer.main.get_command(app), [])


def test_every_option_and_argument_of_every_command_has_help() -> None:
    found = list(commands())
    assert len(found) >= 20
    missing = [f"{path}: {param.opts[0] if param.opts else param.name}" for path, command in found
               for param in command.params if not getattr(param, "help", None)]  # fmt: skip
    assert not missing, "options without help:\n" + "\n".join(missing)


def test_help_says_what_its_source_says() -> None:
    """Typer renders help as rich markup: `[default: x]` in a help string vanished from `--help`."""
    from rich.text import Text

    eaten = [f"{path}: {param.opts[0] if param.opts else param.name}: {param.help!r}" for path, command in commands()
             for param in command.params
             if getattr(param, "help", None) and Text.from_markup(param.help).plain != param.help]  # fmt: skip
    assert not eaten, "help that --help would not show as written:\n" + "\n".join(eaten)


def test_options_shared_by_commands_share_their_defaults() -> None:
    defaults: dict[str, dict[str, object]] = {}
    for path, command in commands():
        for param in command.params:
            if param.opts and param.opts[0] in SHARED:
                defaults.setdefault(param.opts[0], {})[path] = param.default
    assert defaults["--request-timeout"] and len(defaults["--request-timeout"]) >= 3
    differing = {name: where for name, where in defaults.items() if len({repr(v) for v in where.values()}) > 1}
    assert not differing, differing


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["toolworld", "serve", "banking", "--port", "99999"], "--port': Input should be less than or equal to 65535"),
        (["mock-server", "--port", "70000"], "--port': Input should be less than or equal to 65535"),
        (["toolworld", "serve", "banking", "--transport", "stdio"], "--transport chooses how MCP is served: add --mcp"),
        (["design", "--out", "x", "--set", "designer.invalid_penalty=3"], "invalid_penalty: Input should be less"),
        (["train", "--preset", "", "--out", "x"], "Invalid value for --preset: no preset ''; choose one of: cpu-tiny"),
    ],
)
def test_values_a_command_cannot_use_are_usage_errors(arguments: list[str], message: str) -> None:
    result = runner.invoke(app, arguments)
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output


def test_a_model_written_file_works_wherever_the_help_says_a_world_does() -> None:
    shown = runner.invoke(app, ["toolworld", "show", LIBRARY, "--json"])
    assert shown.exit_code == 0, shown.output
    assert {tool["function"]["name"] for tool in json.loads(shown.stdout)} == {"search", "borrow"}
    checked = runner.invoke(app, ["toolworld", "check", LIBRARY, "--seeds", "3"])
    assert checked.exit_code == 0 and "reference plan" in checked.output, checked.output
    evaluated = runner.invoke(app, ["toolworld", "eval", LIBRARY, "--seeds", "2", "--policy", "oracle"])
    assert evaluated.exit_code == 0 and "library" in evaluated.output and "1.000" in evaluated.output, evaluated.output


def test_an_unknown_session_option_is_refused_not_ignored() -> None:
    from starlette.testclient import TestClient

    from toolworlds.hosting.http import create_app
    from toolworlds.registry import builtin_worlds

    with TestClient(create_app(builtin_worlds()["banking"])) as http:
        misspelt = http.post("/sessions", json={"seed": 1, "hint": True})
        assert misspelt.status_code == 422 and misspelt.json()["error"]["fields"][0]["field"] == "hint"
        created = http.post("/sessions", json={"seed": 1, "include_hint": True})
        assert created.status_code == 201 and created.json()["task"]["hint"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["toolworld", "export", "banking", "--out", "{file}"], "File exists"),
        (["toolworld", "show", "nosuchmod:X"], "no module named 'nosuchmod'"),
        (["mock-server", "--world", "nosuch.py:X"], "no such file: nosuch.py"),
        (["mock-server", "--tokenizer", "nosuch"], "no tokenizer at 'nosuch'"),
        (["rollout", "--world", "banking", "--endpoint", "notaurl", "--out", "{dir}/r"], "'notaurl' is not an http(s)"),
        (["toolworld", "serve", "banking", "--host", ""], "an empty host binds every interface"),
        (["--log-level", "bogus", "toolworld", "list"], "'bogus' is not one of debug, info, warning, error"),
    ],
    ids=[
        "a file for a folder",
        "no such module",
        "no such file",
        "no such tokenizer",
        "not a URL",
        "empty host",
        "no such log level",
    ],
)
def test_bad_input_ends_in_one_clear_error_not_a_traceback(tmp_path: Path, arguments: list[str], message: str) -> None:
    (tmp_path / "afile").write_text("")
    command = [*SPADEWORK, *(a.format(file=tmp_path / "afile", dir=tmp_path) for a in arguments)]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120,
                               env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})  # fmt: skip
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert "Traceback" not in completed.stderr and message in completed.stderr, completed.stderr[-2000:]
    assert not (tmp_path / "r").exists()  # nothing was started
