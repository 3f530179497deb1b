"""`spadework design` end to end against the scripted mock model over real HTTP: the designer "writes" a
sound world, a flawed one and prose; the gates, the sandbox, the plays, regret, the memory and the
metrics all see real files and real processes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from engine.templates import byte_tokenizer
from tests.engine.conftest import mock_model
from tests.sandbox.conftest import LIBRARY_SOURCE
from tests.sandbox.test_validate import FREE_LUNCH
from tests.servers import SPADEWORK
from toolworlds.examples import EXAMPLE_SPEC
from toolworlds.spec import Spec
from trainers.designer.budget import SPEC_BUDGET
from trainers.designer.grounding import grounding
from trainers.designer.loop import DesignOutcome, read_metrics
from trainers.designer.memory import WorldMemory
from trainers.rows import designer_rows
from trainers.tables import TablesSource

# Against the scripted mock (no tokenizer of its own), as a designer run outside training can be: chat mode for
# both roles, a Python world, paid by regret, one design per document, 8 turns of 256 tokens per play.
CHAT_PYTHON = ("designer.mode=chat", "designer.format=python", "designer.vocabulary=free", "designer.task_text=written",
               f"designer.plan_calls={SPEC_BUDGET.plan}", "designer.reward=regret", "designer.win=success",
               "designer.generations=1", "agent.mode=chat", "agent.call_schema=false", "agent.max_turns=8",
               "agent.max_tokens_per_turn=256", "run.iterations=1")  # fmt: skip


def design_command(url: str, out: Path, *knobs: str) -> list[str]:
    """`spadework design` against `url` with the chat-mode knobs above, then `knobs` (later ones win)."""
    return [*SPADEWORK, "design", "--endpoint", url, "--out", str(out),
            *(flag for knob in (*CHAT_PYTHON, *knobs) for flag in ("--set", knob))]  # fmt: skip


def design_flags(directory: Path, designs: dict[str, str]) -> list[str]:
    """The mock's `--design FILE` flags for these replies, each written to a file in `directory`."""
    flags = []
    for name, text in designs.items():
        (directory / name).write_text(text)
        flags += ["--design", str(directory / name)]
    return flags


def test_a_designer_iteration_end_to_end(tmp_path: Path) -> None:
    designs = {"sound.py": LIBRARY_SOURCE, "free_lunch.py": FREE_LUNCH, "prose.txt": "I would rather not."}
    flags = design_flags(tmp_path, designs)
    out = tmp_path / "run"
    with mock_model(*flags) as url:
        command = design_command(url, out, "designer.documents=3", "agent.plays=2", "designer.smoke_seeds=3",
                                 "run.iterations=2")  # fmt: skip
        completed = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "200"},
        )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "valid after repair" in completed.stdout

    metrics = read_metrics(out)
    assert [m.iteration for m in metrics] == [0, 1]
    first = metrics[0]
    assert (first.requested, first.replies, first.valid_after_repair) == (3, 3, 1)
    assert first.rejections == {"smoke: doing nothing does not": 1, "policy": 1}  # prose in a fence: no world class
    assert first.regrets == [0.0]  # the oracle agent solves it with and without the hint
    assert first.rewards == [0.0, -1.0, -1.0]
    assert first.statuses == {"too_easy": 1} and first.vendi == 1.0

    outcomes = [json.loads(line) for line in (out / "designs.jsonl").read_text().splitlines()]
    assert len(outcomes) == 6
    sound = outcomes[0]
    assert sound["verdict"]["valid"] and sound["mean_plain"] == 1.0 and sound["mean_hinted"] == 1.0
    assert "Document (" in sound["sample"]["messages"][1]["content"]
    world_file = out / "worlds" / f"{sound['world_hash'][:16]}.py"
    assert world_file.read_text() == LIBRARY_SOURCE
    plays = (out / sound["plays"] / "episodes.jsonl").read_text().splitlines()
    assert len(plays) == 4  # K=2 tasks, each without and with the hint

    with WorldMemory.open(out / "memory.sqlite") as memory:
        assert memory.counts()["too_easy"] == 1  # the same code twice is one world
        remembered = memory.get(sound["world_hash"])
        assert remembered is not None and remembered.name == "library" and remembered.scores_hinted == [1.0, 1.0]
    second_prompt = outcomes[3]["sample"]["messages"][1]["content"]
    assert "Worlds you wrote before" in second_prompt and "library (search, borrow)" in second_prompt


