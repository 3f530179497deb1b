"""The `spadework toolworld` commands as a user types them."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from spadework.cli import COMMANDS, GROUPS, app

runner = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "200"})


def test_list_names_every_world() -> None:
    result = runner.invoke(app, ["toolworld", "list"])
    assert result.exit_code == 0
    for name in ("banking", "ticketing", "orders"):
        assert name in result.output


def test_show_lists_tools_with_their_arguments() -> None:
    result = runner.invoke(app, ["toolworld", "show", "banking"])
    assert result.exit_code == 0
    assert "transfer" in result.output and "from_account_id" in result.output
    listed = json.loads(runner.invoke(app, ["toolworld", "show", "banking", "--json"]).output)
    assert {"transfer", "release_hold"} <= {entry["function"]["name"] for entry in listed}


def test_show_prints_what_the_agent_is_told_first() -> None:
    result = runner.invoke(app, ["toolworld", "show", "ticketing"])
    assert result.exit_code == 0
    told = result.output.split("ticketing: 16 tools")[0]
    assert "what the agent is told" in told and "enterprise 48/24/6/2" in told and "SLA_HOURS" not in told


def test_play_prints_a_transcript_with_the_final_score() -> None:
    result = runner.invoke(app, ["toolworld", "play", "orders", "--seed", "3", "--show-hint"])
    assert result.exit_code == 0, result.output
    assert "score 1.000" in result.output and "hint:" in result.output
    random = runner.invoke(app, ["toolworld", "play", "ticketing", "--seed", "3", "--policy", "random"])
    assert random.exit_code == 0 and "score " in random.output


def test_play_as_json_is_the_whole_transcript() -> None:
    result = runner.invoke(app, ["toolworld", "play", "banking", "--seed", "8", "--json"])
    transcript = json.loads(result.output)
    assert transcript["score"] == 1.0 and transcript["task"]["seed"] == 8
    assert transcript["turns"][-1]["result"]["terminated"] is True


def test_a_world_from_a_file_plays_without_packaging() -> None:
    result = runner.invoke(app, ["toolworld", "play", "toolworlds/examples/library.py:LibraryWorld", "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert "score 1.000" in result.output


def test_an_unknown_world_is_one_clear_error() -> None:
    result = runner.invoke(app, ["toolworld", "show", "casino"])
    assert result.exit_code == 2
    assert "no toolworld named 'casino'" in result.output


def test_eval_compares_policies_in_one_table() -> None:
    result = runner.invoke(app, ["toolworld", "eval", "banking", "--seeds", "10"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "banking" in line]
    assert len(rows) == 2
    assert "oracle" in rows[0] and "1.000" in rows[0] and "100%" in rows[0]
    assert "random" in rows[1]


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("spadework 0.")


# The modules the tau2 plugin worlds need (benchmarks/tau2/world.py): data, tools, prompts and checks, no engine.
PLUGIN_MODULES = (
    {f"benchmarks.{name}" for name in ("arithmetic", "tau2")}
    | {
        f"benchmarks.tau2.{name}"
        for name in ("airline", "data", "domain_env", "evaluator", "prompts", "retail", "telecom", "telecom_env")
    }
    | {"benchmarks.tau2.telecom_user", "benchmarks.tau2.toolkit", "benchmarks.tau2.world"}
)


def test_a_command_loads_only_its_own_part_and_help_lists_every_part() -> None:
    """`spadework toolworld ...` imports neither the engine nor the trainers (each child process and each call
    paid for all of them), and of the benchmarks only the installed plugin worlds (tau2's, listed here);
    `spadework --help` still lists every command."""
    code = (
        "import sys\nsys.argv = ['spadework', '--log-level', 'warning', 'toolworld', 'list']\n"
        "from spadework.cli import run\ntry:\n    run()\nexcept SystemExit:\n    pass\n"
        "parts = {name.split('.')[0] for name in sys.modules}\n"
        "benchmarks = {name for name in sys.modules if name.startswith('benchmarks.')}\n"
        "print(sorted(parts & {'engine', 'trainers'}), sorted(benchmarks - PLUGIN))"
    )
    code = f"PLUGIN = set({sorted(PLUGIN_MODULES)!r})\n" + code
    listed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    worlds = ("banking", "tau2-airline", "tau2-retail", "tau2-telecom")
    assert all(name in listed.stdout for name in worlds), listed.stdout
    assert listed.stdout.splitlines()[-1] == "[] []", listed.stdout
    helped = runner.invoke(app, ["--help"])
    assert helped.exit_code == 0
    assert all(f" {name} " in helped.output for name in [*GROUPS, *COMMANDS]), helped.output
