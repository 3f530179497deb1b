"""Per-task agreement with the official tau2 pipeline on imperfect play, in airline and retail.

One scripted weak agent, plain user and rule-bound judge (`tau2_imperfect`: each task's gold actions with one
deterministic mistake of the agent's or the user's) over real HTTP. `benchmarks/tau2/data/reference_imperfect.json`
holds what the official pipeline (sierra-research/tau2-bench @ a2c0247, `tau2 run` pointed at the same script)
made of it, recorded by `tau2_reference.py`; `spadework bench tau2` plays the same script here with the same
step limit. Every task's termination and reward must agree, and every request (agent, user simulator, judge)
must be the same, in order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.tau2.data import DOMAINS, load_domain
from benchmarks.tau2.run import COMPARABILITY, agreement
from engine.store import read_records
from tests.benchmarks import runs
from tests.benchmarks.scripted import serving
from tests.benchmarks.tau2_imperfect import ImperfectTau2, mistakes_of
from tests.benchmarks.tau2_reference import RECORD, chosen_tasks

RECORDED: dict[str, Any] = json.loads(RECORD.read_text("utf-8"))
# spadework's names for how a simulation ended where the official's differ: an empty agent message or a call whose
# arguments are not JSON fails the official simulation as an infrastructure error (its message check, its
# client's decoding raise), as does an empty user message (here: a bad answer from the user's endpoint)
OFFICIAL_ENDING = {"empty_agent_message": "infrastructure_error", "agent_call_not_json": "infrastructure_error",
                   "endpoint:bad_response": "infrastructure_error"}  # fmt: skip


@pytest.mark.timeout(600)
@pytest.mark.parametrize("domain", DOMAINS)
def test_every_reward_and_request_agrees_with_the_official_pipeline(domain: str, tmp_path: Path) -> None:
    data = load_domain(domain)  # type: ignore[arg-type]
    chosen = chosen_tasks(data.name)
    reference = RECORDED["domains"][domain]
    # The recording is of this very script: same tasks, same mistakes, same limit.
    assert {task: entry["mistake"] for task, entry in reference.items()} == chosen
    assert RECORDED["mistakes"][domain] == list(mistakes_of(data))
    model = ImperfectTau2(data, chosen)
    with serving(model.completion) as url:
        arguments = ["--domain", domain, "--endpoint", url, "--model", "imperfect", "--ids", ",".join(chosen),
                     "--max-steps", str(RECORDED["max_steps"]), "--concurrency", "4"]  # fmt: skip
        completed = runs.bench("tau2", "--no-progress", *arguments, "--out", str(tmp_path), timeout=600)
    ours: dict[str, tuple[str, float | None]] = {}
    for record in read_records(tmp_path):
        card = json.loads(record.scorecard or "{}")
        ending = card.get("termination") or OFFICIAL_ENDING.get(record.cause or "", record.cause)
        ours[data.tasks[record.key.seed].id] = (ending, None if record.status == "infra_error" else record.reward)
    disagreements = [
        f"{task} ({entry['mistake']}): spadework {ours.get(task)}, official {(entry['termination'], entry['reward'])}"
        for task, entry in reference.items()
        if ours.get(task) != (entry["termination"], entry["reward"])
    ]
    assert not disagreements, f"{len(disagreements)} of {len(reference)} differ:\n" + "\n".join(disagreements)
    sent: dict[str, list[list[str]]] = {}
    for task, role, digest in model.requests:
        sent.setdefault(task, []).append([role, digest])
    differing = [
        f"{task} ({entry['mistake']}): {len(sent.get(task, []))} requests here, {len(entry['requests'])} there"
        for task, entry in reference.items()
        if sent.get(task) != entry["requests"]
    ]
    assert not differing, f"requests differ for {len(differing)} tasks:\n" + "\n".join(differing)
    # The infrastructure failures are the expected ones, so the run exits non-zero only for them.
    assert completed.returncode in (0, 1), completed.stderr[-3000:]
    written = runs.results(tmp_path)
    assert written["comparability"] == COMPARABILITY and written["agreement"] == agreement()
    recorded = agreement()
    assert recorded is not None
    entry = recorded["domains"][domain]  # type: ignore[index]
    assert (entry["tasks"], entry["agreed"], entry["requests"]) == (len(reference), len(reference),
                                                                     len(model.requests))  # fmt: skip
    # The mistakes bite: rewards of 1 and 0, and every way a simulation ends.
    rewards = {entry["reward"] for entry in reference.values()}
    assert {0.0, 1.0} <= rewards
    assert {entry["termination"] for entry in reference.values()} >= {"user_stop", "max_steps", "too_many_errors"}