def test_g_generations_per_document_form_one_token_exact_designer_group(tmp_path: Path) -> None:
    designs = {"sound.py": LIBRARY_SOURCE, "free_lunch.py": FREE_LUNCH}
    flags = design_flags(tmp_path, designs)
    out = tmp_path / "run"
    with mock_model("--tokenizer", "bytes", *flags) as url:
        knobs = ("designer.documents=1", "designer.generations=3", "agent.plays=2", "designer.smoke_seeds=2",
                 "designer.mode=tokens", "policy.tokenizer=bytes")  # fmt: skip
        command = design_command(url, out, *knobs)
        completed = subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ})
    assert completed.returncode == 0, completed.stderr[-3000:]
    outcomes = [DesignOutcome.model_validate_json(line) for line in (out / "designs.jsonl").read_text().splitlines()]
    assert len({outcome.sample.document for outcome in outcomes}) == 1
    rows, skipped = designer_rows(outcomes)
    tokenizer = byte_tokenizer()
    assert len(rows) == 3 and not skipped.reasons and len({row.group for row in rows}) == 1
    for row, outcome in zip(rows, outcomes, strict=True):
        assert outcome.sample.tokens is not None and outcome.sample.tokens.exact
        assert tokenizer.decode(row.completion_ids, skip_special_tokens=True) == outcome.sample.reply  # as sampled
        assert all(row.env_mask) and row.reward == outcome.reward
    assert [row.reward for row in rows] == [0.0, -1.0, 0.0]  # sound, free lunch (rejected), sound again


def test_a_spec_designer_iteration_plays_its_worlds_in_process(tmp_path: Path) -> None:
    """`--designer-format spec`: the reply is a JSON spec sampled in stages (each stage's grammar recorded
    with the trace), judged by the spec gates, compiled by trusted code and played here; a broken plan is
    named. The mock ignores grammars (its whole scripted spec comes back to the first stage, which ends the
    reply): the stages themselves are tested on the real model (`test_embedded_server`) and by walking
    their grammars (`test_spec_stages`)."""
    sound = EXAMPLE_SPEC
    broken = json.loads(sound)
    broken["task"]["plan"][1]["tool"] = "lend"
    designs = {"sound.json": sound, "broken.json": json.dumps(broken), "prose.txt": "I would rather not."}
    flags = design_flags(tmp_path, designs)
    out = tmp_path / "run"
    with mock_model("--tokenizer", "bytes", *flags) as url:
        command = design_command(url, out, "designer.documents=3", "agent.plays=2", "designer.smoke_seeds=3",
                                 "designer.format=spec", "designer.mode=tokens", "policy.tokenizer=bytes")  # fmt: skip
        completed = subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ})
    assert completed.returncode == 0, completed.stderr[-3000:]
    first = read_metrics(out)[0]
    assert (first.requested, first.replies, first.valid_after_repair) == (3, 3, 1)
    assert first.rejections == {"parse": 2}, first.rejections  # a plan naming no tool; prose is not JSON
    assert first.regrets == [0.0] and first.prompt_version == "designer-spec-v6"
    outcomes = [json.loads(line) for line in (out / "designs.jsonl").read_text().splitlines()]
    valid = [o for o in outcomes if o["verdict"]["valid"]]
    assert len(valid) == 1 and valid[0]["mean_plain"] == 1.0
    assert (out / "worlds" / f"{valid[0]['world_hash'][:16]}.json").read_text() == sound.strip()
    # grounded against the document it was asked for (the default corpus, tables), recomputed here
    tables = TablesSource()
    document = next(
        tables.document(i) for i in range(len(tables)) if tables.document(i).source == valid[0]["sample"]["document"]
    )
    expected = grounding(Spec.model_validate_json(sound), document.text).share
    assert valid[0]["grounding"] == expected and first.grounding_mean == expected and first.grounded == 0
    assert all(o["grounding"] is None for o in outcomes if not o["verdict"]["valid"])
    assert len((out / valid[0]["plays"] / "episodes.jsonl").read_text().splitlines()) == 4
    broken_outcome = next(o for o in outcomes if o["verdict"]["rejection"] and "lend" in o["verdict"]["rejection"])
    assert "task.plan[1].tool" in broken_outcome["verdict"]["rejection"]
    assert all(o["sample"]["tokens"]["spans"][0]["grammar"].startswith("root ::= ") for o in outcomes)
    assert "JSON spec" in outcomes[0]["sample"]["messages"][0]["content"]
    with WorldMemory.open(out / "memory.sqlite") as memory:
        remembered = memory.get(valid[0]["world_hash"])
        assert remembered is not None and remembered.is_spec and remembered.name == "library"


