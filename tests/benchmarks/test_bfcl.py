"""BFCL v4 multi-turn through `spadework bench bfcl-v4`: the official data, backends and checker (bfcl-eval).

The self-test policies pin the harness down: replaying the ground truth must pass every entry of every
category, calling nothing must pass none.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.bfcl.data import choose, load_category
from benchmarks.bfcl.episode import MAX_STEPS, BFCLEpisode, TurnView
from benchmarks.bfcl.run import read_outcomes, run_bfcl
from tests.benchmarks import runs
from tests.benchmarks.runs import results


def bench(*arguments: str) -> subprocess.CompletedProcess[str]:
    return runs.bench("bfcl-v4", *arguments)


@pytest.mark.parametrize(("policy", "expected"), [("ground-truth", 1.0), ("none", 0.0)])
def test_self_test_policies_score_all_or_nothing_on_all_800_entries(
    tmp_path: Path, policy: str, expected: float
) -> None:
    completed = bench("--policy", policy, "--out", str(tmp_path))
    assert completed.returncode == 0, completed.stderr[-2000:]
    summary = results(tmp_path)
    assert summary["entries"] == {"base": 200, "miss_func": 200, "miss_param": 200, "long_context": 200}
    assert summary["accuracy"] == dict.fromkeys(summary["entries"], expected) and summary["overall"] == expected
    assert (
        "overall (mean)" in completed.stdout and "Qwen3-4B-Instruct-2507 (FC)" in (tmp_path / "results.md").read_text()
    )
    if policy == "none":
        reasons = {outcome.reason for outcome in read_outcomes(tmp_path)}
        assert reasons and all("empty_turn_model_response" in reason for reason in reasons), reasons


def test_a_run_resumes_and_grows_without_replaying(tmp_path: Path) -> None:
    replay = ("--policy", "ground-truth", "--out", str(tmp_path))
    assert bench(*replay, "--limit", "2", "--categories", "base,miss_func").returncode == 0
    first = [outcome.id for outcome in read_outcomes(tmp_path)]
    assert len(first) == 4
    assert bench(*replay, "--limit", "3").returncode == 0
    ids = [outcome.id for outcome in read_outcomes(tmp_path)]
    assert ids[:4] == first and len(ids) == 12 and len(set(ids)) == 12  # 8 new, none twice
    assert results(tmp_path)["entries"] == {"base": 3, "miss_func": 3, "miss_param": 3, "long_context": 3}
    other = bench("--policy", "none", "--out", str(tmp_path))
    assert other.returncode == 2 and "holds a run with policy='ground-truth'" in other.stderr


def test_bad_categories_and_policies_are_named(tmp_path: Path) -> None:
    unknown = bench("--categories", "base,simple", "--out", str(tmp_path))
    assert unknown.returncode == 2 and "unknown BFCL category simple: choose from base, miss_func" in unknown.stderr
    policy = bench("--policy", "oracle", "--out", str(tmp_path))
    assert policy.returncode == 2 and "unknown policy 'oracle'" in policy.stderr
    empty = bench("--categories", "", "--out", str(tmp_path))  # it played all 800
    assert empty.returncode == 2 and "unknown BFCL category '': choose from" in empty.stderr
    both = bench("--ids", "multi_turn_base_0", "--limit", "2", "--out", str(tmp_path))  # --limit was ignored
    assert both.returncode == 2 and "--ids plays exactly those entries" in both.stderr
    twice = bench("--policy", "ground-truth", "--categories", "base,base", "--limit", "1", "--out", str(tmp_path / "t"))
    assert twice.returncode == 0 and results(tmp_path / "t")["entries"] == {"base": 1}  # played once, not twice


def test_episodes_leave_no_backends_behind_and_a_runaway_turn_is_cut(tmp_path: Path) -> None:
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    run_bfcl(tmp_path, "ground-truth", choose(["base", "long_context"], limit=3))
    assert not [key for key in vars(multi_turn_utils) if key.startswith("spadework_")]

    entry = next(e for e in load_category("base") if "GorillaFileSystem" in e.involved_classes)
    seen: list[TurnView] = []

    def never_done(view: TurnView) -> list[str]:
        seen.append(view)
        return ["ls()"]

    outcome = BFCLEpisode(entry).play(never_done)
    assert outcome.force_quit and not outcome.valid and outcome.reason == "multi_turn:force_terminated"
    # bfcl-eval counts a step after running its calls and quits once the count passes 20: 21 steps ran
    assert len(seen) == MAX_STEPS + 1 and all(view.turn == 0 for view in seen)
    assert seen[-1].messages[-1]["role"] == "user" and "'name': 'ls()'" in seen[-1].messages[-1]["content"]
