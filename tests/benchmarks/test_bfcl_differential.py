"""Per-entry agreement with bfcl-eval's own pipeline on imperfect play.

One scripted weak model (`bfcl_imperfect`: the ground truth with one deterministic mistake per entry) over
real HTTP; `spadework bench bfcl-v4 --mode chat` and bfcl-eval's `generate` + `evaluate` (its OpenAI FC
handler, `bfcl_official`) both play it; every entry's verdict must agree. Entries of all four categories,
each mistake on at least one entry of each category it applies to.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bfcl.data import CATEGORIES
from benchmarks.bfcl.play import all_entries
from benchmarks.bfcl.run import agreement
from engine.store import read_records
from tests.benchmarks import runs
from tests.benchmarks.bfcl_imperfect import MISTAKES, ImperfectModel, serving

ROOT = Path(__file__).resolve().parents[2]


def plan() -> dict[str, str]:
    """Entry id -> mistake: per category, one entry per mistake (held_out_early only where functions are
    held out), entries chosen in data order among those whose first message is unique in the plan."""
    entries = all_entries()
    chosen: dict[str, str] = {}
    seen: set[str] = set()
    for category in CATEGORIES:
        pool = iter(entry for entry in entries if entry.category == category)
        for mistake in MISTAKES:
            if mistake == "held_out_early" and category != "miss_func":
                continue
            entry = next(entry for entry in pool if entry.turns[0][-1]["content"] not in seen)
            seen.add(entry.turns[0][-1]["content"])
            chosen[entry.id] = mistake
    return chosen


def spadework_verdicts(url: str, ids: list[str], out: Path) -> dict[str, bool]:
    completed = runs.bench("bfcl-v4", "--no-progress", "--endpoint", url, "--mode", "chat", "--ids", ",".join(ids),
                           "--out", str(out), "--concurrency", "8", timeout=600)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    entries = all_entries()
    records = {entries[record.key.seed].id: record for record in read_records(out)}
    assert all(record.status != "infra_error" for record in records.values()), "an entry failed for infrastructure"
    return {entry: records[entry].reward == 1.0 for entry in ids}


def official_verdicts(url: str, ids: list[str], root: Path) -> dict[str, bool]:
    completed = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bfcl_official", "--url", url, "--root", str(root), "--ids",
         ",".join(ids)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    verdicts: dict[str, bool] = json.loads(completed.stdout)
    return verdicts


@pytest.mark.timeout(900)
def test_every_verdict_agrees_with_bfcl_evals_own_pipeline(tmp_path: Path) -> None:
    chosen = plan()
    ids = list(chosen)
    with serving(ImperfectModel(list(all_entries()), chosen)) as url:
        ours = spadework_verdicts(url, ids, tmp_path / "spadework")
        theirs = official_verdicts(url, ids, tmp_path / "official")
    word = {True: "PASS", False: "FAIL"}
    disagreements = [f"{entry} ({chosen[entry]}): spadework {word[ours[entry]]}, bfcl-eval {word[theirs[entry]]}"
                     for entry in ids if ours[entry] != theirs[entry]]  # fmt: skip
    assert not disagreements, f"{len(disagreements)} of {len(ids)} verdicts differ:\n" + "\n".join(disagreements)
    # The mistakes are real: some entries pass and some fail, in both pipelines.
    assert 0 < sum(theirs.values()) < len(ids)
    # What results files quote as this mode's agreement is what was just measured, for the installed bfcl-eval.
    recorded = agreement("chat")
    assert recorded is not None
    assert (recorded["entries"], recorded["agreed"], recorded["mistakes"]) == (len(ids), len(ids), len(MISTAKES))
    assert f"bfcl-eval {importlib.metadata.version('bfcl-eval')}:" in str(recorded["against"])


def test_results_files_say_which_bfcl_eval_and_how_comparable_the_mode_is(tmp_path: Path) -> None:
    chosen = dict(itertools.islice(plan().items(), 4))
    with serving(ImperfectModel(list(all_entries()), chosen)) as url:
        spadework_verdicts(url, list(chosen), tmp_path)
    written = runs.results(tmp_path)
    assert written["bfcl_eval"] == importlib.metadata.version("bfcl-eval")
    assert "OpenAICompletionsHandler" in written["comparability"]
    assert written["agreement"] == agreement("chat")
