"""Per-task agreement with the reference ACEBench pipeline on imperfect play, in the prompt protocol.

One scripted weak agent and plain user (`acebench_imperfect`: each task's first milestone path with one
deterministic mistake, then "done") over real HTTP. `benchmarks/acebench/data/reference_imperfect.json` holds
what the reference pipeline (chenchen0103/ACEBench @ 56dd66c: its `generate.py` pointed at the same script, then
its `eval_main.py`) made of it, recorded by `acebench_reference.py`; `spadework bench acebench --mode prompt`
plays the same script here. Every task's end-state verdict and process accuracy must agree, and every request
(agent prompt or user-simulator chat) must be the same, in order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.acebench.data import load_tasks
from benchmarks.acebench.run import COMPARABILITY, agreement
from engine.store import read_records
from tests.benchmarks import runs
from tests.benchmarks.acebench_imperfect import MISTAKES, ImperfectAce, plan
from tests.benchmarks.acebench_reference import RECORD
from tests.benchmarks.scripted import serving

RECORDED: dict[str, Any] = json.loads(RECORD.read_text("utf-8"))


@pytest.mark.timeout(600)
def test_every_verdict_and_request_agrees_with_the_reference_pipeline(tmp_path: Path) -> None:
    tasks = load_tasks()
    chosen = plan(tasks)
    reference = RECORDED["tasks"]
    # The recording is of this very script: same tasks, same mistakes.
    assert {key: entry["mistake"] for key, entry in reference.items()} == chosen
    assert RECORDED["mistakes"] == list(MISTAKES)
    model = ImperfectAce(tasks, chosen)
    with serving(model.completion) as url:
        arguments = ["--endpoint", url, "--model", "gpt-4o", "--protocol", "prompt", "--ids", ",".join(chosen)]
        completed = runs.bench("acebench", "--no-progress", *arguments, "--out", str(tmp_path), timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    ours: dict[str, tuple[bool, float]] = {}
    for record in read_records(tmp_path):
        assert record.status != "infra_error", record.detail
        card = json.loads(record.scorecard or "{}")
        ours[tasks[record.key.seed].key] = (card["end_state"], round(card["process"], 3))  # the reference's places
    disagreements = [
        f"{key} ({entry['mistake']}): spadework {ours.get(key)}, reference {(entry['end_state'], entry['process'])}"
        for key, entry in reference.items()
        if ours.get(key) != (entry["end_state"], entry["process"])
    ]
    assert not disagreements, f"{len(disagreements)} of {len(reference)} verdicts differ:\n" + "\n".join(disagreements)
    sent: dict[str, list[list[str]]] = {}
    for key, role, digest in model.requests:
        sent.setdefault(key, []).append([role, digest])
    differing = [
        f"{key} ({entry['mistake']}): {len(sent.get(key, []))} requests here, {len(entry['requests'])} there; first "
        f"differs at {first_difference(sent.get(key, []), entry['requests'])}"
        for key, entry in reference.items()
        if sent.get(key) != entry["requests"]
    ]
    assert not differing, f"requests differ for {len(differing)} tasks:\n" + "\n".join(differing)
    # What results files quote as this protocol's agreement is what was just measured.
    written = runs.results(tmp_path)
    assert written["comparability"] == COMPARABILITY["prompt"] and written["agreement"] == agreement("prompt")
    recorded = agreement("prompt")
    assert recorded is not None
    measured = (len(reference), len(reference), len(MISTAKES), len(model.requests), len(model.requests))
    assert (recorded["tasks"], recorded["agreed"], recorded["mistakes"], recorded["requests"],
            recorded["identical_requests"]) == measured  # fmt: skip
    # The mistakes are real: tasks pass and fail, and both kinds and languages are played.
    passed = sum(entry["end_state"] for entry in reference.values())
    assert 0 < passed < len(reference)
    assert {key.rsplit("_", 1)[0] for key in reference} == {
        f"{language}/agent_multi_{kind}" for language in ("en", "zh") for kind in ("turn", "step")
    }


def first_difference(ours: list[list[str]], theirs: list[list[str]]) -> int:
    return next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), min(len(ours), len(theirs)))
