"""A config becomes what each part plays by in one place: every designer knob reaches a design iteration from the
config, and `spadework design` takes its knobs only as the config's (a preset, `--set`)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from engine.settings import EpisodeSettings
from spadework.cli import app
from trainers.config import load_config
from trainers.run_settings import agent_settings, design_settings


def test_design_settings_carry_the_configs_knobs_and_nothing_of_their_own() -> None:
    config = load_config("cpu-tiny", ["designer.max_tokens=300", "designer.documents=3", "agent.plays=5",
                                      "policy.request_timeout=7", "ablations.no_memory=true"])  # fmt: skip
    agent = agent_settings(config, "served", "bytes", {"top_k": 0})
    settings = design_settings(config, agent, "served", "bytes", {"top_k": 0}, "openai", parallel=3)
    assert settings.knobs == config.designer and settings.knobs.documents == 3 and settings.plays == 5
    designer = settings.designer
    assert (designer.mode, designer.max_tokens_per_turn, designer.temperature) == ("tokens", 300, 0.7)
    assert designer.extra_body["top_k"] == 0  # sampled as the agent is (exact logprobs)
    assert designer.request_timeout_s == agent.request_timeout_s == 7.0
    assert (agent.max_turns, agent.max_tokens_per_turn, agent.call_schema) == (4, 64, True)
    assert settings.memory_examples == 0 and settings.concurrency == 3
    assert settings.knobs.rewards.mode == "band" and settings.knobs.rewards.win == "credit"
    assert isinstance(agent, EpisodeSettings)


def test_the_design_command_has_no_knob_of_its_own() -> None:
    """Its options are where the run lives and where the model is; every knob is the config's."""
    result = CliRunner().invoke(app, ["design", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    options = set(re.findall(r"--[a-z][a-z-]+", result.output))
    assert options == {"--out", "--preset", "--set", "--endpoint", "--memory", "--help"}, options