# Valid (its checks search once per episode, as its reference play does), but a second search in one episode
# crashes it: a world whose failed plays were masked could crash on the plays it wants left out of its regret.
CRASHES_IN_PLAY = LIBRARY_SOURCE.replace(
    "        self.wanted = rng.choice(titles)\n",
    "        self.wanted = rng.choice(titles)\n        self.searches = 0\n",
).replace(
    "        return [b for b in self.state.books.values() if title.lower()",
    "        self.searches = self.searches + 1\n"
    "        assert self.searches < 2, 'searched twice'\n"
    "        return [b for b in self.state.books.values() if title.lower()",
)


def test_a_valid_world_whose_code_fails_in_a_play_is_scored_invalid_and_not_trained_on(tmp_path: Path) -> None:
    assert CRASHES_IN_PLAY.count("self.searches") == 4
    flags = design_flags(tmp_path, {"crashes.py": CRASHES_IN_PLAY})
    out = tmp_path / "run"
    with mock_model("--script", "random", *flags) as url:  # the agent calls tools with random arguments
        command = design_command(url, out, "designer.documents=1", "agent.plays=3", "designer.smoke_seeds=1")
        completed = subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ})
    assert completed.returncode == 0, completed.stderr[-3000:]
    (outcome,) = [DesignOutcome.model_validate_json(line) for line in (out / "designs.jsonl").read_text().splitlines()]
    assert outcome.verdict is not None and outcome.verdict["valid"]
    assert outcome.verdict["gates"][-2]["detail"].endswith("over 3 seeds")  # every seed a play uses is checked
    assert (
        outcome.broken is not None and outcome.broken.startswith("world_bug: ") and "AssertionError" in outcome.broken
    )
    assert outcome.reward == -1.0 and outcome.regret is None
    (metrics,) = read_metrics(out)
    assert metrics.valid_after_repair == 1 and metrics.broken_in_play == 1 and metrics.rewards == [-1.0]


def test_an_iteration_whose_designer_requests_all_failed_is_not_recorded_and_exits_3(tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = design_command("http://127.0.0.1:9/v1", out, "designer.documents=2", "policy.request_timeout=5")
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ})
    assert completed.returncode == 3, completed.stderr[-2000:]
    told = " ".join(completed.stderr.split())
    assert (
        "2 of 2 designer requests failed for infrastructure reasons (endpoint:connection 2); the iteration is not"
        " recorded" in told
    )
    assert read_metrics(out) == [] and not (out / "designs.jsonl").exists()  # a rerun plays iteration 0 again
    other = [*command, "--set", "agent.plays=3"]
    changed = subprocess.run(other, capture_output=True, text=True, timeout=120, env={**os.environ})
    assert changed.returncode == 2 and "differs in: config.agent.plays" in " ".join(changed.stderr.split())
    patient = [*command, "--set", "policy.request_timeout=9"]  # how the same run is continued after an outage
    assert subprocess.run(patient, capture_output=True, text=True, timeout=120, env={**os.environ}).returncode == 3


@pytest.mark.parametrize(
    "knob",
    ["designer.task_text=derived", "designer.plans=change", "designer.plan_calls=1", "designer.vocabulary=document",
     "designer.tool_text=derived", "designer.key_choices=true"],
)  # fmt: skip
def test_stage_rules_outside_staged_specs_are_refused_before_anything_starts(tmp_path: Path, knob: str) -> None:
    """Derived task or tool text, plan and vocabulary rules hold a spec written in stages: in chat mode they are
    refused, and nothing is written."""
    out = tmp_path / "run"
    command = design_command("http://127.0.0.1:9/v1", out, "designer.format=spec", knob)
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"}
    )
    assert completed.returncode == 2, completed.stderr[-2000:]
    told = " ".join(completed.stderr.split())
    assert "rule a spec written in stages, token by token: set designer.mode=tokens" in told
    assert not out.exists()
